/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon behind `cloudnode-controller run`. See controller-manager.h.
 *
 * The Manager owns the loop, the Kubernetes client, the Event recorder, the leader election and
 * the health server, and three controllers behind one interface (new, start, synced,
 * set_leading): the operand controller (operand-controller.c) unless --operand=false, the
 * CloudnodeMachine and CloudnodeCluster controllers (machine-controller.c, cluster-controller.c)
 * with --machine-provider. Only the leader's controllers write. */
#include <errno.h>
#include <signal.h>

#include <systemd/sd-event.h>

#include "cluster-controller.h"
#include "controller-manager.h"
#include "event-util.h"
#include "httpd.h"
#include "kube-client.h"
#include "kube-config.h"
#include "kube-daemon.h"
#include "kube-event.h"
#include "kube-leader.h"
#include "log.h"
#include "machine-controller.h"
#include "mc-machine-controller.h"
#include "mc-machinedeployment-controller.h"
#include "mc-machineset-controller.h"
#include "metrics.h"
#include "operand-controller.h"

#define LEASE_NAME "cloudnode-controller"

struct Manager {
        ControllerOptions options;
        sd_event *event;
        CnKubeClient *client;
        CnKubeEventRecorder *recorder;
        CnKubeLeader *leader;
        CnHttpd *httpd;
        CnKubeDaemonEndpoints endpoints;
        CnMetrics *metrics;
        CnMetric *m_leader;
        bool stopping;

        OperandController *operand;   /* unless --operand=false */
        MachineController *machines;  /* with --machine-provider */
        ClusterController *clusters;  /* with --machine-provider */
        McController *mc_machines;    /* with --machine-controller-namespace */
        McSetController *mc_sets;     /* with --machine-controller-namespace */
        McDeployController *mc_deployments; /* with --machine-controller-namespace */
};

static void set_leading(Manager *m, bool leading) {
        if (m->operand)
                operand_controller_set_leading(m->operand, leading);
        if (m->machines)
                machine_controller_set_leading(m->machines, leading);
        if (m->clusters)
                cluster_controller_set_leading(m->clusters, leading);
        if (m->mc_machines)
                mc_controller_set_leading(m->mc_machines, leading);
        if (m->mc_sets)
                mc_set_controller_set_leading(m->mc_sets, leading);
        if (m->mc_deployments)
                mc_deploy_controller_set_leading(m->mc_deployments, leading);
        (void) cn_metric_set(m->m_leader, NULL, leading ? 1 : 0);
}

static void on_started_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        log_info("Became the leader");
        set_leading(m, true);
}

static void on_stopped_leading(CnKubeLeader *l, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        set_leading(m, false);
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
        if (m->operand)
                operand_controller_stop(m->operand);
        (void) cn_notify_stopping();
        if (m->leader && cn_kube_leader_release(m->leader, on_released, m) >= 0)
                return 0;
        return sd_event_exit(m->event, 0);
}

static const char *not_live(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        return cn_kube_daemon_leader_not_live(m->leader);
}

static const char *not_ready(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if ((m->operand && !operand_controller_synced(m->operand)) || (m->machines && !machine_controller_synced(m->machines)) ||
            (m->clusters && !cluster_controller_synced(m->clusters)) ||
            (m->mc_machines && !mc_controller_synced(m->mc_machines)) ||
            (m->mc_sets && !mc_set_controller_synced(m->mc_sets)) ||
            (m->mc_deployments && !mc_deploy_controller_synced(m->mc_deployments)))
                return "informers not synced";
        return NULL;
}

static void before_scrape(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (m->operand)
                operand_controller_export_watch_restarts(m->operand);
}

