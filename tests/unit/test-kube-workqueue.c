/* SPDX-License-Identifier: Apache-2.0 */
/* The keyed work queue: a key is queued once, an active key is never handed out twice (a change
 * meanwhile runs it again afterwards), the concurrency cap holds, nothing starts while not ready,
 * retries come back after the backoff, and removing or clearing frees the caller's data. */
#include <string.h>

#include "kube-workqueue.h"
#include "string-util.h"
#include "tap.h"

typedef struct Test {
        sd_event *event;
        bool ready;
        bool finish;          /* process calls done at once */
        unsigned processed;
        char last[32];
        unsigned freed;
        bool saw_retry_pending;
        unsigned oom_attempts; /* new_data() calls for the key "oom" */
} Test;

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        Test *t = userdata;

        t->processed++;
        snprintf(t->last, sizeof(t->last), "%s", cn_work_item_key(item));
        t->saw_retry_pending = cn_work_item_retry_pending(item);
        if (t->finish)
                cn_work_queue_done(item);
}

static bool ready(void *userdata) {
        return ((Test *) userdata)->ready;
}

static void free_data(void *data) {
        (*(unsigned *) data)++;
}

static void run(Test *t) {
        for (int i = 0; i < 10; i++)
                (void) sd_event_run(t->event, 0);
}

static void run_for(Test *t, usec_t usec) {
        usec_t end = cn_now(CLOCK_MONOTONIC) + usec;

        while (cn_now(CLOCK_MONOTONIC) < end)
                (void) sd_event_run(t->event, 5 * USEC_PER_MSEC);
}

static CnWorkQueue *new_queue(Test *t, unsigned max_active, bool add_cancels_retry) {
        CnWorkQueue *q = NULL;
        int r;

        r = cn_work_queue_new(t->event,
                              &(CnWorkQueueOptions) {
                                      .description = "test-queue",
                                      .max_active = max_active,
                                      .backoff_base = 20 * USEC_PER_MSEC,
                                      .backoff_cap = 20 * USEC_PER_MSEC,
                                      .add_cancels_retry = add_cancels_retry,
                              },
                              &(CnWorkQueueOps) { .process = process, .ready = ready, .free_data = free_data }, t,
                              &q);
        return r < 0 ? NULL : q;
}

static void test_queued_once(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 0, true);

        t->processed = 0;
        t->finish = true;
        TAP_OK(cn_work_queue_add_key(q, "a") == 0 && cn_work_queue_add_key(q, "a") == 0, "add twice");
        TAP_EQ_INT(t->processed, 0, "nothing runs inside add");
        run(t);
        TAP_EQ_INT(t->processed, 1, "a key queued twice is processed once");
        TAP_EQ_INT(cn_work_queue_active(q), 0, "done frees the slot");
}

static void test_dirty(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 0, true);
        CnWorkItem *i;

        t->processed = 0;
        t->finish = false;
        (void) cn_work_queue_add_key(q, "a");
        run(t);
        i = cn_work_queue_get(q, "a", false);
        TAP_OK(i && cn_work_item_active(i), "the item is active while its work runs");
        cn_work_queue_add(i);
        run(t);
        TAP_EQ_INT(t->processed, 1, "an active key is not handed out a second time");
        t->finish = true;
        cn_work_queue_done(i);
        run(t);
        TAP_EQ_INT(t->processed, 2, "a change while active runs the key again afterwards");
        TAP_OK(!cn_work_item_queued(i) && !cn_work_item_active(i), "and then it is idle");
}

static void test_cap(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 2, true);

        t->processed = 0;
        t->finish = false;
        (void) cn_work_queue_add_key(q, "a");
        (void) cn_work_queue_add_key(q, "b");
        (void) cn_work_queue_add_key(q, "c");
        run(t);
        TAP_EQ_INT(t->processed, 2, "at most max_active items run at once");
        TAP_EQ_INT(cn_work_queue_active(q), 2, "two active");
        cn_work_queue_done(cn_work_queue_get(q, "a", false));
        run(t);
        TAP_EQ_INT(t->processed, 3, "a freed slot starts the next item");
        TAP_EQ_STR(t->last, "c", "in the order queued");
}

static void test_ready(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 0, true);

        t->processed = 0;
        t->finish = true;
        t->ready = false;
        (void) cn_work_queue_add_key(q, "a");
        run(t);
        TAP_EQ_INT(t->processed, 0, "nothing starts while not ready");
        TAP_OK(cn_work_item_queued(cn_work_queue_get(q, "a", false)), "the key stays queued");
        t->ready = true;
        cn_work_queue_kick(q);
        run(t);
        TAP_EQ_INT(t->processed, 1, "a kick once ready starts it");
}

static void test_retry(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 0, true);
        CnWorkItem *i;
        usec_t delay = USEC_INFINITY;

        t->processed = 0;
        t->finish = true;
        i = cn_work_queue_get(q, "a", true);
        TAP_OK(cn_work_queue_retry(i, 0, &delay) == 0 && delay <= 20 * USEC_PER_MSEC, "retry within the backoff");
        TAP_OK(cn_work_item_retry_pending(i), "retry pending");
        run_for(t, 100 * USEC_PER_MSEC);
        TAP_EQ_INT(t->processed, 1, "the retry queues the key after its delay");
        TAP_OK(!cn_work_item_retry_pending(i), "and is over");

        (void) cn_work_queue_retry(i, USEC_PER_SEC, NULL);
        cn_work_queue_add(i);
        run(t);
        TAP_EQ_INT(t->processed, 2, "new work supersedes a pending retry");
        TAP_OK(!cn_work_item_retry_pending(i) && !t->saw_retry_pending, "the retry is cancelled");

        (void) cn_work_queue_retry(i, USEC_PER_SEC, NULL);
        cn_work_queue_forget(i);
        TAP_OK(!cn_work_item_retry_pending(i), "forget cancels the retry");
}

