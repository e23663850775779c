/* SPDX-License-Identifier: Apache-2.0 */
/* The hooks of the Deckhouse module cloud-provider-cloudnode, as addon-operator runs them: an
 * executable that prints its binding configuration on --config and otherwise reads the binding
 * contexts (BINDING_CONTEXT_PATH), the module's values (VALUES_PATH, CONFIG_VALUES_PATH) and
 * writes JSON patches of the values (VALUES_JSON_PATCH_PATH) and Kubernetes operations
 * (KUBERNETES_PATCH_PATH). The thin programs in the module's hooks/ call
 * `cloudnode-controller deckhouse-hook NAME`.
 *
 * Every input is untrusted: files are read with a size cap, every field is type-checked, and on
 * any error the hook says what is wrong in one line and writes no patch at all, so a bad input
 * never loses the values it already had. Secrets' contents are never logged. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deckhouse-hooks.h"
#include "fileio.h"
#include "hash-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "yaml-util.h"

#define MODULE_KEY "cloudProviderCloudnode"
/* addon-operator's files are the whole values and every object of a binding: generous, bounded. */
#define HOOK_INPUT_MAX (16U * 1024U * 1024U)
#define CRD_FILE_MAX (2U * 1024U * 1024U)
#define CRD_FILES_MAX 32
#define SECRET_VALUE_MAX (1U * 1024U * 1024U)
#define UNINITIALIZED_TAINT "node.cloudprovider.kubernetes.io/uninitialized"

typedef struct HookRun {
        json_object *contexts; /* the binding contexts, an array */
        json_object *values; /* NULL when VALUES_PATH is not given */
        json_object *config_values;
        json_object *values_patch; /* JSON patch operations, an array */
        json_object *kube_ops; /* shell-operator's Kubernetes operations, an array */
        const char *module_dir;
        const char *crds_dir; /* ensure-crds: the directory of CRDs, default module_dir/crds */
} HookRun;

typedef struct Hook {
        const char *name;
        const char *config;
        int (*run)(HookRun *h);
} Hook;

