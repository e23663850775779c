/* SPDX-License-Identifier: Apache-2.0 */
/* The common instance-metadata struct: construction, validation of what a source returned, JSON
 * view. The fetch machinery is in metadata-fetch.c, the platform sources in metadata-<id>.c. */
#include <arpa/inet.h>

#include "labels.h"
#include "metadata.h"
#include "string-util.h"

const char *const cn_metadata_platforms[] = {
        "aws", "azure", "digitalocean", "file", "gcp", "hetzner", "openstack", "proxmoxve", NULL,
};

bool cn_metadata_platform_supported(const char *platform) {
        if (!platform)
                return false;
        for (const char *const *p = cn_metadata_platforms; *p; p++)
                if (streq(*p, platform))
                        return true;
        return false;
}

CnInstanceMetadata *cn_instance_metadata_new(const char *platform) {
        CnInstanceMetadata *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        if (platform && !(m->platform = strdup(platform))) {
                free(m);
                return NULL;
        }
        return m;
}

void cn_instance_metadata_free(CnInstanceMetadata *m) {
        if (!m)
                return;
        free(m->platform);
        free(m->instance_id);
        free(m->provider_id);
        free(m->instance_type);
        free(m->region);
        free(m->zone);
        free(m->hostname);
        strv_free(m->ipv4_private);
        strv_free(m->ipv4_public);
        strv_free(m->ipv6);
        strv_free(m->extra_labels);
        free(m);
}

/* Valid UTF-8 without control characters (C0, DEL, C1): such a value can be carried by every output
 * format after quoting, and cannot break a line-oriented one. */
static bool value_is_safe(const char *s, size_t max) {
        size_t n = strlen(s);

        if (n > max || !cn_utf8_is_valid(s, n) || cn_string_has_cc(s, false))
                return false;
        /* C1 controls U+0080..U+009F are encoded as C2 80..C2 9F in (valid) UTF-8. */
        for (const char *p = s; (p = strchr(p, '\xc2')); p++)
                if ((unsigned char) p[1] >= 0x80 && (unsigned char) p[1] <= 0x9f)
                        return false;
        return true;
}

static bool address_is_valid(const char *s, int family) {
        unsigned char buf[sizeof(struct in6_addr)];

        return inet_pton(family, s, buf) == 1;
}

static bool label_is_valid(const char *kv) {
        _cleanup_free_ char *k = NULL, *v = NULL;

        return cn_label_parse(kv, &k, &v) >= 0;
}

int cn_instance_metadata_validate(const CnInstanceMetadata *m, const char **ret_field) {
        const struct {
                const char *name, *value;
        } scalars[] = {
                { "platform", m->platform },       { "instance-id", m->instance_id },
                { "provider-id", m->provider_id }, { "instance-type", m->instance_type },
                { "region", m->region },           { "zone", m->zone },
                { "hostname", m->hostname },
        };
        const struct {
                const char *name;
                char **list;
                int family;
        } lists[] = {
                { "ipv4-private", m->ipv4_private, AF_INET },
                { "ipv4-public", m->ipv4_public, AF_INET },
                { "ipv6", m->ipv6, AF_INET6 },
        };
        const char *bad = NULL;

        for (size_t i = 0; i < ELEMENTSOF(scalars) && !bad; i++)
                if (scalars[i].value && !value_is_safe(scalars[i].value, 1024))
                        bad = scalars[i].name;
        for (size_t i = 0; i < ELEMENTSOF(lists) && !bad; i++)
                for (char **a = lists[i].list; a && *a && !bad; a++)
                        if (!address_is_valid(*a, lists[i].family))
                                bad = lists[i].name;
        for (char **l = m->extra_labels; l && *l && !bad; l++)
                if (!label_is_valid(*l))
                        bad = "labels";
        if (!bad && (!m->platform || !m->instance_id))
                bad = m->platform ? "instance-id" : "platform";
        if (bad) {
                if (ret_field)
                        *ret_field = bad;
                return -EBADMSG;
        }
        return 0;
}

static int json_add_string(json_object *o, const char *key, const char *value) {
        json_object *v;

        if (!value)
                return 0;
        v = json_object_new_string(value);
        if (!v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static int json_add_strv(json_object *o, const char *key, char **l) {
        _cleanup_json_ json_object *a = json_object_new_array();

        if (!a)
                return -ENOMEM;
        for (char **i = l; i && *i; i++) {
                json_object *s = json_object_new_string(*i);
                if (!s || json_object_array_add(a, s) < 0) {
                        json_object_put(s);
                        return -ENOMEM;
                }
        }
        if (json_object_object_add(o, key, a) < 0)
                return -ENOMEM;
        TAKE_PTR(a);
        return 0;
}

int cn_instance_metadata_to_json(const CnInstanceMetadata *m, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object(), *labels = json_object_new_object();
        int r;

        if (!o || !labels)
                return -ENOMEM;
        if ((r = json_add_string(o, "platform", m->platform)) < 0 ||
            (r = json_add_string(o, "instanceID", m->instance_id)) < 0 ||
            (r = json_add_string(o, "providerID", m->provider_id)) < 0 ||
            (r = json_add_string(o, "instanceType", m->instance_type)) < 0 ||
            (r = json_add_string(o, "region", m->region)) < 0 ||
            (r = json_add_string(o, "zone", m->zone)) < 0 ||
            (r = json_add_string(o, "hostname", m->hostname)) < 0 ||
            (r = json_add_strv(o, "ipv4Private", m->ipv4_private)) < 0 ||
            (r = json_add_strv(o, "ipv4Public", m->ipv4_public)) < 0 ||
            (r = json_add_strv(o, "ipv6", m->ipv6)) < 0)
                return r;
        for (char **l = m->extra_labels; l && *l; l++) {
                _cleanup_free_ char *k = strdup(*l);
                char *eq = k ? strchr(k, '=') : NULL;

                if (!k)
                        return -ENOMEM;
                if (!eq)
                        continue;
                *eq = 0;
                if ((r = json_add_string(labels, k, eq + 1)) < 0)
                        return r;
        }
        if (json_object_object_add(o, "labels", labels) < 0)
                return -ENOMEM;
        TAKE_PTR(labels);
        *ret = TAKE_PTR(o);
        return 0;
}
