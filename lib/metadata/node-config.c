/* SPDX-License-Identifier: Apache-2.0 */
/* Parser of the node config (see node-config.h for the format). The document is read by the YAML
 * loader into a json-c tree first; this file only checks keys and types, so one message per
 * mistake names the key it is about. */
#include <limits.h>

#include "fileio.h"
#include "node-config.h"
#include "time-util.h"
#include "yaml-util.h"
#include "metadata.h"

static const char *const role_table[_CN_ROLE_MAX] = {
        [CN_ROLE_WORKER] = "worker",
        [CN_ROLE_BOOTSTRAP] = "bootstrap",
        [CN_ROLE_CONTROL_PLANE] = "control-plane",
};

const char *cn_role_to_string(CnRole r) {
        return r >= 0 && r < _CN_ROLE_MAX ? role_table[r] : NULL;
}

CnRole cn_role_from_string(const char *s) {
        for (int i = 0; s && i < _CN_ROLE_MAX; i++)
                if (streq(role_table[i], s))
                        return i;
        return _CN_ROLE_INVALID;
}

int cn_node_config_new(CnNodeConfig **ret) {
        _cleanup_node_config_ CnNodeConfig *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->role = CN_ROLE_WORKER;
        c->metadata_retries = (unsigned) -1;
        c->health_port = CN_HEALTH_PORT_DEFAULT;
        c->cloud_config = json_object_new_object();
        c->images_path = strdup(CN_IMAGES_PATH);
        if (!c->cloud_config || !c->images_path)
                return -ENOMEM;
        *ret = TAKE_PTR(c);
        return 0;
}

CnNodeConfig *cn_node_config_free(CnNodeConfig *c) {
        if (!c)
                return NULL;
        free(c->platform);
        free(c->node_name);
        free(c->kubeconfig);
        free(c->metadata_endpoint);
        free(c->metadata_config_drive);
        free(c->metadata_file);
        json_object_put(c->cloud_config);
        free(c->credentials_file);
        free(c->images_path);
        json_object_put(c->images_inline);
        free(c);
        return NULL;
}

typedef struct ParseContext {
        char **error;
} ParseContext;

static int fail(ParseContext *ctx, const char *fmt, ...) _printf_(2, 3);
static int fail(ParseContext *ctx, const char *fmt, ...) {
        va_list ap;

        if (ctx->error) {
                free(*ctx->error);
                *ctx->error = NULL;
                va_start(ap, fmt);
                if (vasprintf(ctx->error, fmt, ap) < 0)
                        *ctx->error = NULL;
                va_end(ap);
        }
        return -EINVAL;
}

static int get_string(ParseContext *ctx, const char *key, json_object *v, char **dst) {
        char *s;

        if (!json_object_is_type(v, json_type_string))
                return fail(ctx, "'%s' must be a string", key);
        if (json_object_get_string_len(v) == 0)
                return fail(ctx, "'%s' must not be empty", key);
        s = strdup(json_object_get_string(v));
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

static int get_uint(ParseContext *ctx, const char *key, json_object *v, unsigned max, unsigned *dst) {
        int64_t i;

        if (!json_object_is_type(v, json_type_int))
                return fail(ctx, "'%s' must be an integer", key);
        i = json_object_get_int64(v);
        if (i < 0 || (uint64_t) i > max)
                return fail(ctx, "'%s' must be between 0 and %u", key, max);
        *dst = (unsigned) i;
        return 0;
}

static int get_bool(ParseContext *ctx, const char *key, json_object *v, bool *dst) {
        if (!json_object_is_type(v, json_type_boolean))
                return fail(ctx, "'%s' must be true or false", key);
        *dst = json_object_get_boolean(v);
        return 0;
}

/* A Go-style duration ("2s", "500ms", "1m30s") or an integer number of seconds. */
static int get_duration(ParseContext *ctx, const char *key, json_object *v, uint64_t *dst) {
        usec_t t;

        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i <= 0 || i > 86400)
                        return fail(ctx, "'%s' must be between 1 and 86400 seconds", key);
                *dst = (uint64_t) i * USEC_PER_SEC;
                return 0;
        }
        if (!json_object_is_type(v, json_type_string) || cn_parse_duration(json_object_get_string(v), &t) < 0)
                return fail(ctx, "'%s' must be a duration like \"2s\" or \"500ms\"", key);
        if (t == 0 || t > USEC_PER_DAY)
                return fail(ctx, "'%s' must be between 1us and 24h", key);
        *dst = t;
        return 0;
}

