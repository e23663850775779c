/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's providerSpec to cloudnode's provider spec and credentials: the field
 * mapping for hetzner and openstack, ConfigVar values (plain, value, secretKeyRef, configMapKeyRef,
 * the documented environment variables), and every refusal. */
#include <errno.h>
#include <string.h>

#include "json-util.h"
#include "mc-machine-spec.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

/* The objects the test "cluster" holds: Secret s1 {token, password, user}, ConfigMap c1 {sg}. */
typedef struct World {
        bool read;       /* false: every lookup asks for a read first */
        const char *env[16];
} World;

static int lookup(const McRef *ref, const char **ret, void *userdata) {
        static const struct {
                McRefKind kind;
                const char *name, *key, *value;
        } objects[] = {
                { MC_REF_SECRET, "s1", "token", "tok-from-secret" },
                { MC_REF_SECRET, "s1", "password", "pw-from-secret" },
                { MC_REF_SECRET, "s1", "user", "alice" },
                { MC_REF_CONFIGMAP, "c1", "sg", "external-ssh" },
        };
        World *w = userdata;

        if (!w->read)
                return -EAGAIN;
        for (size_t i = 0; i < ELEMENTSOF(objects); i++)
                if (objects[i].kind == ref->kind && streq(objects[i].name, ref->name) && streq(objects[i].key, ref->key)) {
                        *ret = objects[i].value;
                        return 0;
                }
        return -ENOENT;
}

static const char *env(const char *name, void *userdata) {
        World *w = userdata;

        for (size_t i = 0; w->env[i]; i += 2)
                if (streq(w->env[i], name))
                        return w->env[i + 1];
        return NULL;
}

/* The input of the last translation: a pending reference borrows its strings. */
static json_object *last_value;

static int translate(const char *value, World *w, McMachineSpec *ret, char **reason) {
        json_object_put(last_value);
        last_value = parse(value);
        return mc_machine_spec_translate(last_value, "kube-system", lookup, env, w, ret, reason);
}

static void expect_refused(const char *value, World *w, int error, const char *words, const char *name) {
        McMachineSpec s = {};
        _cleanup_free_ char *reason = NULL;
        int r = translate(value, w, &s, &reason);

        TAP_EQ_INT(r, error, name);
        if (!reason || !strstr(reason, words))
                printf("# reason: %s\n", reason ?: "(none)");
        TAP_OK(reason && strstr(reason, words), "%s: the reason says \"%s\"", name, words);
        TAP_OK(!reason || (!strstr(reason, "tok-from-secret") && !strstr(reason, "pw-from-secret")),
               "%s: no secret value in the reason", name);
        mc_machine_spec_done(&s);
}

#define HZ(os, extra) "{\"cloudProvider\":\"hetzner\",\"operatingSystem\":\"" os "\",\"cloudProviderSpec\":{" extra "}}"
#define TOKEN_REF "\"token\":{\"secretKeyRef\":{\"namespace\":\"kube-system\",\"name\":\"s1\",\"key\":\"token\"}}"

