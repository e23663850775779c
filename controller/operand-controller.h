/* SPDX-License-Identifier: Apache-2.0 */
/* The operand controller of `cloudnode-controller run`: applies the operand (manifests/operand:
 * the node initializer's Deployment, its RBAC, cloud-conf) for the cluster's cloud provider and
 * reports status on the CloudnodeOperator (or OpenShift's ClusterOperator) `cloudnode`. Which
 * optional APIs the cluster serves is discovered first; then its informers start. Runs on the
 * controller's loop and client; only the leader writes. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "controller-manager.h"
#include "kube-client.h"
#include "kube-event.h"
#include "metrics.h"

typedef struct OperandController OperandController;

/* o is copied; the strings it points to must outlive the controller. */
int operand_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                           const ControllerOptions *o, OperandController **ret);
OperandController *operand_controller_free(OperandController *oc);
DEFINE_TRIVIAL_CLEANUP_FUNC(OperandController *, operand_controller_free);

/* Starts API discovery, then the informers. A failure of either exits the loop with EXIT_FAILURE
 * (logged). */
int operand_controller_start(OperandController *oc);
bool operand_controller_synced(OperandController *oc);
void operand_controller_set_leading(OperandController *oc, bool leading);
/* The daemon is stopping: no pass starts any more. */
void operand_controller_stop(OperandController *oc);
/* Before a scrape: exports the growth of its informers' watch restarts. */
void operand_controller_export_watch_restarts(OperandController *oc);
