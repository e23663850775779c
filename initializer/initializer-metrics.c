/* SPDX-License-Identifier: Apache-2.0 */
/* /healthz, /readyz and /metrics of cloudnode-initializer. */
#include "httpd.h"
#include "initializer.h"
#include "kube-client.h"
#include "kube-informer.h"
#include "kube-leader.h"
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
                                  NULL, &x->leader)) < 0)
                return r;
        /* A series that exists from the start lets rate() see the first restart. */
        r = cn_metric_add(x->watch_restarts, CN_LABELS("nodes"), 0);
        if (r < 0)
                return r;
        return cn_metric_set(x->leader, NULL, 0);
}

static int serve_metrics(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        int r;

        if (m->nodes)
                (void) cn_metric_add_total(m->metrics.watch_restarts, CN_LABELS("nodes"),
                                           cn_kube_informer_get_watch_restarts(m->nodes),
                                           &m->metrics.watch_restarts_seen);
        r = cn_metrics_format(m->metrics.registry, body);
        if (r < 0)
                return r;
        *content_type = CN_METRICS_CONTENT_TYPE;
        return 200;
}

static int serve_healthz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        /* A leader that cannot renew must be restarted, as client-go's HealthzAdaptor decides. */
        if (m->leader && cn_kube_leader_check(m->leader, 20 * USEC_PER_SEC) < 0) {
                (void) cn_buf_add_str(body, "leader election: lease not renewed\n");
                return 500;
        }
        (void) cn_buf_add_str(body, "ok\n");
        return 200;
}

static int serve_readyz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (!m->nodes || !cn_kube_informer_has_synced(m->nodes)) {
                (void) cn_buf_add_str(body, "node cache not synced\n");
                return 503;
        }
        if (m->leader && !m->leading && !cn_kube_leader_get_observed_leader(m->leader)) {
                (void) cn_buf_add_str(body, "leader unknown\n");
                return 503;
        }
        (void) cn_buf_add_str(body, "ok\n");
        return 200;
}

int metrics_serve(Manager *m) {
        int r;

        if (m->config->port == 0)
                return 0;
        r = cn_httpd_new(m->event, m->config->bind_address, (uint16_t) m->config->port, &m->httpd);
        if (r < 0)
                return log_error_errno(r, "Failed to serve health and metrics on %s port %u: %m", m->config->bind_address,
                                       m->config->port);
        if ((r = cn_httpd_add_handler(m->httpd, "/metrics", serve_metrics, m)) < 0 ||
            (r = cn_httpd_add_handler(m->httpd, "/healthz", serve_healthz, m)) < 0 ||
            (r = cn_httpd_add_handler(m->httpd, "/readyz", serve_readyz, m)) < 0)
                return log_error_errno(r, "Failed to register HTTP handlers: %m");
        log_info("Serving /healthz, /readyz and /metrics on %s port %u.", m->config->bind_address,
                 (unsigned) cn_httpd_get_port(m->httpd));
        return 0;
}
