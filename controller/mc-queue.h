/* SPDX-License-Identifier: Apache-2.0 */
/* What the machine-controller API's reconcilers (Machines, MachineSets) share: per-object state
 * on a kube-workqueue keyed "namespace/name", and their informers' start. */
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
