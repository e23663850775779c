/* SPDX-License-Identifier: Apache-2.0 */
#include "initializer-node-filter.h"
#include "node-patch.h"

/* Of a kubelet's Node (10-30 KB of JSON: images, nodeInfo, capacity, managedFields, ...) the
 * initializer reads these members and nothing else, so the informer parses only them:
 * metadata.name, uid (Events, the lifecycle's delete precondition), resourceVersion (the patch
 * precondition, write expectations), creationTimestamp (lifecycle grace period), labels (the
 * hostname, and labels set only when absent), the provided-node-ip annotation; spec.providerID
 * and spec.taints (the taint patches send the whole list back); status.addresses; and of the
 * conditions Ready (the lifecycle) and our CloudProviderInitialized, what is compared. No
 * write of ours needs more: both PATCHes are merge patches of members listed here. */
static const CnJsonFilter node_annotations[] = { { CN_ANNOTATION_PROVIDED_NODE_IP }, {} };
static const CnJsonFilter node_metadata[] = {
        { "name" }, { "uid" }, { "resourceVersion" }, { "creationTimestamp" }, { "labels" },
        { "annotations", node_annotations }, {}
};
static const CnJsonFilter node_spec[] = { { "providerID" }, { "taints" }, {} };
static const CnJsonFilter node_condition[] = { { "type" }, { "status" }, { "reason" }, { "message" }, {} };
static const char *const node_condition_types[] = { "Ready", CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, NULL };
static const CnJsonFilter node_status[] = {
        { "addresses" },
        { "conditions", node_condition, .select_key = "type", .select_values = node_condition_types },
        {}
};
const CnJsonFilter initializer_node_filter[] = {
        { "metadata", node_metadata }, { "spec", node_spec }, { "status", node_status }, {}
};
