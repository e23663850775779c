/* SPDX-License-Identifier: Apache-2.0 */
/* cloud.conf reader; see cloud-config.h. */
#include <ctype.h>
#include <fcntl.h>
#include <strings.h>

#include "cloud-config.h"
#include "string-util.h"

static int fail(unsigned line, const char *what, char **ret_error) {
        if (ret_error && asprintf(ret_error, "line %u: %s", line, what) < 0)
                *ret_error = NULL;
        return -EBADMSG;
}

/* Unquotes in place; returns false on a bad escape or a missing closing quote. Unquoted values
 * end at a comment character preceded by whitespace. */
static bool parse_value(char *v) {
        char *w = v;

        if (*v != '"') {
                for (char *p = v; *p; p++)
                        if ((*p == '#' || *p == ';') && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
                                *p = 0;
                                break;
                        }
                memmove(v, cn_strstrip(v), strlen(cn_strstrip(v)) + 1);
                return true;
        }
        for (char *p = v + 1; *p; p++) {
                if (*p == '"') {
                        *w = 0;
                        p = cn_strstrip(p + 1);
                        return *p == 0 || *p == '#' || *p == ';';
                }
                if (*p == '\\') {
                        p++;
                        switch (*p) {
                        case '"':
                        case '\\':
                                *w++ = *p;
                                break;
                        case 'n':
                                *w++ = '\n';
                                break;
                        case 't':
                                *w++ = '\t';
                                break;
                        default:
                                return false;
                        }
                        continue;
                }
                *w++ = *p;
        }
        return false;
}

/* "Global", or a gcfg subsection as cloud-provider-aws's `ServiceOverride "1"`: one space and a
 * quoted name without quotes or escapes in it. */
static bool valid_section_name(const char *s) {
        size_t n = strcspn(s, " \t\"");
        const char *sub;

        if (n == 0)
                return false;
        if (s[n] == 0)
                return true;
        if (s[n] != ' ' || s[n + 1] != '"')
                return false;
        sub = s + n + 2;
        return strcspn(sub, "\"\\") > 0 && streq(sub + strcspn(sub, "\"\\"), "\"");
}

static json_object *find_section(json_object *cfg, const char *name) {
        json_object_object_foreach(cfg, k, v)
                if (strcasecmp(k, name) == 0)
                        return v;
        return NULL;
}

int cn_cloud_config_parse(const char *text, size_t size, json_object **ret, char **ret_error) {
        _cleanup_json_ json_object *cfg = json_object_new_object();
        _cleanup_free_ char *copy = NULL;
        json_object *section = NULL;
        unsigned line = 0;
        char *save = NULL;

        assert(ret);
        if (!cfg)
                return -ENOMEM;
        if (size > CN_CLOUD_CONFIG_MAX_SIZE)
                return -EFBIG;
        if (memchr(text, 0, size))
                return fail(1, "NUL byte in file", ret_error);
        copy = strndup(text, size);
        if (!copy)
                return -ENOMEM;

        for (char *l = copy; l; l = save) {
                char *nl = strchr(l, '\n'), *s, *eq, *key, *value;

                save = nl ? nl + 1 : NULL;
                if (nl)
                        *nl = 0;
                line++;
                s = cn_strstrip(l);
                if (*s == 0 || *s == '#' || *s == ';')
                        continue;
                if (*s == '[') {
                        char *end = strchr(s, ']');

                        if (!end || *cn_strstrip(end + 1))
                                return fail(line, "malformed section header", ret_error);
                        *end = 0;
                        s = cn_strstrip(s + 1);
                        if (*s == 0 || !valid_section_name(s))
                                return fail(line, "unsupported section name", ret_error);
                        section = find_section(cfg, s);
                        if (!section) {
                                section = json_object_new_object();
                                if (!section || json_object_object_add(cfg, s, section) < 0)
                                        return -ENOMEM;
                        }
                        continue;
                }
                if (!section)
                        return fail(line, "setting outside of a section", ret_error);
                eq = strchr(s, '=');
                if (!eq)
                        return fail(line, "expected key = value", ret_error);
                *eq = 0;
                key = cn_strstrip(s);
                value = eq + 1;
                value += strspn(value, " \t");
                if (*key == 0)
                        return fail(line, "empty key", ret_error);
                for (char *k = key; *k; k++)
                        if (!isalnum((unsigned char) *k) && *k != '-' && *k != '_' && *k != '.')
                                return fail(line, "invalid character in key", ret_error);
                if (!parse_value(value))
                        return fail(line, "malformed quoted value", ret_error);
                if (json_object_object_add(section, key, json_object_new_string(value)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(cfg);
        return 0;
}

int cn_cloud_config_load(const char *path, json_object **ret, char **ret_error) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t n;

        f = fopen(path, "re");
        if (!f)
                return -errno;
        buf = malloc(CN_CLOUD_CONFIG_MAX_SIZE + 1);
        if (!buf)
                return -ENOMEM;
        n = fread(buf, 1, CN_CLOUD_CONFIG_MAX_SIZE + 1, f);
        if (ferror(f))
                return -EIO;
        if (n > CN_CLOUD_CONFIG_MAX_SIZE)
                return -EFBIG;
        return cn_cloud_config_parse(buf, n, ret, ret_error);
}

const char *cn_cloud_config_get(json_object *cfg, const char *section, const char *key) {
        json_object *s, *v;

        if (!cfg || !json_object_is_type(cfg, json_type_object))
                return NULL;
        s = find_section(cfg, section);
        if (!s || !json_object_is_type(s, json_type_object) || !json_object_object_get_ex(s, key, &v))
                return NULL;
        /* The node config may carry numbers and booleans; cloud.conf only has text. */
        return json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array) ||
                               json_object_is_type(v, json_type_null)
                       ? NULL
                       : json_object_get_string(v);
}
