/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment controller. See mc-machinedeployment-controller.h.
 *
 * A pass reads the deployment's MachineSets from the cache, creates the current template's set
 * when there is none, and writes the spec.replicas the plan gives each set; then it waits until
 * the cache shows those writes (or AWAIT_TIMEOUT passed) before it plans again, so that a stale
 * cache never makes it scale twice. Each set's Machines are the MachineSet controller's. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "machine-reconcile.h"
#include "mc-machinedeployment-controller.h"
#include "mc-machinedeployment.h"
#include "mc-machineset.h"
#include "mc-queue.h"
#include "string-util.h"
#include "time-util.h"

#define AWAIT_TIMEOUT (30 * USEC_PER_SEC)
#define SETS_MAX 64U

static const CnKubeResource resource_deployments = {
        .group = "cluster.k8s.io", .version = "v1alpha1", .resource = "machinedeployments",
        .kind = "MachineDeployment", .namespaced = true,
};
static const CnKubeResource resource_sets = {
        .group = "cluster.k8s.io", .version = "v1alpha1", .resource = "machinesets", .kind = "MachineSet",
        .namespaced = true,
};

typedef struct DeployState DeployState;

struct McDeployController {
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        char *namespace;
        McLoop loop;
        CnKubeInformer *deployments, *sets; /* the loop's */
        CnMetric *m_status[4];
};

#define EXPECT_CREATED (-1)
#define EXPECT_GONE (-2)

typedef struct Expect {
        char *name;
        int64_t replicas; /* or EXPECT_CREATED, EXPECT_GONE (deleted or being deleted) */
} Expect;

struct DeployState {
        McDeployController *c;
        CnWorkItem *item;
        char *namespace, *name;
        CnKubeRequest *requests[SETS_MAX + 2];
        size_t in_flight;
        Expect expect[SETS_MAX];
        size_t n_expect;
        usec_t awaiting_since;
};

static void expect_clear(DeployState *s) {
        for (size_t i = 0; i < s->n_expect; i++)
                free(s->expect[i].name);
        s->n_expect = 0;
}

static DeployState *state_free(DeployState *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(s->requests); i++)
                cn_kube_request_free(s->requests[i]);
        expect_clear(s);
        free(s->namespace);
        free(s->name);
        free(s);
        return NULL;
}

static void state_free_data(void *data) {
        state_free(data);
}

static void *state_new(CnWorkItem *item, void *userdata) {
        DeployState *s = calloc(1, sizeof(DeployState));

        if (!s)
                return NULL;
        s->c = ASSERT_PTR(userdata);
        s->item = item;
        if (mc_queue_key_split(cn_work_item_key(item), &s->namespace, &s->name) < 0)
                return state_free(s);
        return s;
}

typedef struct Op {
        DeployState *s;
        size_t slot;
} Op;

static void on_done(CnKubeClient *client, const CnKubeResult *result, void *userdata) {
        _cleanup_free_ Op *op = userdata;
        DeployState *s = op->s;

        s->requests[op->slot] = cn_kube_request_free(s->requests[op->slot]);
        if (result->error < 0 && result->error != -ENOENT) {
                log_info("MachineDeployment %s/%s: a write failed: %s", s->namespace, s->name, strna(result->message));
                expect_clear(s);
        }
        if (--s->in_flight == 0)
                cn_work_queue_add(s->item);
}

static int start_op(DeployState *s, Op **ret) {
        for (size_t i = 0; i < ELEMENTSOF(s->requests); i++)
                if (!s->requests[i]) {
                        Op *op = calloc(1, sizeof(Op));

                        if (!op)
                                return -ENOMEM;
                        op->s = s;
                        op->slot = i;
                        *ret = op;
                        return 0;
                }
        return -EBUSY;
}

static int expect(DeployState *s, const char *name, int64_t replicas) {
        if (s->n_expect >= SETS_MAX)
                return -E2BIG;
        s->expect[s->n_expect].name = strdup(name);
        if (!s->expect[s->n_expect].name)
                return -ENOMEM;
        s->expect[s->n_expect++].replicas = replicas;
        return 0;
}

static bool cache_caught_up(DeployState *s) {
        for (size_t i = 0; i < s->n_expect; i++) {
                json_object *set = cn_kube_informer_lookup(s->c->sets, s->namespace, s->expect[i].name);
                int64_t r = -2;

                if (s->expect[i].replicas == EXPECT_GONE) {
                        if (set && !cn_json_get(set, "metadata", "deletionTimestamp", NULL))
                                return false;
                        continue;
                }
                if (!set)
                        return false;
                if (s->expect[i].replicas >= 0 && (cn_json_get_int64(set, &r, "spec", "replicas", NULL) < 0 ||
                                                   r != s->expect[i].replicas))
                        return false;
        }
        return true;
}

