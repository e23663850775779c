/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment controller (cluster.k8s.io/v1alpha1): one MachineSet per
 * template, rolled over as mc-machinedeployment.c plans, the revision annotation, spec.paused, and
 * status (replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
 * observedGeneration). Only the leader writes. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "kube-client.h"
#include "kube-event.h"
#include "metrics.h"

typedef struct McDeployController McDeployController;

int mc_deploy_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                             const char *namespace,
                             McDeployController **ret);
McDeployController *mc_deploy_controller_free(McDeployController *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(McDeployController *, mc_deploy_controller_free);

int mc_deploy_controller_start(McDeployController *c);
bool mc_deploy_controller_synced(McDeployController *c);
void mc_deploy_controller_set_leading(McDeployController *c, bool leading);
