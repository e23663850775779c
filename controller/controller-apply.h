/* SPDX-License-Identifier: Apache-2.0 */
/* Deciding what to write for one object: nothing when the live object carries our spec hash and
 * every field we set still has our value (fields others added are left alone); a merge patch of
 * our fields when something differs; delete and create again when an immutable field (a
 * Deployment's selector, a binding's roleRef) differs; create when missing. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

typedef enum CnApplyAction {
        CN_APPLY_NONE,
        CN_APPLY_CREATE,
        CN_APPLY_PATCH,
        CN_APPLY_RECREATE,
        _CN_APPLY_ACTION_MAX,
} CnApplyAction;

const char *cn_apply_action_to_string(CnApplyAction a);

/* True when every field of want is in have with the same value. Objects: recursively, extra keys
 * of have are ignored (server defaults, other controllers' fields). Arrays: same length and each
 * element contained in the element at the same index (an added or removed arg is drift). */
bool cn_json_contains(json_object *want, json_object *have);

/* live NULL: not there. */
CnApplyAction cn_apply_decide(json_object *desired, json_object *live);

/* The merge patch that makes live carry desired's fields: desired without apiVersion/kind, with
 * live's metadata.resourceVersion as precondition. */
int cn_apply_patch(json_object *desired, json_object *live, json_object **ret);
