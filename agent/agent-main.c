/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-agent: detect the platform, read the instance metadata, write the node-local files
 * (see cloudnode-agent(8)).
 *
 * Exit codes:
 *   0  success
 *   1  the metadata could not be fetched (network errors, HTTP errors, deadline)
 *   2  bad command line or node config
 *   3  the platform was not detected, or is not supported
 *   4  the metadata was malformed, oversized or unsafe, and was rejected
 *   5  an output file could not be rendered or written
 * On any failure the files of the previous good run stay in place. */
#include <getopt.h>

#include "agent.h"
#include "log.h"

static int help(void) {
        printf("Usage: cloudnode-agent [OPTIONS]\n"
               "       cloudnode-agent metadata [OPTIONS] [--format env|json]\n\n"
               "Detect the cloud platform, read the instance metadata and write the node-local files:\n"
               "/run/metadata/cloudnode, the kubelet drop-in and, on bootstrap/control-plane nodes,\n"
               "cloud.conf and the bootstrap static pod.\n\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "  -v N                   Verbosity (klog-style; 4 and above is debug)\n"
               "     --config FILE       Node config (default /etc/cloudnode/cloudnode.yaml)\n"
               "     --root DIR          Prefix of every path read or written\n"
               "     --platform ID       aws, azure, digitalocean, file, gcp, hetzner, openstack, proxmoxve\n"
               "     --once              One pass, then exit, without the hand-off\n"
               "     --dry-run           Print what would be written; write nothing\n"
               "     --afterburn-compat  Also write Afterburn's AFTERBURN_* names to the env file\n"
               "     --format env|json   (metadata) Output format, default env\n\n"
               "Exit status: 0 success; 1 metadata could not be fetched; 2 bad command line or config;\n"
               "3 platform not detected or unsupported; 4 metadata rejected (malformed, oversized or\n"
               "unsafe); 5 an output file could not be written. Previous good files stay in place.\n");
        return 0;
}

/* 1 to run, 0 when --help/--version was handled, negative on a bad command line (logged). */
static int parse_argv(int argc, char *argv[], AgentArgs *args) {
        enum {
                ARG_VERSION = 0x100,
                ARG_CONFIG,
                ARG_ROOT,
                ARG_PLATFORM,
                ARG_ONCE,
                ARG_DRY_RUN,
                ARG_AFTERBURN,
                ARG_FORMAT,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "root", required_argument, NULL, ARG_ROOT },
                { "platform", required_argument, NULL, ARG_PLATFORM },
                { "once", no_argument, NULL, ARG_ONCE },
                { "dry-run", no_argument, NULL, ARG_DRY_RUN },
                { "afterburn-compat", no_argument, NULL, ARG_AFTERBURN },
                { "format", required_argument, NULL, ARG_FORMAT },
                {},
        };
        bool metadata = false;
        int c;

        /* The subcommand may come first or after the options. */
        if (argc > 1 && streq(argv[1], "metadata")) {
                metadata = true;
                argv[1] = argv[0];
                argc--;
                argv++;
        }
        while ((c = getopt_long(argc, argv, "hv:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("cloudnode-agent %s\n", PACKAGE_VERSION);
                        return 0;
                case 'v': {
                        char *end;
                        long v = strtol(optarg, &end, 10);
                        if (*end || v < 0 || v > 10) {
                                log_error("Invalid verbosity '%s'.", optarg);
                                return -EINVAL;
                        }
                        cn_log_set_verbosity((int) v);
                        break;
                }
                case ARG_CONFIG:
                        args->config = optarg;
                        break;
                case ARG_ROOT:
                        args->root = optarg;
                        break;
                case ARG_PLATFORM:
                        if (!cn_metadata_platform_supported(optarg)) {
                                log_error("Unsupported platform '%s'.", optarg);
                                return -EINVAL;
                        }
                        args->platform = optarg;
                        break;
                case ARG_ONCE:
                        args->once = true;
                        break;
                case ARG_DRY_RUN:
                        args->dry_run = true;
                        break;
                case ARG_AFTERBURN:
                        args->afterburn_compat = true;
                        break;
                case ARG_FORMAT:
                        if (!streq(optarg, "env") && !streq(optarg, "json")) {
                                log_error("Invalid --format '%s': env or json.", optarg);
                                return -EINVAL;
                        }
                        args->format = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                if (!metadata && streq(argv[optind], "metadata") && optind + 1 == argc)
                        metadata = true;
                else {
                        log_error("Unexpected argument '%s'.", argv[optind]);
                        return -EINVAL;
                }
        }
        args->print_metadata = metadata;
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        AgentArgs args = { .format = "env" };
        int r;

        cn_log_open("cloudnode-agent", CN_LOG_TARGET_AUTO);
        r = parse_argv(argc, argv, &args);
        if (r <= 0)
                return r < 0 ? AGENT_EXIT_USAGE : AGENT_EXIT_SUCCESS;
        r = manager_new(&args, &m);
        if (r < 0)
                return log_oom(), AGENT_EXIT_FAILURE;
        r = manager_setup(m);
        if (r < 0)
                return r == -EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_FAILURE;
        return manager_run(m);
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
