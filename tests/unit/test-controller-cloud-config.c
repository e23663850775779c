/* SPDX-License-Identifier: Apache-2.0 */
/* The workload cluster's cloud config Secret of a CloudnodeCluster (cluster-cloud-config.h):
 * its name, its manifests as Cluster API's ClusterResourceSet applies them, its owner, and the
 * patch that brings a live one up to date. */
#include <string.h>

#include "cluster-cloud-config.h"
#include "hash-util.h"
#include "json-util.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

#define CNC "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta2\",\"kind\":\"CloudnodeCluster\"," \
            "\"metadata\":{\"name\":\"c1-x7k\",\"namespace\":\"team-a\",\"uid\":\"u-1\"}}"

static void test_name(void) {
        _cleanup_free_ char *n = NULL, *x = NULL;
        char long_name[80];

        TAP_EQ_INT(cn_cloud_config_secret_name("c1", &n), 0, "a cluster's Secret name");
        TAP_EQ_STR(n, "c1-cloudnode-cloud-config", "<cluster>-cloudnode-cloud-config");
        memset(long_name, 'a', 64);
        long_name[64] = 0;
        TAP_EQ_INT(cn_cloud_config_secret_name(long_name, &x), -EINVAL, "a name over 63 characters is refused");
        TAP_EQ_INT(cn_cloud_config_secret_name("C1", &x), -EINVAL, "upper case is refused");
        TAP_EQ_INT(cn_cloud_config_secret_name("a/b", &x), -EINVAL, "a slash is refused");
        TAP_EQ_INT(cn_cloud_config_secret_name("", &x), -EINVAL, "an empty name is refused");
        TAP_EQ_INT(cn_cloud_config_secret_name(NULL, &x), -EINVAL, "no name is refused");
}

/* The two documents of a Secret's manifests, parsed; false when they are not two. */
static bool documents_of(json_object *secret, json_object **ret_first, json_object **ret_second) {
        const char *b64 = cn_json_string(secret, "data", CN_CLOUD_CONFIG_SECRET_KEY, NULL);
        _cleanup_free_ void *text = NULL;
        size_t n, first;
        const char *sep;

        assert(b64);
        assert(cn_base64_decode(b64, strlen(b64), &text, &n) == 0);
        sep = strstr(text, "\n---\n");
        if (!sep)
                return false;
        first = (size_t) (sep - (const char *) text);
        *ret_second = parse(sep + 5);
        ((char *) text)[first] = 0;
        *ret_first = parse(text);
        return true;
}

static void test_secret(void) {
        _cleanup_json_ json_object *cnc = parse(CNC), *secret = NULL, *ns = NULL, *cm = NULL, *x = NULL;
        _cleanup_json_ json_object *cfg = parse("{\"Global\":{\"endpoint\":\"https://api.hetzner.cloud/v1\","
                                                "\"network\":\"k8s\"}}");
        _cleanup_json_ json_object *hostile = parse("{\"Global\":{\"endpoint\":\"x\\n[Global]\\ntoken = stolen\"}}");
        json_object *ref;

        TAP_EQ_INT(cn_cloud_config_secret(cnc, "c1", cfg, &secret), 0, "the Secret of a cluster");
        TAP_EQ_STR(cn_json_string(secret, "metadata", "name", NULL), "c1-cloudnode-cloud-config",
                   "named after the Cluster, not the CloudnodeCluster");
        TAP_EQ_STR(cn_json_string(secret, "metadata", "namespace", NULL), "team-a", "in the cluster's namespace");
        TAP_EQ_STR(cn_json_string(secret, "type", NULL), "addons.cluster.x-k8s.io/resource-set",
                   "a ClusterResourceSet's type");
        TAP_EQ_STR(cn_json_string(secret, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL), "c1",
                   "labelled with the cluster's name");
        ref = json_object_array_get_idx(cn_json_get(secret, "metadata", "ownerReferences", NULL), 0);
        TAP_OK(cn_json_string_is(ref, "kind", "CloudnodeCluster") && cn_json_string_is(ref, "uid", "u-1") &&
               cn_json_string_is(ref, "name", "c1-x7k") &&
               cn_json_string_is(ref, "apiVersion", "infrastructure.cluster.x-k8s.io/v1beta2"),
               "owned by the CloudnodeCluster");
        TAP_OK(cn_cloud_config_secret_is_ours(secret, "u-1"), "ours by that UID");
        TAP_OK(!cn_cloud_config_secret_is_ours(secret, "u-2"), "not another CloudnodeCluster's");
        TAP_EQ_INT((int) json_object_object_length(cn_json_get(secret, "data", NULL)), 1, "one key");

        TAP_OK(documents_of(secret, &ns, &cm), "two documents");
        if (!ns)
                return;
        TAP_OK(cn_json_string_is(ns, "kind", "Namespace") && cn_json_string_is(cn_json_get(ns, "metadata", NULL), "name",
                                                                                "cloudnode"),
               "first the Namespace cloudnode");
        TAP_OK(cn_json_string_is(cm, "kind", "ConfigMap") &&
               cn_json_string_is(cn_json_get(cm, "metadata", NULL), "name", "cloud-provider-config") &&
               cn_json_string_is(cn_json_get(cm, "metadata", NULL), "namespace", "cloudnode"),
               "then the ConfigMap the workload cluster's controller reads");
        TAP_EQ_STR(cn_json_string(cm, "data", "config", NULL),
                   "[Global]\nendpoint = https://api.hetzner.cloud/v1\nnetwork = k8s\n", "its config: the cloud.conf");

        TAP_OK(cn_cloud_config_secret(cnc, "c1", hostile, &x) < 0, "a value that would add a line is refused");
        TAP_EQ_INT(cn_cloud_config_secret(cnc, "C!", cfg, &x), -EINVAL, "a Cluster name that makes no Secret name");
        {
                _cleanup_json_ json_object *nouid = parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\"}}");

                TAP_EQ_INT(cn_cloud_config_secret(nouid, "c1", cfg, &x), -EINVAL, "a CloudnodeCluster without a UID");
        }
        TAP_EQ_INT(cn_cloud_config_secret(cnc, "c1", NULL, &x), -EINVAL, "no cloud config");
}

