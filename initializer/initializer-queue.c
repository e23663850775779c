/* SPDX-License-Identifier: Apache-2.0 */
/* The Node work queue (lib/kube/kube-workqueue.h) keyed by Node name: a name is queued at most
 * once, a Node being synced is never handed to a second worker (a change meanwhile makes it run
 * again afterwards), at most --concurrent-node-syncs run at once, and failures come back after a
 * per-Node exponential backoff with jitter. Each item carries the Node's NodeState, made when its
 * first sync starts (a Node that waits is its key alone) and dropped when it is at rest. */
#include "initializer-manager.h"
#include "initializer-queue.h"
#include "initializer-sync.h"
#include "kube-client.h"
#include "kube-workqueue.h"
#include "log.h"
#include "node-patch.h"
#include "provider.h"

/* Per-Node retry backoff: client-go's default item rate limiter starts at 5 ms and caps at
 * 1000 s; a Node waiting that long for its taint to go is a Node nobody can use, so we cap lower. */
#define NODE_BACKOFF_BASE (100 * USEC_PER_MSEC)
#define NODE_BACKOFF_CAP (5 * USEC_PER_MINUTE)

static void node_state_cancel(NodeState *s) {
        s->call = cn_provider_call_free(s->call);
        s->request = cn_kube_request_free(s->request);
        s->instance = cn_provider_instance_free(s->instance);
}

static void node_state_free(void *data) {
        NodeState *s = data;

        /* Whatever is in flight is about a Node that is gone (or a daemon that stops). */
        node_state_cancel(s);
        cn_write_expectation_clear(&s->written);
        free(s->last_warning);
        free(s->condition_message);
        free(s);
}

/* Made when the Node's first sync starts (lazy_data), or when state is asked for: a Node queued
 * was queued because its taint was seen (sync_node() forgets the time if it is gone by then). */
static void *node_state_new(CnWorkItem *item, void *userdata) {
        NodeState *s = calloc(1, sizeof(NodeState));

        if (!s)
                return NULL;
        s->manager = ASSERT_PTR(userdata);
        s->item = item;
        s->name = cn_work_item_key(item);
        s->taint_seen = cn_work_item_created(item);
        return s;
}

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        sync_node(cn_work_item_get_data(item));
}

static bool ready(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        return !m->shutting_down;
}

int queue_setup(Manager *m) {
        return cn_work_queue_new(m->event,
                                 &(CnWorkQueueOptions) {
                                         .description = "node-queue",
                                         .max_active = m->config->concurrent_node_syncs,
                                         .backoff_base = NODE_BACKOFF_BASE,
                                         .backoff_cap = NODE_BACKOFF_CAP,
                                         .add_cancels_retry = true,
                                         /* Thousands of Nodes may wait at once (a cluster's worth
                                          * tainted when the initializer starts). */
                                         .lazy_data = true,
                                 },
                                 &(CnWorkQueueOps) {
                                         .process = process,
                                         .ready = ready,
                                         .new_data = node_state_new,
                                         .free_data = node_state_free,
                                 },
                                 m, &m->queue);
}

NodeState *node_state_get(Manager *m, const char *name, bool create) {
        CnWorkItem *item = cn_work_queue_get(m->queue, name, create);

        if (!item)
                return NULL;
        return create ? cn_work_item_ensure_data(item) : cn_work_item_get_data(item);
}

void node_state_drop(Manager *m, const char *name) {
        CnWorkItem *item = cn_work_queue_get(m->queue, name, false);

        if (item)
                cn_work_queue_remove(item);
}

/* Nothing left to remember: the Node has no taint (a taint_seen is from an older version of it),
 * no sync is queued, running or due again, no cloud call or write is out, no address check was
 * asked for, no condition of ours is to be cleared, and the watch has brought our last write
 * (node is at least as new). A Node tainted again later starts afresh, as a new one would. */
static bool node_state_at_rest(NodeState *s, json_object *node) {
        return node && !cn_node_has_taint(node, CN_TAINT_UNINITIALIZED) && !cn_work_item_active(s->item) &&
               !cn_work_item_queued(s->item) && !cn_work_item_retry_pending(s->item) && !s->call && !s->request &&
               !s->reconcile && !s->condition_false && !cn_write_expectation_pending(&s->written, node, 0);
}

void queue_release_at_rest(NodeState *s, json_object *node) {
        if (node_state_at_rest(s, node))
                cn_work_queue_remove(s->item);
}

void queue_forget_all(Manager *m) {
        if (m->queue)
                cn_work_queue_clear(m->queue);
}

void queue_add(Manager *m, const char *name) {
        CnWorkItem *item = cn_work_queue_get(m->queue, name, true);

        if (!item) {
                log_oom();
                return;
        }
        cn_work_queue_add(item);
}

void queue_retry(NodeState *s, usec_t min_delay) {
        usec_t delay;
        int r;

        r = cn_work_queue_retry(s->item, min_delay, &delay);
        if (r < 0) {
                log_warning_errno(r, "Failed to schedule a retry for node %s, retrying now: %m", s->name);
                return;
        }
        log_debug("Retrying node %s in %.3fs.", s->name, (double) delay / USEC_PER_SEC);
}

void queue_done(NodeState *s) {
        if (!cn_work_item_active(s->item))
                return;
        node_state_cancel(s);
        cn_work_queue_done(s->item);
}
