/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's Machine reconciler. See mc-machine-controller.h.
 *
 * Crash safety comes from the providers, as for CloudnodeMachines: every create is preceded by a
 * lookup of the server by the Machine's UID, which the server carries from its create request on,
 * so a restart between create and status write finds the server instead of making another, and a
 * deletion looks it up the same way until the cloud says it is gone. At most one request per
 * Machine is in flight; a Machine waiting for a retry has a timer (the work queue's backoff).
 *
 * Secrets and ConfigMaps named by a providerSpec are read with GET when a pass needs them and
 * kept for at most REFS_TTL per Machine, so that a rotated credential is used from then on; their
 * values are never logged, and neither is the user data. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash-util.h"
#include "http.h"
#include "json-util.h"
#include "kube-expectation.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "machine-reconcile.h"
#include "mc-machine-controller.h"
#include "mc-machine-spec.h"
#include "mc-machineset.h"
#include "mc-node.h"
#include "mc-queue.h"
#include "provider.h"
#include "string-util.h"
#include "time-util.h"

#define POLL_BASE_USEC (500 * USEC_PER_MSEC)
#define POLL_CAP_USEC (30 * USEC_PER_SEC)
#define EVICTION_RETRY_USEC (5 * USEC_PER_SEC)
#define REFS_TTL (30 * USEC_PER_SEC)
#define USERDATA_MAX (32U * 1024U)
#define PROVIDERS_MAX 64U
#define SKIP_EVICTION_AFTER_DEFAULT (2 * USEC_PER_HOUR)
/* Bounds the wait for the watch event of our own Node write. */
#define NODE_EXPECT_TIMEOUT (10 * USEC_PER_SEC)

static const CnKubeResource resource_machines = {
        .group = "cluster.k8s.io", .version = "v1alpha1", .resource = "machines", .kind = "Machine",
        .namespaced = true,
};

typedef struct McState McState;

typedef struct CachedProvider {
        char hash[CN_SHA256_HEX_SIZE];
        CnProvider *provider;
} CachedProvider;

struct McController {
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        CnHttp *http;
        char *namespace, *user_data_secret;
        usec_t skip_eviction_after;
        McLoop loop;
        CnKubeInformer *machines, *nodes; /* the loop's */
        CachedProvider providers[PROVIDERS_MAX];
        size_t n_providers;
        CnMetric *m_machines, *m_calls, *m_errors, *m_provisioning, *m_deprovisioning, *m_machines_total;
        CnMetric *m_created, *m_deleted;
};

struct McState {
        McController *mc;
        CnWorkItem *item;
        char *namespace, *name;
        CnProviderCall *call;
        CnKubeRequest *request;   /* a read (Secret, ConfigMap, Pods) or a Node write */
        CnKubeRequest *write;     /* the Machine's patch */
        CnWriteExpectation expect;
        CnWriteExpectation node_expect; /* of the Node's metadata write */
        bool node_invalid;        /* the Machine's Node metadata was reported as not valid */
        json_object *refs;        /* "Secret/NAME" or "ConfigMap/NAME" -> object, null when missing */
        usec_t refs_time;         /* CLOCK_MONOTONIC of the first read in refs */
        char *scratch;            /* the value a lookup answered last (erased when replaced) */
        char *reading;            /* the refs key of the read in flight */
        McMachineSpec spec;       /* of the pass in flight */
        CnProvider *provider;
        char *uid;
        char **evict;             /* Pods still to evict, one request at a time */
        size_t evict_next;
        bool evict_blocked;
        bool drained;             /* this deletion's drain is done (or skipped) */
        bool cordoned;            /* this deletion cordoned the Node (the cache may not show it yet) */
        bool missed;
};

static void enqueue(McState *s) {
        cn_work_queue_add(s->item);
}

static void retry_later(McState *s, usec_t min_delay) {
        (void) cn_work_queue_retry(s->item, min_delay, NULL);
}

/* machine_controller_errors_total: what machine-controller counts as an unexpected error, a
 * pass that ends in an error (a failed API request, a cloud error). */
static void count_error(McState *s) {
        (void) cn_metric_inc(s->mc->m_errors, NULL);
}

static void erase_string(char **p) {
        if (*p)
                explicit_bzero(*p, strlen(*p));
        free(*p);
        *p = NULL;
}

static void drop_refs(McState *s) {
        json_object_put(s->refs);
        s->refs = NULL;
}

static McState *state_free(McState *s) {
        if (!s)
                return NULL;
        cn_provider_call_free(s->call);
        cn_kube_request_free(s->request);
        cn_kube_request_free(s->write);
        cn_write_expectation_clear(&s->expect);
        cn_write_expectation_clear(&s->node_expect);
        json_object_put(s->refs);
        erase_string(&s->scratch);
        free(s->reading);
        mc_machine_spec_done(&s->spec);
        cn_provider_free(s->provider);
        strv_free(s->evict);
        free(s->namespace);
        free(s->name);
        free(s->uid);
        free(s);
        return NULL;
}

static void state_free_data(void *data) {
        state_free(data);
}

static void *state_new(CnWorkItem *item, void *userdata) {
        McState *s = calloc(1, sizeof(McState));

        if (!s)
                return NULL;
        s->mc = ASSERT_PTR(userdata);
        s->item = item;
        if (mc_queue_key_split(cn_work_item_key(item), &s->namespace, &s->name) < 0)
                return state_free(s);
        return s;
}

static bool state_busy(McState *s) {
        return s->call || s->request || s->write || cn_work_item_retry_pending(s->item);
}

static void call_done(McState *s) {
        if (s->missed) {
                s->missed = false;
                enqueue(s);
        }
}

static json_object *lookup_machine(McState *s) {
        return cn_kube_informer_lookup(s->mc->machines, s->namespace, s->name);
}

static void event(McState *s, json_object *machine, CnKubeEventType type, const char *reason, const char *message) {
        CnKubeObjectRef ref;

        if (machine && cn_kube_object_ref_from_json(machine, &resource_machines, &ref) >= 0)
                (void) cn_kube_event_record(s->mc->recorder, &ref, type, reason, NULL, "%s", message);
}

/* ---- writes of the Machine (machine-controller's CRD has no status subresource) ---- */

static void on_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);

        s->write = cn_kube_request_free(s->write);
        if (result->error < 0) {
                if (result->error == -ENOENT)
                        enqueue(s);
                else {
                        log_debug_errno(result->error, "Machine %s/%s: write failed, retrying: %s", s->namespace,
                                        s->name, strna(result->message));
                        count_error(s);
                        cn_write_expectation_clear(&s->expect);
                        retry_later(s, 0);
                }
                return;
        }
        if (!cn_write_expectation_written(&s->expect, result->object)) {
                enqueue(s);
                return;
        }
        call_done(s);
}

