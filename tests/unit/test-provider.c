/* SPDX-License-Identifier: Apache-2.0 */
/* Provider response parsers on the real API responses in $CN_FIXTURES/cloud-api (skipped when
 * absent), the error classification, and the machine-lifecycle calls that are declared but not
 * implemented yet. The lookups themselves run against tests/fake-cloud in
 * tests/integration/test-provider-lookup.py. */
#include <stdarg.h>
#include <sys/stat.h>

#include "fileio.h"
#include "http.h"
#include "json-util.h"
#include "provider-hetzner.h"
#include "provider-openstack.h"
#include "tap.h"

static const char *fixtures;

/* The fixtures are part of the tree (tests/data/fixtures): a missing one is a failure. */
static void skip(const char *what) {
        tap_ok(0, "%s: fixtures found under %s", what, fixtures);
}

static json_object *load(const char *rel) {
        _cleanup_free_ char *path = NULL;
        json_object *o = NULL;

        if (asprintf(&path, "%s/cloud-api/%s", fixtures, rel) < 0)
                abort();
        if (cn_json_parse_file(NULL, path, CN_JSON_MAX_SIZE, &o, NULL) < 0)
                return NULL;
        return o;
}

static char *fmt(const CnNodeAddressList *l) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        for (size_t i = 0; i < l->n; i++)
                fprintf(f, "%s%s=%s", i ? "," : "", cn_node_address_type_to_string(l->items[i].type),
                        l->items[i].address);
        fclose(f);
        return buf;
}

static void test_hetzner(void) {
        _cleanup_json_ json_object *one = load("hetzner/GET_v1_servers_id.json"), *list = load("hetzner/GET_v1_servers.json");
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL, *j = NULL, *k = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        if (!one || !list) {
                skip("hetzner: servers from the captured API responses");
                return;
        }
        TAP_EQ_INT(cn_provider_hetzner_parse_server(cn_json_get(one, "server", NULL), NULL, &i), 0,
                   "hetzner: GET /v1/servers/{id} parses");
        TAP_EQ_STR(i->provider_id, "hcloud://115493226", "hetzner: providerID as hcloud-cloud-controller-manager");
        TAP_EQ_STR(i->instance_type, cn_json_string(one, "server", "server_type", "name", NULL),
                   "hetzner: instance type is the server type's name");
        TAP_EQ_STR(i->region, "hel1", "hetzner: region is the location (top-level location of newer APIs)");
        TAP_EQ_STR(i->zone, "hel1", "hetzner: zone falls back to the location without a datacenter");
        a = fmt(&i->addresses);
        if (asprintf(&c, "ExternalIP=46.62.147.153,ExternalIP=2a01:4f9:c012:fa81::1,Hostname=%s",
                     cn_json_string(one, "server", "name", NULL)) < 0)
                abort();
        TAP_EQ_STR(a, c, "hetzner: public IPv4, first host of the IPv6 /64, name as Hostname");
        free(c);
        c = NULL;
        TAP_OK(!i->shutdown, "hetzner: running server is not shut down");

        json_object *s0 = json_object_array_get_idx(cn_json_get(list, "servers", NULL), 0);
        TAP_EQ_INT(cn_provider_hetzner_parse_server(s0, NULL, &j), 0, "hetzner: server from GET /v1/servers parses");
        b = fmt(&j->addresses);
        TAP_EQ_STR(b, "InternalIP=10.1.1.5,ExternalIP=1.2.3.4,ExternalIP=2001:db8::1,Hostname=my-server",
                   "hetzner: private network IP is the InternalIP");
        TAP_EQ_INT(cn_provider_hetzner_parse_server(s0, "9999", &k), 0, "hetzner: parse with another network");
        c = fmt(&k->addresses);
        TAP_EQ_STR(c, "ExternalIP=1.2.3.4,ExternalIP=2001:db8::1,Hostname=my-server",
                   "hetzner: only the configured network's IP is internal");
}

