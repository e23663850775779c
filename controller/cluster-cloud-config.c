/* SPDX-License-Identifier: Apache-2.0 */
/* The workload cluster's cloud config Secret. See cluster-cloud-config.h. */
#include <errno.h>

#include "cluster-cloud-config.h"
#include "hash-util.h"
#include "ini-writer.h"
#include "json-util.h"
#include "labels.h"
#include "string-util.h"

int cn_cloud_config_secret_name(const char *cluster, char **ret) {
        _cleanup_free_ char *name = NULL;

        if (isempty(cluster) || !cn_label_value_is_valid(cluster))
                return -EINVAL;
        name = cn_strjoin(cluster, CN_CLOUD_CONFIG_SECRET_SUFFIX, NULL);
        if (!name)
                return -ENOMEM;
        if (!cn_node_name_is_valid(name))
                return -EINVAL;
        *ret = TAKE_PTR(name);
        return 0;
}

/* The manifests Cluster API applies to the workload cluster: the Namespace, then the ConfigMap,
 * as JSON documents (YAML's superset) separated by "---". */
static int workload_manifests(json_object *cloud_config, char **ret) {
        _cleanup_json_ json_object *ns = json_object_new_object(), *cm = json_object_new_object();
        _cleanup_free_ char *text = NULL, *ns_text = NULL, *cm_text = NULL;
        _cleanup_ini_ CnIni *w = NULL;
        size_t size;
        int r;

        if (!ns || !cm)
                return -ENOMEM;
        r = cn_ini_new(&w);
        if (r < 0)
                return r;
        (void) cn_ini_add_json(w, cloud_config);
        r = cn_ini_finish(w, &text, &size);
        if (r < 0)
                return r;
        if ((r = cn_json_set_string(ns, "v1", "apiVersion", NULL)) < 0 ||
            (r = cn_json_set_string(ns, "Namespace", "kind", NULL)) < 0 ||
            (r = cn_json_set_string(ns, CN_CLOUD_CONFIG_WORKLOAD_NAMESPACE, "metadata", "name", NULL)) < 0 ||
            (r = cn_json_set_string(cm, "v1", "apiVersion", NULL)) < 0 ||
            (r = cn_json_set_string(cm, "ConfigMap", "kind", NULL)) < 0 ||
            (r = cn_json_set_string(cm, CN_CLOUD_CONFIG_WORKLOAD_NAME, "metadata", "name", NULL)) < 0 ||
            (r = cn_json_set_string(cm, CN_CLOUD_CONFIG_WORKLOAD_NAMESPACE, "metadata", "namespace", NULL)) < 0 ||
            (r = cn_json_set_string(cm, text, "data", CN_CLOUD_CONFIG_WORKLOAD_KEY, NULL)) < 0)
                return r;
        if ((r = cn_json_to_string(ns, CN_JSON_COMPACT, &ns_text)) < 0 ||
            (r = cn_json_to_string(cm, CN_JSON_COMPACT, &cm_text)) < 0)
                return r;
        *ret = cn_strjoin(ns_text, "\n---\n", cm_text, "\n", NULL);
        return *ret ? 0 : -ENOMEM;
}

