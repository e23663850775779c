/* SPDX-License-Identifier: Apache-2.0 */
/* The reconciling daemon behind `cloudnode-controller run`. See controller-manager.h.
 *
 * Zero writes in steady state: every write is decided by comparing the informer cache with the
 * desired objects (controller-apply.c), and the status object is written only when a condition
 * changes. After a write, the cache still holds the old object until its watch event arrives; an
 * "expectation" per object (the resourceVersion the write was based on) makes the next pass skip
 * that object until the cache has moved on, so one change never causes two writes. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "backoff.h"
#include "cluster-controller.h"
#include "controller-apply.h"
#include "controller-assets.h"
#include "controller-manager.h"
#include "controller-operand.h"
#include "controller-render.h"
#include "controller-status.h"
#include "httpd.h"
#include "json-util.h"
#include "kube-client.h"
#include "kube-config.h"
#include "kube-event.h"
#include "kube-informer.h"
#include "kube-leader.h"
#include "log.h"
#include "machine-controller.h"
#include "metrics.h"

#define STATUS_OBJECT_NAME "cloudnode"
#define LEASE_NAME "cloudnode-controller"
#define EXPECTATION_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define RETRY_BASE_USEC (500 * USEC_PER_MSEC)
#define RETRY_CAP_USEC (60 * USEC_PER_SEC)
#define CONTROL_PLANE_SELECTOR "node-role.kubernetes.io/control-plane"

static const CnKubeResource resource_clusteroperators = {
        .group = "config.openshift.io", .version = "v1", .resource = "clusteroperators",
        .kind = "ClusterOperator", .namespaced = false,
};
static const CnKubeResource resource_infrastructures = {
        .group = "config.openshift.io", .version = "v1", .resource = "infrastructures",
        .kind = "Infrastructure", .namespaced = false,
};
static const CnKubeResource resource_cloudnodeoperators = {
        .group = "operator.cloudnode.io", .version = "v1alpha1", .resource = "cloudnodeoperators",
        .kind = "CloudnodeOperator", .namespaced = false,
};

#define N_RESOURCES 10

struct Manager {
        ControllerOptions options;
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        CnKubeLeader *leader;
        CnHttpd *httpd;
        CnMetrics *metrics;
        CnMetric *m_reconciles, *m_writes, *m_leader, *m_watch_restarts;
        /* per informer of ours (informers[], nodes, source, status): restarts already exported */
        uint64_t watch_restarts_seen[N_RESOURCES + 4];

        CnKubeInformer *informers[N_RESOURCES];
        CnKubeInformer *nodes, *source, *status, *infrastructure;
        MachineController *machines;
        ClusterController *clusters;
        const CnKubeResource *status_resource;
        CnKubeRequest *discovery;
        unsigned discovery_step;

        sd_event_source *reconcile_source, *retry_source;
        CnBackoff backoff;
        bool leading, stopping, started;
        bool have_admission_policies, have_infrastructures;
        bool status_creating;

        /* One pass's writes in flight, and what they found. */
        unsigned inflight;
        bool pass_failed, pass_wrote, dirty;
        char *last_error;

        /* key "resource/ns/name" -> resourceVersion the last write was based on ("" = absent), and
         * when the expectation was set. */
        json_object *expectations;
        char *last_degraded_message;
};