static const char *context_string(json_object *ctx, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(ctx, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

/* The object of a snapshot or Synchronization item: "object", else the jqFilter's result. */
static json_object *item_object(json_object *item) {
        json_object *o;

        if (!json_object_is_type(item, json_type_object))
                return NULL;
        if (json_object_object_get_ex(item, "object", &o) && json_object_is_type(o, json_type_object))
                return o;
        if (json_object_object_get_ex(item, "filterResult", &o) && json_object_is_type(o, json_type_object))
                return o;
        return NULL;
}

static int array_of_items(json_object *items, const char *binding, json_object **ret) {
        _cleanup_json_ json_object *out = json_object_new_array();
        size_t n;

        if (!out)
                return log_oom();
        if (!json_object_is_type(items, json_type_array))
                return log_error_errno(-EBADMSG, "Binding context of %s: objects are not a list", binding);
        n = json_object_array_length(items);
        for (size_t i = 0; i < n; i++) {
                json_object *o = item_object(json_object_array_get_idx(items, i));

                if (!o)
                        return log_error_errno(-EBADMSG, "Binding context of %s: item %zu has no object", binding, i);
                if (json_object_array_add(out, json_object_get(o)) < 0)
                        return log_oom();
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* The objects of binding after every context of the run, in order: a context's snapshot of the
 * binding when it carries one, else its Synchronization list, else its Event (a binding of one
 * object by name: Deleted leaves none). *ret is NULL when no context told anything. */
static int binding_objects(HookRun *h, const char *binding, json_object **ret) {
        _cleanup_json_ json_object *state = NULL;
        size_t n = json_object_array_length(h->contexts);

        for (size_t i = 0; i < n; i++) {
                json_object *ctx = json_object_array_get_idx(h->contexts, i), *snaps, *items, *o;
                const char *name = context_string(ctx, "binding"), *type = context_string(ctx, "type"), *ev;
                _cleanup_json_ json_object *next = NULL;
                int r;

                if (json_object_object_get_ex(ctx, "snapshots", &snaps) &&
                    json_object_object_get_ex(snaps, binding, &items))
                        r = array_of_items(items, binding, &next);
                else if (!name || !streq(name, binding))
                        continue;
                else if (type && streq(type, "Synchronization") && json_object_object_get_ex(ctx, "objects", &items))
                        r = array_of_items(items, binding, &next);
                else if (type && streq(type, "Event")) {
                        ev = context_string(ctx, "watchEvent");
                        if (!ev || !(streq(ev, "Added") || streq(ev, "Modified") || streq(ev, "Deleted")))
                                return log_error_errno(-EBADMSG, "Binding context %zu: Event of %s without a known watchEvent", i, binding);
                        next = json_object_new_array();
                        if (!next)
                                return log_oom();
                        r = 0;
                        if (!streq(ev, "Deleted")) {
                                o = json_object_object_get(ctx, "object");
                                if (!json_object_is_type(o, json_type_object))
                                        return log_error_errno(-EBADMSG, "Binding context %zu: Event of %s without an object", i, binding);
                                if (json_object_array_add(next, json_object_get(o)) < 0)
                                        return log_oom();
                        }
                } else
                        return log_error_errno(-EBADMSG, "Binding context %zu of %s: unknown type '%s'", i, binding, strna(type));
                if (r < 0)
                        return r;
                json_object_put(state);
                state = TAKE_PTR(next);
        }
        *ret = TAKE_PTR(state);
        return 0;
}

static bool run_has_binding(HookRun *h, const char *binding) {
        size_t n = json_object_array_length(h->contexts);

        for (size_t i = 0; i < n; i++) {
                const char *name = context_string(json_object_array_get_idx(h->contexts, i), "binding");
                if (name && streq(name, binding))
                        return true;
        }
        return false;
}

/* Sets internal.KEY of the module's values to value (taken; NULL removes it), unless it already
 * holds exactly that. */
static int set_internal(HookRun *h, const char *key, json_object *value) {
        _cleanup_json_ json_object *v = value, *op = NULL;
        json_object *cur = cn_json_get(h->values, MODULE_KEY, "internal", key, NULL);
        _cleanup_free_ char *path = NULL;

        if (cur ? (v && cn_json_equal(cur, v)) : !v)
                return 0;
        if (asprintf(&path, "/" MODULE_KEY "/internal/%s", key) < 0)
                return log_oom();
        op = json_object_new_object();
        if (!op || cn_json_set_string(op, v ? "add" : "remove", "op", NULL) < 0 ||
            cn_json_set_string(op, path, "path", NULL) < 0)
                return log_oom();
        if (v && cn_json_set(op, TAKE_PTR(v), "value", NULL) < 0)
                return log_oom();
        if (json_object_array_add(h->values_patch, TAKE_PTR(op)) < 0)
                return log_oom();
        return 0;
}

/* The single Secret of a binding by name, or NULL (none, or not seen yet). */
static int binding_secret(HookRun *h, const char *binding, json_object **ret_list, json_object **ret) {
        int r = binding_objects(h, binding, ret_list);

        if (r < 0)
                return r;
        *ret = *ret_list && json_object_array_length(*ret_list) > 0 ? json_object_array_get_idx(*ret_list, 0) : NULL;
        return 0;
}

/* data[key] of a Secret, decoded, or -ENOENT. The value is never logged. */
static int secret_value(json_object *secret, const char *key, char **ret, size_t *ret_size) {
        const char *b64 = cn_json_string(secret, "data", key, NULL);
        void *data = NULL;
        size_t size;
        int r;

        if (!b64)
                return cn_json_get(secret, "data", key, NULL) ?
                               log_error_errno(-EBADMSG, "Secret %s: %s is not a string", strna(cn_json_string(secret, "metadata", "name", NULL)), key) :
                               -ENOENT;
        if (strlen(b64) > SECRET_VALUE_MAX / 3 * 4 + 4)
                return log_error_errno(-EFBIG, "Secret %s: %s is larger than %u bytes",
                                       strna(cn_json_string(secret, "metadata", "name", NULL)), key, SECRET_VALUE_MAX);
        r = cn_base64_decode(b64, strlen(b64), &data, &size);
        if (r < 0)
                return log_error_errno(r, "Secret %s: %s is not base64", strna(cn_json_string(secret, "metadata", "name", NULL)), key);
        *ret = data;
        *ret_size = size;
        return 0;
}

/* Secret key (YAML or JSON, an object) into internal.value_key; the value is removed when the
 * Secret or the key is gone. */
static int store_secret_document(HookRun *h, const char *binding, const char *key, CnTreeParser parse,
                                 const char *value_key, json_object **ret_doc) {
        _cleanup_json_ json_object *list = NULL, *doc = NULL;
        _cleanup_free_ char *data = NULL, *error = NULL;
        json_object *secret;
        size_t size;
        int r;

        r = binding_secret(h, binding, &list, &secret);
        if (r < 0)
                return r;
        if (!list) /* no context of this binding in the run: nothing known, nothing changed */
                return 0;
        if (secret) {
                r = secret_value(secret, key, &data, &size);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        if (data) {
                r = parse(data, size, SECRET_VALUE_MAX, &doc, &error);
                if (r < 0)
                        return log_error_errno(r, "Secret %s: %s: %s", strna(cn_json_string(secret, "metadata", "name", NULL)), key,
                                               strna(error));
                if (!json_object_is_type(doc, json_type_object))
                        return log_error_errno(-EBADMSG, "Secret %s: %s is not an object",
                                               strna(cn_json_string(secret, "metadata", "name", NULL)), key);
        }
        if (ret_doc)
                *ret_doc = json_object_get(doc);
        return set_internal(h, value_key, TAKE_PTR(doc));
}

/* --- the hooks ---------------------------------------------------------------------------- */

#define SECRET_BINDING(binding, secret)                                                                        \
        "{\"name\":\"" binding "\",\"apiVersion\":\"v1\",\"kind\":\"Secret\","                                  \
        "\"namespace\":{\"nameSelector\":{\"matchNames\":[\"kube-system\"]}},"                                 \
        "\"nameSelector\":{\"matchNames\":[\"" secret "\"]},\"executeHookOnEvent\":[\"Added\",\"Modified\",\"Deleted\"]}"

static int cluster_configuration(HookRun *h) {
        int r;

        r = store_secret_document(h, "provider_cluster_configuration", "cloud-provider-cluster-configuration.yaml",
                                  cn_yaml_parse, "providerClusterConfiguration", NULL);
        if (r < 0)
                return r;
        return store_secret_document(h, "cluster_configuration", "cluster-configuration.yaml", cn_yaml_parse,
                                     "clusterConfiguration", NULL);
}

/* A volume type's name as a StorageClass name (DNS subdomain, at most 63 here), "" if none. */
static void storage_class_name(const char *type, char ret[static 64]) {
        size_t n = 0;

        for (const char *p = type; *p && n < 63; p++) {
                char c = *p >= 'A' && *p <= 'Z' ? (char) (*p - 'A' + 'a') : *p;
                bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
                ret[n++] = ok ? c : '-';
        }
        while (n > 0 && !((ret[n - 1] >= 'a' && ret[n - 1] <= 'z') || (ret[n - 1] >= '0' && ret[n - 1] <= '9')))
                n--;
        ret[n] = 0;
        size_t skip = strspn(ret, "-.");
        memmove(ret, ret + skip, n - skip + 1);
}

static int storage_classes(HookRun *h, json_object *discovery, json_object **ret) {
        json_object *types = cn_json_get(discovery, "volumeTypes", NULL);
        json_object *exclude = cn_json_get(h->config_values, MODULE_KEY, "storageClass", NULL);
        _cleanup_json_ json_object *out = json_object_new_array();
        regex_t res[64];
        size_t nres = 0, n;
        int r = 0;

        if (!out)
                return log_oom();
        exclude = exclude ? json_object_object_get(exclude, "exclude") : NULL;
        if (types && !json_object_is_type(types, json_type_array))
                return log_error_errno(-EBADMSG, "providerDiscoveryData.volumeTypes is not a list");
        if (exclude && (!json_object_is_type(exclude, json_type_array) || json_object_array_length(exclude) > ELEMENTSOF(res)))
                return log_error_errno(-EBADMSG, "storageClass.exclude is not a list of at most %zu expressions", ELEMENTSOF(res));
        for (size_t i = 0; exclude && i < json_object_array_length(exclude); i++) {
                json_object *e = json_object_array_get_idx(exclude, i);
                _cleanup_free_ char *anchored = NULL;

                if (!json_object_is_type(e, json_type_string) || asprintf(&anchored, "^(%s)$", json_object_get_string(e)) < 0) {
                        r = log_error_errno(-EBADMSG, "storageClass.exclude[%zu] is not a string", i);
                        goto out;
                }
                if (regcomp(&res[nres], anchored, REG_EXTENDED | REG_NOSUB) != 0) {
                        r = log_error_errno(-EBADMSG, "storageClass.exclude[%zu] is not a regular expression", i);
                        goto out;
                }
                nres++;
        }
        n = types ? json_object_array_length(types) : 0;
        for (size_t i = 0; i < n; i++) {
                const char *type = cn_json_string(json_object_array_get_idx(types, i), "name", NULL);
                char name[64];
                json_object *sc;
                bool skip = false;

                if (!type) {
                        r = log_error_errno(-EBADMSG, "providerDiscoveryData.volumeTypes[%zu] has no name", i);
                        goto out;
                }
                storage_class_name(type, name);
                for (size_t j = 0; j < nres && !skip; j++)
                        skip = regexec(&res[j], name, 0, NULL, 0) == 0;
                if (skip || name[0] == 0 || cn_json_array_find(out, "name", name))
                        continue;
                sc = json_object_new_object();
                if (!sc || json_object_array_add(out, sc) < 0 || cn_json_set_string(sc, name, "name", NULL) < 0 ||
                    cn_json_set_string(sc, type, "type", NULL) < 0) {
                        json_object_put(sc);
                        r = log_oom();
                        goto out;
                }
        }
        *ret = TAKE_PTR(out);
out:
        for (size_t j = 0; j < nres; j++)
                regfree(&res[j]);
        return r;
}

static int discovery_data(HookRun *h) {
        _cleanup_json_ json_object *doc = NULL, *classes = NULL;
        int r;

        r = store_secret_document(h, "provider_cluster_configuration", "cloud-provider-discovery-data.json",
                                  cn_json_parse, "providerDiscoveryData", &doc);
        if (r < 0)
                return r;
        if (!doc) {
                /* The Secret or its key is gone (the classes go too), or was not in this run. */
                _cleanup_json_ json_object *list = NULL;
                r = binding_objects(h, "provider_cluster_configuration", &list);
                if (r < 0 || !list)
                        return r;
                return set_internal(h, "storageClasses", NULL);
        }
        r = storage_classes(h, doc, &classes);
        if (r < 0)
                return r;
        return set_internal(h, "storageClasses", TAKE_PTR(classes));
}

static int ensure_crds(HookRun *h) {
        _cleanup_free_ char *dir = NULL;
        struct dirent **names = NULL;
        int n, r = 0;

        if (h->crds_dir)
                dir = strdup(h->crds_dir);
        else if (!h->module_dir)
                return log_error_errno(-EINVAL, "ensure-crds needs --module-dir or --crds-dir");
        else if (asprintf(&dir, "%s/crds", h->module_dir) < 0)
                dir = NULL;
        if (!dir)
                return log_oom();
        n = scandir(dir, &names, NULL, alphasort);
        if (n < 0)
                return log_error_errno(-errno, "Failed to list %s: %m", dir);
        for (int i = 0, files = 0; i < n; i++) {
                const char *name = names[i]->d_name;
                size_t len = strlen(name);
                _cleanup_free_ char *path = NULL, *data = NULL, *error = NULL;
                _cleanup_json_ json_object *docs = NULL;
                size_t size;

                if (r < 0 || name[0] == '.' || len < 6 || !streq(name + len - 5, ".yaml"))
                        continue;
                if (++files > CRD_FILES_MAX) {
                        r = log_error_errno(-E2BIG, "%s has more than %d CRD files", dir, CRD_FILES_MAX);
                        continue;
                }
                if (asprintf(&path, "%s/%s", dir, name) < 0) {
                        r = log_oom();
                        continue;
                }
                r = cn_read_file(NULL, path, CRD_FILE_MAX, &data, &size);
                if (r < 0) {
                        log_error_errno(r, "Failed to read %s: %m", path);
                        continue;
                }
                r = cn_yaml_parse_multi(data, size, CRD_FILE_MAX, &docs, &error);
                if (r < 0) {
                        log_error_errno(r, "%s: %s", path, strna(error));
                        continue;
                }
                for (size_t j = 0; r >= 0 && j < json_object_array_length(docs); j++) {
                        json_object *crd = json_object_array_get_idx(docs, j), *op;

                        if (!cn_json_string_is(crd, "apiVersion", "apiextensions.k8s.io/v1") ||
                            !cn_json_string_is(crd, "kind", "CustomResourceDefinition") ||
                            !cn_json_string(crd, "metadata", "name", NULL)) {
                                r = log_error_errno(-EBADMSG, "%s: document %zu is not a CustomResourceDefinition", path, j);
                                break;
                        }
                        op = json_object_new_object();
                        if (!op || json_object_array_add(h->kube_ops, op) < 0 ||
                            cn_json_set_string(op, "CreateOrUpdate", "operation", NULL) < 0 ||
                            cn_json_set(op, json_object_get(crd), "object", NULL) < 0)
                                r = log_oom();
                }
        }
        for (int i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

static int wait_for_masters(HookRun *h) {
        _cleanup_json_ json_object *nodes = NULL;
        _cleanup_free_ char *waiting = NULL;
        size_t n, tainted = 0, len = 0;
        int r;

        /* Only the module's Helm run waits; watching the Nodes keeps the snapshot current. */
        if (!run_has_binding(h, "beforeHelm"))
                return 0;
        r = binding_objects(h, "master_nodes", &nodes);
        if (r < 0)
                return r;
        n = nodes ? json_object_array_length(nodes) : 0;
        if (n == 0)
                return log_error_errno(-EAGAIN, "Waiting for the control-plane Nodes to be listed");
        for (size_t i = 0; i < n; i++) {
                json_object *node = json_object_array_get_idx(nodes, i);
                json_object *taints = cn_json_get(node, "spec", NULL);
                const char *name = cn_json_string(node, "metadata", "name", NULL);

                taints = taints ? json_object_object_get(taints, "taints") : NULL;
                if (!name)
                        return log_error_errno(-EBADMSG, "master_nodes: a Node without a name");
                if (taints && !json_object_is_type(taints, json_type_array))
                        return log_error_errno(-EBADMSG, "Node %s: spec.taints is not a list", name);
                if (!taints || !cn_json_array_find(taints, "key", UNINITIALIZED_TAINT))
                        continue;
                tainted++;
                if (len < 512) {
                        char *s = NULL;
                        if (asprintf(&s, "%s%s%s", strempty(waiting), waiting ? ", " : "", name) < 0)
                                return log_oom();
                        free(waiting);
                        waiting = s;
                        len = strlen(s);
                }
        }
        if (tainted > 0)
                return log_error_errno(-EAGAIN, "Waiting for %zu of %zu control-plane Nodes to be initialized: %s",
                                       tainted, n, waiting);
        log_info("All %zu control-plane Nodes are initialized", n);
        return 0;
}

static int json_array_contains_string(json_object *a, const char *s) {
        for (size_t i = 0; a && i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (json_object_is_type(e, json_type_string) && streq(json_object_get_string(e), s))
                        return true;
        }
        return false;
}

static int string_cmp(const void *a, const void *b) {
        return strcmp(json_object_get_string(*(json_object *const *) a), json_object_get_string(*(json_object *const *) b));
}

/* Each CloudnodeInstanceClass's status.nodeGroupConsumers: the NodeGroups whose
 * spec.cloudInstances.classReference names it, sorted; patched only where it differs. */
static int instance_class(HookRun *h) {
        _cleanup_json_ json_object *classes = NULL, *groups = NULL;
        int r;

        r = binding_objects(h, "instance_classes", &classes);
        if (r < 0)
                return r;
        r = binding_objects(h, "node_groups", &groups);
        if (r < 0)
                return r;
        for (size_t i = 0; classes && i < json_object_array_length(classes); i++) {
                json_object *ic = json_object_array_get_idx(classes, i), *cur, *op;
                const char *name = cn_json_string(ic, "metadata", "name", NULL);
                _cleanup_json_ json_object *consumers = json_object_new_array();

                if (!consumers)
                        return log_oom();
                if (!name)
                        return log_error_errno(-EBADMSG, "instance_classes: an InstanceClass without a name");
                for (size_t j = 0; groups && j < json_object_array_length(groups); j++) {
                        json_object *ng = json_object_array_get_idx(groups, j);
                        const char *ng_name = cn_json_string(ng, "metadata", "name", NULL);

                        if (ng_name && cn_json_string_is(cn_json_get(ng, "spec", "cloudInstances", "classReference", NULL), "kind",
                                                         "CloudnodeInstanceClass") &&
                            cn_json_string_is(cn_json_get(ng, "spec", "cloudInstances", "classReference", NULL), "name", name) &&
                            !json_array_contains_string(consumers, ng_name) &&
                            json_object_array_add(consumers, json_object_new_string(ng_name)) < 0)
                                return log_oom();
                }
                json_object_array_sort(consumers, string_cmp);
                cur = cn_json_get(ic, "status", NULL);
                cur = cur ? json_object_object_get(cur, "nodeGroupConsumers") : NULL;
                if (cur ? cn_json_equal(cur, consumers) : json_object_array_length(consumers) == 0)
                        continue;
                op = json_object_new_object();
                if (!op || json_object_array_add(h->kube_ops, op) < 0 ||
                    cn_json_set_string(op, "MergePatch", "operation", NULL) < 0 ||
                    cn_json_set_string(op, "deckhouse.io/v1", "apiVersion", NULL) < 0 ||
                    cn_json_set_string(op, "CloudnodeInstanceClass", "kind", NULL) < 0 ||
                    cn_json_set_string(op, name, "name", NULL) < 0 ||
                    cn_json_set_string(op, "status", "subresource", NULL) < 0 ||
                    cn_json_set(op, TAKE_PTR(consumers), "mergePatch", "status", "nodeGroupConsumers", NULL) < 0)
                        return log_oom();
        }
        return 0;
}

static const Hook hooks[] = {
        { "ensure-crds", "{\"configVersion\":\"v1\",\"onStartup\":5}", ensure_crds },
        { "cluster-configuration",
          "{\"configVersion\":\"v1\",\"kubernetes\":[" SECRET_BINDING("provider_cluster_configuration",
                                                                     "d8-provider-cluster-configuration") "," SECRET_BINDING("cluster_configuration", "d8-cluster-configuration") "]}",
          cluster_configuration },
        { "discovery-data",
          "{\"configVersion\":\"v1\",\"kubernetes\":[" SECRET_BINDING("provider_cluster_configuration",
                                                                     "d8-provider-cluster-configuration") "]}",
          discovery_data },
        { "instance-class",
          "{\"configVersion\":\"v1\",\"kubernetes\":["
          "{\"name\":\"instance_classes\",\"apiVersion\":\"deckhouse.io/v1\",\"kind\":\"CloudnodeInstanceClass\","
          "\"includeSnapshotsFrom\":[\"instance_classes\",\"node_groups\"]},"
          "{\"name\":\"node_groups\",\"apiVersion\":\"deckhouse.io/v1\",\"kind\":\"NodeGroup\","
          "\"includeSnapshotsFrom\":[\"instance_classes\",\"node_groups\"]}]}",
          instance_class },
        { "wait-for-masters",
          "{\"configVersion\":\"v1\",\"beforeHelm\":1,\"kubernetes\":[{\"name\":\"master_nodes\",\"apiVersion\":\"v1\","
          "\"kind\":\"Node\",\"labelSelector\":{\"matchExpressions\":[{\"key\":\"node-role.kubernetes.io/control-plane\","
          "\"operator\":\"Exists\"}]},\"executeHookOnEvent\":[],\"executeHookOnSynchronization\":false}]}",
          wait_for_masters },
};

static int read_json(const char *var, bool required, json_object **ret) {
        const char *path = getenv(var);
        _cleanup_free_ char *error = NULL;
        int r;

        *ret = NULL;
        if (isempty(path)) {
                if (required)
                        return log_error_errno(-EINVAL, "%s is not set", var);
                return 0;
        }
        r = cn_json_parse_file(NULL, path, HOOK_INPUT_MAX, ret, &error);
        if (r < 0)
                return log_error_errno(r, "%s (%s): %s", var, path, strna(error));
        return 0;
}

/* Whether the changes have somewhere to go: var names a file, or there are none. */
static int check_output(const char *var, json_object *ops) {
        size_t n = json_object_array_length(ops);

        if (isempty(getenv(var)) && n > 0)
                return log_error_errno(-EINVAL, "%s is not set, but the hook has %zu changes for it", var, n);
        return 0;
}

/* Opens the file named by var for writing; *ret stays NULL when var is unset. */
static int open_output(const char *var, FILE **ret) {
        const char *path = getenv(var);

        *ret = NULL;
        if (isempty(path))
                return 0;
        *ret = fopen(path, "we");
        if (!*ret)
                return log_error_errno(-errno, "Failed to open %s: %m", path);
        return 0;
}

/* The values patch is one JSON array; the Kubernetes operations are one JSON object a line. */
static int write_output(FILE *f, const char *var, json_object *ops, bool lines) {
        size_t n = json_object_array_length(ops);

        if (!f)
                return 0;
        if (!lines)
                fputs(json_object_to_json_string_ext(ops, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), f);
        for (size_t i = 0; lines && i < n; i++)
                fprintf(f, "%s\n", json_object_to_json_string_ext(json_object_array_get_idx(ops, i),
                                                                  JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        if (fflush(f) != 0 || ferror(f))
                return log_error_errno(-EIO, "Failed to write %s", var);
        return 0;
}

int cn_deckhouse_hook_main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "config", no_argument, NULL, 'c' },
                { "module-dir", required_argument, NULL, 'm' },
                { "crds-dir", required_argument, NULL, 'C' },
                {},
        };
        _cleanup_fclose_ FILE *values_out = NULL, *kube_out = NULL;
        HookRun h = {};
        const Hook *hook = NULL;
        bool config = false;
        int c, r;

        if (argc < 1 || isempty(argv[0])) {
                log_error("deckhouse-hook needs a hook name");
                return 2;
        }
        for (size_t i = 0; i < ELEMENTSOF(hooks); i++)
                if (streq(hooks[i].name, argv[0]))
                        hook = &hooks[i];
        if (!hook) {
                log_error("Unknown Deckhouse hook '%s'", argv[0]);
                return 2;
        }
        optind = 1;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        config = true;
                        break;
                case 'm':
                        h.module_dir = optarg;
                        break;
                case 'C':
                        h.crds_dir = optarg;
                        break;
                default:
                        return 2;
                }
        if (optind < argc) {
                log_error("deckhouse-hook %s: unexpected argument '%s'", hook->name, argv[optind]);
                return 2;
        }
        if (config) {
                puts(hook->config);
                return fflush(stdout) == 0 ? 0 : 1;
        }

        r = read_json("BINDING_CONTEXT_PATH", true, &h.contexts);
        if (r >= 0 && !json_object_is_type(h.contexts, json_type_array))
                r = log_error_errno(-EBADMSG, "BINDING_CONTEXT_PATH: not a list of binding contexts");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(h.contexts); i++)
                if (!json_object_is_type(json_object_array_get_idx(h.contexts, i), json_type_object))
                        r = log_error_errno(-EBADMSG, "BINDING_CONTEXT_PATH: context %zu is not an object", i);
        if (r >= 0)
                r = read_json("VALUES_PATH", false, &h.values);
        if (r >= 0)
                r = read_json("CONFIG_VALUES_PATH", false, &h.config_values);
        if (r >= 0) {
                h.values_patch = json_object_new_array();
                h.kube_ops = json_object_new_array();
                r = h.values_patch && h.kube_ops ? hook->run(&h) : log_oom();
        }
        /* All or nothing: the patches are written only when the whole run succeeded and both
         * files could be opened. */
        if (r >= 0)
                r = check_output("VALUES_JSON_PATCH_PATH", h.values_patch);
        if (r >= 0)
                r = check_output("KUBERNETES_PATCH_PATH", h.kube_ops);
        if (r >= 0)
                r = open_output("VALUES_JSON_PATCH_PATH", &values_out);
        if (r >= 0)
                r = open_output("KUBERNETES_PATCH_PATH", &kube_out);
        if (r >= 0)
                r = write_output(values_out, "VALUES_JSON_PATCH_PATH", h.values_patch, false);
        if (r >= 0)
                r = write_output(kube_out, "KUBERNETES_PATCH_PATH", h.kube_ops, true);
        json_object_put(h.contexts);
        json_object_put(h.values);
        json_object_put(h.config_values);
        json_object_put(h.values_patch);
        json_object_put(h.kube_ops);
        return r < 0 ? 1 : 0;
}
