/* SPDX-License-Identifier: Apache-2.0 */
/* YAML loader strictness (duplicate keys, aliases, tags, caps) and the emitter's quoting: hostile
 * strings must come back as the same strings, read by our loader and by PyYAML (a YAML 1.1
 * reader, like the go-yaml behind sigs.k8s.io/yaml). */
#include <sys/wait.h>

#include "json-util.h"
#include "tap.h"
#include "yaml-util.h"

static int parse(const char *s, json_object **o, char **err) {
        return cn_yaml_parse(s, strlen(s), CN_YAML_MAX_SIZE, o, err);
}

static void check_bad(const char *s, const char *what, const char *msg_part) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *err = NULL;
        int r = parse(s, &o, &err);
        for (char *c = err; c && *c; c++)
                if (*c == '\n')
                        *c = ' ';
        TAP_OK(r == -EBADMSG && !o && err && strstr(err, msg_part), "%s rejected (%s)", what, err ?: "no message");
}

static void check_scalar(const char *yaml, const char *expected_json) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *s = NULL, *err = NULL, *name = strdup(yaml);
        int r = parse(yaml, &o, &err);

        for (char *c = name; *c; c++)
                if (*c == '\n')
                        *c = ' ';
        if (r >= 0)
                (void) cn_json_to_string(json_object_object_get(o, "v"), 0, &s);
        TAP_OK(r >= 0 && s && streq(s, expected_json), "%s resolves to %s (got %s)", name, expected_json,
               s ?: err ?: "error");
}

static bool have_pyyaml(void) {
        return system("python3 -c 'import yaml' >/dev/null 2>&1") == 0;
}

/* Reads text with PyYAML (safe_load, YAML 1.1 resolution) and returns it as JSON. */
static json_object *pyyaml_load(const char *text) {
        char path[] = "/tmp/cn-test-yaml-XXXXXX", cmd[512];
        _cleanup_free_ char *out = NULL;
        size_t n = 0;
        json_object *o = NULL;
        FILE *f;
        int fd = mkstemp(path);

        if (fd < 0)
                return NULL;
        (void) !write(fd, text, strlen(text));
        close(fd);
        snprintf(cmd, sizeof(cmd),
                 "python3 -c 'import yaml,json,sys; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' %s",
                 path);
        f = popen(cmd, "r");
        if (f) {
                out = calloc(1, 1 << 16);
                n = fread(out, 1, (1 << 16) - 1, f);
                (void) pclose(f);
                (void) cn_json_parse(out, n, CN_JSON_MAX_SIZE, &o, NULL);
        }
        unlink(path);
        return o;
}

static void test_emitter_hostile(void) {
        static const char *const hostile[] = {
                "a: b", "- x", "true", "yes", "Yes", "no", "on", "OFF", "y", "n", "null", "~", "", "123", "-1",
                "0x1f", "0o17", "017", "1:20", "1_000", "1e3", ".5", ".inf", ".nan", "multi\nline\n", "#comment",
                "key: value\nother: x", "{x: 1}", "[a]", "'", "\"", " lead", "trail ", "@x", "`x", "%x", "!x",
                "&anchor", "*alias", "|", ">", "---", "...", "tab\there", "caf\xc3\xa9", "ctl\x01x", "\\",
                "x #y", "<<", "=", "?", ": ", "a\r\nb", "v1", "apps/v1", "node.kubernetes.io/instance-type",
        };
        _cleanup_json_ json_object *doc = json_object_new_object(), *back = NULL, *py = NULL;
        _cleanup_free_ char *text = NULL, *err = NULL;
        json_object *list = json_object_new_array();
        size_t n;

        for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
                json_object_array_add(list, json_object_new_string(hostile[i]));
                /* Hostile values as keys too. */
                json_object_object_add(doc, hostile[i], json_object_new_string(hostile[i]));
        }
        json_object_object_add(doc, "list", list);
        TAP_EQ_INT(cn_yaml_emit(doc, &text, &n), 0, "emit hostile strings");
        TAP_EQ_INT(cn_yaml_parse(text, n, CN_YAML_MAX_SIZE, &back, &err), 0, "emitted text parses");
        TAP_OK(back && cn_json_equal(doc, back), "every hostile key and value reads back unchanged");
        if (have_pyyaml()) {
                py = pyyaml_load(text);
                TAP_OK(py && cn_json_equal(doc, py), "a YAML 1.1 reader (PyYAML) reads the same values");
        } else
                tap_ok(1, "# SKIP PyYAML not installed");
}

static void test_emitter_format(void) {
        _cleanup_json_ json_object *o = NULL, *docs = NULL, *back = NULL;
        _cleanup_free_ char *text = NULL, *multi = NULL, *err = NULL;
        json_object *bad;
        char *junk = NULL;

        const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\",\"labels\":{}},"
                                 "\"spec\":{\"hostNetwork\":true,\"n\":3,\"f\":0.1,\"g\":2.0,\"z\":null,"
                                 "\"containers\":[{\"name\":\"c\",\"args\":[\"--v=2\",\"run\"]}]}}";
        TAP_EQ_INT(cn_json_parse(pod, strlen(pod), CN_JSON_MAX_SIZE, &o, NULL), 0, "build object");
        TAP_EQ_INT(cn_yaml_emit(o, &text, NULL), 0, "emit");
        TAP_EQ_STR(text,
                   "apiVersion: v1\n"
                   "kind: Pod\n"
                   "metadata:\n"
                   "  name: x\n"
                   "  labels: {}\n"
                   "spec:\n"
                   "  hostNetwork: true\n"
                   "  \"n\": 3\n" /* YAML 1.1 reads a plain n as false */
                   "  f: 0.1\n"
                   "  g: 2.0\n"
                   "  z: null\n"
                   "  containers:\n"
                   "  - name: c\n"
                   "    args:\n"
                   "    - \"--v=2\"\n"
                   "    - run\n",
                   "block-style output with typed scalars");

        docs = json_object_new_array();
        json_object_array_add(docs, json_object_get(o));
        json_object_array_add(docs, json_object_new_string("second"));
        TAP_EQ_INT(cn_yaml_emit_multi(docs, &multi, NULL), 0, "emit multi");
        TAP_OK(strstr(multi, "\n---") != NULL, "documents separated by ---");
        TAP_EQ_INT(cn_yaml_parse_multi(multi, strlen(multi), CN_YAML_MAX_SIZE, &back, &err), 0, "parse multi");
        TAP_OK(back && cn_json_equal(docs, back), "multi-document round trip");

        bad = json_object_new_string("\xff\xfe");
        TAP_OK(cn_yaml_emit(bad, &junk, NULL) < 0 && !junk, "invalid UTF-8 cannot be emitted");
        json_object_put(bad);
}