/* A merge patch of the Machine, sent only when it changes the cached object: 1 when sent. */
static int write_machine(McState *s, json_object *machine, json_object *patch) {
        int r;

        if (machine && !cn_capi_patch_changes(machine, patch))
                return 0;
        s->write = cn_kube_request_free(s->write);
        r = cn_kube_patch(s->mc->client, &resource_machines, s->namespace, s->name, NULL, CN_KUBE_PATCH_MERGE, patch,
                          on_written, s, &s->write);
        if (r < 0)
                return r;
        if (machine) {
                r = cn_write_expectation_begin(&s->expect, machine);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* A terminal error, as machine-controller records one: status.errorReason and errorMessage, a
 * Warning Event, no retries while status.errorReason stays (a human fixes the Machine and clears
 * it, or deletes the Machine). */
static void set_failed(McState *s, json_object *machine, const char *reason, const char *message) {
        _cleanup_json_ json_object *patch = json_object_new_object();

        if (!patch || cn_json_set_string(patch, reason, "status", "errorReason", NULL) < 0 ||
            cn_json_set_string(patch, strempty(message), "status", "errorMessage", NULL) < 0)
                return;
        if (write_machine(s, machine, patch) <= 0)
                return;
        log_warning("Machine %s/%s failed: %s: %s", s->namespace, s->name, reason, strna(message));
        event(s, machine, CN_KUBE_EVENT_WARNING, reason, strna(message));
}

/* Observes the seconds since the Machine's metadata timestamp field (as machine-controller: from
 * creationTimestamp to its Node's readiness, from deletionTimestamp to its finalizer's removal). */
static void observe_since(CnMetric *h, json_object *machine, const char *field) {
        usec_t t, now = cn_now(CLOCK_REALTIME);

        if (cn_parse_rfc3339(strempty(cn_json_string(machine, "metadata", field, NULL)), &t) >= 0 && now >= t)
                (void) cn_metric_observe(h, NULL, (double) (now - t) / USEC_PER_SEC);
}

static bool has_finalizer(json_object *machine, const char *f) {
        return cn_capi_has_finalizer(machine, f);
}

/* ---- Secrets and ConfigMaps named by the providerSpec ---- */

static int ref_key(McRefKind kind, const char *name, char **ret) {
        return asprintf(ret, "%s/%s", kind == MC_REF_SECRET ? "Secret" : "ConfigMap", name) < 0 ? -ENOMEM : 0;
}

static int lookup_ref(const McRef *ref, const char **ret, void *userdata) {
        McState *s = ASSERT_PTR(userdata);
        _cleanup_free_ char *key = NULL;
        json_object *o;
        const char *v;

        if (ref_key(ref->kind, ref->name, &key) < 0)
                return -ENOMEM;
        if (!s->refs || !json_object_object_get_ex(s->refs, key, &o))
                return -EAGAIN;
        if (!o)
                return -ENOENT;
        v = cn_json_string(o, "data", ref->key, NULL);
        if (!v)
                return -ENOENT;
        erase_string(&s->scratch);
        if (ref->kind == MC_REF_SECRET) {
                void *raw = NULL;
                size_t size = 0;

                if (cn_base64_decode(v, strlen(v), &raw, &size) < 0 || memchr(raw, 0, size)) {
                        free(raw);
                        return -EINVAL;
                }
                s->scratch = strndup(raw, size);
                explicit_bzero(raw, size);
                free(raw);
        } else
                s->scratch = strdup(v);
        if (!s->scratch)
                return -ENOMEM;
        *ret = s->scratch;
        return 0;
}

static const char *lookup_env(const char *name, void *userdata) {
        return getenv(name);
}

static void on_ref_read(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);
        const char *kind = cn_json_string(result->object, "kind", NULL);
        _cleanup_free_ char *key = NULL;

        s->request = cn_kube_request_free(s->request);
        if (result->error < 0 && result->error != -ENOENT) {
                log_info("Machine %s/%s: reading a referenced object failed, retrying: %s", s->namespace, s->name,
                         strna(result->message));
                retry_later(s, 0);
                return;
        }
        key = TAKE_PTR(s->reading);
        if (!key) {
                retry_later(s, 0);
                return;
        }
        if (!s->refs) {
                s->refs = json_object_new_object();
                s->refs_time = cn_now(CLOCK_MONOTONIC);
        }
        if (!s->refs || json_object_object_add(s->refs, key,
                                               result->error < 0 ? NULL : json_object_get(result->object)) < 0) {
                retry_later(s, 0);
                return;
        }
        if (result->error >= 0 && !streq(strempty(kind), strchr(key, '/') ? strndupa(key, strcspn(key, "/")) : "")) {
                retry_later(s, 0);
                return;
        }
        enqueue(s);
}

static int read_ref(McState *s, McRefKind kind, const char *name) {
        int r;

        free(s->reading);
        s->reading = NULL;
        r = ref_key(kind, name, &s->reading);
        if (r < 0)
                return r;
        return cn_kube_get(s->mc->client, kind == MC_REF_SECRET ? &cn_kube_resource_secrets : &cn_kube_resource_configmaps,
                           s->namespace, name, NULL, on_ref_read, s, &s->request);
}

/* ---- providers, one per distinct set of credentials ---- */

static void count_cloud_request(const char *provider, const char *operation, const char *result, void *userdata) {
        McController *mc = ASSERT_PTR(userdata);

        (void) cn_metric_inc(mc->m_calls, CN_LABELS(provider, operation, result));
}

static int provider_for(McController *mc, const McMachineSpec *spec, CnProvider **ret, char **ret_reason) {
        _cleanup_free_ char *text = NULL, *err = NULL;
        char hash[CN_SHA256_HEX_SIZE];
        CnProvider *p = NULL;
        int r;

        r = cn_json_to_string(spec->cloud_config, CN_JSON_COMPACT, &text);
        if (r < 0)
                return r;
        r = cn_sha256_hex(text, strlen(text), hash);
        explicit_bzero(text, strlen(text));
        if (r < 0)
                return r;
        for (size_t i = 0; i < mc->n_providers; i++)
                if (streq(mc->providers[i].hash, hash) &&
                    streq(cn_provider_name(mc->providers[i].provider), spec->provider)) {
                        *ret = mc->providers[i].provider;
                        return 0;
                }
        /* Complete or refused: the process's own settings never complete a Machine's. */
        r = cn_provider_new_without_environment(spec->provider, mc->http, spec->cloud_config, &p, &err);
        if (r < 0) {
                *ret_reason = TAKE_PTR(err);
                return r;
        }
        if (mc->n_providers == PROVIDERS_MAX) {
                /* The oldest goes; calls and Machines holding it keep it alive until they let go. */
                cn_provider_free(mc->providers[0].provider);
                memmove(mc->providers, mc->providers + 1, sizeof(CachedProvider) * (PROVIDERS_MAX - 1));
                mc->n_providers--;
        }
        cn_provider_set_request_counter(p, count_cloud_request, mc);
        memcpy(mc->providers[mc->n_providers].hash, hash, sizeof(hash));
        mc->providers[mc->n_providers++].provider = p;
        *ret = p;
        return 0;
}

/* Translates the Machine's providerSpec and finds its provider: 1 ready, 0 when a read was started
 * (or a retry armed), negative when a terminal error was recorded. */
static int prepare(McState *s, json_object *machine, bool deleting) {
        _cleanup_free_ char *reason = NULL;
        CnProvider *p = NULL;
        int r;

        if (s->refs && cn_now(CLOCK_MONOTONIC) - s->refs_time > REFS_TTL)
                drop_refs(s);
        mc_machine_spec_done(&s->spec);
        r = mc_machine_spec_translate(cn_json_get(machine, "spec", "providerSpec", "value", NULL), s->namespace,
                                      lookup_ref, lookup_env, s, &s->spec, &reason);
        if (r == -EAGAIN) {
                r = read_ref(s, s->spec.pending.kind, s->spec.pending.name);
                mc_machine_spec_done(&s->spec);
                if (r < 0)
                        retry_later(s, 0);
                return 0;
        }
        if (r == -ENOENT) {
                /* The Secret may yet be created: reported, and looked at again. */
                event(s, machine, CN_KUBE_EVENT_WARNING, "ReferenceMissing", strna(reason));
                drop_refs(s);
                retry_later(s, 0);
                return 0;
        }
        if (r < 0) {
                if (!deleting)
                        set_failed(s, machine, "InvalidConfiguration", reason ?: "the providerSpec is not valid");
                return -EINVAL;
        }
        r = provider_for(s->mc, &s->spec, &p, &reason);
        if (r < 0) {
                if (!deleting)
                        set_failed(s, machine, "InvalidConfiguration", reason ?: "the credentials are not usable");
                return -EINVAL;
        }
        if (p != s->provider) {
                cn_provider_free(s->provider);
                s->provider = cn_provider_ref(p);
        }
        if (!deleting) {
                json_object *spec = NULL;

                r = cn_provider_add_defaults(s->provider, s->spec.spec, &spec);
                if (r >= 0) {
                        json_object_put(s->spec.spec);
                        s->spec.spec = spec;
                        r = cn_provider_validate(s->provider, s->spec.spec, &reason);
                }
                if (r < 0) {
                        set_failed(s, machine, "InvalidConfiguration", reason ?: "the providerSpec is not valid");
                        return -EINVAL;
                }
        }
        return 1;
}

static CnProviderMachine provider_machine(McState *s, json_object *machine) {
        return (CnProviderMachine) {
                .namespace = s->namespace,
                .name = s->name,
                .uid = s->uid,
                .spec = s->spec.spec,
                .provider_id = cn_json_string(machine, "spec", "providerID", NULL),
        };
}

static bool handle_error(McState *s, const CnProviderResult *res, const char *what) {
        json_object *machine = lookup_machine(s);

        count_error(s);
        switch (cn_provider_error_class(res->error)) {
        case CN_PROVIDER_TERMINAL:
                set_failed(s, machine, res->error == -EACCES || res->error == -EPERM ? "InvalidConfiguration"
                                                                                     : "CreateError",
                           res->message ?: what);
                return true;
        default:
                if (res->error == -CN_PROVIDER_EMULTIPLE) {
                        /* A human decides which server is this Machine's: neither adopt nor create. */
                        event(s, machine, CN_KUBE_EVENT_WARNING, "MultipleInstances", strna(res->message));
                        retry_later(s, POLL_CAP_USEC);
                        return true;
                }
                log_info("Machine %s/%s: %s failed, retrying: %s", s->namespace, s->name, what, strna(res->message));
                retry_later(s, res->retry_after);
                return true;
        }
}

/* ---- Nodes ---- */

typedef struct NodeMatch {
        const char *provider_id, *name;
        json_object *found;
} NodeMatch;

static int match_node(json_object *node, void *userdata) {
        NodeMatch *m = userdata;
        const char *pid = cn_json_string(node, "spec", "providerID", NULL);

        if (m->provider_id && pid && streq(pid, m->provider_id)) {
                m->found = node;
                return -EEXIST;
        }
        if (!pid && m->name && streq(strempty(cn_json_string(node, "metadata", "name", NULL)), m->name))
                m->found = node;
        return 0;
}

/* The Machine's Node: the one of status.nodeRef, else the one with its providerID, else the one
 * named as its server (the Machine), as machine-controller looks it up. */
static json_object *machine_node(McState *s, json_object *machine) {
        const char *ref = cn_json_string(machine, "status", "nodeRef", "name", NULL);
        NodeMatch m = { .provider_id = cn_json_string(machine, "spec", "providerID", NULL), .name = s->name };

        if (ref)
                return cn_kube_informer_lookup(s->mc->nodes, NULL, ref);
        (void) cn_kube_informer_foreach(s->mc->nodes, match_node, &m);
        return m.found;
}

/* ---- provisioning ---- */

static void record_instance(McState *s, json_object *instance) {
        _cleanup_json_ json_object *patch = json_object_new_object();
        json_object *machine = lookup_machine(s), *ready_v = json_object_object_get(instance, "ready");
        json_object *addresses = json_object_object_get(instance, "addresses");
        const char *pid = cn_json_string(instance, "providerID", NULL);
        bool ready = ready_v && json_object_get_boolean(ready_v);
        int r = patch ? 0 : -ENOMEM;

        if (r >= 0 && pid && !cn_json_string(machine, "spec", "providerID", NULL))
                r = cn_json_set_string(patch, pid, "spec", "providerID", NULL);
        if (r >= 0 && addresses)
                r = cn_json_set(patch, json_object_get(addresses), "status", "addresses", NULL);
        if (r >= 0)
                (void) write_machine(s, machine, patch);
        if (ready)
                cn_work_queue_forget(s->item);
        else
                retry_later(s, 0);
}

static void on_created(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        McState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        call_done(s);
        if (res->error < 0) {
                (void) handle_error(s, res, "create");
                return;
        }
        log_info("Machine %s/%s: created server %s", s->namespace, s->name, strna(cn_json_string(instance, "id", NULL)));
        event(s, lookup_machine(s), CN_KUBE_EVENT_NORMAL, "Created", "Successfully created instance");
        record_instance(s, instance);
}

static const char *user_data_secret(McState *s, json_object *machine) {
        return cn_json_string(machine, "metadata", "annotations", MC_ANNOTATION_USER_DATA_SECRET, NULL) ?:
               s->mc->user_data_secret;
}

static void create(McState *s, json_object *machine) {
        _cleanup_free_ char *key = NULL;
        _cleanup_free_ void *data = NULL;
        const char *secret = user_data_secret(s, machine), *b64;
        CnProviderMachine m = provider_machine(s, machine);
        json_object *o;
        size_t size = 0;
        int r;

        if (!secret) {
                event(s, machine, CN_KUBE_EVENT_WARNING, "NoUserData",
                      "no user data: annotate the Machine with " MC_ANNOTATION_USER_DATA_SECRET
                      " or start the controller with --machine-controller-user-data-secret");
                retry_later(s, POLL_CAP_USEC);
                return;
        }
        if (ref_key(MC_REF_SECRET, secret, &key) < 0)
                return;
        if (!s->refs || !json_object_object_get_ex(s->refs, key, &o)) {
                if (read_ref(s, MC_REF_SECRET, secret) < 0)
                        retry_later(s, 0);
                return;
        }
        b64 = cn_json_string(o, "data", "value", NULL);
        if (!b64) {
                /* Whoever writes it may not have yet: wait for it rather than fail. */
                event(s, machine, CN_KUBE_EVENT_WARNING, "NoUserData", "the user data Secret has no key \"value\" yet");
                drop_refs(s);
                retry_later(s, 0);
                return;
        }
        r = cn_base64_decode(b64, strlen(b64), &data, &size);
        if (r < 0 || size > USERDATA_MAX || memchr(data, 0, size)) {
                set_failed(s, machine, "InvalidConfiguration", "the user data Secret's value is not usable user data");
                return;
        }
        r = cn_provider_machine_create(s->provider, &m, data, on_created, s, &s->call);
        explicit_bzero(data, size);
        if (r < 0) {
                CnProviderResult res = { .error = r, .message = "could not start the create request" };

                (void) handle_error(s, &res, "create");
        }
}

static void on_lookup(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        McState *s = ASSERT_PTR(userdata);
        json_object *machine = lookup_machine(s);

        s->call = cn_provider_call_free(s->call);
        call_done(s);
        if (res->error >= 0) {
                record_instance(s, instance);
                return;
        }
        if (res->error != -ENOENT) {
                (void) handle_error(s, res, "lookup");
                return;
        }
        if (!machine || cn_json_get(machine, "metadata", "deletionTimestamp", NULL))
                return;
        /* As machine-controller: no server (never made, or deleted out of band) is created. */
        create(s, machine);
}

static void set_node_ref(McState *s, json_object *machine, json_object *node) {
        _cleanup_json_ json_object *patch = json_object_new_object();

        if (!patch || cn_json_set_string(patch, "v1", "status", "nodeRef", "apiVersion", NULL) < 0 ||
            cn_json_set_string(patch, "Node", "status", "nodeRef", "kind", NULL) < 0 ||
            cn_json_set_string(patch, cn_json_string(node, "metadata", "name", NULL), "status", "nodeRef", "name",
                               NULL) < 0 ||
            cn_json_set_string(patch, strempty(cn_json_string(node, "metadata", "uid", NULL)), "status", "nodeRef", "uid",
                               NULL) < 0)
                return;
        if (write_machine(s, machine, patch) > 0)
                log_info("Machine %s/%s: Node %s joined", s->namespace, s->name,
                         cn_json_string(node, "metadata", "name", NULL));
}

static void on_node_metadata_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);

        s->request = cn_kube_request_free(s->request);
        if (result->error < 0) {
                cn_write_expectation_clear(&s->node_expect);
                count_error(s);
                if (result->error != -ENOENT)
                        log_info("Machine %s/%s: writing the Node's labels, annotations and taints failed, retrying: %s",
                                 s->namespace, s->name, strna(result->message));
                retry_later(s, 0);
                call_done(s);
                return;
        }
        if (!cn_write_expectation_written(&s->node_expect, result->object))
                enqueue(s);
        call_done(s);
}

