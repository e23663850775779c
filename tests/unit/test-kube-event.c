/* SPDX-License-Identifier: Apache-2.0 */
/* The Event recorder's aggregation cache at its bound: entries are found again by their key while
 * cached, the least recently used idle one makes room, and one whose write is in flight is never
 * dropped. The API server here refuses connections, so every write fails fast; what is checked is
 * the cache (and, under valgrind, that no dropped entry is found again). */
#include "json-util.h"
#include "time-util.h"
#include "kube-event.h"
#include "tap.h"

#define CACHE_MAX 1024U /* EVENT_CACHE_MAX of kube-event.c */

static void run_until_idle(sd_event *e, CnKubeEventRecorder *r) {
        for (unsigned i = 0; i < 20000 && cn_kube_event_recorder_pending(r) > 0; i++)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
}

static int record_as(CnKubeEventRecorder *r, unsigned i, const char *uid, CnKubeEventType type, const char *reason,
                     const char *message) {
        char name[32];
        CnKubeObjectRef o = { .kind = "Node", .api_version = "v1", .uid = uid };

        snprintf(name, sizeof(name), "n%u", i);
        o.name = name;
        return cn_kube_event_record(r, &o, type, reason, NULL, "%s %s", message, name);
}

static int record(CnKubeEventRecorder *r, unsigned i) {
        return record_as(r, i, NULL, CN_KUBE_EVENT_NORMAL, "Synced", "Node");
}

int main(void) {
        static const char kubeconfig[] =
                "{\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://127.0.0.1:1\",\"certificate-authority\":\"/dev/null\"}}],"
                "\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"t\"}}],"
                "\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
                "\"current-context\":\"x\"}";
        _cleanup_json_ json_object *kc = NULL;
        CnKubeClientOptions o = { .qps = 1e6, .burst = 100000, .max_retries = -1 };
        CnKubeEventRecorderOptions ro = { .component = "test", .instance = "test-1" };
        CnKubeConfig *cfg = NULL;
        CnKubeClient *client = NULL;
        CnKubeEventRecorder *r = NULL;
        sd_event *e = NULL;
        unsigned ok = 0, busy = 0, failed = 0;

        assert(cn_json_parse(kubeconfig, strlen(kubeconfig), CN_JSON_MAX_SIZE, &kc, NULL) == 0);
        assert(sd_event_new(&e) >= 0);
        assert(cn_kube_config_from_json(kc, NULL, "test", NULL, &cfg, NULL) == 0);
        assert(cn_kube_client_new(e, cfg, &o, &client) == 0);
        assert(cn_kube_event_recorder_new(client, &ro, &r) == 0);

        for (unsigned i = 0; i < CACHE_MAX + 10; i++) {
                int k = record(r, i);

                if (k == 0)
                        ok++;
                else if (k == -EBUSY)
                        busy++;
        }
        TAP_EQ_INT(ok, CACHE_MAX, "as many distinct events as the cache holds are written");
        TAP_EQ_INT(busy, 10, "further ones are refused while every entry's write is in flight");
        TAP_EQ_INT(cn_kube_event_recorder_pending(r), CACHE_MAX, "one write per event in flight");
        /* A full cache of writes in flight tells a cached event (a repeat, 0) from a new one (no
         * room, -EBUSY): each field of the identity counts, nothing else does. */
        TAP_EQ_INT(record(r, 7), 0, "the same event again is a repeat of the cached one");
        TAP_EQ_INT(record_as(r, 7, "u", CN_KUBE_EVENT_NORMAL, "Synced", "Node"), -EBUSY, "another uid is another event");
        TAP_EQ_INT(record_as(r, 7, NULL, CN_KUBE_EVENT_WARNING, "Synced", "Node"), -EBUSY, "another type too");
        TAP_EQ_INT(record_as(r, 7, NULL, CN_KUBE_EVENT_NORMAL, "Synced2", "Node"), -EBUSY, "another reason too");
        TAP_EQ_INT(record_as(r, 7, NULL, CN_KUBE_EVENT_NORMAL, "Synced", "Nod"), -EBUSY, "another message too");
        TAP_EQ_INT(cn_kube_event_recorder_pending(r), CACHE_MAX, "a repeat in flight waits for its write");

        run_until_idle(e, r);
        TAP_EQ_INT(cn_kube_event_recorder_pending(r), 0, "every write answered (refused)");
        TAP_EQ_INT(record(r, 5), 0, "a cached event again");
        TAP_EQ_INT(record(r, CACHE_MAX + 1), 0, "a new event once writes are answered, in place of the oldest");
        run_until_idle(e, r);
        /* More distinct events than the cache holds, over and over: each is found or makes room. */
        for (unsigned i = 0; i < 3 * CACHE_MAX; i++) {
                if (record(r, i % (CACHE_MAX + 100)) < 0)
                        failed++;
                if (i % 64 == 63)
                        run_until_idle(e, r);
        }
        run_until_idle(e, r);
        TAP_EQ_INT(failed, 0, "events cycling through a full cache are all written");
        TAP_EQ_INT(cn_kube_event_recorder_pending(r), 0, "and answered");

        /* After all those evictions, a cache full of new events in flight: each is found again
         * and nothing else fits. */
        for (unsigned i = 0; i < CACHE_MAX; i++)
                if (record(r, 100000 + i) < 0)
                        failed++;
        TAP_EQ_INT(failed, 0, "a cache full of new events");
        for (unsigned i = 0; i < CACHE_MAX; i++)
                if (record(r, 100000 + i) != 0)
                        failed++;
        TAP_EQ_INT(failed, 0, "every one of them found again");
        TAP_EQ_INT(record(r, 100000 + CACHE_MAX), -EBUSY, "and one more has no room");
        run_until_idle(e, r);

        cn_kube_event_recorder_free(r);
        cn_kube_client_free(client);
        sd_event_unref(e);
        return tap_done();
}
