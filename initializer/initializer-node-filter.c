/* SPDX-License-Identifier: Apache-2.0 */
#include "initializer-node-filter.h"
#include "metadata.h"
#include "node-patch.h"
#include "string-util.h"

/* Of a kubelet's Node (10-30 KB of JSON: images, nodeInfo, capacity, managedFields, ...) the
 * initializer reads these members and nothing else, so the informer parses only them:
 * metadata.name, uid (Events, the lifecycle's delete precondition), resourceVersion (the patch
 * precondition, write expectations), creationTimestamp (lifecycle grace period), the labels its
 * patch sets only when absent, the provided-node-ip annotation; spec.providerID and spec.taints
 * (the taint patches send the whole list back); status.addresses (the kubelet's hostname among
 * them); and of the conditions Ready (the lifecycle) and our CloudProviderInitialized, what is
 * compared. No write of ours needs more: both PATCHes are merge patches of members listed here.
 *
 * Labels are most of what is left of a Node (a kubelet's dozen take half of the text kept), and
 * the initializer compares only those it may set; a provider label the filter does not keep is
 * never applied (initializer_node_label_kept()), since a value someone else set would not be
 * seen. */
static const CnJsonFilter node_labels[] = {
        { CN_LABEL_INSTANCE_TYPE }, { CN_LABEL_REGION }, { CN_LABEL_ZONE },
        { CN_LABEL_HCLOUD_NETWORK_ZONE }, { CN_LABEL_AWS_ZONE_ID }, {}
};
static const CnJsonFilter node_annotations[] = { { CN_ANNOTATION_PROVIDED_NODE_IP }, {} };
static const CnJsonFilter node_metadata[] = {
        { "name" }, { "uid" }, { "resourceVersion" }, { "creationTimestamp" }, { "labels", node_labels },
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

/* What is read of the Node the initializing PATCH returns in cluster mode: its Event's reference,
 * the resourceVersion the write expectation waits for, the providerID logged, and the taints
 * whose absence lets its state go (initializer-queue.c). */
static const CnJsonFilter patched_metadata[] = { { "name" }, { "uid" }, { "resourceVersion" }, {} };
const CnJsonFilter initializer_node_patched_filter[] = {
        { "metadata", patched_metadata }, { "spec", node_spec }, {}
};

bool initializer_node_label_kept(const char *key) {
        for (const CnJsonFilter *f = node_labels; key && f->name; f++)
                if (streq(f->name, key))
                        return true;
        return false;
}
