/* SPDX-License-Identifier: Apache-2.0 */
/* The operand objects (manifests/operand) embedded at build time by gen-assets.py, and the
 * resource types cloudnode-controller knows how to apply. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "kube-client.h"

typedef struct CnControllerAsset {
        const char *file; /* manifests/operand/FILE it came from */
        const char *json; /* one object, compact JSON */
} CnControllerAsset;

extern const CnControllerAsset cn_controller_assets[];
extern const size_t cn_controller_assets_count;

/* All embedded objects, parsed, as a new JSON array. */
int cn_controller_assets_load(json_object **ret_array);

/* The resource types the operand uses (plus ConfigMaps for cloud-conf). */
extern const CnKubeResource cn_controller_resource_serviceaccounts;
extern const CnKubeResource cn_controller_resource_configmaps;
extern const CnKubeResource cn_controller_resource_clusterroles;
extern const CnKubeResource cn_controller_resource_clusterrolebindings;
extern const CnKubeResource cn_controller_resource_roles;
extern const CnKubeResource cn_controller_resource_rolebindings;
extern const CnKubeResource cn_controller_resource_deployments;
extern const CnKubeResource cn_controller_resource_poddisruptionbudgets;
extern const CnKubeResource cn_controller_resource_validatingadmissionpolicies;
extern const CnKubeResource cn_controller_resource_validatingadmissionpolicybindings;

/* NULL-terminated list of the above, in apply order (identities and RBAC before workloads). */
extern const CnKubeResource *const cn_controller_resources[];

/* The resource type of an object by its apiVersion and kind; NULL when unknown. */
const CnKubeResource *cn_controller_resource_for(json_object *object);
