/* SPDX-License-Identifier: Apache-2.0 */
/* The keyed work queue of the controllers. See kube-workqueue.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "kube-workqueue.h"
#include "string-util.h"

#define N_BUCKETS 1024U
/* sd-event's default accuracy (250 ms) would blur the short end of the backoff. */
#define RETRY_ACCURACY (10 * USEC_PER_MSEC)

/* One allocation with its key: a cluster-wide queue holds an item per Node that waits. */
struct CnWorkItem {
        CnWorkQueue *queue;
        void *data;
        CnWorkItem *hash_next;
        CnWorkItem *queue_next;
        sd_event_source *retry;
        usec_t created;
        unsigned attempt; /* failures since the last success: the backoff's (base and cap are the queue's) */
        bool queued, active, dirty;
        char key[];
};

struct CnWorkQueue {
        sd_event *event;
        CnWorkQueueOptions options;
        char *description;
        CnWorkQueueOps ops;
        void *userdata;
        sd_event_source *dispatch_source;
        CnWorkItem *buckets[N_BUCKETS];
        CnWorkItem *head, *tail;
        size_t n_queued; /* the length of head..tail, so that a pass does not walk it */
        size_t n_items;
        unsigned n_active;
};

static size_t bucket_of(const char *s) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return (size_t) (h % N_BUCKETS);
}

static bool ready(CnWorkQueue *q) {
        return !q->ops.ready || q->ops.ready(q->userdata);
}

static bool has_slot(CnWorkQueue *q) {
        return q->options.max_active == 0 || q->n_active < q->options.max_active;
}

void cn_work_queue_kick(CnWorkQueue *q) {
        if (q->head)
                (void) sd_event_source_set_enabled(q->dispatch_source, SD_EVENT_ONESHOT);
}

static CnWorkItem *pop(CnWorkQueue *q) {
        CnWorkItem *i = q->head;

        q->head = i->queue_next;
        if (!q->head)
                q->tail = NULL;
        i->queue_next = NULL;
        i->queued = false;
        q->n_queued--;
        return i;
}

static int on_dispatch(sd_event_source *s, void *userdata) {
        CnWorkQueue *q = ASSERT_PTR(userdata);
        /* Only what was queued when the pass began: an item queued again by its own work waits
         * for the next iteration of the loop rather than spinning here. */
        size_t n = q->n_queued;

        while (n-- > 0 && q->head && has_slot(q) && ready(q)) {
                CnWorkItem *i = pop(q);

                if (!cn_work_item_ensure_data(i) && q->ops.new_data) {
                        /* Out of memory: this key's turn comes again after its backoff. */
                        (void) cn_work_queue_retry(i, 0, NULL);
                        continue;
                }
                i->active = true;
                q->n_active++;
                q->ops.process(q, i, q->userdata);
        }
        if (q->head && has_slot(q) && ready(q))
                cn_work_queue_kick(q);
        return 0;
}

int cn_work_queue_new(sd_event *e, const CnWorkQueueOptions *o, const CnWorkQueueOps *ops, void *userdata,
                      CnWorkQueue **ret) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = NULL;
        int r;

        assert(e);
        assert(o);
        assert(ops && ops->process);
        assert(ret);

        q = calloc(1, sizeof(CnWorkQueue));
        if (!q)
                return -ENOMEM;
        q->event = sd_event_ref(e);
        q->options = *o;
        q->description = strdup(o->description ?: "work-queue");
        if (!q->description)
                return -ENOMEM;
        q->options.description = q->description;
        q->ops = *ops;
        q->userdata = userdata;
        r = sd_event_add_defer(e, &q->dispatch_source, on_dispatch, q);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(q->dispatch_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(q->dispatch_source, q->description);
        *ret = TAKE_PTR(q);
        return 0;
}

static void unlink_queued(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;
        CnWorkItem *prev = NULL;

        for (CnWorkItem **p = &q->head; *p; prev = *p, p = &(*p)->queue_next)
                if (*p == i) {
                        *p = i->queue_next;
                        if (q->tail == i)
                                q->tail = prev;
                        i->queue_next = NULL;
                        i->queued = false;
                        q->n_queued--;
                        return;
                }
}

static void item_free(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;

        for (CnWorkItem **p = &q->buckets[bucket_of(i->key)]; *p; p = &(*p)->hash_next)
                if (*p == i) {
                        *p = i->hash_next;
                        break;
                }
        if (i->queued)
                unlink_queued(i);
        if (i->active)
                q->n_active--;
        q->n_items--;
        i->retry = sd_event_source_disable_unref(i->retry);
        if (q->ops.free_data && i->data)
                q->ops.free_data(i->data);
        free(i);
}

void cn_work_queue_clear(CnWorkQueue *q) {
        for (size_t b = 0; b < N_BUCKETS; b++)
                while (q->buckets[b])
                        item_free(q->buckets[b]);
}

