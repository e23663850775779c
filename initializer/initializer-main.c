/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: flags and entry point. Flags that also exist on Kubernetes'
 * cloud-controller-manager have the same name, meaning and default there (see
 * docs/cloudnode-initializer.8); the one deliberate difference is --port (see below). */
#include <getopt.h>

#include "initializer-config.h"
#include "initializer-manager.h"
#include "log.h"
#include "provider.h"
#include "string-util.h"

void config_done(Config *c) {
        free(c->kubeconfig);
        free(c->node_name);
        free(c->config_path);
        free(c->root);
        free(c->cloud_provider);
        free(c->cloud_config);
        free(c->cloud_credentials_dir);
        free(c->leader_elect_namespace);
        free(c->leader_elect_name);
}

static int help(void) {
        _cleanup_free_ char *providers = cn_provider_names();

        if (!providers)
                return log_oom();
        printf("Usage: cloudnode-initializer [OPTIONS]\n\n"
               "Initializes Kubernetes Nodes: addresses, providerID, instance-type and topology labels,\n"
               "removal of the node.cloudprovider.kubernetes.io/uninitialized taint.\n\n"
               "  -h --help                             Show this help\n"
               "     --version                          Show the version\n"
               "  -v N                                  Verbosity (klog-style; 4 and above is debug)\n"
               "     --kubeconfig FILE                  Kubeconfig (default: in-cluster, then $KUBECONFIG)\n"
               "     --node-name NAME                   Node mode: initialize this Node from local metadata\n"
               "     --config FILE                      Node config (node mode, default %s)\n"
               "     --cloud-provider NAME              Cluster mode: %s\n"
               "     --cloud-config FILE                Cloud provider configuration (cloud.conf)\n"
               "     --cloud-credentials-dir DIR        Cluster mode: credentials from a mounted Secret, re-read on change\n"
               "     --controllers LIST                 cloud-node, cloud-node-lifecycle, '*', '-NAME' (default '*')\n"
               "     --leader-elect BOOL                Leader election on a Lease (default true)\n"
               "     --leader-elect-lease-duration DUR  (default 15s)\n"
               "     --leader-elect-renew-deadline DUR  (default 10s)\n"
               "     --leader-elect-retry-period DUR    (default 2s)\n"
               "     --leader-elect-resource-name NAME  (default cloud-controller-manager)\n"
               "     --leader-elect-resource-namespace NS (default: the service account's, else kube-system)\n"
               "     --bind-address ADDR                Address of the health/metrics server (default 0.0.0.0)\n"
               "     --port N                           Port of /healthz /readyz /metrics (default %u, 0 = off)\n"
               "     --concurrent-node-syncs N          Nodes initialized in parallel (default 1)\n"
               "     --kube-api-qps Q                   Client-side API rate limit (default 20)\n"
               "     --kube-api-burst B                 Client-side API burst (default 30)\n"
               "     --gather-window DUR                With answers awaited from several requests, let\n"
               "                                        them arrive together for DUR (default 0 = off)\n"
               "     --node-status-update-frequency DUR Address reconciliation period (default 5m)\n"
               "     --node-monitor-period DUR          Lifecycle check period (default 5s)\n"
               "     --node-startup-grace-period DUR    No deletion of Nodes younger than this (default 1m)\n",
               "/etc/cloudnode/cloudnode.yaml", providers, CN_INITIALIZER_PORT_DEFAULT);
        return 0;
}

static const struct {
        const char *name;
        unsigned bit;
} controller_table[] = {
        { "cloud-node", CONTROLLER_CLOUD_NODE },
        { "cloud-node-lifecycle", CONTROLLER_CLOUD_NODE_LIFECYCLE },
};

/* Like cloud-controller-manager: a list of names, '*' for every controller enabled by default,
 * '-name' disables one; a list without '*' names exactly the controllers to run. */
