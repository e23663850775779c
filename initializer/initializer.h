/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: shared state of the daemon. One Manager owns the event loop and every
 * long-lived object; node mode (initializer-node.c) and cluster mode (initializer-cluster.c,
 * initializer-lifecycle.c) plug their instance source into the common Node initialization
 * (initializer-sync.c), which a small work queue (initializer-queue.c) drives. */
#pragma once

#include <systemd/sd-event.h>

#include "backoff.h"
#include "kube-daemon.h"
#include "kube-expectation.h"
#include "macro.h"
#include "node-addresses.h"
#include "time-util.h"

typedef struct CnHttp CnHttp;
typedef struct CnHttpd CnHttpd;
typedef struct CnKubeClient CnKubeClient;
typedef struct CnKubeInformer CnKubeInformer;
typedef struct CnKubeEventRecorder CnKubeEventRecorder;
typedef struct CnKubeLeader CnKubeLeader;
typedef struct CnKubeRequest CnKubeRequest;
typedef struct CnMetrics CnMetrics;
typedef struct CnMetric CnMetric;
typedef struct CnNetlink CnNetlink;
typedef struct CnProvider CnProvider;
typedef struct CnProviderCall CnProviderCall;
typedef struct CnProviderInstance CnProviderInstance;
typedef struct CnInstanceMetadata CnInstanceMetadata;
typedef struct CnMetadataFetch CnMetadataFetch;
typedef struct CnNodeConfig CnNodeConfig;
typedef struct CnWorkQueue CnWorkQueue;
typedef struct CnWorkItem CnWorkItem;
typedef struct Manager Manager;
typedef struct NodeState NodeState;

#define CN_INITIALIZER_PORT_DEFAULT 10267U

typedef enum Controller {
        CONTROLLER_CLOUD_NODE = 1 << 0,
        CONTROLLER_CLOUD_NODE_LIFECYCLE = 1 << 1,
} Controller;

typedef struct Config {
        char *kubeconfig;
        char *node_name;         /* node mode when set */
        char *config_path;       /* node config (node mode) */
        char *root;              /* prefix of local paths (tests) */
        char *cloud_provider;
        char *cloud_config;
        unsigned controllers;    /* Controller bits */
        CnKubeDaemonOptions daemon; /* the flags shared with cloudnode-controller */
        char *leader_elect_namespace;
        char *leader_elect_name;
        unsigned concurrent_node_syncs;
        usec_t node_status_update_frequency;
        usec_t node_monitor_period;      /* lifecycle controller */
        usec_t node_startup_grace_period; /* lifecycle: no deletion of younger Nodes */
} Config;

void config_done(Config *c);
/* "cloud-node,-cloud-node-lifecycle", "*": the bits of the controllers to run. */
int config_parse_controllers(const char *s, unsigned *ret);

/* Per-Node bookkeeping of the work queue and of initialization. */
struct NodeState {
        Manager *manager;
        CnWorkItem *item;     /* of the work queue, which owns this state */
        const char *name;     /* the item's key */
        bool initialized;     /* initialized by us (counts once) */
        bool reconcile;       /* cluster mode: compare addresses with the cloud's on the next sync */
        usec_t taint_seen;    /* CLOCK_MONOTONIC, 0 when not tainted */
        usec_t last_reconcile;/* cluster mode: last periodic address check */
        CnProviderCall *call;
        CnKubeRequest *request;
        CnProviderInstance *instance; /* the instance being applied */
        unsigned attempt;
        char *last_warning;   /* to avoid repeating the same Warning event on every retry */
        /* A provided-node-ip problem being written as a False condition (see sync) */
        const char *condition_reason;
        char *condition_message;
        bool condition_false; /* we set the condition False: clear it when initializing */
        CnWriteExpectation written; /* our initializing PATCH, until the cache has it */
};