static int parse_metadata(ParseContext *ctx, CnNodeConfig *c, json_object *o) {
        if (!json_object_is_type(o, json_type_object))
                return fail(ctx, "'metadata' must be a mapping");
        json_object_object_foreach(o, key, v) {
                int r;

                if (streq(key, "endpoint"))
                        r = get_string(ctx, "metadata.endpoint", v, &c->metadata_endpoint);
                else if (streq(key, "configDrive"))
                        r = get_string(ctx, "metadata.configDrive", v, &c->metadata_config_drive);
                else if (streq(key, "file"))
                        r = get_string(ctx, "metadata.file", v, &c->metadata_file);
                else if (streq(key, "timeout"))
                        r = get_duration(ctx, "metadata.timeout", v, &c->metadata_timeout_usec);
                else if (streq(key, "deadline"))
                        r = get_duration(ctx, "metadata.deadline", v, &c->metadata_deadline_usec);
                else if (streq(key, "retries"))
                        r = get_uint(ctx, "metadata.retries", v, 100, &c->metadata_retries);
                else if (streq(key, "requireIMDSv2"))
                        r = get_bool(ctx, "metadata.requireIMDSv2", v, &c->metadata_require_imdsv2);
                else
                        r = fail(ctx, "unknown key 'metadata.%s'", key);
                if (r < 0)
                        return r;
        }
        if (c->metadata_endpoint && !strneq(c->metadata_endpoint, "http://", 7) &&
            !strneq(c->metadata_endpoint, "https://", 8))
                return fail(ctx, "'metadata.endpoint' must be an http:// or https:// URL");
        return 0;
}

/* cloudConfig: section -> mapping of scalars (and of subsections of scalars). Values are kept as strings; the INI writer escapes
 * them, but a section or key name has no escape in the format, so those are restricted here. */
static bool ini_name_is_valid(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      *s == '-' || *s == '_' || *s == '.'))
                        return false;
        return true;
}

/* The keys of a section (or, with sub set, of its subsection sub: a mapping among the section's
 * keys, cloud-provider-aws's [ServiceOverride "1"]) into out, as strings. */
