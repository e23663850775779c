/* SPDX-License-Identifier: Apache-2.0 */
/* DigitalOcean droplet metadata: the whole document at /metadata/v1.json. providerID as the
 * DigitalOcean cloud-controller-manager writes it: digitalocean://<droplet id>. The droplet size
 * is not part of the metadata, so the instance type stays unset. */
#include "metadata-source.h"

static const CnMetadataKey digitalocean_keys[] = {
        { "metadata/v1.json", CN_METADATA_KEY_DOCUMENT },
        {},
};

static int add_addresses(char ***l, json_object *ifaces, const char *family_key, int family) {
        int r;

        if (!json_object_is_type(ifaces, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(ifaces); i++) {
                json_object *fam, *addr;

                if (json_object_object_get_ex(json_object_array_get_idx(ifaces, i), family_key, &fam) &&
                    json_object_object_get_ex(fam, "ip_address", &addr) &&
                    (r = cn_metadata_add_address(l, json_object_get_string(addr), family)) < 0)
                        return r;
        }
        return 0;
}

static int digitalocean_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *doc = NULL;
        json_object *ifaces, *priv = NULL, *pub = NULL;
        int r;

        r = cn_metadata_docs_get_json(d, "metadata/v1.json", &doc);
        if (r < 0)
                return r;
        if (!json_object_is_type(doc, json_type_object))
                return -EBADMSG;
        if ((r = cn_metadata_json_string(doc, "droplet_id", &m->instance_id)) < 0 ||
            (r = cn_metadata_json_string(doc, "hostname", &m->hostname)) < 0 ||
            (r = cn_metadata_json_string(doc, "region", &m->region)) < 0)
                return r;
        if (!m->instance_id)
                return -EBADMSG;
        if (asprintf(&m->provider_id, "digitalocean://%s", m->instance_id) < 0)
                return -ENOMEM;
        if (json_object_object_get_ex(doc, "interfaces", &ifaces)) {
                (void) json_object_object_get_ex(ifaces, "private", &priv);
                (void) json_object_object_get_ex(ifaces, "public", &pub);
        }
        if ((r = add_addresses(&m->ipv4_private, priv, "ipv4", AF_INET)) < 0 ||
            (r = add_addresses(&m->ipv4_public, pub, "ipv4", AF_INET)) < 0 ||
            (r = add_addresses(&m->ipv6, pub, "ipv6", AF_INET6)) < 0)
                return r;
        return 0;
}

const CnMetadataSource cn_metadata_source_digitalocean = {
        .platform = "digitalocean",
        .endpoint = "http://169.254.169.254",
        .keys = digitalocean_keys,
        .parse = digitalocean_parse,
};