int main(void) {
        _cleanup_json_ json_object *o = NULL, *m = NULL, *e = NULL, *big = NULL, *a = NULL;
        _cleanup_free_ char *err = NULL, *err2 = NULL, *err3 = NULL, *bomb = NULL, *deep = NULL, *huge = NULL;

        TAP_EQ_INT(parse("apiVersion: v1\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
                         "current-context: \"c\"\n",
                         &o, &err),
                   0, "parse kubeconfig-like document");
        TAP_EQ_STR(cn_json_string(o, "current-context", NULL), "c", "quoted string");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(cn_json_get(o, "clusters", NULL), 0), "cluster",
                                  "server", NULL),
                   "https://127.0.0.1:6443", "nested sequence of mappings");

        check_scalar("v: 42", "42");
        check_scalar("v: -7", "-7");
        check_scalar("v: 0x1f", "31");
        check_scalar("v: 0o17", "15");
        check_scalar("v: 1.5", "1.5");
        check_scalar("v: 1e3", "1000.0");
        check_scalar("v: true", "true");
        check_scalar("v: False", "false");
        check_scalar("v: ~", "null");
        check_scalar("v:", "null");
        check_scalar("v: yes", "\"yes\"");
        check_scalar("v: \"true\"", "\"true\"");
        check_scalar("v: '42'", "\"42\"");
        check_scalar("v: !!str 42", "\"42\"");
        check_scalar("v: 1:20", "\"1:20\"");
        check_scalar("v: |\n  line1\n  line2\n", "\"line1\\nline2\\n\"");
        check_scalar("v: &a anchored", "\"anchored\"");

        check_bad("a: 1\nb: 2\na: 3\n", "duplicate key", "duplicate key 'a'");
        check_bad("m:\n  x: 1\n  x: 1\n", "nested duplicate key", "duplicate key 'x'");
        check_bad("a: &x [1]\nb: *x\n", "alias", "aliases");
        check_bad("base: &b {x: 1}\nd:\n  <<: *b\n", "merge key with alias", "not allowed");
        check_bad("? [a, b]\n: c\n", "complex key", "keys must be scalars");
        check_bad("v: !foo bar\n", "unknown tag", "unsupported tag");
        check_bad("v: !!int abc\n", "wrong explicit tag", "not a valid");
        check_bad("v: .inf\n", "infinity", "cannot be represented");
        check_bad("v: 8E880\n", "float overflowing to infinity (found by fuzzing)", "out of range");
        check_bad("a: [1, 2\n", "truncated flow sequence", "line");
        check_bad("a: \"unterminated\n", "truncated quoted string", "line");
        check_bad("a: 1\n b: 2\n  - c\n", "bad indentation", "line");
        check_bad("a: 1\n---\nb: 2\n", "second document in single-document parse", "more than one document");

        /* Billion laughs: rejected at the first alias, nothing expanded. */
        bomb = strdup("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
                      "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                      "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                      "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n");
        check_bad(bomb, "alias bomb", "aliases are not allowed");

        deep = malloc(2 * 100 + 1);
        memset(deep, '[', 100);
        memset(deep + 100, ']', 100);
        deep[200] = 0;
        check_bad(deep, "nesting deeper than the cap", "nesting deeper");

        huge = malloc(1024);
        memset(huge, 'x', 1023);
        huge[0] = 'k', huge[1] = ':', huge[2] = ' ', huge[1023] = 0;
        TAP_EQ_INT(cn_yaml_parse(huge, 1023, 1000, &big, &err2), -EFBIG, "document over the size cap");
        TAP_OK(!big, "no output over the cap");

        TAP_EQ_INT(parse("# only a comment\n", &e, NULL), -ENODATA, "empty document is -ENODATA");
        const char *stream = "---\na: 1\n---\n---\n# c\n---\n- x\n";
        TAP_EQ_INT(cn_yaml_parse_multi(stream, strlen(stream), CN_YAML_MAX_SIZE, &m, &err3), 0,
                   "multi-document stream");
        TAP_EQ_INT(json_object_array_length(m), 2, "empty documents skipped");
        TAP_OK(json_object_is_type(json_object_array_get_idx(m, 1), json_type_array), "second document kept");
        TAP_EQ_INT(cn_yaml_parse_multi("", 0, CN_YAML_MAX_SIZE, &a, NULL), 0, "empty stream");
        TAP_EQ_INT(json_object_array_length(a), 0, "empty stream has no documents");

        test_emitter_format();
        test_emitter_hostile();
        return tap_done();
}
