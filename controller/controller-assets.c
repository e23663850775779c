/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing the embedded operand and mapping its kinds to API resources. */
#include <errno.h>
#include <string.h>

#include "controller-assets.h"
#include "json-util.h"
#include "log.h"

#define RES(var, g, v, res, k, nsd)                                                                    \
        const CnKubeResource var = { .group = g, .version = v, .resource = res, .kind = k, .namespaced = nsd }

RES(cn_controller_resource_serviceaccounts, "", "v1", "serviceaccounts", "ServiceAccount", true);
RES(cn_controller_resource_configmaps, "", "v1", "configmaps", "ConfigMap", true);
RES(cn_controller_resource_clusterroles, "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false);
RES(cn_controller_resource_clusterrolebindings, "rbac.authorization.k8s.io", "v1", "clusterrolebindings",
    "ClusterRoleBinding", false);
RES(cn_controller_resource_roles, "rbac.authorization.k8s.io", "v1", "roles", "Role", true);
RES(cn_controller_resource_rolebindings, "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true);
RES(cn_controller_resource_deployments, "apps", "v1", "deployments", "Deployment", true);
RES(cn_controller_resource_poddisruptionbudgets, "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget",
    true);
RES(cn_controller_resource_validatingadmissionpolicies, "admissionregistration.k8s.io", "v1",
    "validatingadmissionpolicies", "ValidatingAdmissionPolicy", false);
RES(cn_controller_resource_validatingadmissionpolicybindings, "admissionregistration.k8s.io", "v1",
    "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", false);

const CnKubeResource *const cn_controller_resources[] = {
        &cn_controller_resource_serviceaccounts,
        &cn_controller_resource_clusterroles,
        &cn_controller_resource_clusterrolebindings,
        &cn_controller_resource_roles,
        &cn_controller_resource_rolebindings,
        &cn_controller_resource_validatingadmissionpolicies,
        &cn_controller_resource_validatingadmissionpolicybindings,
        &cn_controller_resource_configmaps,
        &cn_controller_resource_deployments,
        &cn_controller_resource_poddisruptionbudgets,
        NULL,
};

const CnKubeResource *cn_controller_resource_for(json_object *object) {
        const char *api_version = cn_json_string(object, "apiVersion", NULL);
        const char *kind = cn_json_string(object, "kind", NULL);

        if (!api_version || !kind)
                return NULL;
        for (const CnKubeResource *const *r = cn_controller_resources; *r; r++) {
                const char *slash = strchr(api_version, '/');
                const char *group = slash ? api_version : "";
                size_t glen = slash ? (size_t) (slash - api_version) : 0;
                const char *version = slash ? slash + 1 : api_version;

                if (!streq((*r)->kind, kind) || !streq((*r)->version, version))
                        continue;
                if (strlen((*r)->group) == glen && strneq((*r)->group, group, glen))
                        return *r;
        }
        return NULL;
}

int cn_controller_assets_load(json_object **ret_array) {
        _cleanup_json_ json_object *a = json_object_new_array();
        int r;

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < cn_controller_assets_count; i++) {
                _cleanup_free_ char *err = NULL;
                json_object *o;

                r = cn_json_parse(cn_controller_assets[i].json, strlen(cn_controller_assets[i].json),
                                  CN_JSON_MAX_SIZE, &o, &err);
                if (r < 0)
                        return log_debug_errno(r, "Embedded asset %s does not parse: %s",
                                               cn_controller_assets[i].file, strna(err));
                if (!cn_controller_resource_for(o)) {
                        json_object_put(o);
                        return log_debug_errno(EOPNOTSUPP,
                                               "Embedded asset %s has a kind the controller cannot apply",
                                               cn_controller_assets[i].file);
                }
                r = json_object_array_add(a, o);
                if (r < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        *ret_array = TAKE_PTR(a);
        return 0;
}