CnWorkQueue *cn_work_queue_free(CnWorkQueue *q) {
        if (!q)
                return NULL;
        cn_work_queue_clear(q);
        sd_event_source_disable_unref(q->dispatch_source);
        sd_event_unref(q->event);
        free(q->description);
        free(q);
        return NULL;
}

CnWorkItem *cn_work_queue_get(CnWorkQueue *q, const char *key, bool create) {
        size_t b = bucket_of(key);
        CnWorkItem *i;

        for (i = q->buckets[b]; i; i = i->hash_next)
                if (streq(i->key, key))
                        return i;
        if (!create)
                return NULL;
        i = calloc(1, offsetof(CnWorkItem, key) + strlen(key) + 1);
        if (!i)
                return NULL;
        strcpy(i->key, key);
        i->queue = q;
        if (sd_event_now(q->event, CLOCK_MONOTONIC, &i->created) < 0)
                i->created = cn_now(CLOCK_MONOTONIC);
        if (q->ops.new_data && !q->options.lazy_data) {
                i->data = q->ops.new_data(i, q->userdata);
                if (!i->data) {
                        free(i);
                        return NULL;
                }
        }
        i->hash_next = q->buckets[b];
        q->buckets[b] = i;
        q->n_items++;
        return i;
}

int cn_work_queue_add_key(CnWorkQueue *q, const char *key) {
        CnWorkItem *i = cn_work_queue_get(q, key, true);

        if (!i)
                return -ENOMEM;
        cn_work_queue_add(i);
        return 0;
}

size_t cn_work_queue_size(CnWorkQueue *q) {
        return q->n_items;
}

unsigned cn_work_queue_active(CnWorkQueue *q) {
        return q->n_active;
}

int cn_work_queue_foreach(CnWorkQueue *q, int (*fn)(CnWorkItem *item, void *userdata), void *userdata) {
        for (size_t b = 0; b < N_BUCKETS; b++)
                for (CnWorkItem *i = q->buckets[b], *next; i; i = next) {
                        int r;

                        next = i->hash_next;
                        r = fn(i, userdata);
                        if (r < 0)
                                return r;
                }
        return 0;
}

const char *cn_work_item_key(const CnWorkItem *i) {
        return i->key;
}

void *cn_work_item_get_data(const CnWorkItem *i) {
        return i->data;
}

void *cn_work_item_ensure_data(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;

        if (!i->data && q->ops.new_data)
                i->data = q->ops.new_data(i, q->userdata);
        return i->data;
}

usec_t cn_work_item_created(const CnWorkItem *i) {
        return i->created;
}

void cn_work_item_set_data(CnWorkItem *i, void *data) {
        i->data = data;
}

bool cn_work_item_queued(const CnWorkItem *i) {
        return i->queued;
}

bool cn_work_item_active(const CnWorkItem *i) {
        return i->active;
}

bool cn_work_item_retry_pending(const CnWorkItem *i) {
        return i->retry;
}

void cn_work_queue_add(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;

        if (i->active) {
                i->dirty = true;
                return;
        }
        if (i->queued)
                return;
        if (q->options.add_cancels_retry)
                i->retry = sd_event_source_disable_unref(i->retry);
        i->queued = true;
        q->n_queued++;
        if (q->tail)
                q->tail->queue_next = i;
        else
                q->head = i;
        q->tail = i;
        cn_work_queue_kick(q);
}

void cn_work_queue_done(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;

        if (!i->active)
                return;
        i->active = false;
        q->n_active--;
        if (i->dirty) {
                i->dirty = false;
                if (!i->retry)
                        cn_work_queue_add(i);
        }
        cn_work_queue_kick(q);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        CnWorkItem *i = ASSERT_PTR(userdata);

        i->retry = sd_event_source_disable_unref(i->retry);
        cn_work_queue_add(i);
        return 0;
}

int cn_work_queue_retry(CnWorkItem *i, usec_t min_delay, usec_t *ret_delay) {
        CnBackoff b;
        usec_t delay;
        int r;

        cn_backoff_init(&b, i->queue->options.backoff_base, i->queue->options.backoff_cap);
        b.attempt = i->attempt;
        delay = cn_backoff_next(&b, min_delay);
        i->attempt = b.attempt;

        i->retry = sd_event_source_disable_unref(i->retry);
        r = sd_event_add_time_relative(i->queue->event, &i->retry, CLOCK_MONOTONIC, delay, RETRY_ACCURACY, on_retry,
                                       i);
        if (r < 0) {
                i->dirty = true;
                return r;
        }
        (void) sd_event_source_set_description(i->retry, i->queue->description);
        if (ret_delay)
                *ret_delay = delay;
        return 0;
}

void cn_work_queue_forget(CnWorkItem *i) {
        i->retry = sd_event_source_disable_unref(i->retry);
        i->attempt = 0;
}

void cn_work_queue_remove(CnWorkItem *i) {
        CnWorkQueue *q = i->queue;

        item_free(i);
        cn_work_queue_kick(q);
}
