/* SPDX-License-Identifier: Apache-2.0 */
/* The cloud-node-lifecycle controller, as upstream's: every --node-monitor-period, each Node that
 * is not Ready is checked against the cloud. A stopped instance gets the
 * node.cloudprovider.kubernetes.io/shutdown:NoSchedule taint; an instance that no longer exists
 * gets its Node deleted (Event DeletingNode), unless the Node is younger than
 * --node-startup-grace-period (a kubelet that just registered is not Ready yet). Ready Nodes lose
 * the shutdown taint. One cloud call at a time, and a pass never overlaps the next. */
#include "initializer-lifecycle.h"
#include "initializer-manager.h"
#include "initializer-sync.h"
#include "json-util.h"
#include "kube-client.h"
#include "kube-informer.h"
#include "log.h"
#include "metrics.h"
#include "node-patch.h"
#include "provider.h"
#include "string-util.h"

typedef struct LifecyclePass {
        Manager *manager;
        char **names;
        size_t next;
        CnProviderCall *call;
        char *current;
} LifecyclePass;

static LifecyclePass *pass_running;

static void pass_step(LifecyclePass *p);

static void pass_free(LifecyclePass *p) {
        if (!p)
                return;
        cn_provider_call_free(p->call);
        strv_free(p->names);
        free(p->current);
        if (pass_running == p)
                pass_running = NULL;
        free(p);
}

/* "True", "False" or "Unknown" (also when absent, as upstream treats it). */
static const char *ready_status(json_object *node) {
        json_object *conds = cn_json_get(node, "status", "conditions", NULL);
        size_t n = conds && json_object_is_type(conds, json_type_array) ? json_object_array_length(conds) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *c = json_object_array_get_idx(conds, i);
                const char *type = cn_json_string(c, "type", NULL), *st = cn_json_string(c, "status", NULL);

                if (type && streq(type, "Ready"))
                        return st ?: "Unknown";
        }
        return "Unknown";
}

static bool younger_than_grace(Manager *m, json_object *node) {
        const char *created = cn_json_string(node, "metadata", "creationTimestamp", NULL);
        usec_t t;

        if (!created || cn_parse_rfc3339(created, &t) < 0)
                return true; /* unknown age: be careful */
        return cn_now(CLOCK_REALTIME) < cn_usec_add(t, m->config->node_startup_grace_period);
}

static void on_written(CnKubeClient *c, const CnKubeResult *res, void *userdata) {
        _cleanup_free_ char *what = userdata;

        if (res->error == -ESTALE)
                log_debug("%s: the Node changed meanwhile, next period.", what);
        else if (res->error < 0 && res->error != -ENOENT)
                log_warning("%s failed: %s", what, res->message ?: strerror(-res->error));
        else if (res->error >= 0)
                log_info("%s.", what);
}

static void set_shutdown_taint(Manager *m, json_object *node, bool add) {
        _cleanup_json_ json_object *patch = NULL;
        const char *name = cn_node_get_name(node);
        char *what = NULL;
        int r;

        r = cn_node_patch_taint(node, CN_TAINT_SHUTDOWN, add, &patch);
        if (r == -EALREADY)
                return;
        if (r < 0 || asprintf(&what, "%s the shutdown taint %s node %s", add ? "Adding" : "Removing", add ? "to" : "from",
                              name) < 0) {
                log_warning_errno(r < 0 ? r : -ENOMEM, "Cannot update the shutdown taint of node %s: %m", name);
                return;
        }
        r = cn_kube_patch(m->kube, &cn_kube_resource_nodes, NULL, name, NULL, CN_KUBE_PATCH_MERGE, patch, on_written,
                          what, NULL);
        if (r < 0) {
                log_warning_errno(r, "%s failed: %m", what);
                free(what);
        }
}