/* A test name with arguments, for the TAP_EQ_* macros (used before the next call). */
static const char *named(const char *fmt, ...) _printf_(1, 2);
static const char *named(const char *fmt, ...) {
        static char buf[256];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return buf;
}

static char *describe(json_object *server, const char *network) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        _cleanup_free_ char *a = NULL;
        char *out = NULL;
        int r = cn_provider_hetzner_parse_server(server, network, &i);

        if (r < 0)
                return asprintf(&out, "error %d", r) < 0 ? NULL : out;
        a = fmt(&i->addresses);
        if (asprintf(&out, "%s %s %s %s %s %s %d", i->provider_id, strna(i->name), strna(i->instance_type),
                     strna(i->region), strna(i->zone), strna(a), i->shutdown) < 0)
                return NULL;
        return out;
}

/* The instance lookup parses its answer with a filter: every captured answer gives the instance
 * the whole answer gives, with and without a network, and drops what is not read. */
static void test_hetzner_filtered(void) {
        static const char *const answers[] = { "hetzner/GET_v1_servers_id.json", "hetzner/GET_v1_servers.json" };

        for (size_t n = 0; n < ELEMENTSOF(answers); n++) {
                _cleanup_free_ char *path = NULL, *data = NULL;
                _cleanup_json_ json_object *whole = NULL, *kept = NULL;
                json_object *ws, *ks;
                size_t size;

                if (asprintf(&path, "%s/cloud-api/%s", fixtures, answers[n]) < 0)
                        abort();
                if (cn_read_file(NULL, path, CN_JSON_MAX_SIZE, &data, &size) < 0) {
                        skip("hetzner: filtered answers");
                        return;
                }
                TAP_EQ_INT(cn_json_parse(data, size, CN_JSON_MAX_SIZE, &whole, NULL), 0, named("%s parses whole", answers[n]));
                TAP_EQ_INT(cn_provider_hetzner_parse_server_answer(data, size, CN_JSON_MAX_SIZE, &kept, NULL), 0,
                           named("%s parses filtered", answers[n]));
                ws = cn_json_get(whole, "server", NULL);
                ks = cn_json_get(kept, "server", NULL);
                if (!ws) {
                        ws = json_object_array_get_idx(cn_json_get(whole, "servers", NULL), 0);
                        ks = json_object_array_get_idx(cn_json_get(kept, "servers", NULL), 0);
                }
                TAP_OK(ws && ks, "%s: a server in both", answers[n]);
                json_object *net = cn_json_get(json_object_array_get_idx(cn_json_get(ws, "private_net", NULL), 0),
                                               "network", NULL);
                for (size_t k = 0; k < (net ? 2U : 1U); k++) {
                        const char *network = k == 0 ? NULL : json_object_get_string(net);
                        _cleanup_free_ char *a = describe(ws, network), *b = describe(ks, network);

                        TAP_EQ_STR(b, a, named("%s: the same instance from the filtered answer (network %s)", answers[n],
                                                 strna(network)));
                }
                TAP_OK(cn_json_get(ws, "image", NULL) && !cn_json_get(ks, "image", NULL),
                       "%s: what is not read is not built", answers[n]);
        }
        {
                static const char err[] = "{\"error\":{\"code\":\"not_found\",\"message\":\"server not found\"}}";
                _cleanup_json_ json_object *e = NULL;

                TAP_EQ_INT(cn_provider_hetzner_parse_server_answer(err, strlen(err), CN_JSON_MAX_SIZE, &e, NULL), 0,
                           "hetzner: an error answer parses filtered");
                TAP_EQ_STR(cn_json_string(e, "error", "message", NULL), "server not found", "hetzner: its message is kept");
        }
        {
                static const char bad[] = "{\"server\":{\"id\":1,\"name\":\"x\"";
                _cleanup_json_ json_object *e = NULL;

                TAP_EQ_INT(cn_provider_hetzner_parse_server_answer(bad, strlen(bad), CN_JSON_MAX_SIZE, &e, NULL),
                           -EBADMSG, "hetzner: an answer cut short is one error");
        }
}