typedef struct Write {
        Manager *manager;
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

static void manager_schedule(Manager *m) {
        if (m->stopping)
                return;
        (void) sd_event_source_set_enabled(m->reconcile_source, SD_EVENT_ONESHOT);
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

static CnKubeInformer *informer_for(Manager *m, const CnKubeResource *res) {
        for (size_t i = 0; cn_controller_resources[i]; i++)
                if (cn_controller_resources[i] == res)
                        return m->informers[i];
        return NULL;
}

/* True while the cache still shows the object as it was before our last write to it. */
static bool expectation_pending(Manager *m, const char *key, json_object *live) {
        json_object *e = json_object_object_get(m->expectations, key);
        const char *rv, *live_rv;
        int64_t since;

        if (!e)
                return false;
        rv = cn_json_string(e, "rv", NULL);
        if (cn_json_get_int64(e, &since, "since", NULL) < 0 ||
            cn_now(CLOCK_MONOTONIC) > (usec_t) since + EXPECTATION_TIMEOUT_USEC) {
                /* The event never came (a dropped watch re-lists anyway): stop waiting. */
                json_object_object_del(m->expectations, key);
                return false;
        }
        live_rv = live ? cn_json_string(live, "metadata", "resourceVersion", NULL) : "";
        if (streq(strempty(rv), strempty(live_rv)))
                return true;
        json_object_object_del(m->expectations, key);
        return false;
}

static int expect(Manager *m, const char *key, const char *based_on) {
        _cleanup_json_ json_object *e = json_object_new_object();
        int r;

        if (!e)
                return -ENOMEM;
        r = cn_json_set_string(e, based_on, "rv", NULL);
        if (r >= 0)
                r = cn_json_set(e, json_object_new_int64((int64_t) cn_now(CLOCK_MONOTONIC)), "since", NULL);
        if (r < 0)
                return r;
        return json_object_object_add(m->expectations, key, TAKE_PTR(e)) < 0 ? -ENOMEM : 0;
}

/* Events go to the status object, not to the applied objects: that is where an administrator
 * looks for the controller's story, and names like "cloudnode:node-initializer" (ClusterRoles)
 * are not valid in Event names derived from them. */
static void record_event(Manager *m, bool warning, const char *reason, const char *message) {
        CnKubeObjectRef ref = {
                .name = STATUS_OBJECT_NAME,
        };

        if (!m->recorder || !m->status_resource)
                return;
        ref.kind = m->status_resource->kind;
        ref.api_version = streq(m->status_resource->group, "config.openshift.io") ? "config.openshift.io/v1" :
                                                                                     "operator.cloudnode.io/v1alpha1";
        (void) cn_kube_event_record(m->recorder, &ref, warning ? CN_KUBE_EVENT_WARNING : CN_KUBE_EVENT_NORMAL,
                                    reason, NULL, "%s", message);
}

static void pass_finished(Manager *m);
static int issue_write(Manager *m, Write *w);

static void write_done(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        _cleanup_(write_freep) Write *w = userdata;
        Manager *m = w->manager;
        const char *kind = w->resource->kind;
        const char *name = cn_json_string(w->desired, "metadata", "name", NULL);
        const char *verb = cn_apply_action_to_string(w->action);

        (void) cn_metric_inc(m->m_writes, CN_LABELS(verb, kind, result->error < 0 ? "error" : "ok"));

        if (w->action == CN_APPLY_RECREATE && result->error >= 0) {
                /* Deleted; now create it again with the new immutable fields. */
                log_info("Deleted %s %s to change an immutable field, creating it again", kind, name);
                w->action = CN_APPLY_CREATE;
                free(w->based_on);
                w->based_on = strdup("");
                if (issue_write(m, w) >= 0) {
                        TAKE_PTR(w);
                        return;
                }
                m->pass_failed = true;
        } else if (result->error < 0) {
                if (result->error == -CN_KUBE_ECONFLICT || result->error == -CN_KUBE_EALREADYEXISTS)
                        /* Someone wrote in between: the watch brings the new state, then we decide again. */
                        log_debug("%s %s %s raced with another writer: %s", verb, kind, name, strna(result->message));
                else
                        log_warning_errno(result->error, "Failed to %s %s %s: %s", verb, kind, name,
                                          strna(result->message));
                free(m->last_error);
                if (asprintf(&m->last_error, "failed to %s %s %s: %s", verb, kind, name,
                             strna(result->message ?: strerror(-result->error))) < 0)
                        m->last_error = NULL;
                record_event(m, true, "SyncingFailed", m->last_error);
                m->pass_failed = true;
        } else {
                const char *done = w->action == CN_APPLY_CREATE ? "Created" : "Updated";
                _cleanup_free_ char *msg = NULL;

                log_info("%s %s %s", done, kind, name);
                (void) expect(m, w->key, w->based_on);
                if (asprintf(&msg, "%s %s %s", done, kind, name) >= 0)
                        record_event(m, false, done, msg);
                m->pass_wrote = true;
        }
        assert(m->inflight > 0);
        if (--m->inflight == 0)
                pass_finished(m);
}

static int issue_write(Manager *m, Write *w) {
        const char *ns = w->resource->namespaced ? cn_json_string(w->desired, "metadata", "namespace", NULL) : NULL;
        const char *name = cn_json_string(w->desired, "metadata", "name", NULL);

        switch (w->action) {
        case CN_APPLY_CREATE:
                return cn_kube_create(m->client, w->resource, ns, w->desired, write_done, w, NULL);
        case CN_APPLY_PATCH: {
                _cleanup_json_ json_object *patch = NULL;
                json_object *live = cn_kube_informer_lookup(informer_for(m, w->resource), ns, name);
                int r;

                r = cn_apply_patch(w->desired, live, &patch);
                if (r < 0)
                        return r;
                return cn_kube_patch(m->client, w->resource, ns, name, NULL, CN_KUBE_PATCH_MERGE, patch, write_done,
                                     w, NULL);
        }
        case CN_APPLY_RECREATE: {
                CnKubeDeleteOptions o = {
                        .precondition_uid = w->uid,
                        .propagation_policy = "Background",
                };
                return cn_kube_delete(m->client, w->resource, ns, name, &o, write_done, w, NULL);
        }
        default:
                return -EINVAL;
        }
}

static int status_write_conditions(Manager *m, json_object *live, json_object *conditions);

static void status_update(Manager *m, bool available, bool progressing, bool degraded, const char *message) {
        CnCondition conds[] = {
                { "Available", available, available ? CN_REASON_AS_EXPECTED : CN_REASON_SYNCING_FAILED,
                  available ? "all resources are in sync" : message },
                { "Progressing", progressing,
                  progressing ? CN_REASON_SYNCING_RESOURCES : CN_REASON_AS_EXPECTED,
                  progressing ? "applying resources" : "all resources are in sync" },
                { "Degraded", degraded, degraded ? CN_REASON_SYNCING_FAILED : CN_REASON_AS_EXPECTED,
                  degraded ? message : "" },
        };
        _cleanup_json_ json_object *conditions = NULL;
        _cleanup_free_ char *rollout = NULL;
        bool rollout_available, rollout_progressing;
        json_object *live;
        bool changed;
        int r;

        if (!m->status || !cn_kube_informer_has_synced(m->status))
                return;
        /* Our own writes done, the conditions follow the operand Deployment's rollout (its
         * informer's events bring us back here), not just our writes. */
        if (available && !progressing &&
            cn_status_rollout(cn_kube_informer_lookup(informer_for(m, &cn_controller_resource_deployments),
                                                      m->options.namespace, CN_OPERAND_DEPLOYMENT),
                              &rollout_available, &rollout_progressing, &rollout) >= 0) {
                if (!rollout_available)
                        conds[0] = (CnCondition) { "Available", false, CN_REASON_DEPLOYMENT_UNAVAILABLE, rollout };
                if (rollout_progressing)
                        conds[1] = (CnCondition) { "Progressing", true, CN_REASON_DEPLOYMENT_ROLLING_OUT, rollout };
        }
        live = cn_kube_informer_lookup(m->status, NULL, STATUS_OBJECT_NAME);
        r = cn_status_conditions(conds, ELEMENTSOF(conds), live ? cn_json_get(live, "status", "conditions", NULL) : NULL,
                                 cn_now(CLOCK_REALTIME), &conditions, &changed);
        if (r < 0) {
                log_warning_errno(r, "Failed to build status conditions, ignoring: %m");
                return;
        }
        if (live && !changed)
                return;
        r = status_write_conditions(m, live, conditions);
        if (r < 0)
                log_warning_errno(r, "Failed to write status, ignoring: %m");
}

static void status_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        Manager *m = userdata;

        m->status_creating = false;
        if (result->error == -CN_KUBE_EALREADYEXISTS)
                /* Created by an earlier instance; the informer brings it, then we patch. */
                return;
        if (result->error < 0) {
                log_warning_errno(result->error, "Failed to update %s/%s status: %s", m->status_resource->resource,
                                  STATUS_OBJECT_NAME, strna(result->message));
                /* The status informer's next event (or the retry) brings us back here. */
                manager_schedule(m);
        }
}

static int status_write_conditions(Manager *m, json_object *live, json_object *conditions) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        if (!live) {
                /* Create the object; its status follows once the informer has seen it. */
                if (m->status_creating)
                        return 0;
                m->status_creating = true;
                const char *api_version = streq(m->status_resource->group, "config.openshift.io") ?
                                                  "config.openshift.io/v1" :
                                                  "operator.cloudnode.io/v1alpha1";

                r = cn_json_set_string(o, api_version, "apiVersion", NULL);
                if (r >= 0)
                        r = cn_json_set_string(o, m->status_resource->kind, "kind", NULL);
                if (r >= 0)
                        r = cn_json_set_string(o, STATUS_OBJECT_NAME, "metadata", "name", NULL);
                if (r >= 0)
                        r = cn_json_set(o, json_object_new_object(), "spec", NULL);
                if (r < 0)
                        return r;
                return cn_kube_create(m->client, m->status_resource, NULL, o, status_written, m, NULL);
        }
        r = cn_json_set(o, json_object_get(conditions), "status", "conditions", NULL);
        if (r < 0)
                return r;
        return cn_kube_patch(m->client, m->status_resource, NULL, STATUS_OBJECT_NAME, "status", CN_KUBE_PATCH_MERGE,
                             o, status_written, m, NULL);
}

