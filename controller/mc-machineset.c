/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineSet decisions. See mc-machineset.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash-util.h"
#include "json-util.h"
#include "mc-machineset.h"
#include "string-util.h"

static bool in_values(json_object *values, const char *v) {
        for (size_t i = 0; v && values && json_object_is_type(values, json_type_array) &&
                           i < json_object_array_length(values); i++)
                if (streq(strempty(json_object_get_string(json_object_array_get_idx(values, i))), v))
                        return true;
        return false;
}

int mc_selector_matches(json_object *selector, json_object *labels) {
        json_object *ml = json_object_object_get(selector, "matchLabels");
        json_object *me = json_object_object_get(selector, "matchExpressions");
        size_t n = 0;

        if (ml && json_object_is_type(ml, json_type_object)) {
                json_object_object_foreach(ml, k, v) {
                        const char *have = cn_json_string(labels, k, NULL);

                        n++;
                        if (!have || !streq(have, strempty(json_object_get_string(v))))
                                return 0;
                }
        }
        for (size_t i = 0; me && json_object_is_type(me, json_type_array) && i < json_object_array_length(me); i++) {
                json_object *e = json_object_array_get_idx(me, i);
                const char *key = cn_json_string(e, "key", NULL), *op = cn_json_string(e, "operator", NULL);
                const char *have = key ? cn_json_string(labels, key, NULL) : NULL;
                json_object *values = json_object_object_get(e, "values");

                n++;
                if (!key || !op)
                        return -EINVAL;
                if (streq(op, "In")) {
                        if (!in_values(values, have))
                                return 0;
                } else if (streq(op, "NotIn")) {
                        if (in_values(values, have))
                                return 0;
                } else if (streq(op, "Exists")) {
                        if (!have)
                                return 0;
                } else if (streq(op, "DoesNotExist")) {
                        if (have)
                                return 0;
                } else
                        return -EINVAL;
        }
        return n > 0;
}

bool mc_owned_by(json_object *machine, const char *kind, const char *uid) {
        json_object *refs = cn_json_get(machine, "metadata", "ownerReferences", NULL);

        for (size_t i = 0; refs && json_object_is_type(refs, json_type_array) && i < json_object_array_length(refs); i++) {
                json_object *r = json_object_array_get_idx(refs, i);
                json_object *ctl = json_object_object_get(r, "controller");

                if (ctl && json_object_get_boolean(ctl) && streq(strempty(cn_json_string(r, "kind", NULL)), kind) &&
                    streq(strempty(cn_json_string(r, "uid", NULL)), uid))
                        return true;
        }
        return false;
}

/* dst.a(.b) = a copy of src, when there is a src */
static int copy_into(json_object *dst, json_object *src, const char *a, const char *b) {
        json_object *copy = NULL;

        if (!src)
                return 0;
        if (json_object_deep_copy(src, &copy, NULL) < 0)
                return -ENOMEM;
        return b ? cn_json_set(dst, copy, a, b, NULL) : cn_json_set(dst, copy, a, NULL);
}

int mc_set_controller_ref(json_object *o, const char *kind, json_object *owner) {
        _cleanup_json_ json_object *ref = json_object_new_object(), *refs = json_object_new_array();
        int r;

        if (!ref || !refs)
                return -ENOMEM;
        r = cn_json_set_string(ref, "cluster.k8s.io/v1alpha1", "apiVersion", NULL);
        if (r >= 0)
                r = cn_json_set_string(ref, kind, "kind", NULL);
        if (r >= 0)
                r = cn_json_set_string(ref, strempty(cn_json_string(owner, "metadata", "name", NULL)), "name", NULL);
        if (r >= 0)
                r = cn_json_set_string(ref, strempty(cn_json_string(owner, "metadata", "uid", NULL)), "uid", NULL);
        if (r >= 0)
                r = cn_json_set(ref, json_object_new_boolean(true), "controller", NULL);
        if (r >= 0)
                r = cn_json_set(ref, json_object_new_boolean(true), "blockOwnerDeletion", NULL);
        if (r < 0)
                return r;
        if (json_object_array_add(refs, TAKE_PTR(ref)) < 0)
                return -ENOMEM;
        return cn_json_set(o, TAKE_PTR(refs), "metadata", "ownerReferences", NULL);
}

