/* SPDX-License-Identifier: Apache-2.0 */
/* The two JSON merge patches that initialize a Node (docs/design.md, "Node writes"):
 *   1. on nodes/NAME/status: {"status":{"addresses":[...]}} — a merge patch replaces the list,
 *      so the result is exactly what we computed;
 *   2. on nodes/NAME: metadata.resourceVersion as precondition, spec.providerID (only if empty),
 *      the well-known instance-type/region/zone labels, the provider's extra labels (never
 *      reserved, never overwriting) and the taint list minus the uninitialized taint.
 * Builders only: they read the cached Node and never touch the network. */
#pragma once

#include "macro.h"
#include "node-addresses.h"
#include "time-util.h"

#define CN_TAINT_UNINITIALIZED "node.cloudprovider.kubernetes.io/uninitialized"
#define CN_TAINT_SHUTDOWN "node.cloudprovider.kubernetes.io/shutdown"
#define CN_LABEL_INSTANCE_TYPE "node.kubernetes.io/instance-type"
#define CN_LABEL_REGION "topology.kubernetes.io/region"
#define CN_LABEL_ZONE "topology.kubernetes.io/zone"
#define CN_ANNOTATION_PROVIDED_NODE_IP "alpha.kubernetes.io/provided-node-ip"

typedef struct CnNodeInitData {
        const char *provider_id;
        const char *instance_type;
        const char *region;
        const char *zone;
        char *const *extra_labels; /* strv "key=value" */
} CnNodeInitData;

int cn_node_patch_status_addresses(const CnNodeAddressList *addresses, json_object **ret);

/* The Node condition this project writes: False while initialization is blocked by something the
 * cluster's owner must fix (a provided-node-ip that matches none of the instance's addresses),
 * True once the Node is initialized after that. Nodes that never had such a problem never get
 * it, so the normal path costs no extra write. */
#define CN_CONDITION_CLOUD_PROVIDER_INITIALIZED "CloudProviderInitialized"

typedef struct CnNodeCondition {
        const char *type;
        const char *status; /* "True", "False", "Unknown" */
        const char *reason;
        const char *message;
} CnNodeCondition;

/* The Node's status.conditions entry of that type, or NULL. */
json_object *cn_node_get_condition(json_object *node, const char *type);

/* A strategic merge patch (CN_KUBE_PATCH_STRATEGIC) on nodes/NAME/status that sets one condition:
 * status.conditions merges by type there, so the kubelet's conditions stay as they are.
 * lastTransitionTime changes only with the status. With addresses, the same patch also sets
 * status.addresses, with a "$patch": "replace" element because that list is declared
 * merge-by-type and would otherwise fold an IPv4 and an IPv6 InternalIP into one (as upstream's
 * PatchNodeStatus does). now: CLOCK_REALTIME. -EALREADY when addresses is NULL and the Node
 * already carries this condition with the same status, reason and message. */
int cn_node_patch_status_condition(json_object *node, const CnNodeCondition *c, const CnNodeAddressList *addresses,
                                   usec_t now, json_object **ret);

/* Builds patch 2 from the cached Node. Well-known label values that Kubernetes would reject are
 * left out (logged at debug level) rather than blocking initialization. -EBADMSG if the Node
 * has no metadata.resourceVersion. */
int cn_node_patch_initialize(json_object *node, const CnNodeInitData *d, json_object **ret);

/* Taint helpers on a Node object. */
bool cn_node_has_taint(json_object *node, const char *key);
/* Merge patch that sets spec.taints to the Node's taints with `key` added (effect NoSchedule)
 * or removed, with resourceVersion as precondition. -EALREADY if nothing would change. */
int cn_node_patch_taint(json_object *node, const char *key, bool add, json_object **ret);

/* Small accessors used by both modes. Strings point into the object. */
const char *cn_node_get_name(json_object *node);
const char *cn_node_get_resource_version(json_object *node);
const char *cn_node_get_uid(json_object *node);
const char *cn_node_get_provider_id(json_object *node);
json_object *cn_node_get_labels(json_object *node);
