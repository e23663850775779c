/* SPDX-License-Identifier: Apache-2.0 */
/* The instance source of cluster mode (initializer-source.h): the cloud provider's API is the source of truth for every Node (looked up by
 * providerID when the Node has one, else by name), and every --node-status-update-frequency the
 * addresses of initialized Nodes are compared with the cloud's and patched only when they
 * differ. Both go through the work queue, so --concurrent-node-syncs bounds the cloud calls. */
#include <sys/inotify.h>

#include "cloud-config.h"
#include "hash-util.h"
#include "initializer-credentials.h"
#include "initializer-lifecycle.h"
#include "initializer-manager.h"
#include "initializer-queue.h"
#include "initializer-sync.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "metrics.h"
#include "node-patch.h"
#include "provider.h"

static int enqueue_reconcile(json_object *node, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        const char *name = cn_node_get_name(node);
        NodeState *s;

        if (!name || cn_node_has_taint(node, CN_TAINT_UNINITIALIZED))
                return 0;
        s = node_state_get(m, name, true);
        if (!s)
                return log_oom();
        s->reconcile = true;
        queue_add(m, name);
        return 0;
}

static bool streq_null(const char *a, const char *b) {
        return a && b ? streq(a, b) : a == b;
}

/* Whether an update touched what initialization reads. Kubelet heartbeats and condition
 * changes do not, and must not cut short the backoff of a Node that keeps failing. */
static bool init_inputs_changed(json_object *old, json_object *node) {
        return !old || cn_node_has_taint(old, CN_TAINT_UNINITIALIZED) != cn_node_has_taint(node, CN_TAINT_UNINITIALIZED) ||
               !streq_null(cn_node_get_provided_node_ip(old), cn_node_get_provided_node_ip(node)) ||
               !streq_null(cn_node_get_provider_id(old), cn_node_get_provider_id(node)) ||
               !streq_null(cn_node_get_kubelet_hostname(old), cn_node_get_kubelet_hostname(node));
}

/* A tainted Node is queued for initialization; one whose retry is pending only when what
 * initialization reads changed. */
static void node_changed(Manager *m, json_object *old, json_object *node) {
        const char *name = cn_node_get_name(node);

        if ((m->config->controllers & CONTROLLER_CLOUD_NODE) && cn_node_has_taint(node, CN_TAINT_UNINITIALIZED)) {
                CnWorkItem *item = cn_work_queue_get(m->queue, name, true);
                /* NULL while the Node waits for its first sync: nothing of it is known yet but
                 * when it was queued, which is when its taint was first seen. */
                NodeState *s = item ? cn_work_item_get_data(item) : NULL;

                if (!item) {
                        log_oom();
                        return;
                }
                if (s && s->taint_seen == 0)
                        s->taint_seen = cn_now(CLOCK_MONOTONIC);
                /* The echo of our own status PATCH while the sync that sent it goes on: that sync
                 * builds on the Node the PATCH returned, so another pass would find nothing new
                 * (and, queued behind every other Node, parse its record again for that). */
                if (s && cn_work_item_active(item) && s->own_status_rv > 0 &&
                    cn_kube_object_resource_version(node) == s->own_status_rv) {
                        log_debug("Node %s: the event of our own status write, nothing new.", name);
                        return;
                }
                /* Come before the answer to that write, it may be its event all the same: the
                 * answer decides (on_status_patched()). */
                if (s && cn_work_item_active(item) && s->status_write_out) {
                        s->deferred_rv = MAX(s->deferred_rv, cn_kube_object_resource_version(node));
                        return;
                }
                /* A version older than our initializing write (that of our status PATCH, come
                 * after the write's answer): the event of the write follows. A sync now would
                 * find just that (sync_node()), after parsing the Node's record for it. */
                if (s && !cn_work_item_active(item) && cn_write_expectation_pending(&s->written, node, 0)) {
                        log_debug("Node %s: an event older than our write, waiting for the watch.", name);
                        return;
                }
                if (cn_work_item_retry_pending(item) && !init_inputs_changed(old, node))
                        return;
                cn_work_queue_add(item);
        } else {
                /* Typically the event of our initializing write. */
                NodeState *s = node_state_get(m, name, false);

                if (!s)
                        return;
                s->seen_rv = MAX(s->seen_rv, cn_kube_object_resource_version(node));
                queue_release_at_rest(s, node);
        }
}

static void on_instance(CnProvider *p, const CnProviderResult *res, CnProviderInstance *instance, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        sync_apply_instance(s, res->error, res->retry_after, res->message, instance);
}

static void on_reconcile_instance(CnProvider *p, const CnProviderResult *res, CnProviderInstance *instance,
                                  void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *owned = instance;
        _cleanup_json_ json_object *node = cn_kube_informer_get(s->manager->nodes, NULL, s->name);
        int r;

        s->call = cn_provider_call_free(s->call);
        if (res->error < 0)
                /* A vanished instance is the lifecycle controller's business, not ours. */
                log_debug("Not reconciling addresses of node %s: %s", s->name, res->message ?: strerror(-res->error));
        else if (node && !cn_node_has_taint(node, CN_TAINT_UNINITIALIZED)) {
                r = sync_update_addresses(s->manager, node, instance);
                if (r < 0)
                        log_debug_errno(r, "Not updating addresses of node %s: %m", s->name);
        }
        queue_done(s);
        queue_release_at_rest(s, node);
}

