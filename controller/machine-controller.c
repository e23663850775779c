/* SPDX-License-Identifier: Apache-2.0 */
/* CloudnodeMachine reconciler. See machine-controller.h and machine-reconcile.h.
 *
 * Crash safety comes from the provider: every create is preceded by a lookup of the instance by
 * the CloudnodeMachine's UID label, and the server carries that label from the create request on,
 * so a restart between create and status write adopts the server instead of creating another. At
 * most one cloud call per machine is in flight; a machine waiting for a retry has a timer.
 *
 * Work is per machine: an informer event queues only the CloudnodeMachines it concerns (the
 * object itself, those owned by a changed Machine, those of a changed Cluster), and a timer queues
 * its own machine, so the calls per machine do not grow with the number of machines. A write is
 * made only when it changes the object, and until the cache shows the write's result the machine
 * is not looked at again: acting on the stale copy would repeat the cloud call and the write. */
#include <errno.h>
#include <string.h>

#include "backoff.h"
#include "cloud-config.h"
#include "cluster-reconcile.h"
#include "controller-waiting.h"
#include "hash-util.h"
#include "http.h"
#include "json-util.h"
#include "kube-expectation.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "machine-controller.h"
#include "machine-credentials.h"
#include "machine-reconcile.h"
#include "provider.h"
#include "string-util.h"
#include "time-util.h"

#define POLL_BASE_USEC (500 * USEC_PER_MSEC)
/* The machine phase and spec gauges are recounted this long after a change at most. */
#define PHASES_DELAY_USEC (1 * USEC_PER_SEC)
#define POLL_CAP_USEC (30 * USEC_PER_SEC)
#define USERDATA_MAX (32U * 1024U)

static const CnKubeResource resource_cloudnodemachines = {
        .group = "infrastructure.cluster.x-k8s.io", .version = "v1beta2", .resource = "cloudnodemachines",
        .kind = "CloudnodeMachine", .namespaced = true,
};
static const CnKubeResource resource_machines = {
        .group = "cluster.x-k8s.io", .version = "v1beta2", .resource = "machines", .kind = "Machine",
        .namespaced = true,
};
static const CnKubeResource resource_clusters = {
        .group = "cluster.x-k8s.io", .version = "v1beta2", .resource = "clusters", .kind = "Cluster",
        .namespaced = true,
};

typedef struct MachineState MachineState;

struct MachineController {
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        CnHttp *http;
        CnProvider *provider;   /* from --machine-cloud-config */
        CnCredentials *credentials;
        char *provider_name;
        CnMetric *m_phase, *m_calls, *m_secrets, *m_providers;
        CnMetric *m_specs;      /* by the provider's machine labels; NULL when it has none */
        size_t n_spec_labels;   /* label names of m_specs after "provider" */
        CnKubeInformer *infra_machines, *machines, *clusters;
        sd_event_source *phases_source; /* the phase gauges, PHASES_DELAY_USEC after events */
        bool leading;
        CnWorkQueue *queue;     /* of MachineStates, keyed "namespace/name" */
};

struct MachineState {
        MachineController *mc;
        CnWorkItem *item;       /* of mc->queue, which owns this state; its retry is the poll timer */
        char *namespace, *name;
        CnProviderCall *call;
        CnKubeRequest *request; /* bootstrap Secret read */
        json_object *spec;      /* provider spec of the pass in flight */
        CnProvider *provider;   /* of its credentials (a reference: the cache may drop it meanwhile) */
        char *uid;
        CnKubeRequest *writes[2];       /* status and spec/metadata patches in flight */
        CnWriteExpectation expect;      /* our last writes, until the cache shows them */
        bool cleaning;          /* the timer armed, if any, belongs to the deletion */
        bool awaiting_credentials; /* a credentials Secret read will queue it */
        bool missed;            /* an event came while busy: look again once the call is done */
        char *failed_uid;       /* a terminal failure of this object is written: nothing more */
};

/* The gauges count every CloudnodeMachine (and render each one's labels): recounted once per
 * PHASES_DELAY_USEC at most, not after each event, which made a lifecycle cost O(machines). */
static void schedule(MachineController *mc) {
        int enabled = SD_EVENT_OFF;

        if (sd_event_source_get_enabled(mc->phases_source, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return; /* due already */
        (void) sd_event_source_set_time_relative(mc->phases_source, PHASES_DELAY_USEC);
        (void) sd_event_source_set_enabled(mc->phases_source, SD_EVENT_ONESHOT);
}

static void enqueue(MachineState *s) {
        cn_work_queue_add(s->item);
        schedule(s->mc);
}

static MachineState *state_free(MachineState *s) {
        if (!s)
                return NULL;
        cn_provider_call_free(s->call);
        cn_kube_request_free(s->request);
        for (size_t i = 0; i < ELEMENTSOF(s->writes); i++)
                cn_kube_request_free(s->writes[i]);
        cn_write_expectation_clear(&s->expect);
        json_object_put(s->spec);
        cn_provider_free(s->provider);
        free(s->namespace);
        free(s->name);
        free(s->uid);
        free(s->failed_uid);
        free(s);
        return NULL;
}

static void state_free_data(void *data) {
        state_free(data);
}

static void *state_new(CnWorkItem *item, void *userdata) {
        const char *key = cn_work_item_key(item), *slash = strchr(key, '/');
        MachineState *s = calloc(1, sizeof(MachineState));

        if (!s)
                return NULL;
        s->mc = ASSERT_PTR(userdata);
        s->item = item;
        s->namespace = strndup(key, slash - key);
        s->name = strdup(slash + 1);
        if (!s->namespace || !s->name)
                return state_free(s);
        return s;
}

static MachineState *state_get(MachineController *mc, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;
        CnWorkItem *item;

        /* Neither part of the key can hold a '/': they are names of the API. */
        if (asprintf(&key, "%s/%s", ns, name) < 0)
                return NULL;
        item = cn_work_queue_get(mc->queue, key, true);
        return item ? cn_work_item_get_data(item) : NULL;
}

static bool timer_armed(MachineState *s) {
        return cn_work_item_retry_pending(s->item);
}

static bool writes_in_flight(MachineState *s) {
        for (size_t i = 0; i < ELEMENTSOF(s->writes); i++)
                if (s->writes[i])
                        return true;
        return false;
}

static bool state_busy(MachineState *s) {
        return s->call || s->request || writes_in_flight(s) || timer_armed(s);
}

/* Called when a call or request of this machine has completed: if a change was skipped while it
 * was in flight (say, the deletion of the object), a reconcile pass picks it up now rather than at
 * the next unrelated event. */
static void state_call_done(MachineState *s) {
        if (s->missed) {
                s->missed = false;
                enqueue(s);
        }
}

static json_object *lookup_infra_machine(MachineState *s) {
        return cn_kube_informer_lookup(s->mc->infra_machines, s->namespace, s->name);
}

static void retry_later(MachineState *s, usec_t min_delay) {
        (void) cn_work_queue_retry(s->item, min_delay, NULL);
}

static void written(MachineState *s, size_t slot, const CnKubeResult *result) {
        s->writes[slot] = cn_kube_request_free(s->writes[slot]);
        if (result->error < 0) {
                /* Gone: the next pass forgets the machine. Otherwise look again from the cache
                 * after a backoff; the write is recomputed from whatever the object is then. */
                if (result->error == -ENOENT)
                        enqueue(s);
                else {
                        log_debug_errno(result->error, "CloudnodeMachine %s/%s: write failed, retrying: %s",
                                        s->namespace, s->name, strna(result->message));
                        cn_write_expectation_clear(&s->expect);
                        retry_later(s, 0);
                }
                return;
        }
        if (!cn_write_expectation_written(&s->expect, result->object)) {
                /* No ordering to wait for, or the server found nothing to change (no event will
                 * come): the cache is as current as it gets. */
                enqueue(s);
                return;
        }
        state_call_done(s);
}

static void on_status_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        written(ASSERT_PTR(userdata), 0, result);
}

static void on_object_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        written(ASSERT_PTR(userdata), 1, result);
}

