/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment (cluster.k8s.io/v1alpha1) as decisions free of I/O, as
 * Kubernetes' Deployment controller makes them: one MachineSet per template (named
 * "<deployment>-<hash>", label machine-template-hash), a rolling update bounded by
 * strategy.rollingUpdate.maxSurge and maxUnavailable (ints or percentages of spec.replicas; surge
 * rounds up, unavailability down; both 0 means 1 unavailable), the revision annotation, paused. */
#pragma once

#include <json-c/json.h>

#include "macro.h"

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
} McSetView;

/* The new spec.replicas of each set (same order) for one step of the rolling update. */
int mc_deployment_plan(json_object *md, const McSetView *sets, size_t n, int64_t *ret_replicas);
