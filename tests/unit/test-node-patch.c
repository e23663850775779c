/* SPDX-License-Identifier: Apache-2.0 */
#include "node-patch.h"
#include "tap.h"

static const char *plain(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

static const char node_json[] =
        "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u-1\",\"resourceVersion\":\"42\","
        "\"labels\":{\"kubernetes.io/hostname\":\"n1\",\"example.com/pool\":\"red\","
        "\"topology.kubernetes.io/zone\":\"z1\"}},"
        "\"spec\":{\"taints\":[{\"key\":\"node.cloudprovider.kubernetes.io/uninitialized\",\"value\":\"true\","
        "\"effect\":\"NoSchedule\"},{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoExecute\"}]}}";

static void test_status_patch(void) {
        _cleanup_node_address_list_ CnNodeAddressList l = {};
        _cleanup_json_ json_object *p = NULL;

        assert(cn_node_address_list_add(&l, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5") > 0);
        assert(cn_node_address_list_add(&l, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::5") > 0);
        TAP_EQ_INT(cn_node_patch_status_addresses(&l, &p), 0, "status patch builds");
        TAP_EQ_STR(plain(p),
                   "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"fd00::5\"}]}}",
                   "status patch carries exactly the address list");
}

static void test_init_patch(void) {
        _cleanup_json_ json_object *node = json_tokener_parse(node_json), *p = NULL;
        char *const *extra = (char *const *) (const char *const[]) { "example.com/pool=blue", "example.com/tier=gold",
                                                                   "kubernetes.io/os=evil", NULL };
        CnNodeInitData d = {
                .provider_id = "hcloud://123",
                .instance_type = "cx11",
                .region = "fsn1",
                .zone = "z1",
                .extra_labels = extra,
        };

        TAP_EQ_INT(cn_node_patch_initialize(node, &d, &p), 0, "initialize patch builds");
        TAP_EQ_STR(plain(p),
                   "{\"metadata\":{\"resourceVersion\":\"42\",\"labels\":{\"node.kubernetes.io/instance-type\":\"cx11\","
                   "\"topology.kubernetes.io/region\":\"fsn1\",\"example.com/tier\":\"gold\"}},"
                   "\"spec\":{\"providerID\":\"hcloud://123\",\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\","
                   "\"effect\":\"NoExecute\"}]}}",
                   "resourceVersion precondition, providerID, changed labels only, other taints kept");
}

static void test_init_patch_keeps_provider_id(void) {
        _cleanup_json_ json_object *node = json_tokener_parse(node_json), *p = NULL;
        json_object *spec, *v;
        CnNodeInitData d = { .provider_id = "hcloud://999", .instance_type = "bad value" };

        json_object_object_get_ex(node, "spec", &spec);
        json_object_object_add(spec, "providerID", json_object_new_string("hcloud://123"));
        TAP_EQ_INT(cn_node_patch_initialize(node, &d, &p), 0, "patch builds for a Node with providerID");
        json_object_object_get_ex(p, "spec", &spec);
        TAP_OK(!json_object_object_get_ex(spec, "providerID", NULL), "an existing providerID is never changed");
        json_object_object_get_ex(p, "metadata", &v);
        TAP_OK(!json_object_object_get_ex(v, "labels", NULL), "an invalid label value is left out");
}

static void test_init_patch_needs_rv(void) {
        _cleanup_json_ json_object *node = json_tokener_parse("{\"metadata\":{\"name\":\"n\"}}"), *p = NULL;
        CnNodeInitData d = {};

        TAP_EQ_INT(cn_node_patch_initialize(node, &d, &p), -EBADMSG, "a Node without resourceVersion is refused");
        TAP_OK(!p, "and no patch is returned");
}

static void test_taints(void) {
        _cleanup_json_ json_object *node = json_tokener_parse(node_json), *p = NULL, *p2 = NULL;

        TAP_OK(cn_node_has_taint(node, CN_TAINT_UNINITIALIZED), "uninitialized taint is seen");
        TAP_OK(!cn_node_has_taint(node, CN_TAINT_SHUTDOWN), "shutdown taint is absent");
        TAP_EQ_INT(cn_node_patch_taint(node, CN_TAINT_UNINITIALIZED, true, &p), -EALREADY,
                   "adding a present taint changes nothing");
        TAP_EQ_INT(cn_node_patch_taint(node, CN_TAINT_SHUTDOWN, true, &p), 0, "shutdown taint patch builds");
        TAP_EQ_STR(plain(p),
                   "{\"metadata\":{\"resourceVersion\":\"42\"},\"spec\":{\"taints\":["
                   "{\"key\":\"node.cloudprovider.kubernetes.io/uninitialized\",\"value\":\"true\",\"effect\":\"NoSchedule\"},"
                   "{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoExecute\"},"
                   "{\"key\":\"node.cloudprovider.kubernetes.io/shutdown\",\"effect\":\"NoSchedule\"}]}}",
                   "shutdown taint is appended, others kept");
        TAP_EQ_INT(cn_node_patch_taint(node, "dedicated", false, &p2), 0, "taint removal builds");
        TAP_EQ_STR(plain(p2),
                   "{\"metadata\":{\"resourceVersion\":\"42\"},\"spec\":{\"taints\":["
                   "{\"key\":\"node.cloudprovider.kubernetes.io/uninitialized\",\"value\":\"true\",\"effect\":\"NoSchedule\"}]}}",
                   "only that taint is removed");
}

static void test_accessors(void) {
        _cleanup_json_ json_object *node = json_tokener_parse(node_json);

        TAP_EQ_STR(cn_node_get_name(node), "n1", "name");
        TAP_EQ_STR(cn_node_get_uid(node), "u-1", "uid");
        TAP_EQ_STR(cn_node_get_resource_version(node), "42", "resourceVersion");
        TAP_OK(!cn_node_get_provider_id(node), "no providerID");
}

static void test_condition_patch(void) {
        _cleanup_json_ json_object *node = json_tokener_parse(
                "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"7\"},\"status\":{\"conditions\":["
                "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"}]}}");
        _cleanup_node_address_list_ CnNodeAddressList l = {};
        _cleanup_json_ json_object *p = NULL, *p2 = NULL, *p3 = NULL;
        CnNodeCondition bad = { CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, "False", "ProvidedNodeIPMismatch",
                                "no 10.9.9.9" };
        CnNodeCondition good = { CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, "True", "Initialized", "ok" };
        json_object *conds, *c;

        /* 2024-05-01T10:00:00Z */
        TAP_EQ_INT(cn_node_patch_status_condition(node, &bad, NULL, 1714557600ULL * USEC_PER_SEC, &p), 0,
                   "condition patch builds");
        TAP_EQ_STR(plain(p),
                   "{\"status\":{\"conditions\":[{\"type\":\"CloudProviderInitialized\",\"status\":\"False\","
                   "\"reason\":\"ProvidedNodeIPMismatch\",\"message\":\"no 10.9.9.9\","
                   "\"lastHeartbeatTime\":\"2024-05-01T10:00:00Z\",\"lastTransitionTime\":\"2024-05-01T10:00:00Z\"}]}}",
                   "one condition, nothing else: the kubelet's Ready is left to the server-side merge by type");
        TAP_OK(cn_node_get_condition(node, "Ready") != NULL, "an existing condition is found by type");
        TAP_OK(cn_node_get_condition(node, CN_CONDITION_CLOUD_PROVIDER_INITIALIZED) == NULL,
               "a missing condition is NULL");

        /* As the server would store it. */
        json_object_object_get_ex(json_object_object_get(node, "status"), "conditions", &conds);
        json_object_object_get_ex(p, "status", &c);
        c = json_object_array_get_idx(json_object_object_get(c, "conditions"), 0);
        json_object_array_add(conds, json_object_get(c));
        TAP_EQ_INT(cn_node_patch_status_condition(node, &bad, NULL, 1714557660ULL * USEC_PER_SEC, &p2), -EALREADY,
                   "the same condition again is no write");

        assert(cn_node_address_list_add(&l, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5") > 0);
        assert(cn_node_address_list_add(&l, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::5") > 0);
        TAP_EQ_INT(cn_node_patch_status_condition(node, &good, &l, 1714557660ULL * USEC_PER_SEC, &p3), 0,
                   "condition and address patch builds");
        TAP_EQ_STR(plain(p3),
                   "{\"status\":{\"conditions\":[{\"type\":\"CloudProviderInitialized\",\"status\":\"True\","
                   "\"reason\":\"Initialized\",\"message\":\"ok\",\"lastHeartbeatTime\":\"2024-05-01T10:01:00Z\","
                   "\"lastTransitionTime\":\"2024-05-01T10:01:00Z\"}],"
                   "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"fd00::5\"},{\"$patch\":\"replace\"}]}}",
                   "a status change transitions; addresses replace the list as a whole");
        bad.message = "no 10.9.9.8";
        TAP_EQ_INT(cn_node_patch_status_condition(node, &bad, NULL, 1714557720ULL * USEC_PER_SEC, &p2), 0,
                   "a new message is a write");
        json_object_object_get_ex(p2, "status", &c);
        c = json_object_array_get_idx(json_object_object_get(c, "conditions"), 0);
        TAP_OK(!json_object_object_get_ex(c, "lastTransitionTime", NULL),
               "without a status change lastTransitionTime stays as the server has it");
}

int main(void) {
        test_condition_patch();
        test_status_patch();
        test_init_patch();
        test_init_patch_keeps_provider_id();
        test_init_patch_needs_rv();
        test_taints();
        test_accessors();
        return tap_done();
}
