/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: the Node initialization common to both modes (initializer-sync.c): from
 * the instance to the two PATCHes, and the Events about a Node. */
#pragma once

#include <json-c/json.h>

#include "macro.h"
#include "node-addresses.h"
#include "time-util.h"

typedef struct CnProviderInstance CnProviderInstance;
typedef struct Manager Manager;
typedef struct NodeState NodeState;

/* sync (initializer-sync.c): one pass over a Node; ends with queue_done(). */
void sync_node(NodeState *s);
/* The instance for s arrived (or failed). Takes ownership of instance. */
void sync_apply_instance(NodeState *s, int error, usec_t retry_after, const char *message,
                         CnProviderInstance *instance);
/* Compute addresses for a Node from an instance: 0, or the errors of cn_node_addresses_compute(). */
int sync_compute_addresses(Manager *m, json_object *node, const CnProviderInstance *instance,
                           CnNodeAddressList *ret, char **ret_bad_ip);
/* Patches status.addresses of a Node when they differ from `addresses`; for the address
 * updates after initialization. */
int sync_update_addresses(Manager *m, json_object *node, const CnProviderInstance *instance);
void manager_warning_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) _printf_(4, 5);
void manager_normal_event(Manager *m, json_object *node, const char *reason, const char *fmt, ...) _printf_(4, 5);
