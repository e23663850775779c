/* SPDX-License-Identifier: Apache-2.0 */
/* The Cluster API infrastructure machine contract as a decision: given a CloudnodeMachine, its
 * owner Machine and the Cluster (each NULL when not found), what the reconciler does next. Kept
 * free of I/O so that every branch of the contract is unit-tested; the reconciler performs the
 * step and comes back when a watch event or a timer says something changed. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "macro.h"

#define CN_MACHINE_FINALIZER "cloudnodemachine.infrastructure.cluster.x-k8s.io"
#define CN_MACHINE_PAUSED_ANNOTATION "cluster.x-k8s.io/paused"
#define CN_MACHINE_UID_LABEL "cloudnode.io/machine-uid"
#define CN_CAPI_CONTROL_PLANE_LABEL "cluster.x-k8s.io/control-plane"

typedef enum CnMachineStep {
        CN_MACHINE_PAUSED,            /* Cluster spec.paused or the paused annotation: touch nothing */
        CN_MACHINE_ADD_FINALIZER,
        CN_MACHINE_WAIT_OWNER,        /* no owner Machine yet */
        CN_MACHINE_WAIT_INFRA,        /* the Cluster's infrastructure is not provisioned yet */
        CN_MACHINE_WAIT_BOOTSTRAP,    /* spec.bootstrap.dataSecretName not set yet */
        CN_MACHINE_FAILED,            /* a terminal failure is recorded: no retries */
        CN_MACHINE_LOOKUP_OR_CREATE,  /* no instance recorded: look up by UID, adopt or create */
        CN_MACHINE_POLL,              /* instance recorded, not ready: poll with backoff */
        CN_MACHINE_READY,             /* nothing to do */
        CN_MACHINE_CLEANUP,           /* deleting: delete the instance until the cloud confirms */
        CN_MACHINE_REMOVE_FINALIZER,  /* deleting and the instance is gone */
        CN_MACHINE_GONE,              /* deleting without our finalizer: nothing to do */
        _CN_MACHINE_STEP_MAX,
} CnMachineStep;

const char *cn_machine_step_to_string(CnMachineStep s);

/* The object names an instance (spec.providerID, status.instanceID) but status.instanceLabelUID
 * is not its UID: it was recreated under a new UID (clusterctl move), or recorded before the
 * field existed. The instance is relabeled (migrate_uid) before it is trusted or deleted. */
bool cn_machine_moved(json_object *infra_machine);

/* instance_gone: during deletion, whether the cloud confirmed that no instance exists. */
CnMachineStep cn_machine_next_step(json_object *infra_machine, json_object *machine, json_object *cluster,
                                   bool instance_gone);

/* Shared by the machine and the cluster contract: */
/* whether metadata.finalizers holds finalizer */
bool cn_capi_has_finalizer(json_object *o, const char *finalizer);
/* the merge patch that adds (or removes) finalizer, keeping the others, with the object's
 * resourceVersion as precondition */
int cn_capi_finalizer_patch(json_object *o, const char *finalizer, bool add, json_object **ret);
/* whether the boolean at the path is true */
bool cn_capi_is_true(json_object *o, ...) _sentinel_;
/* the name in metadata.ownerReferences of that kind in group cluster.x-k8s.io */
const char *cn_capi_owner_name(json_object *o, const char *kind);
/* Cluster spec.paused or the object's cluster.x-k8s.io/paused annotation */
bool cn_capi_paused(json_object *object, json_object *cluster);
/* whether applying the JSON merge patch (RFC 7386) to o would change it: writes that would not
 * are skipped, since each write echoes back as a watch event */
bool cn_capi_patch_changes(json_object *o, json_object *patch);

/* The owner Machine's name from metadata.ownerReferences (kind Machine, group cluster.x-k8s.io). */
const char *cn_machine_owner_name(json_object *infra_machine);

typedef enum CnMachineMatch {
        CN_MACHINE_MATCH_NONE,
        CN_MACHINE_MATCH_ONE,
        CN_MACHINE_MATCH_MANY,
} CnMachineMatch;

/* The failure domain the owner Machine asks for (spec.failureDomain), checked against the ones the
 * Cluster lists (status.failureDomains, copied there by Cluster API from the CloudnodeCluster):
 * 0 with *ret NULL when the Machine asks for none, 0 with the name (borrowed) when the Cluster
 * lists it, -ENOENT when it does not: a terminal condition, since no retry can make it valid. */
int cn_machine_failure_domain(json_object *machine, json_object *cluster, const char **ret);

/* A copy of the provider spec with member `field` (the provider's placement: Hetzner location,
 * OpenStack availabilityZone) set to the failure domain, which wins over the template's value as
 * Machine.spec.failureDomain does in every provider of Cluster API. */
int cn_machine_place(json_object *spec, const char *field, const char *failure_domain, json_object **ret);

/* Instances found by the UID label: none (create), one (adopt), several (refuse). */
CnMachineMatch cn_machine_match(json_object *instances);

/* The merge patch for the status subresource of a provisioned (ready) or still provisioning
 * machine: v1beta2 status.initialization.provisioned, v1beta1 status.ready, addresses, the
 * instance id/state and a Ready condition with a reason, set in the live conditions (others kept)
 * with lastTransitionTime now when its status changes and the live one's when it does not. */
int cn_machine_status_patch(json_object *live_conditions, const char *now, const char *instance_id,
                            const char *instance_state, json_object *addresses, bool ready, const char *reason,
                            const char *message, json_object **ret);