static int patch(DeployState *s, const CnKubeResource *res, const char *name, const char *sub, json_object *p) {
        Op *op = NULL;
        int r;

        r = start_op(s, &op);
        if (r < 0)
                return r;
        r = cn_kube_patch(s->c->client, res, s->namespace, name, sub, CN_KUBE_PATCH_MERGE, p, on_done, op,
                          &s->requests[op->slot]);
        if (r < 0) {
                free(op);
                return r;
        }
        s->in_flight++;
        return 0;
}

typedef struct Collect {
        const char *uid;
        json_object *sets;
} Collect;

static int collect(json_object *set, void *userdata) {
        Collect *k = userdata;

        if (mc_owned_by(set, "MachineDeployment", k->uid) && !cn_json_get(set, "metadata", "deletionTimestamp", NULL))
                return json_object_array_add(k->sets, json_object_get(set));
        return 0;
}

static unsigned revision_of(json_object *o) {
        unsigned v = 0;
        const char *s = cn_json_string(o, "metadata", "annotations", MC_ANNOTATION_REVISION, NULL);

        return s && cn_safe_atou(s, &v) >= 0 ? v : 0;
}

static int64_t int_at(json_object *o, const char *a, const char *b) {
        int64_t v = 0;

        (void) cn_json_get_int64(o, &v, a, b, NULL);
        return v;
}

/* Writes the status the sets add up to; returns whether it shows the rollout complete (every one
 * of spec.replicas updated, there and available, and nothing more), as machine-controller's
 * DeploymentComplete. */
static bool write_status(DeployState *s, json_object *md, json_object *sets, const char *hash) {
        _cleanup_json_ json_object *p = json_object_new_object();
        int64_t replicas = 0, updated = 0, ready = 0, available = 0, want = 1;
        json_object *gen = cn_json_get(md, "metadata", "generation", NULL);

        (void) cn_json_get_int64(md, &want, "spec", "replicas", NULL);
        for (size_t i = 0; i < json_object_array_length(sets); i++) {
                json_object *set = json_object_array_get_idx(sets, i);

                replicas += int_at(set, "status", "replicas");
                ready += int_at(set, "status", "readyReplicas");
                available += int_at(set, "status", "availableReplicas");
                if (streq(strempty(cn_json_string(set, "metadata", "labels", MC_LABEL_TEMPLATE_HASH, NULL)), hash))
                        updated = int_at(set, "status", "replicas");
        }
        if (!p || cn_json_set(p, json_object_new_int64(replicas), "status", "replicas", NULL) < 0 ||
            cn_json_set(p, json_object_new_int64(updated), "status", "updatedReplicas", NULL) < 0 ||
            cn_json_set(p, json_object_new_int64(ready), "status", "readyReplicas", NULL) < 0 ||
            cn_json_set(p, json_object_new_int64(available), "status", "availableReplicas", NULL) < 0 ||
            cn_json_set(p, json_object_new_int64(MAX(0, want - available)), "status", "unavailableReplicas", NULL) < 0 ||
            (gen && cn_json_set(p, json_object_new_int64(json_object_get_int64(gen)), "status", "observedGeneration",
                                NULL) < 0))
                return false;
        if (cn_capi_patch_changes(md, p))
                (void) patch(s, &resource_deployments, s->name, "status", p);
        return updated == want && replicas == want && available == want;
}

static void invalid_spec(McDeployController *c, json_object *md, const char *reason) {
        CnKubeObjectRef ref;

        if (cn_kube_object_ref_from_json(md, &resource_deployments, &ref) >= 0)
                (void) cn_kube_event_record(c->recorder, &ref, CN_KUBE_EVENT_WARNING, "InvalidSpec", NULL, "%s", reason);
}

/* Deletes the old sets beyond spec.revisionHistoryLimit once the rollout is complete. */
static void cleanup_history(DeployState *s, json_object *md, bool complete, const McSetView *views, json_object *sets,
                            size_t n) {
        bool doomed[SETS_MAX];

        mc_deployment_cleanup(md, complete, views, n, doomed);
        for (size_t i = 0; i < n; i++) {
                json_object *set = json_object_array_get_idx(sets, i);
                Op *op = NULL;

                if (!doomed[i] || start_op(s, &op) < 0)
                        continue;
                log_info("MachineDeployment %s/%s: deleting MachineSet %s of revision %u beyond revisionHistoryLimit "
                         "%" PRIi64, s->namespace, s->name, views[i].name, views[i].revision,
                         mc_deployment_history_limit(md));
                if (cn_kube_delete(s->c->client, &resource_sets, s->namespace, views[i].name,
                                   &(CnKubeDeleteOptions) { .precondition_uid = cn_json_string(set, "metadata", "uid",
                                                                                               NULL) },
                                   on_done, op, &s->requests[op->slot]) < 0) {
                        free(op);
                        continue;
                }
                s->in_flight++;
                (void) expect(s, views[i].name, EXPECT_GONE);
        }
}

