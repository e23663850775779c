/* SPDX-License-Identifier: Apache-2.0 */
/* Platform "file": a local YAML or JSON document with the metadata, for bare metal and for clouds
 * without a source of their own (default /etc/cloudnode/metadata.yaml, node config
 * metadata.file). Its keys are those `cloudnode-agent metadata --format json` prints, so that output
 * can be saved and used as the document:
 *   instanceID: node-17          # required
 *   providerID: baremetal://node-17
 *   instanceType: r640
 *   region: dc1
 *   zone: dc1-row3
 *   hostname: node-17.example.net
 *   ipv4Private: [10.0.0.17]     # a list, or one string
 *   ipv4Public: 192.0.2.17
 *   ipv6: [2001:db8::17]
 *   labels: {example.com/rack: r3}
 * Unlike a cloud's documents, this one is written by the user, so mistakes (an unknown key, a
 * value that is not an address) are errors rather than ignored. */
#include "log.h"
#include "metadata-source.h"
#include "string-util.h"

static int add_one(CnMetadataDocs *d, char ***l, json_object *a, int family) {
        int r;

        if (!json_object_is_type(a, json_type_string))
                return cn_metadata_docs_error(d, "addresses must be strings");
        r = cn_metadata_add_address(l, json_object_get_string(a), family);
        if (r == 0)
                return cn_metadata_docs_error(d, "'%s' is not an IPv%c address", json_object_get_string(a),
                                              family == AF_INET ? '4' : '6');
        return r < 0 ? r : 0;
}

static int add_list(CnMetadataDocs *d, char ***l, json_object *v, int family) {
        int r;

        if (!json_object_is_type(v, json_type_array))
                return add_one(d, l, v, family);
        for (size_t i = 0; i < json_object_array_length(v); i++)
                if ((r = add_one(d, l, json_object_array_get_idx(v, i), family)) < 0)
                        return r;
        return 0;
}

static int file_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *doc = NULL;
        int r;

        if (d->n != 1)
                return -EBADMSG;
        r = cn_metadata_docs_get_yaml(d, d->docs[0].path, &doc);
        if (r < 0)
                return r;
        if (!json_object_is_type(doc, json_type_object))
                return cn_metadata_docs_error(d, "the metadata file must be a mapping");
        json_object_object_foreach(doc, key, v) {
                if (streq(key, "platform"))
                        continue; /* what `metadata --format json` printed; this platform is "file" */
                if (streq(key, "instanceID"))
                        r = cn_metadata_json_string(doc, key, &m->instance_id);
                else if (streq(key, "providerID"))
                        r = cn_metadata_json_string(doc, key, &m->provider_id);
                else if (streq(key, "instanceType"))
                        r = cn_metadata_json_string(doc, key, &m->instance_type);
                else if (streq(key, "region"))
                        r = cn_metadata_json_string(doc, key, &m->region);
                else if (streq(key, "zone"))
                        r = cn_metadata_json_string(doc, key, &m->zone);
                else if (streq(key, "hostname"))
                        r = cn_metadata_json_string(doc, key, &m->hostname);
                else if (streq(key, "ipv4Private"))
                        r = add_list(d, &m->ipv4_private, v, AF_INET);
                else if (streq(key, "ipv4Public"))
                        r = add_list(d, &m->ipv4_public, v, AF_INET);
                else if (streq(key, "ipv6"))
                        r = add_list(d, &m->ipv6, v, AF_INET6);
                else if (streq(key, "labels")) {
                        if (!json_object_is_type(v, json_type_object))
                                return cn_metadata_docs_error(d, "'labels' must be a mapping");
                        json_object_object_foreach(v, lk, lv) {
                                if (!json_object_is_type(lv, json_type_string))
                                        return cn_metadata_docs_error(d, "label '%s' must be a string", lk);
                                /* An empty label value is valid Kubernetes syntax, so keep it. */
                                _cleanup_free_ char *kv = NULL;
                                if (asprintf(&kv, "%s=%s", lk, json_object_get_string(lv)) < 0 ||
                                    strv_extend(&m->extra_labels, kv) < 0)
                                        return -ENOMEM;
                        }
                        r = 0;
                } else
                        return cn_metadata_docs_error(d, "unknown key '%s' in the metadata file", key);
                if (r < 0)
                        return r;
        }
        return 0;
}

const CnMetadataSource cn_metadata_source_file = {
        .platform = "file",
        .file = "/etc/cloudnode/metadata.yaml",
        .parse = file_parse,
};
