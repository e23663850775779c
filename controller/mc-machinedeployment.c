/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment decisions. See mc-machinedeployment.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash-util.h"
#include "json-util.h"
#include "mc-machinedeployment.h"
#include "mc-machineset.h"
#include "string-util.h"

int mc_template_hash(json_object *md, char ret[static 11]) {
        _cleanup_free_ char *text = NULL;
        char hex[CN_SHA256_HEX_SIZE];
        int r;

        r = cn_json_to_string(cn_json_get(md, "spec", "template", NULL), CN_JSON_COMPACT, &text);
        if (r < 0)
                return r;
        r = cn_sha256_hex(text, strlen(text), hex);
        if (r < 0)
                return r;
        memcpy(ret, hex, 10);
        ret[10] = 0;
        return 0;
}

int mc_deployment_new_set(json_object *md, const char *hash, unsigned revision, json_object **ret) {
        _cleanup_json_ json_object *set = json_object_new_object();
        const char *name = cn_json_string(md, "metadata", "name", NULL), *uid = cn_json_string(md, "metadata", "uid", NULL);
        json_object *copy = NULL;
        _cleanup_free_ char *set_name = NULL;
        char rev[16];
        int r;

        if (!set)
                return -ENOMEM;
        if (!name || !uid)
                return -EINVAL;
        if (asprintf(&set_name, "%s-%s", name, hash) < 0)
                return -ENOMEM;
        (void) snprintf(rev, sizeof(rev), "%u", revision);
        if (json_object_deep_copy(cn_json_get(md, "spec", "template", NULL), &copy, NULL) < 0)
                return -ENOMEM;
        r = cn_json_set(set, copy, "spec", "template", NULL);
        copy = NULL;
        if (r >= 0 && json_object_deep_copy(cn_json_get(md, "spec", "selector", NULL), &copy, NULL) < 0)
                r = -ENOMEM;
        if (r >= 0)
                r = cn_json_set(set, copy ?: json_object_new_object(), "spec", "selector", NULL);
        if (r >= 0)
                r = cn_json_set_string(set, hash, "spec", "selector", "matchLabels", MC_LABEL_TEMPLATE_HASH, NULL);
        if (r >= 0)
                r = cn_json_set_string(set, hash, "spec", "template", "metadata", "labels", MC_LABEL_TEMPLATE_HASH, NULL);
        if (r >= 0)
                r = cn_json_set(set, json_object_new_int64(0), "spec", "replicas", NULL);
        if (r >= 0 && cn_json_get(md, "spec", "minReadySeconds", NULL))
                r = cn_json_set(set, json_object_get(cn_json_get(md, "spec", "minReadySeconds", NULL)), "spec",
                                "minReadySeconds", NULL);
        if (r >= 0 && cn_json_string(md, "spec", "deletePolicy", NULL))
                r = cn_json_set_string(set, cn_json_string(md, "spec", "deletePolicy", NULL), "spec", "deletePolicy", NULL);
        if (r >= 0)
                r = cn_json_set_string(set, "cluster.k8s.io/v1alpha1", "apiVersion", NULL);
        if (r >= 0)
                r = cn_json_set_string(set, "MachineSet", "kind", NULL);
        if (r >= 0)
                r = cn_json_set_string(set, set_name, "metadata", "name", NULL);
        if (r >= 0)
                r = cn_json_set_string(set, hash, "metadata", "labels", MC_LABEL_TEMPLATE_HASH, NULL);
        if (r >= 0)
                r = cn_json_set_string(set, rev, "metadata", "annotations", MC_ANNOTATION_REVISION, NULL);
        if (r >= 0)
                r = mc_set_controller_ref(set, "MachineDeployment", md);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(set);
        return 0;
}

/* An int or "N%" of total, rounded up or down; -EINVAL otherwise. */
static int int_or_percent(json_object *v, int64_t total, bool up, int64_t def, int64_t *ret) {
        const char *s;
        int64_t p;

        if (!v || json_object_is_type(v, json_type_null)) {
                *ret = def;
                return 0;
        }
        if (json_object_is_type(v, json_type_int)) {
                *ret = json_object_get_int64(v);
                return *ret < 0 ? -EINVAL : 0;
        }
        s = json_object_get_string(v);
        if (!json_object_is_type(v, json_type_string) || !cn_endswith(s, "%") ||
            cn_safe_atoi64(strndupa(s, strlen(s) - 1), &p) < 0 || p < 0 || p > 100)
                return -EINVAL;
        *ret = up ? (p * total + 99) / 100 : p * total / 100;
        return 0;
}