static void test_retry_kept(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 0, false);
        CnWorkItem *i;

        t->processed = 0;
        t->finish = false;
        i = cn_work_queue_get(q, "a", true);
        (void) cn_work_queue_retry(i, USEC_PER_SEC, NULL);
        cn_work_queue_add(i);
        run(t);
        TAP_OK(t->processed == 1 && t->saw_retry_pending, "without add_cancels_retry the work sees the pending retry");
        cn_work_queue_add(i);
        cn_work_queue_done(i);
        run(t);
        TAP_EQ_INT(t->processed, 1, "a dirty item waits for its pending retry");
}

static void test_remove(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = new_queue(t, 1, true);
        unsigned freed = 0;
        CnWorkItem *i;

        t->processed = 0;
        t->finish = false;
        i = cn_work_queue_get(q, "a", true);
        cn_work_item_set_data(i, &freed);
        cn_work_queue_add(i);
        (void) cn_work_queue_add_key(q, "b");
        run(t);
        TAP_EQ_INT(t->processed, 1, "one at a time");
        cn_work_queue_remove(i);
        TAP_EQ_INT(freed, 1, "removing an active item frees its data");
        TAP_OK(!cn_work_queue_get(q, "a", false), "and the key");
        run(t);
        TAP_EQ_INT(t->processed, 2, "its slot goes to the next item");
        cn_work_item_set_data(cn_work_queue_get(q, "b", false), &freed);
        cn_work_queue_clear(q);
        TAP_OK(freed == 2 && cn_work_queue_size(q) == 0, "clear frees every item's data");
}

static void *new_data(CnWorkItem *item, void *userdata) {
        Test *t = userdata;

        /* "oom" stands for an allocation that fails. */
        if (streq(cn_work_item_key(item), "oom")) {
                t->oom_attempts++;
                return NULL;
        }
        return &t->freed;
}

static void test_new_data(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = NULL;
        CnWorkItem *i;

        TAP_OK(cn_work_queue_new(t->event, &(CnWorkQueueOptions) {},
                                 &(CnWorkQueueOps) { .process = process, .new_data = new_data, .free_data = free_data },
                                 t, &q) == 0,
               "a queue whose items get data");
        i = cn_work_queue_get(q, "a", true);
        TAP_OK(i && cn_work_item_get_data(i) == &t->freed, "a new item gets new_data()");
        TAP_OK(!cn_work_queue_get(q, "oom", true) && cn_work_queue_size(q) == 1,
               "when new_data() fails there is no item");
}

/* process() of the lazy test: records whether the item had its data when it ran. */
static bool lazy_had_data;

static void process_lazy(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        Test *t = userdata;

        t->processed++;
        lazy_had_data = cn_work_item_get_data(item) != NULL;
        cn_work_queue_done(item);
}

static void test_lazy_data(Test *t) {
        _cleanup_(cn_work_queue_freep) CnWorkQueue *q = NULL;
        CnWorkItem *i, *o;

        TAP_OK(cn_work_queue_new(t->event,
                                 &(CnWorkQueueOptions) { .lazy_data = true, .backoff_base = 20 * USEC_PER_MSEC,
                                                         .backoff_cap = 20 * USEC_PER_MSEC },
                                 &(CnWorkQueueOps) { .process = process_lazy, .new_data = new_data, .free_data = free_data },
                                 t, &q) == 0,
               "a queue whose items get data when they run");
        t->processed = 0;
        i = cn_work_queue_get(q, "a", true);
        TAP_OK(i && !cn_work_item_get_data(i), "a new item has no data yet");
        TAP_OK(cn_work_item_created(i) > 0, "but knows when it was made");
        cn_work_queue_add(i);
        TAP_OK(!cn_work_item_get_data(i), "nor once queued");
        run(t);
        TAP_OK(t->processed == 1 && lazy_had_data && cn_work_item_get_data(i) == &t->freed,
               "it is made before the item first runs");
        TAP_OK(cn_work_item_ensure_data(cn_work_queue_get(q, "b", true)) == &t->freed, "or when asked for");

        /* An item whose data cannot be made does not run; it comes back after its backoff. */
        t->oom_attempts = 0;
        o = cn_work_queue_get(q, "oom", true);
        TAP_OK(o && cn_work_queue_size(q) == 3 && t->oom_attempts == 0, "an item is made without its data");
        cn_work_queue_add(o);
        run(t);
        /* (On a slow machine its 20 ms backoff may be over already: then it is queued again.) */
        TAP_OK(t->processed == 1 && t->oom_attempts >= 1 && !cn_work_item_active(o) &&
               (cn_work_item_retry_pending(o) || cn_work_item_queued(o)),
               "when its data cannot be made the item does not run and is retried later");
        /* The backoff is 20 ms: within a second (however busy the machine) the retry has come. */
        run_for(t, USEC_PER_SEC);
        TAP_OK(t->processed == 1 && t->oom_attempts >= 2 && !cn_work_item_active(o),
               "it is tried again after its backoff, and still does not run without its data");
        cn_work_queue_remove(o);
}

int main(void) {
        Test t = { .ready = true };

        if (sd_event_new(&t.event) < 0)
                tap_skip_all("no event loop");
        test_queued_once(&t);
        test_dirty(&t);
        test_cap(&t);
        test_ready(&t);
        test_retry(&t);
        test_retry_kept(&t);
        test_remove(&t);
        test_new_data(&t);
        test_lazy_data(&t);
        sd_event_unref(t.event);
        return tap_done();
}