/* machine-controller's owner label, then (once Ready) the Machine's labels, annotations and
 * taints on its Node: see mc-node.h. */
static void write_node_metadata(McState *s, json_object *machine, json_object *node) {
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_free_ char *reason = NULL;
        bool ready = mc_node_ready(node);
        int r;

        if (cn_write_expectation_pending(&s->node_expect, node, NODE_EXPECT_TIMEOUT))
                return; /* the event of our write queues the Machine again */
        r = mc_node_metadata_patch(machine, node, ready, &patch, &reason);
        if (r == -EALREADY)
                return;
        if (r == -EINVAL) {
                /* The API server would refuse the Node write each time: said once, and the next
                 * change of the Machine is looked at again. */
                if (!s->node_invalid) {
                        log_warning("Machine %s/%s: %s", s->namespace, s->name, strna(reason));
                        event(s, machine, CN_KUBE_EVENT_WARNING, "InvalidNodeMetadata", strna(reason));
                }
                s->node_invalid = true;
                return;
        }
        if (r < 0) {
                retry_later(s, 0);
                return;
        }
        s->node_invalid = false;
        r = cn_kube_patch(s->mc->client, &cn_kube_resource_nodes, NULL, cn_json_string(node, "metadata", "name", NULL),
                          NULL, CN_KUBE_PATCH_MERGE, patch, on_node_metadata_written, s, &s->request);
        if (r >= 0)
                r = cn_write_expectation_begin(&s->node_expect, node);
        if (r < 0) {
                retry_later(s, 0);
                return;
        }
        if (ready) {
                log_info("Machine %s/%s: labels, annotations and taints of Node %s", s->namespace, s->name,
                         cn_json_string(node, "metadata", "name", NULL));
                event(s, machine, CN_KUBE_EVENT_NORMAL, "LabelsAnnotationsTaintsUpdated",
                      "Successfully updated labels/annotations/taints");
        }
}

