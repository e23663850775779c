/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenStack machine lifecycle's pure parts: spec validation, the Nova create body, the neutral
 * instance view (also of the captured server in $CN_FIXTURES/cloud-api, skipped when absent),
 * fault classification, UID matching, metrics labels and the cloud config. The requests run
 * against tests/fake-cloud in tests/integration/test-controller-machines-openstack.py. */
#include <sys/stat.h>

#include "hash-util.h"
#include "http.h"
#include "json-util.h"
#include "provider-openstack.h"
#include "string-util.h"
#include "tap.h"

#define UID "0b7c6a52-2a0e-4b6f-9f0e-3f5d1c2b9a10"

static const char *fixtures;

static json_object *parse(const char *s) {
        json_object *o = json_tokener_parse(s);

        assert(o);
        return o;
}

static CnProvider *provider(sd_event **e, CnHttp **http) {
        _cleanup_json_ json_object *cfg = parse(
                "{\"Global\":{\"auth-url\":\"https://keystone.invalid/v3\",\"username\":\"demo\","
                "\"password\":\"s3cret\",\"tenant-name\":\"demo\",\"user-domain-name\":\"Default\","
                "\"region\":\"RegionOne\"}}");
        CnProvider *p = NULL;

        assert(sd_event_new(e) >= 0);
        assert(cn_http_new(*e, http) >= 0);
        assert(cn_provider_new("openstack", *http, cfg, &p, NULL) >= 0);
        return p;
}

static void expect_invalid(CnProvider *p, const char *spec, const char *needle, const char *what) {
        _cleanup_json_ json_object *s = json_tokener_parse(spec); /* "null" is NULL */
        _cleanup_free_ char *reason = NULL;

        TAP_EQ_INT(cn_provider_validate(p, s, &reason), -EINVAL, what);
        TAP_OK(reason && strstr(reason, needle), "%s: the reason names %s (%s)", what, needle, reason ?: "(none)");
}

static void test_validate(CnProvider *p) {
        _cleanup_json_ json_object *good = parse(
                "{\"flavor\":\"m1.small\",\"image\":\"ubuntu-24.04\","
                "\"network\":\"5b0c3f6e-9c1d-4d6a-8f43-0a1e2b3c4d5e\",\"availabilityZone\":\"nova\","
                "\"securityGroups\":[\"default\",\"k8s\"],\"keyName\":\"ops\","
                "\"metadata\":{\"team\":\"infra\",\"cost:center\":\"a b/c\"}}");
        _cleanup_json_ json_object *defaulted = NULL;
        _cleanup_free_ char *reason = NULL;
        _cleanup_strv_free_ char **labels = NULL;
        char spec[8192];
        int n;

        TAP_EQ_INT(cn_provider_add_defaults(p, good, &defaulted), 0, "add_defaults copies the spec");
        TAP_OK(defaulted && defaulted != good && cn_json_equal(defaulted, good), "into a new object, unchanged");
        TAP_EQ_INT(cn_provider_validate(p, defaulted, &reason), 0, "a spec with every field validates");
        TAP_OK(!reason, "without a reason");

        expect_invalid(p, "{\"image\":\"x\"}", "flavor", "missing flavor");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"\"}", "image", "empty image");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"network\":\"private\"}", "UUID",
                       "a network name (Neutron is not asked)");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"availabilityZone\":7}", "availabilityZone",
                       "a zone that is not a string");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"securityGroups\":\"default\"}", "securityGroups",
                       "security groups not a list");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"securityGroups\":[\"\"]}", "securityGroups[0]",
                       "an empty security group name");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"keyName\":\"\"}", "keyName", "an empty key name");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"metadata\":[]}", "metadata", "metadata not a map");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"metadata\":{\"a\":1}}", "metadata.a",
                       "a metadata value that is not a string");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"metadata\":{\"a*b\":\"1\"}}", "a*b",
                       "a metadata key Nova refuses");
        expect_invalid(p, "{\"flavor\":\"m1.small\",\"image\":\"x\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL
                          "\":\"x\"}}",
                       CN_PROVIDER_MACHINE_UID_LABEL, "metadata that sets the machine UID key");
        n = snprintf(spec, sizeof(spec), "{\"flavor\":\"m1.small\",\"image\":\"x\",\"metadata\":{");
        for (int i = 0; i < 128; i++)
                n += snprintf(spec + n, sizeof(spec) - n, "%s\"k%d\":\"v\"", i ? "," : "", i);
        snprintf(spec + n, sizeof(spec) - n, "}}");
        expect_invalid(p, spec, "more than 127", "128 metadata items (with the UID one more than Nova's quota)");
        expect_invalid(p, "null", "missing", "no spec");

        TAP_EQ_INT(cn_provider_metrics_labels(p, good, &labels), 0, "metrics labels");
        TAP_OK(labels && strv_length(labels) == 4 && streq(labels[0], "size") && streq(labels[1], "m1.small") &&
                       streq(labels[2], "zone") && streq(labels[3], "nova"),
               "size is the flavor, zone the availability zone");
}

