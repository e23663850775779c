/* SPDX-License-Identifier: Apache-2.0 */
/* A keyed work queue on sd-event, like client-go's rate-limited workqueue: a key is queued at
 * most once, a key being worked on is never handed out a second time (a change meanwhile marks it
 * dirty and it runs again afterwards), at most max_active keys are worked on at once, and
 * failures come back after a per-key exponential backoff with jitter. Items are started from a
 * defer event source, never from inside cn_work_queue_add(), so the caller's stack is never
 * re-entered. Each item carries the caller's data, freed with the item. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "time-util.h"

typedef struct CnWorkQueue CnWorkQueue;
typedef struct CnWorkItem CnWorkItem;

typedef struct CnWorkQueueOptions {
        const char *description; /* of its event sources */
        unsigned max_active;     /* items worked on at once; 0: no cap */
        usec_t backoff_base, backoff_cap;
        /* New work supersedes a pending retry (the item runs now); otherwise the item is queued
         * and its process callback sees cn_work_item_retry_pending(). */
        bool add_cancels_retry;
        /* An item's data is made when it is first handed to process() (or asked for with
         * cn_work_item_ensure_data()), not with the item: a queue of many keys waiting holds
         * their keys alone. */
        bool lazy_data;
} CnWorkQueueOptions;

typedef struct CnWorkQueueOps {
        /* The item is now active; the work ends with cn_work_queue_done(), at once or later. */
        void (*process)(CnWorkQueue *q, CnWorkItem *item, void *userdata);
        /* Whether items may be started now (leading, caches synced, not stopping); NULL: always.
         * When it turns true, the owner calls cn_work_queue_kick(). */
        bool (*ready)(void *userdata);
        /* The data of a new item (NULL: out of memory); NULL: items start without data. With
         * lazy_data, made when the item first runs (should that fail, it is retried after its
         * backoff). */
        void *(*new_data)(CnWorkItem *item, void *userdata);
        /* Frees an item's data when the item goes, active or not; NULL: not owned. */
        void (*free_data)(void *data);
} CnWorkQueueOps;

int cn_work_queue_new(sd_event *e, const CnWorkQueueOptions *o, const CnWorkQueueOps *ops, void *userdata,
                      CnWorkQueue **ret);
CnWorkQueue *cn_work_queue_free(CnWorkQueue *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnWorkQueue *, cn_work_queue_free);

/* The item of key; with create, a new idle one (with new_data() unless lazy_data) when there is
 * none (NULL only on OOM). */
CnWorkItem *cn_work_queue_get(CnWorkQueue *q, const char *key, bool create);
/* Queues key (creating its item): -ENOMEM or 0. */
int cn_work_queue_add_key(CnWorkQueue *q, const char *key);
/* Removes every item (their work is dropped with their data). */
void cn_work_queue_clear(CnWorkQueue *q);
/* Starts queued items if ready() allows, from the loop. */
void cn_work_queue_kick(CnWorkQueue *q);
size_t cn_work_queue_size(CnWorkQueue *q);
unsigned cn_work_queue_active(CnWorkQueue *q);
/* Calls fn for every item; stops at a negative return, which it returns. */
int cn_work_queue_foreach(CnWorkQueue *q, int (*fn)(CnWorkItem *item, void *userdata), void *userdata);

const char *cn_work_item_key(const CnWorkItem *i);
/* NULL with lazy_data until the item first ran or cn_work_item_ensure_data(). */
void *cn_work_item_get_data(const CnWorkItem *i);
/* The item's data, made now if it has none yet (NULL only on OOM, or without new_data()). */
void *cn_work_item_ensure_data(CnWorkItem *i);
/* CLOCK_MONOTONIC (the loop's time) when the item was made. */
usec_t cn_work_item_created(const CnWorkItem *i);
void cn_work_item_set_data(CnWorkItem *i, void *data);
bool cn_work_item_queued(const CnWorkItem *i);
bool cn_work_item_active(const CnWorkItem *i);
bool cn_work_item_retry_pending(const CnWorkItem *i);

/* Queues the item; an active one is marked dirty and queued again when it is done. */
void cn_work_queue_add(CnWorkItem *i);
/* The work of an active item is over (success, or a retry already scheduled): frees its slot;
 * a dirty item is queued again unless a retry is pending. */
void cn_work_queue_done(CnWorkItem *i);
/* Queue the item again after its backoff, at least min_delay (a server's Retry-After). On
 * failure to arm the timer the item is marked dirty (it runs again when done) and the error is
 * returned. ret_delay, optional: the delay chosen. */
int cn_work_queue_retry(CnWorkItem *i, usec_t min_delay, usec_t *ret_delay);
/* Cancels a pending retry and resets the item's backoff (after a success, or when a change makes
 * the wait pointless). */
void cn_work_queue_forget(CnWorkItem *i);
/* Removes the item and frees its data, also while it is active (its slot is freed). */
void cn_work_queue_remove(CnWorkItem *i);
