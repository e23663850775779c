/* SPDX-License-Identifier: Apache-2.0 */
#include "labels.h"
#include "tap.h"

static void test_keys(void) {
        TAP_OK(cn_label_key_is_valid("app"), "plain name is a valid key");
        TAP_OK(cn_label_key_is_valid("example.com/tier"), "prefixed key is valid");
        TAP_OK(cn_label_key_is_valid("a.b-c.d/x_y.z-1"), "name with - _ . inside is valid");
        TAP_OK(!cn_label_key_is_valid(""), "empty key is invalid");
        TAP_OK(!cn_label_key_is_valid("/name"), "empty prefix is invalid");
        TAP_OK(!cn_label_key_is_valid("example.com/"), "empty name is invalid");
        TAP_OK(!cn_label_key_is_valid("Example.com/name"), "upper-case prefix is invalid");
        TAP_OK(!cn_label_key_is_valid("-name"), "name starting with '-' is invalid");
        TAP_OK(!cn_label_key_is_valid("name."), "name ending with '.' is invalid");
        TAP_OK(!cn_label_key_is_valid("a/b/c"), "two slashes are invalid");
        TAP_OK(!cn_label_key_is_valid("ex..com/name"), "empty DNS label in prefix is invalid");
        TAP_OK(!cn_label_key_is_valid("ex-.com/name"), "DNS label ending in '-' is invalid");
        TAP_OK(!cn_label_key_is_valid("na me"), "space is invalid");
        TAP_OK(cn_label_key_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
               "63-character name is valid");
        TAP_OK(!cn_label_key_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
               "64-character name is invalid");
}

static void test_values(void) {
        TAP_OK(cn_label_value_is_valid(""), "empty value is valid");
        TAP_OK(cn_label_value_is_valid("cx11"), "simple value is valid");
        TAP_OK(cn_label_value_is_valid("eu-central-1a"), "zone value is valid");
        TAP_OK(!cn_label_value_is_valid("a/b"), "slash in value is invalid");
        TAP_OK(!cn_label_value_is_valid("a b"), "space in value is invalid");
        TAP_OK(!cn_label_value_is_valid("_a"), "value must start alphanumeric");
        TAP_OK(!cn_label_value_is_valid("caf\xc3\xa9"), "non-ASCII value is invalid");
}

static void test_reserved(void) {
        TAP_OK(cn_label_key_is_reserved("kubernetes.io/hostname"), "kubernetes.io is reserved");
        TAP_OK(cn_label_key_is_reserved("node.kubernetes.io/instance-type"), "subdomain of kubernetes.io is reserved");
        TAP_OK(cn_label_key_is_reserved("k8s.io/x"), "k8s.io is reserved");
        TAP_OK(cn_label_key_is_reserved("foo.k8s.io/x"), "subdomain of k8s.io is reserved");
        TAP_OK(!cn_label_key_is_reserved("notkubernetes.io/x"), "a different domain ending in the same letters is not");
        TAP_OK(!cn_label_key_is_reserved("hetzner.cloud/x"), "provider domain is not reserved");
        TAP_OK(!cn_label_key_is_reserved("app"), "unprefixed key is not reserved");
}

static void test_add_extra(void) {
        _cleanup_json_ json_object *out = json_object_new_object();
        _cleanup_json_ json_object *existing = json_tokener_parse("{\"example.com/owner\":\"alice\"}");
        /* The API takes the metadata's strv; these literals are never written to. */
        char *const *extra = (char *const *) (const char *const[]) {
                "example.com/owner=bob",          /* already set: never overwrite */
                "kubernetes.io/role=master",      /* reserved */
                "topology.k8s.io/x=y",            /* reserved */
                "example.com/pool=blue",          /* fine */
                "bad key=1",                      /* invalid */
                "example.com/v=not valid",        /* invalid value */
                "example.com/pool=green",         /* duplicate within the list: first wins */
                "noequals",
                NULL,
        };
        json_object *v;
        int r;

        r = cn_labels_add_extra(out, existing, extra);
        TAP_EQ_INT(r, 1, "only one extra label is added");
        TAP_OK(json_object_object_get_ex(out, "example.com/pool", &v) && streq(json_object_get_string(v), "blue"),
               "the valid, unset label is added with its first value");
        TAP_OK(!json_object_object_get_ex(out, "example.com/owner", NULL), "an existing label is not overwritten");
        TAP_OK(!json_object_object_get_ex(out, "kubernetes.io/role", NULL), "reserved namespace is refused");
        TAP_EQ_INT(json_object_object_length(out), 1, "nothing else is added");
}

static void test_parse(void) {
        _cleanup_free_ char *k = NULL, *v = NULL;

        TAP_EQ_INT(cn_label_parse("a.io/b=c", &k, &v), 0, "key=value parses");
        TAP_EQ_STR(k, "a.io/b", "key part");
        TAP_EQ_STR(v, "c", "value part");
        TAP_EQ_INT(cn_label_parse("a=b=c", NULL, NULL), -EINVAL, "'=' inside a value is refused");
        TAP_EQ_INT(cn_label_parse("a=", NULL, NULL), 0, "empty value is accepted");
}

static void test_node_names(void) {
        TAP_OK(cn_node_name_is_valid("ip-10-0-0-13.ec2.internal"), "node name: EC2 host name");
        TAP_OK(cn_node_name_is_valid("worker-1"), "node name: plain");
        TAP_OK(!cn_node_name_is_valid("Worker-1"), "node name: upper case refused");
        TAP_OK(!cn_node_name_is_valid("-Bad_Label.Value-"), "node name: label syntax is not node syntax");
        TAP_OK(!cn_node_name_is_valid("a\nb"), "node name: newline refused");
        TAP_OK(!cn_node_name_is_valid("a..b"), "node name: empty DNS label refused");
        TAP_OK(!cn_node_name_is_valid(""), "node name: empty refused");
        TAP_OK(!cn_node_name_is_valid(NULL), "node name: NULL refused");
}

int main(void) {
        test_node_names();
        test_keys();
        test_values();
        test_reserved();
        test_add_extra();
        test_parse();
        return tap_done();
}
