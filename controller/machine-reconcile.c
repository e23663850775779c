/* SPDX-License-Identifier: Apache-2.0 */
/* Infrastructure machine contract decisions. See machine-reconcile.h. */
#include <errno.h>

#include "cluster-reconcile.h"
#include "json-util.h"
#include "machine-reconcile.h"

static const char *const step_table[_CN_MACHINE_STEP_MAX] = {
        [CN_MACHINE_PAUSED] = "paused",
        [CN_MACHINE_ADD_FINALIZER] = "add-finalizer",
        [CN_MACHINE_WAIT_OWNER] = "wait-owner",
        [CN_MACHINE_WAIT_INFRA] = "wait-infrastructure",
        [CN_MACHINE_WAIT_BOOTSTRAP] = "wait-bootstrap-data",
        [CN_MACHINE_FAILED] = "failed",
        [CN_MACHINE_LOOKUP_OR_CREATE] = "lookup-or-create",
        [CN_MACHINE_POLL] = "poll",
        [CN_MACHINE_READY] = "ready",
        [CN_MACHINE_CLEANUP] = "cleanup",
        [CN_MACHINE_REMOVE_FINALIZER] = "remove-finalizer",
        [CN_MACHINE_GONE] = "gone",
};

const char *cn_machine_step_to_string(CnMachineStep s) {
        return s >= 0 && s < _CN_MACHINE_STEP_MAX ? step_table[s] : NULL;
}

bool cn_capi_has_finalizer(json_object *o, const char *finalizer) {
        json_object *f = cn_json_get(o, "metadata", "finalizers", NULL);

        for (size_t i = 0; f && json_object_is_type(f, json_type_array) && i < json_object_array_length(f); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(f, i));

                if (s && streq(s, finalizer))
                        return true;
        }
        return false;
}

