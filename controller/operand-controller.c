/* SPDX-License-Identifier: Apache-2.0 */
/* The operand controller: applies manifests/operand (the node initializer's Deployment, RBAC,
 * cloud config) for the cluster's cloud provider and reports status. See operand-controller.h.
 *
 * Zero writes in steady state: every write is decided by comparing the informer cache with the
 * desired objects (controller-apply.c), and the status object is written only when a condition
 * changes. After a write, the cache still holds the old object until its watch event arrives; an
 * "expectation" per object (the resourceVersion the write was based on) makes the next pass skip
 * that object until the cache has moved on, so one change never causes two writes. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "backoff.h"
#include "controller-apply.h"
#include "controller-assets.h"
#include "controller-operand.h"
#include "controller-render.h"
#include "controller-status.h"
#include "controller-waiting.h"
#include "hash-util.h"
#include "json-util.h"
#include "kube-client.h"
#include "kube-event.h"
#include "kube-expectation.h"
#include "kube-informer.h"
#include "log.h"
#include "operand-controller.h"
#include "provider.h"
#include "metrics.h"

#define STATUS_OBJECT_NAME "cloudnode"
#define EXPECTATION_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define RETRY_BASE_USEC (500 * USEC_PER_MSEC)
#define RETRY_CAP_USEC (60 * USEC_PER_SEC)
#define CONTROL_PLANE_SELECTOR "node-role.kubernetes.io/control-plane"
/* OpenShift's cloud config: the ConfigMap the Infrastructure names lives in openshift-config; the
 * one the cluster config operator derives from it is openshift-config-managed/kube-cloud-config. */
#define OPENSHIFT_CONFIG_NAMESPACE "openshift-config"
#define OPENSHIFT_MANAGED_NAMESPACE "openshift-config-managed"
#define OPENSHIFT_MANAGED_CLOUD_CONFIG "kube-cloud-config"

static const CnKubeResource resource_clusteroperators = {
        .group = "config.openshift.io", .version = "v1", .resource = "clusteroperators",
        .kind = "ClusterOperator", .namespaced = false,
};
static const CnKubeResource resource_infrastructures = {
        .group = "config.openshift.io", .version = "v1", .resource = "infrastructures",
        .kind = "Infrastructure", .namespaced = false,
};
static const CnKubeResource resource_proxies = {
        .group = "config.openshift.io", .version = "v1", .resource = "proxies",
        .kind = "Proxy", .namespaced = false,
};
static const CnKubeResource resource_cloudnodeoperators = {
        .group = "operator.cloudnode.io", .version = "v1alpha1", .resource = "cloudnodeoperators",
        .kind = "CloudnodeOperator", .namespaced = false,
};

#define N_RESOURCES 10

/* Of the credentials Secret only whether it exists matters here: its data is never cached. */
static const CnJsonFilter secret_metadata_only[] = { { "apiVersion" }, { "kind" }, { "metadata" }, {} };

struct OperandController {
        ControllerOptions options;
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        CnMetric *m_reconciles, *m_writes, *m_watch_restarts;
        /* per informer of ours (informers[], then the N_OWN below): restarts already exported */
#define N_OWN 8
        uint64_t watch_restarts_seen[N_RESOURCES + N_OWN];

        CnKubeInformer *informers[N_RESOURCES];
        CnKubeInformer *nodes, *source, *status, *infrastructure, *proxy;
        /* OpenShift only: the ConfigMaps of openshift-config, openshift-config-managed/kube-cloud-config */
        CnKubeInformer *openshift_config, *managed_config;
        char *openshift_config_name; /* the one ConfigMap of openshift-config openshift_config watches */
        /* OpenShift only: the Secret the Cloud Credential Operator writes (metadata only) */
        CnKubeInformer *credentials;
        const CnKubeResource *status_resource;
        CnKubeRequest *discovery;
        unsigned discovery_step;

        sd_event_source *reconcile_source, *retry_source;
        CnBackoff backoff;
        bool leading, stopping, started;
        bool have_admission_policies, have_infrastructures, have_proxies;
        bool status_creating;

        /* One pass's writes in flight, and what they found. */
        unsigned inflight;
        bool pass_failed, pass_wrote, pass_raced, dirty;
        char *last_error;
        char credential_warned[CN_SHA256_HEX_SIZE]; /* hash of the cloud config last warned about */
        char *cloud_config_from; /* "NS/NAME (key K, origin)" of the source last used, said on change */

        /* key "resource/ns/name" -> our last write to the object, until the cache shows it */
        CnWriteExpectations *expectations;
        char *last_degraded_message;
        /* what we wait for or go on without, each said once per episode */
        CnWaiting not_applying, no_images, no_cloud_config, no_credentials;
};

typedef struct Write {
        OperandController *controller;
        const CnKubeResource *resource;
        CnApplyAction action;
        json_object *desired;
        char *key;
        char *based_on; /* live resourceVersion, "" when it did not exist */
        char *uid;      /* recreate: the object being replaced */
} Write;

static Write *write_free(Write *w) {
        if (!w)
                return NULL;
        json_object_put(w->desired);
        free(w->key);
        free(w->based_on);
        free(w->uid);
        free(w);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Write *, write_free);

static void schedule(OperandController *oc) {
        if (oc->stopping)
                return;
        (void) sd_event_source_set_enabled(oc->reconcile_source, SD_EVENT_ONESHOT);
}

static int object_key(const CnKubeResource *res, json_object *o, char **ret) {
        const char *ns = cn_json_string(o, "metadata", "namespace", NULL);
        const char *name = cn_json_string(o, "metadata", "name", NULL);

        if (!name)
                return -EINVAL;
        if (asprintf(ret, "%s/%s/%s", res->resource, res->namespaced ? strempty(ns) : "", name) < 0)
                return -ENOMEM;
        return 0;
}

static CnKubeInformer *informer_for(OperandController *oc, const CnKubeResource *res) {
        for (size_t i = 0; cn_controller_resources[i]; i++)
                if (cn_controller_resources[i] == res)
                        return oc->informers[i];
        return NULL;
}

/* Remembers a successful write of w, so that the next passes skip the object until the cache
 * shows the write. */
static void expect(OperandController *oc, const Write *w, json_object *result) {
        CnWriteExpectation *e = cn_write_expectations_get(oc->expectations, w->key, true);

        if (!e)
                return;
        cn_write_expectation_clear(e);
        if (cn_write_expectation_begin_at(e, w->based_on) >= 0)
                (void) cn_write_expectation_written(e, result);
}

