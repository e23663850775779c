/* SPDX-License-Identifier: Apache-2.0 */
/* Status conditions. See controller-status.h. */
#include <errno.h>

#include "controller-status.h"
#include "json-util.h"

static json_object *find_condition(json_object *conditions, const char *type) {
        if (!conditions || !json_object_is_type(conditions, json_type_array))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(conditions); i++) {
                json_object *c = json_object_array_get_idx(conditions, i);
                const char *t = cn_json_string(c, "type", NULL);

                if (t && streq(t, type))
                        return c;
        }
        return NULL;
}

static bool string_field_is(json_object *o, const char *key, const char *value) {
        const char *s = cn_json_string(o, key, NULL);

        return streq(strempty(s), strempty(value));
}

int cn_status_conditions(const CnCondition *conditions, size_t n, json_object *live_conditions, usec_t now,
                         json_object **ret, bool *ret_changed) {
        _cleanup_json_ json_object *a = json_object_new_array();
        char ts[CN_FORMAT_TIMESTAMP_MAX];
        bool changed = false;
        int r;

        if (!a)
                return -ENOMEM;
        r = cn_format_rfc3339(now, false, ts, sizeof ts);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                json_object *old = find_condition(live_conditions, conditions[i].type), *c;
                const char *status = conditions[i].status ? "True" : "False";
                bool same_status = old && string_field_is(old, "status", status);
                const char *old_ts = same_status ? cn_json_string(old, "lastTransitionTime", NULL) : NULL;

                if (!same_status || !string_field_is(old, "reason", conditions[i].reason) ||
                    !string_field_is(old, "message", conditions[i].message))
                        changed = true;
                c = json_object_new_object();
                if (!c || json_object_array_add(a, c) < 0) {
                        json_object_put(c);
                        return -ENOMEM;
                }
                r = cn_json_set_string(c, conditions[i].type, "type", NULL);
                if (r >= 0)
                        r = cn_json_set_string(c, status, "status", NULL);
                if (r >= 0)
                        r = cn_json_set_string(c, conditions[i].reason, "reason", NULL);
                if (r >= 0)
                        r = cn_json_set_string(c, strempty(conditions[i].message), "message", NULL);
                if (r >= 0)
                        r = cn_json_set_string(c, old_ts ?: ts, "lastTransitionTime", NULL);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(a);
        if (ret_changed)
                *ret_changed = changed;
        return 0;
}
