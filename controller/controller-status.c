/* SPDX-License-Identifier: Apache-2.0 */
/* Status conditions. See controller-status.h. */
#include <errno.h>

#include "controller-status.h"
#include "json-util.h"

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
                json_object *old = cn_json_array_find(live_conditions, "type", conditions[i].type), *c;
                const char *status = conditions[i].status ? "True" : "False";
                bool same_status = old && cn_json_string_is(old, "status", status);
                const char *old_ts = same_status ? cn_json_string(old, "lastTransitionTime", NULL) : NULL;

                if (!same_status || !cn_json_string_is(old, "reason", conditions[i].reason) ||
                    !cn_json_string_is(old, "message", conditions[i].message))
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