/* A merge patch of the CloudnodeMachine (subresource NULL or "status"), sent only when it changes
 * the cached object. Returns 0 when nothing needed writing, 1 when a write was started. */
static int write_machine(MachineState *s, json_object *cnm, const char *subresource, json_object *patch) {
        size_t slot = subresource ? 0 : 1;
        int r;

        if (cnm && !cn_capi_patch_changes(cnm, patch))
                return 0;
        /* Only one write per kind at a time; a newer one replaces a pending older one. */
        s->writes[slot] = cn_kube_request_free(s->writes[slot]);
        r = cn_kube_patch(s->mc->client, &resource_cloudnodemachines, s->namespace, s->name, subresource,
                          CN_KUBE_PATCH_MERGE, patch, slot == 0 ? on_status_written : on_object_written, s,
                          &s->writes[slot]);
        if (r < 0)
                return r;
        if (cnm) {
                r = cn_write_expectation_begin(&s->expect, cnm);
                if (r < 0)
                        return r;
        }
        return 1;
}

static int patch_status(MachineState *s, json_object *cnm, json_object *status_patch) {
        return write_machine(s, cnm, "status", status_patch);
}

/* The live conditions with the Paused condition set, now. */
static int paused_conditions(json_object *cnm, bool paused, char now[static 64], json_object **ret) {
        int r;

        r = cn_format_rfc3339(cn_now(CLOCK_REALTIME), false, now, 64);
        if (r < 0)
                return r;
        return cn_conditions_set(cn_json_get(cnm, "status", "conditions", NULL), "Paused", paused,
                                 paused ? "Paused" : "NotPaused", NULL, now, ret);
}

/* The status patch of cn_machine_status_patch() against the live machine's conditions, now; only
 * a machine that is not paused is written to, so Paused is False. */
static int status_patch(json_object *cnm, const char *instance_id, const char *instance_state, json_object *addresses,
                        bool ready, const char *reason, const char *message, json_object **ret) {
        _cleanup_json_ json_object *conds = NULL;
        char now[64];
        int r;

        r = paused_conditions(cnm, false, now, &conds);
        if (r < 0)
                return r;
        return cn_machine_status_patch(conds, now, instance_id, instance_state, addresses, ready, reason, message,
                                       ret);
}

/* Only the Paused condition; written when it changes. */
static int set_paused(MachineState *s, json_object *cnm, bool paused) {
        _cleanup_json_ json_object *conds = NULL, *patch = json_object_new_object();
        char now[64];
        int r;

        if (!patch)
                return -ENOMEM;
        r = paused_conditions(cnm, paused, now, &conds);
        if (r >= 0)
                r = cn_json_set(patch, TAKE_PTR(conds), "status", "conditions", NULL);
        if (r < 0)
                return r;
        return patch_status(s, cnm, patch);
}

/* A Ready=False condition with a reason; write_machine() skips it when the live one says so. */
static int set_waiting(MachineState *s, json_object *cnm, const char *reason, const char *message) {
        _cleanup_json_ json_object *patch = NULL;

        if (status_patch(cnm, NULL, NULL, NULL, false, reason, message, &patch) < 0)
                return -ENOMEM;
        return patch_status(s, cnm, patch);
}

static void set_failed(MachineState *s, const char *reason, const char *message) {
        _cleanup_json_ json_object *patch = NULL;
        json_object *cnm = lookup_infra_machine(s);

        free(s->failed_uid);
        s->failed_uid = s->uid ? strdup(s->uid) : NULL;
        if (status_patch(cnm, NULL, NULL, NULL, false, reason, message, &patch) < 0)
                return;
        (void) cn_json_set_string(patch, reason, "status", "failureReason", NULL);
        (void) cn_json_set_string(patch, strempty(message), "status", "failureMessage", NULL);
        /* Recorded already: no second warning, Event or write. */
        if (patch_status(s, cnm, patch) <= 0)
                return;
        log_warning("CloudnodeMachine %s/%s failed: %s: %s", s->namespace, s->name, reason, strna(message));
        if (cnm) {
                CnKubeObjectRef ref;

                if (cn_kube_object_ref_from_json(cnm, &resource_cloudnodemachines, &ref) >= 0)
                        (void) cn_kube_event_record(s->mc->recorder, &ref, CN_KUBE_EVENT_WARNING, reason, NULL, "%s",
                                                    strna(message));
        }
}