int config_parse_controllers(const char *s, unsigned *ret) {
        _cleanup_strv_free_ char **l = NULL;
        unsigned on = 0, off = 0;
        bool star = false;
        int r;

        r = strv_split(s, ",", &l);
        if (r < 0)
                return r;
        for (char **i = l; i && *i; i++) {
                const char *n = cn_strstrip(*i);
                bool neg = n[0] == '-';
                bool found = false;

                if (streq(n, "*")) {
                        star = true;
                        continue;
                }
                if (neg)
                        n++;
                for (size_t k = 0; k < ELEMENTSOF(controller_table); k++)
                        if (streq(n, controller_table[k].name)) {
                                if (neg)
                                        off |= controller_table[k].bit;
                                else
                                        on |= controller_table[k].bit;
                                found = true;
                        }
                if (!found)
                        return -EINVAL;
        }
        if (star)
                on |= CONTROLLER_CLOUD_NODE | CONTROLLER_CLOUD_NODE_LIFECYCLE;
        *ret = on & ~off;
        return 0;
}

static int set_string(char **p, const char *v) {
        char *c = strdup(v);

        if (!c)
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

static int bad_flag(const char *flag, const char *value, const char *what) {
        fprintf(stderr, "cloudnode-initializer: invalid value '%s' for %s: %s\n", value, flag, what);
        return -EINVAL;
}

enum {
        ARG_VERSION = 0x100,
        ARG_KUBECONFIG,
        ARG_NODE_NAME,
        ARG_CONFIG,
        ARG_ROOT,
        ARG_CLOUD_PROVIDER,
        ARG_CLOUD_CONFIG,
        ARG_CLOUD_CREDENTIALS_DIR,
        ARG_CONTROLLERS,
        ARG_LE_NAME,
        ARG_LE_NAMESPACE,
        ARG_SYNCS,
        ARG_STATUS_FREQ,
        ARG_MONITOR_PERIOD,
        ARG_STARTUP_GRACE,
};

static int parse_duration_flag(const char *flag, const char *v, usec_t *ret) {
        if (cn_parse_duration(v, ret) < 0)
                return bad_flag(flag, v, "expected a duration such as 30s or 5m");
        return 0;
}

/* 1 to run, 0 when --help/--version was handled, negative on a bad flag (after one clear line on
 * stderr). */
static int parse_argv(Config *c, int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "v", required_argument, NULL, 'v' },
                { "kubeconfig", required_argument, NULL, ARG_KUBECONFIG },
                { "node-name", required_argument, NULL, ARG_NODE_NAME },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "root", required_argument, NULL, ARG_ROOT },
                { "cloud-provider", required_argument, NULL, ARG_CLOUD_PROVIDER },
                { "cloud-config", required_argument, NULL, ARG_CLOUD_CONFIG },
                { "cloud-credentials-dir", required_argument, NULL, ARG_CLOUD_CREDENTIALS_DIR },
                { "controllers", required_argument, NULL, ARG_CONTROLLERS },
                { "leader-elect-resource-name", required_argument, NULL, ARG_LE_NAME },
                { "leader-elect-resource-namespace", required_argument, NULL, ARG_LE_NAMESPACE },
                { "concurrent-node-syncs", required_argument, NULL, ARG_SYNCS },
                { "node-status-update-frequency", required_argument, NULL, ARG_STATUS_FREQ },
                { "node-monitor-period", required_argument, NULL, ARG_MONITOR_PERIOD },
                { "node-startup-grace-period", required_argument, NULL, ARG_STARTUP_GRACE },
                CN_KUBE_DAEMON_LONG_OPTIONS,
                {},
        };
        const char *flag, *why;
        unsigned u;
        int opt, r, idx;

        *c = (Config) {
                .controllers = CONTROLLER_CLOUD_NODE | CONTROLLER_CLOUD_NODE_LIFECYCLE,
                .daemon = CN_KUBE_DAEMON_OPTIONS_DEFAULT,
                .concurrent_node_syncs = 1,
                .node_status_update_frequency = 5 * USEC_PER_MINUTE,
                .node_monitor_period = 5 * USEC_PER_SEC,
                .node_startup_grace_period = USEC_PER_MINUTE,
        };
        c->daemon.port = CN_INITIALIZER_PORT_DEFAULT;
        if (set_string(&c->leader_elect_name, "cloud-controller-manager") < 0)
                return log_oom();

        opterr = 0;
        while ((opt = getopt_long(argc, argv, "hv:", options, &idx)) >= 0) {
                const char *v = optarg;

                r = 0;
                flag = opt == '?' || opt == ':' ? argv[optind - 1] : NULL;
                r = cn_kube_daemon_parse_option(&c->daemon, opt, v, &flag, &why);
                if (r < 0)
                        return bad_flag(flag, v, why);
                if (r > 0)
                        continue;
                switch (opt) {
                case 'h':
                        return help();
                case ARG_VERSION:
                        printf("cloudnode-initializer %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_KUBECONFIG:
                        r = set_string(&c->kubeconfig, v);
                        break;
                case ARG_NODE_NAME:
                        /* Empty: node mode with the node config's nodeName (the unit passes the
                         * metadata host name, which an instance may not have). */
                        r = set_string(&c->node_name, strempty(v));
                        break;
                case ARG_CONFIG:
                        r = set_string(&c->config_path, v);
                        break;
                case ARG_ROOT:
                        r = set_string(&c->root, v);
                        break;
                case ARG_CLOUD_PROVIDER:
                        r = set_string(&c->cloud_provider, v);
                        break;
                case ARG_CLOUD_CONFIG:
                        r = set_string(&c->cloud_config, v);
                        break;
                case ARG_CLOUD_CREDENTIALS_DIR:
                        r = set_string(&c->cloud_credentials_dir, v);
                        break;
                case ARG_CONTROLLERS:
                        if (config_parse_controllers(v, &c->controllers) < 0)
                                return bad_flag("--controllers", v,
                                                "expected a list of cloud-node, cloud-node-lifecycle, '*', '-NAME'");
                        break;
                case ARG_LE_NAME:
                        r = set_string(&c->leader_elect_name, v);
                        break;
                case ARG_LE_NAMESPACE:
                        r = set_string(&c->leader_elect_namespace, v);
                        break;
                case ARG_SYNCS:
                        if (cn_safe_atou(v, &u) < 0 || u < 1 || u > 1000)
                                return bad_flag("--concurrent-node-syncs", v, "expected a number 1..1000");
                        c->concurrent_node_syncs = u;
                        break;
                case ARG_STATUS_FREQ:
                        if (parse_duration_flag("--node-status-update-frequency", v, &c->node_status_update_frequency) < 0)
                                return -EINVAL;
                        if (c->node_status_update_frequency == 0)
                                return bad_flag("--node-status-update-frequency", v, "must be positive");
                        break;
                case ARG_MONITOR_PERIOD:
                        if (parse_duration_flag("--node-monitor-period", v, &c->node_monitor_period) < 0)
                                return -EINVAL;
                        if (c->node_monitor_period == 0)
                                return bad_flag("--node-monitor-period", v, "must be positive");
                        break;
                case ARG_STARTUP_GRACE:
                        if (parse_duration_flag("--node-startup-grace-period", v, &c->node_startup_grace_period) < 0)
                                return -EINVAL;
                        break;
                case ':':
                        fprintf(stderr, "cloudnode-initializer: option %s needs a value\n", flag);
                        return -EINVAL;
                default:
                        fprintf(stderr, "cloudnode-initializer: unknown option %s\n", flag);
                        return -EINVAL;
                }
                if (r < 0)
                        return log_oom();
        }
        if (optind < argc) {
                fprintf(stderr, "cloudnode-initializer: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        if (!c->leader_elect_name[0]) {
                fprintf(stderr, "cloudnode-initializer: --leader-elect-resource-name must not be empty\n");
                return -EINVAL;
        }
        if (cn_kube_daemon_options_verify(&c->daemon, &why) < 0) {
                fprintf(stderr, "cloudnode-initializer: %s\n", why);
                return -EINVAL;
        }
        if (!c->node_name && !c->cloud_provider) {
                fprintf(stderr, "cloudnode-initializer: cluster mode needs --cloud-provider (or --node-name for "
                                "node mode)\n");
                return -EINVAL;
        }
        if (!c->node_name && (c->controllers & (CONTROLLER_CLOUD_NODE | CONTROLLER_CLOUD_NODE_LIFECYCLE)) == 0) {
                fprintf(stderr, "cloudnode-initializer: --controllers enables no controller\n");
                return -EINVAL;
        }
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(config_done) Config config = {};
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        r = parse_argv(&config, argc, argv);
        if (r < 0)
                return 2; /* a usage error, said already */
        if (r == 0)
                return EXIT_SUCCESS;
        r = manager_new(&config, &m);
        if (r < 0)
                return log_oom();
        r = manager_setup(m);
        if (r < 0)
                return r;
        return manager_run(m);
}

int main(int argc, char *argv[]) {
        int r;

        cn_log_open("cloudnode-initializer", CN_LOG_TARGET_AUTO);
        r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : r;
}
