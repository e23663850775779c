/* SPDX-License-Identifier: Apache-2.0 */
/* CloudnodeCluster reconciler. See cluster-controller.h and cluster-reconcile.h.
 *
 * A cluster asks the cloud for its failure domains once per generation and controller run (they
 * change rarely; a restart or a spec change asks again); every pass after that only compares the
 * status it would write with the live one, so an idle cluster costs no API call. Retryable cloud
 * errors come back after the cluster's own backoff (one timer, armed for the cluster due first):
 * another cluster's failures do not delay its recovery, and the passes other events bring in the
 * meantime leave the cloud alone (a spec change does not wait); terminal ones wait for a spec
 * change.
 *
 * A cluster with spec.controlPlaneLoadBalancer gets its load balancer first, looked up (or created)
 * once per controller run by the CloudnodeCluster's UID, and its address as
 * spec.controlPlaneEndpoint when the user gave none; only then is it provisioned. Its deletion
 * deletes the load balancer before the finalizer goes.
 *
 * A provisioned cluster's cloud config for its workload cluster is published as the Secret of
 * cluster-cloud-config.h (condition CloudConfigPublished): written when missing or different, the
 * text last confirmed kept so that an idle cluster costs no API call; a Secret of that name not
 * owned by the CloudnodeCluster is left alone, and without the namespace's RoleBinding to
 * cloudnode:controller:capi-cloud-config (403) the condition says which role to bind, tried again
 * every minute (PUBLISH_RETRY_USEC), as is a name taken by someone else's Secret. */
#include <errno.h>

#include "backoff.h"
#include "cluster-cloud-config.h"
#include "cluster-controller.h"
#include "cluster-reconcile.h"
#include "controller-waiting.h"
#include "json-util.h"
#include "kube-informer.h"
#include "log.h"
#include "machine-reconcile.h"
#include "provider.h"
#include "string-util.h"
#include "time-util.h"

#define RETRY_BASE_USEC (1 * USEC_PER_SEC)
#define RETRY_CAP_USEC (60 * USEC_PER_SEC)
#define PUBLISH_RETRY_USEC (60 * USEC_PER_SEC)
/* The UID the control-plane load balancer is labelled with, kept where clusterctl move carries it. */
#define LB_LABEL_UID_ANNOTATION "cloudnode.io/load-balancer-label-uid"

static const CnKubeResource resource_cloudnodeclusters = {
        .group = "infrastructure.cluster.x-k8s.io", .version = "v1beta2", .resource = "cloudnodeclusters",
        .kind = "CloudnodeCluster", .namespaced = true,
};

typedef struct ClusterState ClusterState;

struct ClusterController {
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        MachineController *mc;
        CnKubeInformer *infra_clusters, *clusters, *infra_machines;
        /* the Cluster and CloudnodeMachine informers are shared and outlive us */
        uint64_t infra_clusters_handlers, clusters_handlers, infra_machines_handlers;
        sd_event_source *reconcile_source, *retry_source, *publish_source;
        bool leading;
        ClusterState *states;
};

struct ClusterState {
        ClusterController *cc;
        ClusterState *next;
        char *namespace, *name;
        CnProviderCall *call;
        json_object *failure_domains; /* the cloud's answer for `generation` */
        int64_t generation;
        int64_t failed_generation;    /* a terminal failure for this generation: wait for a change */
        json_object *load_balancer;   /* {"id", "host", "port"}, found or created in this run */
        bool cloud_unavailable;       /* the last Ready we wrote said CloudUnavailable */
        char **members;               /* the control-plane instances it was ensured for */
        CnKubeRequest *secret_request;/* the cloud config Secret being read or written */
        json_object *published;       /* the cloud config Secret as last confirmed on the server */
        usec_t publish_after;         /* not before (CLOCK_MONOTONIC) after a refusal */
        /* The CloudConfigPublished condition last decided, written again by every pass until the
         * live object has it (a conditional write that met a newer resourceVersion is lost). */
        bool published_ok;
        char *published_reason, *published_message;
        CnBackoff backoff;            /* of its retryable failures since its last success */
        usec_t retry_at;              /* CLOCK_MONOTONIC when its retry is due; 0: none */
        bool cloud_backoff;           /* retry_at is after a cloud failure of backoff_generation */
        int64_t backoff_generation;
        bool seen;
};

static void schedule(ClusterController *cc) {
        (void) sd_event_source_set_enabled(cc->reconcile_source, SD_EVENT_ONESHOT);
}

static ClusterState *state_free(ClusterState *s) {
        if (!s)
                return NULL;
        cn_provider_call_free(s->call);
        cn_kube_request_free(s->secret_request);
        json_object_put(s->published);
        json_object_put(s->failure_domains);
        json_object_put(s->load_balancer);
        strv_free(s->members);
        free(s->published_reason);
        free(s->published_message);
        free(s->namespace);
        free(s->name);
        free(s);
        return NULL;
}