static void pass_finished(Manager *m) {
        if (m->pass_failed) {
                usec_t delay = cn_backoff_next(&m->backoff, 0);

                (void) cn_metric_inc(m->m_reconciles, CN_LABELS("error"));
                status_update(m, false, true, true, m->last_error ?: "applying resources failed");
                (void) sd_event_source_set_time_relative(m->retry_source, delay);
                (void) sd_event_source_set_enabled(m->retry_source, SD_EVENT_ONESHOT);
        } else {
                (void) cn_metric_inc(m->m_reconciles, CN_LABELS(m->pass_wrote ? "changed" : "unchanged"));
                cn_backoff_reset(&m->backoff);
                if (m->pass_wrote)
                        status_update(m, true, true, false, NULL);
        }
        m->pass_failed = m->pass_wrote = false;
        if (m->dirty) {
                m->dirty = false;
                manager_schedule(m);
        }
}

static bool all_synced(Manager *m) {
        if (!m->started)
                return false;
        for (size_t i = 0; i < N_RESOURCES; i++)
                if (m->informers[i] && !cn_kube_informer_has_synced(m->informers[i]))
                        return false;
        return cn_kube_informer_has_synced(m->nodes) && cn_kube_informer_has_synced(m->source) &&
               cn_kube_informer_has_synced(m->status) &&
               (!m->infrastructure || cn_kube_informer_has_synced(m->infrastructure));
}