/* machine-controller's status.conditions Ready of a Machine whose Node is Ready (the MachineSets
 * of its owners see it); its write is when provisioning is over. */
static bool has_ready_condition(json_object *machine) {
        json_object *c = cn_json_array_find(cn_json_get(machine, "status", "conditions", NULL), "type", "Ready");

        return c && cn_json_string_is(c, "status", "True");
}

static void set_ready_condition(McState *s, json_object *machine) {
        _cleanup_json_ json_object *patch = json_object_new_object(), *list = json_object_new_array();
        json_object *have = cn_json_get(machine, "status", "conditions", NULL), *ready = json_object_new_object();

        if (!patch || !list || !ready || cn_json_set_string(ready, "Ready", "type", NULL) < 0 ||
            cn_json_set_string(ready, "True", "status", NULL) < 0) {
                json_object_put(ready);
                return;
        }
        for (size_t i = 0; have && json_object_is_type(have, json_type_array) && i < json_object_array_length(have);
             i++) {
                json_object *c = json_object_array_get_idx(have, i);

                if (!cn_json_string_is(c, "type", "Ready") && json_object_array_add(list, json_object_get(c)) < 0) {
                        json_object_put(ready);
                        return;
                }
        }
        if (json_object_array_add(list, ready) < 0) {
                json_object_put(ready);
                return;
        }
        if (cn_json_set(patch, TAKE_PTR(list), "status", "conditions", NULL) < 0)
                return;
        if (write_machine(s, machine, patch) > 0) {
                log_info("Machine %s/%s: Node Ready", s->namespace, s->name);
                observe_since(s->mc->m_provisioning, machine, "creationTimestamp");
        }
}