static void test_openstack(void) {
        _cleanup_json_ json_object *srv = load("openstack/GET_servers_id.json"), *tok = load("openstack/POST_v3_auth_tokens.json");
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        _cleanup_free_ char *a = NULL, *pid = NULL;

        if (!srv || !tok) {
                skip("openstack: server and token from the captured API responses");
                return;
        }
        TAP_EQ_INT(cn_provider_openstack_parse_server(cn_json_get(srv, "server", NULL), "RegionOne", &i), 0,
                   "openstack: GET /servers/{id} parses");
        if (asprintf(&pid, "openstack:///%s", cn_json_string(srv, "server", "id", NULL)) < 0)
                abort();
        TAP_EQ_STR(i->provider_id, pid, "openstack: providerID as the agent and openstack-cloud-controller-manager write it");
        TAP_EQ_STR(i->instance_type, "1", "openstack: flavor id without microversion 2.47");
        TAP_EQ_STR(i->zone, "nova", "openstack: zone is the availability zone");
        TAP_EQ_STR(i->region, "RegionOne", "openstack: region is the configured one");
        a = fmt(&i->addresses);
        free(pid);
        if (asprintf(&pid, "InternalIP=10.0.0.31,Hostname=%s", cn_json_string(srv, "server", "name", NULL)) < 0)
                abort();
        TAP_EQ_STR(a, pid, "openstack: fixed address is internal");
        TAP_OK(!i->shutdown, "openstack: ACTIVE is not shut down");

        TAP_EQ_STR(cn_provider_openstack_find_endpoint(tok, "compute", "public", "RegionOne"),
                   "http://127.0.0.1:8774/v2.1/a99e9b4e620e4db09a2dfb6e42a01e66", "openstack: compute endpoint from the catalog");
        TAP_OK(!cn_provider_openstack_find_endpoint(tok, "compute", "public", "RegionTwo"),
               "openstack: no endpoint for another region");
        TAP_EQ_STR(cn_provider_openstack_find_endpoint(tok, "identity", "public", NULL), "http://127.0.0.1:5000/v3",
                   "openstack: identity endpoint without region filter");
}

static void test_openstack_error_messages(void) {
        _cleanup_json_ json_object *nova = json_tokener_parse(
                "{\"itemNotFound\":{\"code\":404,\"message\":\"Instance x could not be found.\"}}");
        _cleanup_json_ json_object *octavia = json_tokener_parse(
                "{\"faultcode\":\"Client\",\"faultstring\":\"Load Balancer x is immutable and cannot be "
                "updated.\",\"debuginfo\":null}");
        _cleanup_json_ json_object *other = json_tokener_parse("{\"x\":1}");

        TAP_EQ_STR(cn_provider_openstack_error_message(nova), "Instance x could not be found.",
                   "openstack: a Nova error's message");
        TAP_EQ_STR(cn_provider_openstack_error_message(octavia), "Load Balancer x is immutable and cannot be updated.",
                   "openstack: an Octavia error's faultstring");
        TAP_OK(!cn_provider_openstack_error_message(other), "openstack: no message in another body");
}

static void test_openstack_shapes(void) {
        _cleanup_json_ json_object *s = json_tokener_parse(
                "{\"id\":\"u1\",\"name\":\"n1\",\"status\":\"SHUTOFF\",\"flavor\":{\"original_name\":\"m1.small\"},"
                "\"addresses\":{\"net\":[{\"addr\":\"fd00::5\",\"version\":6,\"OS-EXT-IPS:type\":\"fixed\"},"
                "{\"addr\":\"10.0.0.5\",\"version\":4,\"OS-EXT-IPS:type\":\"fixed\"},"
                "{\"addr\":\"203.0.113.9\",\"version\":4,\"OS-EXT-IPS:type\":\"floating\"}]}}");
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        _cleanup_free_ char *a = NULL;

        TAP_EQ_INT(cn_provider_openstack_parse_server(s, NULL, &i), 0, "openstack: dual-stack server parses");
        TAP_OK(i->shutdown, "openstack: SHUTOFF is shut down");
        TAP_EQ_STR(i->instance_type, "m1.small", "openstack: flavor original_name (2.47+) is the instance type");
        a = fmt(&i->addresses);
        TAP_EQ_STR(a, "InternalIP=fd00::5,InternalIP=10.0.0.5,ExternalIP=203.0.113.9,Hostname=n1",
                   "openstack: fixed internal, floating external");
}

