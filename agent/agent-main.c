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
#include <signal.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "log.h"
#include "platform-detect.h"
#include "render-env.h"
#include "json-util.h"

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

int agent_exit_code_for(int r) {
        switch (r) {
        case -ENXIO:
        case -EPROTONOSUPPORT:
                return AGENT_EXIT_PLATFORM;
        case -EBADMSG:
        case -EFBIG:
                return AGENT_EXIT_METADATA;
        default:
                return AGENT_EXIT_FAILURE;
        }
}

static Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        agent_handoff_free(m);
        cn_metadata_fetch_free(m->fetch);
        cn_http_free(m->http);
        sd_event_unref(m->event);
        cn_node_config_free(m->config);
        cn_instance_metadata_free(m->metadata);
        free(m);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata);

static int manager_new(const AgentArgs *args, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = calloc(1, sizeof(Manager));
        _cleanup_free_ char *error = NULL;
        int r;

        if (!m)
                return log_oom();
        m->args = args;
        r = cn_node_config_load(args->root, args->config, !args->config, &m->config, &error);
        if (r < 0) {
                log_error_errno(r, "Invalid node config: %s", error ?: strerror(-r));
                return -EINVAL;
        }
        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate event loop: %m");
        /* SIGTERM and SIGINT end the loop cleanly (the default handler of a NULL callback). */
        sigset_t mask;
        (void) sigemptyset(&mask);
        (void) sigaddset(&mask, SIGTERM);
        (void) sigaddset(&mask, SIGINT);
        (void) sigaddset(&mask, SIGHUP);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        {
                static const struct {
                        int sig;
                        const char *description;
                } signals[] = { { SIGTERM, "signal-term" }, { SIGINT, "signal-int" }, { SIGHUP, "signal-hup" } };

                for (size_t i = 0; i < ELEMENTSOF(signals); i++) {
                        sd_event_source *source = NULL;

                        /* A NULL handler exits the loop with the userdata as exit code: 0. */
                        r = sd_event_add_signal(m->event, &source, signals[i].sig,
                                                signals[i].sig == SIGHUP ? on_sighup : NULL,
                                                signals[i].sig == SIGHUP ? m : NULL);
                        if (r < 0)
                                return log_error_errno(r, "Failed to watch signal %d: %m", signals[i].sig);
                        (void) sd_event_source_set_description(source, signals[i].description);
                        /* Owned by the loop, freed with it. */
                        (void) sd_event_source_set_floating(source, true);
                        sd_event_source_unref(source);
                }
        }
        r = cn_http_new(m->event, &m->http);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the HTTP client: %m");
        *ret = TAKE_PTR(m);
        return 0;
}

static void on_metadata(int r, CnInstanceMetadata *md, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        if (r < 0 && m->reloading) {
                const char *why = cn_metadata_fetch_error(m->fetch);

                /* A failed reload keeps the files and the state of the last good pass. */
                log_error_errno(r, "Reload: failed to read the instance metadata, keeping the previous files: %s",
                                why ?: strerror(-r));
                m->fetch = cn_metadata_fetch_free(m->fetch);
                m->reloading = false;
                (void) sd_notify(false, "READY=1\nSTATUS=Reload failed, previous files kept");
                return;
        }
        if (r < 0) {
                const char *why = cn_metadata_fetch_error(m->fetch);

                log_error_errno(r, "Failed to read the instance metadata: %s", why ?: strerror(-r));
                (void) sd_notifyf(false, "STATUS=Failed to read the instance metadata: %s", why ?: strerror(-r));
                m->result = agent_exit_code_for(r);
                (void) sd_event_exit(m->event, 0);
                return;
        }
        cn_instance_metadata_free(m->metadata);
        m->metadata = md;
        m->fetch = cn_metadata_fetch_free(m->fetch);
        m->on_metadata(m);
}

static int start_fetch(Manager *m) {
        CnMetadataOptions o;

        cn_metadata_options_from_node_config(&o, m->config, m->args->root);
        if (m->args->platform)
                o.platform = m->args->platform;
        return cn_metadata_fetch(m->event, m->http, &o, on_metadata, m, &m->fetch);
}

/* SIGHUP (daemon mode): read the node config again and do the pass again with it; the hand-off
 * watch goes on. A config that does not parse is reported and the old one kept. */
static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        _cleanup_node_config_ CnNodeConfig *config = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        if (m->fetch || !m->metadata) {
                log_info("Reload requested while reading the metadata, ignoring.");
                return 0;
        }
        r = cn_node_config_load(m->args->root, m->args->config, !m->args->config, &config, &error);
        if (r < 0) {
                log_error_errno(r, "Reload: invalid node config, keeping the previous one: %s", error ?: strerror(-r));
                return 0;
        }
        cn_node_config_free(m->config);
        m->config = TAKE_PTR(config);
        m->reloading = true;
        (void) sd_notify(false, "RELOADING=1\nSTATUS=Reloading");
        r = start_fetch(m);
        if (r < 0) {
                log_error_errno(r, "Reload: failed to start reading the instance metadata: %m");
                m->reloading = false;
                (void) sd_notify(false, "READY=1");
        }
        return 0;
}

