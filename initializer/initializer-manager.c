/* SPDX-License-Identifier: Apache-2.0 */
/* The Manager: event loop, signals, Kubernetes client, the shared Node informer, Events, leader
 * election (cluster mode), the health/metrics server, and the mode's instance source
 * (initializer-source.h), which it calls for every Node event once in charge. */
#include <signal.h>

#include "event-util.h"
#include "http.h"
#include "httpd.h"
#include "initializer-lifecycle.h"
#include "initializer-manager.h"
#include "initializer-queue.h"
#include "initializer-sync.h"
#include "kube-client.h"
#include "kube-config.h"
#include "kube-event.h"
#include "kube-informer.h"
#include "kube-leader.h"
#include "kube-workqueue.h"
#include "log.h"
#include "metadata.h"
#include "metrics.h"
#include "netlink.h"
#include "node-config.h"
#include "node-addresses.h"
#include "node-patch.h"
#include "provider.h"

static void node_seen(Manager *m, json_object *old, json_object *node) {
        if (!cn_node_get_name(node) || !m->controllers_started)
                return;
        m->source->node_changed(m, old, node);
}

static void on_node_added(CnKubeInformer *i, json_object *node, void *userdata) {
        node_seen(userdata, NULL, node);
}

static void on_node_updated(CnKubeInformer *i, json_object *old, json_object *node, void *userdata) {
        node_seen(userdata, old, node);
}

static void on_node_deleted(CnKubeInformer *i, json_object *node, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        const char *name = cn_node_get_name(node);

        if (name)
                node_state_drop(m, name);
}

static void on_nodes_synced(CnKubeInformer *i, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        log_info("Node cache synced (%zu nodes).", cn_kube_informer_size(i));
        if (m->config->node_name && !cn_kube_informer_lookup(i, NULL, m->config->node_name))
                log_info("Waiting for node %s to register.", m->config->node_name);
}

static int enqueue_existing(json_object *node, void *userdata) {
        node_seen(userdata, NULL, node);
        return 0;
}

void manager_start_controllers(Manager *m) {
        int r;

        if (m->controllers_started)
                return;
        m->controllers_started = true;
        if (m->source->start_controllers) {
                r = m->source->start_controllers(m);
                if (r < 0)
                        log_warning_errno(r, "The lifecycle controller does not run: %m");
        }
        /* Whatever the cache already holds was delivered while we were not in charge. */
        (void) cn_kube_informer_foreach(m->nodes, enqueue_existing, m);
}

static void on_started_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        log_info("Became leader (%s), starting controllers.", cn_kube_leader_get_identity(l));
        m->leading = true;
        (void) cn_metric_set(m->metrics.leader, NULL, 1);
        manager_start_controllers(m);
}

static void on_stopped_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        (void) cn_metric_set(m->metrics.leader, NULL, 0);
        m->leading = false;
        if (m->shutting_down)
                return;
        /* As upstream controllers do: another replica owns the work now, and our queue and
         * in-flight writes must not race with it. A restart gives a clean standby. */
        log_error("Lost the leader lease, exiting.");
        queue_forget_all(m);
        (void) sd_event_exit(m->event, -ENOLCK);
}

static void on_new_leader(CnKubeLeader *l, const char *identity, void *userdata) {
        log_info("Leader is now %s.", strna(identity));
}

