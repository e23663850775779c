/* SPDX-License-Identifier: Apache-2.0 */
/* The shared flags and endpoints of the Kubernetes daemons. See kube-daemon.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "httpd.h"
#include "kube-daemon.h"
#include "kube-leader.h"
#include "log.h" /* cn_log_set_verbosity() */
#include "metrics.h"
#include "string-util.h"

static int bad(const char *flag, const char *why, const char **ret_flag, const char **ret_why) {
        *ret_flag = flag;
        *ret_why = why;
        return -EINVAL;
}

static int parse_period(const char *flag, const char *value, usec_t *ret, const char **ret_flag,
                        const char **ret_why) {
        if (cn_parse_duration(value, ret) < 0)
                return bad(flag, "expected a duration such as 30s or 5m", ret_flag, ret_why);
        return 1;
}

int cn_kube_daemon_parse_option(CnKubeDaemonOptions *o, int opt, const char *value, const char **ret_flag,
                                const char **ret_why) {
        unsigned u;
        int r;

        switch (opt) {
        case 'v':
                /* klog writes "-v=2"; getopt hands us "=2". */
                if (value[0] == '=')
                        value++;
                if (cn_safe_atou(value, &u) < 0)
                        return bad("-v", "expected a number", ret_flag, ret_why);
                cn_log_set_verbosity((int) u);
                return 1;
        case CN_KUBE_DAEMON_ARG_LEADER_ELECT:
                r = value ? cn_parse_boolean(value) : 1;
                if (r < 0)
                        return bad("--leader-elect", "expected true or false", ret_flag, ret_why);
                o->leader_elect = r;
                return 1;
        case CN_KUBE_DAEMON_ARG_LEASE_DURATION:
                return parse_period("--leader-elect-lease-duration", value, &o->lease_duration, ret_flag, ret_why);
        case CN_KUBE_DAEMON_ARG_RENEW_DEADLINE:
                return parse_period("--leader-elect-renew-deadline", value, &o->renew_deadline, ret_flag, ret_why);
        case CN_KUBE_DAEMON_ARG_RETRY_PERIOD:
                return parse_period("--leader-elect-retry-period", value, &o->retry_period, ret_flag, ret_why);
        case CN_KUBE_DAEMON_ARG_QPS: {
                char *end;
                double q;

                errno = 0;
                q = strtod(value, &end);
                if (errno != 0 || end == value || *end || !isfinite(q) || q <= 0)
                        return bad("--kube-api-qps", "expected a positive number", ret_flag, ret_why);
                o->kube_api_qps = q;
                return 1;
        }
        case CN_KUBE_DAEMON_ARG_BURST:
                if (cn_safe_atou(value, &u) < 0 || u < 1)
                        return bad("--kube-api-burst", "expected a positive number", ret_flag, ret_why);
                o->kube_api_burst = u;
                return 1;
        case CN_KUBE_DAEMON_ARG_BIND_ADDRESS:
                if (isempty(value))
                        return bad("--bind-address", "expected a numeric IPv4 or IPv6 address", ret_flag, ret_why);
                o->bind_address = value;
                return 1;
        case CN_KUBE_DAEMON_ARG_PORT:
                if (cn_safe_atou(value, &u) < 0 || u > 65535)
                        return bad("--port", "expected a port number 0..65535", ret_flag, ret_why);
                o->port = u;
                return 1;
        case CN_KUBE_DAEMON_ARG_GATHER_WINDOW:
                if (cn_parse_duration(value, &o->gather_window) < 0 || o->gather_window > CN_KUBE_DAEMON_GATHER_WINDOW_MAX)
                        return bad("--gather-window", "expected a duration from 0 to 100ms", ret_flag, ret_why);
                return 1;
        default:
                return 0;
        }
}

int cn_kube_daemon_options_verify(const CnKubeDaemonOptions *o, const char **ret_why) {
        if (o->leader_elect && !(o->renew_deadline < o->lease_duration && o->retry_period < o->renew_deadline)) {
                *ret_why = "leader election needs retry period < renew deadline < lease duration";
                return -EINVAL;
        }
        return 0;
}

const char *cn_kube_daemon_leader_not_live(CnKubeLeader *leader) {
        /* A leader that cannot renew must be restarted, as client-go's HealthzAdaptor decides. */
        if (leader && cn_kube_leader_check(leader, CN_KUBE_DAEMON_LEADER_TOLERANCE) < 0)
                return "leader election: lease not renewed";
        return NULL;
}

static int answer(const char *why, CnBuf *body) {
        if (why) {
                (void) cn_buf_add_str(body, why);
                (void) cn_buf_add_str(body, "\n");
                return 503;
        }
        (void) cn_buf_add_str(body, "ok\n");
        return 200;
}

static int serve_healthz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        const CnKubeDaemonEndpoints *ep = ASSERT_PTR(userdata);

        return answer(ep->not_live ? ep->not_live(ep->userdata) : NULL, body);
}

static int serve_readyz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        const CnKubeDaemonEndpoints *ep = ASSERT_PTR(userdata);

        return answer(ep->not_ready ? ep->not_ready(ep->userdata) : NULL, body);
}

static int serve_metrics(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        const CnKubeDaemonEndpoints *ep = ASSERT_PTR(userdata);
        int r;

        if (ep->before_scrape)
                ep->before_scrape(ep->userdata);
        r = cn_metrics_format(ep->metrics, body);
        if (r < 0)
                return r;
        *content_type = CN_METRICS_CONTENT_TYPE;
        return 200;
}

int cn_kube_daemon_serve(sd_event *e, const char *address, unsigned port, const CnKubeDaemonEndpoints *ep,
                         CnHttpd **ret) {
        _cleanup_(cn_httpd_freep) CnHttpd *d = NULL;
        int r;

        assert(ep && ep->metrics);
        r = cn_httpd_new(e, address, (uint16_t) port, &d);
        if (r < 0)
                return r;
        /* The handlers keep ep: it lives in the daemon's Manager. */
        if ((r = cn_httpd_add_handler(d, "/healthz", serve_healthz, (void *) ep)) < 0 ||
            (r = cn_httpd_add_handler(d, "/readyz", serve_readyz, (void *) ep)) < 0 ||
            (r = cn_httpd_add_handler(d, "/metrics", serve_metrics, (void *) ep)) < 0)
                return r;
        *ret = TAKE_PTR(d);
        return 0;
}
