/* SPDX-License-Identifier: Apache-2.0 */
/* Proxmox VE: the cloud-init NoCloud drive Proxmox attaches (label cidata): meta-data (instance-id),
 * user-data (#cloud-config hostname/fqdn) and network-config (v1 or v2 static addresses). There is
 * no metadata service. providerID: proxmox://<uuid>, the VM's SMBIOS UUID from DMI (which Proxmox
 * sets from the VM config's smbios1), which lib/provider/provider-proxmox.c resolves; none without
 * it. */
#include <ctype.h>

#include "metadata-source.h"
#include "string-util.h"

static const CnMetadataKey proxmoxve_drive_keys[] = {
        { "meta-data" },
        { "user-data", CN_METADATA_KEY_OPTIONAL | CN_METADATA_KEY_DOCUMENT },
        { "network-config", CN_METADATA_KEY_OPTIONAL | CN_METADATA_KEY_DOCUMENT },
        {},
};

static const CnMetadataKey proxmoxve_host_keys[] = {
        /* Readable by root only: cloudnode-initializer (DynamicUser=) gets it from its unit's
         * LoadCredential=, with the null UUID where the host has none. */
        { "sys/class/dmi/id/product_uuid", CN_METADATA_KEY_OPTIONAL, .credential = "product_uuid" },
        {},
};

static int add_address(CnInstanceMetadata *m, const char *a) {
        int r;

        if (!a)
                return 0;
        r = cn_metadata_add_address(&m->ipv4_private, a, AF_INET);
        if (r == 0)
                r = cn_metadata_add_address(&m->ipv6, a, AF_INET6);
        return r < 0 ? r : 0;
}

static const char *string_of(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                ? json_object_get_string(v)
                : NULL;
}

/* v1: config[].subnets[].address; v2: ethernets.<name>.addresses[] */
static int add_network_config(CnInstanceMetadata *m, json_object *nc) {
        json_object *config, *ethernets;
        int r;

        if (json_object_object_get_ex(nc, "config", &config) && json_object_is_type(config, json_type_array))
                for (size_t i = 0; i < json_object_array_length(config); i++) {
                        json_object *subnets;

                        if (!json_object_object_get_ex(json_object_array_get_idx(config, i), "subnets", &subnets) ||
                            !json_object_is_type(subnets, json_type_array))
                                continue;
                        for (size_t j = 0; j < json_object_array_length(subnets); j++)
                                if ((r = add_address(m, string_of(json_object_array_get_idx(subnets, j), "address"))) < 0)
                                        return r;
                }
        if (json_object_object_get_ex(nc, "ethernets", &ethernets) && json_object_is_type(ethernets, json_type_object)) {
                json_object_object_foreach(ethernets, name, eth) {
                        json_object *addrs;

                        (void) name;
                        if (!json_object_object_get_ex(eth, "addresses", &addrs) ||
                            !json_object_is_type(addrs, json_type_array))
                                continue;
                        for (size_t j = 0; j < json_object_array_length(addrs); j++) {
                                json_object *a = json_object_array_get_idx(addrs, j);
                                if (json_object_is_type(a, json_type_string) &&
                                    (r = add_address(m, json_object_get_string(a))) < 0)
                                        return r;
                        }
                }
        }
        return 0;
}

static int proxmoxve_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *meta = NULL, *user = NULL, *nc = NULL;
        _cleanup_free_ char *uuid = NULL;
        const char *ud;
        int r;

        r = cn_metadata_docs_get_yaml(d, "meta-data", &meta);
        if (r < 0)
                return r;
        if (!json_object_is_type(meta, json_type_object))
                return -EBADMSG;
        if ((r = cn_metadata_json_string(meta, "instance-id", &m->instance_id)) < 0 ||
            (r = cn_metadata_json_string(meta, "local-hostname", &m->hostname)) < 0)
                return r;
        /* user-data is the user's, not metadata: when it is not a #cloud-config mapping (a script,
         * or broken YAML) it simply has no hostname for us. */
        ud = cn_metadata_docs_get(d, "user-data", NULL);
        if (ud && strneq(ud, "#cloud-config", STRLEN("#cloud-config")) &&
            cn_metadata_docs_get_yaml(d, "user-data", &user) >= 0 && json_object_is_type(user, json_type_object) &&
            !m->hostname) {
                if ((r = cn_metadata_json_string(user, "fqdn", &m->hostname)) < 0 ||
                    (!m->hostname && (r = cn_metadata_json_string(user, "hostname", &m->hostname)) < 0))
                        return r;
        }
        r = cn_metadata_docs_get_yaml(d, "network-config", &nc);
        if (r < 0)
                return r;
        if (nc && (r = add_network_config(m, nc)) < 0)
                return r;
        r = cn_metadata_docs_get_text(d, "sys/class/dmi/id/product_uuid", &uuid);
        if (r < 0)
                return r;
        if (!m->instance_id)
                return -EBADMSG;
        for (char *p = uuid; p && *p; p++)
                *p = (char) tolower((unsigned char) *p);
        /* Only the SMBIOS UUID names the VM to the Proxmox VE API (its config's smbios1); the
         * drive's instance-id is a hash of the cloud-init settings that no API call finds. Without
         * a UUID the providerID is left to the cluster-mode provider (proxmox://REGION/VMID). */
        if (uuid && cn_is_uuid(uuid) && !streq(uuid, "00000000-0000-0000-0000-000000000000") &&
            asprintf(&m->provider_id, "proxmox://%s", uuid) < 0)
                return -ENOMEM;
        return 0;
}

const CnMetadataSource cn_metadata_source_proxmoxve = {
        .platform = "proxmoxve",
        .drive = "/run/cloudnode/cidata",
        .drive_keys = proxmoxve_drive_keys,
        .host_keys = proxmoxve_host_keys,
        .parse = proxmoxve_parse,
};