/* The instance is known: record it, and when it runs set providerID and readiness. */
static void record_instance(MachineState *s, json_object *instance) {
        _cleanup_json_ json_object *patch = NULL;
        json_object *cnm = lookup_infra_machine(s), *ready_v = json_object_object_get(instance, "ready");
        const char *pid = cn_json_string(instance, "providerID", NULL);
        bool ready = ready_v && json_object_get_boolean(ready_v);
        int r;

        if (ready && pid && cnm && !cn_json_string(cnm, "spec", "providerID", NULL)) {
                _cleanup_json_ json_object *spec_patch = json_object_new_object();

                if (spec_patch && cn_json_set_string(spec_patch, pid, "spec", "providerID", NULL) >= 0)
                        (void) write_machine(s, cnm, NULL, spec_patch);
        }
        r = status_patch(cnm, cn_json_string(instance, "id", NULL), cn_json_string(instance, "state", NULL),
                         json_object_object_get(instance, "addresses"), ready,
                         ready ? "InstanceRunning" : "InstanceProvisioning", NULL, &patch);
        /* The instance carries this UID's label from its create (or migration) on. */
        if (r >= 0 && !isempty(s->uid))
                r = cn_json_set_string(patch, s->uid, "status", "instanceLabelUID", NULL);
        if (r >= 0)
                (void) patch_status(s, cnm, patch);
        if (ready)
                cn_work_queue_forget(s->item);
        else
                retry_later(s, 0);
}

static bool handle_error(MachineState *s, const CnProviderResult *res, const char *what) {
        if ((res->error == -EACCES || res->error == -EPERM) && cn_credentials_recheck(s->mc->credentials, s->provider)) {
                log_info("CloudnodeMachine %s/%s: credentials refused, reading the Secret again", s->namespace,
                         s->name);
                retry_later(s, 0);
                return true;
        }
        switch (cn_provider_error_class(res->error)) {
        case CN_PROVIDER_TERMINAL:
                set_failed(s, res->error == -EACCES || res->error == -EPERM ? "Unauthorized" : "InvalidConfiguration",
                           res->message ?: what);
                return true;
        case CN_PROVIDER_RETRYABLE:
                if (res->error == -CN_PROVIDER_EMULTIPLE) {
                        /* A human must decide which server is this machine: neither adopt nor create. */
                        (void) set_waiting(s, lookup_infra_machine(s), "MultipleInstances", res->message);
                        return true;
                }
                log_info("CloudnodeMachine %s/%s: %s failed, retrying: %s", s->namespace, s->name, what,
                         strna(res->message));
                retry_later(s, res->retry_after);
                return true;
        default:
                return false;
        }
}

static void on_created(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        state_call_done(s);
        if (res->error < 0) {
                (void) handle_error(s, res, "create");
                return;
        }
        log_info("CloudnodeMachine %s/%s: created instance %s", s->namespace, s->name,
                 strna(cn_json_string(instance, "id", NULL)));
        record_instance(s, instance);
}

static json_object *owner_machine(MachineController *mc, json_object *cnm) {
        const char *owner = cnm ? cn_machine_owner_name(cnm) : NULL;

        return owner ? cn_kube_informer_lookup(mc->machines, cn_json_string(cnm, "metadata", "namespace", NULL), owner)
                     : NULL;
}

static const char *cluster_name_of(json_object *cnm, json_object *machine) {
        return cn_json_string(cnm, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL) ?:
               cn_json_string(machine, "spec", "clusterName", NULL);
}

/* Whether the Machine or the CloudnodeMachine carries Cluster API's control-plane label. */
static bool is_control_plane(json_object *cnm, json_object *machine) {
        return cn_json_get(cnm, "metadata", "labels", CN_CAPI_CONTROL_PLANE_LABEL, NULL) ||
               cn_json_get(machine, "metadata", "labels", CN_CAPI_CONTROL_PLANE_LABEL, NULL);
}

/* The UID of the Cluster whose control plane the machine is part of, or NULL. Borrowed from the
 * cache. */
static const char *control_plane_of(MachineState *s) {
        json_object *cnm = lookup_infra_machine(s), *machine = owner_machine(s->mc, cnm);
        const char *cluster_name = cluster_name_of(cnm, machine);

        if (!is_control_plane(cnm, machine) || !cluster_name)
                return NULL;
        return cn_json_string(cn_kube_informer_lookup(s->mc->clusters, s->namespace, cluster_name), "metadata",
                              "uid", NULL);
}

static void on_secret(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);
        _cleanup_free_ void *data = NULL;
        const char *b64 = cn_json_string(result->object, "data", "value", NULL);
        CnProviderMachine m = { .namespace = s->namespace, .name = s->name, .uid = s->uid, .spec = s->spec,
                                .control_plane_of = control_plane_of(s) };
        size_t size = 0;
        int r;

        s->request = cn_kube_request_free(s->request);
        state_call_done(s);
        if (result->error < 0 || !b64) {
                /* The bootstrap provider writes it; wait for its event rather than failing. */
                log_info("CloudnodeMachine %s/%s: bootstrap data not readable yet: %s", s->namespace, s->name,
                         strna(result->message));
                retry_later(s, 0);
                return;
        }
        r = cn_base64_decode(b64, strlen(b64), &data, &size);
        if (r < 0 || size > USERDATA_MAX || memchr(data, 0, size)) {
                set_failed(s, "InvalidBootstrapData", "the bootstrap data Secret's value is not usable userdata");
                return;
        }
        r = cn_provider_machine_create(s->provider, &m, data, on_created, s, &s->call);
        if (r < 0) {
                CnProviderResult res = { .error = r, .message = "could not start the create request" };

                (void) handle_error(s, &res, "create");
        }
}