int mc_deployment_plan(json_object *md, const McSetView *sets, size_t n, int64_t *ret_replicas) {
        json_object *ru = cn_json_get(md, "spec", "strategy", "rollingUpdate", NULL);
        int64_t want = 1, surge, unavail, total = 0, cur = -1, down;
        int r;

        (void) cn_json_get_int64(md, &want, "spec", "replicas", NULL);
        if (want < 0)
                return -EINVAL;
        /* Kubernetes' defaults: 25% each. */
        r = int_or_percent(json_object_object_get(ru, "maxSurge"), want, true, (want * 25 + 99) / 100, &surge);
        if (r >= 0)
                r = int_or_percent(json_object_object_get(ru, "maxUnavailable"), want, false, want * 25 / 100, &unavail);
        if (r < 0)
                return r;
        if (surge == 0 && unavail == 0)
                unavail = 1;
        for (size_t i = 0; i < n; i++) {
                ret_replicas[i] = sets[i].replicas;
                total += sets[i].replicas;
                if (sets[i].current)
                        cur = (int64_t) i;
        }
        if (cur < 0)
                return -ENOENT;
        /* Up: the current set grows while the total stays within replicas + maxSurge. */
        if (ret_replicas[cur] < want && want + surge - total > 0) {
                ret_replicas[cur] = MIN(want, ret_replicas[cur] + (want + surge - total));
                total += ret_replicas[cur] - sets[cur].replicas;
        }
        if (ret_replicas[cur] > want) {
                total -= ret_replicas[cur] - want;
                ret_replicas[cur] = want;
        }
        /* Down: old sets shrink while the available Machines stay at replicas - maxUnavailable;
         * Machines that are not available can go at once (the Deployment controller's
         * cleanupUnhealthyReplicas, then its scale down). */
        {
                int64_t available = 0;

                for (size_t i = 0; i < n; i++)
                        available += MIN(sets[i].available, sets[i].replicas);
                down = available - (want - unavail);
        }
        for (size_t i = 0; i < n; i++) {
                int64_t unhealthy, step;

                if ((int64_t) i == cur || ret_replicas[i] == 0)
                        continue;
                unhealthy = MAX(0, sets[i].replicas - sets[i].available);
                step = MIN(ret_replicas[i], unhealthy);
                ret_replicas[i] -= step;
                if (down > 0) {
                        int64_t more = MIN(ret_replicas[i], down);

                        ret_replicas[i] -= more;
                        down -= more;
                }
        }
        return 0;
}

static int64_t int_at(json_object *o, const char *a, const char *b) {
        int64_t v = 0;

        (void) cn_json_get_int64(o, &v, a, b, NULL);
        return v;
}

McSetView mc_set_view(json_object *set, const char *hash) {
        const char *rev = cn_json_string(set, "metadata", "annotations", MC_ANNOTATION_REVISION, NULL);
        const char *created = cn_json_string(set, "metadata", "creationTimestamp", NULL);
        McSetView v = {
                .name = cn_json_string(set, "metadata", "name", NULL),
                .current = streq(strempty(cn_json_string(set, "metadata", "labels", MC_LABEL_TEMPLATE_HASH, NULL)),
                                 hash),
                .replicas = int_at(set, "spec", "replicas"),
                .available = int_at(set, "status", "availableReplicas"),
                .status_replicas = int_at(set, "status", "replicas"),
                .observed = int_at(set, "status", "observedGeneration") >= int_at(set, "metadata", "generation"),
        };

        if (!rev || cn_safe_atou(rev, &v.revision) < 0)
                v.revision = 0;
        if (!created || cn_parse_rfc3339(created, &v.created) < 0)
                v.created = 0;
        return v;
}

static bool non_negative_int(json_object *md, const char *key) {
        json_object *v = cn_json_get(md, "spec", key, NULL);

        return !v || json_object_is_type(v, json_type_null) ||
               (json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0 &&
                json_object_get_int64(v) <= INT32_MAX);
}

int mc_deployment_validate(json_object *md, char **ret_reason) {
        const char *type = cn_json_string(md, "spec", "strategy", "type", NULL);
        const char *why = NULL;

        if (cn_json_get(md, "spec", "strategy", "type", NULL) && !streq(strempty(type), "RollingUpdate"))
                why = "spec.strategy.type must be RollingUpdate: machine-controller has no other strategy";
        else if (!non_negative_int(md, "minReadySeconds"))
                why = "spec.minReadySeconds must be an integer of 0 or more";
        else if (!non_negative_int(md, "revisionHistoryLimit"))
                why = "spec.revisionHistoryLimit must be an integer of 0 or more";
        if (!why)
                return 0;
        if (ret_reason)
                *ret_reason = strdup(why);
        return -EINVAL;
}

int64_t mc_deployment_history_limit(json_object *md) {
        int64_t v = 1;

        (void) cn_json_get_int64(md, &v, "spec", "revisionHistoryLimit", NULL);
        return MAX(v, 0);
}

void mc_deployment_cleanup(json_object *md, bool complete, const McSetView *sets, size_t n, bool *ret_delete) {
        size_t old = 0, order[n ?: 1];
        int64_t diff;

        for (size_t i = 0; i < n; i++) {
                ret_delete[i] = false;
                if (!sets[i].current)
                        order[old++] = i;
        }
        diff = (int64_t) old - mc_deployment_history_limit(md);
        if (!complete || diff <= 0)
                return;
        /* Oldest first (insertion sort: a deployment has few sets). */
        for (size_t i = 1; i < old; i++)
                for (size_t j = i; j > 0 && sets[order[j]].created < sets[order[j - 1]].created; j--) {
                        size_t t = order[j];

                        order[j] = order[j - 1];
                        order[j - 1] = t;
                }
        for (size_t i = 0; i < (size_t) diff; i++) {
                const McSetView *v = &sets[order[i]];

                if (v->replicas != 0 || v->status_replicas != 0 || !v->observed)
                        continue;
                ret_delete[order[i]] = true;
        }
}