static void test_hetzner(void) {
        World w = { .read = false, .env = { "HCLOUD_ENDPOINT", "http://127.0.0.1:1/v1" } };
        McMachineSpec s = {};
        _cleanup_free_ char *reason = NULL;
        const char *full = HZ("ubuntu", TOKEN_REF ",\"serverType\":\"cx22\",\"location\":\"nbg1\","
                              "\"image\":\"ubuntu-22.04\",\"networks\":[\"1234\"],\"labels\":{\"my\":\"label\"},"
                              "\"assignPublicIPv4\":true,\"assignPublicIPv6\":{\"value\":true},"
                              "\"firewalls\":[],\"placementGroupPrefix\":\"\"");
        int r;

        r = translate(full, &w, &s, &reason);
        TAP_EQ_INT(r, -EAGAIN, "hetzner: a secretKeyRef not read yet asks for a read");
        TAP_OK(s.pending.kind == MC_REF_SECRET && streq(s.pending.name, "s1") && streq(s.pending.namespace, "kube-system"),
               "hetzner: and names the Secret to read");
        w.read = true;
        s = (McMachineSpec) {};
        r = translate(full, &w, &s, &reason);
        TAP_EQ_INT(r, 0, "hetzner: translated once read");
        TAP_EQ_STR(s.provider, "hetzner", "hetzner: provider");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "token", NULL), "tok-from-secret",
                   "hetzner: token from the secretKeyRef into [Global] token");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "endpoint", NULL), "http://127.0.0.1:1/v1",
                   "hetzner: the endpoint from HCLOUD_ENDPOINT, the operator's");
        TAP_EQ_STR(cn_json_string(s.spec, "serverType", NULL), "cx22", "hetzner: serverType");
        TAP_EQ_STR(cn_json_string(s.spec, "location", NULL), "nbg1", "hetzner: location");
        TAP_EQ_STR(cn_json_string(s.spec, "image", NULL), "ubuntu-22.04", "hetzner: image");
        TAP_EQ_STR(cn_json_string(s.spec, "labels", "my", NULL), "label", "hetzner: labels");
        TAP_EQ_INT(json_object_get_int64(json_object_array_get_idx(cn_json_get(s.spec, "networks", NULL), 0)), 1234,
                   "hetzner: network IDs as numbers, as the Hetzner API takes them");
        mc_machine_spec_done(&s);

        w.env[2] = "HZ_TOKEN", w.env[3] = "tok-from-env";
        r = translate(HZ("rockylinux", "\"serverType\":\"cx22\",\"datacenter\":\"fsn1-dc14\""), &w, &s, &reason);
        TAP_EQ_INT(r, 0, "hetzner: no token in the spec");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "token", NULL), "tok-from-env",
                   "hetzner: falls back to HZ_TOKEN");
        TAP_EQ_STR(cn_json_string(s.spec, "location", NULL), "fsn1", "hetzner: the retired datacenter becomes its location");
        TAP_EQ_STR(cn_json_string(s.spec, "image", NULL), "rocky-9", "hetzner: no image: the operating system's");
        mc_machine_spec_done(&s);
        w.env[2] = NULL;

        expect_refused(HZ("ubuntu", "\"serverType\":\"cx22\""), &w, -EINVAL, "HZ_TOKEN", "hetzner: no token anywhere");
        expect_refused(HZ("flatcar", TOKEN_REF ",\"serverType\":\"cx22\""), &w, -ENOTSUP,
                       "operating system flatcar is not supported on hetzner", "hetzner: flatcar");
        expect_refused(HZ("ubuntu", TOKEN_REF ",\"serverType\":\"cx22\",\"firewalls\":[\"fw\"]"), &w, -ENOTSUP,
                       "firewalls is not supported", "hetzner: a firewall is never silently dropped");
        expect_refused(HZ("ubuntu", TOKEN_REF ",\"serverType\":\"cx22\",\"assignPublicIPv4\":false"), &w, -ENOTSUP,
                       "assignPublicIPv4 false", "hetzner: no public IPv4");
        expect_refused(HZ("ubuntu", TOKEN_REF ",\"serverType\":\"cx22\",\"networks\":[\"my-net\"]"), &w, -ENOTSUP,
                       "Hetzner IDs, not names", "hetzner: network names");
        expect_refused(HZ("ubuntu", TOKEN_REF ",\"serverTyp\":\"cx22\""), &w, -EINVAL,
                       "serverTyp is not a hetzner setting", "hetzner: a misspelt key");
        expect_refused(HZ("ubuntu", "\"token\":{\"secretKeyRef\":{\"namespace\":\"default\",\"name\":\"s1\",\"key\":\"token\"}},"
                       "\"serverType\":\"cx22\""), &w, -EINVAL, "only Secrets and ConfigMaps of the Machine's namespace",
                       "hetzner: a Secret of another namespace is not read");
        expect_refused(HZ("ubuntu", "\"token\":{\"secretKeyRef\":{\"namespace\":\"kube-system\",\"name\":\"s1\",\"key\":\"nope\"}},"
                       "\"serverType\":\"cx22\""), &w, -ENOENT, "has no key nope", "hetzner: a missing key");
        expect_refused(HZ("ubuntu", TOKEN_REF ",\"serverType\":42"), &w, -EINVAL, "serverType must be a string",
                       "hetzner: a number where a string belongs");
        expect_refused("{\"cloudProvider\":\"aws\",\"operatingSystem\":\"ubuntu\",\"cloudProviderSpec\":{}}", &w, -ENOTSUP,
                       "cloudProvider aws is not served", "an unserved cloud");
        expect_refused("{\"cloudProvider\":\"hetzner\",\"cloudProviderSpec\":{}}", &w, -EINVAL,
                       "operatingSystem is required", "no operating system");
}