static void on_migrated(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        state_call_done(s);
        if (res->error == -ENOENT || res->error == -CN_PROVIDER_EOWNED) {
                json_object *cnm = lookup_infra_machine(s);

                if (cnm && cn_json_get(cnm, "metadata", "deletionTimestamp", NULL)) {
                        /* Nothing of this object's to relabel (gone, or another machine's): deletion
                         * goes on with a lookup by the new UID only. */
                        _cleanup_json_ json_object *patch = json_object_new_object();

                        if (patch && cn_json_set_string(patch, s->uid, "status", "instanceLabelUID", NULL) >= 0)
                                (void) patch_status(s, cnm, patch);
                        return;
                }
                if (res->error == -ENOENT)
                        set_failed(s, "InstanceDeleted",
                                   "the instance this machine names no longer exists in the cloud");
                else
                        set_failed(s, "InstanceOwnedElsewhere", res->message);
                return;
        }
        if (res->error < 0) {
                (void) handle_error(s, res, "UID migration");
                return;
        }
        log_info("CloudnodeMachine %s/%s: instance %s relabeled with the machine's new UID", s->namespace, s->name,
                 strna(cn_json_string(instance, "id", NULL)));
        record_instance(s, instance);
}

static int find_uid(json_object *cnm, void *userdata) {
        const char *uid = userdata;

        return streq(strempty(cn_json_string(cnm, "metadata", "uid", NULL)), uid) ? -EEXIST : 0;
}

static bool uid_is_live(const char *uid, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        return cn_kube_informer_foreach(mc->infra_machines, find_uid, (void *) uid) < 0;
}

/* No instance carries the UID, but the object names one (spec.providerID, status.instanceID):
 * the object was recreated under a new UID (clusterctl move). Relabel that instance rather than
 * create a second one. spec.providerID is anyone's to set at creation, so the instance must carry
 * the UID this object's status recorded, or, without one, the UID of no live object. Returns true
 * when the migration was started. */
static bool migrate(MachineState *s) {
        json_object *cnm = lookup_infra_machine(s);
        const char *named = cn_json_string(cnm, "spec", "providerID", NULL) ?:
                            cn_json_string(cnm, "status", "instanceID", NULL);
        CnProviderMachine m = {
                .namespace = s->namespace,
                .name = s->name,
                .uid = cn_json_string(cnm, "status", "instanceLabelUID", NULL),
                .spec = s->spec,
                .provider_id = named,
                .uid_is_live = uid_is_live,
                .uid_is_live_userdata = s->mc,
        };

        int r;

        if (!named)
                return false;
        r = cn_provider_migrate_uid(s->provider, &m, s->uid, on_migrated, s, &s->call);
        if (r == -EOPNOTSUPP)
                return false;
        if (r < 0)
                retry_later(s, 0); /* never fall through to a create: the instance may exist */
        return true;
}

static void on_lookup(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);
        json_object *cnm = lookup_infra_machine(s);
        const char *owner = cnm ? cn_machine_owner_name(cnm) : NULL;
        json_object *machine = owner ? cn_kube_informer_lookup(s->mc->machines, s->namespace, owner) : NULL;
        const char *secret = cn_json_string(machine, "spec", "bootstrap", "dataSecretName", NULL);
        int r;

        s->call = cn_provider_call_free(s->call);
        state_call_done(s);
        if (res->error >= 0) {
                log_info("CloudnodeMachine %s/%s: adopting instance %s", s->namespace, s->name,
                         strna(cn_json_string(instance, "id", NULL)));
                record_instance(s, instance);
                return;
        }
        if (res->error != -ENOENT) {
                (void) handle_error(s, res, "lookup");
                return;
        }
        if (migrate(s))
                return;
        if (!secret) {
                retry_later(s, 0);
                return;
        }
        r = cn_kube_get(s->mc->client, &cn_kube_resource_secrets, s->namespace, secret, NULL, on_secret, s,
                        &s->request);
        if (r < 0)
                retry_later(s, 0);
}

static void on_poll(CnProvider *p, const CnProviderResult *res, json_object *instance, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        state_call_done(s);
        if (res->error == -ENOENT) {
                /* Either the object moved (new UID; migrate() relabels the instance) or the instance
                 * was deleted outside the controller: reported, never replaced here (the Machine's
                 * owner decides), so there is no re-creation loop. */
                if (!migrate(s))
                        set_failed(s, "InstanceDeleted", "the instance no longer exists in the cloud");
                return;
        }
        if (res->error < 0) {
                (void) handle_error(s, res, "status poll");
                return;
        }
        record_instance(s, instance);
}

static int patch_finalizers(MachineState *s, json_object *cnm, bool add) {
        _cleanup_json_ json_object *patch = NULL;
        int r;

        r = cn_capi_finalizer_patch(cnm, CN_MACHINE_FINALIZER, add, &patch);
        if (r < 0)
                return r;
        return write_machine(s, cnm, NULL, patch);
}

static void on_cleanup(CnProvider *p, const CnProviderResult *res, bool done, void *userdata) {
        MachineState *s = ASSERT_PTR(userdata);
        json_object *cnm;

        s->call = cn_provider_call_free(s->call);
        state_call_done(s);
        if (res->error < 0) {
                if (res->error == -EACCES || res->error == -EPERM)
                        (void) cn_credentials_recheck(s->mc->credentials, s->provider);
                if (cn_provider_error_class(res->error) == CN_PROVIDER_TERMINAL)
                        log_warning("CloudnodeMachine %s/%s: cleanup refused: %s", s->namespace, s->name,
                                    strna(res->message));
                retry_later(s, res->retry_after);
                return;
        }
        if (!done) {
                retry_later(s, 0);
                return;
        }
        cnm = lookup_infra_machine(s);
        if (cnm) {
                log_info("CloudnodeMachine %s/%s: instance gone, removing the finalizer", s->namespace, s->name);
                (void) patch_finalizers(s, cnm, false);
        }
}

/* Machine.spec.failureDomain into the provider spec *spec (replaced by the placed copy). A
 * failure domain the Cluster does not list, or a provider that cannot place, fails the machine
 * for good (negative return). */
static int place(MachineState *s, json_object *machine, json_object *cluster, json_object **spec) {
        _cleanup_free_ char *why = NULL;
        const char *fd = NULL, *field = cn_provider_failure_domain_field(s->provider);
        json_object *placed = NULL;
        int r;

        r = cn_machine_failure_domain(machine, cluster, &fd);
        if (r >= 0 && !fd)
                return 0;
        if (r < 0) {
                if (asprintf(&why, "the Machine's failure domain \"%.64s\" is not one of the Cluster's "
                             "(status.failureDomains)", cn_json_string(machine, "spec", "failureDomain", NULL)) < 0)
                        why = NULL;
                set_failed(s, "InvalidFailureDomain", why ?: "the Machine's failure domain is not the Cluster's");
                return r;
        }
        if (!field) {
                set_failed(s, "NotSupported", "this provider cannot place a machine in a failure domain");
                return -EOPNOTSUPP;
        }
        r = cn_machine_place(*spec, field, fd, &placed);
        if (r < 0) {
                retry_later(s, 0);
                return r;
        }
        json_object_put(*spec);
        *spec = placed;
        return 0;
}

