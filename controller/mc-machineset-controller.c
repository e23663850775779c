/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineSet controller. See mc-machineset-controller.h.
 *
 * Like a ReplicaSet controller: a pass counts the set's Machines in the cache and creates or
 * deletes the difference, then waits until the cache shows every Machine it created (by the name
 * the API server answered) and every deletion it asked for, so that a stale cache never makes it
 * create or delete twice. A create whose answer is lost is seen as one Machine too many on a later
 * pass and scaled down again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "machine-reconcile.h"
#include "mc-machineset-controller.h"
#include "mc-machineset.h"
#include "mc-queue.h"
#include "string-util.h"
#include "time-util.h"

#define AWAIT_TIMEOUT (30 * USEC_PER_SEC)
/* At most this many creates or deletes per pass: a typo of replicas: 1000 fails slowly. */
#define BURST_MAX 10U

static const CnKubeResource resource_machinesets = {
        .group = "cluster.k8s.io", .version = "v1alpha1", .resource = "machinesets", .kind = "MachineSet",
        .namespaced = true,
};
static const CnKubeResource resource_machines = {
        .group = "cluster.k8s.io", .version = "v1alpha1", .resource = "machines", .kind = "Machine",
        .namespaced = true,
};

typedef struct SetState SetState;

struct McSetController {
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        char *namespace;
        McLoop loop;
        CnKubeInformer *sets, *machines, *nodes; /* the loop's */
};

struct SetState {
        McSetController *c;
        CnWorkItem *item;
        char *namespace, *name;
        size_t in_flight;
        char **created;   /* names the API server gave, until the cache has them */
        char **deleted;   /* names asked to go, until the cache shows them going */
        usec_t awaiting_since;
        CnKubeRequest *status_write;
        CnKubeRequest *requests[BURST_MAX];
};

static SetState *state_free(SetState *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < BURST_MAX; i++)
                cn_kube_request_free(s->requests[i]);
        cn_kube_request_free(s->status_write);
        strv_free(s->created);
        strv_free(s->deleted);
        free(s->namespace);
        free(s->name);
        free(s);
        return NULL;
}

static void state_free_data(void *data) {
        state_free(data);
}

static void *state_new(CnWorkItem *item, void *userdata) {
        SetState *s = calloc(1, sizeof(SetState));

        if (!s)
                return NULL;
        s->c = ASSERT_PTR(userdata);
        s->item = item;
        if (mc_queue_key_split(cn_work_item_key(item), &s->namespace, &s->name) < 0)
                return state_free(s);
        return s;
}

static void enqueue(SetState *s) {
        cn_work_queue_add(s->item);
}

static size_t request_slot(SetState *s) {
        for (size_t i = 0; i < BURST_MAX; i++)
                if (!s->requests[i])
                        return i;
        return BURST_MAX;
}

typedef struct Op {
        SetState *s;
        size_t slot;
} Op;

static void finish(SetState *s, size_t slot) {
        s->requests[slot] = cn_kube_request_free(s->requests[slot]);
        assert(s->in_flight > 0);
        if (--s->in_flight == 0)
                enqueue(s);
}

static void on_created(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        _cleanup_free_ Op *op = userdata;
        SetState *s = op->s;
        const char *name = cn_json_string(result->object, "metadata", "name", NULL);

        if (result->error < 0)
                log_info("MachineSet %s/%s: creating a Machine failed: %s", s->namespace, s->name,
                         strna(result->message));
        else if (name)
                (void) strv_extend(&s->created, name);
        finish(s, op->slot);
}

static void on_deleted(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        _cleanup_free_ Op *op = userdata;
        SetState *s = op->s;

        if (result->error < 0 && result->error != -ENOENT)
                log_info("MachineSet %s/%s: deleting a Machine failed: %s", s->namespace, s->name,
                         strna(result->message));
        finish(s, op->slot);
}

static int start(SetState *s, bool create, json_object *object) {
        Op *op = calloc(1, sizeof(Op));
        int r;

        if (!op)
                return -ENOMEM;
        op->s = s;
        op->slot = request_slot(s);
        assert(op->slot < BURST_MAX);
        if (create)
                r = cn_kube_create(s->c->client, &resource_machines, s->namespace, object, on_created, op,
                                   &s->requests[op->slot]);
        else {
                const char *name = cn_json_string(object, "metadata", "name", NULL);

                r = cn_kube_delete(s->c->client, &resource_machines, s->namespace, name,
                                   &(CnKubeDeleteOptions) { .precondition_uid = cn_json_string(object, "metadata",
                                                                                              "uid", NULL) },
                                   on_deleted, op, &s->requests[op->slot]);
                if (r >= 0)
                        r = strv_extend(&s->deleted, name);
        }
        if (r < 0) {
                free(op);
                return r;
        }
        s->in_flight++;
        return 0;
}

