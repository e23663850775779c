/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-controller: `run` reconciles the cluster-side assets (controller-manager.c and its
 * controllers), `render` writes the bootstrap assets for installers (controller-render.c). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "controller-manager.h"
#include "controller-render.h"
#include "deckhouse-hooks.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"

static int help(void) {
        printf("Usage: cloudnode-controller COMMAND [OPTIONS]\n\n"
               "Commands:\n"
               "  run     Reconcile the provider's Deployments, RBAC and cloud config\n"
               "  render  Write the bootstrap static pod and cloud.conf for an installer\n"
               "  deckhouse-hook NAME [--config] [--module-dir DIR] [--crds-dir DIR]\n"
               "          A hook of the Deckhouse module cloud-provider-cloudnode (addon-operator protocol)\n\n"
               "Common options:\n"
               "  -h --help        Show this help\n"
               "     --version     Show the version\n"
               "  -v N             Verbosity (klog-style; 4 and above is debug)\n\n"
               "run:\n"
               "     --kubeconfig FILE            Kubeconfig (default: in-cluster, then $KUBECONFIG)\n"
               "     --namespace NS               Namespace of the operand (required)\n"
               "     --cloud-config-source NS/NAME  Source ConfigMap of cloud.conf\n"
               "                                  (default openshift-config/cloud-provider-config)\n"
               "     --cloud-config-key KEY       Key in the source ConfigMap (default config)\n"
               "     --images-configmap NAME      (default cloud-controller-manager-images)\n"
               "     --cloud-provider NAME        Provider of the operand (default: spec.cloudProvider\n"
               "                                  of CloudnodeOperator cloudnode, else the platform of\n"
               "                                  OpenShift's Infrastructure cluster)\n"
               "     --http-proxy URL --https-proxy URL --no-proxy LIST\n"
               "                                  Proxy environment of the operand (default: ours)\n"
               "     --leader-elect BOOL          (default true)\n"
               "     --leader-elect-lease-duration DUR --leader-elect-renew-deadline DUR\n"
               "     --leader-elect-retry-period DUR\n"
               "     --bind-address ADDR          Health/metrics address (default 0.0.0.0)\n"
               "     --port N                     Health/metrics port, 0 disables (default 10260)\n"
               "     --kube-api-qps Q --kube-api-burst B\n"
               "     --gather-window DUR          With answers awaited from several requests, let them\n"
               "                                  arrive together for DUR (default 0 = off)\n"
               "     --machine-provider NAME      Reconcile CloudnodeMachines with this provider\n"
               "                                  (hetzner, openstack, proxmoxve; Cluster API\n"
               "                                  infrastructure provider)\n"
               "     --machine-cloud-config FILE  The provider's cloud.conf (credentials)\n"
               "     --machine-controller-namespace NS\n"
               "                                  Reconcile machine-controller's Machines (cluster.k8s.io)\n"
               "                                  of this namespace (hetzner, openstack)\n"
               "     --machine-controller-user-data-secret NAME\n"
               "                                  Their user data Secret unless annotated otherwise\n"
               "     --machine-controller-skip-eviction-after DUR\n"
               "                                  Delete without draining after this long (default 2h)\n"
               "     --operand BOOL               Apply and reconcile the node initializer (default true;\n"
               "                                  false on a Cluster API management cluster's provider)\n\n"
               "render:\n"
               "     --dest-dir DIR                     Output directory\n"
               "     --cluster-infrastructure-file FILE An Infrastructure object (YAML or JSON)\n"
               "     --images-file FILE                 images.json (default: the built-in images)\n"
               "     --cloud-config-file FILE           cloud.conf provider settings (YAML)\n");
        return 0;
}

enum {
        ARG_VERSION = 0x100,
        ARG_KUBECONFIG,
        ARG_NAMESPACE,
        ARG_CLOUD_CONFIG_SOURCE,
        ARG_CLOUD_CONFIG_KEY,
        ARG_IMAGES_CONFIGMAP,
        ARG_CLOUD_PROVIDER,
        ARG_HTTP_PROXY,
        ARG_HTTPS_PROXY,
        ARG_NO_PROXY,
        ARG_DEST_DIR,
        ARG_INFRA_FILE,
        ARG_IMAGES_FILE,
        ARG_CLOUD_CONFIG_FILE,
        ARG_MACHINE_PROVIDER,
        ARG_MACHINE_CLOUD_CONFIG,
        ARG_MC_NAMESPACE,
        ARG_MC_USER_DATA_SECRET,
        ARG_MC_SKIP_EVICTION_AFTER,
        ARG_OPERAND,
};

