/* SPDX-License-Identifier: Apache-2.0 */
/* Infrastructure cluster contract decisions. See cluster-reconcile.h. */
#include <errno.h>

#include "cluster-reconcile.h"
#include "json-util.h"
#include "machine-reconcile.h"

static const char *const step_table[_CN_CLUSTER_STEP_MAX] = {
        [CN_CLUSTER_PAUSED] = "paused",
        [CN_CLUSTER_ADD_FINALIZER] = "add-finalizer",
        [CN_CLUSTER_WAIT_OWNER] = "wait-owner",
        [CN_CLUSTER_PROVISION] = "provision",
        [CN_CLUSTER_REMOVE_FINALIZER] = "remove-finalizer",
        [CN_CLUSTER_GONE] = "gone",
};

const char *cn_cluster_step_to_string(CnClusterStep s) {
        return s >= 0 && s < _CN_CLUSTER_STEP_MAX ? step_table[s] : NULL;
}

const char *cn_cluster_owner_name(json_object *infra_cluster) {
        return cn_capi_owner_name(infra_cluster, "Cluster");
}

CnClusterStep cn_cluster_next_step(json_object *infra_cluster, json_object *cluster) {
        bool has = cn_capi_has_finalizer(infra_cluster, CN_CLUSTER_FINALIZER);

        if (cn_capi_paused(infra_cluster, cluster))
                return CN_CLUSTER_PAUSED;
        if (cn_json_get(infra_cluster, "metadata", "deletionTimestamp", NULL))
                /* A Cluster that is already gone must not block deletion. */
                return has ? CN_CLUSTER_REMOVE_FINALIZER : CN_CLUSTER_GONE;
        if (!has)
                return CN_CLUSTER_ADD_FINALIZER;
        if (!cn_cluster_owner_name(infra_cluster) || !cluster)
                return CN_CLUSTER_WAIT_OWNER;
        return CN_CLUSTER_PROVISION;
}

static json_object *find_condition(json_object *conditions, const char *type) {
        for (size_t i = 0; conditions && json_object_is_type(conditions, json_type_array) &&
                           i < json_object_array_length(conditions);
             i++) {
                json_object *c = json_object_array_get_idx(conditions, i);
                const char *t = cn_json_string(c, "type", NULL);

                if (t && streq(t, type))
                        return c;
        }
        return NULL;
}

static json_object *find_condition(json_object *conditions, const char *type);

static bool ready_condition_true(json_object *infra_cluster) {
        const char *st = cn_json_string(find_condition(cn_json_get(infra_cluster, "status", "conditions", NULL), "Ready"),
                                        "status", NULL);

        return st && streq(st, "True");
}

int cn_cluster_recorded_failure_domains(json_object *infra_cluster, json_object **ret) {
        json_object *fds = cn_json_get(infra_cluster, "status", "failureDomains", NULL);
        int64_t observed = -1, generation = 0;

        (void) cn_json_get_int64(infra_cluster, &observed, "status", "observedGeneration", NULL);
        (void) cn_json_get_int64(infra_cluster, &generation, "metadata", "generation", NULL);
        if (!cn_capi_is_true(infra_cluster, "status", "initialization", "provisioned", NULL) ||
            !cn_capi_is_true(infra_cluster, "status", "ready", NULL) || observed != generation || !fds ||
            !json_object_is_type(fds, json_type_array) || !ready_condition_true(infra_cluster))
                return -ENOENT;
        *ret = fds;
        return 0;
}