static json_object *provider_spec(MachineController *mc, json_object *cnm) {
        return cn_json_get(cnm, "spec", mc->provider_name, NULL);
}

static void reconcile_one(MachineController *mc, MachineState *s) {
        json_object *cnm = lookup_infra_machine(s), *machine = NULL, *cluster = NULL;
        const char *owner, *cluster_name;
        CnProviderMachine m;
        CnMachineStep step;
        int r;

        if (!cnm || !mc->leading)
                return;
        /* A deletion does not wait for the poll timer of the create. */
        if (cn_json_get(cnm, "metadata", "deletionTimestamp", NULL) && !s->cleaning && timer_armed(s))
                cn_work_queue_forget(s->item);
        if (state_busy(s)) {
                s->missed = true;
                return;
        }
        s->missed = false; /* this pass sees the object as it is now */
        if (cn_write_expectation_pending(&s->expect, cnm, 0))
                return; /* the event of our own write queues the machine again */
        owner = cn_machine_owner_name(cnm);
        if (owner)
                machine = cn_kube_informer_lookup(mc->machines, s->namespace, owner);
        cluster_name = cn_json_string(cnm, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL) ?:
                       cn_json_string(machine, "spec", "clusterName", NULL);
        if (cluster_name)
                cluster = cn_kube_informer_lookup(mc->clusters, s->namespace, cluster_name);
        step = cn_machine_next_step(cnm, machine, cluster, false);
        /* Until the failure shows in the cache, a pass would see the machine as before and try
         * again (a second create of an invalid spec); deletion still proceeds. */
        if (s->failed_uid && streq(s->failed_uid, strempty(cn_json_string(cnm, "metadata", "uid", NULL))) &&
            step != CN_MACHINE_CLEANUP && step != CN_MACHINE_REMOVE_FINALIZER && step != CN_MACHINE_GONE)
                return;
        log_debug("CloudnodeMachine %s/%s: %s", s->namespace, s->name, cn_machine_step_to_string(step));

        free(s->uid);
        s->uid = strdup(strempty(cn_json_string(cnm, "metadata", "uid", NULL)));
        m = (CnProviderMachine) {
                .namespace = s->namespace,
                .name = s->name,
                .uid = s->uid,
                .spec = provider_spec(mc, cnm),
                .provider_id = cn_json_string(cnm, "spec", "providerID", NULL),
        };
        if (step == CN_MACHINE_LOOKUP_OR_CREATE || step == CN_MACHINE_POLL || step == CN_MACHINE_CLEANUP) {
                _cleanup_free_ char *why = NULL;
                CnProvider *p = NULL;

                /* A create is not undone: it uses a credential read just now. */
                r = cn_credentials_provider(mc->credentials, s->namespace,
                                            cn_json_get(cnm, "spec", "credentials", "secretRef", NULL),
                                            step == CN_MACHINE_LOOKUP_OR_CREATE ? CN_CREDENTIALS_FRESH
                                                                                : CN_CREDENTIALS_TTL,
                                            &p, &why);
                if (r > 0 && p != s->provider) {
                        cn_provider_free(s->provider);
                        s->provider = cn_provider_ref(p);
                }
                if (r == 0) {
                        s->awaiting_credentials = true;
                        return; /* reading the Secret: its answer queues this machine again */
                }
                if (r < 0) {
                        (void) set_waiting(s, cnm, "CredentialsUnavailable", why);
                        retry_later(s, 0);
                        return;
                }
        } else
                /* Nothing in flight and nothing to ask the cloud: a provider replaced since (a
                 * rotated Secret) must not live on for a machine at rest. */
                s->provider = cn_provider_free(s->provider);
        /* Every status write says Paused=False (status_patch()); the steps that write no status
         * of their own correct a Paused=True left from before, which costs nothing otherwise. */
        if (step == CN_MACHINE_PAUSED || step == CN_MACHINE_READY || step == CN_MACHINE_FAILED ||
            step == CN_MACHINE_CLEANUP || step == CN_MACHINE_REMOVE_FINALIZER)
                (void) set_paused(s, cnm, step == CN_MACHINE_PAUSED);
        switch (step) {
        case CN_MACHINE_ADD_FINALIZER:
                (void) patch_finalizers(s, cnm, true);
                break;
        case CN_MACHINE_WAIT_OWNER:
                (void) set_waiting(s, cnm, "WaitingForMachine", "no owner Machine yet");
                break;
        case CN_MACHINE_WAIT_INFRA:
                (void) set_waiting(s, cnm, "WaitingForClusterInfrastructure", "the Cluster's infrastructure is not provisioned");
                break;
        case CN_MACHINE_WAIT_BOOTSTRAP:
                (void) set_waiting(s, cnm, "WaitingForBootstrapData", "spec.bootstrap.dataSecretName is not set");
                break;
        case CN_MACHINE_LOOKUP_OR_CREATE: {
                _cleanup_free_ char *reason = NULL;
                json_object *spec = NULL;

                r = cn_provider_add_defaults(s->provider, m.spec, &spec);
                if (r >= 0 && place(s, machine, cluster, &spec) < 0) {
                        json_object_put(spec);
                        break;
                }
                if (r >= 0)
                        r = cn_provider_validate(s->provider, spec, &reason);
                if (r == -EOPNOTSUPP) {
                        json_object_put(spec);
                        set_failed(s, "NotSupported", "this provider does not implement the machine lifecycle");
                        break;
                }
                if (r < 0) {
                        json_object_put(spec);
                        set_failed(s, "InvalidConfiguration", reason ?: "the provider spec is not valid");
                        break;
                }
                json_object_put(s->spec);
                s->spec = spec;
                m.spec = spec;
                r = cn_provider_machine_get(s->provider, &m, on_lookup, s, &s->call);
                if (r < 0)
                        retry_later(s, 0);
                break;
        }
        case CN_MACHINE_POLL:
                r = cn_provider_machine_get(s->provider, &m, on_poll, s, &s->call);
                if (r < 0)
                        retry_later(s, 0);
                break;
        case CN_MACHINE_CLEANUP:
                s->cleaning = true;
                /* A moved object's instance carries the old UID: relabel it first, or the lookup by
                 * UID finds nothing and the instance is left behind. */
                if (cn_machine_moved(cnm) && migrate(s))
                        break;
                r = cn_provider_machine_cleanup(s->provider, &m, on_cleanup, s, &s->call);
                if (r < 0)
                        retry_later(s, 0);
                break;
        default:
                break;
        }
}