static const struct option options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        { "kubeconfig", required_argument, NULL, ARG_KUBECONFIG },
        { "namespace", required_argument, NULL, ARG_NAMESPACE },
        { "cloud-config-source", required_argument, NULL, ARG_CLOUD_CONFIG_SOURCE },
        { "cloud-config-key", required_argument, NULL, ARG_CLOUD_CONFIG_KEY },
        { "images-configmap", required_argument, NULL, ARG_IMAGES_CONFIGMAP },
        { "http-proxy", required_argument, NULL, ARG_HTTP_PROXY },
        { "https-proxy", required_argument, NULL, ARG_HTTPS_PROXY },
        { "no-proxy", required_argument, NULL, ARG_NO_PROXY },
        { "cloud-provider", required_argument, NULL, ARG_CLOUD_PROVIDER },
        { "dest-dir", required_argument, NULL, ARG_DEST_DIR },
        { "cluster-infrastructure-file", required_argument, NULL, ARG_INFRA_FILE },
        { "images-file", required_argument, NULL, ARG_IMAGES_FILE },
        { "cloud-config-file", required_argument, NULL, ARG_CLOUD_CONFIG_FILE },
        { "machine-provider", required_argument, NULL, ARG_MACHINE_PROVIDER },
        { "machine-cloud-config", required_argument, NULL, ARG_MACHINE_CLOUD_CONFIG },
        { "machine-controller-namespace", required_argument, NULL, ARG_MC_NAMESPACE },
        { "machine-controller-user-data-secret", required_argument, NULL, ARG_MC_USER_DATA_SECRET },
        { "machine-controller-skip-eviction-after", required_argument, NULL, ARG_MC_SKIP_EVICTION_AFTER },
        { "operand", required_argument, NULL, ARG_OPERAND },
        CN_KUBE_DAEMON_LONG_OPTIONS,
        {},
};

static int bad_value(const char *flag, const char *value) {
        log_error("Invalid value for --%s: '%s'", flag, value);
        return -EINVAL;
}

typedef struct Args {
        ControllerOptions run;
        RenderOptions render;
        char *source_namespace_buf;
} Args;

