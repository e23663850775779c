/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: the Node work queue (initializer-queue.c) and the per-Node state its items
 * carry. */
#pragma once

#include <stdbool.h>

#include "kube-expectation.h"
#include "macro.h"
#include "time-util.h"

typedef struct CnKubeRequest CnKubeRequest;
typedef struct CnProviderCall CnProviderCall;
typedef struct CnProviderInstance CnProviderInstance;
typedef struct CnWorkItem CnWorkItem;
typedef struct Manager Manager;
typedef struct NodeState NodeState;

/* Per-Node bookkeeping of the work queue and of initialization. */
struct NodeState {
        Manager *manager;
        CnWorkItem *item;     /* of the work queue, which owns this state */
        const char *name;     /* the item's key */
        bool initialized;     /* initialized by us (counts once) */
        bool reconcile;       /* cluster mode: compare addresses with the cloud's on the next sync */
        usec_t taint_seen;    /* CLOCK_MONOTONIC, 0 when not tainted */
        CnProviderCall *call;
        CnKubeRequest *request;
        CnProviderInstance *instance; /* the instance being applied */
        char *last_warning;   /* to avoid repeating the same Warning event on every retry */
        /* A provided-node-ip problem being written as a False condition (see sync) */
        const char *condition_reason;
        char *condition_message;
        bool condition_false; /* we set the condition False: clear it when initializing */
        CnWriteExpectation written; /* our initializing PATCH, until the cache has it */
        uint64_t own_status_rv; /* the resourceVersion our last status PATCH made (cluster mode) */
        bool status_write_out;  /* the sync's status PATCH is out (cluster mode) */
        uint64_t deferred_rv;   /* the newest tainted event meanwhile, decided on its answer (cluster mode) */
        uint64_t seen_rv;       /* the newest resourceVersion of the Node without the taint (cluster mode) */
};

/* queue (initializer-queue.c) */
int queue_setup(Manager *m);
/* create: the state, made now if needed (NULL only on OOM); else NULL also for a Node queued
 * whose first sync has not started. */
NodeState *node_state_get(Manager *m, const char *name, bool create);
void node_state_drop(Manager *m, const char *name);
void queue_add(Manager *m, const char *name);
/* Retry later with this node's backoff (at least min_delay, e.g. a server's Retry-After). */
void queue_retry(NodeState *s, usec_t min_delay);
/* The sync of s is over (success or failure already scheduled): frees a worker slot. */
void queue_done(NodeState *s);
/* Cluster mode: drops the state of an initialized Node at rest (node: the Node as last seen), so
 * that thousands of initialized Nodes cost their cache records alone. s may be freed. */
void queue_release_at_rest(NodeState *s, json_object *node);
void queue_forget_all(Manager *m);