static int count_phase(json_object *cnm, void *userdata) {
        size_t *counts = userdata;
        json_object *ready = cn_json_get(cnm, "status", "ready", NULL);

        if (cn_json_get(cnm, "metadata", "deletionTimestamp", NULL))
                counts[2]++;
        else if (cn_json_string(cnm, "status", "failureReason", NULL))
                counts[3]++;
        else if (ready && json_object_get_boolean(ready))
                counts[1]++;
        else
                counts[0]++;
        return 0;
}

typedef struct SpecCounts {
        MachineController *mc;
        CnMetricCounts counts; /* by provider, then the provider's label values */
} SpecCounts;

/* first, then every other member of the key/value list kv from index `from` on (0: the names,
 * 1: the values); NULL on OOM. */
static char **label_list(const char *first, char **kv, size_t from) {
        size_t n = strv_length(kv) / 2;
        char **l = calloc(n + 2, sizeof(char *));

        if (!l)
                return NULL;
        l[0] = strdup(first);
        for (size_t i = 0; l[i] && i < n; i++)
                l[i + 1] = strdup(kv[2 * i + from]);
        if (!l[n]) {
                strv_free(l);
                return NULL;
        }
        return l;
}

/* The provider's metrics labels of a machine's spec as it is created (defaults applied, placed
 * in its Machine's failure domain): "provider" first, then the values of the provider's label
 * names; NULL for a machine of another provider or a spec the provider cannot label. */
static char **spec_label_values(MachineController *mc, json_object *cnm) {
        _cleanup_json_ json_object *spec = NULL;
        _cleanup_strv_free_ char **kv = NULL;
        const char *ns = cn_json_string(cnm, "metadata", "namespace", NULL), *owner = cn_machine_owner_name(cnm);
        const char *field = cn_provider_failure_domain_field(mc->provider), *fd = NULL;

        if (ns && owner)
                fd = cn_json_string(cn_kube_informer_lookup(mc->machines, ns, owner), "spec", "failureDomain", NULL);
        if (cn_provider_add_defaults(mc->provider, provider_spec(mc, cnm), &spec) < 0)
                return NULL;
        if (!isempty(fd) && field) {
                json_object *placed = NULL;

                if (cn_machine_place(spec, field, fd, &placed) < 0)
                        return NULL;
                json_object_put(spec);
                spec = placed;
        }
        if (cn_provider_metrics_labels(mc->provider, spec, &kv) < 0 || strv_length(kv) / 2 != mc->n_spec_labels)
                return NULL;
        return label_list(mc->provider_name, kv, 1);
}

static int count_spec(json_object *cnm, void *userdata) {
        SpecCounts *c = userdata;
        _cleanup_strv_free_ char **v = NULL;

        if (!provider_spec(c->mc, cnm) || cn_json_get(cnm, "metadata", "deletionTimestamp", NULL))
                return 0;
        v = spec_label_values(c->mc, cnm);
        if (!v)
                return 0;
        return cn_metric_counts_add(&c->counts, (const char *const *) v);
}

/* CloudnodeMachines by the provider's machine labels (MachineMetricsLabels: size, and the
 * location or zone), as machine-controller exports them: counts, not a series per machine, so
 * the series stay as few as the sizes in use. Recomputed as a whole: a size no machine has any
 * more disappears. */
static void update_spec_metrics(MachineController *mc) {
        SpecCounts c = { .mc = mc };

        if (!mc->m_specs)
                return;
        (void) cn_kube_informer_foreach(mc->infra_machines, count_spec, &c);
        (void) cn_metric_counts_publish(&c.counts, mc->m_specs);
        cn_metric_counts_done(&c.counts);
}

static void update_phase_metrics(MachineController *mc) {
        static const char *const phases[] = { "Provisioning", "Running", "Deleting", "Failed" };
        size_t counts[4] = {};

        (void) cn_kube_informer_foreach(mc->infra_machines, count_phase, counts);
        for (size_t i = 0; i < ELEMENTSOF(phases); i++)
                (void) cn_metric_set(mc->m_phase, CN_LABELS(mc->provider_name, phases[i]), (double) counts[i]);
        (void) cn_metric_set(mc->m_secrets, NULL, (double) cn_credentials_size(mc->credentials));
        (void) cn_metric_set(mc->m_providers, NULL, (double) cn_provider_live_count());
        update_spec_metrics(mc);
}

static void enqueue_object(MachineController *mc, json_object *cnm) {
        const char *ns = cn_json_string(cnm, "metadata", "namespace", NULL);
        const char *name = cn_json_string(cnm, "metadata", "name", NULL);
        MachineState *s;

        if (!ns || !name)
                return;
        s = state_get(mc, ns, name);
        if (s)
                enqueue(s);
        else
                log_oom();
}

typedef struct Match {
        MachineController *mc;
        const char *namespace, *machine, *cluster; /* NULL cluster and machine: the whole namespace */
} Match;

static int enqueue_matching(json_object *cnm, void *userdata) {
        Match *m = userdata;
        const char *owner = cn_machine_owner_name(cnm);
        const char *cluster = cn_json_string(cnm, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL);

        if (!streq(strempty(cn_json_string(cnm, "metadata", "namespace", NULL)), m->namespace))
                return 0;
        if (m->machine && !(owner && streq(owner, m->machine)))
                return 0;
        /* Without the label the cluster comes from the owner Machine: queue it rather than miss it. */
        if (m->cluster && cluster && !streq(cluster, m->cluster))
                return 0;
        enqueue_object(m->mc, cnm);
        return 0;
}

