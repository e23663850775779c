/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: where a mode gets the instance of a Node. Each mode sets one instance
 * source in the Manager; the common Node initialization (initializer-sync.c) and the Manager call
 * the mode only through it, so the order is modes -> sync -> queue.
 *   node mode (--node-name): initializer-local-source.c, the local metadata service and netlink;
 *   cluster mode: initializer-cloud-source.c, the cloud's API (with initializer-lifecycle.c). */
#pragma once

#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct NodeState NodeState;

typedef struct InstanceSource {
        const char *mode;       /* "node" or "cluster" */
        /* While the Manager is set up (before the Kubernetes client): -errno, logged. */
        int (*start)(Manager *m);
        /* Once in charge (leader, or no election): more controllers; NULL: none. */
        int (*start_controllers)(Manager *m);
        /* A Node was added or changed (old NULL when new), once in charge. */
        void (*node_changed)(Manager *m, json_object *old, json_object *node);
        /* The instance for the Node of s: ends with sync_apply_instance() or queue_done(). */
        void (*get_instance)(NodeState *s);
        /* An initialized Node queued for address reconciliation; NULL: not done by the queue. */
        void (*reconcile_addresses)(NodeState *s);
        /* The Node of this process was initialized; NULL: nothing to do. */
        void (*node_initialized)(Manager *m, json_object *node);
        /* SIGHUP. */
        void (*reload)(Manager *m);
} InstanceSource;

extern const InstanceSource instance_source_local;
extern const InstanceSource instance_source_cloud;
