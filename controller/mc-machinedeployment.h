/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment (cluster.k8s.io/v1alpha1) as decisions free of I/O, as
 * Kubernetes' Deployment controller makes them: one MachineSet per template (named
 * "<deployment>-<hash>", label machine-template-hash), a rolling update bounded by
 * strategy.rollingUpdate.maxSurge and maxUnavailable (ints or percentages of spec.replicas; surge
 * rounds up, unavailability down; both 0 means 1 unavailable), the revision annotation, paused. */
#pragma once

#include <json-c/json.h>

#include "macro.h"
#include "time-util.h"

#define MC_ANNOTATION_REVISION "machinedeployment.clusters.k8s.io/revision"
#define MC_LABEL_TEMPLATE_HASH "machine-template-hash"

/* The first 10 hex digits of the SHA-256 of the template's JSON. */
int mc_template_hash(json_object *md, char ret[static 11]);

/* The MachineSet of the deployment's current template, with replicas 0 and the revision. */
int mc_deployment_new_set(json_object *md, const char *hash, unsigned revision, json_object **ret);

typedef struct McSetView {
        const char *name;
        bool current;         /* of the current template */
        int64_t replicas;     /* spec */
        int64_t available;    /* status.availableReplicas */
        unsigned revision;
        int64_t status_replicas;  /* status.replicas */
        bool observed;        /* status.observedGeneration is metadata.generation or later */
        usec_t created;       /* metadata.creationTimestamp, CLOCK_REALTIME */
} McSetView;

/* The view of a MachineSet; hash: the current template's. Borrows set's strings. */
McSetView mc_set_view(json_object *set, const char *hash);

/* What machine-controller's admission refuses and its controller does not do: a strategy.type
 * other than RollingUpdate (it has no Recreate), a minReadySeconds or revisionHistoryLimit that is
 * not an integer of 0 or more. -EINVAL with the reason. */
int mc_deployment_validate(json_object *md, char **ret_reason);

/* spec.revisionHistoryLimit, machine-controller's default (its defaulting webhook's) 1 when missing. */
int64_t mc_deployment_history_limit(json_object *md);

/* The old sets to delete once the rollout is complete (complete: the status shows spec.replicas
 * updated, there and available), as machine-controller's cleanupDeployment: the oldest beyond
 * spec.revisionHistoryLimit among the old sets, skipping any with replicas (spec or status) or
 * not yet observed. ret_delete[i] for each set. */
void mc_deployment_cleanup(json_object *md, bool complete, const McSetView *sets, size_t n, bool *ret_delete);

/* The new spec.replicas of each set (same order) for one step of the rolling update. */
int mc_deployment_plan(json_object *md, const McSetView *sets, size_t n, int64_t *ret_replicas);