/* Events go to the status object, not to the applied objects: that is where an administrator
 * looks for the controller's story, and names like "cloudnode:node-initializer" (ClusterRoles)
 * are not valid in Event names derived from them. */
static void record_event(OperandController *oc, bool warning, const char *reason, const char *message) {
        CnKubeObjectRef ref = {
                .name = STATUS_OBJECT_NAME,
        };

        if (!oc->recorder || !oc->status_resource)
                return;
        ref.kind = oc->status_resource->kind;
        ref.api_version = streq(oc->status_resource->group, "config.openshift.io") ? "config.openshift.io/v1" :
                                                                                     "operator.cloudnode.io/v1alpha1";
        (void) cn_kube_event_record(oc->recorder, &ref, warning ? CN_KUBE_EVENT_WARNING : CN_KUBE_EVENT_NORMAL,
                                    reason, NULL, "%s", message);
}

static void pass_finished(OperandController *oc);
static int issue_write(OperandController *oc, Write *w);

static void write_done(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        _cleanup_(write_freep) Write *w = userdata;
        OperandController *oc = w->controller;
        const char *kind = w->resource->kind;
        const char *name = cn_json_string(w->desired, "metadata", "name", NULL);
        const char *verb = cn_apply_action_to_string(w->action);

        (void) cn_metric_inc(oc->m_writes, CN_LABELS(verb, kind, result->error < 0 ? "error" : "ok"));

        if (w->action == CN_APPLY_RECREATE && result->error >= 0) {
                /* Deleted; now create it again with the new immutable fields. */
                log_info("Deleted %s %s to change an immutable field, creating it again", kind, name);
                w->action = CN_APPLY_CREATE;
                free(w->based_on);
                w->based_on = strdup("");
                if (issue_write(oc, w) >= 0) {
                        TAKE_PTR(w);
                        return;
                }
                oc->pass_failed = true;
        } else if (result->error == -CN_KUBE_ECONFLICT || result->error == -CN_KUBE_EALREADYEXISTS) {
                /* Someone wrote in between, perhaps our own earlier write whose answer was lost: no
                 * failure to report. The watch brings the new state and its event another pass; the
                 * retry timer covers an event that came while this pass was still deciding. */
                log_debug("%s %s %s raced with another writer: %s", verb, kind, name, strna(result->message));
                oc->pass_raced = true;
        } else if (result->error < 0) {
                log_warning_errno(result->error, "Failed to %s %s %s: %s", verb, kind, name, strna(result->message));
                free(oc->last_error);
                if (asprintf(&oc->last_error, "failed to %s %s %s: %s", verb, kind, name,
                             strna(result->message ?: strerror(-result->error))) < 0)
                        oc->last_error = NULL;
                record_event(oc, true, "SyncingFailed", oc->last_error);
                oc->pass_failed = true;
        } else {
                const char *done = w->action == CN_APPLY_CREATE ? "Created" : "Updated";
                _cleanup_free_ char *msg = NULL;

                log_info("%s %s %s", done, kind, name);
                expect(oc, w, result->object);
                if (asprintf(&msg, "%s %s %s", done, kind, name) >= 0)
                        record_event(oc, false, done, msg);
                oc->pass_wrote = true;
        }
        assert(oc->inflight > 0);
        if (--oc->inflight == 0)
                pass_finished(oc);
}

/* Roles and ClusterRoles are created with PUT to their name (the RBAC API allows create on update),
 * never POST: the API server asks whether the writer may `escalate` the role named in the request's
 * path, and a POST names none. The controller may `escalate` the operand's roles by name only
 * (controller-rbac.yaml), so a POST of a role granting Node permissions it does not hold is
 * forbidden where a PUT of the same role is allowed. */
static bool created_by_name(const CnKubeResource *r) {
        return streq(r->group, "rbac.authorization.k8s.io") &&
                (streq(r->resource, "roles") || streq(r->resource, "clusterroles"));
}

static int issue_write(OperandController *oc, Write *w) {
        const char *ns = w->resource->namespaced ? cn_json_string(w->desired, "metadata", "namespace", NULL) : NULL;
        const char *name = cn_json_string(w->desired, "metadata", "name", NULL);

        switch (w->action) {
        case CN_APPLY_CREATE:
                if (created_by_name(w->resource))
                        return cn_kube_update(oc->client, w->resource, ns, name, NULL, w->desired, write_done, w,
                                              NULL);
                return cn_kube_create(oc->client, w->resource, ns, w->desired, write_done, w, NULL);
        case CN_APPLY_PATCH: {
                _cleanup_json_ json_object *patch = NULL;
                json_object *live = cn_kube_informer_lookup(informer_for(oc, w->resource), ns, name);
                int r;

                r = cn_apply_patch(w->desired, live, &patch);
                if (r < 0)
                        return r;
                return cn_kube_patch(oc->client, w->resource, ns, name, NULL, CN_KUBE_PATCH_MERGE, patch, write_done,
                                     w, NULL);
        }
        case CN_APPLY_RECREATE: {
                CnKubeDeleteOptions o = {
                        .precondition_uid = w->uid,
                        .propagation_policy = "Background",
                };
                return cn_kube_delete(oc->client, w->resource, ns, name, &o, write_done, w, NULL);
        }
        default:
                return -EINVAL;
        }
}

static int status_write_conditions(OperandController *oc, json_object *live, json_object *conditions,
                                   json_object *extra);

static int related_object(json_object *a, const char *group, const char *resource, const char *ns, const char *name) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        r = cn_json_set_string(o, group, "group", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, resource, "resource", NULL);
        if (r >= 0 && ns)
                r = cn_json_set_string(o, ns, "namespace", NULL);
        if (r >= 0)
                r = cn_json_set_string(o, name, "name", NULL);
        if (r < 0)
                return r;
        if (json_object_array_add(a, o) < 0)
                return -ENOMEM;
        TAKE_PTR(o);
        return 0;
}

/* What a ClusterOperator carries besides its conditions: relatedObjects (what `oc adm
 * must-gather` collects) and, once the operand of this release has rolled out, versions
 * ("operator": $RELEASE_VERSION), which the cluster version operator waits for during an upgrade.
 * Until then the versions stay as they are. *ret: the members to write, *ret_changed whether they
 * differ from live. */