static void delete_node(Manager *m, json_object *node) {
        const char *name = cn_node_get_name(node);
        CnKubeDeleteOptions o = { .precondition_uid = cn_node_get_uid(node) };
        char *what = NULL;
        int r;

        log_info("Deleting node %s since it is no longer present in the cloud provider.", name);
        manager_normal_event(m, node, "DeletingNode", "Deleting node %s because it does not exist in the cloud provider",
                             name);
        if (asprintf(&what, "Deleted node %s", name) < 0)
                return (void) log_oom();
        r = cn_kube_delete(m->kube, &cn_kube_resource_nodes, NULL, name, &o, on_written, what, NULL);
        if (r < 0) {
                log_warning_errno(r, "Failed to delete node %s: %m", name);
                free(what);
                return;
        }
        if (m->metrics.nodes_deleted)
                (void) cn_metric_inc(m->metrics.nodes_deleted, NULL);
}

static void on_shutdown(CnProvider *prov, const CnProviderResult *res, bool shutdown, void *userdata) {
        LifecyclePass *p = ASSERT_PTR(userdata);
        Manager *m = p->manager;
        _cleanup_json_ json_object *node = cn_kube_informer_get(m->nodes, NULL, p->current);

        p->call = cn_provider_call_free(p->call);
        if (!node || !m->leading) {
                pass_step(p);
                return;
        }
        if (res->error >= 0 && shutdown) {
                set_shutdown_taint(m, node, true);
                pass_step(p);
                return;
        }
        if (res->error < 0 && res->error != -ENOENT) {
                log_debug("Cannot tell whether the instance of node %s is shut down: %s", p->current,
                          res->message ?: strerror(-res->error));
                pass_step(p);
                return;
        }
        /* The lookup that answers "shut down?" also answers "exists?": a second call would ask
         * the cloud the same question again. */
        if (res->error == -ENOENT && !younger_than_grace(m, node))
                delete_node(m, node);
        pass_step(p);
}

static void pass_step(LifecyclePass *p) {
        Manager *m = p->manager;

        while (p->names && p->names[p->next]) {
                const char *name = p->names[p->next++];
                _cleanup_json_ json_object *node = cn_kube_informer_get(m->nodes, NULL, name);
                CnProviderNodeRef ref = { .name = name };
                int r;

                if (!node || !m->leading)
                        continue;
                if (streq(ready_status(node), "True")) {
                        set_shutdown_taint(m, node, false);
                        continue;
                }
                free(p->current);
                p->current = strdup(name);
                if (!p->current)
                        break;
                ref.provider_id = cn_node_get_provider_id(node);
                r = cn_provider_instance_shutdown(m->provider, &ref, on_shutdown, p, &p->call);
                if (r >= 0)
                        return;
                log_debug_errno(r, "Cannot check the instance of node %s: %m", name);
        }
        pass_free(p);
}

static int collect_name(json_object *node, void *userdata) {
        char ***names = userdata;
        const char *name = cn_node_get_name(node);

        return name ? strv_extend(names, name) : 0;
}

static int on_monitor(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = ASSERT_PTR(userdata);
        LifecyclePass *p;
        int r;

        r = sd_event_source_set_time_relative(source, m->config->node_monitor_period);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to re-arm the lifecycle timer: %m");
        if (!m->leading || !m->nodes || !cn_kube_informer_has_synced(m->nodes) || pass_running)
                return 0;
        p = calloc(1, sizeof(LifecyclePass));
        if (!p)
                return log_oom();
        p->manager = m;
        r = cn_kube_informer_foreach(m->nodes, collect_name, &p->names);
        if (r < 0) {
                pass_free(p);
                return log_oom();
        }
        pass_running = p;
        pass_step(p);
        return 0;
}

int lifecycle_start(Manager *m) {
        int r;

        r = sd_event_add_time_relative(m->event, &m->lifecycle_timer, CLOCK_MONOTONIC, m->config->node_monitor_period,
                                       100 * USEC_PER_MSEC, on_monitor, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the lifecycle timer: %m");
        (void) sd_event_source_set_description(m->lifecycle_timer, "node-lifecycle");
        return 0;
}

void lifecycle_stop(Manager *m) {
        pass_free(pass_running);
        m->lifecycle_timer = sd_event_source_disable_unref(m->lifecycle_timer);
}