int cn_capi_finalizer_patch(json_object *o, const char *finalizer, bool add, json_object **ret) {
        _cleanup_json_ json_object *patch = json_object_new_object(), *list = json_object_new_array();
        json_object *cur = cn_json_get(o, "metadata", "finalizers", NULL);
        const char *rv = cn_json_string(o, "metadata", "resourceVersion", NULL);
        int r;

        if (!patch || !list)
                return -ENOMEM;
        for (size_t i = 0; cur && json_object_is_type(cur, json_type_array) && i < json_object_array_length(cur); i++) {
                const char *f = json_object_get_string(json_object_array_get_idx(cur, i));

                if (f && !streq(f, finalizer) && json_object_array_add(list, json_object_new_string(f)) < 0)
                        return -ENOMEM;
        }
        if (add && json_object_array_add(list, json_object_new_string(finalizer)) < 0)
                return -ENOMEM;
        r = cn_json_set(patch, TAKE_PTR(list), "metadata", "finalizers", NULL);
        /* The precondition: a finalizer list read from a stale cache must not overwrite another's. */
        if (r >= 0 && rv)
                r = cn_json_set_string(patch, rv, "metadata", "resourceVersion", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(patch);
        return 0;
}

static bool has_finalizer(json_object *o) {
        return cn_capi_has_finalizer(o, CN_MACHINE_FINALIZER);
}

bool cn_capi_patch_changes(json_object *o, json_object *patch) {
        if (!json_object_is_type(patch, json_type_object) || !json_object_is_type(o, json_type_object))
                return !cn_json_equal(o, patch);
        json_object_object_foreach(patch, k, v) {
                json_object *cur = NULL;
                bool has = json_object_object_get_ex(o, k, &cur);

                /* null deletes the member */
                if (!v ? has : !has || cn_capi_patch_changes(cur, v))
                        return true;
        }
        return false;
}

bool cn_capi_is_true(json_object *o, ...) {
        json_object *v;
        va_list ap;

        va_start(ap, o);
        v = cn_json_getv(o, ap);
        va_end(ap);
        return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

const char *cn_capi_owner_name(json_object *o, const char *kind) {
        json_object *refs = cn_json_get(o, "metadata", "ownerReferences", NULL);

        for (size_t i = 0; refs && json_object_is_type(refs, json_type_array) && i < json_object_array_length(refs);
             i++) {
                json_object *ref = json_object_array_get_idx(refs, i);
                const char *k = cn_json_string(ref, "kind", NULL), *av = cn_json_string(ref, "apiVersion", NULL);

                if (k && av && streq(k, kind) && strneq(av, "cluster.x-k8s.io/", 17))
                        return cn_json_string(ref, "name", NULL);
        }
        return NULL;
}

const char *cn_machine_owner_name(json_object *infra_machine) {
        return cn_capi_owner_name(infra_machine, "Machine");
}

bool cn_capi_paused(json_object *object, json_object *cluster) {
        return cn_capi_is_true(cluster, "spec", "paused", NULL) ||
               cn_json_get(object, "metadata", "annotations", CN_MACHINE_PAUSED_ANNOTATION, NULL);
}

static bool cluster_infra_ready(json_object *cluster) {
        /* v1beta2 first, v1beta1 as fallback: Cluster API writes both during the transition. */
        return cn_capi_is_true(cluster, "status", "initialization", "infrastructureProvisioned", NULL) ||
               cn_capi_is_true(cluster, "status", "infrastructureReady", NULL);
}

bool cn_machine_moved(json_object *infra_machine) {
        const char *labeled = cn_json_string(infra_machine, "status", "instanceLabelUID", NULL);
        const char *uid = cn_json_string(infra_machine, "metadata", "uid", NULL);

        if (!cn_json_string(infra_machine, "spec", "providerID", NULL) &&
            !cn_json_string(infra_machine, "status", "instanceID", NULL))
                return false;
        return !labeled || !uid || !streq(labeled, uid);
}

CnMachineStep cn_machine_next_step(json_object *infra_machine, json_object *machine, json_object *cluster,
                                   bool instance_gone) {
        bool deleting = cn_json_get(infra_machine, "metadata", "deletionTimestamp", NULL) != NULL;

        if (cn_capi_paused(infra_machine, cluster))
                return CN_MACHINE_PAUSED;
        if (deleting) {
                /* A Machine or Cluster that is already gone must not block deletion. */
                if (!has_finalizer(infra_machine))
                        return CN_MACHINE_GONE;
                return instance_gone ? CN_MACHINE_REMOVE_FINALIZER : CN_MACHINE_CLEANUP;
        }
        if (!has_finalizer(infra_machine))
                return CN_MACHINE_ADD_FINALIZER;
        if (cn_json_string(infra_machine, "status", "failureReason", NULL))
                return CN_MACHINE_FAILED;
        if (!machine || !cn_machine_owner_name(infra_machine))
                return CN_MACHINE_WAIT_OWNER;
        if (!cluster || !cluster_infra_ready(cluster))
                return CN_MACHINE_WAIT_INFRA;
        if (!cn_json_string(infra_machine, "status", "instanceID", NULL)) {
                if (!cn_json_string(machine, "spec", "bootstrap", "dataSecretName", NULL))
                        return CN_MACHINE_WAIT_BOOTSTRAP;
                return CN_MACHINE_LOOKUP_OR_CREATE;
        }
        if (!cn_machine_moved(infra_machine) &&
            cn_capi_is_true(infra_machine, "status", "initialization", "provisioned", NULL) &&
            cn_capi_is_true(infra_machine, "status", "ready", NULL) && cn_json_string(infra_machine, "spec", "providerID", NULL))
                return CN_MACHINE_READY;
        return CN_MACHINE_POLL;
}

int cn_machine_failure_domain(json_object *machine, json_object *cluster, const char **ret) {
        const char *want = cn_json_string(machine, "spec", "failureDomain", NULL);
        json_object *fds = cn_json_get(cluster, "status", "failureDomains", NULL);

        if (isempty(want)) {
                *ret = NULL;
                return 0;
        }
        for (size_t i = 0; fds && json_object_is_type(fds, json_type_array) && i < json_object_array_length(fds); i++)
                if (streq(strempty(cn_json_string(json_object_array_get_idx(fds, i), "name", NULL)), want)) {
                        *ret = want;
                        return 0;
                }
        return -ENOENT;
}

int cn_machine_place(json_object *spec, const char *field, const char *failure_domain, json_object **ret) {
        _cleanup_json_ json_object *copy = NULL;
        int r;

        if (!spec || !field)
                return -EINVAL;
        r = json_object_deep_copy(spec, &copy, NULL);
        if (r < 0 || !copy)
                return -ENOMEM;
        r = cn_json_set_string(copy, failure_domain, field, NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(copy);
        return 0;
}

CnMachineMatch cn_machine_match(json_object *instances) {
        size_t n = instances && json_object_is_type(instances, json_type_array) ? json_object_array_length(instances) : 0;

        return n == 0 ? CN_MACHINE_MATCH_NONE : n == 1 ? CN_MACHINE_MATCH_ONE : CN_MACHINE_MATCH_MANY;
}

int cn_machine_status_patch(json_object *live_conditions, const char *now, const char *instance_id,
                            const char *instance_state, json_object *addresses, bool ready, const char *reason,
                            const char *message, json_object **ret) {
        _cleanup_json_ json_object *p = json_object_new_object(), *conds = NULL;
        int r;

        if (!p)
                return -ENOMEM;
        r = cn_conditions_set(live_conditions, "Ready", ready, reason, message, now, &conds);
        if (r < 0)
                return r;
        if (instance_id) {
                r = cn_json_set_string(p, instance_id, "status", "instanceID", NULL);
                if (r < 0)
                        return r;
        }
        if (instance_state) {
                r = cn_json_set_string(p, instance_state, "status", "instanceState", NULL);
                if (r < 0)
                        return r;
        }
        if (addresses) {
                r = cn_json_set(p, json_object_get(addresses), "status", "addresses", NULL);
                if (r < 0)
                        return r;
        }
        r = cn_json_set(p, json_object_new_boolean(ready), "status", "ready", NULL);
        if (r >= 0)
                r = cn_json_set(p, json_object_new_boolean(ready), "status", "initialization", "provisioned", NULL);
        if (r >= 0)
                r = cn_json_set(p, json_object_get(conds), "status", "conditions", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}