static void test_malformed(void) {
        _cleanup_json_ json_object *h = json_tokener_parse("{\"id\":\"not-a-number\"}");
        _cleanup_json_ json_object *o = json_tokener_parse("{\"name\":\"x\"}");
        _cleanup_json_ json_object *bad_ip = json_tokener_parse(
                "{\"id\":1,\"name\":\"x\",\"public_net\":{\"ipv4\":{\"ip\":\"999.1.1.1\"}}}");
        CnProviderInstance *i = NULL;

        TAP_EQ_INT(cn_provider_hetzner_parse_server(h, NULL, &i), -EBADMSG, "hetzner: id of the wrong type is refused");
        TAP_EQ_INT(cn_provider_hetzner_parse_server(bad_ip, NULL, &i), -EBADMSG, "hetzner: malformed IP is refused");
        TAP_EQ_INT(cn_provider_openstack_parse_server(o, NULL, &i), -EBADMSG, "openstack: server without id is refused");
        TAP_OK(!i, "nothing is returned on error");
}

static void test_classes_and_lifecycle(void) {
        _cleanup_(cn_http_freep) CnHttp *http = NULL;
        _cleanup_(cn_provider_freep) CnProvider *p = NULL;
        _cleanup_json_ json_object *cfg = json_tokener_parse("{\"Global\":{\"token\":\"t\"}}");
        sd_event *e = NULL;
        _cleanup_free_ char *reason = NULL;

        TAP_EQ_INT(cn_provider_error_class(-ENOENT), CN_PROVIDER_NOT_FOUND, "404 is not-found");
        TAP_EQ_INT(cn_provider_error_class(-EACCES), CN_PROVIDER_TERMINAL, "401/403 are terminal");
        TAP_EQ_INT(cn_provider_error_class(-EINVAL), CN_PROVIDER_TERMINAL, "invalid input is terminal");
        TAP_EQ_INT(cn_provider_error_class(-EAGAIN), CN_PROVIDER_RETRYABLE, "429/5xx are retryable");
        TAP_EQ_INT(cn_provider_error_class(-ETIMEDOUT), CN_PROVIDER_RETRYABLE, "timeouts are retryable");

        assert(sd_event_new(&e) >= 0);
        assert(cn_http_new(e, &http) >= 0);
        TAP_EQ_INT(cn_provider_new("nosuchcloud", http, cfg, &p, NULL), -EPROTONOSUPPORT, "unknown provider is refused");
        TAP_EQ_INT(cn_provider_new("hetzner", http, NULL, &p, &reason), -EINVAL, "hetzner without a token is refused");
        TAP_OK(reason && strstr(reason, "HCLOUD_TOKEN"), "with a reason that says what to set");
        free(reason);
        reason = NULL;
        TAP_EQ_INT(cn_provider_new("openstack", http, cfg, &p, &reason), -EINVAL, "openstack without auth-url is refused");
        TAP_OK(reason && strstr(reason, "auth-url"), "with a reason naming auth-url");
        free(reason);
        reason = NULL;
        TAP_EQ_INT(cn_provider_new("hetzner", http, cfg, &p, NULL), 0, "hetzner with a token");
        TAP_EQ_INT(cn_provider_validate(p, cfg, &reason), -EINVAL,
                   "machine lifecycle: a spec without serverType is invalid");
        TAP_EQ_INT(cn_provider_machine_create(p, &(CnProviderMachine) { .name = "m" }, "", NULL, NULL, NULL), -EINVAL,
                   "machine lifecycle: create needs the machine's UID");
        TAP_EQ_INT(cn_provider_instance_metadata(p, &(CnProviderNodeRef) { .provider_id = "aws:///i-1" }, NULL, NULL, NULL),
                   -EINVAL, "a providerID of another cloud is refused at once");
        p = cn_provider_free(p);

        /* A Secret's settings are complete or refused: the process's own are never added. */
        assert(setenv("HCLOUD_TOKEN", "process-token", 1) == 0);
        TAP_EQ_INT(cn_provider_new("hetzner", http, NULL, &p, NULL), 0, "hetzner: HCLOUD_TOKEN completes a cloud config");
        p = cn_provider_free(p);
        TAP_EQ_INT(cn_provider_new_without_environment("hetzner", http, NULL, &p, NULL), -EINVAL,
                   "hetzner without the environment: a config without a token is refused");
        unsetenv("HCLOUD_TOKEN");
        assert(setenv("OS_AUTH_URL", "https://keystone.invalid/v3", 1) == 0);
        assert(setenv("OS_APPLICATION_CREDENTIAL_ID", "process-id", 1) == 0);
        assert(setenv("OS_APPLICATION_CREDENTIAL_SECRET", "process-secret", 1) == 0);
        TAP_EQ_INT(cn_provider_new_without_environment("openstack", http, NULL, &p, NULL), -EINVAL,
                   "openstack without the environment: OS_* do not complete a config");
        unsetenv("OS_AUTH_URL");
        unsetenv("OS_APPLICATION_CREDENTIAL_ID");
        unsetenv("OS_APPLICATION_CREDENTIAL_SECRET");
        http = cn_http_free(http);
        sd_event_unref(e);
}

