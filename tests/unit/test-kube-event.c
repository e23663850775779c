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

static int record(CnKubeEventRecorder *r, unsigned i) {
        char name[32];
        CnKubeObjectRef o = { .kind = "Node", .api_version = "v1" };

        snprintf(name, sizeof(name), "n%u", i);
        o.name = name;
        return cn_kube_event_record(r, &o, CN_KUBE_EVENT_NORMAL, "Synced", NULL, "Node %s synced", name);
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

        cn_kube_event_recorder_free(r);
        cn_kube_client_free(client);
        sd_event_unref(e);
        return tap_done();
}
