/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster API infrastructure provider: reconciles CloudnodeMachines with one cloud provider
 * (lib/provider/provider.h machine lifecycle), following the decisions of machine-reconcile.c. Runs on the
 * controller's loop and client; only the leader reconciles. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "kube-client.h"
#include "kube-event.h"
#include "machine-credentials.h"
#include "metrics.h"
#include "provider.h"

typedef struct MachineController MachineController;

/* provider: "hetzner" or "openstack"; cloud_config_file: its cloud.conf (credentials through
 * token-file/password settings or the provider's environment variables, never logged). */
int machine_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                           const char *provider, const char *cloud_config_file, MachineController **ret);
MachineController *machine_controller_free(MachineController *mc);
DEFINE_TRIVIAL_CLEANUP_FUNC(MachineController *, machine_controller_free);

int machine_controller_start(MachineController *mc);
bool machine_controller_synced(MachineController *mc);
void machine_controller_set_leading(MachineController *mc, bool leading);
/* Cloud requests sent whose answer is awaited (cn_http_awaited()); 0 for NULL. */
unsigned machine_controller_awaited(MachineController *mc);

/* For the CloudnodeCluster reconciler, which serves the same cloud: */
CnProvider *machine_controller_provider(MachineController *mc);
CnCredentials *machine_controller_credentials(MachineController *mc);
const CnKubeResource *machine_controller_clusters_resource(void);
const CnKubeResource *machine_controller_infra_machines_resource(void);
/* The providerIDs of the instances of a Cluster's control-plane machines (the Machine or the
 * CloudnodeMachine has cluster.x-k8s.io/control-plane), not being deleted, oldest first. */
int machine_controller_control_plane(MachineController *mc, const char *ns, const char *cluster, char ***ret);
