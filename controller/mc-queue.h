/* SPDX-License-Identifier: Apache-2.0 */
/* What the machine-controller API's reconcilers (Machines, MachineSets, MachineDeployments) share:
 * per-object state on a kube-workqueue keyed "namespace/name", and McLoop, their informers and
 * leadership: an event of the primary informer (the kind the queue's keys name) queues its object,
 * an event of another goes to the reconciler's on_other; once every informer has synced (and on
 * becoming leader) every primary object is queued. */
#pragma once

#include "kube-informer.h"
#include "kube-workqueue.h"

/* The item of the object (created when missing); NULL on OOM. */
CnWorkItem *mc_queue_item(CnWorkQueue *q, const char *ns, const char *name);
/* Splits a "namespace/name" key (neither part can hold a '/': they are API names). */
int mc_queue_key_split(const char *key, char **ret_ns, char **ret_name);
/* A shared informer of r (in ns, NULL: all) with handlers, started, its absence reported. */
int mc_queue_watch(CnKubeClient *client, const CnKubeResource *r, const char *ns, const CnKubeInformerHandlers *h,
                   void *userdata, CnKubeInformer **ret);
/* Queues the objects of kind that own object (its ownerReferences), in object's namespace. */
void mc_queue_add_owners(CnWorkQueue *q, json_object *object, const char *kind);

#define MC_LOOP_INFORMERS_MAX 3U

typedef void (*McEventFn)(CnKubeInformer *i, json_object *object, void *userdata);

typedef struct McLoop {
        CnKubeClient *client;
        CnWorkQueue *queue;
        CnKubeInformer *informers[MC_LOOP_INFORMERS_MAX]; /* [0]: the primary */
        size_t n_informers;
        bool leading;
        McEventFn on_other;  /* an event of another informer than the primary */
        void (*on_synced)(void *userdata); /* every informer has synced (optional) */
        void *userdata;      /* of on_other and on_synced */
} McLoop;

/* Queues the object's "namespace/name" on the loop's queue. */
void mc_loop_enqueue(McLoop *l, json_object *object);
/* Queues every object of the primary informer. */
void mc_loop_enqueue_all(McLoop *l);
/* Starts the next informer (the first: the primary) of r in ns (NULL: all namespaces). */
int mc_loop_watch(McLoop *l, const CnKubeResource *r, const char *ns, CnKubeInformer **ret);
bool mc_loop_synced(McLoop *l);
/* Whether the queue may work: leading, and every informer synced. */
bool mc_loop_ready(McLoop *l);
void mc_loop_set_leading(McLoop *l, bool leading);
/* Frees the queue and drops the informers. */
void mc_loop_done(McLoop *l);
