/* SPDX-License-Identifier: Apache-2.0 */
/* A work queue keyed by Node name, like client-go's rate-limited workqueue: a name is queued at
 * most once, a name being worked on is never handed to a second worker (a change meanwhile makes
 * it run again afterwards), at most --concurrent-node-syncs run at once, and failures come back
 * after a per-Node exponential backoff with jitter. */
#include "initializer.h"
#include "log.h"
#include "provider.h"
#include "kube-client.h"

/* Per-Node retry backoff: client-go's default item rate limiter starts at 5 ms and caps at
 * 1000 s; a Node waiting that long for its taint to go is a Node nobody can use, so we cap lower. */
#define NODE_BACKOFF_BASE (100 * USEC_PER_MSEC)
#define NODE_BACKOFF_CAP (5 * USEC_PER_MINUTE)

static size_t hash_name(const char *s) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return (size_t) (h % ELEMENTSOF(((Manager *) NULL)->hash));
}

NodeState *node_state_get(Manager *m, const char *name, bool create) {
        size_t h = hash_name(name);
        NodeState *s;

        for (s = m->hash[h]; s; s = s->hash_next)
                if (streq(s->name, name))
                        return s;
        if (!create)
                return NULL;
        s = calloc(1, sizeof(NodeState));
        if (!s)
                return NULL;
        s->name = strdup(name);
        if (!s->name) {
                free(s);
                return NULL;
        }
        s->manager = m;
        cn_backoff_init(&s->backoff, NODE_BACKOFF_BASE, NODE_BACKOFF_CAP);
        s->hash_next = m->hash[h];
        m->hash[h] = s;
        m->n_nodes++;
        return s;
}

static void node_state_cancel(NodeState *s) {
        s->retry = sd_event_source_disable_unref(s->retry);
        s->call = cn_provider_call_free(s->call);
        s->request = cn_kube_request_free(s->request);
        s->instance = cn_provider_instance_free(s->instance);
}

static void queue_unlink(Manager *m, NodeState *s) {
        NodeState **p = &m->queue_head, *prev = NULL;

        for (; *p; prev = *p, p = &(*p)->queue_next)
                if (*p == s) {
                        *p = s->queue_next;
                        if (m->queue_tail == s)
                                m->queue_tail = prev;
                        s->queue_next = NULL;
                        s->queued = false;
                        return;
                }
}

static void node_state_free(Manager *m, NodeState *s) {
        size_t h = hash_name(s->name);

        for (NodeState **p = &m->hash[h]; *p; p = &(*p)->hash_next)
                if (*p == s) {
                        *p = s->hash_next;
                        break;
                }
        if (s->queued)
                queue_unlink(m, s);
        node_state_cancel(s);
        m->n_nodes--;
        free(s->last_warning);
        free(s->condition_message);
        free(s->name);
        free(s);
}

void node_state_drop(Manager *m, const char *name) {
        NodeState *s = node_state_get(m, name, false);

        if (!s)
                return;
        if (s->active) {
                /* Whatever is in flight is about a Node that is gone: stop it and let the worker
                 * slot go. */
                node_state_cancel(s);
                s->active = false;
                s->dirty = false;
                m->active--;
        }
        node_state_free(m, s);
}

void queue_forget_all(Manager *m) {
        for (size_t h = 0; h < ELEMENTSOF(m->hash); h++)
                while (m->hash[h])
                        node_state_free(m, m->hash[h]);
        m->queue_head = m->queue_tail = NULL;
        m->active = 0;
}

static void dispatch(Manager *m) {
        static bool dispatching = false;

        /* A sync that finishes at once calls back into queue_done(); the outer loop continues. */
        if (dispatching)
                return;
        dispatching = true;
        while (!m->shutting_down && m->queue_head && m->active < m->config->concurrent_node_syncs) {
                NodeState *s = m->queue_head;

                m->queue_head = s->queue_next;
                if (!m->queue_head)
                        m->queue_tail = NULL;
                s->queue_next = NULL;
                s->queued = false;
                s->active = true;
                m->active++;
                sync_node(s);
        }
        dispatching = false;
}

void queue_add(Manager *m, const char *name) {
        NodeState *s = node_state_get(m, name, true);

        if (!s) {
                log_oom();
                return;
        }
        if (s->active) {
                s->dirty = true;
                return;
        }
        if (s->queued)
                return;
        /* A retry timer that has not fired yet is superseded by new work. */
        s->retry = sd_event_source_disable_unref(s->retry);
        s->queued = true;
        if (m->queue_tail)
                m->queue_tail->queue_next = s;
        else
                m->queue_head = s;
        m->queue_tail = s;
        dispatch(m);
}

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);

        s->retry = sd_event_source_disable_unref(s->retry);
        queue_add(s->manager, s->name);
        return 0;
}

void queue_retry(NodeState *s, usec_t min_delay) {
        usec_t delay = cn_backoff_next(&s->backoff, min_delay);
        int r;

        s->retry = sd_event_source_disable_unref(s->retry);
        r = sd_event_add_time_relative(s->manager->event, &s->retry, CLOCK_MONOTONIC, delay, 10 * USEC_PER_MSEC,
                                       on_retry, s);
        if (r < 0) {
                log_warning_errno(r, "Failed to schedule a retry for node %s, retrying now: %m", s->name);
                s->dirty = true;
                return;
        }
        (void) sd_event_source_set_description(s->retry, "node-retry");
        log_debug("Retrying node %s in %.3fs.", s->name, (double) delay / USEC_PER_SEC);
}

void queue_done(NodeState *s) {
        Manager *m = s->manager;

        if (!s->active)
                return;
        s->active = false;
        m->active--;
        s->call = cn_provider_call_free(s->call);
        s->request = cn_kube_request_free(s->request);
        s->instance = cn_provider_instance_free(s->instance);
        if (s->dirty) {
                s->dirty = false;
                if (!s->retry)
                        queue_add(m, s->name);
        }
        dispatch(m);
}
