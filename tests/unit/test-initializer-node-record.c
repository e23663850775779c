/* SPDX-License-Identifier: Apache-2.0 */
/* The record the initializer's Node cache keeps: a kubelet's Node through the initializer's
 * filter (initializer-node-filter.c) and the informer's text codec (cn_kube_object_to_text(),
 * cn_kube_object_from_text()) reads, for every member the initializer reads, what the whole
 * Node reads, and the patches built from either are the same; what it drops is gone. Text that
 * is not such a record is one error, never a crash or a partial tree. */
#include "initializer-node-filter.h"
#include "json-util.h"
#include "kube-client.h"
#include "metadata.h"
#include "node-addresses.h"
#include "node-patch.h"
#include "tap.h"

/* A Node as a kubelet registers it and the API server stores it, shortened (two images, one
 * managedFields entry), with a label value and a condition message that need escaping. */
static const char node_json[] =
        "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"worker-1\","
        "\"uid\":\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7f\",\"resourceVersion\":\"123456\","
        "\"creationTimestamp\":\"2026-11-24T10:00:00Z\",\"labels\":{\"kubernetes.io/hostname\":\"worker-1.example\","
        "\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\",\"node.kubernetes.io/instance-type\":\"cx22\","
        "\"hcloud.cloudnode.io/network-zone\":\"a\\\"b\\\\c/d \\u00e9\",\"example.com/team\":\"db\"},"
        "\"annotations\":{\"alpha.kubernetes.io/provided-node-ip\":\"10.0.0.5\","
        "\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"},"
        "\"managedFields\":[{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
        "\"time\":\"2026-11-24T10:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{}}}}]},"
        "\"spec\":{\"providerID\":\"hcloud://4711\",\"podCIDR\":\"10.244.1.0/24\",\"podCIDRs\":[\"10.244.1.0/24\"],"
        "\"taints\":[{\"key\":\"node.cloudprovider.kubernetes.io/uninitialized\",\"value\":\"true\","
        "\"effect\":\"NoSchedule\"},{\"key\":\"example.com/dedicated\",\"value\":\"db\",\"effect\":\"NoExecute\"}]},"
        "\"status\":{\"capacity\":{\"cpu\":\"2\",\"memory\":\"3902420Ki\",\"pods\":\"110\"},"
        "\"allocatable\":{\"cpu\":\"2\",\"memory\":\"3800020Ki\",\"pods\":\"110\"},"
        "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientMemory\","
        "\"message\":\"kubelet has sufficient memory available\",\"lastHeartbeatTime\":\"2026-11-24T10:05:00Z\"},"
        "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"kubelet is posting "
        "ready status \\\"ok\\\"\",\"lastHeartbeatTime\":\"2026-11-24T10:05:00Z\","
        "\"lastTransitionTime\":\"2026-11-24T10:00:10Z\"},"
        "{\"type\":\"CloudProviderInitialized\",\"status\":\"False\",\"reason\":\"InstanceNotFound\","
        "\"message\":\"no server named worker-1\",\"lastTransitionTime\":\"2026-11-24T10:00:20Z\"}],"
        "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},{\"type\":\"Hostname\","
        "\"address\":\"worker-1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"
        "\"nodeInfo\":{\"machineID\":\"abc\",\"kubeletVersion\":\"v1.31.2\",\"osImage\":\"Debian GNU/Linux 12\"},"
        "\"images\":[{\"names\":[\"registry.k8s.io/kube-proxy@sha256:0123\",\"registry.k8s.io/kube-proxy:v1.31.2\"],"
        "\"sizeBytes\":30000000},{\"names\":[\"docker.io/library/nginx:1.27\"],\"sizeBytes\":70000000}]}}";

static json_object *parse_whole(void) {
        json_object *o = NULL;

        assert(cn_json_parse(node_json, strlen(node_json), SIZE_MAX, &o, NULL) == 0);
        return o;
}