static void get_instance(NodeState *s) {
        Manager *m = s->manager;
        _cleanup_json_ json_object *node = cn_kube_informer_get(m->nodes, NULL, s->name);
        CnProviderNodeRef ref = {
                .name = s->name,
                .provider_id = node ? cn_node_get_provider_id(node) : NULL,
        };
        bool tainted = node && cn_node_has_taint(node, CN_TAINT_UNINITIALIZED);
        int r;

        r = cn_provider_instance_metadata(m->provider, &ref, tainted ? on_instance : on_reconcile_instance, s, &s->call);
        if (r < 0) {
                if (!tainted) {
                        queue_done(s);
                        queue_release_at_rest(s, node);
                        return;
                }
                sync_apply_instance(s, r, 0,
                                    r == -EINVAL ? "the Node's providerID does not belong to this cloud provider"
                                                 : "cannot ask the cloud provider",
                                    NULL);
        }
}

static int on_reconcile(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        int r;

        r = sd_event_source_set_time_relative(source, m->config->node_status_update_frequency);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to re-arm the address reconciliation timer: %m");
        if (!m->leading)
                return 0;
        log_debug("Reconciling the addresses of all initialized nodes.");
        return cn_kube_informer_foreach(m->nodes, enqueue_reconcile, m);
}

static void count_cloud_request(const char *provider, const char *operation, const char *result, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) cn_metric_inc(m->metrics.cloud_requests, CN_LABELS(provider, operation, result));
}

/* The provider from cloud.conf and, over it, the credentials of --cloud-credentials-dir. *ret_hash
 * says which credentials it holds ("" without a directory). Every failure is logged here, never
 * with a credential in it. */
static int build_provider(Manager *m, CnProvider **ret, char ret_hash[static CN_SHA256_HEX_SIZE]) {
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        if (m->config->cloud_config) {
                r = cn_cloud_config_load(m->config->cloud_config, &cfg, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to read cloud config %s: %s", m->config->cloud_config,
                                               error ?: strerror(-r));
        } else if (!(cfg = json_object_new_object()))
                return log_oom();
        ret_hash[0] = 0;
        if (m->config->cloud_credentials_dir) {
                free(error);
                error = NULL;
                r = credentials_load(m->config->cloud_credentials_dir, cfg, ret_hash, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to read the cloud credentials in %s: %s",
                                               m->config->cloud_credentials_dir, error ?: strerror(-r));
        }
        free(error);
        error = NULL;
        r = cn_provider_new(m->config->cloud_provider, m->http, cfg, ret, &error);
        if (r == -EPROTONOSUPPORT) {
                _cleanup_free_ char *known = cn_provider_names();

                return log_error_errno(r, "Unknown cloud provider '%s' (this build knows %s).",
                                       m->config->cloud_provider, strna(known));
        }
        if (r < 0)
                return log_error_errno(r, "Cloud provider %s: %s", m->config->cloud_provider, error ?: strerror(-r));
        cn_provider_set_request_counter(*ret, count_cloud_request, m);
        return 0;
}

/* The kubelet updates a Secret volume by swapping its ..data link, which the directory sees as a
 * rename; a test or an admin writing the files sees writes. Either way the files are read again,
 * and a provider with the new credentials replaces the old one only when they changed and it could
 * be built: calls in flight keep the old one (providers are reference counted) until they end. */
static int on_credentials_changed(sd_event_source *s, const struct inotify_event *event, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        _cleanup_(cn_provider_freep) CnProvider *fresh = NULL;
        char hash[CN_SHA256_HEX_SIZE];

        if (build_provider(m, &fresh, hash) < 0) {
                log_warning("Keeping the cloud credentials in use until %s holds usable ones.",
                            m->config->cloud_credentials_dir);
                return 0;
        }
        if (streq(hash, m->credentials_hash))
                return 0;
        log_info("The cloud credentials in %s changed; using them from now on.", m->config->cloud_credentials_dir);
        cn_provider_free(m->provider);
        m->provider = TAKE_PTR(fresh);
        memcpy(m->credentials_hash, hash, sizeof(hash));
        return 0;
}

static int start(Manager *m) {
        int r;

        r = build_provider(m, &m->provider, m->credentials_hash);
        if (r < 0)
                return r;
        if (m->config->cloud_credentials_dir) {
                r = sd_event_add_inotify(m->event, &m->credentials_watch, m->config->cloud_credentials_dir,
                                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                                 IN_ATTRIB | IN_ONLYDIR,
                                         on_credentials_changed, m);
                if (r < 0)
                        return log_error_errno(r, "Failed to watch %s: %m", m->config->cloud_credentials_dir);
                (void) sd_event_source_set_description(m->credentials_watch, "cloud-credentials");
        }

        if (m->config->controllers & CONTROLLER_CLOUD_NODE) {
                r = sd_event_add_time_relative(m->event, &m->reconcile_timer, CLOCK_MONOTONIC,
                                               m->config->node_status_update_frequency, USEC_PER_SEC, on_reconcile, m);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the address reconciliation timer: %m");
                (void) sd_event_source_set_description(m->reconcile_timer, "address-reconcile");
        }
        return 0;
}

static int start_controllers(Manager *m) {
        if (!(m->config->controllers & CONTROLLER_CLOUD_NODE_LIFECYCLE))
                return 0;
        return lifecycle_start(m);
}

static void reload(Manager *m) {
        log_info("SIGHUP: cluster mode re-reads its configuration only on restart; ignoring.");
}

const InstanceSource instance_source_cloud = {
        .mode = "cluster",
        .start = start,
        .start_controllers = start_controllers,
        .node_changed = node_changed,
        .get_instance = get_instance,
        .reconcile_addresses = get_instance,
        .reload = reload,
};
