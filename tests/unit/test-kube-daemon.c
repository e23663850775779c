/* SPDX-License-Identifier: Apache-2.0 */
/* The flags and endpoints the Kubernetes daemons share: each shared flag is parsed with one
 * syntax and one set of limits, inconsistent leader election periods are refused, and the health
 * endpoints answer 503 with the reason for any failed condition (a lease not renewed included),
 * 200 otherwise. */
#include <string.h>

#include "httpd.h"
#include "httpget.h"
#include "kube-daemon.h"
#include "log.h"
#include "metrics.h"
#include "tap.h"

static int parse(CnKubeDaemonOptions *o, int opt, const char *value, const char **ret_flag) {
        const char *why = NULL;
        int r;

        *ret_flag = NULL;
        r = cn_kube_daemon_parse_option(o, opt, value, ret_flag, &why);
        if (r < 0 && !why)
                return -999; /* a refusal must say why */
        return r;
}

static void test_options(void) {
        CnKubeDaemonOptions o = CN_KUBE_DAEMON_OPTIONS_DEFAULT;
        const char *flag, *why;

        TAP_OK(o.leader_elect && o.lease_duration == 15 * USEC_PER_SEC && o.renew_deadline == 10 * USEC_PER_SEC &&
               o.retry_period == 2 * USEC_PER_SEC && o.kube_api_qps == 20 && o.kube_api_burst == 30,
               "defaults are client-go's");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_LEADER_ELECT, "false", &flag), 1, "--leader-elect=false");
        TAP_OK(!o.leader_elect, "turns election off");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_LEADER_ELECT, NULL, &flag), 1, "--leader-elect alone");
        TAP_OK(o.leader_elect, "turns it on");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_LEADER_ELECT, "maybe", &flag), -EINVAL, "--leader-elect=maybe refused");
        TAP_EQ_STR(flag, "--leader-elect", "naming the flag");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_LEASE_DURATION, "30s", &flag), 1, "lease duration");
        TAP_EQ_INT(o.lease_duration, 30 * USEC_PER_SEC, "30s");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_RENEW_DEADLINE, "soon", &flag), -EINVAL, "a bad duration is refused");
        TAP_EQ_STR(flag, "--leader-elect-renew-deadline", "naming the flag");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_QPS, "2.5", &flag), 1, "--kube-api-qps 2.5");
        TAP_OK(o.kube_api_qps == 2.5, "a fraction is kept");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_QPS, "0", &flag), -EINVAL, "--kube-api-qps 0 refused");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_QPS, "inf", &flag), -EINVAL, "--kube-api-qps inf refused");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_BURST, "0", &flag), -EINVAL, "--kube-api-burst 0 refused");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_BURST, "7", &flag), 1, "--kube-api-burst 7");
        TAP_EQ_INT(o.gather_window, 0, "--gather-window defaults to 0 (off)");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_GATHER_WINDOW, "500us", &flag), 1, "--gather-window 500us");
        TAP_EQ_INT(o.gather_window, 500, "500us");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_GATHER_WINDOW, "0", &flag), 1, "--gather-window 0 (off)");
        TAP_EQ_INT(o.gather_window, 0, "0");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_GATHER_WINDOW, "101ms", &flag), -EINVAL, "--gather-window 101ms refused");
        TAP_EQ_STR(flag, "--gather-window", "naming the flag");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_GATHER_WINDOW, "soon", &flag), -EINVAL, "--gather-window soon refused");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_PORT, "0", &flag), 1, "--port 0 (no server)");
        TAP_EQ_INT(o.port, 0, "port 0");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_PORT, "65536", &flag), -EINVAL, "--port 65536 refused");
        TAP_EQ_INT(parse(&o, CN_KUBE_DAEMON_ARG_BIND_ADDRESS, "::1", &flag), 1, "--bind-address ::1");
        TAP_EQ_STR(o.bind_address, "::1", "kept");
        TAP_EQ_INT(parse(&o, 'v', "=4", &flag), 1, "klog's -v=4");
        TAP_EQ_INT(parse(&o, 'v', "x", &flag), -EINVAL, "-v x refused");
        TAP_EQ_STR(flag, "-v", "naming -v");
        cn_log_set_verbosity(0);
        TAP_EQ_INT(parse(&o, 'h', NULL, &flag), 0, "other flags are left to the daemon");

        o = CN_KUBE_DAEMON_OPTIONS_DEFAULT;
        TAP_EQ_INT(cn_kube_daemon_options_verify(&o, &why), 0, "the defaults are consistent");
        o.renew_deadline = o.lease_duration;
        TAP_EQ_INT(cn_kube_daemon_options_verify(&o, &why), -EINVAL, "renew deadline = lease duration refused");
        o.renew_deadline = 10 * USEC_PER_SEC;
        o.retry_period = o.renew_deadline;
        TAP_EQ_INT(cn_kube_daemon_options_verify(&o, &why), -EINVAL, "retry period = renew deadline refused");
        o.leader_elect = false;
        TAP_EQ_INT(cn_kube_daemon_options_verify(&o, &why), 0, "without election the periods do not matter");
}

