/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineSet controller (cluster.k8s.io/v1alpha1): keeps spec.replicas
 * Machines made from spec.template (mc-machineset.c decides which), owned by the set, in the
 * namespace of --machine-controller-namespace; writes status.replicas, fullyLabeledReplicas,
 * readyReplicas, availableReplicas and observedGeneration. Only the leader writes. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "kube-client.h"
#include "kube-event.h"

typedef struct McSetController McSetController;

int mc_set_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, const char *namespace,
                          McSetController **ret);
McSetController *mc_set_controller_free(McSetController *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(McSetController *, mc_set_controller_free);

int mc_set_controller_start(McSetController *c);
bool mc_set_controller_synced(McSetController *c);
void mc_set_controller_set_leading(McSetController *c, bool leading);
