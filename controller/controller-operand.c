/* SPDX-License-Identifier: Apache-2.0 */
/* Desired state of the operand: substitution and hashing. See controller-operand.h. */
#include <errno.h>
#include <string.h>

#include "controller-assets.h"
#include "controller-operand.h"
#include "hash-util.h"
#include "json-util.h"
#include "log.h"
#include "cloud-config.h"
#include "provider.h"
#include "string-util.h"

int cn_operand_parse_images(const char *text, json_object **ret, char **reterr_message) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *err = NULL;
        int r;

        r = cn_json_parse(text, strlen(text), CN_JSON_MAX_SIZE, &o, &err);
        if (r < 0) {
                if (reterr_message)
                        (void) cn_set_message(reterr_message, "images.json is not valid JSON: %s", strna(err));
                return -EINVAL;
        }
        if (!json_object_is_type(o, json_type_object)) {
                if (reterr_message)
                        *reterr_message = strdup("images.json is not a JSON object");
                return -EINVAL;
        }
        json_object_object_foreach(o, k, v)
                if (!json_object_is_type(v, json_type_string) || isempty(json_object_get_string(v))) {
                        if (reterr_message)
                                (void) cn_set_message(reterr_message, "images.json: \"%s\" is not a non-empty string", k);
                        return -EINVAL;
                }
        *ret = TAKE_PTR(o);
        return 0;
}