static int set_last_error(Manager *m, const char *fmt, ...) _printf_(2, 3);
static int set_last_error(Manager *m, const char *fmt, ...) {
        va_list ap;
        int r;

        free(m->last_error);
        va_start(ap, fmt);
        r = vasprintf(&m->last_error, fmt, ap);
        va_end(ap);
        if (r < 0)
                m->last_error = NULL;
        return -EINVAL;
}

/* The cloud provider of the operand: --cloud-provider, else the CloudnodeOperator's spec, else
 * OpenShift's Infrastructure platform. Nothing is applied without one: the initializer would
 * exit at once. *ret_platform owns what *ret may point into. */
static int operand_cloud_provider(Manager *m, const char **ret, char **ret_platform) {
        json_object *op = m->status_resource == &resource_cloudnodeoperators ?
                                  cn_kube_informer_lookup(m->status, NULL, STATUS_OBJECT_NAME) :
                                  NULL;
        json_object *infra = m->infrastructure ? cn_kube_informer_lookup(m->infrastructure, NULL, "cluster") : NULL;
        _cleanup_free_ char *platform = NULL;
        const char *source = NULL;
        int r;

        if (infra)
                (void) cn_render_infrastructure_platform(infra, &platform, NULL);
        r = cn_operand_cloud_provider(m->options.cloud_provider, op, platform, ret, &source);
        if (r == -ENOENT)
                return set_last_error(m, "no cloud provider: set spec.cloudProvider of %s %s (kubectl patch "
                                      "cloudnodeoperator cloudnode --type=merge -p '{\"spec\":{\"cloudProvider\":"
                                      "\"hetzner\"}}'), or pass --cloud-provider to cloudnode-controller",
                                      m->status_resource->kind, STATUS_OBJECT_NAME);
        if (r < 0)
                return set_last_error(m, "cloud provider '%s' (from the %s) is not one this build has "
                                      "(hetzner, openstack)", *ret, source);
        *ret_platform = TAKE_PTR(platform);
        return 0;
}

static int build_config(Manager *m, CnOperandConfig *c, json_object **ret_images, char **ret_platform) {
        CnKubeInformer *cms = informer_for(m, &cn_controller_resource_configmaps);
        json_object *images_cm = cn_kube_informer_lookup(cms, m->options.namespace, m->options.images_configmap);
        json_object *source = cn_kube_informer_lookup(m->source, m->options.cloud_config_namespace,
                                                      m->options.cloud_config_name);
        const char *images_text = cn_json_string(images_cm, "data", "images.json", NULL);
        _cleanup_json_ json_object *images = NULL;
        int r;

        *c = (CnOperandConfig) {
                .namespace = m->options.namespace,
                .http_proxy = m->options.http_proxy,
                .https_proxy = m->options.https_proxy,
                .no_proxy = m->options.no_proxy,
                .single_node = cn_kube_informer_size(m->nodes) == 1,
                .cloud_config = cn_operand_source_cloud_config(source, m->options.cloud_config_key),
        };
        r = operand_cloud_provider(m, &c->cloud_provider, ret_platform);
        if (r < 0)
                return r;
        if (images_text) {
                _cleanup_free_ char *err = NULL;

                r = cn_operand_parse_images(images_text, &images, &err);
                if (r < 0) {
                        free(m->last_error);
                        if (asprintf(&m->last_error, "ConfigMap %s/%s: %s", m->options.namespace,
                                     m->options.images_configmap, strna(err)) < 0)
                                m->last_error = NULL;
                        return r;
                }
        }
        c->images = images;
        *ret_images = TAKE_PTR(images);
        return 0;
}

