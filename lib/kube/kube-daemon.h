/* SPDX-License-Identifier: Apache-2.0 */
/* What the Kubernetes daemons (cloudnode-initializer, cloudnode-controller) share around their
 * own logic: the flags they both take (--leader-elect*, --kube-api-qps/--kube-api-burst,
 * --bind-address/--port, -v), parsed and validated here with the same syntax and limits, and the
 * /healthz, /readyz and /metrics endpoints, so that the same condition gives the same status code
 * in both. */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include <systemd/sd-event.h>

#include "time-util.h"

typedef struct CnHttpd CnHttpd;
typedef struct CnMetrics CnMetrics;
typedef struct CnKubeLeader CnKubeLeader;

typedef struct CnKubeDaemonOptions {
        bool leader_elect;
        usec_t lease_duration, renew_deadline, retry_period;
        double kube_api_qps;
        unsigned kube_api_burst;
        const char *bind_address;
        unsigned port; /* 0: no health and metrics server */
        usec_t gather_window; /* cn_event_loop()'s window; 0: none */
} CnKubeDaemonOptions;

/* --gather-window: off unless asked for. 5 ms, long enough for the answers of a burst of requests
 * to arrive together and short beside any timeout or period of the daemons, is what the benches
 * measured: it slows the pace by a tenth and its CPU gain at 5000 Nodes was within the machine's
 * drift (README, the initializer's sixteenth and seventeenth rounds). */
#define CN_KUBE_DAEMON_GATHER_WINDOW_DEFAULT 0
#define CN_KUBE_DAEMON_GATHER_WINDOW_MAX (100 * USEC_PER_MSEC)

/* The defaults of client-go and cloud-controller-manager; bind_address 0.0.0.0, port 0. */
#define CN_KUBE_DAEMON_OPTIONS_DEFAULT                                                                 \
        ((CnKubeDaemonOptions) {                                                                       \
                .leader_elect = true,                                                                  \
                .lease_duration = 15 * USEC_PER_SEC,                                                   \
                .renew_deadline = 10 * USEC_PER_SEC,                                                   \
                .retry_period = 2 * USEC_PER_SEC,                                                      \
                .kube_api_qps = 20,                                                                    \
                .kube_api_burst = 30,                                                                  \
                .bind_address = "0.0.0.0",                                                             \
                .gather_window = CN_KUBE_DAEMON_GATHER_WINDOW_DEFAULT,                                 \
        })

enum {
        CN_KUBE_DAEMON_ARG_LEADER_ELECT = 0x1000,
        CN_KUBE_DAEMON_ARG_LEASE_DURATION,
        CN_KUBE_DAEMON_ARG_RENEW_DEADLINE,
        CN_KUBE_DAEMON_ARG_RETRY_PERIOD,
        CN_KUBE_DAEMON_ARG_QPS,
        CN_KUBE_DAEMON_ARG_BURST,
        CN_KUBE_DAEMON_ARG_BIND_ADDRESS,
        CN_KUBE_DAEMON_ARG_PORT,
        CN_KUBE_DAEMON_ARG_GATHER_WINDOW,
};

/* The getopt_long() entries of the shared long flags (-v is the short option "v:"). */
#define CN_KUBE_DAEMON_LONG_OPTIONS                                                                    \
        { "leader-elect", optional_argument, NULL, CN_KUBE_DAEMON_ARG_LEADER_ELECT },                  \
        { "leader-elect-lease-duration", required_argument, NULL, CN_KUBE_DAEMON_ARG_LEASE_DURATION }, \
        { "leader-elect-renew-deadline", required_argument, NULL, CN_KUBE_DAEMON_ARG_RENEW_DEADLINE }, \
        { "leader-elect-retry-period", required_argument, NULL, CN_KUBE_DAEMON_ARG_RETRY_PERIOD },     \
        { "kube-api-qps", required_argument, NULL, CN_KUBE_DAEMON_ARG_QPS },                           \
        { "kube-api-burst", required_argument, NULL, CN_KUBE_DAEMON_ARG_BURST },                       \
        { "bind-address", required_argument, NULL, CN_KUBE_DAEMON_ARG_BIND_ADDRESS },                  \
        { "port", required_argument, NULL, CN_KUBE_DAEMON_ARG_PORT },                                  \
        { "gather-window", required_argument, NULL, CN_KUBE_DAEMON_ARG_GATHER_WINDOW }

/* One option from getopt_long(): 1 when it is a shared one and was taken (value is kept, not
 * copied: argv outlives the options), 0 when it is not a shared one, -EINVAL for a bad value with
 * *ret_flag the flag ("--port", "-v") and *ret_why what is expected. */
int cn_kube_daemon_parse_option(CnKubeDaemonOptions *o, int opt, const char *value, const char **ret_flag,
                                const char **ret_why);
/* After parsing: -EINVAL with *ret_why when the leader election periods are inconsistent
 * (they must be retry period < renew deadline < lease duration). */
int cn_kube_daemon_options_verify(const CnKubeDaemonOptions *o, const char **ret_why);

/* How long a leader's renewal may be overdue before /healthz fails (client-go's HealthzAdaptor). */
#define CN_KUBE_DAEMON_LEADER_TOLERANCE (20 * USEC_PER_SEC)

typedef struct CnKubeDaemonEndpoints {
        CnMetrics *metrics;
        /* NULL when live, else why not: /healthz answers 503 with it. */
        const char *(*not_live)(void *userdata);
        /* NULL when ready, else why not: /readyz answers 503 with it. */
        const char *(*not_ready)(void *userdata);
        /* Called before /metrics is formatted, to fold counters kept elsewhere in. */
        void (*before_scrape)(void *userdata);
        void *userdata;
} CnKubeDaemonEndpoints;

/* Why a daemon with this leader (NULL: no leader election) is not live, or NULL. */
const char *cn_kube_daemon_leader_not_live(CnKubeLeader *leader);

/* Serves /healthz, /readyz and /metrics on address:port (0: a free one); ep must outlive the server. */
int cn_kube_daemon_serve(sd_event *e, const char *address, unsigned port, const CnKubeDaemonEndpoints *ep,
                         CnHttpd **ret);
