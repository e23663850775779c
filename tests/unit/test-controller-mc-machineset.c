/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineSet decisions: label selectors, the Machine made from the template,
 * and which Machines each delete policy removes first. */
#include <errno.h>
#include <string.h>

#include "json-util.h"
#include "mc-machineset.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

static void test_selector(void) {
        _cleanup_json_ json_object *labels = parse("{\"foo\":\"bar\",\"tier\":\"w\"}");
        static const struct {
                const char *selector;
                int want;
                const char *name;
        } cases[] = {
                { "{\"matchLabels\":{\"foo\":\"bar\"}}", 1, "matchLabels" },
                { "{\"matchLabels\":{\"foo\":\"baz\"}}", 0, "matchLabels, other value" },
                { "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"w\",\"x\"]}]}", 1, "In" },
                { "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"w\"]}]}", 0, "NotIn" },
                { "{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"DoesNotExist\"}]}", 1, "DoesNotExist" },
                { "{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}", 0, "Exists" },
                { "{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Like\"}]}", -EINVAL, "an unknown operator" },
                { "{}", 0, "an empty selector selects nothing" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ json_object *sel = parse(cases[i].selector);

                TAP_EQ_INT(mc_selector_matches(sel, labels), cases[i].want, cases[i].name);
        }
}

static void test_new_machine(void) {
        _cleanup_json_ json_object *set = parse(
                "{\"metadata\":{\"name\":\"ms1\",\"uid\":\"u-ms\"},\"spec\":{\"selector\":{\"matchLabels\":{\"foo\":\"bar\"}},"
                "\"template\":{\"metadata\":{\"labels\":{\"foo\":\"bar\"},\"annotations\":{\"a\":\"b\"}},"
                "\"spec\":{\"providerSpec\":{\"value\":{\"cloudProvider\":\"hetzner\"}}}}}}");
        _cleanup_json_ json_object *bad = parse(
                "{\"metadata\":{\"name\":\"ms2\",\"uid\":\"u2\"},\"spec\":{\"selector\":{\"matchLabels\":{\"foo\":\"bar\"}},"
                "\"template\":{\"metadata\":{\"labels\":{\"foo\":\"qux\"}}}}}");
        _cleanup_json_ json_object *m = NULL, *m2 = NULL;
        _cleanup_free_ char *reason = NULL;

        TAP_EQ_INT(mc_machineset_new_machine(set, &m, &reason), 0, "a Machine from the template");
        TAP_EQ_STR(cn_json_string(m, "metadata", "generateName", NULL), "ms1-", "generateName after the set");
        TAP_EQ_STR(cn_json_string(m, "metadata", "labels", "foo", NULL), "bar", "the template's labels");
        TAP_EQ_STR(cn_json_string(m, "metadata", "annotations", "a", NULL), "b", "the template's annotations");
        TAP_EQ_STR(cn_json_string(m, "spec", "providerSpec", "value", "cloudProvider", NULL), "hetzner", "its spec");
        TAP_OK(mc_owned_by(m, "MachineSet", "u-ms"), "owned by the set (controller reference)");
        TAP_OK(!mc_owned_by(m, "MachineSet", "u-other"), "and by no other");
        TAP_EQ_INT(mc_machineset_new_machine(bad, &m2, &reason), -EINVAL, "template labels outside the selector: refused");
        TAP_OK(reason && strstr(reason, "do not match"), "saying so");
}

#define M(name, created, extra) "{\"metadata\":{\"name\":\"" name "\",\"creationTimestamp\":\"" created "\"" extra "}}"

static void test_pick(void) {
        _cleanup_json_ json_object *ms = parse("[" M("old", "2026-01-01T00:00:00Z", "") "," M("mid", "2026-06-01T00:00:00Z", "")
                                               "," M("new", "2026-11-01T00:00:00Z", "") "]");
        _cleanup_json_ json_object *marked = parse(
                "[" M("old", "2026-01-01T00:00:00Z", "") "," M("new", "2026-11-01T00:00:00Z", "")
                "," M("marked", "2026-06-01T00:00:00Z", ",\"annotations\":{\"cluster.k8s.io/delete-machine\":\"yes\"}")
                "]");
        _cleanup_json_ json_object *failed = parse(
                "[" M("ok1", "2026-01-01T00:00:00Z", "") "," M("ok2", "2026-01-01T00:00:00Z", "") ","
                "{\"metadata\":{\"name\":\"bad\",\"creationTimestamp\":\"2026-11-01T00:00:00Z\"},"
                "\"status\":{\"errorReason\":\"InvalidConfiguration\"}}]");
        usec_t now;
        json_object *out = NULL;

        assert(cn_parse_rfc3339("2026-11-20T00:00:00Z", &now) >= 0);
        TAP_EQ_INT(mc_machineset_pick_deletions(ms, "Oldest", 2, now, &out), 0, "Oldest");
        TAP_OK(json_object_array_length(out) == 2 &&
               streq(cn_json_string(json_object_array_get_idx(out, 0), "metadata", "name", NULL), "old") &&
               streq(cn_json_string(json_object_array_get_idx(out, 1), "metadata", "name", NULL), "mid"),
               "Oldest: the two oldest, oldest first");
        json_object_put(out);
        TAP_EQ_INT(mc_machineset_pick_deletions(ms, "Newest", 1, now, &out), 0, "Newest");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(out, 0), "metadata", "name", NULL), "new", "Newest: the newest");
        json_object_put(out);
        TAP_EQ_INT(mc_machineset_pick_deletions(marked, "Newest", 1, now, &out), 0, "Newest with a marked Machine");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(out, 0), "metadata", "name", NULL), "marked",
                   "cluster.k8s.io/delete-machine goes first whatever the policy");
        json_object_put(out);
        for (int i = 0; i < 8; i++) {
                TAP_EQ_INT(mc_machineset_pick_deletions(failed, "", 1, now, &out), 0, "Random (the default)");
                TAP_EQ_STR(cn_json_string(json_object_array_get_idx(out, 0), "metadata", "name", NULL), "bad",
                           "Random: a failed Machine before healthy ones");
                json_object_put(out);
        }
        TAP_EQ_INT(mc_machineset_pick_deletions(ms, "Oldest", 5, now, &out), 0, "more than there are");
        TAP_EQ_INT(json_object_array_length(out), 3, "all of them");
        json_object_put(out);
        TAP_EQ_INT(mc_machineset_pick_deletions(ms, "Largest", 1, now, &out), -EINVAL, "an unknown policy is refused");
}

