/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster API infrastructure provider: reconciles CloudnodeClusters (the InfraCluster) of the
 * machine controller's provider: finalizer, the owner Cluster, failure domains from the cloud,
 * status.initialization.provisioned / status.ready and the Ready and Paused conditions.
 * the control-plane load balancer of spec.controlPlaneLoadBalancer, whose address becomes
 * spec.controlPlaneEndpoint unless the user set one (kept as it is). Runs on the controller's loop and
 * client and borrows the machine controller's providers and Cluster cache; only the leader
 * reconciles. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "kube-client.h"
#include "kube-event.h"
#include "machine-controller.h"

typedef struct ClusterController ClusterController;

/* mc must outlive the cluster controller. */
int cluster_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, MachineController *mc,
                           ClusterController **ret);
ClusterController *cluster_controller_free(ClusterController *cc);
DEFINE_TRIVIAL_CLEANUP_FUNC(ClusterController *, cluster_controller_free);

int cluster_controller_start(ClusterController *cc);
bool cluster_controller_synced(ClusterController *cc);
void cluster_controller_set_leading(ClusterController *cc, bool leading);