/* ---- deletion: cordon, evict, delete the server, the Node, the finalizer ---- */

static bool evictable(json_object *pod) {
        json_object *owners = cn_json_get(pod, "metadata", "ownerReferences", NULL);
        const char *phase = cn_json_string(pod, "status", "phase", NULL);

        if (cn_json_get(pod, "metadata", "deletionTimestamp", NULL))
                return false; /* its eviction was accepted: the kubelet stops it within its grace period */
        if (cn_json_string(pod, "metadata", "annotations", "kubernetes.io/config.mirror", NULL))
                return false; /* a static pod: the kubelet's, not the API's */
        if (phase && (streq(phase, "Succeeded") || streq(phase, "Failed")))
                return false;
        /* As kubectl drain --ignore-daemonsets: the DaemonSet controller would recreate it at once. */
        return !cn_json_array_find(owners, "kind", "DaemonSet");
}

static void evict_next(McState *s);

static void on_evicted(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);

        s->request = cn_kube_request_free(s->request);
        if (result->error < 0 && result->error != -ENOENT) {
                if (result->http_status == 429 || result->error == -CN_KUBE_ETOOMANYREQUESTS)
                        s->evict_blocked = true;
                else
                        log_info("Machine %s/%s: eviction of %s failed: %s", s->namespace, s->name,
                                 s->evict[s->evict_next], strna(result->message));
        }
        s->evict_next++;
        evict_next(s);
}

static void evict_next(McState *s) {
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *path = NULL;
        const char *name, *ns;
        int r;

        if (!s->evict || !s->evict[s->evict_next]) {
                bool blocked = s->evict_blocked;

                strv_free(s->evict);
                s->evict = NULL;
                s->evict_next = 0;
                s->evict_blocked = false;
                if (blocked) {
                        event(s, lookup_machine(s), CN_KUBE_EVENT_WARNING, "EvictionBlocked",
                              "a PodDisruptionBudget does not allow the eviction of a Pod of the Node yet");
                        (void) cn_work_queue_retry(s->item, EVICTION_RETRY_USEC, NULL);
                } else
                        retry_later(s, 0); /* list again: every Pod must be gone or terminating */
                call_done(s);
                return;
        }
        /* "namespace/name": neither part can hold a '/'. */
        ns = strndupa(s->evict[s->evict_next], strcspn(s->evict[s->evict_next], "/"));
        name = s->evict[s->evict_next] + strlen(ns) + 1;
        body = json_object_new_object();
        if (!body || cn_json_set_string(body, "policy/v1", "apiVersion", NULL) < 0 ||
            cn_json_set_string(body, "Eviction", "kind", NULL) < 0 ||
            cn_json_set_string(body, name, "metadata", "name", NULL) < 0 ||
            cn_json_set_string(body, ns, "metadata", "namespace", NULL) < 0) {
                retry_later(s, 0);
                return;
        }
        r = cn_kube_resource_path(&cn_kube_resource_pods, ns, name, "eviction", &path);
        if (r >= 0)
                r = cn_kube_request(s->mc->client, "POST", path, body, NULL, on_evicted, s, &s->request);
        if (r >= 0)
                cn_kube_request_set_no_retry_429(s->request);
        if (r < 0)
                retry_later(s, 0);
}