/* The record as the informer keeps it, and the tree it gives back. */
static int record_round_trip(const char *data, size_t size, json_object **ret_text, json_object **ret_tree) {
        _cleanup_json_ json_object *filtered = NULL, *text = NULL;
        int r;

        r = cn_json_parse_filtered(data, size, SIZE_MAX, initializer_node_filter, &filtered, NULL);
        if (r < 0)
                return r;
        r = cn_kube_object_to_text(filtered, &text);
        if (r < 0)
                return r;
        r = cn_kube_object_from_text(text, ret_tree);
        if (r < 0)
                return r;
        *ret_text = TAKE_PTR(text);
        return 0;
}

static bool same_member(json_object *a, json_object *b, const char *k1, const char *k2, const char *k3) {
        json_object *x = cn_json_get(a, k1, k2, k3, NULL), *y = cn_json_get(b, k1, k2, k3, NULL);

        return x && y && json_object_equal(x, y);
}

static bool same_condition(json_object *a, json_object *b, const char *type) {
        json_object *x = cn_node_get_condition(a, type), *y = cn_node_get_condition(b, type);
        static const char *const members[] = { "type", "status", "reason", "message" };

        if (!x || !y)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(members); i++)
                if (!same_member(x, y, members[i], NULL, NULL))
                        return false;
        return true;
}

static bool same_patch(json_object *whole, json_object *record, int (*build)(json_object *, const void *, json_object **),
                       const void *arg) {
        _cleanup_json_ json_object *a = NULL, *b = NULL;

        return build(whole, arg, &a) == 0 && build(record, arg, &b) == 0 && json_object_equal(a, b);
}

static int build_initialize(json_object *node, const void *arg, json_object **ret) {
        return cn_node_patch_initialize(node, arg, ret);
}

static int build_untaint(json_object *node, const void *arg, json_object **ret) {
        return cn_node_patch_taint(node, arg, false, ret);
}

static int build_taint(json_object *node, const void *arg, json_object **ret) {
        return cn_node_patch_taint(node, arg, true, ret);
}

static int build_condition(json_object *node, const void *arg, json_object **ret) {
        return cn_node_patch_status_condition(node, arg, NULL, 1764000000 * USEC_PER_SEC, ret);
}

