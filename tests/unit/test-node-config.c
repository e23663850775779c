/* SPDX-License-Identifier: Apache-2.0 */
/* Node config parsing: keys, types, defaults, and errors that name the key. */
#include "json-util.h"
#include "node-config.h"
#include "metadata.h"
#include "tap.h"

static int parse(const char *json, CnNodeConfig **ret, char **ret_error) {
        _cleanup_json_ json_object *doc = json_tokener_parse(json);

        return cn_node_config_from_json(doc, ret, ret_error);
}

static void test_full(void) {
        _cleanup_node_config_ CnNodeConfig *c = NULL;
        _cleanup_free_ char *err = NULL;
        int r;

        r = parse("{\"platform\":\"aws\",\"role\":\"control-plane\",\"nodeName\":\"n1\","
                  "\"kubeconfig\":\"/k\",\"metadata\":{\"endpoint\":\"http://127.0.0.1:1\","
                  "\"configDrive\":\"/cd\",\"timeout\":\"1m500ms\",\"retries\":3,\"deadline\":20,"
                  "\"requireIMDSv2\":true},\"cloudConfig\":{\"Global\":{\"zone\":\"a\",\"n\":5,\"b\":true},"
                  "\"ServiceOverride\":{\"1\":{\"Service\":\"ec2\"}}},"
                  "\"credentialsFile\":\"/c\",\"images\":\"/i.json\",\"healthPort\":1234}",
                  &c, &err);
        TAP_EQ_INT(r, 0, "full config parses");
        if (r < 0) {
                printf("# %s\n", strna(err));
                return;
        }
        TAP_EQ_STR(c->platform, "aws", "platform");
        TAP_EQ_INT(c->role, CN_ROLE_CONTROL_PLANE, "role control-plane");
        TAP_EQ_STR(c->node_name, "n1", "nodeName");
        TAP_EQ_STR(c->metadata_endpoint, "http://127.0.0.1:1", "metadata.endpoint");
        TAP_EQ_STR(c->metadata_config_drive, "/cd", "metadata.configDrive");
        TAP_EQ_INT(c->metadata_timeout_usec, 60500000, "metadata.timeout as Go duration");
        TAP_EQ_INT(c->metadata_deadline_usec, 20000000, "metadata.deadline as integer seconds");
        TAP_EQ_INT(c->metadata_retries, 3, "metadata.retries");
        TAP_OK(c->metadata_require_imdsv2, "metadata.requireIMDSv2");
        TAP_EQ_STR(json_object_get_string(json_object_object_get(
                           json_object_object_get(c->cloud_config, "Global"), "n")),
                   "5", "cloudConfig scalar kept as string");
        TAP_EQ_STR(cn_json_string(c->cloud_config, "ServiceOverride", "1", "Service", NULL), "ec2",
                   "cloudConfig subsection kept");
        TAP_EQ_STR(c->images_path, "/i.json", "images path");
        TAP_EQ_INT(c->health_port, 1234, "healthPort");
}

static void test_defaults(void) {
        _cleanup_node_config_ CnNodeConfig *c = NULL;

        TAP_EQ_INT(parse("{}", &c, NULL), 0, "empty mapping parses");
        TAP_OK(c && !c->platform && c->role == CN_ROLE_WORKER, "defaults: detect platform, worker");
        TAP_OK(c && c->metadata_retries == (unsigned) -1 && c->metadata_timeout_usec == 0,
               "defaults: fetch policy left to the metadata module");
        TAP_EQ_STR(c ? c->images_path : NULL, CN_IMAGES_PATH, "default images path");
        TAP_EQ_INT(c ? c->health_port : 0, CN_HEALTH_PORT_DEFAULT, "default health port");
}

static void expect_error(const char *json, const char *want, const char *name) {
        _cleanup_node_config_ CnNodeConfig *c = NULL;
        _cleanup_free_ char *err = NULL;
        int r = parse(json, &c, &err);

        TAP_OK(r == -EINVAL && !c && err && strstr(err, want), "%s", name);
        if (err && !strstr(err, want))
                printf("# error was: %s\n", err);
}

int main(void) {
        test_full();
        test_defaults();
        expect_error("{\"platfrom\":\"aws\"}", "unknown key 'platfrom'", "unknown top-level key named");
        expect_error("{\"metadata\":{\"timout\":\"1s\"}}", "unknown key 'metadata.timout'",
                     "unknown nested key named with its path");
        expect_error("{\"role\":\"master\"}", "'role'", "invalid role rejected");
        expect_error("{\"platform\":\"vmware\"}", "unsupported platform 'vmware'", "unsupported platform");
        expect_error("{\"metadata\":{\"timeout\":\"5 parsecs\"}}", "metadata.timeout", "bad duration");
        expect_error("{\"metadata\":{\"retries\":-1}}", "metadata.retries", "negative retries");
        expect_error("{\"metadata\":{\"endpoint\":\"ftp://x\"}}", "metadata.endpoint", "non-http endpoint");
        expect_error("{\"cloudConfig\":{\"Glo]bal\":{}}}", "invalid section name", "INI-breaking section name");
        expect_error("{\"cloudConfig\":{\"Global\":{\"a=b\":\"x\"}}}", "invalid key name", "INI-breaking key");
        expect_error("{\"cloudConfig\":{\"Global\":{\"a\":[1]}}}", "must be a scalar", "non-scalar value");
        expect_error("{\"cloudConfig\":{\"S\":{\"1\":{\"a\":{}}}}}", "must be a scalar", "subsections do not nest");
        expect_error("{\"cloudConfig\":{\"S\":{\"1\":{\"a=b\":\"x\"}}}}", "invalid key name", "INI-breaking key "
                     "in a subsection");
        expect_error("{\"healthPort\":70000}", "healthPort", "port out of range");
        expect_error("[1]", "must be a mapping", "non-mapping document");
        return tap_done();
}
