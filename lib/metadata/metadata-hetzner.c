/* SPDX-License-Identifier: Apache-2.0 */
/* Hetzner Cloud metadata service: YAML documents (read with libyaml through yaml-util). providerID
 * as hcloud-cloud-controller-manager writes it: hcloud://<server id>. Like that controller, the
 * region is the location ("hel1") and the zone the datacenter ("hel1-dc2"); the metadata's
 * "region" is the network zone ("eu-central") and becomes a label. Private-network addresses come
 * from the private-networks document; the public IPv6 from the network config. */
#include "metadata-source.h"

static const CnMetadataKey hetzner_keys[] = {
        { "hetzner/v1/metadata", CN_METADATA_KEY_DOCUMENT },
        { "hetzner/v1/metadata/private-networks", CN_METADATA_KEY_OPTIONAL | CN_METADATA_KEY_DOCUMENT },
        {},
};

/* network-config v1: config[].subnets[] of type static with ipv6: true (or an IPv6 address). */
static int add_ipv6_from_network_config(CnInstanceMetadata *m, json_object *nc) {
        json_object *config;
        int r;

        if (!json_object_object_get_ex(nc, "config", &config) || !json_object_is_type(config, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(config); i++) {
                json_object *subnets;

                if (!json_object_object_get_ex(json_object_array_get_idx(config, i), "subnets", &subnets) ||
                    !json_object_is_type(subnets, json_type_array))
                        continue;
                for (size_t j = 0; j < json_object_array_length(subnets); j++) {
                        json_object *addr;

                        if (json_object_object_get_ex(json_object_array_get_idx(subnets, j), "address", &addr) &&
                            json_object_is_type(addr, json_type_string) &&
                            (r = cn_metadata_add_address(&m->ipv6, json_object_get_string(addr), AF_INET6)) < 0)
                                return r;
                }
        }
        return 0;
}

static int hetzner_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *meta = NULL, *networks = NULL;
        _cleanup_free_ char *public4 = NULL, *local4 = NULL, *network_zone = NULL;
        json_object *nc;
        int r;

        r = cn_metadata_docs_get_yaml(d, "hetzner/v1/metadata", &meta);
        if (r < 0)
                return r;
        if (!json_object_is_type(meta, json_type_object))
                return -EBADMSG;
        r = cn_metadata_docs_get_yaml(d, "hetzner/v1/metadata/private-networks", &networks);
        if (r < 0)
                return r;
        if ((r = cn_metadata_json_string(meta, "instance-id", &m->instance_id)) < 0 ||
            (r = cn_metadata_json_string(meta, "hostname", &m->hostname)) < 0 ||
            (r = cn_metadata_json_string(meta, "availability-zone", &m->zone)) < 0 ||
            (r = cn_metadata_json_string(meta, "region", &network_zone)) < 0 ||
            (r = cn_metadata_json_string(meta, "public-ipv4", &public4)) < 0 ||
            (r = cn_metadata_json_string(meta, "local-ipv4", &local4)) < 0)
                return r;
        if (m->zone) {
                const char *dash = strchr(m->zone, '-');
                if (dash && dash > m->zone && !(m->region = strndup(m->zone, dash - m->zone)))
                        return -ENOMEM;
        }
        if (!m->instance_id)
                return -EBADMSG;
        if (asprintf(&m->provider_id, "hcloud://%s", m->instance_id) < 0)
                return -ENOMEM;
        if ((r = cn_metadata_add_address(&m->ipv4_private, local4, AF_INET)) < 0)
                return r;
        if (json_object_is_type(networks, json_type_array))
                for (size_t i = 0; i < json_object_array_length(networks); i++) {
                        json_object *ip;

                        if (json_object_object_get_ex(json_object_array_get_idx(networks, i), "ip", &ip) &&
                            json_object_is_type(ip, json_type_string) &&
                            (r = cn_metadata_add_address(&m->ipv4_private, json_object_get_string(ip), AF_INET)) < 0)
                                return r;
                }
        if ((r = cn_metadata_add_address(&m->ipv4_public, public4, AF_INET)) < 0)
                return r;
        if (json_object_object_get_ex(meta, "network-config", &nc) && (r = add_ipv6_from_network_config(m, nc)) < 0)
                return r;
        if ((r = cn_metadata_add_label(&m->extra_labels, CN_LABEL_HCLOUD_NETWORK_ZONE, network_zone)) < 0)
                return r;
        return 0;
}

const CnMetadataSource cn_metadata_source_hetzner = {
        .platform = "hetzner",
        .endpoint = "http://169.254.169.254",
        .keys = hetzner_keys,
        .parse = hetzner_parse,
};
