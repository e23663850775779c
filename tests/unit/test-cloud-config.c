/* SPDX-License-Identifier: Apache-2.0 */
#include "cloud-config.h"
#include "tap.h"

static void test_parse(void) {
        static const char text[] =
                "# OpenStack cloud.conf as openstack-cloud-controller-manager reads it\n"
                "[Global]\n"
                "auth-url = https://keystone.example.com:5000/v3\n"
                "username=admin   ; trailing comment\n"
                "password = \"se;cr\\\"et # not a comment\"\n"
                "region=RegionOne\n"
                "\n"
                "[LoadBalancer]\n"
                "use-octavia = true\n"
                "[global]\n"
                "region = RegionTwo\n";
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *err = NULL;

        TAP_EQ_INT(cn_cloud_config_parse(text, strlen(text), &cfg, &err), 0, "cloud.conf parses");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "auth-url"), "https://keystone.example.com:5000/v3", "plain value");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "username"), "admin", "comment after a value is dropped");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "password"), "se;cr\"et # not a comment",
                   "quoted value keeps comment characters and unescapes quotes");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "GLOBAL", "region"), "RegionTwo",
                   "sections merge case-insensitively, last value wins");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "LoadBalancer", "use-octavia"), "true", "other sections are kept");
        TAP_OK(!cn_cloud_config_get(cfg, "Global", "missing"), "missing key is NULL");
}

static void test_errors(void) {
        static const struct {
                const char *text, *error;
        } bad[] = {
                { "key = value\n", "line 1: setting outside of a section" },
                { "[Global\n", "line 1: malformed section header" },
                { "[Global]\nnot a setting\n", "line 2: expected key = value" },
                { "[Global]\npassword = \"open\n", "line 2: malformed quoted value" },
                { "[Global]\nx = \"a\\q\"\n", "line 2: malformed quoted value" },
                { "[Global]\nbad key = 1\n", "line 2: invalid character in key" },
                { "[ServiceOverride 1]\n", "line 1: unsupported section name" },
                { "[ServiceOverride \"a\"b\"]\n", "line 1: unsupported section name" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *cfg = NULL;
                _cleanup_free_ char *err = NULL;

                TAP_EQ_INT(cn_cloud_config_parse(bad[i].text, strlen(bad[i].text), &cfg, &err), -EBADMSG,
                           "malformed cloud.conf is refused");
                TAP_EQ_STR(err, bad[i].error, "with a message naming the line");
        }
}

static void test_subsection(void) {
        static const char text[] = "[Global]\nZone = us-east-1a\n[ServiceOverride \"1\"]\nService = ec2\n"
                                   "URL = https://ec2.example.com\n";
        _cleanup_json_ json_object *cfg = NULL;

        TAP_EQ_INT(cn_cloud_config_parse(text, strlen(text), &cfg, NULL), 0, "gcfg subsections parse");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "ServiceOverride \"1\"", "URL"), "https://ec2.example.com",
                   "a subsection is a section named with its quoted name");
}

static void test_node_config_shape(void) {
        _cleanup_json_ json_object *cfg = json_tokener_parse("{\"Global\":{\"region\":\"r\",\"port\":5000,\"x\":null}}");

        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "port"), "5000", "scalars of the node config read as text");
        TAP_OK(!cn_cloud_config_get(cfg, "Global", "x"), "null is absent");
        TAP_OK(!cn_cloud_config_get(NULL, "Global", "region"), "no config at all is fine");
}

int main(void) {
        test_parse();
        test_errors();
        test_subsection();
        test_node_config_shape();
        return tap_done();
}
