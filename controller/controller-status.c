/* SPDX-License-Identifier: Apache-2.0 */
/* Status conditions. See controller-status.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller-status.h"
#include "json-util.h"

int cn_status_rollout(json_object *deployment, bool *ret_available, bool *ret_progressing, char **ret_message) {
        int64_t desired = 1, updated = 0, available = 0, generation = 0, observed = 0;
        char *message;

        if (!deployment) {
                message = strdup("the initializer Deployment does not exist yet");
                if (!message)
                        return -ENOMEM;
                *ret_available = false;
                *ret_progressing = true;
                *ret_message = message;
                return 0;
        }
        (void) cn_json_get_int64(deployment, &desired, "spec", "replicas", NULL);
        (void) cn_json_get_int64(deployment, &updated, "status", "updatedReplicas", NULL);
        (void) cn_json_get_int64(deployment, &available, "status", "availableReplicas", NULL);
        (void) cn_json_get_int64(deployment, &generation, "metadata", "generation", NULL);
        (void) cn_json_get_int64(deployment, &observed, "status", "observedGeneration", NULL);
        if (asprintf(&message, "Deployment %s: %" PRIi64 " of %" PRIi64 " replicas updated, %" PRIi64 " available",
                     strna(cn_json_string(deployment, "metadata", "name", NULL)), updated, desired, available) < 0)
                return -ENOMEM;
        *ret_available = available >= 1 || desired == 0;
        *ret_progressing = observed < generation || updated < desired || available < desired;
        *ret_message = message;
        return 0;
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