typedef struct Metrics {
        CnMetrics *registry;
        CnMetric *nodes_initialized;
        CnMetric *init_latency;
        CnMetric *cloud_requests;
        CnMetric *leader;
        CnMetric *address_updates;
        CnMetric *init_failures;
        CnMetric *nodes_deleted;
        CnMetric *watch_restarts;
        uint64_t watch_restarts_seen; /* the Node informer's count already exported */
} Metrics;

struct Manager {
        Config *config;
        CnKubeDaemonEndpoints endpoints;
        sd_event *event;
        CnHttp *http;
        CnHttpd *httpd;
        CnKubeClient *kube;
        CnKubeInformer *nodes;
        uint64_t nodes_handlers;
        CnKubeEventRecorder *events;
        CnKubeLeader *leader;
        bool leading;
        bool controllers_started;
        bool shutting_down;
        Metrics metrics;

        /* node mode */
        CnNodeConfig *node_config;
        CnNetlink *netlink;
        CnMetadataFetch *metadata_fetch;
        CnProviderInstance *local_instance;
        CnBackoff metadata_backoff;
        sd_event_source *metadata_retry;
        int metadata_error;
        bool notified_ready;

        /* cluster mode */
        CnProvider *provider;
        sd_event_source *reconcile_timer;
        sd_event_source *lifecycle_timer;

        /* work queue, of NodeStates */
        CnWorkQueue *queue;
};

/* Allocation only; manager_setup() builds the loop, signals and every object the mode needs
 * (logging what fails); manager_run() runs the loop. */
int manager_new(Config *c, Manager **ret);
int manager_setup(Manager *m);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);
int manager_run(Manager *m);
/* Writes to the Node that the mode allows for; fails the process if the controllers cannot run. */
void manager_start_controllers(Manager *m);

/* queue (initializer-queue.c) */
int queue_setup(Manager *m);
NodeState *node_state_get(Manager *m, const char *name, bool create);
void node_state_drop(Manager *m, const char *name);
void queue_add(Manager *m, const char *name);
/* Retry later with this node's backoff (at least min_delay, e.g. a server's Retry-After). */
void queue_retry(NodeState *s, usec_t min_delay);
/* The sync of s is over (success or failure already scheduled): frees a worker slot. */
void queue_done(NodeState *s);
void queue_forget_all(Manager *m);
/* cn_kube_informer_foreach() callback: queue an initialized Node for address reconciliation. */
int manager_enqueue_reconcile(json_object *node, void *userdata);

/* sync (initializer-sync.c): one pass over a Node; ends with queue_done(). */
void sync_node(NodeState *s);
/* The instance for s arrived (or failed). Takes ownership of instance. */
void sync_apply_instance(NodeState *s, int error, usec_t retry_after, const char *message,
                         CnProviderInstance *instance);
/* Compute addresses for a Node from an instance: 0, or the errors of cn_node_addresses_compute(). */
int sync_compute_addresses(Manager *m, json_object *node, const CnProviderInstance *instance,
                           CnNodeAddressList *ret, char **ret_bad_ip);
/* Patches status.addresses of a Node when they differ from `addresses`; for the address
 * updates after initialization. */
int sync_update_addresses(Manager *m, json_object *node, const CnProviderInstance *instance);
void manager_warning_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) _printf_(4, 5);
void manager_normal_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) _printf_(4, 5);

/* node mode (initializer-node.c) */
int node_mode_start(Manager *m);
void node_mode_get_instance(NodeState *s);
void node_mode_node_changed(Manager *m, json_object *node);
void node_mode_node_initialized(Manager *m, json_object *node);
void node_mode_reload(Manager *m);

/* cluster mode (initializer-cluster.c, initializer-lifecycle.c) */
int cluster_mode_start(Manager *m);
void cluster_mode_get_instance(NodeState *s);
int lifecycle_start(Manager *m);
void lifecycle_stop(Manager *m);

/* metrics (initializer-metrics.c) */
int metrics_setup(Manager *m);
int metrics_serve(Manager *m);
