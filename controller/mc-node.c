/* SPDX-License-Identifier: Apache-2.0 */
/* See mc-node.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "labels.h"
#include "mc-node.h"
#include "string-util.h"

#define ANNOTATION_VALUE_MAX (256U * 1024U)

static int fail(char **ret_reason, const char *what, const char *key) {
        if (ret_reason && asprintf(ret_reason, "spec.%s: \"%s\" is not valid on a Node", what, key) < 0)
                *ret_reason = NULL;
        return -EINVAL;
}

static bool taint_effect_valid(const char *e) {
        return e && (streq(e, "NoSchedule") || streq(e, "PreferNoSchedule") || streq(e, "NoExecute"));
}

/* corev1.Taint.MatchTaint: the same key and effect, whatever the value. */
static bool node_has_taint(json_object *taints, const char *key, const char *effect) {
        for (size_t i = 0; taints && json_object_is_type(taints, json_type_array) && i < json_object_array_length(taints);
             i++) {
                json_object *t = json_object_array_get_idx(taints, i);

                if (streq(strempty(cn_json_string(t, "key", NULL)), key) &&
                    streq(strempty(cn_json_string(t, "effect", NULL)), effect))
                        return true;
        }
        return false;
}

/* Adds the members of from whose keys existing lacks to patch.metadata.<field>. */
static int add_missing(json_object *patch, const char *field, json_object *from, json_object *existing, bool labels,
                       size_t *n, char **ret_reason) {
        if (!from)
                return 0;
        if (!json_object_is_type(from, json_type_object))
                return fail(ret_reason, "metadata", field);
        json_object_object_foreach(from, k, v) {
                const char *value = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;

                if (!value || !cn_label_key_is_valid(k) ||
                    (labels ? !cn_label_value_is_valid(value) : strlen(value) > ANNOTATION_VALUE_MAX))
                        return fail(ret_reason, labels ? "metadata.labels" : "metadata.annotations", k);
                if ((existing && json_object_object_get_ex(existing, k, NULL)) ||
                    cn_json_get(patch, "metadata", field, k, NULL))
                        continue;
                if (cn_json_set_string(patch, value, "metadata", field, k, NULL) < 0)
                        return -ENOMEM;
                (*n)++;
        }
        return 0;
}

static int add_taints(json_object *patch, json_object *machine, json_object *node, size_t *n, char **ret_reason) {
        json_object *want = cn_json_get(machine, "spec", "taints", NULL), *have = cn_json_get(node, "spec", "taints", NULL);
        _cleanup_json_ json_object *list = NULL;
        size_t added = 0;

        if (!want)
                return 0;
        if (!json_object_is_type(want, json_type_array))
                return fail(ret_reason, "taints", "(not a list)");
        list = json_object_new_array();
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; have && json_object_is_type(have, json_type_array) && i < json_object_array_length(have); i++)
                if (json_object_array_add(list, json_object_get(json_object_array_get_idx(have, i))) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(want); i++) {
                json_object *t = json_object_array_get_idx(want, i), *copy = NULL;
                const char *key = cn_json_string(t, "key", NULL), *effect = cn_json_string(t, "effect", NULL);
                const char *value = cn_json_string(t, "value", NULL);

                if (!key || !cn_label_key_is_valid(key) || !taint_effect_valid(effect) ||
                    (value && !cn_label_value_is_valid(value)))
                        return fail(ret_reason, "taints", key ?: "(no key)");
                if (node_has_taint(list, key, effect))
                        continue;
                copy = json_object_new_object();
                if (!copy || cn_json_set_string(copy, key, "key", NULL) < 0 ||
                    (value && cn_json_set_string(copy, value, "value", NULL) < 0) ||
                    cn_json_set_string(copy, effect, "effect", NULL) < 0 || json_object_array_add(list, copy) < 0) {
                        json_object_put(copy);
                        return -ENOMEM;
                }
                added++;
        }
        if (added == 0)
                return 0;
        *n += added;
        return cn_json_set(patch, TAKE_PTR(list), "spec", "taints", NULL);
}

int mc_node_metadata_patch(json_object *machine, json_object *node, bool ready, json_object **ret,
                           char **ret_reason) {
        _cleanup_json_ json_object *patch = json_object_new_object();
        _cleanup_free_ char *id = NULL;
        const char *uid = cn_json_string(machine, "metadata", "uid", NULL);
        const char *rv = cn_json_string(node, "metadata", "resourceVersion", NULL);
        size_t n = 0;
        int r;

        if (!patch)
                return -ENOMEM;
        if (!uid || !rv)
                return -EBADMSG;
        if (!streq(strempty(cn_json_string(node, "metadata", "labels", MC_LABEL_NODE_OWNER, NULL)), uid)) {
                if (cn_json_set_string(patch, uid, "metadata", "labels", MC_LABEL_NODE_OWNER, NULL) < 0)
                        return -ENOMEM;
                n++;
        }
        if (ready) {
                if (asprintf(&id, "%s/%s", strempty(cn_json_string(machine, "metadata", "namespace", NULL)),
                             strempty(cn_json_string(machine, "metadata", "name", NULL))) < 0)
                        return -ENOMEM;
                if (!streq(strempty(cn_json_string(node, "metadata", "annotations", MC_ANNOTATION_AUTOSCALER, NULL)),
                           id)) {
                        if (cn_json_set_string(patch, id, "metadata", "annotations", MC_ANNOTATION_AUTOSCALER,
                                               NULL) < 0)
                                return -ENOMEM;
                        n++;
                }
                r = add_missing(patch, "labels", cn_json_get(machine, "spec", "metadata", "labels", NULL),
                                cn_json_get(node, "metadata", "labels", NULL), true, &n, ret_reason);
                if (r >= 0)
                        r = add_missing(patch, "annotations", cn_json_get(machine, "spec", "metadata", "annotations", NULL),
                                        cn_json_get(node, "metadata", "annotations", NULL), false, &n, ret_reason);
                if (r >= 0)
                        r = add_taints(patch, machine, node, &n, ret_reason);
                if (r < 0)
                        return r;
        }
        if (n == 0)
                return -EALREADY;
        if (cn_json_set_string(patch, rv, "metadata", "resourceVersion", NULL) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(patch);
        return 0;
}
