/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster mode: the cloud provider's API is the source of truth for every Node (looked up by
 * providerID when the Node has one, else by name), and every --node-status-update-frequency the
 * addresses of initialized Nodes are compared with the cloud's and patched only when they
 * differ. Both go through the work queue, so --concurrent-node-syncs bounds the cloud calls. */
#include "cloud-config.h"
#include "initializer.h"
#include "kube-informer.h"
#include "log.h"
#include "metrics.h"
#include "node-patch.h"
#include "provider.h"

static void on_instance(CnProvider *p, const CnProviderResult *res, CnProviderInstance *instance, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);

        s->call = cn_provider_call_free(s->call);
        sync_apply_instance(s, res->error, res->retry_after, res->message, instance);
}

static void on_reconcile_instance(CnProvider *p, const CnProviderResult *res, CnProviderInstance *instance,
                                  void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *owned = instance;
        json_object *node = cn_kube_informer_lookup(s->manager->nodes, NULL, s->name);
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
}

void cluster_mode_get_instance(NodeState *s) {
        Manager *m = s->manager;
        json_object *node = cn_kube_informer_lookup(m->nodes, NULL, s->name);
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
        return cn_kube_informer_foreach(m->nodes, manager_enqueue_reconcile, m);
}

static void count_cloud_request(const char *provider, const char *operation, const char *result, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) cn_metric_inc(m->metrics.cloud_requests, CN_LABELS(provider, operation, result));
}

int cluster_mode_start(Manager *m) {
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        if (m->config->cloud_config) {
                r = cn_cloud_config_load(m->config->cloud_config, &cfg, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to read cloud config %s: %s", m->config->cloud_config,
                                               error ?: strerror(-r));
        }
        free(error);
        error = NULL;
        r = cn_provider_new(m->config->cloud_provider, m->http, cfg, &m->provider, &error);
        if (r == -EPROTONOSUPPORT)
                return log_error_errno(r, "Unknown cloud provider '%s' (this build knows hetzner and openstack).",
                                       m->config->cloud_provider);
        if (r < 0)
                return log_error_errno(r, "Cloud provider %s: %s", m->config->cloud_provider, error ?: strerror(-r));
        cn_provider_set_request_counter(m->provider, count_cloud_request, m);

        if (m->config->controllers & CONTROLLER_CLOUD_NODE) {
                r = sd_event_add_time_relative(m->event, &m->reconcile_timer, CLOCK_MONOTONIC,
                                               m->config->node_status_update_frequency, USEC_PER_SEC, on_reconcile, m);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the address reconciliation timer: %m");
                (void) sd_event_source_set_description(m->reconcile_timer, "address-reconcile");
        }
        return 0;
}