static int clusteroperator_extra(OperandController *oc, json_object *live, bool rolled_out, json_object **ret,
                                 bool *ret_changed) {
        _cleanup_json_ json_object *extra = json_object_new_object(), *related = json_object_new_array();
        json_object *versions, *v;
        bool changed;
        int r;

        if (!extra || !related)
                return -ENOMEM;
        r = related_object(related, "", "namespaces", NULL, oc->options.namespace);
        if (r >= 0)
                r = related_object(related, "", "namespaces", NULL, "cloudnode-nodes");
        if (r >= 0)
                r = related_object(related, "config.openshift.io", "clusteroperators", NULL, STATUS_OBJECT_NAME);
        if (r >= 0)
                r = related_object(related, "apps", "deployments", oc->options.namespace, CN_OPERAND_DEPLOYMENT);
        if (r < 0)
                return r;
        changed = !cn_json_equal(related, cn_json_get(live, "status", "relatedObjects", NULL));
        r = cn_json_set(extra, TAKE_PTR(related), "relatedObjects", NULL);
        if (r < 0)
                return r;
        if (rolled_out && !isempty(oc->options.release_version)) {
                versions = json_object_new_array();
                if (!versions)
                        return -ENOMEM;
                r = cn_json_set(extra, versions, "versions", NULL);
                if (r < 0)
                        return r;
                v = json_object_new_object();
                if (!v || json_object_array_add(versions, v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
                r = cn_json_set_string(v, "operator", "name", NULL);
                if (r >= 0)
                        r = cn_json_set_string(v, oc->options.release_version, "version", NULL);
                if (r < 0)
                        return r;
                changed = changed || !cn_json_equal(versions, cn_json_get(live, "status", "versions", NULL));
        }
        *ret = TAKE_PTR(extra);
        *ret_changed = changed;
        return 0;
}

/* Whether the credentials are missing (OpenShift: the Secret the Cloud Credential Operator writes for
 * the platform's CredentialsRequest); *ret_message says what to do (caller frees). */
static bool credentials_missing(OperandController *oc, char **ret_message) {
        if (!oc->credentials || !cn_kube_informer_has_synced(oc->credentials) ||
            cn_kube_informer_lookup(oc->credentials, oc->options.namespace, CN_OPERAND_CREDENTIALS_SECRET)) {
                cn_waiting_over(&oc->no_credentials, "Found the Secret of the cloud credentials");
                return false;
        }
        if (asprintf(ret_message, "Secret %s/%s does not exist: the Cloud Credential Operator writes it for the "
                     "CredentialsRequest of the cluster's platform (openshift-cloud-credential-operator/"
                     "cloudnode-PLATFORM); in manual mode, create it with the keys that CredentialsRequest names",
                     oc->options.namespace, CN_OPERAND_CREDENTIALS_SECRET) < 0) {
                *ret_message = NULL;
                return false;
        }
        cn_waiting_say(&oc->no_credentials, LOG_WARNING, "%s", *ret_message);
        return true;
}

static void status_update(OperandController *oc, bool available, bool progressing, bool degraded, const char *message) {
        CnCondition conds[] = {
                { "Available", available, available ? CN_REASON_AS_EXPECTED : CN_REASON_SYNCING_FAILED,
                  available ? "all resources are in sync" : message },
                { "Progressing", progressing,
                  progressing ? CN_REASON_SYNCING_RESOURCES : CN_REASON_AS_EXPECTED,
                  progressing ? "applying resources" : "all resources are in sync" },
                { "Degraded", degraded, degraded ? CN_REASON_SYNCING_FAILED : CN_REASON_AS_EXPECTED,
                  degraded ? message : "" },
        };
        _cleanup_json_ json_object *conditions = NULL, *extra = NULL;
        _cleanup_free_ char *rollout = NULL, *no_credentials = NULL;
        bool extra_changed = false;
        bool rollout_available, rollout_progressing;
        json_object *live;
        bool changed;
        int r;

        /* Without its CRD (deleted after we started) there is nothing to write to; the informer
         * brings us back when it is served again. */
        if (!oc->status || !cn_kube_informer_has_synced(oc->status) || !cn_kube_informer_is_served(oc->status))
                return;
        /* Our own writes done, the conditions follow the operand Deployment's rollout (its
         * informer's events bring us back here), not just our writes. */
        if (available && !progressing &&
            cn_status_rollout(cn_kube_informer_lookup(informer_for(oc, &cn_controller_resource_deployments),
                                                      oc->options.namespace, CN_OPERAND_DEPLOYMENT),
                              &rollout_available, &rollout_progressing, &rollout) >= 0) {
                if (!rollout_available)
                        conds[0] = (CnCondition) { "Available", false, CN_REASON_DEPLOYMENT_UNAVAILABLE, rollout };
                if (rollout_progressing)
                        conds[1] = (CnCondition) { "Progressing", true, CN_REASON_DEPLOYMENT_ROLLING_OUT, rollout };
        }
        if (!degraded && credentials_missing(oc, &no_credentials))
                conds[2] = (CnCondition) { "Degraded", true, CN_REASON_CREDENTIALS_MISSING, no_credentials };
        live = cn_kube_informer_lookup(oc->status, NULL, STATUS_OBJECT_NAME);
        r = cn_status_conditions(conds, ELEMENTSOF(conds), live ? cn_json_get(live, "status", "conditions", NULL) : NULL,
                                 cn_now(CLOCK_REALTIME), &conditions, &changed);
        if (r < 0) {
                log_warning_errno(r, "Failed to build status conditions, ignoring: %m");
                return;
        }
        if (oc->status_resource == &resource_clusteroperators) {
                /* Rolled out: our writes done and the operand Deployment of this spec available. */
                r = clusteroperator_extra(oc, live, conds[0].status && !conds[1].status, &extra, &extra_changed);
                if (r < 0) {
                        log_warning_errno(r, "Failed to build the ClusterOperator's status, ignoring: %m");
                        return;
                }
        }
        if (live && !changed && !extra_changed)
                return;
        r = status_write_conditions(oc, live, conditions, extra);
        if (r < 0)
                log_warning_errno(r, "Failed to write status, ignoring: %m");
}

static void status_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        OperandController *oc = userdata;

        oc->status_creating = false;
        if (result->error == -CN_KUBE_EALREADYEXISTS)
                /* Created by an earlier instance; the informer brings it, then we patch. */
                return;
        if (result->error < 0) {
                log_warning_errno(result->error, "Failed to update %s/%s status: %s", oc->status_resource->resource,
                                  STATUS_OBJECT_NAME, strna(result->message));
                /* The status informer's next event (or the retry) brings us back here; a 404 means
                 * the CRD went away, and its informer says when it is back. */
                if (result->error != -CN_KUBE_ENOTFOUND)
                        schedule(oc);
        }
}

static int status_write_conditions(OperandController *oc, json_object *live, json_object *conditions,
                                   json_object *extra) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        if (!live) {
                /* Create the object; its status follows once the informer has seen it. */
                if (oc->status_creating)
                        return 0;
                oc->status_creating = true;
                const char *api_version = streq(oc->status_resource->group, "config.openshift.io") ?
                                                  "config.openshift.io/v1" :
                                                  "operator.cloudnode.io/v1alpha1";

                r = cn_json_set_string(o, api_version, "apiVersion", NULL);
                if (r >= 0)
                        r = cn_json_set_string(o, oc->status_resource->kind, "kind", NULL);
                if (r >= 0)
                        r = cn_json_set_string(o, STATUS_OBJECT_NAME, "metadata", "name", NULL);
                if (r >= 0)
                        r = cn_json_set(o, json_object_new_object(), "spec", NULL);
                if (r < 0)
                        return r;
                return cn_kube_create(oc->client, oc->status_resource, NULL, o, status_written, oc, NULL);
        }
        r = cn_json_set(o, json_object_get(conditions), "status", "conditions", NULL);
        if (r < 0)
                return r;
        if (extra) {
                json_object_object_foreach(extra, k, v) {
                        r = cn_json_set(o, json_object_get(v), "status", k, NULL);
                        if (r < 0)
                                return r;
                }
        }
        return cn_kube_patch(oc->client, oc->status_resource, NULL, STATUS_OBJECT_NAME, "status", CN_KUBE_PATCH_MERGE,
                             o, status_written, oc, NULL);
}

