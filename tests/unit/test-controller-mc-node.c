/* SPDX-License-Identifier: Apache-2.0 */
/* What a machine-controller Machine writes on its Node: the owner label from the start, the
 * Machine's labels, annotations and taints once the Node is Ready, only what the Node lacks, never
 * a removal, and a refusal of what the API server would refuse. */
#include <errno.h>
#include <string.h>

#include "json-util.h"
#include "mc-node.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

#define MACHINE                                                                                                        \
        "{\"metadata\":{\"namespace\":\"kube-system\",\"name\":\"w1\",\"uid\":\"u-1\"},"                             \
        "\"spec\":{\"metadata\":{\"labels\":{\"pool\":\"a\",\"tier\":\"w\"},\"annotations\":{\"note\":\"x y\"}},"   \
        "\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoSchedule\"},"                           \
        "{\"key\":\"spot\",\"effect\":\"NoExecute\"}]}}"

static void test_not_ready(void) {
        _cleanup_json_ json_object *m = parse(MACHINE), *p = NULL, *p2 = NULL;
        _cleanup_json_ json_object *node = parse("{\"metadata\":{\"name\":\"w1\",\"resourceVersion\":\"7\"}}");
        _cleanup_json_ json_object *owned = parse(
                "{\"metadata\":{\"name\":\"w1\",\"resourceVersion\":\"8\",\"labels\":{\"machine-controller/owned-by\":"
                "\"u-1\"}}}");

        TAP_EQ_INT(mc_node_metadata_patch(m, node, false, &p, NULL), 0, "a Node not Ready yet: a patch");
        TAP_EQ_STR(cn_json_string(p, "metadata", "labels", MC_LABEL_NODE_OWNER, NULL), "u-1",
                   "the owner label with the Machine's UID");
        TAP_OK(!cn_json_get(p, "metadata", "labels", "pool", NULL), "not the Machine's labels before Ready");
        TAP_OK(!cn_json_get(p, "metadata", "annotations", NULL), "nor annotations");
        TAP_OK(!cn_json_get(p, "spec", NULL), "nor taints");
        TAP_EQ_STR(cn_json_string(p, "metadata", "resourceVersion", NULL), "7", "resourceVersion as precondition");
        TAP_EQ_INT(mc_node_metadata_patch(m, owned, false, &p2, NULL), -EALREADY, "owned already: nothing to write");
}

static void test_ready(void) {
        _cleanup_json_ json_object *m = parse(MACHINE), *p = NULL, *p2 = NULL;
        _cleanup_json_ json_object *node = parse(
                "{\"metadata\":{\"name\":\"w1\",\"resourceVersion\":\"9\",\"labels\":{\"tier\":\"mine\","
                "\"machine-controller/owned-by\":\"u-old\"},\"annotations\":{\"cluster.k8s.io/machine\":\"kube-system/x\"}},"
                "\"spec\":{\"taints\":[{\"key\":\"kubelet\",\"effect\":\"NoSchedule\"},"
                "{\"key\":\"dedicated\",\"value\":\"other\",\"effect\":\"NoSchedule\"}]}}");
        _cleanup_json_ json_object *done = parse(
                "{\"metadata\":{\"name\":\"w1\",\"resourceVersion\":\"10\",\"labels\":{\"tier\":\"mine\",\"pool\":\"a\","
                "\"machine-controller/owned-by\":\"u-1\"},\"annotations\":{\"cluster.k8s.io/machine\":\"kube-system/w1\","
                "\"note\":\"x y\"}},\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoSchedule\"},"
                "{\"key\":\"spot\",\"effect\":\"NoExecute\"}]}}");
        json_object *taints;

        TAP_EQ_INT(mc_node_metadata_patch(m, node, true, &p, NULL), 0, "a Ready Node: a patch");
        TAP_EQ_STR(cn_json_string(p, "metadata", "labels", "pool", NULL), "a", "a label the Node lacks is added");
        TAP_OK(!cn_json_get(p, "metadata", "labels", "tier", NULL), "a label the Node has is not overwritten");
        TAP_EQ_STR(cn_json_string(p, "metadata", "labels", MC_LABEL_NODE_OWNER, NULL), "u-1",
                   "the owner label is machine-controller's own: set to this Machine");
        TAP_EQ_STR(cn_json_string(p, "metadata", "annotations", "note", NULL), "x y", "the Machine's annotation");
        TAP_EQ_STR(cn_json_string(p, "metadata", "annotations", MC_ANNOTATION_AUTOSCALER, NULL), "kube-system/w1",
                   "cluster.k8s.io/machine names the Machine");
        taints = cn_json_get(p, "spec", "taints", NULL);
        TAP_EQ_INT(taints ? (int) json_object_array_length(taints) : -1, 3,
                   "taints: the Node's two, and the one no taint of the Node matches");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(taints, 0), "key", NULL), "kubelet",
                   "the Node's taints stay, first");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(taints, 1), "value", NULL), "other",
                   "a taint of the same key and effect matches whatever its value");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(taints, 2), "key", NULL), "spot", "the missing one added");
        TAP_EQ_INT(mc_node_metadata_patch(m, done, true, &p2, NULL), -EALREADY, "everything there: nothing to write");
}

static void test_no_removal(void) {
        _cleanup_json_ json_object *m = parse("{\"metadata\":{\"namespace\":\"ns\",\"name\":\"w\",\"uid\":\"u\"},\"spec\":{}}");
        _cleanup_json_ json_object *node = parse(
                "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"3\",\"labels\":{\"machine-controller/owned-by\":\"u\","
                "\"pool\":\"a\"},\"annotations\":{\"cluster.k8s.io/machine\":\"ns/w\"}},"
                "\"spec\":{\"taints\":[{\"key\":\"spot\",\"effect\":\"NoExecute\"}]}}");
        _cleanup_json_ json_object *p = NULL;

        TAP_EQ_INT(mc_node_metadata_patch(m, node, true, &p, NULL), -EALREADY,
                   "labels and taints the Machine no longer has are left on the Node");
}

static void test_invalid(void) {
        static const char *const machines[] = {
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"metadata\":{\"labels\":{\"bad key!\":\"v\"}}}}",
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"metadata\":{\"labels\":{\"k\":\"a value with spaces\"}}}}",
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"metadata\":{\"annotations\":{\"k\":7}}}}",
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"Sometimes\"}]}}",
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"taints\":[{\"effect\":\"NoSchedule\"}]}}",
                "{\"metadata\":{\"uid\":\"u\"},\"spec\":{\"taints\":{\"key\":\"k\"}}}",
        };
        _cleanup_json_ json_object *node = parse("{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"3\"}}");

        for (size_t i = 0; i < ELEMENTSOF(machines); i++) {
                _cleanup_json_ json_object *m = parse(machines[i]), *p = NULL;
                _cleanup_free_ char *reason = NULL;

                TAP_OK(mc_node_metadata_patch(m, node, true, &p, &reason) == -EINVAL, "refused: %s", machines[i]);
                TAP_OK(reason && strstr(reason, "is not valid on a Node"), "with a reason: %s", reason ?: "(none)");
        }
}

int main(void) {
        test_not_ready();
        test_ready();
        test_no_removal();
        test_invalid();
        return tap_done();
}
