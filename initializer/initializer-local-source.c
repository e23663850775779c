/* SPDX-License-Identifier: Apache-2.0 */
/* The instance source of node mode (--node-name, initializer-source.h): the instance comes from the local metadata service (like the agent
 * reads it), the Node from a watch narrowed to metadata.name, and the local addresses from a
 * netlink subscription. After our Node is initialized we tell systemd READY=1 and from then on
 * only patch the addresses, and only when the computed list changes. */
#include <ctype.h>

#include "event-util.h"
#include "initializer-manager.h"
#include "initializer-queue.h"
#include "initializer-sync.h"
#include "kube-informer.h"
#include "log.h"
#include "metadata.h"
#include "netlink.h"
#include "node-config.h"
#include "node-patch.h"
#include "provider.h"

#define METADATA_BACKOFF_BASE (1 * USEC_PER_SEC)
#define METADATA_BACKOFF_CAP (2 * USEC_PER_MINUTE)

static void start_fetch(Manager *m);

static json_object *own_node(Manager *m) {
        return m->nodes ? cn_kube_informer_lookup(m->nodes, NULL, m->config->node_name) : NULL;
}

static void notify_ready(Manager *m) {
        if (m->notified_ready)
                return;
        m->notified_ready = true;
        (void) cn_notify_ready_status("Node %s initialized", m->config->node_name);
}

/* What to do with our Node now: initialize it, or (when our inputs changed: local addresses,
 * metadata) keep its addresses current. Changes of the Node itself never trigger an address
 * write, so we cannot end up in a write loop with another writer of status.addresses. */
static void reconsider(Manager *m, bool inputs_changed) {
        json_object *node = own_node(m);
        int r;

        if (!node || !m->controllers_started)
                return;
        if (cn_node_has_taint(node, CN_TAINT_UNINITIALIZED)) {
                queue_add(m, m->config->node_name);
                return;
        }
        /* Initialized (by us, earlier, or by someone else): we are done starting up, after one
         * check that its addresses are still what we would write. */
        if (!m->notified_ready)
                inputs_changed = true;
        notify_ready(m);
        if (!inputs_changed || !m->local_instance || !cn_netlink_ready(m->netlink))
                return;
        r = sync_update_addresses(m, node, m->local_instance);
        if (r < 0 && r != -ENODATA)
                log_debug_errno(r, "Not updating addresses of node %s: %m", m->config->node_name);
}

static int on_metadata_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        m->metadata_retry = sd_event_source_disable_unref(m->metadata_retry);
        start_fetch(m);
        return 0;
}

static void on_metadata(int r, CnInstanceMetadata *md, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        _cleanup_(cn_instance_metadata_freep) CnInstanceMetadata *owned = md;
        CnProviderInstance *i = NULL;

        m->metadata_fetch = cn_metadata_fetch_free(m->metadata_fetch);
        if (r >= 0)
                r = cn_provider_instance_from_metadata(md, &i);
        if (r < 0) {
                usec_t delay = cn_backoff_next(&m->metadata_backoff, 0);

                m->metadata_error = r;
                log_warning_errno(r, "Failed to read instance metadata, retrying in %.1fs: %m",
                                  (double) delay / USEC_PER_SEC);
                r = sd_event_add_time_relative(m->event, &m->metadata_retry, CLOCK_MONOTONIC, delay, USEC_PER_MSEC,
                                               on_metadata_retry, m);
                if (r >= 0)
                        (void) sd_event_source_set_description(m->metadata_retry, "metadata-retry");
                /* Let a tainted Node carry a Warning that says why it stays tainted. */
                reconsider(m, false);
                return;
        }
        cn_backoff_reset(&m->metadata_backoff);
        m->metadata_error = 0;
        cn_provider_instance_free(m->local_instance);
        m->local_instance = i;
        log_info("Instance metadata read: platform %s, instance %s.", strna(md->platform), strna(md->instance_id));
        reconsider(m, true);
}

static void start_fetch(Manager *m) {
        CnMetadataOptions o = CN_METADATA_OPTIONS_INIT;
        int r;

        if (m->metadata_fetch)
                return;
        cn_metadata_options_from_node_config(&o, m->node_config, m->config->root);
        if (m->config->cloud_provider)
                o.platform = m->config->cloud_provider;
        r = cn_metadata_fetch(m->event, m->http, &o, on_metadata, m, &m->metadata_fetch);
        if (r < 0)
                on_metadata(r, NULL, m);
}

static void on_netlink(CnNetlink *nl, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);

        log_debug("Local addresses changed.");
        reconsider(m, true);
}

static int start(Manager *m) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = cn_node_config_load(m->config->root, m->config->config_path, !m->config->config_path, &m->node_config, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to load node config %s: %s", m->config->config_path ?: CN_NODE_CONFIG_PATH,
                                       error ?: strerror(-r));
        /* Wait for the Node under the name the kubelet registers: the node config's nodeName (the
         * agent writes it into the kubelet's drop-in), else the given name in lower case, as the
         * kubelet lowers its host name. */
        if (!isempty(m->node_config->node_name) && !streq(m->node_config->node_name, m->config->node_name)) {
                char *n = strdup(m->node_config->node_name);

                if (!n)
                        return log_oom();
                if (!isempty(m->config->node_name))
                        log_info("Node name %s from the node config (not %s).", n, m->config->node_name);
                free(m->config->node_name);
                m->config->node_name = n;
        } else if (isempty(m->config->node_name))
                return log_error_errno(-EINVAL,
                                       "No node name: --node-name is empty (the metadata has no host name) and "
                                       "the node config sets no nodeName.");
        else
                for (char *c = m->config->node_name; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
        cn_backoff_init(&m->metadata_backoff, METADATA_BACKOFF_BASE, METADATA_BACKOFF_CAP);
        r = cn_netlink_new(m->event, on_netlink, m, &m->netlink);
        if (r < 0)
                return log_error_errno(r, "Failed to watch local addresses over netlink: %m");
        start_fetch(m);
        return 0;
}

static void get_instance(NodeState *s) {
        Manager *m = s->manager;
        CnProviderInstance *copy = NULL;
        int r;

        if (!m->local_instance) {
                if (m->metadata_error < 0) {
                        sync_apply_instance(s, m->metadata_error, 0, "the local metadata service did not answer",
                                            NULL);
                        return;
                }
                /* The fetch is still running; it calls reconsider() when done. */
                queue_done(s);
                return;
        }
        if (!cn_netlink_ready(m->netlink)) {
                /* The first dump is on its way; it calls reconsider() when done. */
                queue_done(s);
                return;
        }
        r = cn_provider_instance_copy(m->local_instance, &copy);
        sync_apply_instance(s, r, 0, r < 0 ? "out of memory" : NULL, copy);
}

static void node_changed(Manager *m, json_object *old, json_object *node) {
        reconsider(m, false);
}

static void node_initialized(Manager *m, json_object *node) {
        notify_ready(m);
}

static void reload(Manager *m) {
        log_info("Reloading: reading instance metadata again.");
        m->metadata_retry = sd_event_source_disable_unref(m->metadata_retry);
        start_fetch(m);
}

const InstanceSource instance_source_local = {
        .mode = "node",
        .start = start,
        .node_changed = node_changed,
        .get_instance = get_instance,
        .node_initialized = node_initialized,
        .reload = reload,
};