static int enqueue_all(json_object *cnm, void *userdata) {
        enqueue_object(userdata, cnm);
        return 0;
}

static int on_phases(sd_event_source *es, uint64_t usec, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        if (machine_controller_synced(mc))
                update_phase_metrics(mc);
        return 0;
}

static bool queue_ready(void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        return mc->leading && machine_controller_synced(mc);
}

static void process(CnWorkQueue *q, CnWorkItem *item, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);
        MachineState *s = cn_work_item_get_data(item);

        if (!lookup_infra_machine(s) && writes_in_flight(s)) {
                /* The finalizer removal's response is usually still on its way when the deletion
                 * event arrives: cancelling it would close the connection. */
                s->missed = true;
                cn_work_queue_done(item);
                return;
        }
        if (!lookup_infra_machine(s)) {
                /* Gone from the cache: forget it (its calls are cancelled). */
                cn_work_queue_remove(item);
                return;
        }
        reconcile_one(mc, s);
        cn_work_queue_done(item);
}

/* Which CloudnodeMachines an event concerns: the object itself, those owned by a Machine, those
 * of a Cluster. */
static void on_event(CnKubeInformer *i, json_object *object, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);
        Match m = { .mc = mc, .namespace = cn_json_string(object, "metadata", "namespace", NULL) };
        const char *name = cn_json_string(object, "metadata", "name", NULL);

        if (i == mc->infra_machines) {
                enqueue_object(mc, object);
                return;
        }
        if (!m.namespace || !name)
                return;
        if (i == mc->machines)
                m.machine = name;
        else
                m.cluster = name;
        (void) cn_kube_informer_foreach(mc->infra_machines, enqueue_matching, &m);
}

static void on_added(CnKubeInformer *i, json_object *object, void *userdata) {
        on_event(i, object, userdata);
}

static void on_updated(CnKubeInformer *i, json_object *old, json_object *object, void *userdata) {
        on_event(i, object, userdata);
}

static void on_synced(CnKubeInformer *i, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        (void) cn_kube_informer_foreach(mc->infra_machines, enqueue_all, mc);
        cn_work_queue_kick(mc->queue);
        schedule(mc);
}

static const CnKubeInformerHandlers handlers = {
        .added = on_added,
        .updated = on_updated,
        .deleted = on_added,
        .synced = on_synced,
};

static int requeue_awaiting(CnWorkItem *item, void *userdata) {
        MachineState *s = cn_work_item_get_data(item);

        if (s->awaiting_credentials) {
                s->awaiting_credentials = false;
                enqueue(s);
        }
        return 0;
}

static void on_credentials(void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        (void) cn_work_queue_foreach(mc->queue, requeue_awaiting, NULL);
}

static void count_cloud_request(const char *provider, const char *operation, const char *result, void *userdata) {
        MachineController *mc = ASSERT_PTR(userdata);

        (void) cn_metric_inc(mc->m_calls, CN_LABELS(provider, operation, result));
}

/* The label names of the provider's MachineMetricsLabels (asked with an empty spec: the names
 * do not depend on it), after "provider". A provider without them has no such metric. */
static int register_spec_metric(MachineController *mc, CnMetrics *metrics) {
        _cleanup_json_ json_object *empty = json_object_new_object();
        _cleanup_strv_free_ char **kv = NULL, **names = NULL;
        int r;

        if (!empty)
                return -ENOMEM;
        r = cn_provider_metrics_labels(mc->provider, empty, &kv);
        if (r == -EOPNOTSUPP)
                return 0;
        if (r < 0)
                return r;
        names = label_list("provider", kv, 0);
        if (!names)
                return -ENOMEM;
        mc->n_spec_labels = strv_length(kv) / 2;
        return cn_metrics_gauge(metrics, "cloudnode_machines_by_spec",
                                "CloudnodeMachines not being deleted, by the provider's machine labels "
                                "(size: server type or flavor; location or zone).",
                                (const char *const *) names, &mc->m_specs);
}