typedef struct Census {
        McSetController *c;
        json_object *set;
        const char *uid;
        json_object *active;  /* owned, not being deleted */
        size_t labeled, ready, available;
        int64_t min_ready;
        usec_t now, wait;     /* wait: until the next ready Machine becomes available (0: none) */
} Census;

static int census_one(json_object *m, void *userdata) {
        Census *k = userdata;
        json_object *node;
        const char *node_name;
        usec_t wait;

        if (!mc_owned_by(m, "MachineSet", k->uid))
                return 0;
        if (cn_json_get(m, "metadata", "deletionTimestamp", NULL))
                return 0;
        if (json_object_array_add(k->active, json_object_get(m)) < 0)
                return -ENOMEM;
        if (mc_selector_matches(cn_json_get(k->set, "spec", "selector", NULL), cn_json_get(m, "metadata", "labels", NULL)) >
            0)
                k->labeled++;
        node_name = cn_json_string(m, "status", "nodeRef", "name", NULL);
        node = node_name ? cn_kube_informer_lookup(k->c->nodes, NULL, node_name) : NULL;
        if (mc_machine_ready(m, node))
                k->ready++;
        if (mc_machine_available(m, node, k->min_ready, k->now, &wait))
                k->available++;
        else if (wait > 0 && (k->wait == 0 || wait < k->wait))
                k->wait = wait;
        return 0;
}

/* Whether the cache shows what this set's last writes did. */
static bool cache_caught_up(SetState *s) {
        size_t i;

        for (i = 0; s->created && s->created[i]; i++)
                if (!cn_kube_informer_lookup(s->c->machines, s->namespace, s->created[i]))
                        return false;
        for (i = 0; s->deleted && s->deleted[i]; i++) {
                json_object *m = cn_kube_informer_lookup(s->c->machines, s->namespace, s->deleted[i]);

                if (m && !cn_json_get(m, "metadata", "deletionTimestamp", NULL))
                        return false;
        }
        return true;
}

static void on_status_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        SetState *s = ASSERT_PTR(userdata);

        s->status_write = cn_kube_request_free(s->status_write);
        if (result->error < 0 && result->error != -ENOENT)
                (void) cn_work_queue_retry(s->item, 0, NULL);
}

static void write_status(SetState *s, json_object *set, size_t replicas, const Census *k) {
        _cleanup_json_ json_object *patch = json_object_new_object();
        json_object *gen = cn_json_get(set, "metadata", "generation", NULL);

        if (!patch || cn_json_set(patch, json_object_new_int64((int64_t) replicas), "status", "replicas", NULL) < 0 ||
            cn_json_set(patch, json_object_new_int64((int64_t) k->labeled), "status", "fullyLabeledReplicas", NULL) < 0 ||
            cn_json_set(patch, json_object_new_int64((int64_t) k->ready), "status", "readyReplicas", NULL) < 0 ||
            cn_json_set(patch, json_object_new_int64((int64_t) k->available), "status", "availableReplicas", NULL) < 0 ||
            (gen && cn_json_set(patch, json_object_new_int64(json_object_get_int64(gen)), "status",
                                "observedGeneration", NULL) < 0))
                return;
        if (!cn_capi_patch_changes(set, patch) || s->status_write)
                return;
        (void) cn_kube_patch(s->c->client, &resource_machinesets, s->namespace, s->name, "status", CN_KUBE_PATCH_MERGE,
                             patch, on_status_written, s, &s->status_write);
}