static bool live_uid(const char *uid, void *userdata) {
        return streq(uid, userdata);
}

/* spec.providerID is set by whoever creates the object: the instance it names is relabelled only
 * when it is provably this object's. */
static void test_migration_check(void) {
        tap_ok(cn_provider_migration_check("old", NULL, NULL, "old", "new") == 0,
               "migration: the recorded UID may be relabelled");
        tap_ok(cn_provider_migration_check("old", live_uid, (void *) "other", "other", "new") == -CN_PROVIDER_EOWNED,
               "migration: another UID than the recorded one is refused");
        tap_ok(cn_provider_migration_check(NULL, live_uid, (void *) "other", "gone", "new") == 0,
               "migration: nothing recorded, the UID of no live object may be relabelled");
        tap_ok(cn_provider_migration_check(NULL, live_uid, (void *) "owner", "owner", "new") == -CN_PROVIDER_EOWNED,
               "migration: nothing recorded, a live object's UID is refused");
        tap_ok(cn_provider_migration_check(NULL, NULL, NULL, "gone", "new") == -CN_PROVIDER_EOWNED,
               "migration: nothing recorded and no way to tell live UIDs: refused");
        tap_ok(cn_provider_migration_check(NULL, live_uid, (void *) "x", NULL, "new") == -CN_PROVIDER_EOWNED,
               "migration: an instance without a UID label (no machine's) is refused");
        tap_ok(cn_provider_migration_check("old", live_uid, (void *) "new", "new", "new") == 1,
               "migration: an instance carrying the new UID is done already");
        tap_ok(cn_provider_error_class(-CN_PROVIDER_EOWNED) == CN_PROVIDER_TERMINAL,
               "migration: refusal is terminal");
}

int main(void) {
        struct stat st;

        fixtures = getenv("CN_FIXTURES") ?: "tests/data/fixtures";
        if (stat(fixtures, &st) < 0)
                printf("# fixtures not found at %s\n", fixtures);
        unsetenv("HCLOUD_TOKEN");
        unsetenv("OS_AUTH_URL");
        test_hetzner();
        test_hetzner_filtered();
        test_openstack();
        test_openstack_shapes();
        test_openstack_error_messages();
        test_malformed();
        test_classes_and_lifecycle();
        test_migration_check();
        return tap_done();
}