static ClusterState *state_get(ClusterController *cc, const char *ns, const char *name) {
        ClusterState *s;

        for (s = cc->states; s; s = s->next)
                if (streq(s->namespace, ns) && streq(s->name, name))
                        return s;
        s = calloc(1, sizeof(ClusterState));
        if (!s)
                return NULL;
        s->cc = cc;
        s->generation = s->failed_generation = -1;
        cn_backoff_init(&s->backoff, RETRY_BASE_USEC, RETRY_CAP_USEC);
        s->namespace = strdup(ns);
        s->name = strdup(name);
        if (!s->namespace || !s->name)
                return state_free(s);
        s->next = cc->states;
        cc->states = s;
        return s;
}

static int64_t generation_of(json_object *cnc) {
        int64_t g = 0;

        (void) cn_json_get_int64(cnc, &g, "metadata", "generation", NULL);
        return g;
}

/* The retry timer armed for the cluster whose retry is due first (off when none waits). */
static void arm_retry(ClusterController *cc) {
        usec_t at = USEC_INFINITY;

        for (ClusterState *s = cc->states; s; s = s->next)
                if (s->retry_at > 0)
                        at = MIN(at, s->retry_at);
        if (at == USEC_INFINITY) {
                (void) sd_event_source_set_enabled(cc->retry_source, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(cc->retry_source, at);
        (void) sd_event_source_set_enabled(cc->retry_source, SD_EVENT_ONESHOT);
}

/* When s's next backoff delay (at least min_delay, a server's Retry-After) ends. */
static usec_t next_retry(ClusterState *s, usec_t min_delay) {
        return MAX(cn_usec_add(cn_now(CLOCK_MONOTONIC), cn_backoff_next(&s->backoff, min_delay)), 1U);
}

/* Another pass after s's next backoff delay; a retry already due sooner stays. */
static void retry_later(ClusterState *s, usec_t min_delay) {
        usec_t at = next_retry(s, min_delay);

        if (s->retry_at == 0 || at < s->retry_at)
                s->retry_at = at;
        arm_retry(s->cc);
}

/* A retryable cloud failure of s: asked again after its backoff (the cloud's Retry-After
 * included), not by the passes before. */
static void cloud_retry_later(ClusterState *s, json_object *cnc, usec_t min_delay) {
        s->retry_at = next_retry(s, min_delay);
        s->cloud_backoff = true;
        s->backoff_generation = generation_of(cnc);
        arm_retry(s->cc);
}

/* Whether the cloud failed s for this generation and s's backoff has not run out yet. */
static bool cloud_backing_off(ClusterState *s, json_object *cnc) {
        return s->cloud_backoff && s->retry_at > cn_now(CLOCK_MONOTONIC) &&
               s->backoff_generation == generation_of(cnc);
}

/* A cloud call of s that succeeded: its backoff starts again. */
static void cloud_succeeded(ClusterState *s) {
        cn_backoff_reset(&s->backoff);
        s->cloud_backoff = false;
}

static void on_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        if (result->error < 0)
                log_debug_errno(result->error, "CloudnodeCluster write failed, the next event retries: %s",
                                strna(result->message));
}

static int write_status(ClusterState *s, json_object *cnc, json_object *failure_domains, bool paused,
                        const char *reason, const char *message) {
        _cleanup_json_ json_object *patch = NULL;
        char now[64];
        int r;

        s->cloud_unavailable = reason && streq(reason, "CloudUnavailable");
        r = cn_format_rfc3339(cn_now(CLOCK_REALTIME), false, now, sizeof(now));
        if (r < 0)
                return r;
        r = cn_cluster_status_patch(cnc, failure_domains, generation_of(cnc), paused, reason, message, now, &patch);
        if (r < 0 || !patch)
                return r;
        return cn_kube_patch(s->cc->client, &resource_cloudnodeclusters, s->namespace, s->name, "status",
                             CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
}

static int patch_finalizers(ClusterState *s, json_object *cnc, bool add) {
        _cleanup_json_ json_object *patch = NULL;
        int r;

        r = cn_capi_finalizer_patch(cnc, CN_CLUSTER_FINALIZER, add, &patch);
        if (r < 0)
                return r;
        return cn_kube_patch(s->cc->client, &resource_cloudnodeclusters, s->namespace, s->name, NULL,
                             CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
}

/* A failed cloud call: retryable ones come back through the backoff timer, terminal ones wait for
 * a change of the spec (and say so in Ready and an Event). */
static void cloud_failed(ClusterState *s, json_object *cnc, const CnProviderResult *res, const char *what) {
        ClusterController *cc = s->cc;
        const char *reason;
        CnKubeObjectRef ref;

        if (cn_provider_error_class(res->error) == CN_PROVIDER_RETRYABLE && res->error != -CN_PROVIDER_EMULTIPLE) {
                log_info("CloudnodeCluster %s/%s: %s failed, retrying: %s", s->namespace, s->name, what,
                         strna(res->message));
                (void) write_status(s, cnc, NULL, false, "CloudUnavailable", res->message);
                cloud_retry_later(s, cnc, res->retry_after);
                return;
        }
        /* Several load balancers with the cluster's UID: a human decides which one is the
         * cluster's, neither is adopted nor deleted. */
        reason = res->error == -CN_PROVIDER_EMULTIPLE          ? "MultipleLoadBalancers"
                 : res->error == -EACCES || res->error == -EPERM ? "Unauthorized"
                                                                 : "InvalidConfiguration";
        log_warning("CloudnodeCluster %s/%s: %s: %s", s->namespace, s->name, reason, strna(res->message));
        s->failed_generation = generation_of(cnc);
        (void) write_status(s, cnc, NULL, false, reason, res->message);
        if (cn_kube_object_ref_from_json(cnc, &resource_cloudnodeclusters, &ref) >= 0)
                (void) cn_kube_event_record(cc->recorder, &ref, CN_KUBE_EVENT_WARNING, reason, NULL, "%s",
                                            strna(res->message));
}

/* Ends the call in flight; the cluster as the cache has it now, or NULL when it is gone. */
static json_object *call_done(ClusterState *s) {
        s->call = cn_provider_call_free(s->call);
        return cn_kube_informer_lookup(s->cc->infra_clusters, s->namespace, s->name);
}

static void on_failure_domains(CnProvider *p, const CnProviderResult *res, json_object *list, void *userdata) {
        ClusterState *s = ASSERT_PTR(userdata);
        ClusterController *cc = s->cc;
        json_object *cnc = call_done(s);

        if (!cnc)
                return;
        if (res->error < 0) {
                cloud_failed(s, cnc, res, "listing failure domains");
                return;
        }
        log_info("CloudnodeCluster %s/%s: %zu failure domains, provisioned", s->namespace, s->name,
                 json_object_array_length(list));
        json_object_put(s->failure_domains);
        s->failure_domains = json_object_get(list);
        s->generation = generation_of(cnc);
        cloud_succeeded(s);
        (void) write_status(s, cnc, s->failure_domains, false, NULL, NULL);
        /* Events that came while the call was in flight were passed over: a status that does not
         * change (one copied by clusterctl move) brings no event of its own. */
        schedule(cc);
}

static void on_load_balancer(CnProvider *p, const CnProviderResult *res, json_object *view, void *userdata) {
        ClusterState *s = ASSERT_PTR(userdata);
        json_object *cnc = call_done(s);
        const char *uid;

        if (!cnc)
                return;
        if (res->error < 0) {
                cloud_failed(s, cnc, res, "the control-plane load balancer");
                return;
        }
        log_info("CloudnodeCluster %s/%s: control-plane load balancer %s at %s", s->namespace, s->name,
                 strna(cn_json_string(view, "id", NULL)), strna(cn_json_string(view, "host", NULL)));
        uid = cn_json_string(cnc, "metadata", "uid", NULL);
        /* What it carries from now on: a recreated object (clusterctl move) finds it by that. The
         * annotation is what a move carries (clusterctl creates the objects anew, without their
         * status); the status field reports it. */
        if (!cn_json_string_is(cn_json_get(cnc, "metadata", "annotations", NULL), LB_LABEL_UID_ANNOTATION, uid)) {
                _cleanup_json_ json_object *patch = json_object_new_object();

                if (patch && cn_json_set_string(patch, uid, "metadata", "annotations", LB_LABEL_UID_ANNOTATION,
                                                NULL) >= 0)
                        (void) cn_kube_patch(s->cc->client, &resource_cloudnodeclusters, s->namespace, s->name, NULL,
                                             CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
        }
        if (!cn_json_string_is(cn_json_get(cnc, "status", NULL), "loadBalancerLabelUID", uid)) {
                _cleanup_json_ json_object *patch = json_object_new_object();

                if (patch && cn_json_set_string(patch, uid, "status", "loadBalancerLabelUID", NULL) >= 0)
                        (void) cn_kube_patch(s->cc->client, &resource_cloudnodeclusters, s->namespace, s->name,
                                             "status", CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
        }
        json_object_put(s->load_balancer);
        s->load_balancer = json_object_get(view);
        cloud_succeeded(s);
        schedule(s->cc);
}

static void on_load_balancer_cleanup(CnProvider *p, const CnProviderResult *res, bool done, void *userdata) {
        ClusterState *s = ASSERT_PTR(userdata);
        json_object *cnc = call_done(s);

        if (!cnc)
                return;
        if (res->error < 0) {
                log_info("CloudnodeCluster %s/%s: deleting the control-plane load balancer failed, retrying: %s",
                         s->namespace, s->name, strna(res->message));
                cloud_retry_later(s, cnc, res->retry_after);
                return;
        }
        if (!done) {
                retry_later(s, 0);
                return;
        }
        log_info("CloudnodeCluster %s/%s: control-plane load balancer gone, removing the finalizer", s->namespace,
                 s->name);
        (void) patch_finalizers(s, cnc, false);
}

/* The provider of the cluster's credentials (borrowed: a call holds its own reference); 0 while
 * the Secret is being read (its answer schedules another pass), 1 when there. */
static int cluster_provider(ClusterState *s, json_object *cnc, CnProvider **ret) {
        _cleanup_free_ char *why = NULL;
        CnProvider *p = NULL;
        int r;

        r = cn_credentials_provider(machine_controller_credentials(s->cc->mc), s->namespace,
                                    cn_json_get(cnc, "spec", "credentials", "secretRef", NULL), CN_CREDENTIALS_FRESH,
                                    &p, &why);
        if (r < 0) {
                (void) write_status(s, cnc, NULL, false, "CredentialsUnavailable", why);
                retry_later(s, 0);
                return r;
        }
        if (r == 0)
                return 0;
        *ret = p;
        return 1;
}

static CnProviderLoadBalancer load_balancer_of(ClusterState *s, json_object *cnc, json_object *cluster) {
        return (CnProviderLoadBalancer) {
                .name = s->name,
                .namespace = s->namespace,
                .uid = cn_json_string(cnc, "metadata", "uid", NULL),
                .previous_uid = cn_json_string(cnc, "metadata", "annotations", LB_LABEL_UID_ANNOTATION, NULL) ?:
                                cn_json_string(cnc, "status", "loadBalancerLabelUID", NULL),
                .targets_of = cn_json_string(cluster, "metadata", "uid", NULL),
                .region = cn_json_string(cnc, "spec", "region", NULL),
                .spec = cn_json_get(cnc, "spec", "controlPlaneLoadBalancer", NULL),
                .members = (const char *const *) s->members,
        };
}

static bool strv_equal(char **a, char **b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

/* A change of the control-plane instances asks the provider again (OpenStack moves the floating
 * IP when its server is gone). */
static void update_members(ClusterState *s, json_object *cnc) {
        _cleanup_strv_free_ char **now = NULL;
        const char *owner = cn_cluster_owner_name(cnc);

        if (!owner || machine_controller_control_plane(s->cc->mc, s->namespace, owner, &now) < 0)
                return;
        if (strv_equal(now, s->members))
                return;
        strv_free(s->members);
        s->members = TAKE_PTR(now);
        json_object_put(TAKE_PTR(s->load_balancer));
}

/* The control-plane load balancer, once per controller run: found or created, and its address
 * written to spec.controlPlaneEndpoint unless the user gave one. True while that is under way. */
static bool ensure_load_balancer(ClusterController *cc, ClusterState *s, json_object *cnc, json_object *cluster) {
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_free_ char *reason = NULL;
        CnProviderLoadBalancer lb;
        CnProvider *p = NULL;
        int r;

        if (!cn_cluster_wants_load_balancer(cnc))
                return false;
        update_members(s, cnc);
        if (s->load_balancer) {
                r = cn_cluster_endpoint_patch(cnc, s->load_balancer, &patch);
                if (r < 0 || !patch)
                        return false;
                /* Its event brings the next pass, with the endpoint. */
                (void) cn_kube_patch(cc->client, &resource_cloudnodeclusters, s->namespace, s->name, NULL,
                                     CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
                return true;
        }
        if (s->failed_generation == generation_of(cnc) || cloud_backing_off(s, cnc))
                return true;
        r = cluster_provider(s, cnc, &p);
        if (r <= 0)
                return true;
        lb = load_balancer_of(s, cnc, cluster);
        if (!lb.uid || !lb.targets_of)
                return true; /* objects of the API always have a UID */
        /* A retry keeps the reason of the failure it retries, so that Ready does not flap: the one
         * we wrote last, which the cache may not show yet when the retry comes first. */
        if (!cn_cluster_has_endpoint(cnc) && !s->cloud_unavailable &&
            !cn_json_string_is(cn_json_array_find(cn_json_get(cnc, "status", "conditions", NULL), "type", "Ready"),
                               "reason", "CloudUnavailable"))
                (void) write_status(s, cnc, NULL, false, "LoadBalancerProvisioning",
                                    "waiting for the control-plane load balancer");
        r = cn_provider_load_balancer_ensure(p, &lb, on_load_balancer, s, &s->call, &reason);
        if (r == -EOPNOTSUPP || r == -EINVAL) {
                s->failed_generation = generation_of(cnc);
                (void) write_status(s, cnc, NULL, false, r == -EINVAL ? "InvalidConfiguration" : "NotSupported",
                                    r == -EINVAL ? reason : "this provider cannot make a control-plane load balancer");
        } else if (r < 0) {
                log_warning_errno(r, "CloudnodeCluster %s/%s: cannot ask for the load balancer: %m", s->namespace,
                                  s->name);
                retry_later(s, 0);
        }
        return true;
}

/* Deleting: the load balancer goes before the finalizer. */
static void delete_cluster(ClusterController *cc, ClusterState *s, json_object *cnc) {
        CnProviderLoadBalancer lb = load_balancer_of(s, cnc, NULL);
        CnProvider *p = NULL;
        int r;

        /* The spec member, enabled or not, or a load balancer recorded in the annotation or the
         * status (the member removed since; a move carries the annotation only): one made while it
         * was enabled is still the cluster's. */
        if ((!cn_json_get(cnc, "spec", "controlPlaneLoadBalancer", NULL) && isempty(lb.previous_uid)) || !lb.uid) {
                log_info("CloudnodeCluster %s/%s: deleting, removing the finalizer", s->namespace, s->name);
                (void) patch_finalizers(s, cnc, false);
                return;
        }
        if (cloud_backing_off(s, cnc))
                return;
        r = cluster_provider(s, cnc, &p);
        if (r <= 0)
                return;
        r = cn_provider_load_balancer_cleanup(p, &lb, on_load_balancer_cleanup, s, &s->call);
        if (r == -EOPNOTSUPP)
                (void) patch_finalizers(s, cnc, false);
        else if (r < 0)
                retry_later(s, 0);
}

/* ---- the workload cluster's cloud config ---- */

static int write_published_condition(ClusterState *s, json_object *cnc, bool ok, const char *reason,
                                     const char *message) {
        _cleanup_json_ json_object *conds = NULL, *patch = NULL;
        json_object *live = cn_json_get(cnc, "status", "conditions", NULL), *was;
        char now[64];
        int r;

        if (reason != s->published_reason) {
                char *rc = strdup(reason), *mc = message ? strdup(message) : NULL;

                if (!rc || (message && !mc)) {
                        free(rc);
                        free(mc);
                        return -ENOMEM;
                }
                free(s->published_reason);
                free(s->published_message);
                s->published_reason = rc;
                s->published_message = mc;
                s->published_ok = ok;
        }
        was = cn_json_array_find(live, "type", "CloudConfigPublished");
        if (was && cn_json_string_is(was, "status", ok ? "True" : "False") && cn_json_string_is(was, "reason", reason) &&
            streq(strempty(cn_json_string(was, "message", NULL)), strempty(message)))
                return 0;
        r = cn_format_rfc3339(cn_now(CLOCK_REALTIME), false, now, sizeof(now));
        if (r < 0)
                return r;
        r = cn_conditions_set(live, "CloudConfigPublished", ok, reason, message, now, &conds);
        if (r < 0)
                return r;
        patch = json_object_new_object();
        if (!patch)
                return -ENOMEM;
        /* Conditional: a list written from a stale copy would drop another writer's condition. */
        if ((r = cn_json_set_string(patch, cn_json_string(cnc, "metadata", "resourceVersion", NULL), "metadata",
                                    "resourceVersion", NULL)) < 0 ||
            (r = cn_json_set(patch, TAKE_PTR(conds), "status", "conditions", NULL)) < 0)
                return r;
        return cn_kube_patch(s->cc->client, &resource_cloudnodeclusters, s->namespace, s->name, "status",
                             CN_KUBE_PATCH_MERGE, patch, on_written, NULL, NULL);
}

/* The condition last decided, again where the live object lacks it: no API call otherwise. */
static void published_condition_again(ClusterState *s, json_object *cnc) {
        if (s->published_reason)
                (void) write_published_condition(s, cnc, s->published_ok, s->published_reason, s->published_message);
}

/* A pass again after PUBLISH_RETRY_USEC, on a timer of its own: the shared retry timer would be
 * pushed back for every cluster. */
static void publish_later(ClusterState *s) {
        s->publish_after = cn_now(CLOCK_MONOTONIC) + PUBLISH_RETRY_USEC;
        (void) sd_event_source_set_time_relative(s->cc->publish_source, PUBLISH_RETRY_USEC);
        (void) sd_event_source_set_enabled(s->cc->publish_source, SD_EVENT_ONESHOT);
}

static void publish_refused(ClusterState *s, const CnKubeResult *result, const char *what) {
        json_object *cnc = cn_kube_informer_lookup(s->cc->infra_clusters, s->namespace, s->name);
        _cleanup_free_ char *message = NULL;

        if (result->error == -CN_KUBE_EFORBIDDEN) {
                publish_later(s);
                if (asprintf(&message, "cannot %s the cloud config Secret in %s: bind the ClusterRole %s to the "
                             "controller's ServiceAccount there (a RoleBinding); tried again every minute", what,
                             s->namespace, CN_CLOUD_CONFIG_CLUSTER_ROLE) < 0)
                        return;
                log_info("CloudnodeCluster %s/%s: %s", s->namespace, s->name, message);
                if (cnc)
                        (void) write_published_condition(s, cnc, false, "Forbidden", message);
                return;
        }
        log_info("CloudnodeCluster %s/%s: cannot %s the cloud config Secret, retrying: %s", s->namespace, s->name,
                 what, strna(result->message));
        retry_later(s, 0);
}

static void on_secret_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        ClusterState *s = ASSERT_PTR(userdata);
        json_object *cnc;

        s->secret_request = cn_kube_request_free(s->secret_request);
        if (result->error < 0) {
                publish_refused(s, result, "write");
                return;
        }
        json_object_put(s->published);
        s->published = json_object_get(result->object);
        cnc = cn_kube_informer_lookup(s->cc->infra_clusters, s->namespace, s->name);
        log_info("CloudnodeCluster %s/%s: cloud config published as Secret %s", s->namespace, s->name,
                 strna(cn_json_string(result->object, "metadata", "name", NULL)));
        if (cnc)
                (void) write_published_condition(s, cnc, true, "Published", NULL);
}

static int desired_secret(ClusterState *s, json_object *cnc, CnProvider *p, json_object **ret) {
        _cleanup_json_ json_object *cfg = NULL;
        int r;

        r = cn_provider_cloud_config(p, cn_json_get(cnc, "spec", NULL), &cfg);
        if (r < 0)
                return r;
        return cn_cloud_config_secret(cnc, cn_cluster_owner_name(cnc), cfg, ret);
}

static void on_secret(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        ClusterState *s = ASSERT_PTR(userdata);
        json_object *cnc = cn_kube_informer_lookup(s->cc->infra_clusters, s->namespace, s->name);
        _cleanup_json_ json_object *want = NULL, *patch = NULL;
        CnProvider *p = NULL;
        _cleanup_free_ char *message = NULL;
        int r;

        s->secret_request = cn_kube_request_free(s->secret_request);
        if (!cnc)
                return;
        if (result->error < 0 && result->error != -CN_KUBE_ENOTFOUND) {
                publish_refused(s, result, "read");
                return;
        }
        if (cluster_provider(s, cnc, &p) <= 0 || desired_secret(s, cnc, p, &want) < 0)
                return;
        if (result->error == -CN_KUBE_ENOTFOUND) {
                r = cn_kube_create(s->cc->client, &cn_kube_resource_secrets, s->namespace, want, on_secret_written, s,
                                   &s->secret_request);
                if (r < 0)
                        retry_later(s, 0);
                return;
        }
        if (!cn_cloud_config_secret_is_ours(result->object, cn_json_string(cnc, "metadata", "uid", NULL))) {
                /* Someone else's: never changed; looked at again every minute. */
                publish_later(s);
                if (asprintf(&message, "a Secret %s that this CloudnodeCluster does not own is in the way; "
                             "delete or rename it", cn_json_string(want, "metadata", "name", NULL)) < 0)
                        return;
                (void) write_published_condition(s, cnc, false, "NameTaken", message);
                return;
        }
        r = cn_cloud_config_secret_patch(result->object, want, &patch);
        if (r == 0 && !patch) {
                on_secret_written(c, result, s);
                return;
        }
        if (r >= 0)
                r = cn_kube_patch(s->cc->client, &cn_kube_resource_secrets, s->namespace,
                                  cn_json_string(want, "metadata", "name", NULL), NULL, CN_KUBE_PATCH_MERGE, patch,
                                  on_secret_written, s, &s->secret_request);
        if (r == -EMEDIUMTYPE)
                (void) write_published_condition(s, cnc, false, "InvalidSecret",
                                                 "the cloud config Secret has another type; delete it to have it "
                                                 "made again");
        else if (r < 0)
                retry_later(s, 0);
}

/* Once provisioned: the Secret, read and written only when what it should hold differs from what
 * was last confirmed. */
static void publish_cloud_config(ClusterController *cc, ClusterState *s, json_object *cnc) {
        _cleanup_json_ json_object *want = NULL;
        CnProvider *p = NULL;
        int r;

        if (s->secret_request)
                return;
        if (cn_now(CLOCK_MONOTONIC) < s->publish_after) {
                published_condition_again(s, cnc);
                return;
        }
        if (cluster_provider(s, cnc, &p) <= 0)
                return;
        r = desired_secret(s, cnc, p, &want);
        if (r == -EOPNOTSUPP)
                return; /* a provider without a cloud config of its own */
        if (r < 0) {
                (void) write_published_condition(s, cnc, false, "InvalidConfiguration",
                                                 r == -EINVAL ? "the Cluster's name makes no valid Secret name"
                                                              : "the cloud config cannot be rendered");
                return;
        }
        if (s->published &&
            cn_json_string_is(cn_json_get(s->published, "metadata", NULL), "name",
                              cn_json_string(want, "metadata", "name", NULL)) &&
            cn_json_equal(cn_json_get(s->published, "data", NULL), cn_json_get(want, "data", NULL))) {
                published_condition_again(s, cnc);
                return;
        }
        r = cn_kube_get(cc->client, &cn_kube_resource_secrets, s->namespace, cn_json_string(want, "metadata", "name", NULL),
                        NULL, on_secret, s, &s->secret_request);
        if (r < 0)
                retry_later(s, 0);
}

static void provision(ClusterController *cc, ClusterState *s, json_object *cnc, json_object *cluster) {
        CnProvider *p = NULL;
        int64_t g = generation_of(cnc);
        json_object *recorded;
        int r;

        /* First the endpoint, then the failure domains: writing the endpoint changes the
         * generation, which they are found for. */
        if (ensure_load_balancer(cc, s, cnc, cluster))
                return;
        if ((!s->failure_domains || s->generation != g) && cn_cluster_recorded_failure_domains(cnc, &recorded) >= 0) {
                /* Found by an earlier run for this generation. */
                json_object_put(s->failure_domains);
                s->failure_domains = json_object_get(recorded);
                s->generation = g;
        }
        if (s->failure_domains && s->generation == g) {
                /* Known for this generation: only make sure the status says so. */
                (void) write_status(s, cnc, s->failure_domains, false, NULL, NULL);
                publish_cloud_config(cc, s, cnc);
                return;
        }
        if (s->failed_generation == g || cloud_backing_off(s, cnc))
                return;
        r = cluster_provider(s, cnc, &p);
        if (r <= 0)
                return;
        r = cn_provider_failure_domains(p, cn_json_string(cnc, "spec", "region", NULL), on_failure_domains, s,
                                        &s->call);
        if (r == -EOPNOTSUPP) {
                s->failed_generation = g;
                (void) write_status(s, cnc, NULL, false, "NotSupported",
                                    "this provider cannot list its failure domains");
        } else if (r < 0) {
                log_warning_errno(r, "CloudnodeCluster %s/%s: cannot ask for failure domains: %m", s->namespace,
                                  s->name);
                retry_later(s, 0);
        }
}

static void reconcile_one(ClusterController *cc, ClusterState *s, json_object *cnc) {
        const char *owner = cn_cluster_owner_name(cnc), *provider = cn_json_string(cnc, "spec", "provider", NULL);
        json_object *cluster = owner ? cn_kube_informer_lookup(cc->clusters, s->namespace, owner) : NULL;
        CnClusterStep step;

        /* Another controller (another --machine-provider) serves clusters of other clouds. */
        if (!provider || !streq(provider, cn_provider_name(machine_controller_provider(cc->mc))))
                return;
        if (s->call)
                return; /* its completion looks again */
        step = cn_cluster_next_step(cnc, cluster);
        log_debug("CloudnodeCluster %s/%s: %s", s->namespace, s->name, cn_cluster_step_to_string(step));
        switch (step) {
        case CN_CLUSTER_PAUSED:
                (void) write_status(s, cnc, NULL, true, NULL, NULL);
                break;
        case CN_CLUSTER_ADD_FINALIZER:
                (void) patch_finalizers(s, cnc, true);
                break;
        case CN_CLUSTER_WAIT_OWNER:
                (void) write_status(s, cnc, NULL, false, "WaitingForCluster", "no owner Cluster yet");
                break;
        case CN_CLUSTER_PROVISION:
                provision(cc, s, cnc, cluster);
                break;
        case CN_CLUSTER_REMOVE_FINALIZER:
                delete_cluster(cc, s, cnc);
                break;
        default:
                break;
        }
}

static int visit(json_object *cnc, void *userdata) {
        ClusterController *cc = userdata;
        const char *ns = cn_json_string(cnc, "metadata", "namespace", NULL);
        const char *name = cn_json_string(cnc, "metadata", "name", NULL);
        ClusterState *s;

        if (!ns || !name)
                return 0;
        s = state_get(cc, ns, name);
        if (!s)
                return -ENOMEM;
        s->seen = true;
        reconcile_one(cc, s, cnc);
        return 0;
}

static int on_reconcile_all(sd_event_source *es, void *userdata) {
        ClusterController *cc = ASSERT_PTR(userdata);
        ClusterState **p;

        if (!cc->leading || !cluster_controller_synced(cc))
                return 0;
        for (ClusterState *s = cc->states; s; s = s->next)
                s->seen = false;
        (void) cn_kube_informer_foreach(cc->infra_clusters, visit, cc);
        for (p = &cc->states; *p;) {
                ClusterState *s = *p;

                if (s->seen) {
                        p = &s->next;
                        continue;
                }
                *p = s->next;
                state_free(s);
        }
        return 0;
}

static void on_credentials(void *userdata) {
        schedule(userdata);
}

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        ClusterController *cc = ASSERT_PTR(userdata);
        usec_t now = cn_now(CLOCK_MONOTONIC);

        /* The pass retries every cluster; those due by now are no longer waiting. */
        for (ClusterState *s = cc->states; s; s = s->next)
                if (s->retry_at > 0 && s->retry_at <= now)
                        s->retry_at = 0;
        arm_retry(cc);
        schedule(cc);
        return 0;
}

int cluster_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, MachineController *mc,
                           ClusterController **ret) {
        _cleanup_(cluster_controller_freep) ClusterController *cc = NULL;
        int r;

        cc = calloc(1, sizeof(ClusterController));
        if (!cc)
                return -ENOMEM;
        cc->event = sd_event_ref(e);
        cc->client = client;
        cc->recorder = recorder;
        cc->mc = mc;
        r = sd_event_add_defer(e, &cc->reconcile_source, on_reconcile_all, cc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(cc->reconcile_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(cc->reconcile_source, "cluster-reconcile");
        r = sd_event_add_time_relative(e, &cc->retry_source, CLOCK_MONOTONIC, RETRY_BASE_USEC, 0, on_retry, cc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(cc->retry_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(cc->retry_source, "cluster-retry");
        r = sd_event_add_time_relative(e, &cc->publish_source, CLOCK_MONOTONIC, PUBLISH_RETRY_USEC, 0, on_retry, cc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(cc->publish_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(cc->publish_source, "cluster-publish-retry");
        r = cn_credentials_add_listener(machine_controller_credentials(mc), on_credentials, cc);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(cc);
        return 0;
}

ClusterController *cluster_controller_free(ClusterController *cc) {
        if (!cc)
                return NULL;
        while (cc->states) {
                ClusterState *s = cc->states;

                cc->states = s->next;
                state_free(s);
        }
        if (cc->infra_clusters)
                (void) cn_kube_informer_remove_handlers(cc->infra_clusters, cc->infra_clusters_handlers);
        if (cc->clusters)
                (void) cn_kube_informer_remove_handlers(cc->clusters, cc->clusters_handlers);
        if (cc->infra_machines)
                (void) cn_kube_informer_remove_handlers(cc->infra_machines, cc->infra_machines_handlers);
        cn_kube_informer_unref(cc->infra_clusters);
        cn_kube_informer_unref(cc->clusters);
        cn_kube_informer_unref(cc->infra_machines);
        sd_event_source_disable_unref(cc->reconcile_source);
        sd_event_source_disable_unref(cc->retry_source);
        sd_event_source_disable_unref(cc->publish_source);
        sd_event_unref(cc->event);
        free(cc);
        return NULL;
}

static int watch(ClusterController *cc, const CnKubeResource *r, CnKubeInformer **ret, uint64_t *ret_id) {
        int k;

        /* Shared: the machine controller watches Clusters too; one list+watch serves both. */
        k = cn_kube_informer_get_shared(cc->client, r, &(CnKubeInformerOptions) {}, ret);
        if (k < 0)
                return log_error_errno(k, "Failed to create the %s informer: %m", r->resource);
        k = cn_kube_informer_add_trigger(*ret, cc->reconcile_source, ret_id);
        if (k < 0)
                return k;
        return cn_kube_informer_start(*ret);
}

int cluster_controller_start(ClusterController *cc) {
        int r;

        r = watch(cc, &resource_cloudnodeclusters, &cc->infra_clusters, &cc->infra_clusters_handlers);
        /* The Cluster informer is the machine controller's, which says when it is missing. */
        if (r >= 0)
                r = cn_waiting_watch_api(cc->infra_clusters);
        if (r >= 0)
                r = watch(cc, machine_controller_clusters_resource(), &cc->clusters, &cc->clusters_handlers);
        /* The control-plane machines an endpoint follows. */
        if (r >= 0)
                r = watch(cc, machine_controller_infra_machines_resource(), &cc->infra_machines,
                          &cc->infra_machines_handlers);
        return r;
}

bool cluster_controller_synced(ClusterController *cc) {
        return cn_kube_informer_has_synced(cc->infra_clusters) && cn_kube_informer_has_synced(cc->clusters) &&
               cn_kube_informer_has_synced(cc->infra_machines);
}

void cluster_controller_set_leading(ClusterController *cc, bool leading) {
        cc->leading = leading;
        if (leading)
                schedule(cc);
}
