/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-controller's pure parts: the embedded operand, substitution, hashing, apply decisions
 * and status conditions. */
#include <string.h>

#include "controller-apply.h"
#include "controller-assets.h"
#include "controller-operand.h"
#include "controller-status.h"
#include "json-util.h"
#include "tap.h"

static json_object *find(json_object *a, const char *kind, const char *name) {
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *o = json_object_array_get_idx(a, i);

                if (streq(strempty(cn_json_string(o, "kind", NULL)), kind) &&
                    streq(strempty(cn_json_string(o, "metadata", "name", NULL)), name))
                        return o;
        }
        return NULL;
}

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

static json_object *container(json_object *deployment) {
        return json_object_array_get_idx(cn_json_get(deployment, "spec", "template", "spec", "containers", NULL), 0);
}

static const char *env_value(json_object *ct, const char *name) {
        json_object *env = json_object_object_get(ct, "env");

        for (size_t i = 0; env && i < json_object_array_length(env); i++) {
                json_object *e = json_object_array_get_idx(env, i);

                if (streq(strempty(cn_json_string(e, "name", NULL)), name))
                        return cn_json_string(e, "value", NULL);
        }
        return NULL;
}

static json_object *copy(json_object *o) {
        json_object *c = NULL;

        assert(json_object_deep_copy(o, &c, NULL) == 0);
        return c;
}

static void test_assets(void) {
        _cleanup_json_ json_object *a = NULL;

        TAP_EQ_INT(cn_controller_assets_load(&a), 0, "embedded operand parses");
        TAP_OK(json_object_array_length(a) == cn_controller_assets_count && cn_controller_assets_count >= 10,
               "every embedded object is loaded");
        TAP_OK(find(a, "Deployment", "cloudnode-cloud-controller-manager"), "initializer Deployment embedded");
        TAP_OK(find(a, "ValidatingAdmissionPolicy", "cloudnode-node-initializer"), "admission policy embedded");
        TAP_OK(!find(a, "Deployment", "cloudnode-controller"), "the controller does not manage itself");
        for (size_t i = 0; i < json_object_array_length(a); i++)
                TAP_OK(cn_controller_resource_for(json_object_array_get_idx(a, i)) != NULL, "%s: known resource",
                       cn_json_string(json_object_array_get_idx(a, i), "metadata", "name", NULL));
}

