/* SPDX-License-Identifier: Apache-2.0 */
/* What a machine-controller Machine writes on its Node, as kubermatic/machine-controller does
 * (ensureNodeOwnerRef, ensureNodeLabelsAnnotationsAndTaints): the label machine-controller/owned-by
 * with the Machine's UID as soon as the Node is found; once the Node is Ready, the annotation
 * cluster.k8s.io/machine "<namespace>/<name>" (cluster-autoscaler finds the Machine by it), the
 * Machine's spec.metadata.labels and spec.metadata.annotations whose keys the Node does not carry
 * yet, and each of spec.taints that no taint of the Node matches (same key and effect). Only
 * those two keys of machine-controller's own are overwritten; nothing is ever removed, so what
 * the kubelet or a user set on the Node stays. A decision free of I/O. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "macro.h"
#include "mc-machine-spec.h"

#define MC_LABEL_NODE_OWNER "machine-controller/owned-by"

/* The merge patch of the Node (metadata.resourceVersion as precondition: spec.taints is replaced
 * whole), -EALREADY when the Node has everything already. -EINVAL with a reason when the Machine's
 * spec.metadata or spec.taints is not valid for a Node (the API server would refuse the write
 * each time). ready: whether the Node's Ready condition is True. */
int mc_node_metadata_patch(json_object *machine, json_object *node, bool ready, json_object **ret,
                           char **ret_reason);
