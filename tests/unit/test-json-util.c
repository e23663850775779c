/* SPDX-License-Identifier: Apache-2.0 */
/* JSON parsing with caps and error text, typed getters, setters, serialization. */
#include "json-util.h"
#include "tap.h"

static int parse(const char *s, json_object **o, char **err) {
        return cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, o, err);
}

static void check_bad(const char *s, const char *what) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *err = NULL;
        int r = parse(s, &o, &err);
        TAP_OK(r == -EBADMSG && !o && err, "%s rejected (%s)", what, err ?: "no message");
}

int main(void) {
        _cleanup_json_ json_object *o = NULL, *n = NULL, *deep = NULL, *big = NULL, *b = NULL;
        _cleanup_free_ char *err = NULL, *s = NULL, *nested = NULL, *err2 = NULL;
        const char *str = NULL;
        int64_t i = 0;
        bool bo = false;
        double d = 0;

        TAP_EQ_INT(parse("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"topology.kubernetes.io/zone\":\"z1\"}},"
                         "\"spec\":{\"replicas\":3,\"paused\":true,\"ratio\":0.5,\"none\":null}}",
                         &o, &err),
                   0, "parse object");
        TAP_OK(cn_json_get_string(o, &str, "metadata", "name", NULL) == 0 && streq(str, "n1"), "get string");
        TAP_EQ_STR(cn_json_string(o, "metadata", "labels", "topology.kubernetes.io/zone", NULL), "z1",
                   "keys with dots and slashes");
        TAP_OK(cn_json_get_int64(o, &i, "spec", "replicas", NULL) == 0 && i == 3, "get int");
        TAP_OK(cn_json_get_bool(o, &bo, "spec", "paused", NULL) == 0 && bo, "get bool");
        TAP_OK(cn_json_get_double(o, &d, "spec", "ratio", NULL) == 0 && d == 0.5, "get double");
        TAP_EQ_INT(cn_json_get_string(o, &str, "spec", "replicas", NULL), -EINVAL, "wrong type is -EINVAL");
        TAP_EQ_INT(cn_json_get_string(o, &str, "spec", "missing", NULL), -ENOENT, "missing is -ENOENT");
        TAP_EQ_INT(cn_json_get_string(o, &str, "spec", "none", NULL), -ENOENT, "null is -ENOENT");
        TAP_EQ_INT(cn_json_get_string(o, &str, "metadata", "name", "deeper", NULL), -ENOENT,
                   "path through a non-object is -ENOENT");

        {
                _cleanup_json_ json_object *conds = json_tokener_parse(
                        "[{\"type\":\"Ready\",\"status\":\"True\"},7,{\"type\":\"Disk\"}]");

                TAP_OK(cn_json_array_find(conds, "type", "Disk") == json_object_array_get_idx(conds, 2),
                       "array find by a key, skipping non-objects");
                TAP_OK(!cn_json_array_find(conds, "type", "Memory") && !cn_json_array_find(o, "type", "Ready") &&
                       !cn_json_array_find(NULL, "type", "Ready"),
                       "array find: no match, not an array, NULL");
                TAP_OK(cn_json_string_is(json_object_array_get_idx(conds, 0), "status", "True") &&
                       !cn_json_string_is(json_object_array_get_idx(conds, 0), "status", "False") &&
                       cn_json_string_is(json_object_array_get_idx(conds, 2), "status", NULL) &&
                       cn_json_string_is(json_object_array_get_idx(conds, 2), "status", ""),
                       "string_is: equal, different, missing counts as empty");
        }
        TAP_EQ_INT(cn_json_set_string(o, "i-123", "spec", "providerID", NULL), 0, "set existing path");
        TAP_EQ_INT(cn_json_set(o, json_object_new_int(1), "status", "a", "b", NULL), 0, "set creates objects");
        TAP_EQ_INT(cn_json_set(o, json_object_new_int(1), "metadata", "name", "x", NULL), -EINVAL,
                   "set through a string fails");
        TAP_EQ_INT(cn_json_to_string(cn_json_get(o, "status", NULL), CN_JSON_NEWLINE, &s), 0, "serialize");
        TAP_EQ_STR(s, "{\"a\":{\"b\":1}}\n", "compact serialization");
        free(s);
        s = NULL;
        json_object *slash = json_object_new_string("a/b");
        TAP_EQ_INT(cn_json_to_string(slash, 0, &s), 0, "serialize string");
        json_object_put(slash);
        TAP_EQ_STR(s, "\"a/b\"", "slashes not escaped");

        TAP_EQ_INT(parse("  42 \n", &n, &err2), 0, "bare number at end of input");
        TAP_OK(json_object_get_int64(n) == 42, "bare number value");
        {
                json_object *null_doc = (json_object *) 1;
                TAP_OK(cn_json_parse("null", 4, 100, &null_doc, NULL) == 0 && !null_doc,
                       "a null document is NULL, not an error (found by fuzzing)");
        }

        check_bad("{\"a\": 1", "truncated object");
        check_bad("{\"a\": \"abc", "truncated string");
        check_bad("{\"a\": 1} x", "trailing garbage");
        check_bad("tru", "truncated literal");
        check_bad("nul", "truncated null");
        check_bad("{a: 1}", "unquoted key");
        check_bad("{\"a\": 'x'}", "single-quoted value");
        check_bad("", "empty input");
        check_bad("{\"a\": \"\xff\"}", "invalid UTF-8");
        check_bad("[1,]", "trailing comma");
        check_bad("NaN", "NaN");
        check_bad("{\"a\": [1, NaN]}", "NaN in an array");
        check_bad("{\"a\": Infinity}", "Infinity");
        check_bad("{\"a\": -Infinity}", "-Infinity");
        check_bad("{\"a\": 1e999}", "a number out of the range of a double");
        check_bad("-1e999", "a bare number out of range");
        {
                _cleanup_json_ json_object *small = NULL;

                TAP_EQ_INT(parse("[1e-999, 1.7976931348623157e308]", &small, NULL), 0,
                           "underflow to zero and the largest double are numbers");
        }

        nested = malloc(2 * 200 + 1);
        memset(nested, '[', 200);
        memset(nested + 200, ']', 200);
        nested[400] = 0;
        TAP_EQ_INT(parse(nested, &deep, NULL), -EBADMSG, "nesting deeper than the cap rejected");

        {
                /* A document cut or malformed after a high surrogate leaves nothing behind for the next one. */
                static const char *const cut[] = { "\"\\ud800", "[\"\\ud83d\\x\"]", "{\"a\":\"x\\udbff\xff\"}",
                                                   "\"\\ud800\\u12\"" };
                bool clean = true;

                for (size_t i = 0; i < ELEMENTSOF(cut); i++) {
                        _cleanup_json_ json_object *bad = NULL, *pair = NULL, *lone = NULL;

                        clean = clean && parse(cut[i], &bad, NULL) == -EBADMSG;
                        clean = clean && parse("\"\\ud83d\\ude00\"", &pair, NULL) == 0 &&
                                streq(json_object_get_string(pair), "\xf0\x9f\x98\x80") &&
                                json_object_get_string_len(pair) == 4;
                        clean = clean && parse("\"v\\ud800h\"", &lone, NULL) == 0 &&
                                streq(json_object_get_string(lone), "v\xef\xbf\xbdh");
                }
                TAP_OK(clean, "a document cut or malformed after a high surrogate does not change the next one's strings");
        }

        TAP_EQ_INT(cn_json_parse("[1,2,3]", 7, 6, &big, &err), -EFBIG, "document over the size cap");
        TAP_OK(cn_json_parse("{\"a\":[1,2]}", 11, 11, &b, NULL) == 0 && cn_json_equal(b, cn_json_get(b, NULL)),
               "document at exactly the cap");

        {
                /* An informer's cached Node: compacted, the same tree, still found by key and
                 * still growing when written to. */
                static const char node[] =
                        "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\","
                        "\"e\":\"5\",\"f\":\"6\",\"g\":\"7\",\"h\":\"8\",\"i\":\"9\",\"j\":\"10\",\"k\":\"11\","
                        "\"l\":\"12\"},\"annotations\":{}},\"spec\":{\"taints\":[{\"key\":\"t\",\"effect\":\"NoSchedule\"}]},"
                        "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}";
                _cleanup_json_ json_object *tree = NULL, *copy = NULL;
                json_object *labels;
                bool all = true;

                assert(parse(node, &tree, NULL) == 0 && parse(node, &copy, NULL) == 0);
                cn_json_compact(tree);
                TAP_OK(cn_json_equal(tree, copy), "a compacted tree equals the parsed one");
                labels = cn_json_get(tree, "metadata", "labels", NULL);
                TAP_OK(json_object_get_object(labels)->size < 32 &&
                               json_object_get_object(cn_json_get(tree, "status", NULL))->size < 16,
                       "its objects' tables are no larger than their members need");
                for (char c = 'a'; c <= 'l'; c++) {
                        char k[2] = { c, 0 };
                        all = all && json_object_object_get_ex(labels, k, NULL);
                }
                TAP_OK(all && !json_object_object_get_ex(labels, "z", NULL) &&
                               cn_json_get(tree, "metadata", "annotations", NULL) &&
                               json_object_array_length(cn_json_get(tree, "status", "addresses", NULL)) == 1 &&
                               streq(cn_json_string(json_object_array_get_idx(cn_json_get(tree, "spec", "taints", NULL), 0),
                                                    "key", NULL), "t"),
                       "every member is found, a missing one is not");
                for (char c = 'm'; c <= 'z'; c++) {
                        char k[2] = { c, 0 };
                        json_object_object_add(labels, k, json_object_new_string(k));
                }
                TAP_OK(json_object_object_length(labels) == 26 && json_object_object_get_ex(labels, "z", NULL) &&
                               json_object_object_get_ex(labels, "a", NULL),
                       "members added after compacting are kept");
        }
        {
                /* Objects of every size up to a few thousand members (a ConfigMap's data, a Node
                 * with many labels): each member is still found after compacting. */
                size_t missing = 0, first_bad = 0;

                for (size_t n = 1; n <= 3000; n += n < 400 ? 1 : 37) {
                        _cleanup_json_ json_object *o = json_object_new_object();
                        char k[32];

                        assert(o);
                        for (size_t i = 0; i < n; i++) {
                                snprintf(k, sizeof(k), "key-%zu", i);
                                assert(json_object_object_add(o, k, json_object_new_int((int) i)) == 0);
                        }
                        cn_json_compact(o);
                        for (size_t i = 0; i < n; i++) {
                                snprintf(k, sizeof(k), "key-%zu", i);
                                if (!json_object_object_get_ex(o, k, NULL)) {
                                        missing++;
                                        if (!first_bad)
                                                first_bad = n;
                                }
                        }
                }
                if (missing)
                        printf("# members lost from %zu members on; %zu lookups failed\n", first_bad, missing);
                TAP_OK(missing == 0, "every member of objects of 1 to 3000 members is found after compacting");
        }
        return tap_done();
}