static void test_substitution(void) {
        _cleanup_json_ json_object *images = NULL, *a = NULL, *b = NULL, *c1 = NULL, *single = NULL;
        _cleanup_free_ char *err = NULL;
        CnOperandConfig c = {
                .namespace = "other-ns",
                .http_proxy = "http://proxy:3128",
                .no_proxy = ".cluster.local",
                .cloud_config = "[Global]\nregion = fsn1\n",
        };
        json_object *d, *ct, *crb, *cm;

        TAP_EQ_INT(cn_operand_parse_images("{\"cloudControllerManager\":\"reg/ccm:2\",\"cloudNodeManager\":\"reg/cnm:2\"}",
                                           &images, NULL), 0, "images.json parses");
        c.images = images;
        TAP_EQ_INT(cn_operand_desired(&c, &a), 0, "desired state computed");
        d = find(a, "Deployment", "cloudnode-cloud-controller-manager");
        ct = container(d);
        TAP_EQ_STR(cn_json_string(d, "metadata", "namespace", NULL), "other-ns", "Deployment namespace substituted");
        TAP_EQ_STR(cn_json_string(ct, "image", NULL), "reg/ccm:2", "cloud-controller-manager image from images.json");
        TAP_EQ_STR(env_value(ct, "HTTP_PROXY"), "http://proxy:3128", "HTTP_PROXY set");
        TAP_EQ_STR(env_value(ct, "NO_PROXY"), ".cluster.local", "NO_PROXY set");
        TAP_OK(!env_value(ct, "HTTPS_PROXY"), "unset proxy not written empty");
        TAP_OK(json_object_get_int(cn_json_get(d, "spec", "replicas", NULL)) == 2, "two replicas on HA clusters");
        TAP_OK(cn_json_string(d, "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL) != NULL,
               "spec hash stamped");
        TAP_OK(cn_json_string(d, "spec", "template", "metadata", "annotations", CN_OPERAND_CONFIG_HASH_ANNOTATION, NULL),
               "config hash on the pod template");
        crb = find(a, "ClusterRoleBinding", "cloudnode:cloud-controller-manager");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(json_object_object_get(crb, "subjects"), 0), "namespace",
                                  NULL), "other-ns", "ServiceAccount subject namespace substituted");
        crb = find(a, "ClusterRoleBinding", "cloudnode:node-initializer");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(json_object_object_get(crb, "subjects"), 0), "name",
                                  NULL), "system:serviceaccounts:cloudnode-nodes",
                   "the node identities' group is kept as it is");
        TAP_OK(!cn_json_get(json_object_array_get_idx(json_object_object_get(crb, "subjects"), 0), "namespace",
                            NULL), "a Group subject gets no namespace");
        TAP_OK(!cn_json_get(crb, "metadata", "namespace", NULL), "cluster-scoped objects get no namespace");
        cm = find(a, "ConfigMap", "cloud-conf");
        TAP_EQ_STR(cn_json_string(cm, "data", "cloud.conf", NULL), "[Global]\nregion = fsn1\n", "cloud-conf content");
        TAP_EQ_STR(cn_json_string(cm, "metadata", "namespace", NULL), "other-ns", "cloud-conf namespace");

        TAP_EQ_INT(cn_operand_desired(&c, &b), 0, "second computation");
        TAP_OK(cn_json_equal(a, b), "same inputs give identical objects (and hashes)");

        c.cloud_config = "[Global]\nregion = nbg1\n";
        TAP_EQ_INT(cn_operand_desired(&c, &c1), 0, "with another cloud config");
        TAP_OK(!streq(cn_json_string(find(c1, "Deployment", "cloudnode-cloud-controller-manager"), "spec", "template",
                                     "metadata", "annotations", CN_OPERAND_CONFIG_HASH_ANNOTATION, NULL),
                      cn_json_string(d, "spec", "template", "metadata", "annotations",
                                     CN_OPERAND_CONFIG_HASH_ANNOTATION, NULL)),
               "cloud config change changes the pod template hash");
        TAP_OK(!streq(cn_json_string(find(c1, "Deployment", "cloudnode-cloud-controller-manager"), "metadata",
                                     "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL),
                      cn_json_string(d, "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL)),
               "and the spec hash");
        TAP_OK(cn_json_equal(find(c1, "ClusterRole", "cloudnode:node-initializer"),
                             find(a, "ClusterRole", "cloudnode:node-initializer")),
               "objects that do not use the config are unchanged");

        c.single_node = true;
        TAP_EQ_INT(cn_operand_desired(&c, &single), 0, "single node");
        TAP_EQ_INT(json_object_get_int(cn_json_get(find(single, "Deployment", "cloudnode-cloud-controller-manager"),
                                                   "spec", "replicas", NULL)), 1, "one replica on a single node");
        TAP_EQ_INT(json_object_get_int(cn_json_get(find(single, "PodDisruptionBudget",
                                                        "cloudnode-cloud-controller-manager"), "spec", "minAvailable",
                                                   NULL)), 0, "PDB does not block draining the only node");

        TAP_EQ_INT(cn_operand_parse_images("[1]", &b, &err), -EINVAL, "images.json must be an object");
        TAP_OK(err && strstr(err, "object"), "and says so");
        TAP_EQ_INT(cn_operand_parse_images("{\"cloudControllerManager\": 3}", &b, NULL), -EINVAL, "image must be a string");
}

static const char *arg_value(json_object *ct, const char *prefix) {
        json_object *args = json_object_object_get(ct, "args");
        const char *found = NULL;
        unsigned n = 0;

        for (size_t i = 0; args && i < json_object_array_length(args); i++) {
                const char *a = json_object_get_string(json_object_array_get_idx(args, i));

                if (strneq(a, prefix, strlen(prefix))) {
                        found = a + strlen(prefix);
                        n++;
                }
        }
        return n == 1 ? found : NULL;
}

static void test_cloud_provider(void) {
        _cleanup_json_ json_object *op = parse("{\"spec\":{\"cloudProvider\":\"openstack\"}}"), *a = NULL,
                                   *edited = NULL;
        CnOperandConfig c = { .namespace = "cloudnode", .cloud_provider = "hetzner" };
        const char *p = NULL, *source = NULL;
        json_object *ct;

        TAP_EQ_INT(cn_operand_cloud_provider("hetzner", op, "openstack", &p, &source), 0, "flag first");
        TAP_EQ_STR(p, "hetzner", "the flag's provider");
        TAP_EQ_STR(source, "--cloud-provider", "and where it came from");
        TAP_EQ_INT(cn_operand_cloud_provider(NULL, op, "hetzner", &p, &source), 0, "then the operator spec");
        TAP_EQ_STR(p, "openstack", "spec.cloudProvider");
        TAP_EQ_INT(cn_operand_cloud_provider("", NULL, "openstack", &p, &source), 0, "then the Infrastructure platform");
        TAP_EQ_STR(source, "Infrastructure platform", "source named");
        TAP_EQ_INT(cn_operand_cloud_provider(NULL, NULL, NULL, &p, NULL), -ENOENT, "nothing names one");
        TAP_EQ_INT(cn_operand_cloud_provider(NULL, NULL, "file", &p, NULL), -EPROTONOSUPPORT,
                   "a platform without a provider in this build");

        TAP_EQ_INT(cn_operand_desired(&c, &a), 0, "desired state with a provider");
        ct = container(find(a, "Deployment", "cloudnode-cloud-controller-manager"));
        TAP_EQ_STR(arg_value(ct, "--cloud-provider="), "hetzner", "one --cloud-provider in the initializer's args");
        TAP_EQ_STR(arg_value(ct, "--port="), "10267", "the other args kept");

        /* A manifest (or an edit) that already names a provider gets the cluster's, once. */
        edited = json_object_get(find(a, "Deployment", "cloudnode-cloud-controller-manager"));
        c.cloud_provider = "openstack";
        TAP_EQ_INT(cn_operand_substitute(edited, &c), 0, "substituted again");
        TAP_EQ_STR(arg_value(container(edited), "--cloud-provider="), "openstack", "replaced, not appended");
}

static void test_source(void) {
        _cleanup_json_ json_object *a = parse("{\"data\":{\"config\":\"A\",\"cloud.conf\":\"B\"}}");
        _cleanup_json_ json_object *b = parse("{\"data\":{\"cloud.conf\":\"B\"}}");
        _cleanup_json_ json_object *e = parse("{\"data\":{}}");

        TAP_EQ_STR(cn_operand_source_cloud_config(a, "config"), "A", "source key read");
        TAP_EQ_STR(cn_operand_source_cloud_config(b, "config"), "B", "falls back to cloud.conf");
        TAP_OK(!cn_operand_source_cloud_config(e, "config"), "missing content is NULL");
        TAP_OK(!cn_operand_source_cloud_config(NULL, "config"), "missing ConfigMap is NULL");
}

static void test_pick_source(void) {
        _cleanup_json_ json_object *infra = parse("{\"data\":{\"config\":\"I\"}}");
        _cleanup_json_ json_object *keyless = parse("{\"data\":{\"other\":\"X\"}}");
        _cleanup_json_ json_object *managed = parse("{\"data\":{\"cloud.conf\":\"M\"}}");
        CnCloudConfigSource s[] = {
                { "openshift-config", "cc", "config", "Infrastructure", true, infra },
                { "openshift-config-managed", "kube-cloud-config", "cloud.conf", "managed", false, managed },
                { "ns", "flag", "config", "flag", false, keyless },
        };
        const char *text = NULL;
        size_t i = 99;

        TAP_EQ_INT(cn_operand_pick_cloud_config(s, 3, &i, &text), 0, "all three exist");
        TAP_OK(i == 0 && streq(text, "I"), "the first wins");
        s[0].configmap = NULL;
        TAP_EQ_INT(cn_operand_pick_cloud_config(s, 3, &i, &text), 0, "without the first");
        TAP_OK(i == 1 && streq(text, "M"), "the second wins");
        s[1].configmap = NULL;
        text = "unchanged";
        TAP_EQ_INT(cn_operand_pick_cloud_config(s, 3, &i, &text), 0, "a non-strict source without its key");
        TAP_OK(i == 2 && !text, "is used, empty");
        s[0].configmap = keyless;
        TAP_EQ_INT(cn_operand_pick_cloud_config(s, 3, &i, &text), -ENOKEY, "a strict source without its key");
        TAP_EQ_INT((int) i, 0, "names the strict source");
        s[0].configmap = s[2].configmap = NULL;
        TAP_EQ_INT(cn_operand_pick_cloud_config(s, 3, &i, &text), -ENOENT, "none exists");
}

static void test_apply(void) {
        _cleanup_json_ json_object *a = NULL, *live = NULL, *patch = NULL;
        CnOperandConfig c = { .namespace = "cloudnode" };
        json_object *d, *crb, *livecrb;

        assert(cn_operand_desired(&c, &a) == 0);
        d = find(a, "Deployment", "cloudnode-cloud-controller-manager");
        TAP_EQ_INT(cn_apply_decide(d, NULL), CN_APPLY_CREATE, "missing object is created");

        live = copy(d);
        /* What the API server adds: metadata, defaults, status. */
        assert(cn_json_set_string(live, "42", "metadata", "resourceVersion", NULL) == 0);
        assert(cn_json_set_string(live, "u-1", "metadata", "uid", NULL) == 0);
        assert(cn_json_set_string(live, "someone", "metadata", "labels", "extra", NULL) == 0);
        assert(cn_json_set_string(container(live), "/dev/termination-log", "terminationMessagePath", NULL) == 0);
        assert(cn_json_set(live, json_object_new_int(2), "status", "replicas", NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_NONE, "server defaults and foreign labels are not drift");

        assert(cn_json_set_string(container(live), "evil:1", "image", NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_PATCH, "changed image is drift even with our hash");
        live = json_object_put(live) ? NULL : NULL;

        live = copy(d);
        json_object_array_del_idx(json_object_object_get(container(live), "args"), 0, 1);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_PATCH, "removed arg is drift");
        live = json_object_put(live) ? NULL : NULL;

        live = copy(d);
        assert(cn_json_set(live, json_object_new_int(5), "spec", "replicas", NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_PATCH, "replicas drift");
        live = json_object_put(live) ? NULL : NULL;

        live = copy(d);
        assert(cn_json_set_string(live, "old", "metadata", "annotations", CN_OPERAND_SPEC_HASH_ANNOTATION, NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_PATCH, "an older spec hash is updated");
        live = json_object_put(live) ? NULL : NULL;

        live = copy(d);
        assert(cn_json_set_string(live, "x", "spec", "selector", "matchLabels", "app", NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(d, live), CN_APPLY_RECREATE, "selector change recreates");
        assert(cn_json_set_string(live, "7", "metadata", "resourceVersion", NULL) == 0);
        TAP_EQ_INT(cn_apply_patch(d, live, &patch), 0, "patch built");
        TAP_EQ_STR(cn_json_string(patch, "metadata", "resourceVersion", NULL), "7", "patch carries the precondition");
        TAP_OK(!json_object_object_get(patch, "kind"), "patch has no kind");
        TAP_OK(cn_json_equal(cn_json_get(patch, "spec", NULL), cn_json_get(d, "spec", NULL)), "patch sets our spec");
        live = json_object_put(live) ? NULL : NULL;

        crb = find(a, "ClusterRoleBinding", "cloudnode:node-initializer");
        livecrb = copy(crb);
        assert(cn_json_set_string(livecrb, "cluster-admin", "roleRef", "name", NULL) == 0);
        TAP_EQ_INT(cn_apply_decide(crb, livecrb), CN_APPLY_RECREATE, "roleRef change recreates the binding");
        json_object_put(livecrb);

        livecrb = copy(find(a, "ClusterRole", "cloudnode:node-initializer"));
        json_object_array_add(json_object_array_get_idx(json_object_object_get(livecrb, "rules"), 0) ?
                                      json_object_object_get(json_object_array_get_idx(
                                                                     json_object_object_get(livecrb, "rules"), 0),
                                                             "verbs") :
                                      NULL,
                              json_object_new_string("delete"));
        TAP_EQ_INT(cn_apply_decide(find(a, "ClusterRole", "cloudnode:node-initializer"), livecrb), CN_APPLY_PATCH,
                   "an added RBAC verb is drift");
        json_object_put(livecrb);
}

static void test_conditions(void) {
        const CnCondition ok[] = {
                { "Available", true, CN_REASON_AS_EXPECTED, "fine" },
                { "Degraded", false, CN_REASON_AS_EXPECTED, "" },
        };
        const CnCondition bad[] = {
                { "Available", true, CN_REASON_AS_EXPECTED, "fine" },
                { "Degraded", true, CN_REASON_SYNCING_FAILED, "boom" },
        };
        _cleanup_json_ json_object *first = NULL, *second = NULL, *third = NULL;
        bool changed;

        TAP_EQ_INT(cn_status_conditions(ok, 2, NULL, 1000 * USEC_PER_SEC, &first, &changed), 0, "conditions built");
        TAP_OK(changed, "no live conditions is a change");
        TAP_EQ_INT(cn_status_conditions(ok, 2, first, 2000 * USEC_PER_SEC, &second, &changed), 0, "again");
        TAP_OK(!changed, "same conditions are no change");
        TAP_OK(cn_json_equal(first, second), "and keep their transition times");
        TAP_EQ_INT(cn_status_conditions(bad, 2, second, 3000 * USEC_PER_SEC, &third, &changed), 0, "degraded");
        TAP_OK(changed, "status flip is a change");
        TAP_OK(cn_json_equal(json_object_array_get_idx(third, 0), json_object_array_get_idx(first, 0)),
               "unchanged condition keeps its time");
        TAP_OK(!cn_json_equal(cn_json_get(json_object_array_get_idx(third, 1), "lastTransitionTime", NULL),
                              cn_json_get(json_object_array_get_idx(first, 1), "lastTransitionTime", NULL)),
               "flipped condition gets a new time");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(third, 1), "reason", NULL), "SyncingFailed", "reason");
}

static void test_rollout(void) {
        static const struct {
                const char *json;
                bool available, progressing;
                const char *name;
        } cases[] = {
                { "{\"metadata\":{\"name\":\"d\",\"generation\":2},\"spec\":{\"replicas\":2},"
                  "\"status\":{\"observedGeneration\":2,\"updatedReplicas\":2,\"availableReplicas\":0}}",
                  false, true, "rollout: 0 of 2 available is neither Available nor done" },
                { "{\"metadata\":{\"name\":\"d\",\"generation\":2},\"spec\":{\"replicas\":2},"
                  "\"status\":{\"observedGeneration\":2,\"updatedReplicas\":1,\"availableReplicas\":2}}",
                  true, true, "rollout: 1 of 2 updated is Available and Progressing" },
                { "{\"metadata\":{\"name\":\"d\",\"generation\":3},\"spec\":{\"replicas\":2},"
                  "\"status\":{\"observedGeneration\":2,\"updatedReplicas\":2,\"availableReplicas\":2}}",
                  true, true, "rollout: a spec not yet observed is Progressing" },
                { "{\"metadata\":{\"name\":\"d\",\"generation\":2},\"spec\":{\"replicas\":2},"
                  "\"status\":{\"observedGeneration\":2,\"updatedReplicas\":2,\"availableReplicas\":2}}",
                  true, false, "rollout: all updated and available is done" },
        };
        _cleanup_free_ char *message = NULL;
        bool available = true, progressing = false;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ json_object *d = json_tokener_parse(cases[i].json);
                _cleanup_free_ char *msg = NULL;

                TAP_OK(cn_status_rollout(d, &available, &progressing, &msg) == 0 &&
                       available == cases[i].available && progressing == cases[i].progressing, "%s", cases[i].name);
                if (i == 0)
                        TAP_EQ_STR(msg, "Deployment d: 2 of 2 replicas updated, 0 available", "rollout: message counts");
        }
        TAP_OK(cn_status_rollout(NULL, &available, &progressing, &message) == 0 && !available && progressing,
               "rollout: no Deployment yet is unavailable and progressing");
}

int main(void) {
        test_assets();
        test_substitution();
        test_cloud_provider();
        test_source();
        test_pick_source();
        test_apply();
        test_conditions();
        test_rollout();
        return tap_done();
}