static void test_body(void) {
        _cleanup_json_ json_object *spec = parse(
                "{\"flavor\":\"m1.small\",\"image\":\"img-1\",\"network\":\"5b0c3f6e-9c1d-4d6a-8f43-0a1e2b3c4d5e\","
                "\"availabilityZone\":\"az1\",\"securityGroups\":[\"default\",\"k8s\"],\"keyName\":\"ops\","
                "\"metadata\":{\"team\":\"infra\"}}");
        _cleanup_json_ json_object *minimal = parse("{\"flavor\":\"2\",\"image\":\"img-1\"}");
        _cleanup_json_ json_object *body = NULL, *body2 = NULL, *expect = NULL;
        _cleanup_free_ void *decoded = NULL;
        _cleanup_free_ char *big = NULL;
        CnProviderMachine m = { .name = "m1", .namespace = "default", .uid = UID, .spec = spec };
        const char *ud;
        size_t size;

        TAP_EQ_INT(cn_provider_openstack_server_body(&m, "#cloud-config\nhostname: m1\n", &body), 0, "create body");
        expect = parse("{\"server\":{\"name\":\"m1\",\"flavorRef\":\"m1.small\",\"imageRef\":\"img-1\","
                       "\"availability_zone\":\"az1\",\"key_name\":\"ops\","
                       "\"networks\":[{\"uuid\":\"5b0c3f6e-9c1d-4d6a-8f43-0a1e2b3c4d5e\"}],"
                       "\"security_groups\":[{\"name\":\"default\"},{\"name\":\"k8s\"}],"
                       "\"metadata\":{\"team\":\"infra\",\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"" UID "\"},"
                       "\"user_data\":\"I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogbTEK\"}}");
        TAP_OK(body && cn_json_equal(body, expect), "Nova's field names, the UID in the metadata, user_data base64: %s",
               body ? json_object_to_json_string(body) : "(none)");
        ud = cn_json_string(body, "server", "user_data", NULL);
        TAP_OK(ud && cn_base64_decode(ud, strlen(ud), &decoded, &size) >= 0 && size == 27 &&
                       memcmp(decoded, "#cloud-config\nhostname: m1\n", 27) == 0,
               "user_data decodes to the bootstrap data");
        TAP_EQ_STR(cn_json_string(spec, "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL), NULL,
                   "the spec's own metadata is left alone");

        m.spec = minimal;
        TAP_EQ_INT(cn_provider_openstack_server_body(&m, NULL, &body2), 0, "create body of a minimal spec");
        TAP_EQ_STR(cn_json_string(body2, "server", "networks", NULL), "auto", "no network: \"auto\" (required since 2.37)");
        TAP_OK(!cn_json_get(body2, "server", "security_groups", NULL) && !cn_json_get(body2, "server", "user_data", NULL) &&
                       !cn_json_get(body2, "server", "availability_zone", NULL),
               "and nothing that was not asked for");
        TAP_EQ_STR(cn_json_string(body2, "server", "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL), UID,
                   "the UID is always there");

        big = malloc(50000);
        assert(big);
        memset(big, 'x', 49999);
        big[49999] = 0;
        json_object_put(body2);
        body2 = NULL;
        TAP_EQ_INT(cn_provider_openstack_server_body(&m, big, &body2), -E2BIG,
                   "user data over Nova's 65535 base64 bytes is refused before any request");
        m.uid = NULL;
        TAP_EQ_INT(cn_provider_openstack_server_body(&m, NULL, &body2), -EINVAL, "no body without the UID");
}

static void test_view(void) {
        _cleanup_json_ json_object *active = parse(
                "{\"id\":\"c1\",\"name\":\"m1\",\"status\":\"ACTIVE\",\"metadata\":{},"
                "\"addresses\":{\"private\":[{\"version\":4,\"addr\":\"10.0.0.5\",\"OS-EXT-IPS:type\":\"fixed\"},"
                "{\"version\":4,\"addr\":\"203.0.113.7\",\"OS-EXT-IPS:type\":\"floating\"}]}}");
        _cleanup_json_ json_object *building = parse("{\"id\":\"c2\",\"name\":\"m2\",\"status\":\"BUILD\",\"addresses\":{}}");
        _cleanup_json_ json_object *created = parse("{\"id\":\"c3\",\"links\":[],\"adminPass\":\"x\"}");
        _cleanup_json_ json_object *novalid = parse(
                "{\"id\":\"c4\",\"status\":\"ERROR\",\"fault\":{\"code\":500,\"message\":\"No valid host was found. \"}}");
        _cleanup_json_ json_object *refused = parse(
                "{\"id\":\"c5\",\"status\":\"ERROR\",\"fault\":{\"code\":400,\"message\":\"Image is not active\"}}");
        _cleanup_json_ json_object *v = NULL, *v2 = NULL, *v3 = NULL, *expect = NULL;
        const char *msg = NULL;

        TAP_EQ_INT(cn_provider_openstack_machine_view(active, &v, NULL), 0, "view of an ACTIVE server");
        expect = parse("{\"id\":\"c1\",\"providerID\":\"openstack:///c1\",\"state\":\"ACTIVE\",\"ready\":true,"
                       "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},"
                       "{\"type\":\"ExternalIP\",\"address\":\"203.0.113.7\"},{\"type\":\"Hostname\",\"address\":\"m1\"}]}");
        TAP_OK(v && cn_json_equal(v, expect), "id, providerID openstack:///<id>, ready, addresses: %s",
               v ? json_object_to_json_string(v) : "(none)");
        TAP_EQ_INT(cn_provider_openstack_machine_view(building, &v2, NULL), 0, "view of a BUILD server");
        TAP_OK(v2 && !json_object_get_boolean(json_object_object_get(v2, "ready")), "is not ready");
        TAP_EQ_INT(cn_provider_openstack_machine_view(created, &v3, NULL), 0, "view of the create response");
        TAP_EQ_STR(cn_json_string(v3, "state", NULL), "BUILD", "which has no status: being built");
        TAP_EQ_STR(cn_json_string(v3, "providerID", NULL), "openstack:///c3", "with its providerID");

        TAP_EQ_INT(cn_provider_openstack_machine_view(novalid, &v, &msg), -EAGAIN, "ERROR with a 5xx fault");
        TAP_EQ_INT(cn_provider_error_class(-EAGAIN), CN_PROVIDER_RETRYABLE, "is retryable");
        TAP_EQ_STR(msg, "No valid host was found. ", "with Nova's fault message");
        TAP_EQ_INT(cn_provider_openstack_machine_view(refused, &v, &msg), -EINVAL, "ERROR with a 4xx fault");
        TAP_EQ_INT(cn_provider_error_class(-EINVAL), CN_PROVIDER_TERMINAL, "is terminal");
        TAP_EQ_STR(msg, "Image is not active", "with Nova's fault message");
}

static void test_fixture_view(void) {
        _cleanup_free_ char *path = NULL, *pid = NULL;
        _cleanup_json_ json_object *srv = NULL, *v = NULL;

        if (asprintf(&path, "%s/cloud-api/openstack/GET_servers_id.json", fixtures) < 0)
                abort();
        if (cn_json_parse_file(NULL, path, CN_JSON_MAX_SIZE, &srv, NULL) < 0) {
                tap_ok(0, "captured Nova server view found under %s", fixtures);
                return;
        }
        TAP_EQ_INT(cn_provider_openstack_machine_view(cn_json_get(srv, "server", NULL), &v, NULL), 0,
                   "captured Nova server: view");
        if (asprintf(&pid, "openstack:///%s", cn_json_string(srv, "server", "id", NULL)) < 0)
                abort();
        TAP_EQ_STR(cn_json_string(v, "providerID", NULL), pid, "captured Nova server: providerID");
        TAP_EQ_STR(cn_json_string(v, "state", NULL), cn_json_string(srv, "server", "status", NULL),
                   "captured Nova server: state is Nova's status");
}

static void test_match(void) {
        _cleanup_json_ json_object *list = parse(
                "[{\"id\":\"a\",\"status\":\"ACTIVE\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"other\"}},"
                "{\"id\":\"b\",\"status\":\"ACTIVE\",\"metadata\":{}},"
                "{\"id\":\"c\",\"status\":\"BUILD\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"" UID "\"}},"
                "{\"id\":\"d\",\"status\":\"SOFT_DELETED\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"" UID "\"}}]");
        _cleanup_json_ json_object *two = parse(
                "[{\"id\":\"c\",\"status\":\"ACTIVE\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"" UID "\"}},"
                "{\"id\":\"e\",\"status\":\"ERROR\",\"metadata\":{\"" CN_PROVIDER_MACHINE_UID_LABEL "\":\"" UID "\"}}]");
        json_object *found = NULL;

        TAP_EQ_INT(cn_provider_openstack_match_uid(list, UID, &found), 1,
                   "one match: a same-named server of another machine, one without metadata and a "
                   "soft-deleted one do not count");
        TAP_EQ_STR(cn_json_string(found, "id", NULL), "c", "the match is the server with the UID");
        TAP_EQ_INT(cn_provider_openstack_match_uid(two, UID, NULL), 2, "two servers with one UID are both counted");
        TAP_EQ_INT(cn_provider_openstack_match_uid(NULL, UID, &found), 0, "no list, no match");
        TAP_OK(!found, "and nothing returned");
}

static void test_cloud_config(CnProvider *p) {
        _cleanup_json_ json_object *cc = NULL;
        _cleanup_free_ char *text = NULL;

        TAP_EQ_INT(cn_provider_cloud_config(p, NULL, &cc), 0, "cloud config");
        TAP_EQ_STR(cn_json_string(cc, "Global", "auth-url", NULL), "https://keystone.invalid/v3", "[Global] auth-url");
        TAP_EQ_STR(cn_json_string(cc, "Global", "region", NULL), "RegionOne", "[Global] region");
        TAP_EQ_STR(cn_json_string(cc, "Global", "project-name", NULL), "demo",
                   "tenant-name is written as project-name");
        TAP_OK(!cn_json_get(cc, "Global", "tenant-name", NULL), "no alias twice");
        text = strdup(json_object_to_json_string(cc));
        TAP_OK(text && !strstr(text, "s3cret") && !strstr(text, "\"username\"") && !strstr(text, "user-domain"),
               "neither the secret nor the management cluster's user: %s", strna(text));
}

static void test_calls_refused(CnProvider *p) {
        _cleanup_json_ json_object *spec = parse("{\"flavor\":\"2\",\"image\":\"i\"}");

        TAP_EQ_INT(cn_provider_machine_create(p, &(CnProviderMachine) { .name = "m", .spec = spec }, "", NULL, NULL, NULL),
                   -EINVAL, "create needs the machine's UID");
        TAP_EQ_INT(cn_provider_machine_get(p, &(CnProviderMachine) { .uid = UID }, NULL, NULL, NULL), -EINVAL,
                   "get needs the machine's name (servers are listed by it)");
        TAP_EQ_INT(cn_provider_migrate_uid(p, &(CnProviderMachine) { .uid = UID, .provider_id = "openstack:///s1" }, "",
                                           NULL, NULL, NULL),
                   -EINVAL, "migrate_uid needs the new UID");
        TAP_EQ_INT(cn_provider_migrate_uid(p, &(CnProviderMachine) { .name = "m", .uid = UID }, "u2", NULL, NULL, NULL),
                   -EINVAL, "migrate_uid needs the server (providerID)");
        TAP_EQ_INT(cn_provider_migrate_uid(p, &(CnProviderMachine) { .provider_id = "hcloud://42" }, "u2", NULL, NULL,
                                           NULL),
                   -EINVAL, "migrate_uid refuses another cloud's providerID");
        TAP_EQ_STR(cn_provider_openstack_server_id("openstack:///abc", false), "abc", "server id of openstack:///<id>");
        TAP_EQ_STR(cn_provider_openstack_server_id("openstack://RegionOne/abc", false), "abc",
                   "server id of the region form");
        TAP_EQ_STR(cn_provider_openstack_server_id("abc", true), "abc", "a bare id where allowed");
        TAP_OK(!cn_provider_openstack_server_id("abc", false), "but not as a providerID");
        TAP_OK(!cn_provider_openstack_server_id("openstack:///", true), "an empty id is none");
}

int main(void) {
        _cleanup_(cn_provider_freep) CnProvider *p = NULL;
        CnHttp *http = NULL;
        sd_event *e = NULL;
        struct stat st;

        fixtures = getenv("CN_FIXTURES") ?: "tests/data/fixtures";
        if (stat(fixtures, &st) < 0)
                printf("# fixtures not found at %s\n", fixtures);
        unsetenv("OS_AUTH_URL");
        p = provider(&e, &http);
        test_validate(p);
        test_body();
        test_view();
        test_fixture_view();
        test_match();
        test_cloud_config(p);
        test_calls_refused(p);
        p = cn_provider_free(p);
        cn_http_free(http);
        sd_event_unref(e);
        return tap_done();
}
