/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's Machine API: reconciles cluster.k8s.io/v1alpha1 Machines of one namespace
 * (--machine-controller-namespace) with cloudnode's providers, as kubermatic/machine-controller
 * does with its own: its finalizer, status.errorReason/errorMessage for terminal errors,
 * spec.providerID and status.addresses from the server, status.nodeRef once the Node appears; on
 * deletion the Node is cordoned and drained through the eviction API (PodDisruptionBudgets hold
 * it back; kubermatic.io/skip-eviction or --machine-controller-skip-eviction-after skip it), then
 * the server is deleted, then the Node, then the finalizer goes. The spec translation is
 * mc-machine-spec.c; user data is the Secret named by the Machine's annotation
 * cloudnode.io/user-data-secret (or --machine-controller-user-data-secret), key "value". Runs on
 * the controller's loop and client; only the leader reconciles. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "kube-client.h"
#include "kube-event.h"
#include "metrics.h"
#include "time-util.h"

typedef struct McController McController;

typedef struct McControllerOptions {
        const char *namespace;          /* the Machines' (and their Secrets') namespace */
        const char *user_data_secret;   /* default user data Secret, NULL: none */
        usec_t skip_eviction_after;     /* 0: machine-controller's 2 h */
} McControllerOptions;

int mc_controller_new(sd_event *e, CnKubeClient *client, CnKubeEventRecorder *recorder, CnMetrics *metrics,
                      const McControllerOptions *o, McController **ret);
McController *mc_controller_free(McController *mc);
DEFINE_TRIVIAL_CLEANUP_FUNC(McController *, mc_controller_free);

int mc_controller_start(McController *mc);
bool mc_controller_synced(McController *mc);
void mc_controller_set_leading(McController *mc, bool leading);
/* Cloud requests sent whose answer is awaited (cn_http_awaited()); 0 for NULL. */
unsigned mc_controller_awaited(McController *mc);
