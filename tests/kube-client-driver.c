/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for the Kubernetes client: runs one client operation (or an informer, a leader
 * election candidate, an event recorder) against a real API server and prints what the library
 * reported as JSON lines on stdout, for tests/integration/test-kube-client*.py.
 *
 *   kube-client-driver [--kubeconfig FILE] [--qps Q] [--burst B] [--max-retries N] [--max-response BYTES] COMMAND ARGS...
 *
 * Commands (RESOURCE is one of the built-in resource names, NS "-" for none):
 *   get RESOURCE NS NAME [SUBRESOURCE]
 *   list RESOURCE NS LIMIT [CONTINUE]        one page
 *   list-all RESOURCE NS LIMIT [LABELSELECTOR]
 *   create RESOURCE NS JSON
 *   patch RESOURCE NS NAME merge|json JSON [SUBRESOURCE]
 *   update RESOURCE NS NAME JSON [SUBRESOURCE]
 *   delete RESOURCE NS NAME [PRECONDITION-RV]
 *   watch RESOURCE NS RV N                    until N events or the end of the watch
 *   get-each-line RESOURCE NS NAME            one GET per line read on stdin (token rotation)
 *   informer RESOURCE NS [FIELDSELECTOR]      prints callbacks until stdin closes (server-side watch
 *                                             timeout from $CN_TEST_WATCH_TIMEOUT, default 30 s; the
 *                                             cache keeps JSON text with $CN_TEST_INFORMER_TEXT set)
 *   leader NS NAME IDENTITY LEASE RENEW RETRY (seconds, may be fractional) until SIGTERM, then releases
 *   event RESOURCE NS NAME TYPE REASON MESSAGE [COUNT]   record COUNT times, wait until written
 *   cert-check                                 cn_kube_config_check_client_cert() now */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include "json-util.h"
#include "kube-client.h"
#include "kube-event.h"
#include "kube-informer.h"
#include "kube-leader.h"
#include "log.h"
#include "metrics.h"
#include "time-util.h"

static const CnKubeResource *const resources[] = {
        &cn_kube_resource_nodes,      &cn_kube_resource_pods,     &cn_kube_resource_events,
        &cn_kube_resource_configmaps, &cn_kube_resource_secrets,  &cn_kube_resource_services,
        &cn_kube_resource_namespaces, &cn_kube_resource_leases,   &cn_kube_resource_deployments,
        &cn_kube_resource_serviceaccounts,
};

static sd_event *event;
static CnKubeClient *client;
static int exit_code;
static unsigned remaining;

static const CnKubeResource *resource_by_name(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(resources); i++)
                if (streq(resources[i]->resource, s))
                        return resources[i];
        fprintf(stderr, "unknown resource %s\n", s);
        exit(2);
}

static const char *ns_arg(const char *s) {
        return streq(s, "-") ? NULL : s;
}

static void print_json(json_object *o) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
}

static void print_line(const char *what, json_object *fields) {
        _cleanup_json_ json_object *o = fields ?: json_object_new_object();

        json_object_object_add(o, "what", json_object_new_string(what));
        print_json(o);
}

static json_object *result_json(const CnKubeResult *r) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "error", json_object_new_int(r->error));
        json_object_object_add(o, "errno", r->error < 0 ? json_object_new_string(strerrorname_np(-r->error)) : NULL);
        json_object_object_add(o, "status", json_object_new_int((int) r->http_status));
        json_object_object_add(o, "reason", r->reason ? json_object_new_string(r->reason) : NULL);
        json_object_object_add(o, "message", r->message ? json_object_new_string(r->message) : NULL);
        json_object_object_add(o, "object", json_object_get(r->object));
        return o;
}

static void on_result(CnKubeClient *c, const CnKubeResult *r, void *userdata) {
        print_line(userdata ?: "result", result_json(r));
        if (r->error < 0)
                exit_code = 1;
        /* The end of a watch ends the run whatever the count of events. */
        if (remaining == 0 || --remaining == 0 || (userdata && streq(userdata, "watch-end")))
                (void) sd_event_exit(event, 0);
}

static json_object *parse_arg(const char *s) {
        json_object *o = NULL;
        _cleanup_free_ char *err = NULL;

        if (cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, &err) < 0) {
                fprintf(stderr, "bad JSON argument: %s\n", strna(err));
                exit(2);
        }
        return o;
}

/* --- watch ------------------------------------------------------------------------------ */

static void on_watch_event(CnKubeClient *c, CnKubeWatchEventType type, json_object *object, void *userdata) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "type", json_object_new_string(cn_kube_watch_event_type_to_string(type)));
        json_object_object_add(o, "object", json_object_get(object));
        print_line("event", o);
        if (remaining > 0 && --remaining == 0)
                (void) sd_event_exit(event, 0);
}

/* --- stdin-driven commands ----------------------------------------------------------------- */