static int reconcile(Manager *m) {
        _cleanup_json_ json_object *desired = NULL, *images = NULL;
        _cleanup_free_ char *platform = NULL;
        CnOperandConfig config;
        unsigned waiting = 0;
        int r;

        if (!m->leading || m->stopping || !all_synced(m))
                return 0;
        if (m->inflight > 0) {
                m->dirty = true;
                return 0;
        }
        r = build_config(m, &config, &images, &platform);
        if (r < 0) {
                log_error("Not applying: %s", strna(m->last_error));
                (void) cn_metric_inc(m->m_reconciles, CN_LABELS("error"));
                status_update(m, false, false, true, m->last_error);
                return 0;
        }
        r = cn_operand_desired(&config, &desired);
        if (r < 0)
                return log_error_errno(r, "Failed to compute the desired objects: %m");

        /* Count ourselves as one in-flight write so that writes finishing synchronously (they do
         * not, but a failed queueing does) cannot finish the pass before every object was seen. */
        m->inflight = 1;
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
                        m->pass_failed = true;
                        break;
                }
                if (!informer_for(m, res))
                        /* The cluster does not serve this API (ValidatingAdmissionPolicy before
                         * Kubernetes 1.30): nothing to apply, said once at startup. */
                        continue;
                live = cn_kube_informer_lookup(informer_for(m, res), ns, name);
                if (expectation_pending(m, key, live)) {
                        waiting++;
                        continue;
                }
                action = cn_apply_decide(d, live);
                if (action == CN_APPLY_NONE)
                        continue;
                log_debug("%s %s %s", cn_apply_action_to_string(action), res->kind, name);

                w = calloc(1, sizeof(Write));
                if (!w) {
                        m->pass_failed = true;
                        break;
                }
                *w = (Write) {
                        .manager = m,
                        .resource = res,
                        .action = action,
                        .desired = json_object_get(d),
                        .key = TAKE_PTR(key),
                        .based_on = strdup(live ? strempty(cn_json_string(live, "metadata", "resourceVersion", NULL)) : ""),
                        .uid = live ? strdup(strempty(cn_json_string(live, "metadata", "uid", NULL))) : NULL,
                };
                if (!w->based_on) {
                        m->pass_failed = true;
                        break;
                }
                r = issue_write(m, w);
                if (r < 0) {
                        log_warning_errno(r, "Failed to queue %s of %s %s: %m", cn_apply_action_to_string(action),
                                          res->kind, name);
                        m->pass_failed = true;
                        continue;
                }
                TAKE_PTR(w);
                m->inflight++;
        }
        if (waiting > 0) {
                /* Come back when the expectations time out, in case their events never arrive. */
                (void) sd_event_source_set_time_relative(m->retry_source, EXPECTATION_TIMEOUT_USEC + USEC_PER_SEC);
                (void) sd_event_source_set_enabled(m->retry_source, SD_EVENT_ONESHOT);
        }
        if (--m->inflight > 0)
                return 0;
        if (m->pass_failed || m->pass_wrote || waiting > 0) {
                pass_finished(m);
                return 0;
        }
        /* Nothing to write: everything is as desired. */
        (void) cn_metric_inc(m->m_reconciles, CN_LABELS("unchanged"));
        cn_backoff_reset(&m->backoff);
        free(m->last_error);
        m->last_error = NULL;
        status_update(m, true, false, false, NULL);
        return 0;
}

static int on_reconcile(sd_event_source *s, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) reconcile(m);
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) reconcile(m);
        return 0;
}

static void on_added(CnKubeInformer *i, json_object *object, void *userdata) {
        manager_schedule(userdata);
}

static void on_updated(CnKubeInformer *i, json_object *old, json_object *object, void *userdata) {
        manager_schedule(userdata);
}

static void on_synced(CnKubeInformer *i, void *userdata) {
        manager_schedule(userdata);
}