static void test_ownership(void) {
        _cleanup_json_ json_object *none = parse("{\"metadata\":{\"name\":\"c1-cloudnode-cloud-config\"}}");
        _cleanup_json_ json_object *other_kind = parse(
                "{\"metadata\":{\"ownerReferences\":[{\"kind\":\"Cluster\",\"uid\":\"u-1\"}]}}");
        _cleanup_json_ json_object *garbage = parse("{\"metadata\":{\"ownerReferences\":{\"kind\":\"x\"}}}");

        TAP_OK(!cn_cloud_config_secret_is_ours(none, "u-1"), "a Secret without owner is not ours");
        TAP_OK(!cn_cloud_config_secret_is_ours(other_kind, "u-1"), "the same UID on another kind is not ours");
        TAP_OK(!cn_cloud_config_secret_is_ours(garbage, "u-1"), "ownerReferences that are no list: not ours");
        TAP_OK(!cn_cloud_config_secret_is_ours(none, NULL), "no UID: not ours");
}

static void test_patch(void) {
        _cleanup_json_ json_object *cnc = parse(CNC), *want = NULL, *changed_want = NULL, *patch = NULL;
        _cleanup_json_ json_object *cfg = parse("{\"Global\":{\"endpoint\":\"https://a/v1\"}}");
        _cleanup_json_ json_object *cfg2 = parse("{\"Global\":{\"endpoint\":\"https://b/v1\"}}");
        _cleanup_json_ json_object *live = NULL, *opaque = NULL;

        assert(cn_cloud_config_secret(cnc, "c1", cfg, &want) == 0);
        assert(cn_cloud_config_secret(cnc, "c1", cfg2, &changed_want) == 0);
        live = json_object_get(want);
        assert(cn_json_set_string(live, "42", "metadata", "resourceVersion", NULL) >= 0);
        TAP_EQ_INT(cn_cloud_config_secret_patch(live, want, &patch), 0, "the same Secret");
        TAP_OK(!patch, "nothing to write");
        TAP_EQ_INT(cn_cloud_config_secret_patch(live, changed_want, &patch), 0, "a changed cloud config");
        TAP_OK(patch != NULL, "a patch");
        TAP_EQ_STR(cn_json_string(patch, "metadata", "resourceVersion", NULL), "42",
                   "conditional on the resourceVersion read");
        TAP_OK(cn_json_equal(cn_json_get(patch, "data", NULL), cn_json_get(changed_want, "data", NULL)),
               "the new data");
        opaque = parse("{\"type\":\"Opaque\",\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{}}");
        json_object_put(TAKE_PTR(patch));
        TAP_EQ_INT(cn_cloud_config_secret_patch(opaque, want, &patch), -EMEDIUMTYPE,
                   "a Secret of another type cannot be patched into ours");
}

int main(void) {
        test_name();
        test_secret();
        test_ownership();
        test_patch();
        return tap_done();
}