static void on_pods(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);
        json_object *items = cn_json_get(result->object, "items", NULL);

        s->request = cn_kube_request_free(s->request);
        if (result->error < 0) {
                count_error(s);
                log_info("Machine %s/%s: listing the Node's Pods failed, retrying: %s", s->namespace, s->name,
                         strna(result->message));
                retry_later(s, 0);
                call_done(s);
                return;
        }
        strv_free(s->evict);
        s->evict = NULL;
        for (size_t i = 0; items && i < json_object_array_length(items); i++) {
                json_object *pod = json_object_array_get_idx(items, i);
                _cleanup_free_ char *key = NULL;

                if (!evictable(pod))
                        continue;
                if (cn_kube_object_key(pod, &key) < 0 || strv_push(&s->evict, TAKE_PTR(key)) < 0) {
                        retry_later(s, 0);
                        return;
                }
        }
        s->evict_next = 0;
        s->evict_blocked = false;
        if (strv_length(s->evict) == 0) {
                log_info("Machine %s/%s: Node drained", s->namespace, s->name);
                s->drained = true;
                enqueue(s);
                return;
        }
        evict_next(s);
}

static void on_node_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        McState *s = ASSERT_PTR(userdata);

        s->request = cn_kube_request_free(s->request);
        if (result->error < 0 && result->error != -ENOENT) {
                count_error(s);
                log_info("Machine %s/%s: Node write failed, retrying: %s", s->namespace, s->name,
                         strna(result->message));
                retry_later(s, 0);
                return;
        }
        enqueue(s);
}

static int drain(McState *s, json_object *machine, json_object *node) {
        const char *name = cn_json_string(node, "metadata", "name", NULL);
        _cleanup_free_ char *selector = NULL;
        const char *deleted = cn_json_string(machine, "metadata", "deletionTimestamp", NULL);
        usec_t since = 0;

        /* machine-controller's reasons to skip: asked to, a drain that cannot end, no kubelet to
         * stop the Pods. */
        if (cn_json_string(machine, "metadata", "annotations", MC_ANNOTATION_SKIP_EVICTION, NULL) ||
            cn_json_string(node, "metadata", "annotations", MC_ANNOTATION_SKIP_EVICTION, NULL) ||
            (deleted && cn_parse_rfc3339(deleted, &since) >= 0 &&
             cn_now(CLOCK_REALTIME) > since + s->mc->skip_eviction_after) ||
            !mc_node_ready(node)) {
                s->drained = true;
                return 1;
        }
        if (!s->cordoned && !cn_capi_is_true(node, "spec", "unschedulable", NULL)) {
                _cleanup_json_ json_object *patch = json_object_new_object();

                if (!patch || cn_json_set(patch, json_object_new_boolean(true), "spec", "unschedulable", NULL) < 0)
                        return -ENOMEM;
                log_info("Machine %s/%s: cordoning Node %s", s->namespace, s->name, name);
                s->cordoned = true;
                return cn_kube_patch(s->mc->client, &cn_kube_resource_nodes, NULL, name, NULL, CN_KUBE_PATCH_MERGE,
                                     patch, on_node_written, s, &s->request);
        }
        if (asprintf(&selector, "spec.nodeName=%s", name) < 0)
                return -ENOMEM;
        return cn_kube_list_all(s->mc->client, &cn_kube_resource_pods, NULL,
                                &(CnKubeListOptions) { .field_selector = selector }, on_pods, s, &s->request);
}

/* Ours, then machine-controller's Node finalizer of a Machine it handled before: one per write,
 * each write's event bringing the next pass. */
static void remove_finalizers(McState *s, json_object *machine) {
        _cleanup_json_ json_object *patch = NULL;
        const char *f = has_finalizer(machine, MC_MACHINE_FINALIZER) ? MC_MACHINE_FINALIZER : MC_MACHINE_NODE_FINALIZER;

        if (cn_capi_finalizer_patch(machine, f, false, &patch) >= 0 && write_machine(s, machine, patch) > 0) {
                log_info("Machine %s/%s: server and Node gone, finalizer %s removed", s->namespace, s->name, f);
                observe_since(s->mc->m_deprovisioning, machine, "deletionTimestamp");
        }
}

static void on_cleanup(CnProvider *p, const CnProviderResult *res, bool done, void *userdata) {
        McState *s = ASSERT_PTR(userdata);
        json_object *machine, *node;

        s->call = cn_provider_call_free(s->call);
        call_done(s);
        if (res->error < 0) {
                count_error(s);
                if (cn_provider_error_class(res->error) == CN_PROVIDER_TERMINAL)
                        log_warning("Machine %s/%s: server deletion refused: %s", s->namespace, s->name,
                                    strna(res->message));
                retry_later(s, res->retry_after);
                return;
        }
        if (!done) {
                retry_later(s, 0);
                return;
        }
        machine = lookup_machine(s);
        if (!machine)
                return;
        node = machine_node(s, machine);
        if (node) {
                int r = cn_kube_delete(s->mc->client, &cn_kube_resource_nodes, NULL,
                                       cn_json_string(node, "metadata", "name", NULL),
                                       &(CnKubeDeleteOptions) { .precondition_uid = cn_json_string(node, "metadata",
                                                                                                   "uid", NULL) },
                                       on_node_written, s, &s->request);
                if (r < 0)
                        retry_later(s, 0);
                return;
        }
        remove_finalizers(s, machine);
}

