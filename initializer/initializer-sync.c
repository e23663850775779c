/* SPDX-License-Identifier: Apache-2.0 */
/* Initializing one Node (docs/design.md, "Node writes"), the same in both modes once the instance
 * is known: compute the addresses, patch nodes/NAME/status (only when they differ), then patch
 * the Node with the resourceVersion of what we last saw as precondition (providerID, labels, the
 * taint list minus the uninitialized taint). A 409 means someone wrote in between: the next try
 * starts again from the watch cache, after a backoff. No GET of a Node happens here: the cache
 * and the Node returned by our own status PATCH are the only sources. */
#include <stdarg.h>

#include "initializer-manager.h"
#include "initializer-node-filter.h"
#include "initializer-queue.h"
#include "initializer-sync.h"
#include "json-util.h"
#include "kube-client.h"
#include "kube-event.h"
#include "kube-informer.h"
#include "kube-workqueue.h"
#include "log.h"
#include "metrics.h"
#include "netlink.h"
#include "node-patch.h"
#include "provider.h"
#include "string-util.h"

static void record_event(Manager *m, json_object *node, CnKubeEventType type, const char *reason, const char *fmt,
                         va_list ap) {
        CnKubeObjectRef ref;

        if (!m->events || cn_kube_object_ref_from_json(node, &cn_kube_resource_nodes, &ref) < 0)
                return;
        ref.kind = "Node";
        ref.api_version = "v1";
        (void) cn_kube_event_recordv(m->events, &ref, type, reason, NULL, fmt, ap);
}

void manager_warning_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        record_event(m, node, CN_KUBE_EVENT_WARNING, reason, fmt, ap);
        va_end(ap);
}

void manager_normal_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        record_event(m, node, CN_KUBE_EVENT_NORMAL, reason, fmt, ap);
        va_end(ap);
}

/* A new reference: the queue may sync many Nodes in one pass of the event loop, and the cache
 * builds a tree per lookup (store_text). */
static json_object *cached_node(Manager *m, const char *name) {
        return m->nodes ? cn_kube_informer_get(m->nodes, NULL, name) : NULL;
}

/* A failure that leaves the Node tainted: a Warning Event (once per distinct message, so that a
 * Node failing the same way for an hour does not produce a stream of writes), a log line, and a
 * retry after the backoff. */
static void fail(NodeState *s, json_object *node, const char *reason, usec_t retry_after, const char *fmt, ...)
        _printf_(5, 6);
static void fail(NodeState *s, json_object *node, const char *reason, usec_t retry_after, const char *fmt, ...) {
        Manager *m = s->manager;
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (msg && (!s->last_warning || !streq(s->last_warning, msg))) {
                log_struct(LOG_WARNING, CN_FIELDS("CLOUDNODE_NODE", s->name), "Node %s not initialized: %s", s->name, msg);
                if (node)
                        manager_warning_event(m, node, reason, "%s", msg);
                free(s->last_warning);
                s->last_warning = TAKE_PTR(msg);
        } else
                log_debug("Node %s not initialized: %s", s->name, strna(msg));
        if (m->metrics.init_failures)
                (void) cn_metric_inc(m->metrics.init_failures, CN_LABELS(reason));
        queue_retry(s, retry_after);
        queue_done(s);
}

void sync_node(NodeState *s) {
        Manager *m = s->manager;
        _cleanup_json_ json_object *node = cached_node(m, s->name);

        /* Right after our own initializing PATCH, the watch may still deliver older versions of the
         * Node (e.g. the one our status PATCH made), which still carry the taint. Acting on them
         * would send a PATCH doomed to a 409; the event of our own write triggers the next sync. */
        if (cn_write_expectation_pending(&s->written, node, 0)) {
                log_debug("Node %s: cache at resourceVersion %" PRIu64 ", our write made %" PRIu64
                          ", waiting for the watch.", s->name, cn_kube_object_resource_version(node),
                          s->written.written);
                queue_done(s);
                return;
        }

        if (!node || !cn_node_has_taint(node, CN_TAINT_UNINITIALIZED)) {
                s->taint_seen = 0;
                if (node && s->reconcile && m->source->reconcile_addresses) {
                        s->reconcile = false;
                        m->source->reconcile_addresses(s);
                        return;
                }
                queue_done(s);
                if (!m->config->node_name)
                        queue_release_at_rest(s, node);
                return;
        }
        if (s->taint_seen == 0)
                s->taint_seen = cn_now(CLOCK_MONOTONIC);
        m->source->get_instance(s);
}