static void pass_finished(OperandController *oc) {
        if (oc->pass_failed) {
                usec_t delay = cn_backoff_next(&oc->backoff, 0);

                (void) cn_metric_inc(oc->m_reconciles, CN_LABELS("error"));
                status_update(oc, false, true, true, oc->last_error ?: "applying resources failed");
                (void) sd_event_source_set_time_relative(oc->retry_source, delay);
                (void) sd_event_source_set_enabled(oc->retry_source, SD_EVENT_ONESHOT);
        } else {
                (void) cn_metric_inc(oc->m_reconciles, CN_LABELS(oc->pass_wrote ? "changed" : "unchanged"));
                if (oc->pass_raced) {
                        (void) sd_event_source_set_time_relative(oc->retry_source, cn_backoff_next(&oc->backoff, 0));
                        (void) sd_event_source_set_enabled(oc->retry_source, SD_EVENT_ONESHOT);
                } else
                        cn_backoff_reset(&oc->backoff);
                if (oc->pass_wrote)
                        status_update(oc, true, true, false, NULL);
        }
        oc->pass_failed = oc->pass_wrote = oc->pass_raced = false;
        if (oc->dirty) {
                oc->dirty = false;
                schedule(oc);
        }
}

static bool all_synced(OperandController *oc) {
        if (!oc->started)
                return false;
        for (size_t i = 0; i < N_RESOURCES; i++)
                if (oc->informers[i] && !cn_kube_informer_has_synced(oc->informers[i]))
                        return false;
        return cn_kube_informer_has_synced(oc->nodes) && cn_kube_informer_has_synced(oc->source) &&
               cn_kube_informer_has_synced(oc->status) &&
               (!oc->infrastructure || cn_kube_informer_has_synced(oc->infrastructure)) &&
               (!oc->openshift_config || cn_kube_informer_has_synced(oc->openshift_config)) &&
               (!oc->managed_config || cn_kube_informer_has_synced(oc->managed_config)) &&
               (!oc->proxy || cn_kube_informer_has_synced(oc->proxy)) &&
               (!oc->credentials || cn_kube_informer_has_synced(oc->credentials));
}

static int set_last_error(OperandController *oc, const char *fmt, ...) _printf_(2, 3);
static int set_last_error(OperandController *oc, const char *fmt, ...) {
        va_list ap;
        int r;

        free(oc->last_error);
        va_start(ap, fmt);
        r = vasprintf(&oc->last_error, fmt, ap);
        va_end(ap);
        if (r < 0)
                oc->last_error = NULL;
        return -EINVAL;
}

/* The cloud provider of the operand: --cloud-provider, else the CloudnodeOperator's spec, else
 * OpenShift's Infrastructure platform. Nothing is applied without one: the initializer would
 * exit at once. *ret_platform owns what *ret may point into. */
static int operand_cloud_provider(OperandController *oc, const char **ret, char **ret_platform) {
        json_object *op = oc->status_resource == &resource_cloudnodeoperators ?
                                  cn_kube_informer_lookup(oc->status, NULL, STATUS_OBJECT_NAME) :
                                  NULL;
        json_object *infra = oc->infrastructure ? cn_kube_informer_lookup(oc->infrastructure, NULL, "cluster") : NULL;
        _cleanup_free_ char *platform = NULL;
        const char *source = NULL;
        int r;

        if (infra)
                (void) cn_render_infrastructure_platform(infra, &platform, NULL);
        r = cn_operand_cloud_provider(oc->options.cloud_provider, op, platform, ret, &source);
        if (r == -ENOENT && oc->status_resource == &resource_clusteroperators)
                return set_last_error(oc, "no cloud provider: OpenShift's Infrastructure cluster %s "
                                      "(status.platformStatus.type; for External, its platformName), or pass "
                                      "--cloud-provider to cloudnode-controller",
                                      !oc->have_infrastructures ? "is not served" :
                                      !infra ? "does not exist" : "names no platform this build has");
        if (r == -ENOENT)
                return set_last_error(oc, "no cloud provider: set spec.cloudProvider of %s %s (kubectl patch "
                                      "cloudnodeoperator cloudnode --type=merge -p '{\"spec\":{\"cloudProvider\":"
                                      "\"hetzner\"}}'), or pass --cloud-provider to cloudnode-controller",
                                      oc->status_resource->kind, STATUS_OBJECT_NAME);
        if (r < 0) {
                _cleanup_free_ char *known = cn_provider_names();

                return set_last_error(oc, "cloud provider '%s' (from the %s) is not one this build has (%s)", *ret,
                                      source, strna(known));
        }
        *ret_platform = TAKE_PTR(platform);
        return 0;
}

/* A credential in the cloud config is in a ConfigMap, readable with the built-in view role: say so
 * loudly, once per content, naming the setting and never its value. It is still copied: refusing
 * would take the cloud away from a running cluster. */
