/* SPDX-License-Identifier: Apache-2.0 */
/* The health/metrics server and the HTTP client on one sd-event loop: routes, status codes,
 * methods, and /metrics output judged by promtool. */
#include "http.h"
#include "httpd.h"
#include "metrics.h"
#include "httpget.h"
#include "promtool.h"
#include "tap.h"

static bool ready;

static int healthz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        int r = cn_buf_add_str(body, "ok\n");
        return r < 0 ? r : 200;
}

static int readyz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        int r = cn_buf_add_str(body, ready ? "ok\n" : "not ready: waiting for informer sync\n");
        *content_type = "text/plain";
        return r < 0 ? r : ready ? 200 : 503;
}

static int broken(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        return -EIO;
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        _cleanup_(cn_httpd_freep) CnHttpd *d = NULL, *d6 = NULL, *bad = NULL;
        _cleanup_(cn_metrics_freep) CnMetrics *m = NULL;
        _cleanup_free_ char *b1 = NULL, *b2 = NULL, *b3 = NULL, *ct = NULL, *b4 = NULL, *b6 = NULL;
        CnMetric *c = NULL;
        uint16_t port;
        int p;

        if (sd_event_new(&e) < 0 || cn_http_new(e, &h) < 0 || cn_metrics_new(&m) < 0)
                return 1;
        TAP_EQ_INT(cn_httpd_new(e, "127.0.0.1", 0, &d), 0, "server on an ephemeral loopback port");
        port = cn_httpd_get_port(d);
        TAP_OK(port > 0, "port %u assigned", port);
        TAP_EQ_INT(cn_httpd_add_handler(d, "/healthz", healthz, NULL), 0, "healthz");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/readyz", readyz, NULL), 0, "readyz");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/broken", broken, NULL), 0, "broken");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/healthz", healthz, NULL), -EEXIST, "path registered twice");
        TAP_EQ_INT(cn_httpd_add_handler(d, "healthz", healthz, NULL), -EINVAL, "relative path");
        TAP_EQ_INT(cn_httpd_add_metrics(d, m), 0, "metrics");
        (void) cn_metrics_counter(m, "cloudnode_test_events", "Test events.", CN_LABELS("kind"), &c);
        (void) cn_metric_inc(c, CN_LABELS("a\"b"));

        TAP_EQ_INT(get(h, port, "GET", "/healthz", &b1, NULL), 200, "GET /healthz is 200");
        TAP_EQ_STR(b1, "ok\n", "healthz body");
        TAP_EQ_INT(get(h, port, "GET", "/readyz", &b2, NULL), 503, "GET /readyz is 503 before ready");
        ready = true;
        TAP_EQ_INT(get(h, port, "GET", "/readyz", NULL, NULL), 200, "GET /readyz is 200 once ready");
        TAP_EQ_INT(get(h, port, "HEAD", "/healthz", &b6, NULL), 200, "HEAD /healthz");
        TAP_EQ_STR(b6, "", "HEAD has no body");
        TAP_EQ_INT(get(h, port, "GET", "/nope", NULL, NULL), 404, "unknown path is 404");
        TAP_EQ_INT(get(h, port, "GET", "/healthz/", NULL, NULL), 404, "paths match exactly");
        TAP_EQ_INT(get(h, port, "POST", "/healthz", NULL, NULL), 405, "POST is 405");
        TAP_EQ_INT(get(h, port, "GET", "/broken", &b4, NULL), 500, "failing handler is 500");
        TAP_EQ_INT(get(h, port, "GET", "/metrics", &b3, &ct), 200, "GET /metrics");
        TAP_EQ_STR(ct, CN_METRICS_CONTENT_TYPE, "metrics content type");
        TAP_OK(b3 && strstr(b3, "cloudnode_test_events_total{kind=\"a\\\"b\"} 1\n"), "metrics body served");
        p = promtool_check(b3 ?: "");
        if (p < 0)
                tap_ok(1, "# SKIP promtool not installed");
        else
                TAP_OK(p == 1, "promtool check metrics accepts /metrics");

        TAP_EQ_INT(cn_httpd_new(e, "::1", 0, &d6), 0, "IPv6 loopback");
        TAP_EQ_INT(cn_httpd_add_handler(d6, "/healthz", healthz, NULL), 0, "healthz on IPv6");
        {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                _cleanup_free_ char *u = NULL;
                TAP_OK(asprintf(&u, "http://[::1]:%u/healthz", cn_httpd_get_port(d6)) > 0 &&
                               cn_http_request_new(h, "GET", u, &r) == 0 && cn_http_request_run(r) == 0 &&
                               cn_http_request_get_status(r) == 200,
                       "GET over IPv6");
        }
        TAP_EQ_INT(cn_httpd_new(e, "localhost", 0, &bad), -EINVAL, "address must be numeric");
        TAP_OK(cn_httpd_new(e, "127.0.0.1", port, &bad) < 0, "port in use is an error");
        return tap_done();
}