/* 1 to go on, 0 when --help/--version was handled, negative on a bad flag (logged). */
static int parse_argv(int argc, char *argv[], Args *a) {
        int c, r;

        while ((c = getopt_long(argc, argv, "hv:", options, NULL)) >= 0) {
                const char *name = NULL, *flag, *why;

                for (const struct option *o = options; o->name; o++)
                        if (o->val == c)
                                name = o->name;
                r = cn_kube_daemon_parse_option(&a->run.daemon, c, optarg, &flag, &why);
                if (r < 0) {
                        log_error("Invalid value for %s: '%s': %s", flag, optarg, why);
                        return r;
                }
                if (r > 0)
                        continue;
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("cloudnode-controller %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_KUBECONFIG:
                        a->run.kubeconfig = optarg;
                        break;
                case ARG_NAMESPACE:
                        a->run.namespace = optarg;
                        break;
                case ARG_CLOUD_CONFIG_SOURCE: {
                        char *slash = strchr(optarg, '/');

                        if (!slash || slash == optarg || isempty(slash + 1) || strchr(slash + 1, '/'))
                                return bad_value(name, optarg);
                        free(a->source_namespace_buf);
                        a->source_namespace_buf = strndup(optarg, (size_t) (slash - optarg));
                        if (!a->source_namespace_buf)
                                return log_oom();
                        a->run.cloud_config_namespace = a->source_namespace_buf;
                        a->run.cloud_config_name = slash + 1;
                        break;
                }
                case ARG_CLOUD_CONFIG_KEY:
                        a->run.cloud_config_key = optarg;
                        break;
                case ARG_IMAGES_CONFIGMAP:
                        a->run.images_configmap = optarg;
                        break;
                case ARG_CLOUD_PROVIDER:
                        a->run.cloud_provider = optarg;
                        break;
                case ARG_HTTP_PROXY:
                        a->run.http_proxy = optarg;
                        break;
                case ARG_HTTPS_PROXY:
                        a->run.https_proxy = optarg;
                        break;
                case ARG_NO_PROXY:
                        a->run.no_proxy = optarg;
                        break;
                case ARG_DEST_DIR:
                        a->render.dest_dir = optarg;
                        break;
                case ARG_INFRA_FILE:
                        a->render.infrastructure_file = optarg;
                        break;
                case ARG_IMAGES_FILE:
                        a->render.images_file = optarg;
                        break;
                case ARG_CLOUD_CONFIG_FILE:
                        a->render.cloud_config_file = optarg;
                        break;
                case ARG_MACHINE_PROVIDER:
                        a->run.machine_provider = optarg;
                        break;
                case ARG_MACHINE_CLOUD_CONFIG:
                        a->run.machine_cloud_config = optarg;
                        break;
                case ARG_MC_NAMESPACE:
                        if (isempty(optarg))
                                return bad_value(name, optarg);
                        a->run.mc_namespace = optarg;
                        break;
                case ARG_MC_USER_DATA_SECRET:
                        if (isempty(optarg))
                                return bad_value(name, optarg);
                        a->run.mc_user_data_secret = optarg;
                        break;
                case ARG_MC_SKIP_EVICTION_AFTER:
                        if (cn_parse_duration(optarg, &a->run.mc_skip_eviction_after) < 0 ||
                            a->run.mc_skip_eviction_after == 0)
                                return bad_value(name, optarg);
                        break;
                case ARG_OPERAND:
                        r = cn_parse_boolean(optarg);
                        if (r < 0)
                                return bad_value(name, optarg);
                        a->run.no_operand = !r;
                        break;
                default:
                        return -EINVAL;
                }
        }
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        Args a = {
                .run = {
                        .cloud_config_namespace = "openshift-config",
                        .cloud_config_name = "cloud-provider-config",
                        .cloud_config_key = "config",
                        .images_configmap = "cloud-controller-manager-images",
                        .http_proxy = getenv("HTTP_PROXY"),
                        .https_proxy = getenv("HTTPS_PROXY"),
                        .no_proxy = getenv("NO_PROXY"),
                        /* As OpenShift's operators are told their release: the CVO sets it. */
                        .release_version = getenv("RELEASE_VERSION"),
                        .daemon = CN_KUBE_DAEMON_OPTIONS_DEFAULT,
                },
        };
        const char *command, *why;
        int r;

        a.run.daemon.port = CN_CONTROLLER_PORT_DEFAULT;
        r = parse_argv(argc, argv, &a);
        if (r <= 0) {
                free(a.source_namespace_buf);
                return r < 0 ? 2 : 0;
        }
        if (optind >= argc) {
                free(a.source_namespace_buf);
                log_error("Missing command: run or render (see --help)");
                return 2;
        }
        command = argv[optind];
        if (optind + 1 < argc) {
                free(a.source_namespace_buf);
                log_error("Unexpected argument '%s'", argv[optind + 1]);
                return 2;
        }

        if (streq(command, "render")) {
                free(a.source_namespace_buf);
                if (!a.render.dest_dir || !a.render.infrastructure_file) {
                        log_error("render needs --dest-dir and --cluster-infrastructure-file");
                        return 2;
                }
                return cn_controller_render(&a.render) < 0 ? 1 : 0;
        }
        if (!streq(command, "run")) {
                free(a.source_namespace_buf);
                log_error("Unknown command '%s': run or render (see --help)", command);
                return 2;
        }
        if (isempty(a.run.namespace)) {
                free(a.source_namespace_buf);
                log_error("run needs --namespace");
                return 2;
        }
        if (a.run.no_operand && !a.run.machine_provider && !a.run.mc_namespace) {
                free(a.source_namespace_buf);
                log_error("--operand=false leaves nothing to do without --machine-provider or --machine-controller-namespace");
                return 2;
        }
        if (cn_kube_daemon_options_verify(&a.run.daemon, &why) < 0) {
                free(a.source_namespace_buf);
                log_error("%s", why);
                return 2;
        }
        r = manager_new(&a.run, &m);
        if (r < 0)
                r = log_oom();
        if (r >= 0)
                r = manager_setup(m);
        if (r >= 0)
                r = manager_run(m);
        m = manager_free(m);
        free(a.source_namespace_buf);
        /* Every failure was logged where it happened. */
        return r < 0 ? EXIT_FAILURE : r;
}

int main(int argc, char *argv[]) {
        cn_log_open("cloudnode-controller", CN_LOG_TARGET_AUTO);
        if (argc > 1 && streq(argv[1], "deckhouse-hook"))
                return cn_deckhouse_hook_main(argc - 2, argv + 2);
        return run(argc, argv);
}