static int parse_cloud_config_section(ParseContext *ctx, const char *section, const char *sub, json_object *sv,
                                      json_object *out) {
        json_object_object_foreach(sv, key, v) {
                json_object *s;
                int r;

                if (!ini_name_is_valid(key))
                        return fail(ctx, "'cloudConfig.%s%s%s': invalid key name '%s'", section, sub ? "." : "",
                                    strempty(sub), key);
                if (json_object_is_type(v, json_type_object) && !sub) {
                        s = json_object_new_object();
                        if (!s || json_object_object_add(out, key, s) < 0) {
                                json_object_put(s);
                                return -ENOMEM;
                        }
                        r = parse_cloud_config_section(ctx, section, key, v, s);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array) ||
                    json_object_is_type(v, json_type_null))
                        return fail(ctx, "'cloudConfig.%s.%s%s%s' must be a scalar", section, strempty(sub),
                                    sub ? "." : "", key);
                s = json_object_new_string(json_object_get_string(v));
                if (!s || json_object_object_add(out, key, s) < 0) {
                        json_object_put(s);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int parse_cloud_config(ParseContext *ctx, CnNodeConfig *c, json_object *o) {
        _cleanup_json_ json_object *out = json_object_new_object();
        int r;

        if (!out)
                return -ENOMEM;
        if (!json_object_is_type(o, json_type_object))
                return fail(ctx, "'cloudConfig' must be a mapping of sections");
        json_object_object_foreach(o, section, sv) {
                _cleanup_json_ json_object *so = json_object_new_object();

                if (!so)
                        return -ENOMEM;
                if (!ini_name_is_valid(section))
                        return fail(ctx, "'cloudConfig': invalid section name '%s'", section);
                if (!json_object_is_type(sv, json_type_object))
                        return fail(ctx, "'cloudConfig.%s' must be a mapping", section);
                r = parse_cloud_config_section(ctx, section, NULL, sv, so);
                if (r < 0)
                        return r;
                if (json_object_object_add(out, section, so) < 0)
                        return -ENOMEM;
                TAKE_PTR(so);
        }
        json_object_put(c->cloud_config);
        c->cloud_config = TAKE_PTR(out);
        return 0;
}

static int parse_images(ParseContext *ctx, CnNodeConfig *c, json_object *v) {
        if (json_object_is_type(v, json_type_string))
                return get_string(ctx, "images", v, &c->images_path);
        if (!json_object_is_type(v, json_type_object))
                return fail(ctx, "'images' must be a path or a mapping of image names");
        json_object_object_foreach(v, key, iv)
                if (!json_object_is_type(iv, json_type_string) || json_object_get_string_len(iv) == 0)
                        return fail(ctx, "'images.%s' must be a non-empty string", key);
        free(c->images_path);
        c->images_path = NULL;
        json_object_put(c->images_inline);
        c->images_inline = json_object_get(v);
        return 0;
}

int cn_node_config_from_json(json_object *doc, CnNodeConfig **ret, char **ret_error) {
        _cleanup_node_config_ CnNodeConfig *c = NULL;
        ParseContext ctx = { .error = ret_error };
        int r;

        if (ret_error)
                *ret_error = NULL;
        r = cn_node_config_new(&c);
        if (r < 0)
                return r;
        /* An empty document is a config with every default. */
        if (doc && !json_object_is_type(doc, json_type_null)) {
                if (!json_object_is_type(doc, json_type_object))
                        return fail(&ctx, "the node config must be a mapping");
                json_object_object_foreach(doc, key, v) {
                        if (streq(key, "platform")) {
                                r = get_string(&ctx, key, v, &c->platform);
                                if (r >= 0 && !cn_metadata_platform_supported(c->platform))
                                        r = fail(&ctx, "'platform': unsupported platform '%s'", c->platform);
                        } else if (streq(key, "role")) {
                                if (!json_object_is_type(v, json_type_string) ||
                                    (c->role = cn_role_from_string(json_object_get_string(v))) < 0)
                                        r = fail(&ctx, "'role' must be bootstrap, control-plane or worker");
                        } else if (streq(key, "nodeName"))
                                r = get_string(&ctx, key, v, &c->node_name);
                        else if (streq(key, "kubeconfig"))
                                r = get_string(&ctx, key, v, &c->kubeconfig);
                        else if (streq(key, "metadata"))
                                r = parse_metadata(&ctx, c, v);
                        else if (streq(key, "cloudConfig"))
                                r = parse_cloud_config(&ctx, c, v);
                        else if (streq(key, "credentialsFile"))
                                r = get_string(&ctx, key, v, &c->credentials_file);
                        else if (streq(key, "images"))
                                r = parse_images(&ctx, c, v);
                        else if (streq(key, "healthPort")) {
                                r = get_uint(&ctx, key, v, 65535, &c->health_port);
                                if (r >= 0 && c->health_port == 0)
                                        r = fail(&ctx, "'healthPort' must be between 1 and 65535");
                        } else
                                r = fail(&ctx, "unknown key '%s'", key);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int cn_node_config_load(const char *root, const char *path, bool allow_missing, CnNodeConfig **ret,
                        char **ret_error) {
        _cleanup_json_ json_object *doc = NULL;
        _cleanup_free_ char *error = NULL, *msg = NULL;
        int r;

        if (ret_error)
                *ret_error = NULL;
        path = path ?: CN_NODE_CONFIG_PATH;
        r = cn_yaml_parse_file(root, path, 1024 * 1024, &doc, &error);
        if (r == -ENOENT && allow_missing)
                return cn_node_config_new(ret);
        if (r == -ENODATA)
                doc = NULL; /* an empty file: every default */
        else if (r < 0) {
                if (ret_error && asprintf(ret_error, "%s: %s", path, error ?: strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = cn_node_config_from_json(doc, ret, &msg);
        if (r < 0 && ret_error && asprintf(ret_error, "%s: %s", path, strna(msg)) < 0)
                *ret_error = NULL;
        return r;
}