static void test_available(void) {
        _cleanup_json_ json_object *m = parse("{\"status\":{\"nodeRef\":{\"name\":\"n\"}}}");
        _cleanup_json_ json_object *node = parse(
                "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}");
        _cleanup_json_ json_object *no_time = parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        _cleanup_json_ json_object *not_ready = parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}");
        _cleanup_json_ json_object *ms = parse("{\"spec\":{\"minReadySeconds\":30}}"), *bad = parse("{\"spec\":{\"minReadySeconds\":-3}}");
        usec_t since = 0, wait = 1;
        int64_t v = -1;

        assert(cn_parse_rfc3339("2026-01-01T00:00:00Z", &since) == 0);
        TAP_OK(mc_machine_available(m, node, 0, since, &wait) && wait == 0, "minReadySeconds 0: available once Ready");
        TAP_OK(!mc_machine_available(m, node, 30, since + 10 * USEC_PER_SEC, &wait), "Ready for 10 s of 30: not yet");
        TAP_OK(wait > 19 * USEC_PER_SEC && wait <= 20 * USEC_PER_SEC + 1, "and it will be in 20 s");
        TAP_OK(mc_machine_available(m, node, 30, since + 31 * USEC_PER_SEC, &wait), "after 31 s: available");
        TAP_OK(!mc_machine_available(m, no_time, 30, since, &wait) && wait == 0,
               "no lastTransitionTime: never, as machine-controller");
        TAP_OK(!mc_machine_available(m, not_ready, 0, since, &wait) && wait == 0, "a Node not Ready: not available");
        TAP_EQ_INT(mc_min_ready_seconds(ms, &v), 0, "spec.minReadySeconds");
        TAP_EQ_INT(v, 30, "its value");
        TAP_EQ_INT(mc_min_ready_seconds(bad, &v), -EINVAL, "a negative one is refused");
}

int main(void) {
        test_selector();
        test_available();
        test_new_machine();
        test_pick();
        return tap_done();
}
