/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus registry: exposition text, escaping, validation, series cap, promtool's verdict. */
#include "metrics.h"
#include "promtool.h"
#include "tap.h"

int main(void) {
        _cleanup_(cn_metrics_freep) CnMetrics *m = NULL;
        _cleanup_buf_ CnBuf out = CN_BUF_INIT(1 << 20);
        CnMetric *req = NULL, *up = NULL, *lat = NULL, *plain = NULL, *dup = NULL;
        static const double bounds[] = { 0.1, 0.5, 2.5 };
        char val[32];
        int r = 0, p;

        TAP_EQ_INT(cn_metrics_new(&m), 0, "new registry");
        TAP_EQ_INT(cn_metrics_counter(m, "cloudnode_kube_requests", "Kubernetes API requests by verb and code.",
                                      CN_LABELS("verb", "code"), &req),
                   0, "counter");
        TAP_EQ_INT(cn_metrics_gauge(m, "cloudnode_leader", "Whether this instance holds the lease.", NULL, &up), 0,
                   "gauge");
        TAP_EQ_INT(cn_metrics_histogram(m, "cloudnode_http_request_duration_seconds",
                                        "HTTP request latency.\nSecond line with \\ backslash.", CN_LABELS("host"),
                                        bounds, ELEMENTSOF(bounds), &lat),
                   0, "histogram");
        TAP_EQ_INT(cn_metrics_counter(m, "cloudnode_node_initializations", "Nodes initialized.", NULL, &plain), 0,
                   "counter without labels");

        TAP_EQ_INT(cn_metrics_counter(m, "cloudnode_kube_requests", "again", NULL, &dup), -EEXIST, "duplicate name");
        TAP_EQ_INT(cn_metrics_counter(m, "0bad", "x", NULL, &dup), -EINVAL, "name starting with a digit");
        TAP_EQ_INT(cn_metrics_counter(m, "bad-name", "x", NULL, &dup), -EINVAL, "name with '-'");
        TAP_EQ_INT(cn_metrics_gauge(m, "g", "x", CN_LABELS("__reserved"), &dup), -EINVAL, "reserved label name");
        TAP_EQ_INT(cn_metrics_gauge(m, "g", "x", CN_LABELS("a", "a"), &dup), -EINVAL, "repeated label name");
        TAP_EQ_INT(cn_metrics_histogram(m, "h", "x", CN_LABELS("le"), bounds, 3, &dup), -EINVAL,
                   "le label on a histogram");
        TAP_EQ_INT(cn_metrics_histogram(m, "h", "x", NULL, (const double[]){ 1, 1 }, 2, &dup), -EINVAL,
                   "buckets not increasing");
        TAP_EQ_INT(cn_metrics_gauge(m, "g", "", NULL, &dup), -EINVAL, "help text required");

        TAP_EQ_INT(cn_metric_inc(req, CN_LABELS("GET", "200")), 0, "inc");
        TAP_EQ_INT(cn_metric_add(req, CN_LABELS("GET", "200"), 2), 0, "add");
        TAP_EQ_INT(cn_metric_inc(req, CN_LABELS("PATCH", "409 \"x\"\n\\y")), 0, "hostile label value");
        TAP_EQ_INT(cn_metric_add(req, CN_LABELS("GET", "200"), -1), -EINVAL, "counters never go down");
        TAP_EQ_INT(cn_metric_inc(req, CN_LABELS("GET")), -EINVAL, "label count mismatch");
        TAP_EQ_INT(cn_metric_inc(req, CN_LABELS("GET", "\xff")), -EINVAL, "invalid UTF-8 label value");
        TAP_EQ_INT(cn_metric_set(req, CN_LABELS("GET", "200"), 5), -EINVAL, "set on a counter");
        TAP_EQ_INT(cn_metric_set(up, NULL, 1), 0, "set gauge");
        TAP_EQ_INT(cn_metric_add(up, NULL, -0.5), 0, "gauge goes down");
        TAP_EQ_INT(cn_metric_observe(lat, CN_LABELS("api"), 0.05), 0, "observe");
        TAP_EQ_INT(cn_metric_observe(lat, CN_LABELS("api"), 0.5), 0, "observe on a bucket bound");
        TAP_EQ_INT(cn_metric_observe(lat, CN_LABELS("api"), 10), 0, "observe above all buckets");

        TAP_EQ_INT(cn_metrics_format(m, &out), 0, "format");
        TAP_EQ_STR(cn_buf_str(&out),
                   "# HELP cloudnode_kube_requests_total Kubernetes API requests by verb and code.\n"
                   "# TYPE cloudnode_kube_requests_total counter\n"
                   "cloudnode_kube_requests_total{verb=\"GET\",code=\"200\"} 3\n"
                   "cloudnode_kube_requests_total{verb=\"PATCH\",code=\"409 \\\"x\\\"\\n\\\\y\"} 1\n"
                   "# HELP cloudnode_leader Whether this instance holds the lease.\n"
                   "# TYPE cloudnode_leader gauge\n"
                   "cloudnode_leader 0.5\n"
                   "# HELP cloudnode_http_request_duration_seconds HTTP request latency.\\nSecond line with \\\\ backslash.\n"
                   "# TYPE cloudnode_http_request_duration_seconds histogram\n"
                   "cloudnode_http_request_duration_seconds_bucket{host=\"api\",le=\"0.1\"} 1\n"
                   "cloudnode_http_request_duration_seconds_bucket{host=\"api\",le=\"0.5\"} 2\n"
                   "cloudnode_http_request_duration_seconds_bucket{host=\"api\",le=\"2.5\"} 2\n"
                   "cloudnode_http_request_duration_seconds_bucket{host=\"api\",le=\"+Inf\"} 3\n"
                   "cloudnode_http_request_duration_seconds_sum{host=\"api\"} 10.55\n"
                   "cloudnode_http_request_duration_seconds_count{host=\"api\"} 3\n"
                   "# HELP cloudnode_node_initializations_total Nodes initialized.\n"
                   "# TYPE cloudnode_node_initializations_total counter\n"
                   "cloudnode_node_initializations_total 0\n",
                   "exposition text: _total, escaping, cumulative buckets, +Inf, _sum, _count");

        p = promtool_check(cn_buf_str(&out));
        if (p < 0)
                tap_ok(1, "# SKIP promtool not installed");
        else
                TAP_OK(p == 1, "promtool check metrics accepts the output");

        {
                _cleanup_buf_ CnBuf again = CN_BUF_INIT(1 << 20);
                uint64_t seen = 0;

                TAP_OK(cn_metric_add_total(plain, NULL, 5, &seen) == 0 && seen == 5, "add_total from 0");
                TAP_OK(cn_metric_add_total(plain, NULL, 7, &seen) == 0 && seen == 7, "add_total adds the growth");
                TAP_OK(cn_metric_add_total(plain, NULL, 7, &seen) == 0 && seen == 7, "add_total without growth");
                TAP_OK(cn_metric_add_total(plain, NULL, 3, &seen) == 0 && seen == 3,
                       "add_total: a source that started over counts from 0");
                TAP_EQ_INT(cn_metrics_format(m, &again), 0, "format again");
                TAP_OK(strstr(cn_buf_str(&again), "\ncloudnode_node_initializations_total 10\n") != NULL,
                       "the counter grew by 5 + 2 + 0 + 3");
        }

        {
                _cleanup_buf_ CnBuf cleared = CN_BUF_INIT(1 << 20);
                CnMetric *sizes = NULL;

                TAP_EQ_INT(cn_metrics_gauge(m, "cloudnode_sizes", "Things by size.", CN_LABELS("size"), &sizes), 0,
                           "gauge with a label");
                TAP_EQ_INT(cn_metric_set(sizes, CN_LABELS("cx22"), 2), 0, "one size");
                TAP_EQ_INT(cn_metric_set(sizes, CN_LABELS("cx32"), 1), 0, "another");
                TAP_EQ_INT(cn_metric_clear(sizes), 0, "clear");
                TAP_EQ_INT(cn_metric_set(sizes, CN_LABELS("cx22"), 3), 0, "set again after the clear");
                TAP_EQ_INT(cn_metrics_format(m, &cleared), 0, "format");
                TAP_OK(strstr(cn_buf_str(&cleared), "cloudnode_sizes{size=\"cx22\"} 3\n") &&
                       !strstr(cn_buf_str(&cleared), "cx32"), "a cleared series is gone, a set one is back");
                TAP_EQ_INT(cn_metric_clear(lat), -EINVAL, "a histogram is never cleared");
        }

        {
                _cleanup_buf_ CnBuf recounted = CN_BUF_INIT(1 << 20);
                CnMetricCounts counts = {};
                CnMetric *total = NULL;

                TAP_EQ_INT(cn_metrics_counter(m, "cloudnode_things_total", "Things by size, recounted.", CN_LABELS("size"),
                                              &total),
                           0, "a counter recomputed as a whole");
                TAP_EQ_INT(cn_metric_add(total, CN_LABELS("gone"), 5), 0, "a series of an earlier count");
                TAP_EQ_INT(cn_metric_counts_add(&counts, CN_LABELS("cx22")), 0, "count one");
                TAP_EQ_INT(cn_metric_counts_add(&counts, CN_LABELS("cx32")), 0, "count another");
                TAP_EQ_INT(cn_metric_counts_add(&counts, CN_LABELS("cx22")), 0, "count the first again");
                TAP_EQ_INT(counts.n, 2, "two label combinations");
                TAP_EQ_INT(cn_metric_counts_publish(&counts, total), 0, "publish");
                cn_metric_counts_done(&counts);
                TAP_EQ_INT(cn_metrics_format(m, &recounted), 0, "format");
                TAP_OK(strstr(cn_buf_str(&recounted), "cloudnode_things_total{size=\"cx22\"} 2\n") &&
                       strstr(cn_buf_str(&recounted), "cloudnode_things_total{size=\"cx32\"} 1\n") &&
                       !strstr(cn_buf_str(&recounted), "gone"), "the counts replace every earlier series");
        }

        for (int i = 0; i < 2000 && r >= 0; i++) {
                snprintf(val, sizeof(val), "%d", i);
                r = cn_metric_inc(req, CN_LABELS("LIST", val));
        }
        TAP_EQ_INT(r, -E2BIG, "label combinations are capped");
        return tap_done();
}
