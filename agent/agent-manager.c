/* SPDX-License-Identifier: Apache-2.0 */
/* The Manager of cloudnode-agent: the event loop, one metadata fetch for the pass (and one per
 * SIGHUP in daemon mode), and what happens to the metadata: written as the node-local files
 * (agent-outputs.c, then the hand-off of agent-handoff.c) or printed (`metadata`). */
#include <signal.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "event-util.h"
#include "json-util.h"
#include "log.h"
#include "render-env.h"

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

Manager *manager_free(Manager *m) {
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

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata);

int manager_new(const AgentArgs *args, Manager **ret) {
        Manager *m;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->args = args;
        m->result = AGENT_EXIT_FAILURE;
        *ret = m;
        return 0;
}

int manager_setup(Manager *m) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = cn_node_config_load(m->args->root, m->args->config, !m->args->config, &m->config, &error);
        if (r < 0) {
                log_error_errno(r, "Invalid node config: %s", error ?: strerror(-r));
                return -EINVAL;
        }
        /* A loop of our own, not sd_event_default(): libsystemd checks the default loop's thread
         * with a gettid() system call on every iteration. */
        r = sd_event_new(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate event loop: %m");
        /* SIGTERM and SIGINT end the loop cleanly with 0; SIGHUP reloads (daemon mode). */
        r = cn_event_setup_daemon(m->event, NULL, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");
        r = cn_http_new(m->event, &m->http);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the HTTP client: %m");
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
                (void) cn_notify_ready("Reload failed, previous files kept");
                return;
        }
        if (r < 0) {
                const char *why = cn_metadata_fetch_error(m->fetch);

                log_error_errno(r, "Failed to read the instance metadata: %s", why ?: strerror(-r));
                (void) cn_notify_status("Failed to read the instance metadata: %s", why ?: strerror(-r));
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
        (void) cn_notify_reloading();
        (void) cn_notify_status("Reloading");
        r = start_fetch(m);
        if (r < 0) {
                log_error_errno(r, "Reload: failed to start reading the instance metadata: %m");
                m->reloading = false;
                (void) cn_notify_ready(NULL);
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
        _cleanup_free_ char *status = NULL;
        unsigned written = 0;
        int r;

        r = agent_write_outputs(m, &written);
        if (m->reloading) {
                m->reloading = false;
                if (r >= 0)
                        log_info("Reloaded: %u file(s) updated.", written);
                (void) cn_notify_ready(r < 0 ? "Reload failed, previous files kept" : "Reloaded");
                return;
        }
        if (r < 0) {
                (void) cn_notify_status("Failed to write the node-local files: %s", strerror(-r));
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
        if (asprintf(&status, "%s instance %s: %u file(s) updated", md->platform, md->instance_id, written) < 0)
                status = NULL;
        (void) cn_notify_ready(status);
        m->result = AGENT_EXIT_SUCCESS;
        /* Daemon mode: a node running the bootstrap static pod waits to hand over. Without a static
         * pod (workers, platforms without a cluster-mode provider, --dry-run) there is nothing to
         * wait for. */
        if (!m->args->once && !m->args->dry_run && m->static_pod) {
                (void) cn_notify_status("Waiting for the in-cluster initializer to hand over");
                if (agent_handoff_start(m) >= 0)
                        return;
                m->result = AGENT_EXIT_FAILURE;
        }
        (void) sd_event_exit(m->event, 0);
}

static void on_metadata_print(Manager *m) {
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_object *j = NULL;
        size_t size;
        int r;

        if (streq(m->args->format, "json")) {
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

int manager_run(Manager *m) {
        int r;

        m->on_metadata = m->args->print_metadata ? on_metadata_print : on_metadata_run;
        (void) cn_notify_status("Reading the instance metadata");
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