static void reconcile_one(McSetController *c, SetState *s) {
        json_object *set = cn_kube_informer_lookup(c->sets, s->namespace, s->name);
        _cleanup_json_ json_object *active = json_object_new_array(), *doomed = NULL;
        Census k = { .c = c, .set = set, .active = active, .uid = cn_json_string(set, "metadata", "uid", NULL),
                     .now = cn_now(CLOCK_REALTIME) };
        int64_t want = 1;
        size_t have;
        int r;

        if (!set || !c->loop.leading || s->in_flight > 0 || !active || !k.uid)
                return;
        if (!cache_caught_up(s) && cn_now(CLOCK_MONOTONIC) - s->awaiting_since < AWAIT_TIMEOUT)
                return; /* the events of our writes queue the set again */
        strv_free(s->created);
        strv_free(s->deleted);
        s->created = s->deleted = NULL;
        if (mc_min_ready_seconds(set, &k.min_ready) < 0) {
                CnKubeObjectRef ref;

                if (cn_kube_object_ref_from_json(set, &resource_machinesets, &ref) >= 0)
                        (void) cn_kube_event_record(c->recorder, &ref, CN_KUBE_EVENT_WARNING, "InvalidSpec", NULL,
                                                    "spec.minReadySeconds must be an integer of 0 or more");
                return;
        }
        if (cn_kube_informer_foreach(c->machines, census_one, &k) < 0)
                return;
        have = json_object_array_length(active);
        write_status(s, set, have, &k);
        if (k.wait > 0)
                /* A Machine becomes available by time alone: no event would tell. */
                (void) cn_work_queue_retry(s->item, k.wait, NULL);
        if (cn_json_get(set, "metadata", "deletionTimestamp", NULL))
                return; /* its Machines go with it (ownerReferences, the garbage collector) */
        (void) cn_json_get_int64(set, &want, "spec", "replicas", NULL);
        if (want < 0)
                want = 0;
        s->awaiting_since = cn_now(CLOCK_MONOTONIC);
        if ((size_t) want > have) {
                for (size_t i = 0; i < MIN((size_t) want - have, BURST_MAX); i++) {
                        _cleanup_json_ json_object *m = NULL;
                        _cleanup_free_ char *reason = NULL;
                        CnKubeObjectRef ref;

                        r = mc_machineset_new_machine(set, &m, &reason);
                        if (r == -EINVAL) {
                                if (cn_kube_object_ref_from_json(set, &resource_machinesets, &ref) >= 0)
                                        (void) cn_kube_event_record(c->recorder, &ref, CN_KUBE_EVENT_WARNING,
                                                                    "InvalidSpec", NULL, "%s", strna(reason));
                                return;
                        }
                        if (r < 0 || start(s, true, m) < 0)
                                break;
                }
                if (s->in_flight > 0)
                        log_info("MachineSet %s/%s: creating %zu Machine(s)", s->namespace, s->name, s->in_flight);
        } else if ((size_t) want < have) {
                r = mc_machineset_pick_deletions(active, cn_json_string(set, "spec", "deletePolicy", NULL),
                                                 MIN(have - (size_t) want, BURST_MAX), cn_now(CLOCK_REALTIME), &doomed);
                if (r == -EINVAL) {
                        CnKubeObjectRef ref;

                        if (cn_kube_object_ref_from_json(set, &resource_machinesets, &ref) >= 0)
                                (void) cn_kube_event_record(c->recorder, &ref, CN_KUBE_EVENT_WARNING, "InvalidSpec",
                                                            NULL, "spec.deletePolicy must be Random, Newest or Oldest");
                        return;
                }
                for (size_t i = 0; r >= 0 && i < json_object_array_length(doomed); i++) {
                        log_info("MachineSet %s/%s: deleting Machine %s", s->namespace, s->name,
                                 strna(cn_json_string(json_object_array_get_idx(doomed, i), "metadata", "name", NULL)));
                        if (start(s, false, json_object_array_get_idx(doomed, i)) < 0)
                                break;
                }
        }
        if (s->in_flight == 0 && (size_t) want != have)
                (void) cn_work_queue_retry(s->item, 0, NULL);
}

/* The events of Machines queue their MachineSet; of Nodes, every set (the readiness of their Machines). */
static void on_other(CnKubeInformer *i, json_object *object, void *userdata) {
        McSetController *c = ASSERT_PTR(userdata);

        if (i == c->nodes)
                mc_loop_enqueue_all(&c->loop);
        else
                mc_queue_add_owners(c->loop.queue, object, "MachineSet");
}

static bool queue_ready(void *userdata) {
        McSetController *c = ASSERT_PTR(userdata);

        return mc_loop_ready(&c->loop);
}

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        McSetController *c = ASSERT_PTR(userdata);
        SetState *s = cn_work_item_get_data(item);

        if (!cn_kube_informer_lookup(c->sets, s->namespace, s->name) && s->in_flight == 0 && !s->status_write) {
                cn_work_queue_remove(item);
                return;
        }
        reconcile_one(c, s);
        cn_work_queue_done(item);
}

int mc_set_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, const char *namespace,
                          McSetController **ret) {
        _cleanup_(mc_set_controller_freep) McSetController *c = NULL;
        int r;

        c = calloc(1, sizeof(McSetController));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(e);
        c->client = client;
        c->recorder = recorder;
        c->namespace = strdup(namespace);
        if (!c->namespace)
                return -ENOMEM;
        r = cn_work_queue_new(e, &(CnWorkQueueOptions) { .description = "mc-machineset-queue" },
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

McSetController *mc_set_controller_free(McSetController *c) {
        if (!c)
                return NULL;
        mc_loop_done(&c->loop);
        sd_event_unref(c->event);
        free(c->namespace);
        free(c);
        return NULL;
}

int mc_set_controller_start(McSetController *c) {
        int r;

        r = mc_loop_watch(&c->loop, &resource_machinesets, c->namespace, &c->sets);
        if (r >= 0)
                r = mc_loop_watch(&c->loop, &resource_machines, c->namespace, &c->machines);
        if (r >= 0)
                r = mc_loop_watch(&c->loop, &cn_kube_resource_nodes, NULL, &c->nodes);
        return r;
}

bool mc_set_controller_synced(McSetController *c) {
        return mc_loop_synced(&c->loop);
}

void mc_set_controller_set_leading(McSetController *c, bool leading) {
        mc_loop_set_leading(&c->loop, leading);
}
