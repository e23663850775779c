/* SPDX-License-Identifier: Apache-2.0 */
/* The Cluster API infrastructure cluster contract (v1beta2, with v1beta1's status.ready) as
 * decisions and patches, free of I/O so that each is unit-tested: what the reconciler does next
 * with a CloudnodeCluster and its owner Cluster, and the status merge patch it writes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "macro.h"

#define CN_CLUSTER_FINALIZER "cloudnodecluster.infrastructure.cluster.x-k8s.io"

typedef enum CnClusterStep {
        CN_CLUSTER_PAUSED,          /* Cluster spec.paused or the paused annotation: only say so */
        CN_CLUSTER_ADD_FINALIZER,
        CN_CLUSTER_WAIT_OWNER,      /* no owner Cluster (ownerReference) yet, or not in the cache */
        CN_CLUSTER_PROVISION,       /* failure domains from the cloud, then provisioned */
        CN_CLUSTER_REMOVE_FINALIZER,/* deleting: nothing in the cloud belongs to the cluster object */
        CN_CLUSTER_GONE,            /* deleting without our finalizer */
        _CN_CLUSTER_STEP_MAX,
} CnClusterStep;

const char *cn_cluster_step_to_string(CnClusterStep s);

/* cluster: the owner Cluster from the cache (NULL when not found). */
CnClusterStep cn_cluster_next_step(json_object *infra_cluster, json_object *cluster);

/* The owner Cluster's name from metadata.ownerReferences. */
const char *cn_cluster_owner_name(json_object *infra_cluster);

/* A copy of the condition list with the condition `type` set; lastTransitionTime (now, RFC 3339)
 * moves only when the status changes. */
int cn_conditions_set(json_object *conditions, const char *type, bool status, const char *reason,
                      const char *message, const char *now, json_object **ret);

/* The status merge patch for a CloudnodeCluster: failure_domains non-NULL means provisioned
 * (status.initialization.provisioned, status.ready, status.failureDomains, status.observedGeneration =
 * generation, Ready=True); otherwise
 * reason (if not NULL) sets Ready=False with message. The Paused condition follows paused.
 * *ret is NULL when the live status already says all of it (nothing to write). Once provisioned
 * the contract keeps initialization.provisioned true; a later failure only shows in Ready. */
int cn_cluster_status_patch(json_object *infra_cluster, json_object *failure_domains, int64_t generation, bool paused,
                            const char *reason, const char *message, const char *now, json_object **ret);

/* Whether the cluster asks for a control-plane load balancer: spec.controlPlaneLoadBalancer is
 * there and its enabled is not false (CAPH's default). */
bool cn_cluster_wants_load_balancer(json_object *infra_cluster);
/* Whether spec.controlPlaneEndpoint has a host (a user's is kept as it is). */
bool cn_cluster_has_endpoint(json_object *infra_cluster);
/* The merge patch that sets spec.controlPlaneEndpoint to the load balancer's {"host", "port"}
 * (a view of CnProviderOps.load_balancer_ensure); *ret is NULL when the spec has an endpoint
 * already. -EBADMSG when the view has no host or port. */
int cn_cluster_endpoint_patch(json_object *infra_cluster, json_object *lb_view, json_object **ret);

/* The failure domains the live status holds when they were found for the current generation
 * (status.observedGeneration) and the cluster is Ready: a restart reuses them instead of asking
 * the cloud again. Borrowed; -ENOENT otherwise. */
int cn_cluster_recorded_failure_domains(json_object *infra_cluster, json_object **ret);