static void reconcile_one(McDeployController *c, DeployState *s) {
        json_object *md = cn_kube_informer_lookup(c->deployments, s->namespace, s->name), *current = NULL;
        _cleanup_json_ json_object *sets = json_object_new_array();
        _cleanup_free_ char *reason = NULL;
        Collect k = { .uid = cn_json_string(md, "metadata", "uid", NULL), .sets = sets };
        McSetView views[SETS_MAX];
        int64_t plan[SETS_MAX], min_ready = 0;
        unsigned max_rev = 0;
        bool complete;
        char hash[11];
        size_t n;
        int r;

        if (!md || !c->loop.leading || s->in_flight > 0 || !sets || !k.uid)
                return;
        if (!cache_caught_up(s) && cn_now(CLOCK_MONOTONIC) - s->awaiting_since < AWAIT_TIMEOUT)
                return;
        expect_clear(s);
        if (cn_json_get(md, "metadata", "deletionTimestamp", NULL) || mc_template_hash(md, hash) < 0)
                return;
        if (cn_kube_informer_foreach(c->sets, collect, &k) < 0)
                return;
        n = MIN(json_object_array_length(sets), (size_t) SETS_MAX);
        for (size_t i = 0; i < n; i++) {
                views[i] = mc_set_view(json_object_array_get_idx(sets, i), hash);
                max_rev = MAX(max_rev, views[i].revision);
                if (views[i].current)
                        current = json_object_array_get_idx(sets, i);
        }
        s->awaiting_since = cn_now(CLOCK_MONOTONIC);
        complete = write_status(s, md, sets, hash);
        if (cn_capi_is_true(md, "spec", "paused", NULL))
                return; /* paused: status only, as a Deployment */
        if (mc_deployment_validate(md, &reason) < 0) {
                invalid_spec(c, md, strna(reason));
                return;
        }
        if (!current) {
                _cleanup_json_ json_object *set = NULL;
                Op *op = NULL;

                r = mc_deployment_new_set(md, hash, max_rev + 1, &set);
                if (r < 0 || start_op(s, &op) < 0)
                        return;
                r = cn_kube_create(c->client, &resource_sets, s->namespace, set, on_done, op, &s->requests[op->slot]);
                if (r < 0) {
                        free(op);
                        return;
                }
                s->in_flight++;
                log_info("MachineDeployment %s/%s: MachineSet %s for revision %u", s->namespace, s->name,
                         cn_json_string(set, "metadata", "name", NULL), max_rev + 1);
                (void) expect(s, cn_json_string(set, "metadata", "name", NULL), EXPECT_CREATED);
                return;
        }
        if (revision_of(md) != revision_of(current)) {
                _cleanup_json_ json_object *p = json_object_new_object();
                char rev[16];

                (void) snprintf(rev, sizeof(rev), "%u", revision_of(current));
                if (p && cn_json_set_string(p, rev, "metadata", "annotations", MC_ANNOTATION_REVISION, NULL) >= 0)
                        (void) patch(s, &resource_deployments, s->name, NULL, p);
        }
        /* As machine-controller: the current set follows the deployment's minReadySeconds. */
        (void) mc_min_ready_seconds(md, &min_ready);
        if (int_at(current, "spec", "minReadySeconds") != min_ready) {
                _cleanup_json_ json_object *p = json_object_new_object();

                if (p && cn_json_set(p, json_object_new_int64(min_ready), "spec", "minReadySeconds", NULL) >= 0)
                        (void) patch(s, &resource_sets, cn_json_string(current, "metadata", "name", NULL), NULL, p);
        }
        r = mc_deployment_plan(md, views, n, plan);
        if (r < 0) {
                if (r == -EINVAL)
                        invalid_spec(c, md, "spec.replicas or spec.strategy.rollingUpdate is not valid");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_json_ json_object *p = NULL;

                if (plan[i] == views[i].replicas)
                        continue;
                p = json_object_new_object();
                if (!p || cn_json_set(p, json_object_new_int64(plan[i]), "spec", "replicas", NULL) < 0)
                        return;
                log_info("MachineDeployment %s/%s: MachineSet %s replicas %" PRIi64 " -> %" PRIi64, s->namespace,
                         s->name, views[i].name, views[i].replicas, plan[i]);
                if (patch(s, &resource_sets, views[i].name, NULL, p) < 0)
                        return;
                (void) expect(s, views[i].name, plan[i]);
        }
        cleanup_history(s, md, complete, views, sets, n);
}