static const CnKubeInformerHandlers handlers = {
        .added = on_added,
        .updated = on_updated,
        .deleted = on_added,
        .synced = on_synced,
};

static int watch(Manager *m, const CnKubeResource *r, const CnKubeInformerOptions *o, CnKubeInformer **ret) {
        _cleanup_kube_informer_ CnKubeInformer *i = NULL;
        int k;

        k = cn_kube_informer_new(m->client, r, o, &i);
        if (k < 0)
                return log_error_errno(k, "Failed to create the %s informer: %m", r->resource);
        k = cn_kube_informer_add_handlers(i, &handlers, m, NULL);
        if (k < 0)
                return k;
        k = cn_kube_informer_start(i);
        if (k < 0)
                return log_error_errno(k, "Failed to start the %s informer: %m", r->resource);
        *ret = TAKE_PTR(i);
        return 0;
}

static void on_started_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        log_info("Became the leader");
        m->leading = true;
        if (m->machines)
                machine_controller_set_leading(m->machines, true);
        if (m->clusters)
                cluster_controller_set_leading(m->clusters, true);
        (void) cn_metric_set(m->m_leader, NULL, 1);
        manager_schedule(m);
}

static void on_stopped_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        m->leading = false;
        if (m->machines)
                machine_controller_set_leading(m->machines, false);
        if (m->clusters)
                cluster_controller_set_leading(m->clusters, false);
        (void) cn_metric_set(m->m_leader, NULL, 0);
        if (m->stopping)
                return;
        /* As client-go users do: exit and let the Deployment restart us as a fresh candidate, so no
         * half-finished pass of the old term continues. */
        log_error("Lost leadership, exiting");
        (void) sd_event_exit(m->event, EXIT_FAILURE);
}

static const CnKubeLeaderCallbacks leader_callbacks = {
        .started_leading = on_started_leading,
        .stopped_leading = on_stopped_leading,
};

static void on_released(CnKubeLeader *l, int error, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) sd_event_exit(m->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (m->stopping)
                return 0;
        log_info("Received %s, shutting down", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        m->stopping = true;
        (void) sd_notify(false, "STOPPING=1");
        if (m->leader && cn_kube_leader_release(m->leader, on_released, m) >= 0)
                return 0;
        return sd_event_exit(m->event, 0);
}

static int healthz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (m->leader && cn_kube_leader_check(m->leader, 20 * USEC_PER_SEC) < 0) {
                (void) cn_buf_add_str(body, "leader election: renewal overdue\n");
                return 503;
        }
        (void) cn_buf_add_str(body, "ok\n");
        return 200;
}

static int readyz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (!all_synced(m) || (m->machines && !machine_controller_synced(m->machines)) ||
            (m->clusters && !cluster_controller_synced(m->clusters))) {
                (void) cn_buf_add_str(body, "informers not synced\n");
                return 503;
        }
        (void) cn_buf_add_str(body, "ok\n");
        return 200;
}

static int setup_metrics(Manager *m) {
        int r;

        r = cn_metrics_new(&m->metrics);
        if (r < 0)
                return r;
        r = cn_metrics_counter(m->metrics, "cloudnode_controller_reconciles",
                               "Reconcile passes by result (unchanged: no write was needed).", CN_LABELS("result"),
                               &m->m_reconciles);
        if (r < 0)
                return r;
        r = cn_metrics_counter(m->metrics, "cloudnode_controller_writes",
                               "Writes to the API server by action, kind and result.",
                               CN_LABELS("action", "kind", "result"), &m->m_writes);
        if (r < 0)
                return r;
        r = cn_metrics_counter(m->metrics, "cloudnode_controller_watch_restarts",
                               "Watches of the API server that ended and were restarted, by resource.",
                               CN_LABELS("resource"), &m->m_watch_restarts);
        if (r < 0)
                return r;
        return cn_metrics_gauge(m->metrics, "cloudnode_controller_leader", "1 while this instance is the leader.",
                                NULL, &m->m_leader);
}

/* Informers count their restarts themselves; a scrape exports the growth since the last one. */
static int serve_metrics(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        CnKubeInformer *all[N_RESOURCES + 4];
        int r;

        _Static_assert(ELEMENTSOF(all) == ELEMENTSOF(m->watch_restarts_seen), "one seen count per informer");
        memcpy(all, m->informers, sizeof(m->informers));
        all[N_RESOURCES] = m->nodes;
        all[N_RESOURCES + 1] = m->source;
        all[N_RESOURCES + 2] = m->status;
        all[N_RESOURCES + 3] = m->infrastructure;
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                if (all[i])
                        (void) cn_metric_add_total(m->m_watch_restarts,
                                                   CN_LABELS(cn_kube_informer_get_resource(all[i])->resource),
                                                   cn_kube_informer_get_watch_restarts(all[i]),
                                                   &m->watch_restarts_seen[i]);
        r = cn_metrics_format(m->metrics, body);
        if (r < 0)
                return r;
        *content_type = CN_METRICS_CONTENT_TYPE;
        return 200;
}