int sync_compute_addresses(Manager *m, json_object *node, const CnProviderInstance *instance, CnNodeAddressList *ret,
                           char **ret_bad_ip) {
        CnNodeAddressInput in = {
                .cloud = &instance->addresses,
                .provided_node_ip = cn_node_get_provided_node_ip(node),
                .kubelet_hostname = cn_node_get_kubelet_hostname(node),
        };

        /* Node mode: the kernel confirms which InternalIPs are really ours yet. */
        if (m->netlink) {
                in.local_check = cn_netlink_check_address;
                in.local_userdata = m->netlink;
        }
        return cn_node_addresses_compute(&in, ret, ret_bad_ip);
}

static bool addresses_differ(json_object *node, const CnNodeAddressList *want) {
        _cleanup_node_address_list_ CnNodeAddressList have = {};

        if (cn_node_address_list_from_json(cn_json_get(node, "status", "addresses", NULL), &have) < 0)
                return true;
        return !cn_node_address_list_equal(&have, want);
}

/* A PATCH of the Node being initialized; the Node it returns is parsed as the cache's are. */
static int send_patch(NodeState *s, const char *subresource, CnKubePatchType type, json_object *patch,
                      CnKubeCallback cb) {
        int r;

        r = cn_kube_patch(s->manager->kube, &cn_kube_resource_nodes, NULL, s->name, subresource, type, patch, cb, s,
                          &s->request);
        if (r >= 0)
                cn_kube_request_set_filter(s->request, initializer_node_filter);
        return r;
}

static void on_condition_written(CnKubeClient *c, const CnKubeResult *res, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);
        _cleanup_free_ char *msg = TAKE_PTR(s->condition_message);
        _cleanup_json_ json_object *node = NULL;

        s->request = cn_kube_request_free(s->request);
        if (res->error == -ENOENT) {
                log_info("Node %s was deleted during initialization.", s->name);
                queue_done(s);
                return;
        }
        if (res->error < 0)
                log_warning("Failed to set the %s condition of node %s, will retry: %s",
                            CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, s->name, res->message ?: strerror(-res->error));
        else
                s->condition_false = true;
        node = cached_node(s->manager, s->name);
        fail(s, node, s->condition_reason, 0, "%s", strna(msg));
}

/* A provided-node-ip that does not fit the instance is for the cluster's owner to fix, and
 * retrying cannot fix it: besides the Warning Event, the Node says so in a condition that
 * kubectl shows. It is written (when it changed) before the retry is scheduled, so a retry never
 * overtakes it; the kubelet's conditions are merged, not replaced. */
static void fail_with_condition(NodeState *s, json_object *node, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
static void fail_with_condition(NodeState *s, json_object *node, const char *reason, const char *fmt, ...) {
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0) {
                fail(s, node, reason, 0, "out of memory");
                return;
        }
        r = cn_node_patch_status_condition(
                node, &(CnNodeCondition) { CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, "False", reason, msg }, NULL,
                cn_now(CLOCK_REALTIME), &patch);
        if (r >= 0)
                r = send_patch(s, "status", CN_KUBE_PATCH_STRATEGIC, patch, on_condition_written);
        if (r >= 0) {
                s->condition_reason = reason;
                free(s->condition_message);
                s->condition_message = TAKE_PTR(msg);
                return;
        }
        if (r != -EALREADY)
                log_warning_errno(r, "Cannot set the %s condition of node %s: %m",
                                  CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, s->name);
        fail(s, node, reason, 0, "%s", msg);
}