static int set_env(json_object *container, const char *name, const char *value) {
        json_object *env = json_object_object_get(container, "env"), *item;
        int r;

        if (isempty(value))
                return 0;
        if (!env) {
                env = json_object_new_array();
                if (!env)
                        return -ENOMEM;
                r = json_object_object_add(container, "env", env);
                if (r < 0) {
                        json_object_put(env);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < json_object_array_length(env); i++) {
                json_object *e = json_object_array_get_idx(env, i);
                const char *n = cn_json_string(e, "name", NULL);

                if (n && streq(n, name)) {
                        /* A valueFrom would win over value; ours replaces the whole entry. */
                        json_object_object_del(e, "valueFrom");
                        return cn_json_set_string(e, value, "value", NULL);
                }
        }
        item = json_object_new_object();
        if (!item)
                return -ENOMEM;
        r = cn_json_set_string(item, name, "name", NULL);
        if (r >= 0)
                r = cn_json_set_string(item, value, "value", NULL);
        if (r < 0) {
                json_object_put(item);
                return r;
        }
        if (json_object_array_add(env, item) < 0) {
                json_object_put(item);
                return -ENOMEM;
        }
        return 0;
}

/* Sets "--NAME=VALUE" in the container's args, replacing any --NAME=... already there, so that the
 * value comes from the cluster and an edit of the applied object is put back like other drift. */
static int set_arg(json_object *container, const char *name, const char *value) {
        json_object *args = json_object_object_get(container, "args"), *item;
        _cleanup_free_ char *arg = NULL;
        size_t n = strlen(name);

        if (asprintf(&arg, "--%s=%s", name, value) < 0)
                return -ENOMEM;
        if (!args) {
                args = json_object_new_array();
                if (!args || json_object_object_add(container, "args", args) < 0) {
                        json_object_put(args);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < json_object_array_length(args); i++) {
                const char *a = json_object_get_string(json_object_array_get_idx(args, i));

                if (a && strneq(a, "--", 2) && strneq(a + 2, name, n) && (a[2 + n] == '=' || a[2 + n] == 0)) {
                        item = json_object_new_string(arg);
                        if (!item || json_object_array_put_idx(args, i, item) < 0) {
                                json_object_put(item);
                                return -ENOMEM;
                        }
                        return 0;
                }
        }
        item = json_object_new_string(arg);
        if (!item || json_object_array_add(args, item) < 0) {
                json_object_put(item);
                return -ENOMEM;
        }
        return 0;
}

int cn_operand_cloud_provider(const char *flag, json_object *operator_object, const char *infrastructure_platform,
                              const char **ret, const char **ret_source) {
        const char *spec = cn_json_string(operator_object, "spec", "cloudProvider", NULL), *p, *source;

        if (!isempty(flag))
                p = flag, source = "--cloud-provider";
        else if (!isempty(spec))
                p = spec, source = "CloudnodeOperator spec.cloudProvider";
        else if (!isempty(infrastructure_platform))
                p = infrastructure_platform, source = "Infrastructure platform";
        else
                return -ENOENT;
        *ret = p;
        if (ret_source)
                *ret_source = source;
        return cn_provider_find(p) ? 0 : -EPROTONOSUPPORT;
}

static int substitute_containers(json_object *containers, const CnOperandConfig *c) {
        int r;

        if (!containers || !json_object_is_type(containers, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(containers); i++) {
                json_object *ct = json_object_array_get_idx(containers, i);
                const char *name = cn_json_string(ct, "name", NULL), *key = NULL, *image;

                if (!name)
                        continue;
                if (streq(name, "cloud-controller-manager"))
                        key = CN_OPERAND_IMAGE_CCM_KEY;
                else if (streq(name, "cloud-node-manager"))
                        key = CN_OPERAND_IMAGE_CNM_KEY;
                image = key && c->images ? cn_json_string(c->images, key, NULL) : NULL;
                if (image) {
                        r = cn_json_set_string(ct, image, "image", NULL);
                        if (r < 0)
                                return r;
                }
                if (streq(name, "cloud-controller-manager") && !isempty(c->cloud_provider)) {
                        r = set_arg(ct, "cloud-provider", c->cloud_provider);
                        if (r < 0)
                                return r;
                }
                /* The name cluster-cloud-controller-manager-operator hands every cloud's operand (its
                 * CCMs pass it on as --cluster-name); cloudnode's own controllers name nothing in the
                 * cloud after the cluster, so nothing of the initializer reads it yet. */
                r = set_env(ct, "OCP_INFRASTRUCTURE_NAME", c->infrastructure_name);
                /* Both spellings: Go's net/http reads the upper case ones, libcurl and our
                 * HTTP client the lower case http_proxy (HTTPS_PROXY in either case). */
                if (r >= 0)
                        r = set_env(ct, "HTTP_PROXY", c->http_proxy);
                if (r >= 0)
                        r = set_env(ct, "HTTPS_PROXY", c->https_proxy);
                if (r >= 0)
                        r = set_env(ct, "NO_PROXY", c->no_proxy);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int substitute_pod_spec(json_object *pod_spec, const CnOperandConfig *c) {
        int r;

        r = substitute_containers(json_object_object_get(pod_spec, "initContainers"), c);
        if (r < 0)
                return r;
        return substitute_containers(json_object_object_get(pod_spec, "containers"), c);
}

static int substitute_subjects(json_object *object, const char *namespace) {
        json_object *subjects = json_object_object_get(object, "subjects");
        int r;

        if (!subjects || !json_object_is_type(subjects, json_type_array))
                return 0;
        for (size_t i = 0; i < json_object_array_length(subjects); i++) {
                json_object *s = json_object_array_get_idx(subjects, i);
                const char *kind = cn_json_string(s, "kind", NULL);

                if (kind && streq(kind, "ServiceAccount")) {
                        r = cn_json_set_string(s, namespace, "namespace", NULL);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int cn_operand_substitute(json_object *object, const CnOperandConfig *c) {
        const CnKubeResource *res = cn_controller_resource_for(object);
        const char *kind = cn_json_string(object, "kind", NULL);
        int r;

        if (!res || !kind)
                return -EINVAL;
        if (res->namespaced) {
                r = cn_json_set_string(object, c->namespace, "metadata", "namespace", NULL);
                if (r < 0)
                        return r;
        }
        r = cn_json_set_string(object, CN_OPERAND_MANAGED_BY, "metadata", "labels", CN_OPERAND_MANAGED_BY_LABEL,
                               NULL);
        if (r < 0)
                return r;
        r = substitute_subjects(object, c->namespace);
        if (r < 0)
                return r;

        if (streq(kind, "Deployment")) {
                json_object *pod_spec = cn_json_get(object, "spec", "template", "spec", NULL);
                char hash[CN_SHA256_HEX_SIZE];
                const char *conf = strempty(c->cloud_config);

                if (pod_spec) {
                        r = substitute_pod_spec(pod_spec, c);
                        if (r < 0)
                                return r;
                }
                if (c->single_node) {
                        r = cn_json_set(object, json_object_new_int(1), "spec", "replicas", NULL);
                        if (r < 0)
                                return r;
                }
                r = cn_sha256_hex(conf, strlen(conf), hash);
                if (r < 0)
                        return r;
                r = cn_json_set_string(object, hash, "spec", "template", "metadata", "annotations",
                                       CN_OPERAND_CONFIG_HASH_ANNOTATION, NULL);
                if (r < 0)
                        return r;
                if (!isempty(c->release_version)) {
                        r = cn_json_set_string(object, c->release_version, "spec", "template", "metadata",
                                               "annotations", CN_OPERAND_RELEASE_ANNOTATION, NULL);
                        if (r < 0)
                                return r;
                }
        } else if (streq(kind, "PodDisruptionBudget") && c->single_node) {
                /* With one replica, minAvailable 1 would block every node drain for good. */
                r = cn_json_set(object, json_object_new_int(0), "spec", "minAvailable", NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_operand_stamp_hash(json_object *object) {
        json_object *annotations = cn_json_get(object, "metadata", "annotations", NULL);
        _cleanup_free_ char *text = NULL;
        char hash[CN_SHA256_HEX_SIZE];
        int r;

        if (annotations)
                json_object_object_del(annotations, CN_OPERAND_SPEC_HASH_ANNOTATION);
        r = cn_json_to_string(object, CN_JSON_COMPACT, &text);
        if (r < 0)
                return r;
        r = cn_sha256_hex(text, strlen(text), hash);
        if (r < 0)
                return r;
        return cn_json_set_string(object, hash, "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL);
}

int cn_operand_cloud_conf(const CnOperandConfig *c, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        r = cn_json_set_string(o, "v1", "apiVersion", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, "ConfigMap", "kind", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, CN_OPERAND_CLOUD_CONF_NAME, "metadata", "name", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, "cloudnode", "metadata", "labels", "app.kubernetes.io/name", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, strempty(c->cloud_config), "data", CN_OPERAND_CLOUD_CONF_KEY, NULL);
        if (r < 0)
                return r;
        r = cn_operand_substitute(o, c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int cn_operand_desired(const CnOperandConfig *c, json_object **ret_array) {
        _cleanup_json_ json_object *a = NULL;
        json_object *conf = NULL;
        int r;

        r = cn_controller_assets_load(&a);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                r = cn_operand_substitute(json_object_array_get_idx(a, i), c);
                if (r < 0)
                        return r;
        }
        r = cn_operand_cloud_conf(c, &conf);
        if (r < 0)
                return r;
        if (json_object_array_add(a, conf) < 0) {
                json_object_put(conf);
                return -ENOMEM;
        }
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                r = cn_operand_stamp_hash(json_object_array_get_idx(a, i));
                if (r < 0)
                        return r;
        }
        *ret_array = TAKE_PTR(a);
        return 0;
}

const char *cn_operand_source_cloud_config(json_object *configmap, const char *key) {
        const char *v = NULL;

        if (!configmap)
                return NULL;
        if (key)
                v = cn_json_string(configmap, "data", key, NULL);
        return v ?: cn_json_string(configmap, "data", CN_OPERAND_CLOUD_CONF_KEY, NULL);
}

int cn_operand_pick_cloud_config(const CnCloudConfigSource *sources, size_t n, size_t *ret_index,
                                 const char **ret_text) {
        for (size_t i = 0; i < n; i++) {
                const char *text;

                if (!sources[i].configmap)
                        continue;
                text = cn_operand_source_cloud_config(sources[i].configmap, sources[i].key);
                *ret_index = i;
                if (!text && sources[i].strict)
                        return -ENOKEY;
                *ret_text = text;
                return 0;
        }
        return -ENOENT;
}

const char *cn_operand_cloud_config_credential(const char *text) {
        static const char *const keys[] = { "token", "password", "application-credential-secret" };
        _cleanup_json_ json_object *cfg = NULL;

        if (isempty(text) || cn_cloud_config_parse(text, strlen(text), &cfg, NULL) < 0)
                return NULL;
        json_object_object_foreach(cfg, section, settings) {
                (void) section;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                        if (!isempty(cn_json_string(settings, keys[i], NULL)))
                                return keys[i];
        }
        return NULL;
}