int cn_cloud_config_secret(json_object *infra_cluster, const char *cluster_name, json_object *cloud_config,
                           json_object **ret) {
        const char *ns = cn_json_string(infra_cluster, "metadata", "namespace", NULL);
        const char *owner = cn_json_string(infra_cluster, "metadata", "name", NULL);
        const char *uid = cn_json_string(infra_cluster, "metadata", "uid", NULL);
        const char *api_version = cn_json_string(infra_cluster, "apiVersion", NULL);
        _cleanup_json_ json_object *secret = json_object_new_object(), *ref = json_object_new_object();
        _cleanup_free_ char *name = NULL, *manifests = NULL, *b64 = NULL;
        int r;

        if (!secret || !ref)
                return -ENOMEM;
        if (isempty(ns) || isempty(owner) || isempty(uid) || !json_object_is_type(cloud_config, json_type_object))
                return -EINVAL;
        r = cn_cloud_config_secret_name(cluster_name, &name);
        if (r < 0)
                return r;
        r = workload_manifests(cloud_config, &manifests);
        if (r < 0)
                return r;
        r = cn_base64_encode(manifests, strlen(manifests), &b64);
        if (r < 0)
                return r;
        if ((r = cn_json_set_string(ref, api_version ?: "infrastructure.cluster.x-k8s.io/v1beta2", "apiVersion",
                                    NULL)) < 0 ||
            (r = cn_json_set_string(ref, "CloudnodeCluster", "kind", NULL)) < 0 ||
            (r = cn_json_set_string(ref, owner, "name", NULL)) < 0 ||
            (r = cn_json_set_string(ref, uid, "uid", NULL)) < 0 ||
            (r = cn_json_set(ref, json_object_new_boolean(true), "controller", NULL)) < 0)
                return r;
        if ((r = cn_json_set_string(secret, "v1", "apiVersion", NULL)) < 0 ||
            (r = cn_json_set_string(secret, "Secret", "kind", NULL)) < 0 ||
            (r = cn_json_set_string(secret, name, "metadata", "name", NULL)) < 0 ||
            (r = cn_json_set_string(secret, ns, "metadata", "namespace", NULL)) < 0 ||
            (r = cn_json_set_string(secret, cluster_name, "metadata", "labels", "cluster.x-k8s.io/cluster-name",
                                    NULL)) < 0 ||
            (r = cn_json_set(secret, json_object_new_array(), "metadata", "ownerReferences", NULL)) < 0 ||
            (r = json_object_array_add(cn_json_get(secret, "metadata", "ownerReferences", NULL),
                                       json_object_get(ref))) < 0 ||
            (r = cn_json_set_string(secret, CN_CLOUD_CONFIG_SECRET_TYPE, "type", NULL)) < 0 ||
            (r = cn_json_set_string(secret, b64, "data", CN_CLOUD_CONFIG_SECRET_KEY, NULL)) < 0)
                return r < 0 ? r : -ENOMEM;
        *ret = TAKE_PTR(secret);
        return 0;
}

bool cn_cloud_config_secret_is_ours(json_object *secret, const char *uid) {
        json_object *refs = cn_json_get(secret, "metadata", "ownerReferences", NULL);

        if (isempty(uid) || !json_object_is_type(refs, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(refs); i++) {
                json_object *ref = json_object_array_get_idx(refs, i);

                if (cn_json_string_is(ref, "kind", "CloudnodeCluster") && cn_json_string_is(ref, "uid", uid))
                        return true;
        }
        return false;
}

int cn_cloud_config_secret_patch(json_object *live, json_object *desired, json_object **ret) {
        const char *label = cn_json_string(desired, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL);
        const char *rv = cn_json_string(live, "metadata", "resourceVersion", NULL);
        json_object *want = cn_json_get(desired, "data", CN_CLOUD_CONFIG_SECRET_KEY, NULL);
        _cleanup_json_ json_object *patch = NULL;
        int r;

        *ret = NULL;
        if (cn_json_equal(cn_json_get(live, "data", CN_CLOUD_CONFIG_SECRET_KEY, NULL), want) &&
            cn_json_string_is(live, "type", CN_CLOUD_CONFIG_SECRET_TYPE) &&
            cn_json_string_is(cn_json_get(live, "metadata", "labels", NULL), "cluster.x-k8s.io/cluster-name", label))
                return 0;
        /* The type of a Secret cannot change: one of another type is replaced by the caller. */
        if (!cn_json_string_is(live, "type", CN_CLOUD_CONFIG_SECRET_TYPE))
                return -EMEDIUMTYPE;
        if (isempty(rv))
                return -EINVAL;
        patch = json_object_new_object();
        if (!patch)
                return -ENOMEM;
        if ((r = cn_json_set_string(patch, rv, "metadata", "resourceVersion", NULL)) < 0 ||
            (r = cn_json_set_string(patch, label, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL)) < 0 ||
            (r = cn_json_set(patch, json_object_get(want), "data", CN_CLOUD_CONFIG_SECRET_KEY, NULL)) < 0)
                return r;
        *ret = TAKE_PTR(patch);
        return 0;
}