#define OS(extra) "{\"cloudProvider\":\"openstack\",\"operatingSystem\":\"ubuntu\",\"cloudProviderSpec\":{" \
        "\"image\":\"Ubuntu 24.04\",\"flavor\":\"m1.small\"" extra "}}"
#define OS_CREDS ",\"identityEndpoint\":\"https://keystone.example/v3\"," \
        "\"username\":{\"secretKeyRef\":{\"namespace\":\"kube-system\",\"name\":\"s1\",\"key\":\"user\"}}," \
        "\"password\":{\"secretKeyRef\":{\"namespace\":\"kube-system\",\"name\":\"s1\",\"key\":\"password\"}}," \
        "\"domainName\":\"Default\",\"tenantName\":\"old\",\"projectName\":\"demo\",\"region\":\"RegionOne\""

static void test_openstack(void) {
        World w = { .read = true };
        McMachineSpec s = {};
        _cleanup_free_ char *reason = NULL;
        int r;

        r = translate(OS(OS_CREDS ",\"securityGroups\":[{\"configMapKeyRef\":{\"namespace\":\"kube-system\",\"name\":\"c1\","
                         "\"key\":\"sg\"}},\"default\"],\"network\":\"\",\"availabilityZone\":\"\",\"floatingIpPool\":\"\","
                         "\"rootDiskSizeGB\":null,\"tags\":{\"team\":\"infra\"},\"computeAPIVersion\":\"2.67\","
                         "\"disablePortSecurity\":false,\"trustDevicePath\":false"),
                      &w, &s, &reason);
        if (r < 0)
                printf("# reason: %s\n", reason ?: "(none)");
        TAP_EQ_INT(r, 0, "openstack: translated");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "auth-url", NULL), "https://keystone.example/v3",
                   "openstack: identityEndpoint -> auth-url");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "username", NULL), "alice", "openstack: username from the Secret");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "password", NULL), "pw-from-secret",
                   "openstack: password from the Secret");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "domain-name", NULL), "Default", "openstack: domain-name");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "project-name", NULL), "demo",
                   "openstack: projectName wins over tenantName");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "region", NULL), "RegionOne", "openstack: region");
        TAP_EQ_STR(cn_json_string(s.spec, "flavor", NULL), "m1.small", "openstack: flavor");
        TAP_EQ_STR(cn_json_string(s.spec, "image", NULL), "Ubuntu 24.04", "openstack: image");
        TAP_OK(!cn_json_get(s.spec, "network", NULL) && !cn_json_get(s.spec, "availabilityZone", NULL),
               "openstack: empty network and zone are left to Nova");
        TAP_EQ_STR(json_object_get_string(json_object_array_get_idx(cn_json_get(s.spec, "securityGroups", NULL), 0)),
                   "external-ssh", "openstack: a security group from a configMapKeyRef");
        TAP_EQ_INT(json_object_array_length(cn_json_get(s.spec, "securityGroups", NULL)), 2,
                   "openstack: and the plain one");
        TAP_EQ_STR(cn_json_string(s.spec, "metadata", "team", NULL), "infra", "openstack: tags -> server metadata");
        mc_machine_spec_done(&s);

        w.env[0] = "OS_AUTH_URL", w.env[1] = "https://env-keystone/v3";
        w.env[2] = "OS_USER_NAME", w.env[3] = "bob";
        w.env[4] = "OS_PASSWORD", w.env[5] = "env-password";
        w.env[6] = "OS_TENANT_ID", w.env[7] = "p-123";
        r = translate(OS(""), &w, &s, &reason);
        TAP_EQ_INT(r, 0, "openstack: every credential from the environment");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "username", NULL), "bob", "openstack: OS_USER_NAME");
        TAP_EQ_STR(cn_json_string(s.cloud_config, "Global", "project-id", NULL), "p-123", "openstack: OS_TENANT_ID");
        mc_machine_spec_done(&s);

        expect_refused(OS(",\"identityEndpoint\":\"https://evil.example/v3\""), &w, -EINVAL,
                       "give both in the Machine", "openstack: the controller's password never goes to a Machine's endpoint");
        w.env[0] = NULL;
        expect_refused(OS(""), &w, -EINVAL, "no OpenStack identity endpoint", "openstack: no endpoint");
        expect_refused(OS(OS_CREDS ",\"floatingIpPool\":\"ext-net\""), &w, -ENOTSUP, "floatingIpPool is not supported",
                       "openstack: a floating IP pool is never silently dropped");
        expect_refused(OS(OS_CREDS ",\"rootDiskSizeGB\":20"), &w, -ENOTSUP, "rootDiskSizeGB",
                       "openstack: a root volume");
        expect_refused(OS(OS_CREDS ",\"networks\":[\"a\",\"b\"]"), &w, -ENOTSUP, "one network",
                       "openstack: two networks");
        expect_refused(OS(OS_CREDS ",\"securityGroups\":[{\"configMapKeyRef\":{\"namespace\":\"kube-system\","
                          "\"name\":\"c2\",\"key\":\"sg\"}}]"), &w, -ENOENT, "ConfigMap c2",
                       "openstack: a missing ConfigMap");
}

