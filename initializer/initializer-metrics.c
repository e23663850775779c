/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics of cloudnode-initializer, and what its /healthz, /readyz and /metrics (served by
 * lib/kube/kube-daemon) report. */
#include "httpd.h"
#include "initializer-manager.h"
#include "kube-client.h"
#include "kube-informer.h"
#include "kube-leader.h"
#include "kube-workqueue.h"
#include "log.h"
#include "metrics.h"

/* Taint seen -> taint removed: from well under a second (node mode, warm caches) to minutes
 * (a cloud API backing off). */
static const double latency_buckets[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };

int metrics_setup(Manager *m) {
        Metrics *x = &m->metrics;
        int r;

        r = cn_metrics_new(&x->registry);
        if (r < 0)
                return r;
        if ((r = cn_metrics_counter(x->registry, "cloudnode_initializer_nodes_initialized",
                                    "Nodes whose uninitialized taint this process removed.", NULL,
                                    &x->nodes_initialized)) < 0 ||
            (r = cn_metrics_histogram(x->registry, "cloudnode_initializer_initialization_duration_seconds",
                                      "Time from seeing a Node's uninitialized taint to removing it.", NULL,
                                      latency_buckets, ELEMENTSOF(latency_buckets), &x->init_latency)) < 0 ||
            (r = cn_metrics_counter(x->registry, "cloudnode_initializer_initialization_failures",
                                    "Failed attempts to initialize a Node, by reason.", CN_LABELS("reason"),
                                    &x->init_failures)) < 0 ||
            (r = cn_metrics_counter(x->registry, "cloudnode_initializer_address_updates",
                                    "Address patches of initialized Nodes after a change.", NULL,
                                    &x->address_updates)) < 0 ||
            (r = cn_metrics_counter(x->registry, "cloudnode_initializer_nodes_deleted",
                                    "Nodes deleted because their instance no longer exists.", NULL,
                                    &x->nodes_deleted)) < 0 ||
            (r = cn_metrics_counter(x->registry, "cloudnode_initializer_cloud_requests",
                                    "Cloud provider API requests, by operation and result.",
                                    CN_LABELS("provider", "operation", "result"), &x->cloud_requests)) < 0 ||
            (r = cn_metrics_counter(x->registry, "cloudnode_initializer_watch_restarts",
                                    "Watches of the API server that ended and were restarted, by resource.",
                                    CN_LABELS("resource"), &x->watch_restarts)) < 0 ||
            (r = cn_metrics_gauge(x->registry, "cloudnode_initializer_leader",
                                  "1 while this process holds the leader Lease (or runs without leader election).",
                                  NULL, &x->leader)) < 0 ||
            (r = cn_metrics_gauge(x->registry, "cloudnode_initializer_tracked_nodes",
                                  "Nodes this process keeps state for: queued, syncing, awaiting a retry or the "
                                  "watch event of its own write.",
                                  NULL, &x->tracked_nodes)) < 0)
                return r;
        /* A series that exists from the start lets rate() see the first restart. */
        r = cn_metric_add(x->watch_restarts, CN_LABELS("nodes"), 0);
        if (r < 0)
                return r;
        return cn_metric_set(x->leader, NULL, 0);
}

static void before_scrape(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (m->nodes)
                (void) cn_metric_add_total(m->metrics.watch_restarts, CN_LABELS("nodes"),
                                           cn_kube_informer_get_watch_restarts(m->nodes),
                                           &m->metrics.watch_restarts_seen);
        (void) cn_metric_set(m->metrics.tracked_nodes, NULL, m->queue ? (double) cn_work_queue_size(m->queue) : 0);
}

static const char *not_live(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        return cn_kube_daemon_leader_not_live(m->leader);
}

static const char *not_ready(void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (!m->nodes || !cn_kube_informer_has_synced(m->nodes))
                return "node cache not synced";
        if (m->leader && !m->leading && !cn_kube_leader_get_observed_leader(m->leader))
                return "leader unknown";
        return NULL;
}

int metrics_serve(Manager *m) {
        const CnKubeDaemonOptions *o = &m->config->daemon;
        int r;

        if (o->port == 0)
                return 0;
        m->endpoints = (CnKubeDaemonEndpoints) {
                .metrics = m->metrics.registry,
                .not_live = not_live,
                .not_ready = not_ready,
                .before_scrape = before_scrape,
                .userdata = m,
        };
        r = cn_kube_daemon_serve(m->event, o->bind_address, o->port, &m->endpoints, &m->httpd);
        if (r < 0)
                return log_error_errno(r, "Failed to serve health and metrics on %s port %u: %m", o->bind_address,
                                       o->port);
        log_info("Serving /healthz, /readyz and /metrics on %s port %u.", o->bind_address,
                 (unsigned) cn_httpd_get_port(m->httpd));
        return 0;
}