int manager_new(const ControllerOptions *o, Manager **ret) {
        Manager *m;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->options = *o;
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        cluster_controller_free(m->clusters); /* borrows from the machine controller */
        machine_controller_free(m->machines);
        mc_controller_free(m->mc_machines);
        mc_set_controller_free(m->mc_sets);
        mc_deploy_controller_free(m->mc_deployments);
        operand_controller_free(m->operand);
        cn_kube_leader_free(m->leader);
        cn_kube_event_recorder_free(m->recorder);
        cn_kube_client_free(m->client);
        cn_httpd_free(m->httpd);
        cn_metrics_free(m->metrics);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

static int setup_controllers(Manager *m) {
        int r;

        if (!m->options.no_operand) {
                r = operand_controller_new(m->event, m->client, m->recorder, m->metrics, &m->options, &m->operand);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the operand controller: %m");
                r = operand_controller_start(m->operand);
                if (r < 0)
                        return log_error_errno(r, "Failed to start API discovery: %m");
        }
        if (m->options.mc_namespace) {
                r = mc_controller_new(m->event, m->client, m->recorder, m->metrics,
                                      &(McControllerOptions) {
                                              .namespace = m->options.mc_namespace,
                                              .user_data_secret = m->options.mc_user_data_secret,
                                              .skip_eviction_after = m->options.mc_skip_eviction_after,
                                      },
                                      &m->mc_machines);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the Machine controller: %m");
                r = mc_controller_start(m->mc_machines);
                if (r < 0)
                        return r;
                r = mc_set_controller_new(m->event, m->client, m->recorder, m->options.mc_namespace, &m->mc_sets);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the MachineSet controller: %m");
                r = mc_set_controller_start(m->mc_sets);
                if (r < 0)
                        return r;
                r = mc_deploy_controller_new(m->event, m->client, m->recorder, m->metrics, m->options.mc_namespace,
                                             &m->mc_deployments);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the MachineDeployment controller: %m");
                r = mc_deploy_controller_start(m->mc_deployments);
                if (r < 0)
                        return r;
        }
        if (!m->options.machine_provider)
                return 0;
        /* Failures are logged by the machine controller, which knows what was wrong. */
        r = machine_controller_new(m->event, m->client, m->recorder, m->metrics, m->options.machine_provider,
                                   m->options.machine_cloud_config, &m->machines);
        if (r < 0)
                return r;
        r = machine_controller_start(m->machines);
        if (r < 0)
                return r;
        r = cluster_controller_new(m->event, m->client, m->recorder, m->machines, &m->clusters);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the CloudnodeCluster controller: %m");
        r = cluster_controller_start(m->clusters);
        if (r < 0)
                return log_error_errno(r, "Failed to start the CloudnodeCluster controller: %m");
        return 0;
}

static int setup_leader(Manager *m) {
        const CnKubeDaemonOptions *o = &m->options.daemon;
        int r;

        if (!o->leader_elect) {
                set_leading(m, true);
                return 0;
        }
        r = cn_kube_leader_new(m->client,
                               &(CnKubeLeaderOptions) {
                                       .namespace = m->options.namespace,
                                       .name = LEASE_NAME,
                                       .lease_duration_usec = o->lease_duration,
                                       .renew_deadline_usec = o->renew_deadline,
                                       .retry_period_usec = o->retry_period,
                               },
                               &leader_callbacks, m, &m->leader);
        if (r < 0)
                return log_error_errno(r, "Invalid leader election settings: %m");
        r = cn_kube_leader_start(m->leader);
        if (r < 0)
                return log_error_errno(r, "Failed to start leader election: %m");
        return 0;
}

int manager_setup(Manager *m) {
        _cleanup_kube_config_ CnKubeConfig *config = NULL;
        _cleanup_free_ char *err = NULL;
        const CnKubeDaemonOptions *o = &m->options.daemon;
        CnKubeClientOptions co = {
                .component = "controller",
                .qps = o->kube_api_qps,
                .burst = o->kube_api_burst,
        };
        int r;

        r = cn_kube_config_load_default(m->options.kubeconfig, NULL, &config, &err);
        if (r < 0)
                return log_error_errno(r, "Failed to load the kubeconfig: %s", strna(err));
        /* A loop of our own, not sd_event_default(): libsystemd checks the default loop's thread
         * with a gettid() system call on every iteration. */
        r = sd_event_new(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop: %m");
        /* SIGHUP is ignored: the controller reads everything it needs from the cluster. */
        r = cn_event_setup_daemon(m->event, on_signal, NULL, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");
        r = cn_kube_client_new(m->event, config, &co, &m->client);
        if (r < 0)
                return log_error_errno(r, "Failed to create the Kubernetes client: %m");
        TAKE_PTR(config);
        r = cn_kube_event_recorder_new(m->client, &(CnKubeEventRecorderOptions) { .component = "cloudnode-controller" },
                                       &m->recorder);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Event recorder: %m");
        r = cn_metrics_new(&m->metrics);
        if (r >= 0)
                r = cn_metrics_gauge(m->metrics, "cloudnode_controller_leader", "1 while this instance is the leader.",
                                     NULL, &m->m_leader);
        if (r < 0)
                return log_error_errno(r, "Failed to set up metrics: %m");

        r = setup_controllers(m);
        if (r < 0)
                return r;
        r = setup_leader(m);
        if (r < 0)
                return r;

        if (o->port > 0) {
                m->endpoints = (CnKubeDaemonEndpoints) {
                        .metrics = m->metrics,
                        .not_live = not_live,
                        .not_ready = not_ready,
                        .before_scrape = before_scrape,
                        .userdata = m,
                };
                r = cn_kube_daemon_serve(m->event, o->bind_address, o->port, &m->endpoints, &m->httpd);
                if (r < 0)
                        return log_error_errno(r, "Failed to serve health and metrics on %s port %u: %m",
                                               o->bind_address, o->port);
                log_info("Serving /healthz, /readyz and /metrics on %s port %u.", o->bind_address,
                         (unsigned) cn_httpd_get_port(m->httpd));
        }

        (void) cn_notify_ready(NULL);
        return 0;
}

/* cn_event_loop(): whether answers from more than one request are awaited. */
static bool gather(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        return cn_kube_client_awaited(m->client) + machine_controller_awaited(m->machines) +
                       mc_controller_awaited(m->mc_machines) >=
               2;
}

int manager_run(Manager *m) {
        int r;

        r = cn_event_loop(m->event, m->options.daemon.gather_window, gather, m);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return r; /* EXIT_FAILURE after a failure that was logged where it happened */
}