static void warn_credentials(OperandController *oc, const CnCloudConfigSource *source, const char *conf) {
        char hash[CN_SHA256_HEX_SIZE];
        const char *key = cn_operand_cloud_config_credential(conf);
        _cleanup_free_ char *msg = NULL;

        if (!key || cn_sha256_hex(conf, strlen(conf), hash) < 0 || streq(hash, oc->credential_warned))
                return;
        memcpy(oc->credential_warned, hash, sizeof(hash));
        if (asprintf(&msg, "the cloud config in ConfigMap %s/%s sets '%s', a credential any reader of ConfigMaps "
                     "can see: move it into the Secret %s/%s", source->namespace, source->name, key,
                     oc->options.namespace, CN_OPERAND_CREDENTIALS_SECRET) < 0)
                return;
        log_warning("CredentialsInConfigMap: %s", msg);
        record_event(oc, true, "CredentialsInConfigMap", msg);
}

/* The cloud config, from the first source that exists: on OpenShift the ConfigMap the
 * Infrastructure names (spec.cloudConfig, in openshift-config), then
 * openshift-config-managed/kube-cloud-config, then --cloud-config-source everywhere. A source the
 * Infrastructure names without its key is an error: the operand keeps its cloud-conf. */
static int cloud_config(OperandController *oc, const char **ret) {
        json_object *infra = oc->infrastructure ? cn_kube_informer_lookup(oc->infrastructure, NULL, "cluster") : NULL;
        const char *infra_name = cn_json_string(infra, "spec", "cloudConfig", "name", NULL);
        CnCloudConfigSource sources[] = {
                { OPENSHIFT_CONFIG_NAMESPACE, infra_name, cn_json_string(infra, "spec", "cloudConfig", "key", NULL),
                  "Infrastructure cluster spec.cloudConfig", true,
                  oc->openshift_config && !isempty(infra_name) ?
                          cn_kube_informer_lookup(oc->openshift_config, OPENSHIFT_CONFIG_NAMESPACE, infra_name) : NULL },
                { OPENSHIFT_MANAGED_NAMESPACE, OPENSHIFT_MANAGED_CLOUD_CONFIG, CN_OPERAND_CLOUD_CONF_KEY,
                  "OpenShift's managed cloud config", false,
                  oc->managed_config ? cn_kube_informer_lookup(oc->managed_config, OPENSHIFT_MANAGED_NAMESPACE,
                                                               OPENSHIFT_MANAGED_CLOUD_CONFIG) : NULL },
                { oc->options.cloud_config_namespace, oc->options.cloud_config_name, oc->options.cloud_config_key,
                  "--cloud-config-source", false,
                  cn_kube_informer_lookup(oc->source, oc->options.cloud_config_namespace, oc->options.cloud_config_name) },
        };
        _cleanup_free_ char *from = NULL;
        const char *text = NULL;
        size_t i = 0;
        int r;

        r = cn_operand_pick_cloud_config(sources, ELEMENTSOF(sources), &i, &text);
        if (r == -ENOKEY)
                return set_last_error(oc, "ConfigMap %s/%s (named by the %s) has neither the key '%s' nor '%s'",
                                      sources[i].namespace, sources[i].name, sources[i].origin,
                                      strna(sources[i].key), CN_OPERAND_CLOUD_CONF_KEY);
        if (r == -ENOENT) {
                cn_waiting_say(&oc->no_cloud_config, LOG_NOTICE,
                               "ConfigMap %s/%s (key %s) not found%s: the operand gets an empty cloud.conf until it "
                               "exists; create it with the provider's settings", oc->options.cloud_config_namespace,
                               oc->options.cloud_config_name, oc->options.cloud_config_key,
                               oc->infrastructure ? ", nor the Infrastructure's nor openshift-config-managed's" : "");
                *ret = NULL;
                return 0;
        }
        cn_waiting_over(&oc->no_cloud_config, NULL);
        if (asprintf(&from, "ConfigMap %s/%s (key %s, from the %s)", sources[i].namespace, sources[i].name,
                     text && cn_json_string(sources[i].configmap, "data", strempty(sources[i].key), NULL) ?
                             sources[i].key : CN_OPERAND_CLOUD_CONF_KEY,
                     sources[i].origin) < 0)
                return -ENOMEM;
        if (!oc->cloud_config_from || !streq(from, oc->cloud_config_from)) {
                log_info("Cloud config from %s", from);
                free(oc->cloud_config_from);
                oc->cloud_config_from = TAKE_PTR(from);
        }
        warn_credentials(oc, &sources[i], text);
        *ret = text;
        return 0;
}

static int build_config(OperandController *oc, CnOperandConfig *c, json_object **ret_images, char **ret_platform) {
        CnKubeInformer *cms = informer_for(oc, &cn_controller_resource_configmaps);
        json_object *images_cm = cn_kube_informer_lookup(cms, oc->options.namespace, oc->options.images_configmap);
        const char *images_text = cn_json_string(images_cm, "data", "images.json", NULL);
        _cleanup_json_ json_object *images = NULL;
        int r;

        json_object *infra = oc->infrastructure ? cn_kube_informer_lookup(oc->infrastructure, NULL, "cluster") : NULL;
        json_object *proxy = oc->proxy ? cn_kube_informer_lookup(oc->proxy, NULL, "cluster") : NULL;

        *c = (CnOperandConfig) {
                .namespace = oc->options.namespace,
                .http_proxy = oc->options.http_proxy,
                .https_proxy = oc->options.https_proxy,
                .no_proxy = oc->options.no_proxy,
                /* OpenShift says so for a single-node control plane before its Node registers. */
                .single_node = cn_kube_informer_size(oc->nodes) == 1 ||
                               streq(strempty(cn_json_string(infra, "status", "controlPlaneTopology", NULL)),
                                     "SingleReplica"),
                .infrastructure_name = cn_json_string(infra, "status", "infrastructureName", NULL),
                .release_version = oc->options.release_version,
        };
        if (proxy) {
                /* The cluster-wide Proxy's status is what OpenShift's operators hand their operands
                 * (noProxy completed with the cluster's own networks); it replaces the flags, an
                 * empty value included. */
                c->http_proxy = cn_json_string(proxy, "status", "httpProxy", NULL);
                c->https_proxy = cn_json_string(proxy, "status", "httpsProxy", NULL);
                c->no_proxy = cn_json_string(proxy, "status", "noProxy", NULL);
        }
        r = cloud_config(oc, &c->cloud_config);
        if (r < 0)
                return r;
        /* Neither is waited for: the operand is applied without them, and the lines say so. */
        if (images_cm)
                cn_waiting_over(&oc->no_images, NULL);
        else
                cn_waiting_say(&oc->no_images, LOG_NOTICE,
                               "ConfigMap %s/%s not found: the operand gets the built-in images; apply "
                               "manifests/controller/images-configmap.yaml to choose them", oc->options.namespace,
                               oc->options.images_configmap);
        r = operand_cloud_provider(oc, &c->cloud_provider, ret_platform);
        if (r < 0)
                return r;
        if (images_text) {
                _cleanup_free_ char *err = NULL;

                r = cn_operand_parse_images(images_text, &images, &err);
                if (r < 0) {
                        free(oc->last_error);
                        if (asprintf(&oc->last_error, "ConfigMap %s/%s: %s", oc->options.namespace,
                                     oc->options.images_configmap, strna(err)) < 0)
                                oc->last_error = NULL;
                        return r;
                }
        }
        c->images = images;
        *ret_images = TAKE_PTR(images);
        return 0;
}