static int start_informers(Manager *m);

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
        Manager *m = ASSERT_PTR(userdata);
        bool openshift_step = m->status_resource == NULL && m->discovery_step == 1;
        int r;

        m->discovery = cn_kube_request_free(m->discovery);
        if (result->error < 0 && result->error != -CN_KUBE_ENOTFOUND) {
                log_error_errno(result->error, "API discovery failed: %s", strna(result->message));
                (void) sd_event_exit(m->event, EXIT_FAILURE);
                return;
        }
        if (!openshift_step) {
                m->have_admission_policies = result->error >= 0 &&
                                             discovery_lists(result->object, "validatingadmissionpolicies");
                if (!m->have_admission_policies)
                        log_warning("The cluster does not serve admissionregistration.k8s.io/v1 "
                                    "ValidatingAdmissionPolicy; the node-mode identity is limited by RBAC only");
                m->discovery_step = 1;
                r = cn_kube_request(m->client, "GET", "/apis/config.openshift.io/v1", NULL, NULL, on_discovery, m,
                                    &m->discovery);
                if (r < 0)
                        (void) sd_event_exit(m->event, EXIT_FAILURE);
                return;
        }
        m->have_infrastructures = result->error >= 0 && discovery_lists(result->object, "infrastructures");
        m->status_resource = result->error >= 0 && discovery_lists(result->object, "clusteroperators") ?
                                     &resource_clusteroperators :
                                     &resource_cloudnodeoperators;
        log_info("Reporting status on %s/%s", m->status_resource->resource, STATUS_OBJECT_NAME);
        r = start_informers(m);
        if (r < 0)
                (void) sd_event_exit(m->event, EXIT_FAILURE);
}

static int start_informers(Manager *m) {
        CnKubeInformerOptions in_ns = { .namespace = m->options.namespace };
        _cleanup_free_ char *source_selector = NULL;
        int r;

        for (size_t i = 0; i < N_RESOURCES; i++) {
                const CnKubeResource *res = cn_controller_resources[i];

                if (!m->have_admission_policies &&
                    (res == &cn_controller_resource_validatingadmissionpolicies ||
                     res == &cn_controller_resource_validatingadmissionpolicybindings))
                        continue;
                r = watch(m, res, res->namespaced ? &in_ns : &(CnKubeInformerOptions) {}, &m->informers[i]);
                if (r < 0)
                        return r;
        }
        r = watch(m, &cn_kube_resource_nodes, &(CnKubeInformerOptions) { .label_selector = CONTROL_PLANE_SELECTOR },
                  &m->nodes);
        if (r < 0)
                return r;
        if (asprintf(&source_selector, "metadata.name=%s", m->options.cloud_config_name) < 0)
                return -ENOMEM;
        r = watch(m, &cn_controller_resource_configmaps,
                  &(CnKubeInformerOptions) { .namespace = m->options.cloud_config_namespace,
                                             .field_selector = source_selector },
                  &m->source);
        if (r < 0)
                return r;
        r = watch(m, m->status_resource, &(CnKubeInformerOptions) { .field_selector = "metadata.name=" STATUS_OBJECT_NAME },
                  &m->status);
        if (r < 0)
                return r;
        if (m->have_infrastructures) {
                r = watch(m, &resource_infrastructures, &(CnKubeInformerOptions) { .field_selector = "metadata.name=cluster" },
                          &m->infrastructure);
                if (r < 0)
                        return r;
        }
        if (m->options.machine_provider) {
                r = machine_controller_new(m->event, m->client, m->recorder, m->metrics, m->options.machine_provider,
                                           m->options.machine_cloud_config, &m->machines);
                if (r < 0)
                        return r;
                r = machine_controller_start(m->machines);
                if (r < 0)
                        return r;
                r = cluster_controller_new(m->event, m->client, m->recorder, m->machines, &m->clusters);
                if (r < 0)
                        return r;
                r = cluster_controller_start(m->clusters);
                if (r < 0)
                        return r;
        }
        m->started = true;

        if (m->options.leader_elect) {
                CnKubeLeaderOptions lo = {
                        .namespace = m->options.namespace,
                        .name = LEASE_NAME,
                        .lease_duration_usec = m->options.lease_duration,
                        .renew_deadline_usec = m->options.renew_deadline,
                        .retry_period_usec = m->options.retry_period,
                };

                r = cn_kube_leader_new(m->client, &lo, &leader_callbacks, m, &m->leader);
                if (r < 0)
                        return log_error_errno(r, "Invalid leader election settings: %m");
                r = cn_kube_leader_start(m->leader);
                if (r < 0)
                        return r;
        } else {
                m->leading = true;
                if (m->machines)
                        machine_controller_set_leading(m->machines, true);
                if (m->clusters)
                        cluster_controller_set_leading(m->clusters, true);
                (void) cn_metric_set(m->m_leader, NULL, 1);
        }
        return 0;
}

