/* SPDX-License-Identifier: Apache-2.0 */
/* Bootstrap hand-off (daemon mode, roles bootstrap and control-plane): the agent's static pod runs
 * the cloud-node controller until the in-cluster initializer Deployment has an available replica;
 * then the agent removes the static pod manifest (kubelet stops the pod), logs that it handed
 * over, and exits. The Deployment is followed in every namespace (the operand is installed into
 * whatever namespace its controller runs in: cloudnode, openshift-cloudnode, ...) with one list and
 * then a watch narrowed to its name, from the list's resourceVersion; a watch that ends is resumed, 410 Gone re-lists, errors retry
 * with jittered backoff. */

#include "agent.h"
#include "backoff.h"
#include "event-util.h"
#include "fileio.h"
#include "json-util.h"
#include "kube-client.h"
#include "log.h"
#include "render-params.h"

#define HANDOFF_NAME_DEFAULT "cloudnode-cloud-controller-manager"

typedef struct Handoff {
        Manager *manager;
        CnKubeClient *client;
        CnKubeRequest *request;
        sd_event_source *retry;
        CnBackoff backoff;
        char *field_selector;
        char *resource_version;
        char *namespace;             /* of the Deployment that became available */
        const char *name;
} Handoff;

static void handoff_list(Handoff *h);

static bool deployment_available(json_object *d) {
        int64_t n = 0;

        return cn_json_get_int64(d, &n, "status", "availableReplicas", NULL) >= 0 && n >= 1;
}

static void handed_over(Handoff *h, json_object *deployment) {
        Manager *m = h->manager;
        int r;

        free(h->namespace);
        h->namespace = strdup(strna(cn_json_string(deployment, "metadata", "namespace", NULL)));
        if (!h->namespace) {
                (void) log_oom();
                m->result = AGENT_EXIT_FAILURE;
                (void) sd_event_exit(m->event, 0);
                return;
        }

        h->request = cn_kube_request_free(h->request);
        r = cn_remove_file(m->args->root, CN_STATIC_POD_PATH);
        if (r < 0) {
                log_error_errno(r, "Failed to remove %s: %m", CN_STATIC_POD_PATH);
                m->result = AGENT_EXIT_OUTPUT;
        } else {
                log_struct(LOG_INFO,
                           CN_FIELDS("CLOUDNODE_PLATFORM", m->metadata->platform, "CLOUDNODE_INSTANCE_ID",
                                     m->metadata->instance_id, "CLOUDNODE_HANDOFF", "done"),
                           "Deployment %s/%s has an available replica: removed the bootstrap static pod, "
                           "handed over.", h->namespace, h->name);
                (void) cn_notify_status("Handed over to %s/%s", h->namespace, h->name);
                m->result = AGENT_EXIT_SUCCESS;
        }
        (void) sd_event_exit(m->event, 0);
}

static void set_resource_version(Handoff *h, json_object *o) {
        const char *rv = cn_json_string(o, "metadata", "resourceVersion", NULL);
        char *copy;

        if (!rv || !(copy = strdup(rv)))
                return;
        free(h->resource_version);
        h->resource_version = copy;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Handoff *h = ASSERT_PTR(userdata);

        h->retry = sd_event_source_disable_unref(h->retry);
        handoff_list(h);
        return 0;
}

static void retry_later(Handoff *h, int error, const char *what) {
        usec_t delay = cn_backoff_next(&h->backoff, 0);
        int r;

        h->request = cn_kube_request_free(h->request);
        log_warning_errno(error, "Hand-off: %s failed, retrying in %" PRIu64 " ms: %m", what, delay / USEC_PER_MSEC);
        r = sd_event_add_time_relative(h->manager->event, &h->retry, CLOCK_MONOTONIC, delay, 0, on_retry, h);
        if (r < 0) {
                log_error_errno(r, "Failed to schedule the hand-off retry: %m");
                (void) sd_event_exit(h->manager->event, 0);
                return;
        }
        (void) sd_event_source_set_description(h->retry, "handoff-retry");
}

static void handoff_watch(Handoff *h);