static void reconcile_delete(McState *s, json_object *machine) {
        json_object *node = machine_node(s, machine);
        CnProviderMachine m;
        int r;

        if (!s->drained && node) {
                r = drain(s, machine, node);
                if (r < 0)
                        retry_later(s, 0);
                if (r != 1)
                        return;
        }
        r = prepare(s, machine, true);
        if (r == 0)
                return;
        if (r < 0) {
                /* Nothing to find the server with; a Machine that never got one is let go. */
                if (!cn_json_string(machine, "spec", "providerID", NULL) &&
                    cn_json_string(machine, "status", "errorReason", NULL))
                        remove_finalizers(s, machine);
                else {
                        log_warning("Machine %s/%s: its providerSpec no longer names usable credentials; the server "
                                    "cannot be deleted until it does", s->namespace, s->name);
                        retry_later(s, POLL_CAP_USEC);
                }
                return;
        }
        m = provider_machine(s, machine);
        r = cn_provider_machine_cleanup(s->provider, &m, on_cleanup, s, &s->call);
        if (r < 0)
                retry_later(s, 0);
}

static void reconcile_one(McController *mc, McState *s) {
        json_object *machine = lookup_machine(s), *node;
        CnProviderMachine m;
        int r;

        if (!machine || !mc->loop.leading)
                return;
        if (cn_json_get(machine, "metadata", "deletionTimestamp", NULL) && !s->drained &&
            cn_work_item_retry_pending(s->item) && !s->evict)
                cn_work_queue_forget(s->item); /* a deletion does not wait for a provisioning poll */
        if (state_busy(s)) {
                s->missed = true;
                return;
        }
        s->missed = false;
        if (cn_write_expectation_pending(&s->expect, machine, 0))
                return;
        /* Another controller's initializers are still at work: machine-controller waits too. */
        if (cn_json_string(machine, "metadata", "annotations", MC_ANNOTATION_INITIALIZERS, NULL))
                return;
        free(s->uid);
        s->uid = strdup(strempty(cn_json_string(machine, "metadata", "uid", NULL)));
        if (!s->uid)
                return;

        if (cn_json_get(machine, "metadata", "deletionTimestamp", NULL)) {
                if (has_finalizer(machine, MC_MACHINE_FINALIZER) || has_finalizer(machine, MC_MACHINE_NODE_FINALIZER))
                        reconcile_delete(s, machine);
                return;
        }
        s->drained = s->cordoned = false;
        if (cn_json_string(machine, "status", "errorReason", NULL))
                return; /* terminal, recorded; a human changes the Machine (or deletes it) */
        if (!has_finalizer(machine, MC_MACHINE_FINALIZER)) {
                _cleanup_json_ json_object *patch = NULL;

                if (cn_capi_finalizer_patch(machine, MC_MACHINE_FINALIZER, true, &patch) >= 0)
                        (void) write_machine(s, machine, patch);
                return;
        }
        node = cn_json_string(machine, "spec", "providerID", NULL) ? machine_node(s, machine) : NULL;
        if (node) {
                if (!cn_json_string(machine, "status", "nodeRef", "name", NULL))
                        set_node_ref(s, machine, node);
                else if (mc_node_ready(node) && !has_ready_condition(machine))
                        set_ready_condition(s, machine);
                else
                        write_node_metadata(s, machine, node);
                return;
        }
        r = prepare(s, machine, false);
        if (r <= 0)
                return;
        m = provider_machine(s, machine);
        r = cn_provider_machine_get(s->provider, &m, on_lookup, s, &s->call);
        if (r < 0)
                retry_later(s, 0);
}

/* ---- the queue, the informers ---- */

typedef struct NodeEvent {
        McController *mc;
        json_object *node;
} NodeEvent;

static int enqueue_of_node(json_object *machine, void *userdata) {
        NodeEvent *e = userdata;
        const char *pid = cn_json_string(e->node, "spec", "providerID", NULL);
        const char *name = cn_json_string(e->node, "metadata", "name", NULL);

        if ((pid && streq(pid, strempty(cn_json_string(machine, "spec", "providerID", NULL)))) ||
            (name && (streq(name, strempty(cn_json_string(machine, "status", "nodeRef", "name", NULL))) ||
                      streq(name, strempty(cn_json_string(machine, "metadata", "name", NULL))))))
                mc_loop_enqueue(&e->mc->loop, machine);
        return 0;
}

/* A Node's event queues its Machines. */
static void on_node(CnKubeInformer *i, json_object *object, void *userdata) {
        McController *mc = ASSERT_PTR(userdata);

        (void) cn_kube_informer_foreach(mc->machines, enqueue_of_node, &(NodeEvent) { mc, object });
}

typedef struct Census {
        McController *mc;
        size_t n;
        CnMetricCounts by_labels;
} Census;

static int count_machine(json_object *machine, void *userdata) {
        Census *c = userdata;
        const char *name = cn_json_string(machine, "metadata", "name", NULL);
        const char *values[MC_METRIC_LABELS_N + 1];
        usec_t t;

        c->n++;
        if (name && cn_parse_rfc3339(strempty(cn_json_string(machine, "metadata", "creationTimestamp", NULL)), &t) >= 0)
                (void) cn_metric_set(c->mc->m_created, CN_LABELS(name), (double) (t / USEC_PER_SEC));
        if (name && cn_parse_rfc3339(strempty(cn_json_string(machine, "metadata", "deletionTimestamp", NULL)), &t) >= 0)
                (void) cn_metric_set(c->mc->m_deleted, CN_LABELS(name), (double) (t / USEC_PER_SEC));
        if (mc_machine_metric_labels(machine, values) < 0)
                return 0;
        return cn_metric_counts_add(&c->by_labels, values);
}

/* The Machines as machine-controller's collector exports them at each scrape: their number, each
 * one's creation and deletion time, and machine_controller_machines_total by kubelet version,
 * provider, operating system and the provider's labels (at least one series, of 0). */
static void update_metrics(McController *mc) {
        static const char *const none[MC_METRIC_LABELS_N + 1] = { "", "", "", "", "", "", "", NULL };
        Census c = { .mc = mc };

        (void) cn_metric_clear(mc->m_created);
        (void) cn_metric_clear(mc->m_deleted);
        (void) cn_kube_informer_foreach(mc->machines, count_machine, &c);
        (void) cn_metric_set(mc->m_machines, NULL, (double) c.n);
        (void) cn_metric_counts_publish(&c.by_labels, mc->m_machines_total);
        if (c.by_labels.n == 0)
                (void) cn_metric_add(mc->m_machines_total, none, 0);
        cn_metric_counts_done(&c.by_labels);
}