static void on_released(CnKubeLeader *l, int error, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (error < 0)
                log_warning_errno(error, "Failed to release the leader lease: %m");
        (void) sd_event_exit(m->event, 0);
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (m->shutting_down)
                return sd_event_exit(m->event, 0);
        log_info("Received %s, shutting down.", si->ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        m->shutting_down = true;
        (void) cn_notify_stopping();
        if (m->leader && m->leading && cn_kube_leader_release(m->leader, on_released, m) >= 0)
                return 0; /* exit once the Lease is handed back, so a successor need not wait */
        return sd_event_exit(m->event, 0);
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        m->source->reload(m);
        return 0;
}

static int setup_kube(Manager *m) {
        _cleanup_free_ char *msg = NULL;
        CnKubeConfig *kc = NULL;
        CnKubeClientOptions o = {
                .component = "initializer",
                .qps = m->config->daemon.kube_api_qps,
                .burst = m->config->daemon.kube_api_burst,
                /* Each sync worker has one PATCH in flight; then the Node watch (the one request
                 * that holds a connection), the Lease and an address update. Synced Events share
                 * these: one waits for a free connection rather than keep one more open (each TLS
                 * connection holds some 30 KB), which at 8 workers cost no Nodes per second. */
                .max_connections = m->config->concurrent_node_syncs + 3,
        };
        /* The cache holds each Node as its filtered text (some 270 bytes, cn_kube_object_to_text();
         * 6 KB as a json-c tree): 5000 Nodes take 1.4 MB with their keys instead of 32. A tree is
         * built per event and lookup. */
        CnKubeInformerOptions io = { .filter = initializer_node_filter, .store_text = true };
        _cleanup_free_ char *selector = NULL;
        const char *kubeconfig = m->config->kubeconfig;
        int r;

        if (!kubeconfig && m->node_config && m->node_config->kubeconfig)
                kubeconfig = m->node_config->kubeconfig;
        r = cn_kube_config_load_default(kubeconfig, NULL, &kc, &msg);
        if (r < 0)
                return log_error_errno(r, "Failed to load the Kubernetes client configuration: %s", msg ?: strerror(-r));
        r = cn_kube_client_new(m->event, kc, &o, &m->kube);
        if (r < 0) {
                cn_kube_config_free(kc);
                return log_error_errno(r, "Failed to set up the Kubernetes client: %m");
        }
        r = cn_kube_client_register_metrics(m->kube, m->metrics.registry, "cloudnode_initializer_api_requests");
        if (r < 0)
                return log_error_errno(r, "Failed to set up metrics: %m");

        if (m->config->node_name) {
                /* Node mode sees its own Node and nothing else: the RBAC can stay narrow and a
                 * cluster of 5000 Nodes costs each node one object. */
                if (asprintf(&selector, "metadata.name=%s", m->config->node_name) < 0)
                        return log_oom();
                io.field_selector = selector;
        }
        r = cn_write_expectations_new(&m->address_writes);
        if (r < 0)
                return log_oom();
        r = cn_kube_informer_new(m->kube, &cn_kube_resource_nodes, &io, &m->nodes);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Node informer: %m");
        r = cn_kube_informer_add_handlers(m->nodes,
                                          &(CnKubeInformerHandlers) {
                                                  .added = on_node_added,
                                                  .updated = on_node_updated,
                                                  .deleted = on_node_deleted,
                                                  .synced = on_nodes_synced,
                                          },
                                          m, &m->nodes_handlers);
        if (r < 0)
                return log_error_errno(r, "Failed to register Node handlers: %m");

        r = cn_kube_event_recorder_new(m->kube,
                                       &(CnKubeEventRecorderOptions) {
                                               .component = "cloud-node-controller",
                                               .host = m->config->node_name,
                                       },
                                       &m->events);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Event recorder: %m");
        return 0;
}

static int setup_leader(Manager *m) {
        const char *ns = m->config->leader_elect_namespace;
        int r;

        if (!ns) {
                CnKubeConfig *kc = cn_kube_client_get_config(m->kube);

                /* In a pod the service account's namespace is where our Role grants Leases. */
                ns = kc && kc->namespace ? kc->namespace : "kube-system";
        }
        r = cn_kube_leader_new(m->kube,
                               &(CnKubeLeaderOptions) {
                                       .namespace = ns,
                                       .name = m->config->leader_elect_name,
                                       .lease_duration_usec = m->config->daemon.lease_duration,
                                       .renew_deadline_usec = m->config->daemon.renew_deadline,
                                       .retry_period_usec = m->config->daemon.retry_period,
                               },
                               &(CnKubeLeaderCallbacks) {
                                       .started_leading = on_started_leading,
                                       .stopped_leading = on_stopped_leading,
                                       .new_leader = on_new_leader,
                               },
                               m, &m->leader);
        if (r < 0)
                return log_error_errno(r, "Failed to set up leader election: %m");
        log_info("Leader election on Lease %s/%s as %s.", ns, m->config->leader_elect_name,
                 cn_kube_leader_get_identity(m->leader));
        return 0;
}

int manager_new(Config *c, Manager **ret) {
        Manager *m;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->config = c;
        *ret = m;
        return 0;
}

int manager_setup(Manager *m) {
        Config *c = m->config;
        int r;

        /* A loop of our own, not sd_event_default(): libsystemd checks the default loop's thread
         * with a gettid() system call on every iteration. */
        r = sd_event_new(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");
        r = cn_event_setup_daemon(m->event, on_sigterm, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");

        r = cn_http_new(m->event, &m->http);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the HTTP client: %m");
        r = metrics_setup(m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up metrics: %m");
        r = queue_setup(m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the work queue: %m");

        /* In cluster mode up to --concurrent-node-syncs cloud calls run at once: each keeps its
         * connection for the next, plus the few idle ones the HTTP client keeps by default
         * for a provider's other hosts (an identity service, a second API). */
        if (!c->node_name) {
                r = cn_http_set_max_connections(m->http, c->concurrent_node_syncs + (unsigned) CN_HTTP_IDLE_CONNECTIONS_MAX);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the HTTP client: %m");
        }
        m->source = c->node_name ? &instance_source_local : &instance_source_cloud;
        r = m->source->start(m);
        if (r < 0)
                return r;
        r = setup_kube(m);
        if (r < 0)
                return r;
        /* Node mode writes only its own Node: no election. */
        if (!c->node_name && c->daemon.leader_elect) {
                r = setup_leader(m);
                if (r < 0)
                        return r;
        }
        return metrics_serve(m);
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        cn_work_queue_free(m->queue);
        lifecycle_stop(m);
        m->reconcile_timer = sd_event_source_disable_unref(m->reconcile_timer);
        m->metadata_retry = sd_event_source_disable_unref(m->metadata_retry);
        cn_metadata_fetch_free(m->metadata_fetch);
        cn_provider_instance_free(m->local_instance);
        cn_netlink_free(m->netlink);
        cn_node_config_free(m->node_config);
        cn_kube_leader_free(m->leader);
        cn_kube_event_recorder_free(m->events);
        cn_kube_informer_unref(m->nodes);
        cn_kube_client_free(m->kube);
        cn_write_expectations_free(m->address_writes);
        sd_event_source_disable_unref(m->credentials_watch);
        cn_provider_free(m->provider);
        cn_httpd_free(m->httpd);
        cn_http_free(m->http);
        cn_metrics_free(m->metrics.registry);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

/* cn_event_loop(): whether answers from more than one request (API server and cloud alike) are
 * awaited. */
static bool gather(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        return cn_kube_client_awaited(m->kube) + cn_http_awaited(m->http) >= 2;
}

int manager_run(Manager *m) {
        int r;

        r = cn_kube_informer_start(m->nodes);
        if (r < 0)
                return log_error_errno(r, "Failed to start watching Nodes: %m");
        if (m->leader) {
                r = cn_kube_leader_start(m->leader);
                if (r < 0)
                        return log_error_errno(r, "Failed to start leader election: %m");
        } else {
                /* Node mode, or the bootstrap static pod with --leader-elect=false: in charge
                 * right away. */
                m->leading = true;
                (void) cn_metric_set(m->metrics.leader, NULL, 1);
                manager_start_controllers(m);
        }
        if (!m->config->node_name)
                (void) cn_notify_ready(NULL);
        r = cn_event_loop(m->event, m->config->daemon.gather_window, gather, m);
        if (r == -ENOLCK)
                return r; /* lost the Lease: already said so */
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return r;
}