static int watch(OperandController *oc, const CnKubeResource *r, const CnKubeInformerOptions *o, CnKubeInformer **ret);

static bool is_configmap_name(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > 253 || name[0] == '.' || name[0] == '-' || name[n - 1] == '.' || name[n - 1] == '-')
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
                        return false;
        return true;
}

/* On OpenShift, the ConfigMap of openshift-config that the Infrastructure names is watched alone,
 * by name: the controller may read that one only (its Role there lists it in resourceNames), not
 * the namespace's other ConfigMaps. When the Infrastructure names another, the watch follows.
 * Returns 0 when the pass may go on, 1 when it waits for that watch (its list refused is a
 * Degraded status that names the Role to extend). */
static int follow_infrastructure_config(OperandController *oc) {
        json_object *infra = oc->infrastructure ? cn_kube_informer_lookup(oc->infrastructure, NULL, "cluster") : NULL;
        const char *name = cn_json_string(infra, "spec", "cloudConfig", "name", NULL);
        _cleanup_free_ char *selector = NULL;
        int r;

        if (!oc->infrastructure || !cn_kube_informer_has_synced(oc->infrastructure))
                return 0;
        if (!isempty(name) && !is_configmap_name(name)) {
                (void) set_last_error(oc, "the Infrastructure cluster's spec.cloudConfig.name is not a ConfigMap name");
                cn_waiting_say(&oc->not_applying, LOG_ERR, "Not applying: %s", oc->last_error);
                status_update(oc, false, false, true, oc->last_error);
                return 1;
        }
        if (isempty(name) ? !!oc->openshift_config_name
                          : !oc->openshift_config_name || !streq(name, oc->openshift_config_name)) {
                oc->openshift_config = cn_kube_informer_unref(oc->openshift_config);
                free(oc->openshift_config_name);
                oc->openshift_config_name = NULL;
                oc->watch_restarts_seen[N_RESOURCES + 4] = 0;
                if (isempty(name))
                        return 0;
                oc->openshift_config_name = strdup(name);
                if (!oc->openshift_config_name || asprintf(&selector, "metadata.name=%s", name) < 0)
                        return log_oom();
                r = watch(oc, &cn_controller_resource_configmaps,
                          &(CnKubeInformerOptions) { .namespace = OPENSHIFT_CONFIG_NAMESPACE, .field_selector = selector },
                          &oc->openshift_config);
                if (r < 0)
                        return r;
                log_info("Watching ConfigMap %s/%s, the cloud config the Infrastructure names.",
                         OPENSHIFT_CONFIG_NAMESPACE, name);
        }
        if (!oc->openshift_config || cn_kube_informer_has_synced(oc->openshift_config))
                return 0;
        if (cn_kube_informer_get_list_error(oc->openshift_config) == -CN_KUBE_EFORBIDDEN) {
                (void) set_last_error(oc,
                                      "ConfigMap %s/%s, which the Infrastructure names, may not be read: add it to the "
                                      "resourceNames of the Role cloudnode:controller:cloud-config-reader there",
                                      OPENSHIFT_CONFIG_NAMESPACE, name);
                cn_waiting_say(&oc->not_applying, LOG_ERR, "Not applying: %s", oc->last_error);
                status_update(oc, false, false, true, oc->last_error);
        }
        /* Its sync triggers a pass; a refused list does not, so look again later. */
        (void) sd_event_source_set_time_relative(oc->retry_source, cn_backoff_next(&oc->backoff, 0));
        (void) sd_event_source_set_enabled(oc->retry_source, SD_EVENT_ONESHOT);
        return 1;
}

static int reconcile(OperandController *oc) {
        _cleanup_json_ json_object *desired = NULL, *images = NULL;
        _cleanup_free_ char *platform = NULL;
        CnOperandConfig config;
        unsigned waiting = 0;
        int r;

        if (!oc->leading || oc->stopping || !oc->started)
                return 0;
        r = follow_infrastructure_config(oc);
        if (r != 0)
                return r < 0 ? r : 0;
        if (!all_synced(oc))
                return 0;
        if (oc->inflight > 0) {
                oc->dirty = true;
                return 0;
        }
        r = build_config(oc, &config, &images, &platform);
        if (r < 0) {
                cn_waiting_say(&oc->not_applying, LOG_ERR, "Not applying: %s", strna(oc->last_error));
                (void) cn_metric_inc(oc->m_reconciles, CN_LABELS("error"));
                status_update(oc, false, false, true, oc->last_error);
                return 0;
        }
        cn_waiting_over(&oc->not_applying, "Applying the operand");
        r = cn_operand_desired(&config, &desired);
        if (r < 0)
                return log_error_errno(r, "Failed to compute the desired objects: %m");

        /* Count ourselves as one in-flight write so that writes finishing synchronously (they do
         * not, but a failed queueing does) cannot finish the pass before every object was seen. */
        oc->inflight = 1;
        for (size_t i = 0; i < json_object_array_length(desired); i++) {
                json_object *d = json_object_array_get_idx(desired, i), *live;
                const CnKubeResource *res = cn_controller_resource_for(d);
                const char *ns = res->namespaced ? cn_json_string(d, "metadata", "namespace", NULL) : NULL;
                const char *name = cn_json_string(d, "metadata", "name", NULL);
                _cleanup_(write_freep) Write *w = NULL;
                _cleanup_free_ char *key = NULL;
                CnApplyAction action;

                r = object_key(res, d, &key);
                if (r < 0) {
                        oc->pass_failed = true;
                        break;
                }
                if (!informer_for(oc, res))
                        /* The cluster does not serve this API (ValidatingAdmissionPolicy before
                         * Kubernetes 1.30): nothing to apply, said once at startup. */
                        continue;
                live = cn_kube_informer_lookup(informer_for(oc, res), ns, name);
                if (cn_write_expectations_pending(oc->expectations, key, live, EXPECTATION_TIMEOUT_USEC)) {
                        waiting++;
                        continue;
                }
                action = cn_apply_decide(d, live);
                if (action == CN_APPLY_NONE)
                        continue;
                log_debug("%s %s %s", cn_apply_action_to_string(action), res->kind, name);

                w = calloc(1, sizeof(Write));
                if (!w) {
                        oc->pass_failed = true;
                        break;
                }
                *w = (Write) {
                        .controller = oc,
                        .resource = res,
                        .action = action,
                        .desired = json_object_get(d),
                        .key = TAKE_PTR(key),
                        .based_on = strdup(live ? strempty(cn_json_string(live, "metadata", "resourceVersion", NULL)) : ""),
                        .uid = live ? strdup(strempty(cn_json_string(live, "metadata", "uid", NULL))) : NULL,
                };
                if (!w->based_on) {
                        oc->pass_failed = true;
                        break;
                }
                r = issue_write(oc, w);
                if (r < 0) {
                        log_warning_errno(r, "Failed to queue %s of %s %s: %m", cn_apply_action_to_string(action),
                                          res->kind, name);
                        oc->pass_failed = true;
                        continue;
                }
                TAKE_PTR(w);
                oc->inflight++;
        }
        if (waiting > 0) {
                /* Come back when the expectations time out, in case their events never arrive. */
                (void) sd_event_source_set_time_relative(oc->retry_source, EXPECTATION_TIMEOUT_USEC + USEC_PER_SEC);
                (void) sd_event_source_set_enabled(oc->retry_source, SD_EVENT_ONESHOT);
        }
        if (--oc->inflight > 0)
                return 0;
        if (oc->pass_failed || oc->pass_wrote || oc->pass_raced || waiting > 0) {
                pass_finished(oc);
                return 0;
        }
        /* Nothing to write: everything is as desired. */
        (void) cn_metric_inc(oc->m_reconciles, CN_LABELS("unchanged"));
        cn_backoff_reset(&oc->backoff);
        free(oc->last_error);
        oc->last_error = NULL;
        status_update(oc, true, false, false, NULL);
        return 0;
}