static void on_node_patched(CnKubeClient *c, const CnKubeResult *res, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);
        Manager *m = s->manager;
        _cleanup_json_ json_object *cached = NULL;
        json_object *node = res->object && res->error >= 0 ? res->object : (cached = cached_node(m, s->name));
        const char *pid;
        usec_t latency;

        s->request = cn_kube_request_free(s->request);
        if (res->error == -ENOENT) {
                log_info("Node %s was deleted during initialization.", s->name);
                queue_done(s);
                return;
        }
        if (res->error == -ESTALE) {
                /* Someone else wrote the Node since we saw it: start over from the cache. */
                log_debug("Node %s changed meanwhile (409), retrying from the cache.", s->name);
                queue_retry(s, 0);
                queue_done(s);
                return;
        }
        if (res->error < 0) {
                fail(s, node, "FailedToInitializeNode", 0, "patching the Node failed: %s",
                     res->message ?: strerror(-res->error));
                return;
        }

        pid = (node ? cn_node_get_provider_id(node) : NULL) ?: (s->instance ? s->instance->provider_id : NULL);
        latency = s->taint_seen ? cn_now(CLOCK_MONOTONIC) - s->taint_seen : 0;
        log_struct(LOG_INFO, CN_FIELDS("CLOUDNODE_NODE", s->name, "CLOUDNODE_PROVIDER_ID", pid),
                   "Initialized node %s (providerID %s) in %.3fs.", s->name, strna(pid), (double) latency / USEC_PER_SEC);
        manager_normal_event(m, node, "Synced", "Node synced successfully");
        if (!s->initialized && m->metrics.nodes_initialized) {
                (void) cn_metric_inc(m->metrics.nodes_initialized, NULL);
                if (s->taint_seen)
                        (void) cn_metric_observe(m->metrics.init_latency, NULL, (double) latency / USEC_PER_SEC);
        }
        s->initialized = true;
        cn_write_expectation_clear(&s->written);
        (void) cn_write_expectation_written(&s->written, res->object);
        /* The watch brought our write before its answer came: nothing is left to wait for. */
        if (s->written.set && s->seen_rv >= s->written.written)
                cn_write_expectation_clear(&s->written);
        s->taint_seen = 0;
        free(s->last_warning);
        s->last_warning = NULL;
        cn_work_queue_forget(s->item);
        if (m->source->node_initialized)
                m->source->node_initialized(m, node);
        queue_done(s);
        if (!m->config->node_name)
                queue_release_at_rest(s, node);
}

/* The provider's labels whose keys the cached record keeps (initializer_node_label_kept()): only
 * for those can the patch tell that someone else set a value already. */
