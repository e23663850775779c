/* SPDX-License-Identifier: Apache-2.0 */
/* Label validation as Kubernetes does it, so that the API server never rejects a patch we built. */
#include <ctype.h>

#include "labels.h"
#include "log.h"

#define LABEL_NAME_MAX 63U
#define LABEL_PREFIX_MAX 253U

static bool is_alnum(char c) {
        return isascii((unsigned char) c) && isalnum((unsigned char) c);
}

/* The name part of a key and every value share this syntax. */
static bool qualified_name_part_is_valid(const char *s, size_t len) {
        if (len == 0 || len > LABEL_NAME_MAX)
                return false;
        if (!is_alnum(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_alnum(s[i]) && !strchr("-_.", s[i]))
                        return false;
        return true;
}

/* DNS-1123 subdomain: lower-case labels of [a-z0-9-] separated by dots, each starting and ending
 * alphanumeric. */
static bool dns_subdomain_is_valid(const char *s, size_t len) {
        size_t label = 0;

        if (len == 0 || len > LABEL_PREFIX_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];

                if (c == '.') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
                if (label == 0 && c == '-')
                        return false;
                label++;
        }
        return label > 0 && s[len - 1] != '-';
}

bool cn_node_name_is_valid(const char *name) {
        return name && dns_subdomain_is_valid(name, strlen(name));
}

bool cn_label_key_is_valid(const char *key) {
        const char *slash;

        if (!key)
                return false;
        slash = strchr(key, '/');
        if (!slash)
                return qualified_name_part_is_valid(key, strlen(key));
        if (!dns_subdomain_is_valid(key, slash - key))
                return false;
        return qualified_name_part_is_valid(slash + 1, strlen(slash + 1));
}

bool cn_label_value_is_valid(const char *value) {
        if (!value)
                return false;
        if (value[0] == 0)
                return true;
        return qualified_name_part_is_valid(value, strlen(value));
}

static bool domain_is_or_under(const char *prefix, size_t len, const char *domain) {
        size_t dl = strlen(domain);

        if (len == dl && strneq(prefix, domain, len))
                return true;
        return len > dl && prefix[len - dl - 1] == '.' && strneq(prefix + len - dl, domain, dl);
}

bool cn_label_key_is_reserved(const char *key) {
        const char *slash;

        if (!key)
                return false;
        slash = strchr(key, '/');
        if (!slash)
                return false;
        return domain_is_or_under(key, slash - key, "kubernetes.io") ||
               domain_is_or_under(key, slash - key, "k8s.io");
}

int cn_label_parse(const char *kv, char **ret_key, char **ret_value) {
        _cleanup_free_ char *k = NULL, *v = NULL;
        const char *eq;

        assert(kv);
        eq = strchr(kv, '=');
        if (!eq)
                return -EINVAL;
        k = strndup(kv, eq - kv);
        v = strdup(eq + 1);
        if (!k || !v)
                return -ENOMEM;
        if (!cn_label_key_is_valid(k) || !cn_label_value_is_valid(v))
                return -EINVAL;
        if (ret_key)
                *ret_key = TAKE_PTR(k);
        if (ret_value)
                *ret_value = TAKE_PTR(v);
        return 0;
}

int cn_labels_add_extra(json_object *out, json_object *existing, char *const *extra) {
        int added = 0, r;

        assert(out);
        for (char *const *i = extra; i && *i; i++) {
                _cleanup_free_ char *k = NULL, *v = NULL;
                json_object *cur = NULL;
                bool skip;

                r = cn_label_parse(*i, &k, &v);
                if (r == -ENOMEM)
                        return r;
                skip = r < 0 || cn_label_key_is_reserved(k) ||
                       (existing && json_object_object_get_ex(existing, k, &cur)) ||
                       json_object_object_get_ex(out, k, NULL);
                if (skip) {
                        log_debug("Not adding provider label '%s': invalid, reserved or already set.", k ?: *i);
                        continue;
                }
                r = json_object_object_add(out, k, json_object_new_string(v));
                if (r < 0)
                        return -ENOMEM;
                added++;
        }
        return added;
}
