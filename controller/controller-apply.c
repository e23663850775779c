/* SPDX-License-Identifier: Apache-2.0 */
/* Apply decisions. See controller-apply.h. */
#include <errno.h>

#include "controller-apply.h"
#include "controller-operand.h"
#include "json-util.h"

static const char *const action_table[_CN_APPLY_ACTION_MAX] = {
        [CN_APPLY_NONE] = "none",
        [CN_APPLY_CREATE] = "create",
        [CN_APPLY_PATCH] = "patch",
        [CN_APPLY_RECREATE] = "recreate",
};

const char *cn_apply_action_to_string(CnApplyAction a) {
        return a >= 0 && a < _CN_APPLY_ACTION_MAX ? action_table[a] : NULL;
}

bool cn_json_contains(json_object *want, json_object *have) {
        if (!want)
                return !have;
        if (!have)
                return false;
        if (json_object_is_type(want, json_type_object)) {
                if (!json_object_is_type(have, json_type_object))
                        return false;
                json_object_object_foreach(want, k, v)
                        if (!cn_json_contains(v, json_object_object_get(have, k)))
                                return false;
                return true;
        }
        if (json_object_is_type(want, json_type_array)) {
                size_t n = json_object_array_length(want);

                if (!json_object_is_type(have, json_type_array) || json_object_array_length(have) != n)
                        return false;
                for (size_t i = 0; i < n; i++)
                        if (!cn_json_contains(json_object_array_get_idx(want, i), json_object_array_get_idx(have, i)))
                                return false;
                return true;
        }
        return cn_json_equal(want, have);
}

/* Fields the API server refuses to change in place. */
static bool immutable_differs(json_object *desired, json_object *live) {
        const char *kind = cn_json_string(desired, "kind", NULL);

        if (!kind)
                return false;
        if (streq(kind, "Deployment"))
                return !cn_json_equal(cn_json_get(desired, "spec", "selector", NULL),
                                      cn_json_get(live, "spec", "selector", NULL));
        if (streq(kind, "RoleBinding") || streq(kind, "ClusterRoleBinding"))
                return !cn_json_equal(json_object_object_get(desired, "roleRef"),
                                      json_object_object_get(live, "roleRef"));
        return false;
}

CnApplyAction cn_apply_decide(json_object *desired, json_object *live) {
        if (!live)
                return CN_APPLY_CREATE;
        if (immutable_differs(desired, live))
                return CN_APPLY_RECREATE;
        /* The hash alone would miss drift that kept our annotation; the field check alone would
         * miss a removed field the server filled back with a default. Both must match. */
        if (!cn_json_equal(cn_json_get(desired, "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL),
                           cn_json_get(live, "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL)))
                return CN_APPLY_PATCH;
        json_object_object_foreach(desired, k, v) {
                if (streq(k, "apiVersion") || streq(k, "kind"))
                        continue;
                if (!cn_json_contains(v, json_object_object_get(live, k)))
                        return CN_APPLY_PATCH;
        }
        return CN_APPLY_NONE;
}

int cn_apply_patch(json_object *desired, json_object *live, json_object **ret) {
        _cleanup_json_ json_object *patch = NULL;
        const char *rv = cn_json_string(live, "metadata", "resourceVersion", NULL);
        int r;

        r = json_object_deep_copy(desired, &patch, NULL);
        if (r < 0)
                return -ENOMEM;
        json_object_object_del(patch, "apiVersion");
        json_object_object_del(patch, "kind");
        if (rv) {
                r = cn_json_set_string(patch, rv, "metadata", "resourceVersion", NULL);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(patch);
        return 0;
}