int cn_conditions_set(json_object *conditions, const char *type, bool status, const char *reason,
                      const char *message, const char *now, json_object **ret) {
        _cleanup_json_ json_object *list = json_object_new_array(), *c = json_object_new_object();
        json_object *old = find_condition(conditions, type);
        const char *s = status ? "True" : "False", *old_status = cn_json_string(old, "status", NULL);
        const char *ltt = old_status && streq(old_status, s) ? cn_json_string(old, "lastTransitionTime", NULL) : now;
        int r;

        if (!list || !c)
                return -ENOMEM;
        for (size_t i = 0; conditions && json_object_is_type(conditions, json_type_array) &&
                           i < json_object_array_length(conditions);
             i++) {
                json_object *o = json_object_array_get_idx(conditions, i);

                if (o != old && json_object_array_add(list, json_object_get(o)) < 0)
                        return -ENOMEM;
        }
        r = cn_json_set_string(c, type, "type", NULL);
        if (r >= 0)
                r = cn_json_set_string(c, s, "status", NULL);
        if (r >= 0)
                r = cn_json_set_string(c, reason, "reason", NULL);
        if (r >= 0)
                r = cn_json_set_string(c, strempty(message), "message", NULL);
        if (r >= 0 && ltt)
                r = cn_json_set_string(c, ltt, "lastTransitionTime", NULL);
        if (r < 0)
                return r;
        if (json_object_array_add(list, TAKE_PTR(c)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(list);
        return 0;
}

/* Whether the condition list says the same, timestamps aside (order aside too: it is a map). */
static bool conditions_same(json_object *a, json_object *b) {
        static const char *const keys[] = { "status", "reason", "message" };
        size_t na = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
        size_t nb = b && json_object_is_type(b, json_type_array) ? json_object_array_length(b) : 0;

        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++) {
                json_object *x = json_object_array_get_idx(a, i), *y;
                const char *t = cn_json_string(x, "type", NULL);

                y = t ? find_condition(b, t) : NULL;
                if (!y)
                        return false;
                for (size_t j = 0; j < ELEMENTSOF(keys); j++)
                        if (!streq(strempty(cn_json_string(x, keys[j], NULL)),
                                   strempty(cn_json_string(y, keys[j], NULL))))
                                return false;
        }
        return true;
}

int cn_cluster_status_patch(json_object *infra_cluster, json_object *failure_domains, int64_t generation, bool paused,
                            const char *reason, const char *message, const char *now, json_object **ret) {
        _cleanup_json_ json_object *patch = json_object_new_object(), *with_paused = NULL, *conds = NULL;
        json_object *live = cn_json_get(infra_cluster, "status", "conditions", NULL);
        bool changed = false;
        int64_t observed = -1;
        int r;

        if (!patch)
                return -ENOMEM;
        (void) cn_json_get_int64(infra_cluster, &observed, "status", "observedGeneration", NULL);
        r = cn_conditions_set(live, "Paused", paused, paused ? "Paused" : "NotPaused", NULL, now, &with_paused);
        if (r < 0)
                return r;
        if (failure_domains)
                r = cn_conditions_set(with_paused, "Ready", true, "Provisioned", NULL, now, &conds);
        else if (reason)
                r = cn_conditions_set(with_paused, "Ready", false, reason, message, now, &conds);
        else
                conds = json_object_get(with_paused);
        if (r < 0)
                return r;
        if (!conditions_same(live, conds)) {
                r = cn_json_set(patch, json_object_get(conds), "status", "conditions", NULL);
                if (r < 0)
                        return r;
                changed = true;
        }
        if (failure_domains &&
            (!cn_capi_is_true(infra_cluster, "status", "ready", NULL) ||
             !cn_capi_is_true(infra_cluster, "status", "initialization", "provisioned", NULL) ||
             !cn_json_equal(cn_json_get(infra_cluster, "status", "failureDomains", NULL), failure_domains) ||
             observed != generation)) {
                r = cn_json_set(patch, json_object_get(failure_domains), "status", "failureDomains", NULL);
                if (r >= 0)
                        r = cn_json_set(patch, json_object_new_int64(generation), "status", "observedGeneration",
                                        NULL);
                if (r >= 0)
                        r = cn_json_set(patch, json_object_new_boolean(true), "status", "ready", NULL);
                if (r >= 0)
                        r = cn_json_set(patch, json_object_new_boolean(true), "status", "initialization",
                                        "provisioned", NULL);
                if (r < 0)
                        return r;
                changed = true;
        }
        *ret = changed ? TAKE_PTR(patch) : NULL;
        return 0;
}

bool cn_cluster_wants_load_balancer(json_object *infra_cluster) {
        json_object *lb = cn_json_get(infra_cluster, "spec", "controlPlaneLoadBalancer", NULL);
        bool enabled = true;

        if (!lb || !json_object_is_type(lb, json_type_object))
                return false;
        (void) cn_json_get_bool(lb, &enabled, "enabled", NULL);
        return enabled;
}

bool cn_cluster_has_endpoint(json_object *infra_cluster) {
        return !isempty(cn_json_string(infra_cluster, "spec", "controlPlaneEndpoint", "host", NULL));
}

int cn_cluster_endpoint_patch(json_object *infra_cluster, json_object *lb_view, json_object **ret) {
        _cleanup_json_ json_object *patch = NULL;
        const char *host = cn_json_string(lb_view, "host", NULL);
        int64_t port = 0;
        int r;

        if (isempty(host) || cn_json_get_int64(lb_view, &port, "port", NULL) < 0 || port < 1 || port > 65535)
                return -EBADMSG;
        if (cn_cluster_has_endpoint(infra_cluster)) {
                *ret = NULL;
                return 0;
        }
        patch = json_object_new_object();
        if (!patch)
                return -ENOMEM;
        r = cn_json_set_string(patch, host, "spec", "controlPlaneEndpoint", "host", NULL);
        if (r >= 0)
                r = cn_json_set(patch, json_object_new_int64(port), "spec", "controlPlaneEndpoint", "port", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(patch);
        return 0;
}
