/* SPDX-License-Identifier: Apache-2.0 */
/* The provider's cloud config for a Cluster API workload cluster, published by the management
 * cluster's controller as a Secret next to the Cluster, free of I/O so that each decision is
 * unit-tested.
 *
 * The Secret `<cluster>-cloudnode-cloud-config` is of type addons.cluster.x-k8s.io/resource-set:
 * its one key, cloud-provider-config.yaml, holds the Namespace `cloudnode` and the ConfigMap
 * `cloudnode/cloud-provider-config` (key `config`), the source the workload cluster's
 * cloudnode-controller reads by default (--cloud-config-source). A ClusterResourceSet of the
 * cluster template names the Secret, and Cluster API applies it to the workload cluster. The cloud
 * config carries where the cloud is (endpoint, region, project, network), never a credential
 * (CnProviderOps.cloud_config). The Secret is owned by the CloudnodeCluster (an ownerReference
 * with its UID): it moves with the cluster (clusterctl move rewrites the UID), goes with it, and a
 * Secret of that name that is not ours is never changed. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#define CN_CLOUD_CONFIG_SECRET_SUFFIX "-cloudnode-cloud-config"
#define CN_CLOUD_CONFIG_SECRET_TYPE "addons.cluster.x-k8s.io/resource-set"
#define CN_CLOUD_CONFIG_SECRET_KEY "cloud-provider-config.yaml"
#define CN_CLOUD_CONFIG_WORKLOAD_NAMESPACE "cloudnode"
#define CN_CLOUD_CONFIG_WORKLOAD_NAME "cloud-provider-config"
#define CN_CLOUD_CONFIG_WORKLOAD_KEY "config"
/* The ClusterRole a namespace's owner binds for the controller to publish there. */
#define CN_CLOUD_CONFIG_CLUSTER_ROLE "cloudnode:controller:capi-cloud-config"

/* `<cluster>-cloudnode-cloud-config`; -EINVAL when that is no valid Secret name (over 253
 * characters, or a cluster name that is not a DNS subdomain). */
int cn_cloud_config_secret_name(const char *cluster, char **ret);

/* The Secret for the CloudnodeCluster infra_cluster (its namespace, name and UID) owned by the
 * Cluster cluster_name, from cloud_config ({"Global": {...}}, rendered as cloud.conf). */
int cn_cloud_config_secret(json_object *infra_cluster, const char *cluster_name, json_object *cloud_config,
                           json_object **ret);

/* Whether a live Secret is the one this CloudnodeCluster (uid) owns. */
bool cn_cloud_config_secret_is_ours(json_object *secret, const char *uid);

/* The merge patch that makes the live Secret (ours) the desired one, conditional on its
 * resourceVersion; *ret is NULL when it already is. */
int cn_cloud_config_secret_patch(json_object *live, json_object *desired, json_object **ret);