static int kept_extra_labels(char *const *extra, char ***ret) {
        _cleanup_strv_free_ char **kept = NULL;

        for (char *const *l = extra; l && *l; l++) {
                _cleanup_free_ char *key = strndup(*l, strcspn(*l, "="));

                if (!key)
                        return -ENOMEM;
                if (!initializer_node_label_kept(key)) {
                        log_debug("Not adding provider label '%s': the Node cache does not keep it.", key);
                        continue;
                }
                if (strv_extend(&kept, *l) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(kept);
        return 0;
}

static void patch_node(NodeState *s, json_object *node) {
        Manager *m = s->manager;
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_strv_free_ char **extra = NULL;
        CnProviderInstance *i = s->instance;
        CnNodeInitData d = {
                .provider_id = i->provider_id,
                .instance_type = i->instance_type,
                .region = i->region,
                .zone = i->zone,
                /* The node-mode identity runs on every host; the admission policy shipped with it
                 * lets it set the well-known labels only, so that a compromised node cannot
                 * label itself into workloads. Provider labels come from cluster mode. */
        };
        int r;

        if (!m->config->node_name && kept_extra_labels(i->extra_labels, &extra) < 0) {
                fail(s, node, "FailedToInitializeNode", 0, "cannot build the Node patch: %s", strerror(ENOMEM));
                return;
        }
        d.extra_labels = extra;
        r = cn_node_patch_initialize(node, &d, &patch);
        if (r < 0) {
                fail(s, node, "FailedToInitializeNode", 0, "cannot build the Node patch: %s", strerror(-r));
                return;
        }
        r = send_patch(s, NULL, CN_KUBE_PATCH_MERGE, patch, on_node_patched);
        if (r < 0) {
                fail(s, node, "FailedToInitializeNode", 0, "cannot send the Node patch: %s", strerror(-r));
                return;
        }
        /* Node mode's node_initialized() reads the whole record. */
        if (!m->config->node_name)
                cn_kube_request_set_filter(s->request, initializer_node_patched_filter);
}

/* Whether the Node carries our condition in a state other than True (s: or we set it so and
 * the cache may not show it yet). */
static bool blocked_condition(NodeState *s, json_object *node) {
        json_object *c = cn_node_get_condition(node, CN_CONDITION_CLOUD_PROVIDER_INITIALIZED);
        const char *status = c ? cn_json_string(c, "status", NULL) : NULL;

        return (s && s->condition_false) || (c && !streq(strempty(status), "True"));
}

static void on_status_patched(CnKubeClient *c, const CnKubeResult *res, void *userdata) {
        NodeState *s = ASSERT_PTR(userdata);
        _cleanup_json_ json_object *node = NULL;
        uint64_t deferred = s->deferred_rv;

        /* Events that came while the PATCH was out (cloud source's node_changed()): the sync goes
         * once more after this one unless they were of this very write (or older). */
        s->status_write_out = false;
        s->deferred_rv = 0;
        if (deferred > 0 && (res->error < 0 || deferred > cn_kube_object_resource_version(res->object)))
                queue_add(s->manager, s->name);

        if (res->error == -ENOENT) {
                s->request = cn_kube_request_free(s->request);
                log_info("Node %s was deleted during initialization.", s->name);
                queue_done(s);
                return;
        }
        if (res->error < 0 || !res->object) {
                _cleanup_json_ json_object *cached = cached_node(s->manager, s->name);

                s->request = cn_kube_request_free(s->request);
                fail(s, cached, "FailedToUpdateNodeAddresses", 0, "patching the Node's addresses failed: %s",
                     res->message ?: strerror(-res->error));
                return;
        }
        /* The Node as our write left it is newer than the cache: build the second patch on it. Its
         * watch event, when it comes, brings nothing this sync does not know. */
        node = json_object_get(res->object);
        s->own_status_rv = cn_kube_object_resource_version(node);
        if (!blocked_condition(NULL, node))
                s->condition_false = false;
        s->request = cn_kube_request_free(s->request);
        patch_node(s, node);
}

void sync_apply_instance(NodeState *s, int error, usec_t retry_after, const char *message,
                         CnProviderInstance *instance) {
        Manager *m = s->manager;
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *owned = instance;
        _cleanup_node_address_list_ CnNodeAddressList addrs = {};
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_free_ char *bad_ip = NULL;
        _cleanup_json_ json_object *node = cached_node(m, s->name);
        CnKubePatchType type = CN_KUBE_PATCH_MERGE;
        bool differ;
        int r;

        if (!node) {
                log_info("Node %s was deleted during initialization.", s->name);
                queue_done(s);
                return;
        }
        if (!cn_node_has_taint(node, CN_TAINT_UNINITIALIZED)) {
                queue_done(s);
                if (!m->config->node_name)
                        queue_release_at_rest(s, node);
                return;
        }
        if (error < 0) {
                switch (cn_provider_error_class(error)) {
                case CN_PROVIDER_NOT_FOUND:
                        fail(s, node, "InstanceNotFound", retry_after, "no cloud instance for this Node: %s",
                             message ?: strerror(-error));
                        break;
                case CN_PROVIDER_TERMINAL:
                        fail(s, node, "FailedToGetInstance", retry_after, "the cloud refused the request: %s",
                             message ?: strerror(-error));
                        break;
                default:
                        fail(s, node, "FailedToGetInstance", retry_after, "instance metadata unavailable: %s",
                             message ?: strerror(-error));
                }
                return;
        }

        r = sync_compute_addresses(m, node, instance, &addrs, &bad_ip);
        if (r == -EADDRNOTAVAIL) {
                fail_with_condition(s, node, "ProvidedNodeIPMismatch",
                                    "alpha.kubernetes.io/provided-node-ip %s matches none of the instance's addresses",
                                    strna(bad_ip));
                return;
        }
        if (r == -EINVAL) {
                fail_with_condition(s, node, "InvalidProvidedNodeIP",
                                    "alpha.kubernetes.io/provided-node-ip '%s' is not one IP or an IPv4/IPv6 pair",
                                    strna(cn_node_get_provided_node_ip(node)));
                return;
        }
        if (r == -ENODATA) {
                fail(s, node, "NoNodeAddresses", 0, "the instance has no usable IP address yet");
                return;
        }
        if (r < 0) {
                fail(s, node, "FailedToInitializeNode", 0, "computing addresses failed: %s", strerror(-r));
                return;
        }
        s->instance = cn_provider_instance_free(s->instance);
        s->instance = TAKE_PTR(owned);

        differ = addresses_differ(node, &addrs);
        if (blocked_condition(s, node)) {
                /* Clearing what fail_with_condition() set costs no extra write: it rides on the
                 * status patch, which is sent even when the addresses are right already. */
                r = cn_node_patch_status_condition(
                        node,
                        &(CnNodeCondition) { CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, "True", "Initialized",
                                             "the instance's addresses match; the Node is initialized" },
                        differ ? &addrs : NULL, cn_now(CLOCK_REALTIME), &patch);
                type = CN_KUBE_PATCH_STRATEGIC;
                if (r == -EALREADY) {
                        /* Only our own flag said so: the Node shows True already. */
                        s->condition_false = false;
                        patch_node(s, node);
                        return;
                }
        } else if (differ)
                r = cn_node_patch_status_addresses(&addrs, &patch);
        else {
                patch_node(s, node);
                return;
        }
        if (r >= 0)
                r = send_patch(s, "status", type, patch, on_status_patched);
        if (r < 0) {
                fail(s, node, "FailedToUpdateNodeAddresses", 0, "cannot send the address patch: %s", strerror(-r));
                return;
        }
        s->status_write_out = true;
        s->deferred_rv = 0;
}

typedef struct AddressWrite {
        Manager *manager;
        char name[];
} AddressWrite;

static void on_addresses_updated(CnKubeClient *c, const CnKubeResult *res, void *userdata) {
        _cleanup_free_ AddressWrite *w = userdata;
        CnWriteExpectation *e = cn_write_expectations_get(w->manager->address_writes, w->name, false);

        if (res->error < 0) {
                if (e)
                        cn_write_expectation_clear(e);
                log_warning("Failed to update the addresses of node %s, will retry on the next change: %s", w->name,
                            res->message ?: strerror(-res->error));
                return;
        }
        if (e)
                (void) cn_write_expectation_written(e, res->object);
        log_info("Updated the addresses of node %s.", w->name);
}

int sync_update_addresses(Manager *m, json_object *node, const CnProviderInstance *instance) {
        _cleanup_node_address_list_ CnNodeAddressList addrs = {};
        _cleanup_json_ json_object *patch = NULL;
        _cleanup_free_ char *bad_ip = NULL;
        const char *name = cn_node_get_name(node);
        CnWriteExpectation *e;
        AddressWrite *w;
        int r;

        if (!name || !instance)
                return -EINVAL;
        /* Until the watch shows our last address write (or while it is in flight), the cached
         * addresses are older than what we wrote: comparing with them would send the same write
         * again. The caller looks again once the Node changes. */
        if (cn_write_expectations_pending(m->address_writes, name, node, 30 * USEC_PER_SEC))
                return -EAGAIN;
        r = sync_compute_addresses(m, node, instance, &addrs, &bad_ip);
        if (r < 0)
                return r;
        if (!addresses_differ(node, &addrs))
                return 0;
        r = cn_node_patch_status_addresses(&addrs, &patch);
        if (r < 0)
                return r;
        e = cn_write_expectations_get(m->address_writes, name, true);
        w = malloc(sizeof(AddressWrite) + strlen(name) + 1);
        if (!e || !w) {
                free(w);
                return -ENOMEM;
        }
        w->manager = m;
        strcpy(w->name, name);
        r = cn_write_expectation_begin(e, node);
        if (r < 0) {
                free(w);
                return r;
        }
        r = cn_kube_patch(m->kube, &cn_kube_resource_nodes, NULL, name, "status", CN_KUBE_PATCH_MERGE, patch,
                          on_addresses_updated, w, NULL);
        if (r < 0) {
                cn_write_expectation_clear(e);
                free(w);
                return r;
        }
        if (m->metrics.address_updates)
                (void) cn_metric_inc(m->metrics.address_updates, NULL);
        return 1;
}