static int on_reconcile(sd_event_source *s, void *userdata) {
        OperandController *oc = ASSERT_PTR(userdata);

        (void) reconcile(oc);
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        OperandController *oc = ASSERT_PTR(userdata);

        (void) reconcile(oc);
        return 0;
}

static int watch(OperandController *oc, const CnKubeResource *r, const CnKubeInformerOptions *o, CnKubeInformer **ret) {
        _cleanup_kube_informer_ CnKubeInformer *i = NULL;
        int k;

        k = cn_kube_informer_new(oc->client, r, o, &i);
        if (k < 0)
                return log_error_errno(k, "Failed to create the %s informer: %m", r->resource);
        k = cn_kube_informer_add_trigger(i, oc->reconcile_source, NULL);
        if (k < 0)
                return k;
        k = cn_waiting_watch_api(i);
        if (k < 0)
                return k;
        k = cn_kube_informer_start(i);
        if (k < 0)
                return log_error_errno(k, "Failed to start the %s informer: %m", r->resource);
        *ret = TAKE_PTR(i);
        return 0;
}

static int setup_metrics(OperandController *oc, CnMetrics *metrics) {
        int r;

        r = cn_metrics_counter(metrics, "cloudnode_controller_reconciles",
                               "Reconcile passes by result (unchanged: no write was needed).", CN_LABELS("result"),
                               &oc->m_reconciles);
        if (r < 0)
                return r;
        r = cn_metrics_counter(metrics, "cloudnode_controller_writes",
                               "Writes to the API server by action, kind and result.",
                               CN_LABELS("action", "kind", "result"), &oc->m_writes);
        if (r < 0)
                return r;
        return cn_metrics_counter(metrics, "cloudnode_controller_watch_restarts",
                                  "Watches of the API server that ended and were restarted, by resource.",
                                  CN_LABELS("resource"), &oc->m_watch_restarts);
}

void operand_controller_export_watch_restarts(OperandController *oc) {
        CnKubeInformer *all[N_RESOURCES + N_OWN];

        _Static_assert(ELEMENTSOF(all) == ELEMENTSOF(oc->watch_restarts_seen), "one seen count per informer");
        memcpy(all, oc->informers, sizeof(oc->informers));
        all[N_RESOURCES] = oc->nodes;
        all[N_RESOURCES + 1] = oc->source;
        all[N_RESOURCES + 2] = oc->status;
        all[N_RESOURCES + 3] = oc->infrastructure;
        all[N_RESOURCES + 4] = oc->openshift_config;
        all[N_RESOURCES + 5] = oc->managed_config;
        all[N_RESOURCES + 6] = oc->proxy;
        all[N_RESOURCES + 7] = oc->credentials;
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                if (all[i])
                        (void) cn_metric_add_total(oc->m_watch_restarts,
                                                   CN_LABELS(cn_kube_informer_get_resource(all[i])->resource),
                                                   cn_kube_informer_get_watch_restarts(all[i]),
                                                   &oc->watch_restarts_seen[i]);
}

static int start_informers(OperandController *oc);

static bool discovery_lists(json_object *list, const char *resource) {
        json_object *resources = json_object_object_get(list, "resources");

        for (size_t i = 0; resources && i < json_object_array_length(resources); i++) {
                const char *n = cn_json_string(json_object_array_get_idx(resources, i), "name", NULL);

                if (n && streq(n, resource))
                        return true;
        }
        return false;
}

/* Which optional APIs the cluster serves decides what we watch, so discovery runs first: GET the
 * group versions (the client retries transient errors; 404 means "not served"). */
static void on_discovery(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        OperandController *oc = ASSERT_PTR(userdata);
        bool openshift_step = oc->status_resource == NULL && oc->discovery_step == 1;
        int r;

        oc->discovery = cn_kube_request_free(oc->discovery);
        if (result->error < 0 && result->error != -CN_KUBE_ENOTFOUND) {
                log_error_errno(result->error, "API discovery failed: %s", strna(result->message));
                (void) sd_event_exit(oc->event, EXIT_FAILURE);
                return;
        }
        if (!openshift_step) {
                oc->have_admission_policies = result->error >= 0 &&
                                             discovery_lists(result->object, "validatingadmissionpolicies");
                if (!oc->have_admission_policies)
                        log_warning("The cluster does not serve admissionregistration.k8s.io/v1 "
                                    "ValidatingAdmissionPolicy (Kubernetes serves it from 1.30 on); the node-mode "
                                    "identity is limited by RBAC only until cloudnode-controller restarts on a "
                                    "cluster that serves it");
                oc->discovery_step = 1;
                r = cn_kube_request(oc->client, "GET", "/apis/config.openshift.io/v1", NULL, NULL, on_discovery, oc,
                                    &oc->discovery);
                if (r < 0)
                        (void) sd_event_exit(oc->event, EXIT_FAILURE);
                return;
        }
        oc->have_infrastructures = result->error >= 0 && discovery_lists(result->object, "infrastructures");
        oc->have_proxies = result->error >= 0 && discovery_lists(result->object, "proxies");
        oc->status_resource = result->error >= 0 && discovery_lists(result->object, "clusteroperators") ?
                                     &resource_clusteroperators :
                                     &resource_cloudnodeoperators;
        log_info("Reporting status on %s/%s", oc->status_resource->resource, STATUS_OBJECT_NAME);
        r = start_informers(oc);
        if (r < 0)
                (void) sd_event_exit(oc->event, EXIT_FAILURE);
}