typedef struct LineCommand {
        const CnKubeResource *resource;
        const char *ns, *name;
} LineCommand;

static int on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        LineCommand *lc = userdata;
        char buf[256];
        ssize_t n;

        n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
                (void) sd_event_exit(event, 0);
                return 0;
        }
        if (lc)
                for (ssize_t i = 0; i < n; i++)
                        if (buf[i] == '\n')
                                (void) cn_kube_get(client, lc->resource, lc->ns, lc->name, NULL, on_result, NULL, NULL);
        return 0;
}

/* --- informer ----------------------------------------------------------------------------- */

static json_object *names(json_object *obj) {
        json_object *o = json_object_new_object();
        const char *ns = cn_json_string(obj, "metadata", "namespace", NULL);

        json_object_object_add(o, "name", json_object_new_string(strna(cn_json_string(obj, "metadata", "name", NULL))));
        if (ns)
                json_object_object_add(o, "namespace", json_object_new_string(ns));
        json_object_object_add(o, "resourceVersion",
                               json_object_new_string(strna(cn_json_string(obj, "metadata", "resourceVersion", NULL))));
        json_object_object_add(o, "object", json_object_get(obj));
        return o;
}

static void inf_added(CnKubeInformer *i, json_object *obj, void *userdata) {
        json_object *o = names(obj);

        /* What the cache answers for the object just announced. */
        json_object_object_add(o, "cached",
                               json_object_new_boolean(json_object_equal(
                                       cn_kube_informer_lookup(i, cn_json_string(obj, "metadata", "namespace", NULL),
                                                               cn_json_string(obj, "metadata", "name", NULL)),
                                       obj)));
        json_object_object_add(o, "watchRestarts",
                               json_object_new_int64((int64_t) cn_kube_informer_get_watch_restarts(i)));
        print_line("added", o);
}

static void inf_updated(CnKubeInformer *i, json_object *old, json_object *obj, void *userdata) {
        json_object *o = names(obj);

        json_object_object_add(o, "oldResourceVersion",
                               json_object_new_string(strna(cn_json_string(old, "metadata", "resourceVersion", NULL))));
        print_line("updated", o);
}

static void inf_deleted(CnKubeInformer *i, json_object *obj, void *userdata) {
        json_object *o = names(obj);

        json_object_object_add(o, "cached",
                               json_object_new_boolean(cn_kube_informer_lookup(
                                                               i, cn_json_string(obj, "metadata", "namespace", NULL),
                                                               cn_json_string(obj, "metadata", "name", NULL)) != NULL));
        print_line("deleted", o);
}

static int count_one(json_object *obj, void *userdata) {
        (*(int *) userdata)++;
        return 0;
}

static void inf_synced(CnKubeInformer *i, void *userdata) {
        json_object *o = json_object_new_object();

        int n = 0;

        (void) cn_kube_informer_foreach(i, count_one, &n);
        json_object_object_add(o, "size", json_object_new_int((int) cn_kube_informer_size(i)));
        json_object_object_add(o, "foreach", json_object_new_int(n));
        json_object_object_add(o, "resourceVersion",
                               json_object_new_string(strna(cn_kube_informer_get_resource_version(i))));
        print_line("synced", o);
}

/* --- leader ------------------------------------------------------------------------------- */

static CnKubeLeader *leader;

static void leader_started(CnKubeLeader *l, void *userdata) {
        print_line("started-leading", NULL);
}

static void leader_stopped(CnKubeLeader *l, void *userdata) {
        print_line("stopped-leading", NULL);
}

static void leader_new(CnKubeLeader *l, const char *identity, void *userdata) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "identity", identity ? json_object_new_string(identity) : NULL);
        print_line("new-leader", o);
}

static void leader_released(CnKubeLeader *l, int error, void *userdata) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "error", json_object_new_int(error));
        print_line("released", o);
        (void) sd_event_exit(event, 0);
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        if (leader && cn_kube_leader_release(leader, leader_released, NULL) >= 0)
                return 0;
        (void) sd_event_exit(event, 0);
        return 0;
}

/* --- events ------------------------------------------------------------------------------- */

static CnKubeEventRecorder *recorder;

