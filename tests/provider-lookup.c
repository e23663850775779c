/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for lib/provider/provider.h: runs InstancesV2 calls against a cloud API (tests/fake-cloud)
 * and prints one JSON object per call on stdout, so the Python tests can check what the real
 * provider code does over HTTP.
 *   provider-lookup PROVIDER CLOUD.CONF CALL KEY [CALL KEY...]
 * CALL: metadata | exists | shutdown; KEY: a providerID (contains "://") or a Node name.
 * CALL "wait" (any KEY) prints {"call":"wait"} and reads a line from stdin before going on, so a
 * test can change the cloud between two calls of one provider object.
 * Machine calls (the lifecycle in lib/provider/provider.h): "machine-get" and "cleanup" with KEY
 * NAME,UID;
 * "migrate" with KEY PROVIDERID,OLD-UID,NEW-UID (OLD-UID may be empty). They print the error
 * result and the instance view ("instance") or "done".
 * Calls run one after another on one provider object (so tokens are reused as in the daemon). */
#include "cloud-config.h"
#include "http.h"
#include "json-util.h"
#include "provider.h"

typedef struct Run {
        sd_event *event;
        json_object *out;
        bool done;
} Run;

static void put_result(Run *run, const CnProviderResult *res) {
        json_object_object_add(run->out, "error", json_object_new_int(res->error));
        json_object_object_add(run->out, "class",
                               json_object_new_string(cn_provider_error_class_to_string(cn_provider_error_class(res->error))));
        json_object_object_add(run->out, "retryAfter", json_object_new_double((double) res->retry_after / USEC_PER_SEC));
        if (res->message)
                json_object_object_add(run->out, "message", json_object_new_string(res->message));
        run->done = true;
}

static void on_instance(CnProvider *p, const CnProviderResult *res, CnProviderInstance *i, void *userdata) {
        Run *run = userdata;

        put_result(run, res);
        if (i) {
                json_object *addrs = cn_node_address_list_to_json(&i->addresses);

                json_object_object_add(run->out, "providerID", json_object_new_string(strempty(i->provider_id)));
                json_object_object_add(run->out, "instanceID", json_object_new_string(strempty(i->instance_id)));
                json_object_object_add(run->out, "instanceType", json_object_new_string(strempty(i->instance_type)));
                json_object_object_add(run->out, "region", json_object_new_string(strempty(i->region)));
                json_object_object_add(run->out, "zone", json_object_new_string(strempty(i->zone)));
                json_object_object_add(run->out, "shutdown", json_object_new_boolean(i->shutdown));
                json_object_object_add(run->out, "addresses", addrs);
                cn_provider_instance_free(i);
        }
}

static void on_bool(CnProvider *p, const CnProviderResult *res, bool value, void *userdata) {
        Run *run = userdata;

        put_result(run, res);
        json_object_object_add(run->out, "value", json_object_new_boolean(value));
}

static void on_machine(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        Run *run = userdata;

        put_result(run, res);
        if (instance)
                json_object_object_add(run->out, "instance", json_object_get(instance));
}

static void on_cleanup(CnProvider *p, const CnProviderResult *res, bool done, void *userdata) {
        Run *run = userdata;

        put_result(run, res);
        json_object_object_add(run->out, "done", json_object_new_boolean(done));
}

/* KEY of a machine call: comma-separated fields, in place. */
static int machine_call(CnProvider *p, const char *call, char *key, Run *run, CnProviderCall **ret) {
        char *f[3] = {};
        size_t n = 0;

        for (char *k = key; k && n < ELEMENTSOF(f); n++) {
                f[n] = k;
                k = strchr(k, ',');
                if (k)
                        *k++ = 0;
        }
        if (streq(call, "machine-get") && n == 2)
                return cn_provider_machine_get(p, &(CnProviderMachine) { .name = f[0], .uid = f[1] }, on_machine, run,
                                               ret);
        if (streq(call, "cleanup") && n == 2)
                return cn_provider_machine_cleanup(p, &(CnProviderMachine) { .name = f[0], .uid = f[1] }, on_cleanup,
                                                   run, ret);
        if (streq(call, "migrate") && n == 3)
                return cn_provider_migrate_uid(p, &(CnProviderMachine) { .provider_id = f[0], .uid = f[1] }, f[2],
                                               on_machine, run, ret);
        return -EINVAL;
}

int main(int argc, char *argv[]) {
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *err = NULL;
        CnHttp *http = NULL;
        CnProvider *p = NULL;
        sd_event *e = NULL;
        int r;

        if (argc < 5 || (argc - 3) % 2 != 0) {
                fprintf(stderr, "usage: provider-lookup PROVIDER CLOUD.CONF CALL KEY [CALL KEY...]\n");
                return 2;
        }
        r = cn_cloud_config_load(argv[2], &cfg, &err);
        if (r < 0) {
                fprintf(stderr, "cloud config: %s\n", err ?: strerror(-r));
                return 1;
        }
        if (sd_event_new(&e) < 0 || cn_http_new(e, &http) < 0)
                return 1;
        free(err);
        err = NULL;
        r = cn_provider_new(argv[1], http, cfg, &p, &err);
        if (r < 0) {
                fprintf(stderr, "provider: %s\n", err ?: strerror(-r));
                cn_http_free(http);
                sd_event_unref(e);
                return 1;
        }
        for (int a = 3; a + 1 < argc; a += 2) {
                Run run = { .event = e, .out = json_object_new_object() };
                CnProviderNodeRef ref = {};
                CnProviderCall *call = NULL;

                if (streq(argv[a], "wait")) {
                        char line[64];

                        printf("{\"call\":\"wait\"}\n");
                        fflush(stdout);
                        if (!fgets(line, sizeof(line), stdin))
                                return 1;
                        json_object_put(run.out);
                        continue;
                }
                if (strstr(argv[a + 1], "://"))
                        ref.provider_id = argv[a + 1];
                else
                        ref.name = argv[a + 1];
                json_object_object_add(run.out, "call", json_object_new_string(argv[a]));
                if (streq(argv[a], "machine-get") || streq(argv[a], "cleanup") || streq(argv[a], "migrate"))
                        r = machine_call(p, argv[a], argv[a + 1], &run, &call);
                else if (streq(argv[a], "metadata"))
                        r = cn_provider_instance_metadata(p, &ref, on_instance, &run, &call);
                else if (streq(argv[a], "exists"))
                        r = cn_provider_instance_exists(p, &ref, on_bool, &run, &call);
                else if (streq(argv[a], "shutdown"))
                        r = cn_provider_instance_shutdown(p, &ref, on_bool, &run, &call);
                else
                        r = -EINVAL;
                if (r < 0)
                        put_result(&run, &(CnProviderResult) { .error = r, .message = "refused before any request" });
                while (!run.done)
                        if (sd_event_run(e, UINT64_MAX) < 0)
                                return 1;
                cn_provider_call_free(call);
                printf("%s\n", json_object_to_json_string_ext(run.out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                fflush(stdout);
                json_object_put(run.out);
        }
        cn_provider_free(p);
        cn_http_free(http);
        sd_event_unref(e);
        return 0;
}