int mc_machineset_new_machine(json_object *set, json_object **ret, char **ret_reason) {
        _cleanup_json_ json_object *m = json_object_new_object();
        json_object *tmeta = cn_json_get(set, "spec", "template", "metadata", NULL);
        const char *name = cn_json_string(set, "metadata", "name", NULL), *uid = cn_json_string(set, "metadata", "uid", NULL);
        _cleanup_free_ char *gen = NULL;
        int r;

        if (!m)
                return -ENOMEM;
        if (!name || !uid)
                return -EINVAL;
        r = mc_selector_matches(cn_json_get(set, "spec", "selector", NULL), cn_json_get(tmeta, "labels", NULL));
        if (r <= 0) {
                (void) cn_set_message(ret_reason, r < 0 ? "spec.selector has an unknown operator"
                                                        : "spec.template.metadata.labels do not match spec.selector");
                return -EINVAL;
        }
        if (asprintf(&gen, "%s-", name) < 0)
                return -ENOMEM;
        r = cn_json_set_string(m, "cluster.k8s.io/v1alpha1", "apiVersion", NULL);
        if (r >= 0)
                r = cn_json_set_string(m, "Machine", "kind", NULL);
        if (r >= 0)
                r = cn_json_set_string(m, gen, "metadata", "generateName", NULL);
        if (r >= 0)
                r = copy_into(m, cn_json_get(tmeta, "labels", NULL), "metadata", "labels");
        if (r >= 0)
                r = copy_into(m, cn_json_get(tmeta, "annotations", NULL), "metadata", "annotations");
        if (r >= 0)
                r = copy_into(m, cn_json_get(set, "spec", "template", "spec", NULL), "spec", NULL);
        if (r >= 0)
                r = mc_set_controller_ref(m, "MachineSet", set);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

/* machine-controller's priorities: 100 must go, 0 must stay. */
#define MUST_DELETE 100.0
#define BETTER_DELETE 50.0
#define COULD_DELETE 20.0
#define SECONDS_PER_TEN_DAYS 864000.0

static bool doomed(json_object *m) {
        return cn_json_get(m, "metadata", "deletionTimestamp", NULL) != NULL;
}

static bool marked(json_object *m) {
        return !isempty(cn_json_string(m, "metadata", "annotations", MC_ANNOTATION_DELETE_MACHINE, NULL));
}

static bool failed(json_object *m) {
        return cn_json_get(m, "status", "errorReason", NULL) || cn_json_get(m, "status", "errorMessage", NULL);
}

static double oldest_priority(json_object *m, usec_t now) {
        const char *created = cn_json_string(m, "metadata", "creationTimestamp", NULL);
        usec_t t;

        if (doomed(m) || marked(m) || failed(m))
                return MUST_DELETE;
        if (!created || cn_parse_rfc3339(created, &t) < 0 || t > now)
                return 0;
        return MUST_DELETE * (1.0 - exp(-((double) (now - t) / USEC_PER_SEC) / SECONDS_PER_TEN_DAYS));
}

static double priority(json_object *m, const char *policy, usec_t now) {
        if (streq(policy, "Oldest"))
                return oldest_priority(m, now);
        if (streq(policy, "Newest"))
                return doomed(m) || marked(m) || failed(m) ? MUST_DELETE : MUST_DELETE - oldest_priority(m, now);
        /* Random (and machine-controller's default) */
        if (doomed(m))
                return MUST_DELETE;
        return marked(m) || failed(m) ? BETTER_DELETE : COULD_DELETE;
}

typedef struct Ranked {
        json_object *machine;
        double priority;
        uint64_t tiebreak;
} Ranked;

static int compare(const void *a, const void *b) {
        const Ranked *x = a, *y = b;

        if (x->priority != y->priority)
                return x->priority < y->priority ? 1 : -1; /* high to low */
        return x->tiebreak < y->tiebreak ? -1 : x->tiebreak > y->tiebreak;
}

int mc_machineset_pick_deletions(json_object *machines, const char *policy, size_t count, usec_t now,
                                 json_object **ret) {
        size_t n = machines && json_object_is_type(machines, json_type_array) ? json_object_array_length(machines) : 0;
        _cleanup_json_ json_object *out = json_object_new_array();
        _cleanup_free_ Ranked *r = NULL;

        if (!out)
                return -ENOMEM;
        policy = isempty(policy) ? "Random" : policy;
        if (!streq(policy, "Random") && !streq(policy, "Newest") && !streq(policy, "Oldest"))
                return -EINVAL;
        r = calloc(n ?: 1, sizeof(Ranked));
        if (!r)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r[i].machine = json_object_array_get_idx(machines, i);
                r[i].priority = priority(r[i].machine, policy, now);
                /* Equal priorities: Random picks at random, the others by name (a stable order). */
                if (streq(policy, "Random"))
                        (void) cn_random_u64(&r[i].tiebreak);
                else
                        r[i].tiebreak = i;
        }
        qsort(r, n, sizeof(Ranked), compare);
        for (size_t i = 0; i < n && i < count; i++)
                if (json_object_array_add(out, json_object_get(r[i].machine)) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(out);
        return 0;
}

bool mc_node_ready(json_object *node) {
        json_object *ready = cn_json_array_find(cn_json_get(node, "status", "conditions", NULL), "type", "Ready");

        return ready && streq(strempty(cn_json_string(ready, "status", NULL)), "True");
}

bool mc_machine_ready(json_object *machine, json_object *node) {
        return node && cn_json_string(machine, "status", "nodeRef", "name", NULL) && mc_node_ready(node);
}

int mc_min_ready_seconds(json_object *o, int64_t *ret) {
        json_object *v = cn_json_get(o, "spec", "minReadySeconds", NULL);

        if (!v || json_object_is_type(v, json_type_null)) {
                *ret = 0;
                return 0;
        }
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > INT32_MAX)
                return -EINVAL;
        *ret = json_object_get_int64(v);
        return 0;
}

bool mc_machine_available(json_object *machine, json_object *node, int64_t min_ready, usec_t now, usec_t *ret_wait) {
        json_object *ready;
        usec_t since, until;

        if (ret_wait)
                *ret_wait = 0;
        if (!mc_machine_ready(machine, node))
                return false;
        if (min_ready <= 0)
                return true;
        ready = cn_json_array_find(cn_json_get(node, "status", "conditions", NULL), "type", "Ready");
        if (cn_parse_rfc3339(strempty(cn_json_string(ready, "lastTransitionTime", NULL)), &since) < 0)
                return false;
        until = since + (usec_t) min_ready * USEC_PER_SEC;
        if (now > until)
                return true;
        if (ret_wait)
                *ret_wait = until - now + 1;
        return false;
}