static int on_poll_recorder(sd_event_source *s, uint64_t usec, void *userdata) {
        if (cn_kube_event_recorder_pending(recorder) == 0) {
                (void) sd_event_exit(event, 0);
                return 0;
        }
        return sd_event_source_set_time_relative(s, 10 * USEC_PER_MSEC) < 0 ? 0
                                                                           : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static usec_t seconds(const char *s) {
        return (usec_t) (strtod(s, NULL) * USEC_PER_SEC);
}

static void need(int argc, int n) {
        if (argc < n) {
                fprintf(stderr, "missing arguments\n");
                exit(2);
        }
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "kubeconfig", required_argument, NULL, 'k' },
                { "qps", required_argument, NULL, 'q' },
                { "burst", required_argument, NULL, 'b' },
                { "max-retries", required_argument, NULL, 'r' },
                { "max-response", required_argument, NULL, 'm' },
                {},
        };
        _cleanup_free_ char *msg = NULL;
        _cleanup_json_ json_object *body = NULL;
        _cleanup_(cn_kube_informer_unrefp) CnKubeInformer *informer = NULL;
        CnKubeClientOptions copts = { .component = "test-driver" };
        const char *kubeconfig = NULL, *cmd;
        CnKubeConfig *config = NULL;
        CnMetrics *metrics = NULL;
        LineCommand lc = {};
        sigset_t mask;
        int c, r;

        cn_log_open("kube-client-driver", CN_LOG_TARGET_CONSOLE);
        if (getenv("CN_DEBUG"))
                cn_log_set_verbosity(4);

        while ((c = getopt_long(argc, argv, "+", options, NULL)) >= 0)
                switch (c) {
                case 'k':
                        kubeconfig = optarg;
                        break;
                case 'q':
                        copts.qps = strtod(optarg, NULL);
                        break;
                case 'b':
                        copts.burst = (unsigned) atoi(optarg);
                        break;
                case 'r':
                        copts.max_retries = atoi(optarg);
                        break;
                case 'm':
                        copts.max_response_size = (size_t) atol(optarg);
                        break;
                default:
                        return 2;
                }
        argc -= optind;
        argv += optind;
        need(argc, 1);
        cmd = argv[0];

        r = cn_kube_config_load_default(kubeconfig, NULL, &config, &msg);
        if (r < 0) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "error", json_object_new_int(r));
                json_object_object_add(o, "message", json_object_new_string(strna(msg)));
                print_line("config-error", o);
                return 1;
        }
        if (streq(cmd, "cert-check")) {
                uint64_t not_after = 0;
                json_object *o = json_object_new_object();

                r = cn_kube_config_check_client_cert(config, cn_now(CLOCK_REALTIME), &not_after, &msg);
                json_object_object_add(o, "error", json_object_new_int(r));
                json_object_object_add(o, "message", msg ? json_object_new_string(msg) : NULL);
                json_object_object_add(o, "notAfter", json_object_new_int64((int64_t) not_after));
                print_line("cert-check", o);
                cn_kube_config_free(config);
                return r < 0;
        }

        assert(sd_event_default(&event) >= 0);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(event, NULL, SIGTERM, on_sigterm, NULL);
        (void) sd_event_add_signal(event, NULL, SIGINT, on_sigterm, NULL);
        r = cn_kube_client_new(event, config, &copts, &client);
        assert(r >= 0);
        assert(cn_metrics_new(&metrics) >= 0);
        assert(cn_kube_client_register_metrics(client, metrics, "rest_client_requests") >= 0);

        if (streq(cmd, "get")) {
                need(argc, 4);
                r = cn_kube_get(client, resource_by_name(argv[1]), ns_arg(argv[2]), argv[3], argc > 4 ? argv[4] : NULL,
                                on_result, NULL, NULL);
        } else if (streq(cmd, "list") || streq(cmd, "list-all")) {
                CnKubeListOptions o = {};

                need(argc, 4);
                o.limit = (unsigned) atoi(argv[3]);
                if (streq(cmd, "list")) {
                        o.continue_token = argc > 4 ? argv[4] : NULL;
                        r = cn_kube_list(client, resource_by_name(argv[1]), ns_arg(argv[2]), &o, on_result, NULL, NULL);
                } else {
                        o.label_selector = argc > 4 ? argv[4] : NULL;
                        r = cn_kube_list_all(client, resource_by_name(argv[1]), ns_arg(argv[2]), &o, on_result, NULL,
                                             NULL);
                }
        } else if (streq(cmd, "create")) {
                need(argc, 4);
                body = parse_arg(argv[3]);
                r = cn_kube_create(client, resource_by_name(argv[1]), ns_arg(argv[2]), body, on_result, NULL, NULL);
        } else if (streq(cmd, "patch")) {
                need(argc, 6);
                body = parse_arg(argv[5]);
                r = cn_kube_patch(client, resource_by_name(argv[1]), ns_arg(argv[2]), argv[3], argc > 6 ? argv[6] : NULL,
                                  streq(argv[4], "json") ? CN_KUBE_PATCH_JSON : CN_KUBE_PATCH_MERGE, body, on_result,
                                  NULL, NULL);
        } else if (streq(cmd, "update")) {
                need(argc, 5);
                body = parse_arg(argv[4]);
                r = cn_kube_update(client, resource_by_name(argv[1]), ns_arg(argv[2]), argv[3], argc > 5 ? argv[5] : NULL,
                                   body, on_result, NULL, NULL);
        } else if (streq(cmd, "delete")) {
                CnKubeDeleteOptions o = { .precondition_resource_version = argc > 4 ? argv[4] : NULL };

                need(argc, 4);
                r = cn_kube_delete(client, resource_by_name(argv[1]), ns_arg(argv[2]), argv[3], &o, on_result, NULL, NULL);
        } else if (streq(cmd, "watch")) {
                CnKubeListOptions o = { .allow_watch_bookmarks = true, .timeout_seconds = 30 };

                need(argc, 5);
                o.resource_version = argv[3];
                remaining = (unsigned) atoi(argv[4]);
                r = cn_kube_watch(client, resource_by_name(argv[1]), ns_arg(argv[2]), &o, on_watch_event, on_result,
                                  (void *) "watch-end", NULL);
        } else if (streq(cmd, "get-each-line")) {
                need(argc, 4);
                lc = (LineCommand){ resource_by_name(argv[1]), ns_arg(argv[2]), argv[3] };
                remaining = UINT_MAX;
                r = sd_event_add_io(event, NULL, STDIN_FILENO, EPOLLIN, on_stdin, &lc);
        } else if (streq(cmd, "informer")) {
                CnKubeInformerOptions o = { .page_size = 2, .watch_timeout_sec = 30 };
                CnKubeInformerHandlers h = { inf_added, inf_updated, inf_deleted, inf_synced };

                need(argc, 3);
                if (getenv("CN_TEST_WATCH_TIMEOUT"))
                        o.watch_timeout_sec = (unsigned) atoi(getenv("CN_TEST_WATCH_TIMEOUT"));
                o.namespace = ns_arg(argv[2]);
                o.field_selector = argc > 3 ? argv[3] : NULL;
                o.store_text = getenv("CN_TEST_INFORMER_TEXT") != NULL;
                r = cn_kube_informer_get_shared(client, resource_by_name(argv[1]), &o, &informer);
                if (r >= 0)
                        r = cn_kube_informer_add_handlers(informer, &h, NULL, NULL);
                if (r >= 0)
                        r = cn_kube_informer_start(informer);
                if (r >= 0)
                        r = sd_event_add_io(event, NULL, STDIN_FILENO, EPOLLIN, on_stdin, NULL);
        } else if (streq(cmd, "leader")) {
                CnKubeLeaderOptions o = {};
                CnKubeLeaderCallbacks cb = { leader_started, leader_stopped, leader_new };

                need(argc, 7);
                o.namespace = argv[1];
                o.name = argv[2];
                o.identity = argv[3];
                o.lease_duration_usec = seconds(argv[4]);
                o.renew_deadline_usec = seconds(argv[5]);
                o.retry_period_usec = seconds(argv[6]);
                r = cn_kube_leader_new(client, &o, &cb, NULL, &leader);
                if (r >= 0)
                        r = cn_kube_leader_start(leader);
        } else if (streq(cmd, "event")) {
                CnKubeEventRecorderOptions o = { .component = "test-driver", .host = "test-host" };
                CnKubeObjectRef ref = {};
                const CnKubeResource *res;
                unsigned count;

                need(argc, 7);
                res = resource_by_name(argv[1]);
                ref = (CnKubeObjectRef){ .kind = res->kind, .api_version = res->version, .namespace = ns_arg(argv[2]),
                                         .name = argv[3], .uid = "uid-1" };
                count = argc > 7 ? (unsigned) atoi(argv[7]) : 1;
                r = cn_kube_event_recorder_new(client, &o, &recorder);
                for (unsigned i = 0; r >= 0 && i < count; i++)
                        r = cn_kube_event_record(recorder, &ref,
                                                 streq(argv[4], "Warning") ? CN_KUBE_EVENT_WARNING : CN_KUBE_EVENT_NORMAL,
                                                 argv[5], NULL, "%s", argv[6]);
                if (r >= 0)
                        r = sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 0,
                                                       on_poll_recorder, NULL);
        } else {
                fprintf(stderr, "unknown command %s\n", cmd);
                return 2;
        }
        if (r < 0) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "error", json_object_new_int(r));
                print_line("call-error", o);
                return 1;
        }

        r = sd_event_loop(event);
        {
                _cleanup_buf_ CnBuf text = CN_BUF_INIT(1024 * 1024);
                json_object *o = json_object_new_object();

                assert(cn_metrics_format(metrics, &text) >= 0);
                json_object_object_add(o, "text", json_object_new_string(cn_buf_str(&text)));
                print_line("metrics", o);
        }
        informer = cn_kube_informer_unref(informer);
        cn_kube_event_recorder_free(recorder);
        cn_kube_leader_free(leader);
        cn_kube_client_free(client);
        cn_metrics_free(metrics);
        sd_event_unref(event);
        return r < 0 ? 1 : exit_code;
}