static void on_event(CnKubeClient *c, CnKubeWatchEventType type, json_object *object, void *userdata) {
        Handoff *h = ASSERT_PTR(userdata);

        set_resource_version(h, object);
        if ((type == CN_KUBE_WATCH_ADDED || type == CN_KUBE_WATCH_MODIFIED) && deployment_available(object))
                handed_over(h, object);
}

static void on_watch_end(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        Handoff *h = ASSERT_PTR(userdata);

        h->request = cn_kube_request_free(h->request);
        if (result->error == 0)
                handoff_watch(h);
        else if (result->error == -CN_KUBE_EGONE)
                handoff_list(h);
        else
                retry_later(h, result->error, "watch");
}

static void handoff_watch(Handoff *h) {
        CnKubeListOptions o = {
                .field_selector = h->field_selector,
                .resource_version = h->resource_version,
                .allow_watch_bookmarks = true,
                .timeout_seconds = 300,
        };
        int r;

        r = cn_kube_watch(h->client, &cn_kube_resource_deployments, NULL, &o, on_event, on_watch_end, h,
                          &h->request);
        if (r < 0)
                retry_later(h, r, "starting the watch");
}

static void on_list(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        Handoff *h = ASSERT_PTR(userdata);
        json_object *items;

        if (result->error < 0) {
                retry_later(h, result->error, "listing the Deployment");
                return;
        }
        h->request = cn_kube_request_free(h->request);
        cn_backoff_reset(&h->backoff);
        set_resource_version(h, result->object);
        if (cn_json_get_array(result->object, &items, "items", NULL) >= 0)
                for (size_t i = 0; i < json_object_array_length(items); i++)
                        if (deployment_available(json_object_array_get_idx(items, i))) {
                                handed_over(h, json_object_array_get_idx(items, i));
                                return;
                        }
        log_info("Waiting for a Deployment %s (in any namespace) to have an available replica.", h->name);
        handoff_watch(h);
}

static void handoff_list(Handoff *h) {
        CnKubeListOptions o = { .field_selector = h->field_selector };
        int r;

        r = cn_kube_list(h->client, &cn_kube_resource_deployments, NULL, &o, on_list, h, &h->request);
        if (r < 0)
                retry_later(h, r, "listing the Deployment");
}

void agent_handoff_free(Manager *m) {
        Handoff *h = m->handoff;

        if (!h)
                return;
        cn_kube_request_free(h->request);
        sd_event_source_disable_unref(h->retry);
        cn_kube_client_free(h->client);
        free(h->field_selector);
        free(h->resource_version);
        free(h->namespace);
        free(h);
        m->handoff = NULL;
}

int agent_handoff_start(Manager *m) {
        _cleanup_free_ char *path = NULL, *error = NULL;
        _cleanup_kube_config_ CnKubeConfig *config = NULL;
        CnKubeClientOptions o = { .component = "agent" };
        Handoff *h;
        int r;

        r = cn_path_prefix_root(m->args->root, m->config->kubeconfig ?: CN_BOOTSTRAP_KUBECONFIG_PATH, &path);
        if (r < 0)
                return log_oom();
        r = cn_kube_config_load(path, NULL, &config, &error);
        if (r < 0)
                return log_error_errno(r, "Hand-off: failed to load the kubeconfig %s: %s", path,
                                       error ?: strerror(-r));
        h = calloc(1, sizeof(Handoff));
        if (!h)
                return log_oom();
        m->handoff = h;
        h->manager = m;
        h->name = HANDOFF_NAME_DEFAULT;
        cn_backoff_init(&h->backoff, 500 * USEC_PER_MSEC, 30 * USEC_PER_SEC);
        if (asprintf(&h->field_selector, "metadata.name=%s", h->name) < 0)
                return log_oom();
        r = cn_kube_client_new(m->event, config, &o, &h->client);
        if (r < 0)
                return log_error_errno(r, "Hand-off: failed to set up the Kubernetes client: %m");
        TAKE_PTR(config);
        handoff_list(h);
        return 0;
}