static void test_metric_labels(void) {
        _cleanup_json_ json_object *h = parse(
                "{\"spec\":{\"versions\":{\"kubelet\":\"1.33.4\"},\"providerSpec\":{\"value\":{\"cloudProvider\":"
                "\"hetzner\",\"operatingSystem\":\"ubuntu\",\"cloudProviderSpec\":{\"serverType\":\"cx22\","
                "\"location\":{\"value\":\"fsn1\"},\"token\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"t\"}}}}}}}");
        _cleanup_json_ json_object *o = parse(
                "{\"spec\":{\"providerSpec\":{\"value\":{\"cloudProvider\":\"openstack\",\"operatingSystem\":\"flatcar\","
                "\"cloudProviderSpec\":{\"flavor\":\"m1.small\",\"image\":\"ubuntu-24.04\",\"region\":"
                "{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"region\"}}}}}}}");
        _cleanup_json_ json_object *none = parse("{\"spec\":{\"providerSpec\":{\"value\":{}}}}");
        const char *v[MC_METRIC_LABELS_N + 1];

        TAP_EQ_STR(mc_metric_label_names[3], "size", "the fourth label is size");
        TAP_EQ_INT(mc_machine_metric_labels(h, v), 0, "hetzner: labels");
        TAP_OK(streq(v[0], "1.33.4") && streq(v[1], "hetzner") && streq(v[2], "ubuntu") && streq(v[3], "cx22") &&
               streq(v[4], "fsn1") && streq(v[5], "") && streq(v[6], "") && !v[7],
               "kubelet_version, provider, os, size (serverType), location (a ConfigVar's value)");
        TAP_EQ_INT(mc_machine_metric_labels(o, v), 0, "openstack: labels");
        TAP_OK(streq(v[0], "") && streq(v[1], "openstack") && streq(v[2], "flatcar") && streq(v[3], "m1.small") &&
               streq(v[4], "") && streq(v[5], "ubuntu-24.04") && streq(v[6], ""),
               "size (flavor), image; a region behind a secretKeyRef is not read for a metric");
        TAP_EQ_INT(mc_machine_metric_labels(none, v), -EINVAL, "no cloudProvider: not counted");
}

int main(void) {
        test_hetzner();
        test_openstack();
        test_metric_labels();
        TAP_OK(mc_operating_system_supported("openstack", "flatcar") && !mc_operating_system_supported("hetzner", "amzn2"),
               "operating systems as machine-controller offers them");
        json_object_put(last_value);
        return tap_done();
}