/* systemd reads drop-ins when it loads units; a changed kubelet drop-in needs a reload before
 * kubelet starts (the agent is ordered before it). Only on the real root. */
static void reload_systemd(void) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                       "org.freedesktop.systemd1.Manager", "Reload", &error, NULL, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to reload systemd after writing the kubelet drop-in, ignoring: %s",
                                  error.message ?: strerror(-r));
}

static void on_metadata_run(Manager *m) {
        const CnInstanceMetadata *md = m->metadata;
        unsigned written = 0;
        int r;

        r = agent_write_outputs(m, &written);
        if (m->reloading) {
                m->reloading = false;
                if (r >= 0)
                        log_info("Reloaded: %u file(s) updated.", written);
                (void) sd_notifyf(false, "READY=1\nSTATUS=%s", r < 0 ? "Reload failed, previous files kept"
                                                                      : "Reloaded");
                return;
        }
        if (r < 0) {
                (void) sd_notifyf(false, "STATUS=Failed to write the node-local files: %s", strerror(-r));
                /* Metadata that cannot be written safely is rejected metadata, not a write error. */
                m->result = r == -EBADMSG ? AGENT_EXIT_METADATA : AGENT_EXIT_OUTPUT;
                (void) sd_event_exit(m->event, 0);
                return;
        }
        if (written > 0 && !m->args->dry_run && (!m->args->root || streq(m->args->root, "/")) &&
            sd_booted() > 0)
                reload_systemd();
        log_struct(LOG_INFO,
                   CN_FIELDS("CLOUDNODE_PLATFORM", md->platform, "CLOUDNODE_INSTANCE_ID", md->instance_id,
                             "CLOUDNODE_PROVIDER_ID", md->provider_id),
                   "Platform %s, instance %s (%s): %u file(s) updated.", md->platform, md->instance_id,
                   strna(md->provider_id), written);
        (void) sd_notifyf(false, "READY=1\nSTATUS=%s instance %s: %u file(s) updated", md->platform,
                          md->instance_id, written);
        m->result = AGENT_EXIT_SUCCESS;
        /* Daemon mode: a node running the bootstrap static pod waits to hand over. Without a static
         * pod (workers, platforms without a cluster-mode provider, --dry-run) there is nothing to
         * wait for. */
        if (!m->args->once && !m->args->dry_run && m->static_pod) {
                (void) sd_notify(false, "STATUS=Waiting for the in-cluster initializer to hand over");
                if (agent_handoff_start(m) >= 0)
                        return;
                m->result = AGENT_EXIT_FAILURE;
        }
        (void) sd_event_exit(m->event, 0);
}

static const char *format = "env";

static void on_metadata_print(Manager *m) {
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_object *j = NULL;
        size_t size;
        int r;

        if (streq(format, "json")) {
                r = cn_instance_metadata_to_json(m->metadata, &j);
                if (r >= 0)
                        r = cn_json_to_string(j, CN_JSON_PRETTY | CN_JSON_NEWLINE, &text);
        } else
                r = cn_render_env(m->metadata, m->args->afterburn_compat, &text, &size);
        if (r < 0) {
                log_error_errno(r, "Failed to format the metadata: %m");
                m->result = AGENT_EXIT_OUTPUT;
        } else {
                fputs(text, stdout);
                m->result = fflush(stdout) == 0 ? AGENT_EXIT_SUCCESS : AGENT_EXIT_OUTPUT;
        }
        (void) sd_event_exit(m->event, 0);
}

static int parse_argv(int argc, char *argv[], AgentArgs *args, bool *ret_metadata) {
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
                        format = optarg;
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
        *ret_metadata = metadata;
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        AgentArgs args = {};
        bool metadata = false;
        int r;

        cn_log_open("cloudnode-agent", CN_LOG_TARGET_AUTO);
        r = parse_argv(argc, argv, &args, &metadata);
        if (r <= 0)
                return r < 0 ? AGENT_EXIT_USAGE : AGENT_EXIT_SUCCESS;
        r = manager_new(&args, &m);
        if (r < 0)
                return r == -EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_FAILURE;
        m->on_metadata = metadata ? on_metadata_print : on_metadata_run;
        m->result = AGENT_EXIT_FAILURE;

        (void) sd_notify(false, "STATUS=Reading the instance metadata");
        r = start_fetch(m);
        if (r == -ENXIO) {
                log_error("Could not detect the platform: set platform: in the node config, pass --platform, "
                          "or boot with ignition.platform.id=.");
                return AGENT_EXIT_PLATFORM;
        }
        if (r == -EPROTONOSUPPORT) {
                log_error("The platform named on the kernel command line is not supported.");
                return AGENT_EXIT_PLATFORM;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to start reading the instance metadata: %m");
                return agent_exit_code_for(r);
        }
        r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m"), AGENT_EXIT_FAILURE;
        return m->result;
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