static void test_round_trip(void) {
        _cleanup_json_ json_object *whole = parse_whole(), *text = NULL, *rec = NULL;
        char *const extra[] = { (char *) CN_LABEL_HCLOUD_NETWORK_ZONE "=eu-central", (char *) CN_LABEL_AWS_ZONE_ID "=z1",
                                NULL };
        CnNodeInitData d = { "hcloud://4711", "cx22", "fsn1", "fsn1-dc14", extra };
        CnNodeCondition ok = { CN_CONDITION_CLOUD_PROVIDER_INITIALIZED, "True", "Initialized", "ok" };
        const char *t;

        TAP_OK(record_round_trip(node_json, strlen(node_json), &text, &rec) == 0, "a kubelet's Node becomes a record");
        if (!rec)
                return;
        t = json_object_get_string(text);
        TAP_OK(json_object_get_string_len(text) * 2 < (int) strlen(node_json),
               "the record's text (%d bytes) is under half the shortened Node's (%zu)", json_object_get_string_len(text),
               strlen(node_json));
        TAP_OK(!strstr(t, "managedFields") && !strstr(t, "images") && !strstr(t, "nodeInfo") &&
                       !strstr(t, "MemoryPressure") && !strstr(t, "lastHeartbeatTime") && !strstr(t, "podCIDR"),
               "members the initializer does not read are not in it");

        TAP_EQ_STR(cn_node_get_name(rec), "worker-1", "name");
        TAP_EQ_STR(cn_node_get_uid(rec), cn_node_get_uid(whole), "uid");
        TAP_EQ_STR(cn_node_get_resource_version(rec), "123456", "resourceVersion");
        TAP_EQ_STR(cn_json_string(rec, "metadata", "creationTimestamp", NULL), "2026-11-24T10:00:00Z",
                   "creationTimestamp");
        TAP_OK(same_member(rec, whole, "metadata", "labels", CN_LABEL_INSTANCE_TYPE),
               "the instance-type label the patch compares");
        TAP_EQ_STR(cn_json_string(rec, "metadata", "labels", CN_LABEL_HCLOUD_NETWORK_ZONE, NULL), "a\"b\\c/d \xc3\xa9",
                   "a provider label, its value with quotes, a backslash, a slash and UTF-8");
        TAP_EQ_INT(json_object_object_length(cn_node_get_labels(rec)), 2, "no other label is kept");
        TAP_OK(!cn_json_get(rec, "metadata", "labels", "kubernetes.io/os", NULL) &&
                       !cn_json_get(rec, "metadata", "labels", "example.com/team", NULL),
               "labels the initializer never sets are dropped");
        TAP_EQ_STR(cn_node_get_kubelet_hostname(rec), cn_node_get_kubelet_hostname(whole), "the kubelet's hostname");
        TAP_EQ_STR(cn_node_get_provided_node_ip(rec), "10.0.0.5", "the provided-node-ip annotation");
        TAP_OK(!cn_json_get(rec, "metadata", "annotations", "node.alpha.kubernetes.io/ttl", NULL),
               "other annotations are dropped");
        TAP_EQ_STR(cn_node_get_provider_id(rec), "hcloud://4711", "spec.providerID");
        TAP_OK(same_member(rec, whole, "spec", "taints", NULL), "spec.taints, all of them");
        TAP_OK(cn_node_has_taint(rec, CN_TAINT_UNINITIALIZED) && !cn_node_has_taint(rec, CN_TAINT_SHUTDOWN),
               "the uninitialized taint is seen, the shutdown taint is not");
        TAP_OK(same_member(rec, whole, "status", "addresses", NULL), "status.addresses");
        TAP_OK(same_condition(rec, whole, "Ready"), "the Ready condition's type, status, reason, message");
        TAP_OK(same_condition(rec, whole, CN_CONDITION_CLOUD_PROVIDER_INITIALIZED),
               "the CloudProviderInitialized condition's type, status, reason, message");
        TAP_OK(!cn_node_get_condition(rec, "MemoryPressure"), "other conditions are dropped");

        TAP_OK(same_patch(whole, rec, build_initialize, &d), "the initializing PATCH is the same from the record");
        {
                _cleanup_json_ json_object *p = NULL;

                TAP_OK(build_initialize(rec, &d, &p) == 0 &&
                               !cn_json_get(p, "metadata", "labels", CN_LABEL_HCLOUD_NETWORK_ZONE, NULL) &&
                               cn_json_get(p, "metadata", "labels", CN_LABEL_AWS_ZONE_ID, NULL),
                       "a provider label the Node has is left as it is, one it lacks is set");
        }
        TAP_OK(initializer_node_label_kept(CN_LABEL_ZONE) && initializer_node_label_kept(CN_LABEL_AWS_ZONE_ID) &&
                       !initializer_node_label_kept("example.com/pool") && !initializer_node_label_kept(NULL),
               "the labels the patch may set are the labels kept");
        TAP_OK(same_patch(whole, rec, build_untaint, CN_TAINT_UNINITIALIZED),
               "the taint-removing PATCH is the same from the record");
        TAP_OK(same_patch(whole, rec, build_taint, CN_TAINT_SHUTDOWN), "the shutdown-taint PATCH is the same");
        TAP_OK(same_patch(whole, rec, build_condition, &ok), "the condition PATCH is the same");
}