int manager_new(const ControllerOptions *o, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_kube_config_ CnKubeConfig *config = NULL;
        _cleanup_free_ char *err = NULL;
        CnKubeClientOptions co = {
                .component = "controller",
                .qps = o->kube_api_qps,
                .burst = o->kube_api_burst,
        };
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->options = *o;
        cn_backoff_init(&m->backoff, RETRY_BASE_USEC, RETRY_CAP_USEC);
        m->expectations = json_object_new_object();
        if (!m->expectations)
                return -ENOMEM;

        r = cn_kube_config_load_default(o->kubeconfig, NULL, &config, &err);
        if (r < 0)
                return log_error_errno(r, "Failed to load the kubeconfig: %s", strna(err));
        r = sd_event_default(&m->event);
        if (r < 0)
                return r;
        r = cn_kube_client_new(m->event, config, &co, &m->client);
        if (r < 0)
                return log_error_errno(r, "Failed to create the Kubernetes client: %m");
        TAKE_PTR(config);
        r = cn_kube_event_recorder_new(m->client, &(CnKubeEventRecorderOptions) { .component = "cloudnode-controller" },
                                       &m->recorder);
        if (r < 0)
                return r;
        r = setup_metrics(m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up metrics: %m");
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < N_RESOURCES; i++)
                cn_kube_informer_unref(m->informers[i]);
        cn_kube_informer_unref(m->nodes);
        cn_kube_informer_unref(m->source);
        cn_kube_informer_unref(m->status);
        cn_kube_informer_unref(m->infrastructure);
        cluster_controller_free(m->clusters); /* borrows from the machine controller */
        machine_controller_free(m->machines);
        cn_kube_request_free(m->discovery);
        cn_kube_leader_free(m->leader);
        cn_kube_event_recorder_free(m->recorder);
        cn_kube_client_free(m->client);
        cn_httpd_free(m->httpd);
        cn_metrics_free(m->metrics);
        sd_event_source_unref(m->reconcile_source);
        sd_event_source_unref(m->retry_source);
        sd_event_unref(m->event);
        json_object_put(m->expectations);
        free(m->last_error);
        free(m->last_degraded_message);
        free(m);
        return NULL;
}

int manager_start(Manager *m) {
        int r;

        r = sd_event_add_defer(m->event, &m->reconcile_source, on_reconcile, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->reconcile_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->reconcile_source, "reconcile");
        r = sd_event_add_time_relative(m->event, &m->retry_source, CLOCK_MONOTONIC, USEC_PER_SEC, 0, on_retry, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->retry_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->retry_source, "reconcile-retry");

        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
        if (r < 0)
                return r;

        r = cn_kube_request(m->client, "GET", "/apis/admissionregistration.k8s.io/v1", NULL, NULL, on_discovery,
                            m, &m->discovery);
        if (r < 0)
                return r;

        if (m->options.port >= 0) {
                r = cn_httpd_new(m->event, m->options.bind_address, (uint16_t) m->options.port, &m->httpd);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on %s:%d: %m", m->options.bind_address,
                                               m->options.port);
                r = cn_httpd_add_handler(m->httpd, "/healthz", healthz, m);
                if (r >= 0)
                        r = cn_httpd_add_handler(m->httpd, "/readyz", readyz, m);
                if (r >= 0)
                        r = cn_httpd_add_handler(m->httpd, "/metrics", serve_metrics, m);
                if (r < 0)
                        return r;
                log_info("Serving /healthz /readyz /metrics on %s:%u", m->options.bind_address,
                         cn_httpd_get_port(m->httpd));
        }

        (void) sd_notify(false, "READY=1");
        return 0;
}

int manager_run(Manager *m) {
        return sd_event_loop(m->event);
}
