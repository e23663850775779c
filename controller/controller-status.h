/* SPDX-License-Identifier: Apache-2.0 */
/* Operator status conditions (Available, Progressing, Degraded) as OpenShift's ClusterOperator
 * and our CloudnodeOperator carry them. Building the new list keeps lastTransitionTime of every
 * condition whose status did not change, so an unchanged state compares equal and costs no write. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "time-util.h"

#define CN_REASON_AS_EXPECTED "AsExpected"
#define CN_REASON_SYNCING_RESOURCES "SyncingResources"
#define CN_REASON_SYNCING_FAILED "SyncingFailed"
#define CN_REASON_CREDENTIALS_MISSING "CredentialsSecretMissing"

typedef struct CnCondition {
        const char *type;
        bool status;
        const char *reason;
        const char *message;
} CnCondition;

#define CN_OPERAND_DEPLOYMENT "cloudnode-cloud-controller-manager"
#define CN_REASON_DEPLOYMENT_UNAVAILABLE "DeploymentUnavailable"
#define CN_REASON_DEPLOYMENT_ROLLING_OUT "DeploymentRollingOut"

/* The operand Deployment's rollout as OpenShift's cluster operators report theirs: available while
 * at least one replica is available; progressing until the Deployment's controller has observed
 * the latest spec and every desired replica is updated and available. deployment may be NULL (not
 * created yet). *ret_message says how many replicas are updated and available (caller frees). */
int cn_status_rollout(json_object *deployment, bool *ret_available, bool *ret_progressing, char **ret_message);

/* live_conditions: the object's current status.conditions (may be NULL). now: CLOCK_REALTIME.
 * ret_changed: whether type/status/reason/message of any condition differs from live. */
int cn_status_conditions(const CnCondition *conditions, size_t n, json_object *live_conditions, usec_t now,
                         json_object **ret, bool *ret_changed);