static int start_informers(OperandController *oc) {
        CnKubeInformerOptions in_ns = { .namespace = oc->options.namespace };
        _cleanup_free_ char *source_selector = NULL;
        int r;

        for (size_t i = 0; i < N_RESOURCES; i++) {
                const CnKubeResource *res = cn_controller_resources[i];

                if (!oc->have_admission_policies &&
                    (res == &cn_controller_resource_validatingadmissionpolicies ||
                     res == &cn_controller_resource_validatingadmissionpolicybindings))
                        continue;
                r = watch(oc, res, res->namespaced ? &in_ns : &(CnKubeInformerOptions) {}, &oc->informers[i]);
                if (r < 0)
                        return r;
        }
        r = watch(oc, &cn_kube_resource_nodes, &(CnKubeInformerOptions) { .label_selector = CONTROL_PLANE_SELECTOR },
                  &oc->nodes);
        if (r < 0)
                return r;
        if (asprintf(&source_selector, "metadata.name=%s", oc->options.cloud_config_name) < 0)
                return -ENOMEM;
        r = watch(oc, &cn_controller_resource_configmaps,
                  &(CnKubeInformerOptions) { .namespace = oc->options.cloud_config_namespace,
                                             .field_selector = source_selector },
                  &oc->source);
        if (r < 0)
                return r;
        r = watch(oc, oc->status_resource, &(CnKubeInformerOptions) { .field_selector = "metadata.name=" STATUS_OBJECT_NAME },
                  &oc->status);
        if (r < 0)
                return r;
        if (oc->have_infrastructures) {
                r = watch(oc, &resource_infrastructures, &(CnKubeInformerOptions) { .field_selector = "metadata.name=cluster" },
                          &oc->infrastructure);
                if (r < 0)
                        return r;
                /* The ConfigMap of openshift-config the Infrastructure names is watched once the
                 * Infrastructure is known (follow_infrastructure_config). */
                r = watch(oc, &cn_controller_resource_configmaps,
                          &(CnKubeInformerOptions) { .namespace = OPENSHIFT_MANAGED_NAMESPACE,
                                                     .field_selector = "metadata.name=" OPENSHIFT_MANAGED_CLOUD_CONFIG },
                          &oc->managed_config);
                if (r < 0)
                        return r;
                r = watch(oc, &cn_kube_resource_secrets,
                          &(CnKubeInformerOptions) { .namespace = oc->options.namespace,
                                                     .field_selector = "metadata.name=" CN_OPERAND_CREDENTIALS_SECRET,
                                                     .filter = secret_metadata_only },
                          &oc->credentials);
                if (r < 0)
                        return r;
        }
        if (oc->have_proxies) {
                r = watch(oc, &resource_proxies, &(CnKubeInformerOptions) { .field_selector = "metadata.name=cluster" },
                          &oc->proxy);
                if (r < 0)
                        return r;
        }
        oc->started = true;
        schedule(oc);
        return 0;
}

int operand_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                           const ControllerOptions *o, OperandController **ret) {
        _cleanup_(operand_controller_freep) OperandController *oc = NULL;
        int r;

        oc = calloc(1, sizeof(OperandController));
        if (!oc)
                return -ENOMEM;
        oc->options = *o;
        oc->event = sd_event_ref(e);
        oc->client = client;
        oc->recorder = recorder;
        cn_backoff_init(&oc->backoff, RETRY_BASE_USEC, RETRY_CAP_USEC);
        r = cn_write_expectations_new(&oc->expectations);
        if (r < 0)
                return r;
        r = setup_metrics(oc, metrics);
        if (r < 0)
                return r;
        r = sd_event_add_defer(e, &oc->reconcile_source, on_reconcile, oc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(oc->reconcile_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(oc->reconcile_source, "operand-reconcile");
        r = sd_event_add_time_relative(e, &oc->retry_source, CLOCK_MONOTONIC, USEC_PER_SEC, 0, on_retry, oc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(oc->retry_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(oc->retry_source, "operand-retry");
        *ret = TAKE_PTR(oc);
        return 0;
}

OperandController *operand_controller_free(OperandController *oc) {
        if (!oc)
                return NULL;
        for (size_t i = 0; i < N_RESOURCES; i++)
                cn_kube_informer_unref(oc->informers[i]);
        cn_kube_informer_unref(oc->nodes);
        cn_kube_informer_unref(oc->source);
        cn_kube_informer_unref(oc->status);
        cn_kube_informer_unref(oc->infrastructure);
        cn_kube_informer_unref(oc->openshift_config);
        free(oc->openshift_config_name);
        cn_kube_informer_unref(oc->managed_config);
        cn_kube_informer_unref(oc->proxy);
        cn_kube_informer_unref(oc->credentials);
        cn_kube_request_free(oc->discovery);
        sd_event_source_disable_unref(oc->reconcile_source);
        sd_event_source_disable_unref(oc->retry_source);
        sd_event_unref(oc->event);
        cn_write_expectations_free(oc->expectations);
        free(oc->last_error);
        free(oc->last_degraded_message);
        free(oc->cloud_config_from);
        cn_waiting_done(&oc->not_applying);
        cn_waiting_done(&oc->no_images);
        cn_waiting_done(&oc->no_cloud_config);
        cn_waiting_done(&oc->no_credentials);
        free(oc);
        return NULL;
}

int operand_controller_start(OperandController *oc) {
        return cn_kube_request(oc->client, "GET", "/apis/admissionregistration.k8s.io/v1", NULL, NULL, on_discovery,
                               oc, &oc->discovery);
}

bool operand_controller_synced(OperandController *oc) {
        return all_synced(oc);
}

void operand_controller_set_leading(OperandController *oc, bool leading) {
        oc->leading = leading;
        if (leading)
                schedule(oc);
}

void operand_controller_stop(OperandController *oc) {
        oc->stopping = true;
}