/* The events of MachineSets queue their MachineDeployment. */
static void on_other(CnKubeInformer *i, json_object *object, void *userdata) {
        McDeployController *c = ASSERT_PTR(userdata);

        mc_queue_add_owners(c->loop.queue, object, "MachineDeployment");
}

static bool queue_ready(void *userdata) {
        McDeployController *c = ASSERT_PTR(userdata);

        return mc_loop_ready(&c->loop);
}

/* machine-controller's MachineDeployment collector (its pkg/controller/machinedeployment/metrics.go):
 * the status of each, by name and namespace. */
static const struct {
        const char *name, *help, *field;
} status_metrics[4] = {
        { "machine_deployment_replicas", "The number of replicas defined for a machine deployment", "replicas" },
        { "machine_deployment_available_replicas", "The number of available replicas for a machine deployment",
          "availableReplicas" },
        { "machine_deployment_ready_replicas", "The number of ready replicas for a machine deployment", "readyReplicas" },
        { "machine_deployment_updated_replicas", "The number of replicas updated for a machine deployment",
          "updatedReplicas" },
};

static int status_metric(json_object *md, void *userdata) {
        McDeployController *c = ASSERT_PTR(userdata);
        const char *labels[] = { cn_json_string(md, "metadata", "name", NULL),
                                 cn_json_string(md, "metadata", "namespace", NULL), NULL };

        if (!labels[0] || !labels[1])
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(status_metrics); i++)
                (void) cn_metric_set(c->m_status[i], labels, (double) int_at(md, "status", status_metrics[i].field));
        return 0;
}

static void update_metrics(McDeployController *c) {
        for (size_t i = 0; i < ELEMENTSOF(status_metrics); i++)
                (void) cn_metric_clear(c->m_status[i]);
        (void) cn_kube_informer_foreach(c->deployments, status_metric, c);
}

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        McDeployController *c = ASSERT_PTR(userdata);
        DeployState *s = cn_work_item_get_data(item);

        update_metrics(c);
        if (!cn_kube_informer_lookup(c->deployments, s->namespace, s->name) && s->in_flight == 0) {
                cn_work_queue_remove(item);
                return;
        }
        reconcile_one(c, s);
        cn_work_queue_done(item);
}

int mc_deploy_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                             const char *namespace, McDeployController **ret) {
        _cleanup_(mc_deploy_controller_freep) McDeployController *c = NULL;
        int r;

        c = calloc(1, sizeof(McDeployController));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(e);
        c->client = client;
        c->recorder = recorder;
        c->namespace = strdup(namespace);
        if (!c->namespace)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(status_metrics); i++) {
                r = cn_metrics_gauge(metrics, status_metrics[i].name, status_metrics[i].help,
                                     CN_LABELS("name", "namespace"), &c->m_status[i]);
                if (r < 0)
                        return r;
        }
        r = cn_work_queue_new(e, &(CnWorkQueueOptions) { .description = "mc-machinedeployment-queue" },
                              &(CnWorkQueueOps) {
                                      .process = process,
                                      .ready = queue_ready,
                                      .new_data = state_new,
                                      .free_data = state_free_data,
                              },
                              c, &c->loop.queue);
        if (r < 0)
                return r;
        c->loop.client = client;
        c->loop.on_other = on_other;
        c->loop.userdata = c;
        *ret = TAKE_PTR(c);
        return 0;
}

McDeployController *mc_deploy_controller_free(McDeployController *c) {
        if (!c)
                return NULL;
        mc_loop_done(&c->loop);
        sd_event_unref(c->event);
        free(c->namespace);
        free(c);
        return NULL;
}

int mc_deploy_controller_start(McDeployController *c) {
        int r;

        r = mc_loop_watch(&c->loop, &resource_deployments, c->namespace, &c->deployments);
        if (r >= 0)
                r = mc_loop_watch(&c->loop, &resource_sets, c->namespace, &c->sets);
        return r;
}

bool mc_deploy_controller_synced(McDeployController *c) {
        return mc_loop_synced(&c->loop);
}

void mc_deploy_controller_set_leading(McDeployController *c, bool leading) {
        mc_loop_set_leading(&c->loop, leading);
}