static const char *live_why, *ready_why;
static unsigned scrapes;

static const char *not_live(void *userdata) {
        return live_why;
}

static const char *not_ready(void *userdata) {
        return ready_why;
}

static void before_scrape(void *userdata) {
        scrapes++;
}

static void test_endpoints(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        _cleanup_(cn_httpd_freep) CnHttpd *d = NULL;
        _cleanup_(cn_metrics_freep) CnMetrics *m = NULL;
        _cleanup_free_ char *b1 = NULL, *b2 = NULL, *b3 = NULL, *b4 = NULL, *ct = NULL;
        CnKubeDaemonEndpoints ep = {};
        CnMetric *g = NULL;
        uint16_t port;

        if (sd_event_new(&e) < 0 || cn_http_new(e, &h) < 0 || cn_metrics_new(&m) < 0 ||
            cn_metrics_gauge(m, "test_up", "Up.", NULL, &g) < 0)
                tap_skip_all("no event loop");
        ep = (CnKubeDaemonEndpoints) {
                .metrics = m,
                .not_live = not_live,
                .not_ready = not_ready,
                .before_scrape = before_scrape,
        };
        TAP_EQ_INT(cn_kube_daemon_serve(e, "127.0.0.1", 0, &ep, &d), 0, "serving on a free port");
        port = cn_httpd_get_port(d);

        TAP_EQ_INT(get(h, port, "GET", "/healthz", NULL, NULL), 200, "/healthz 200 while live");
        live_why = cn_kube_daemon_leader_not_live(NULL);
        TAP_OK(!live_why, "no leader election: nothing to fail");
        live_why = "leader election: lease not renewed";
        TAP_EQ_INT(get(h, port, "GET", "/healthz", &b1, NULL), 503, "a lease not renewed: /healthz 503");
        TAP_EQ_STR(b1, "leader election: lease not renewed\n", "with the reason");
        live_why = NULL;

        ready_why = "informers not synced";
        TAP_EQ_INT(get(h, port, "GET", "/readyz", &b2, NULL), 503, "not ready: /readyz 503");
        TAP_EQ_STR(b2, "informers not synced\n", "with the reason");
        ready_why = NULL;
        TAP_EQ_INT(get(h, port, "GET", "/readyz", &b3, NULL), 200, "ready: /readyz 200");
        TAP_EQ_STR(b3, "ok\n", "ok");

        TAP_EQ_INT(get(h, port, "GET", "/metrics", &b4, &ct), 200, "/metrics 200");
        TAP_OK(b4 && strstr(b4, "test_up 0"), "the registry is served");
        TAP_OK(ct && strstr(ct, "text/plain; version=0.0.4"), "in the Prometheus text format (%s)", strna(ct));
        TAP_EQ_INT(scrapes, 1, "before_scrape ran once per scrape");
}

int main(void) {
        test_options();
        test_endpoints();
        return tap_done();
}