/* The record of a record is itself: a Node the informer re-caches does not drift. */
static void test_stable(void) {
        _cleanup_json_ json_object *text = NULL, *rec = NULL, *text2 = NULL, *rec2 = NULL, *filtered = NULL,
                                   *text3 = NULL;
        _cleanup_free_ char *json = NULL;

        assert(record_round_trip(node_json, strlen(node_json), &text, &rec) == 0);
        TAP_OK(cn_kube_object_to_text(rec, &text2) == 0 && cn_kube_object_from_text(text2, &rec2) == 0 &&
                       streq(json_object_get_string(text), json_object_get_string(text2)) &&
                       json_object_equal(rec, rec2),
               "a record read back and recorded again is the same text");
        /* The record's tree, written as JSON and filtered again as an API server's answer would
         * be, gives the same record. */
        json = strdup(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        assert(json);
        TAP_OK(cn_json_parse_filtered(json, strlen(json), SIZE_MAX, initializer_node_filter, &filtered, NULL) == 0 &&
                       cn_kube_object_to_text(filtered, &text3) == 0 &&
                       streq(json_object_get_string(text), json_object_get_string(text3)),
               "the record's JSON filtered again is the same record");
}

/* The text stands for repeated strings with bytes JSON never has raw: values that contain those
 * strings, and every escape, come back as they were. */
static void test_text_codec(void) {
        _cleanup_json_ json_object *o = NULL, *text = NULL, *back = NULL;
        static const char doc[] =
                "{\"metadata\":{\"name\":\"Ready\",\"labels\":{\"kubernetes.io/hostname\":\"Hostname\","
                "\"x\":\"\\\"status\\\":{\\u0001\\u001f\\t\"}},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                "\"message\":\"kubelet is posting ready status\"}],\"addresses\":[{\"type\":\"InternalIP\","
                "\"address\":\"10.0.0.1\"}]},\"spec\":{\"providerID\":\"\"}}";
        const char *t;
        bool raw_ok = true;

        assert(cn_json_parse(doc, strlen(doc), SIZE_MAX, &o, NULL) == 0);
        TAP_OK(cn_kube_object_to_text(o, &text) == 0, "an object with token strings in its values is recorded");
        if (!text)
                return;
        t = json_object_get_string(text);
        for (int i = 0; i < json_object_get_string_len(text); i++)
                if ((unsigned char) t[i] == 0 || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')
                        raw_ok = false;
        TAP_OK(raw_ok, "the text has no NUL and no JSON whitespace (without packed members)");
        TAP_OK(json_object_get_string_len(text) * 2 < (int) strlen(doc), "and is under half the JSON (%d of %zu bytes)",
               json_object_get_string_len(text), strlen(doc));
        TAP_OK(cn_kube_object_from_text(text, &back) == 0 && json_object_equal(o, back),
               "the tree read back equals the object, control characters in values included");
}

/* The tokens coded by bytes UTF-8 never uses: in keys and values, next to text in every length of
 * UTF-8 sequence (whose lead and continuation bytes are not codes), a Node initialized and one not. */
static void test_text_codec_utf8(void) {
        static const char *const docs[] = {
                "{\"metadata\":{\"name\":\"n\",\"labels\":{\"node.kubernetes.io/instance-type\":\"cx22\","
                "\"topology.kubernetes.io/region\":\"fsn1\",\"topology.kubernetes.io/zone\":\"fsn1-dc14\"}},"
                "\"spec\":{\"providerID\":\"hcloud://4711\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                "\"status\":\"True\",\"reason\":\"KubeletReady\"},{\"type\":\"CloudProviderInitialized\","
                "\"status\":\"False\"}]}}",
                "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":"
                "\"node.cloudprovider.kubernetes.io/uninitialized\",\"value\":\"true\",\"effect\":\"NoSchedule\"}]}}",
                "{\"a\":\"\\u00e9True\\\"\\u20acNoSchedule\\ud83d\\ude00aws:///\\u00c0\\u00ffopenstack:///gce://x\","
                "\"\\u00e9KubeletReady\\u07ff\":\"\\uffffFalse\\\"\\ud800\\udc00\"}",
        };

        for (size_t i = 0; i < ELEMENTSOF(docs); i++) {
                _cleanup_json_ json_object *o = NULL, *text = NULL, *back = NULL;
                size_t codes = 0;
                const char *t;

                assert(cn_json_parse(docs[i], strlen(docs[i]), SIZE_MAX, &o, NULL) == 0);
                assert(cn_kube_object_to_text(o, &text) == 0);
                t = json_object_get_string(text);
                for (int k = 0; k < json_object_get_string_len(text); k++)
                        codes += (unsigned char) t[k] == 0xc0 || (unsigned char) t[k] == 0xc1 || (unsigned char) t[k] >= 0xf5;
                TAP_OK(codes >= 2 && cn_kube_object_from_text(text, &back) == 0 && json_object_equal(o, back),
                       "document %zu: %zu strings coded by bytes UTF-8 never uses, and read back as they were", i,
                       codes);
        }
}

static int from_text(const char *s, size_t len) {
        _cleanup_json_ json_object *text = json_object_new_string_len(s, (int) len), *tree = NULL;
        int r;

        assert(text);
        r = cn_kube_object_from_text(text, &tree);
        assert(r < 0 || tree);
        return r;
}

/* A uid and a creationTimestamp of the forms Kubernetes writes are packed; other forms are kept as
 * they are; a text whose packed bytes are cut or out of their alphabet is refused. */
#define TEXT_UID_PACKED_BYTES 19 /* TEXT_UID_PACKED of kube-client.c */

static int round_trip_text(const char *doc, char **ret_text, size_t *ret_len) {
        _cleanup_json_ json_object *o = NULL, *back = NULL;
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        assert(cn_json_parse(doc, strlen(doc), SIZE_MAX, &o, NULL) == 0);
        k = cn_kube_text_encode(o, &text, &n);
        if (k < 0)
                return k;
        k = cn_kube_text_decode(text, n, &back);
        if (k < 0)
                return k;
        if (!json_object_equal(o, back))
                return -EBADMSG;
        *ret_len = n;
        *ret_text = TAKE_PTR(text);
        return 0;
}

static size_t count_byte(const char *s, size_t n, char c) {
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                k += s[i] == c;
        return k;
}

static void test_text_codec_packed(void) {
        static const char *const packed[] = {
                "{\"metadata\":{\"name\":\"n\",\"uid\":\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7f\","
                "\"creationTimestamp\":\"2026-11-24T10:00:00Z\",\"ownerReferences\":[{\"uid\":"
                "\"00000000-0000-0000-0000-000000000000\"}]}}",
                "{\"uid\":\"ffffffff-ffff-ffff-ffff-ffffffffffff\",\"creationTimestamp\":\"1970-01-01T00:00:00Z\"}",
                "{\"uid\":\"0123abcd-4567-89ef-0123-456789abcdef\",\"creationTimestamp\":\"9999-12-31T23:59:59Z\"}",
                "{\"creationTimestamp\":\"2024-02-29T23:59:59Z\",\"uid\":\"a0000000-0000-0000-0000-00000000000a\"}",
        };
        static const char *const plain[] = {
                "{\"uid\":\"5B0C6E8E-1F3A-4C1E-9D8E-2A3B4C5D6E7F\"}",
                "{\"uid\":\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7\"}",
                "{\"uid\":\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7fa\"}",
                "{\"uid\":\"5b0c6e8e1f3a-4c1e-9d8e-2a3b4c5d6e7f0\"}",
                "{\"uid\":\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7g\"}",
                "{\"uid\":\"\"}",
                "{\"uid\":5}",
                "{\"creationTimestamp\":\"2026-11-24T10:00:00.5Z\"}",
                "{\"creationTimestamp\":\"2026-11-24T10:00:00+01:00\"}",
                "{\"creationTimestamp\":\"2026-02-30T10:00:00Z\"}",
                "{\"creationTimestamp\":\"2023-02-29T10:00:00Z\"}",
                "{\"creationTimestamp\":\"1969-12-31T23:59:59Z\"}",
                "{\"creationTimestamp\":\"2026-13-01T10:00:00Z\"}",
                "{\"creationTimestamp\":\"2026-11-24T24:00:00Z\"}",
                "{\"creationTimestamp\":\"2026-11-24T10:00:60Z\"}",
                "{\"creationTimestamp\":\"2026-11-24t10:00:00z\"}",
                "{\"creationTimestamp\":\"+026-11-24T10:00:00Z\"}",
                "{\"creationTimestamp\":null}",
                "{\"x\":\"\\\"uid\\\":\\\"5b0c6e8e-1f3a-4c1e-9d8e-2a3b4c5d6e7f\\\"\"}",
        };
        _cleanup_free_ char *text = NULL;
        bool all = true;
        size_t n;

        for (size_t i = 0; i < ELEMENTSOF(packed); i++) {
                _cleanup_free_ char *t = NULL;
                bool ok = round_trip_text(packed[i], &t, &n) == 0;

                TAP_OK(ok && count_byte(t, n, '\t') == (i == 0 ? 2U : 1U) && count_byte(t, n, '\n') == 1 &&
                               !memchr(t, '\\', n) && n + (i == 0 ? 2 : 1) * 17 + 15 < strlen(packed[i]),
                       "packed and read back: %s", packed[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(plain); i++) {
                _cleanup_free_ char *t = NULL;

                if (round_trip_text(plain[i], &t, &n) < 0 || memchr(t, '\t', n) || memchr(t, '\n', n)) {
                        all = false;
                        printf("# not kept as it is: %s\n", plain[i]);
                }
        }
        TAP_OK(all, "other forms of uid and creationTimestamp are kept as they are and read back");

        /* Hostile texts: the packed bytes cut short, outside their alphabet, or beyond the range. */
        assert(round_trip_text(packed[1], &text, &n) == 0);
        {
                _cleanup_json_ json_object *o = NULL;
                char *uid = memchr(text, '\t', n), *created = memchr(text, '\n', n);
                char saved;

                assert(uid && created && created > uid);
                TAP_EQ_INT(cn_kube_text_decode(text, (size_t) (uid - text) + 5, &o), -EBADMSG, "a packed uid cut short");
                TAP_EQ_INT(cn_kube_text_decode(text, (size_t) (created - text) + 6, &o), -EBADMSG,
                           "a packed timestamp cut short");
                for (const char *bad = "\"\\\x01\x7f\xc0\xff"; *bad; bad++) {
                        saved = uid[3];
                        uid[3] = *bad;
                        if (cn_kube_text_decode(text, n, &o) != -EBADMSG)
                                all = false;
                        uid[3] = saved;
                }
                TAP_OK(all, "a byte outside the alphabet in a packed uid");
                /* All ones in the last byte: the uid's 5 padding bits are not zero. */
                saved = uid[TEXT_UID_PACKED_BYTES];
                uid[TEXT_UID_PACKED_BYTES] = (char) 0xbf;
                TAP_EQ_INT(cn_kube_text_decode(text, n, &o), -EBADMSG, "a packed uid with padding bits set");
                uid[TEXT_UID_PACKED_BYTES] = saved;
                /* The largest 42-bit count of seconds is past the year 9999. */
                memset(created + 1, 0xbf, 6);
                TAP_EQ_INT(cn_kube_text_decode(text, n, &o), -EBADMSG, "a packed timestamp past 9999");
        }
}

static void test_hostile(void) {
        _cleanup_json_ json_object *num = json_object_new_int(7), *arr = json_object_new_array(), *tree = NULL,
                                   *text = NULL, *rec = NULL;
        _cleanup_free_ char *deep = malloc(20001);
        static const char nul_inside[] = "{\"a\":\"x\0y\"}";

        TAP_EQ_INT(cn_kube_object_from_text(num, &tree), -EBADMSG, "a number is not a record");
        TAP_OK(!tree, "and gives no tree");
        TAP_EQ_INT(cn_kube_object_to_text(arr, &text), -EINVAL, "an array is not recorded");
        TAP_EQ_INT(from_text("", 0), -EBADMSG, "empty text is one error");
        TAP_EQ_INT(from_text("{\"metadata\":{\"name\":\"x\"", 23), -EBADMSG, "truncated text is one error");
        TAP_EQ_INT(from_text("[{\"metadata\":{}}]", 17), -EBADMSG, "a list is not a record");
        TAP_EQ_INT(from_text("\"{}\"", 4), -EBADMSG, "a string is not a record");
        TAP_EQ_INT(from_text("{} {}", 5), -EBADMSG, "two documents are one error");
        TAP_EQ_INT(from_text("{\"a\":\"\xff\xfe\"}", 11), -EBADMSG, "invalid UTF-8 is one error");
        TAP_EQ_INT(from_text(nul_inside, sizeof(nul_inside) - 1), -EBADMSG, "a NUL byte inside is one error");
        TAP_EQ_INT(from_text("\x01\x01\x1f", 3), -EBADMSG, "token bytes that make no JSON are one error");
        TAP_EQ_INT(from_text("{\"a\":\"\x09\"}", 8), -EBADMSG, "a raw tab in a string is one error");
        assert(deep);
        memset(deep, '[', 20000);
        deep[20000] = 0;
        deep[0] = '{';
        TAP_EQ_INT(from_text(deep, 20000), -EBADMSG, "20000 levels of nesting are one error, not a crash");

        /* What the filter is given from the API server: the same, before a record exists. */
        TAP_OK(record_round_trip(node_json, strlen(node_json) - 1, &text, &rec) == -EBADMSG && !rec,
               "a Node cut short by one byte gives no record");
        TAP_OK(record_round_trip("{\"metadata\":[1,2],\"spec\":7}", 27, &text, &rec) == 0 && rec &&
                       !cn_node_get_name(rec) && !cn_node_get_provider_id(rec) &&
                       !cn_node_has_taint(rec, CN_TAINT_UNINITIALIZED),
               "members of the wrong type read as absent");
}

/* The key read from a record without building its tree: only where it is certain to be the tree's. */
static void test_plain_name(void) {
        static const struct {
                const char *json, *want, *what;
        } cases[] = {
                { "{\"metadata\":{\"name\":\"node-1.example\",\"uid\":\"u\"},\"spec\":{}}", "node-1.example",
                  "a Node's name is read from its record" },
                { "{\"metadata\":{\"name\":\"a\\\"b\"}}", NULL, "a name with an escape is left to the tree" },
                { "{\"metadata\":{\"name\":\"xReady\"}}", NULL, "a name holding a coded string is left to the tree" },
                { "{\"metadata\":{\"name\":\"xNoSchedule\"}}", NULL,
                  "a name holding a string coded above 0x7f is left to the tree" },
                { "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\"}}", NULL,
                  "a record naming a namespace is left to the tree" },
                { "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}", NULL,
                  "a record not starting with metadata.name is left to the tree" },
                { "{\"metadata\":{\"name\":\"\"}}", NULL, "an empty name is left to the tree" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ json_object *o = NULL, *text = NULL;
                _cleanup_free_ char *name = NULL;

                assert(cn_json_parse(cases[i].json, strlen(cases[i].json), SIZE_MAX, &o, NULL) == 0);
                assert(cn_kube_object_to_text(o, &text) == 0);
                name = cn_kube_object_text_plain_name(text);
                if (cases[i].want)
                        TAP_EQ_STR(name, cases[i].want, cases[i].what);
                else
                        TAP_OK(!name, "%s (%s)", cases[i].what, strna(name));
        }
}

int main(void) {
        test_round_trip();
        test_stable();
        test_text_codec();
        test_text_codec_utf8();
        test_text_codec_packed();
        test_hostile();
        test_plain_name();
        return tap_done();
}