int machine_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                           const char *provider, const char *cloud_config_file, MachineController **ret) {
        _cleanup_(machine_controller_freep) MachineController *mc = NULL;
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *err = NULL;
        int r;

        mc = calloc(1, sizeof(MachineController));
        if (!mc)
                return -ENOMEM;
        mc->event = sd_event_ref(e);
        mc->client = client;
        mc->recorder = recorder;
        mc->provider_name = strdup(provider);
        if (!mc->provider_name)
                return -ENOMEM;
        if (cloud_config_file) {
                r = cn_cloud_config_load(cloud_config_file, &cfg, &err);
                if (r < 0)
                        return log_error_errno(r, "Failed to read %s: %s", cloud_config_file, err ?: strerror(-r));
        }
        r = cn_http_new(e, &mc->http);
        if (r < 0)
                return r;
        free(err);
        err = NULL;
        r = cn_provider_new(provider, mc->http, cfg, &mc->provider, &err);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the %s provider for machines: %s", provider,
                                       err ?: strerror(-r));
        r = cn_metrics_gauge(metrics, "cloudnode_machines", "CloudnodeMachines by provider and phase.",
                             CN_LABELS("provider", "phase"), &mc->m_phase);
        if (r >= 0)
                r = cn_metrics_counter(metrics, "cloudnode_cloud_api_requests",
                                       "Cloud API requests of the machine lifecycle by operation and result.",
                                       CN_LABELS("provider", "operation", "result"), &mc->m_calls);
        if (r >= 0)
                r = cn_metrics_gauge(metrics, "cloudnode_credentials_secrets",
                                     "Credentials Secrets the controller holds providers or reasons for.", NULL,
                                     &mc->m_secrets);
        if (r >= 0)
                r = cn_metrics_gauge(metrics, "cloudnode_cloud_providers",
                                     "Cloud providers in memory: the controller's own and those built from "
                                     "Secrets, replaced ones included while calls still use them.",
                                     NULL, &mc->m_providers);
        if (r >= 0)
                r = register_spec_metric(mc, metrics);
        if (r < 0)
                return r;
        cn_provider_set_request_counter(mc->provider, count_cloud_request, mc);
        r = cn_credentials_new(client, mc->http, provider, mc->provider, count_cloud_request, mc, &mc->credentials);
        if (r >= 0) {
                cn_credentials_set_recorder(mc->credentials, recorder);
                r = cn_credentials_add_listener(mc->credentials, on_credentials, mc);
        }
        if (r < 0)
                return r;
        r = cn_work_queue_new(e,
                              &(CnWorkQueueOptions) {
                                      .description = "machine-queue",
                                      .backoff_base = POLL_BASE_USEC,
                                      .backoff_cap = POLL_CAP_USEC,
                              },
                              &(CnWorkQueueOps) {
                                      .process = process,
                                      .ready = queue_ready,
                                      .new_data = state_new,
                                      .free_data = state_free_data,
                              },
                              mc, &mc->queue);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(e, &mc->phases_source, CLOCK_MONOTONIC, PHASES_DELAY_USEC, 0, on_phases, mc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(mc->phases_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(mc->phases_source, "machine-phases");
        *ret = TAKE_PTR(mc);
        return 0;
}

MachineController *machine_controller_free(MachineController *mc) {
        if (!mc)
                return NULL;
        cn_work_queue_free(mc->queue);
        cn_kube_informer_unref(mc->infra_machines);
        cn_kube_informer_unref(mc->machines);
        cn_kube_informer_unref(mc->clusters);
        sd_event_source_disable_unref(mc->phases_source);
        cn_credentials_free(mc->credentials); /* before the provider it borrows */
        cn_provider_free(mc->provider);
        cn_http_free(mc->http);
        sd_event_unref(mc->event);
        free(mc->provider_name);
        free(mc);
        return NULL;
}

static int watch(MachineController *mc, const CnKubeResource *r, CnKubeInformer **ret) {
        int k;

        k = cn_kube_informer_get_shared(mc->client, r, &(CnKubeInformerOptions) {}, ret);
        if (k < 0)
                return log_error_errno(k, "Failed to create the %s informer: %m", r->resource);
        k = cn_kube_informer_add_handlers(*ret, &handlers, mc, NULL);
        if (k < 0)
                return k;
        k = cn_waiting_watch_api(*ret);
        if (k < 0)
                return k;
        return cn_kube_informer_start(*ret);
}

int machine_controller_start(MachineController *mc) {
        int r;

        r = watch(mc, &resource_cloudnodemachines, &mc->infra_machines);
        if (r >= 0)
                r = watch(mc, &resource_machines, &mc->machines);
        if (r >= 0)
                r = watch(mc, &resource_clusters, &mc->clusters);
        return r;
}

typedef struct ControlPlane {
        MachineController *mc;
        const char *namespace, *cluster;
        json_object *found; /* [[creationTimestamp, name, providerID], ...] */
} ControlPlane;

static int add_control_plane(json_object *cnm, void *userdata) {
        ControlPlane *cp = userdata;
        json_object *machine = owner_machine(cp->mc, cnm), *row;
        const char *pid = cn_json_string(cnm, "spec", "providerID", NULL);

        if (!streq(strempty(cn_json_string(cnm, "metadata", "namespace", NULL)), cp->namespace) ||
            !streq(strempty(cluster_name_of(cnm, machine)), cp->cluster) || !is_control_plane(cnm, machine) ||
            isempty(pid) || cn_json_get(cnm, "metadata", "deletionTimestamp", NULL))
                return 0;
        row = json_object_new_array();
        if (!row || json_object_array_add(cp->found, row) < 0) {
                json_object_put(row);
                return -ENOMEM;
        }
        (void) json_object_array_add(row, json_object_new_string(
                strempty(cn_json_string(cnm, "metadata", "creationTimestamp", NULL))));
        (void) json_object_array_add(row, json_object_new_string(strempty(cn_json_string(cnm, "metadata", "name", NULL))));
        (void) json_object_array_add(row, json_object_new_string(pid));
        return json_object_array_length(row) == 3 ? 0 : -ENOMEM;
}

static int compare_rows(const void *a, const void *b) {
        json_object *x = *(json_object *const *) a, *y = *(json_object *const *) b;
        int c;

        /* RFC 3339 in UTC compares as text; the name breaks ties. */
        for (size_t i = 0; i < 2; i++) {
                c = strcmp(json_object_get_string(json_object_array_get_idx(x, i)),
                           json_object_get_string(json_object_array_get_idx(y, i)));
                if (c != 0)
                        return c;
        }
        return 0;
}

int machine_controller_control_plane(MachineController *mc, const char *ns, const char *cluster, char ***ret) {
        _cleanup_json_ json_object *found = json_object_new_array();
        _cleanup_strv_free_ char **l = NULL;
        ControlPlane cp = { .mc = mc, .namespace = ns, .cluster = cluster, .found = found };
        int r;

        if (!found)
                return -ENOMEM;
        r = cn_kube_informer_foreach(mc->infra_machines, add_control_plane, &cp);
        if (r < 0)
                return r;
        json_object_array_sort(found, compare_rows);
        for (size_t i = 0; i < json_object_array_length(found); i++)
                if (strv_extend(&l, json_object_get_string(json_object_array_get_idx(
                                            json_object_array_get_idx(found, i), 2))) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

const CnKubeResource *machine_controller_infra_machines_resource(void) {
        return &resource_cloudnodemachines;
}

bool machine_controller_synced(MachineController *mc) {
        return cn_kube_informer_has_synced(mc->infra_machines) && cn_kube_informer_has_synced(mc->machines) &&
               cn_kube_informer_has_synced(mc->clusters);
}

CnProvider *machine_controller_provider(MachineController *mc) {
        return mc->provider;
}

CnCredentials *machine_controller_credentials(MachineController *mc) {
        return mc->credentials;
}

const CnKubeResource *machine_controller_clusters_resource(void) {
        return &resource_clusters;
}

unsigned machine_controller_awaited(MachineController *mc) {
        return mc ? cn_http_awaited(mc->http) : 0;
}

void machine_controller_set_leading(MachineController *mc, bool leading) {
        mc->leading = leading;
        if (leading && mc->infra_machines)
                (void) cn_kube_informer_foreach(mc->infra_machines, enqueue_all, mc);
        cn_work_queue_kick(mc->queue);
        schedule(mc);
}
