/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineSet (cluster.k8s.io/v1alpha1) as decisions free of I/O: which
 * Machines a MachineSet owns, the Machine it creates from its template, which Machines go when it
 * scales down (spec.deletePolicy Random, Newest, Oldest, with machine-controller's priorities: a
 * Machine being deleted, annotated cluster.k8s.io/delete-machine or failed goes first), and its
 * status. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "macro.h"
#include "time-util.h"

#define MC_ANNOTATION_DELETE_MACHINE "cluster.k8s.io/delete-machine"

/* metav1.LabelSelector (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist) against a
 * labels map. An empty or missing selector matches nothing (as a MachineSet's must not). -EINVAL
 * for an operator it does not know. */
int mc_selector_matches(json_object *selector, json_object *labels);

/* Whether machine's controller ownerReference is the object of that kind and uid. */
bool mc_owned_by(json_object *machine, const char *kind, const char *uid);

/* Sets o's metadata.ownerReferences to one controller reference to owner, of kind (in
 * cluster.k8s.io/v1alpha1), as the garbage collector and mc_owned_by() read it. */
int mc_set_controller_ref(json_object *o, const char *kind, json_object *owner);

/* The Machine a MachineSet creates: generateName "<set>-", the template's labels and annotations,
 * its spec, a controller ownerReference to the set. -EINVAL (with a reason) when the template's
 * labels do not match the set's selector, as the API server's validation of a MachineSet would. */
int mc_machineset_new_machine(json_object *set, json_object **ret, char **ret_reason);

/* The count Machines to delete among machines (an array), by policy; now is CLOCK_REALTIME. The
 * returned array holds references to members of machines. */
int mc_machineset_pick_deletions(json_object *machines, const char *policy, size_t count, usec_t now,
                                 json_object **ret);

/* Whether the Node's Ready condition is True. */
bool mc_node_ready(json_object *node);
/* Whether the Machine counts as ready: status.nodeRef names a Node that is Ready. node may be NULL. */
bool mc_machine_ready(json_object *machine, json_object *node);

/* spec.minReadySeconds of a MachineSet or MachineDeployment: 0 when missing, -EINVAL when it is not
 * an integer of 0 or more. */
int mc_min_ready_seconds(json_object *o, int64_t *ret);
/* Whether the Machine counts as available, as machine-controller's isNodeAvailable: ready, and for
 * min_ready seconds 0, or ready since its Node's Ready condition's lastTransitionTime at least
 * min_ready seconds before now (CLOCK_REALTIME); without that time never. *ret_wait (optional):
 * when it is ready but not available yet, the time until it is, else 0. */
bool mc_machine_available(json_object *machine, json_object *node, int64_t min_ready, usec_t now, usec_t *ret_wait);