static void on_synced(void *userdata) {
        update_metrics(ASSERT_PTR(userdata));
}

static bool queue_ready(void *userdata) {
        McController *mc = ASSERT_PTR(userdata);

        return mc_loop_ready(&mc->loop);
}

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        McController *mc = ASSERT_PTR(userdata);
        McState *s = cn_work_item_get_data(item);

        update_metrics(mc);
        if (!lookup_machine(s) && s->write) {
                /* The finalizer removal's answer is usually still on its way when the deletion
                 * event arrives: cancelling it would close the connection. */
                s->missed = true;
                cn_work_queue_done(item);
                return;
        }
        if (!lookup_machine(s)) {
                cn_work_queue_remove(item);
                return;
        }
        reconcile_one(mc, s);
        cn_work_queue_done(item);
}

/* machine-controller's metrics (its pkg/controller/machine/metrics.go), with its names, help
 * texts and buckets, and the cloud requests of our own. Its machine_controller_workers is left
 * out: passes run on one event loop, there are no workers to count. */
static int register_mc_metrics(McController *mc, CnMetrics *metrics) {
        /* prometheus.ExponentialBuckets(32, 1.5, 10) */
        static const double buckets[] = { 32, 48, 72, 108, 162, 243, 364.5, 546.75, 820.125, 1230.1875 };
        int r;

        r = cn_metrics_gauge(metrics, "machine_controller_machines",
                             "The number of machines managed by this machine controller", NULL, &mc->m_machines);
        if (r >= 0)
                r = cn_metrics_counter(metrics, "machine_controller_cloud_api_requests",
                                       "Cloud API requests for machine-controller Machines by operation and result.",
                                       CN_LABELS("provider", "operation", "result"), &mc->m_calls);
        if (r >= 0)
                r = cn_metrics_counter(metrics, "machine_controller_errors",
                               "The total number or unexpected errors the controller encountered", NULL, &mc->m_errors);
        if (r >= 0)
                r = cn_metrics_histogram(metrics, "machine_controller_provisioning_time_seconds",
                                         "Histogram of times spent from creating a Machine to ready state in the cluster",
                                         NULL, buckets, ELEMENTSOF(buckets), &mc->m_provisioning);
        if (r >= 0)
                r = cn_metrics_histogram(metrics, "machine_controller_deprovisioning_time_seconds",
                                         "Histogram of times spent from deleting a Machine to be removed from cluster "
                                         "and cloud provider",
                                         NULL, buckets, ELEMENTSOF(buckets), &mc->m_deprovisioning);
        if (r >= 0)
                r = cn_metrics_counter(metrics, "machine_controller_machines_total", "Total number of machines",
                                       mc_metric_label_names, &mc->m_machines_total);
        if (r >= 0)
                r = cn_metrics_gauge(metrics, "machine_controller_machine_created",
                                     "Timestamp of the machine's creation time", CN_LABELS("machine"), &mc->m_created);
        if (r >= 0)
                r = cn_metrics_gauge(metrics, "machine_controller_machine_deleted",
                                     "Timestamp of the machine's deletion time", CN_LABELS("machine"), &mc->m_deleted);
        return r;
}

int mc_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                      const McControllerOptions *o, McController **ret) {
        _cleanup_(mc_controller_freep) McController *mc = NULL;
        int r;

        mc = calloc(1, sizeof(McController));
        if (!mc)
                return -ENOMEM;
        mc->event = sd_event_ref(e);
        mc->client = client;
        mc->recorder = recorder;
        mc->skip_eviction_after = o->skip_eviction_after ?: SKIP_EVICTION_AFTER_DEFAULT;
        mc->namespace = strdup(o->namespace);
        if (!mc->namespace)
                return -ENOMEM;
        if (o->user_data_secret) {
                mc->user_data_secret = strdup(o->user_data_secret);
                if (!mc->user_data_secret)
                        return -ENOMEM;
        }
        r = cn_http_new(e, &mc->http);
        if (r < 0)
                return r;
        r = register_mc_metrics(mc, metrics);
        if (r < 0)
                return r;
        r = cn_work_queue_new(e,
                              &(CnWorkQueueOptions) {
                                      .description = "mc-machine-queue",
                                      .backoff_base = POLL_BASE_USEC,
                                      .backoff_cap = POLL_CAP_USEC,
                              },
                              &(CnWorkQueueOps) {
                                      .process = process,
                                      .ready = queue_ready,
                                      .new_data = state_new,
                                      .free_data = state_free_data,
                              },
                              mc, &mc->loop.queue);
        if (r < 0)
                return r;
        mc->loop.client = client;
        mc->loop.on_other = on_node;
        mc->loop.on_synced = on_synced;
        mc->loop.userdata = mc;
        *ret = TAKE_PTR(mc);
        return 0;
}

McController *mc_controller_free(McController *mc) {
        if (!mc)
                return NULL;
        mc_loop_done(&mc->loop);
        for (size_t i = 0; i < mc->n_providers; i++)
                cn_provider_free(mc->providers[i].provider);
        cn_http_free(mc->http);
        sd_event_unref(mc->event);
        free(mc->namespace);
        free(mc->user_data_secret);
        free(mc);
        return NULL;
}

int mc_controller_start(McController *mc) {
        int r;

        r = mc_loop_watch(&mc->loop, &resource_machines, mc->namespace, &mc->machines);
        if (r >= 0)
                r = mc_loop_watch(&mc->loop, &cn_kube_resource_nodes, NULL, &mc->nodes);
        return r;
}

bool mc_controller_synced(McController *mc) {
        return mc_loop_synced(&mc->loop);
}

unsigned mc_controller_awaited(McController *mc) {
        return mc ? cn_http_awaited(mc->http) : 0;
}

void mc_controller_set_leading(McController *mc, bool leading) {
        mc_loop_set_leading(&mc->loop, leading);
}
