/* SPDX-License-Identifier: Apache-2.0 */
/* The Cluster API infrastructure cluster contract decisions and status patches of
 * cloudnode-controller, and the Hetzner provider's failure domains, server ids and cloud config. */
#include <string.h>

#include "cloud-config.h"
#include "cluster-reconcile.h"
#include "machine-reconcile.h"
#include "hash-util.h"
#include "http.h"
#include "json-util.h"
#include "kube-config.h"
#include "machine-credentials.h"
#include "provider-hetzner.h"
#include "provider-openstack.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

#define OWNED "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Cluster\",\"name\":\"c1\"}]"
#define MACHINE_OWNED "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"name\":\"m\"}]"
#define FIN "\"finalizers\":[\"" CN_CLUSTER_FINALIZER "\"]"
#define DELETING "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\""

static void test_steps(void) {
        _cleanup_json_ json_object *bare = parse("{\"metadata\":{\"name\":\"x\"}}");
        _cleanup_json_ json_object *fin = parse("{\"metadata\":{\"name\":\"x\"," FIN "}}");
        _cleanup_json_ json_object *wrong_owner = parse("{\"metadata\":{\"name\":\"x\"," FIN "," MACHINE_OWNED "}}");
        _cleanup_json_ json_object *owned = parse("{\"metadata\":{\"name\":\"x\"," FIN "," OWNED "}}");
        _cleanup_json_ json_object *anno = parse("{\"metadata\":{\"name\":\"x\"," FIN "," OWNED ","
                                                 "\"annotations\":{\"cluster.x-k8s.io/paused\":\"\"}}}");
        _cleanup_json_ json_object *deleting = parse("{\"metadata\":{\"name\":\"x\"," DELETING "," FIN "}}");
        _cleanup_json_ json_object *deleted = parse("{\"metadata\":{\"name\":\"x\"," DELETING "}}");
        _cleanup_json_ json_object *cluster = parse("{\"spec\":{}}");
        _cleanup_json_ json_object *paused = parse("{\"spec\":{\"paused\":true}}");

        TAP_EQ_INT(cn_cluster_next_step(bare, NULL), CN_CLUSTER_ADD_FINALIZER, "finalizer first");
        TAP_EQ_INT(cn_cluster_next_step(fin, NULL), CN_CLUSTER_WAIT_OWNER, "waits for an owner reference");
        TAP_EQ_INT(cn_cluster_next_step(wrong_owner, cluster), CN_CLUSTER_WAIT_OWNER,
                   "an owner of another kind is not the Cluster");
        TAP_EQ_INT(cn_cluster_next_step(owned, NULL), CN_CLUSTER_WAIT_OWNER, "waits for the owner in the cache");
        TAP_EQ_INT(cn_cluster_next_step(owned, cluster), CN_CLUSTER_PROVISION, "provisions once owned");
        TAP_EQ_INT(cn_cluster_next_step(owned, paused), CN_CLUSTER_PAUSED, "paused Cluster");
        TAP_EQ_INT(cn_cluster_next_step(anno, cluster), CN_CLUSTER_PAUSED, "paused annotation");
        TAP_EQ_INT(cn_cluster_next_step(deleting, NULL), CN_CLUSTER_REMOVE_FINALIZER,
                   "deletion is not blocked by a missing Cluster");
        TAP_EQ_INT(cn_cluster_next_step(deleted, NULL), CN_CLUSTER_GONE, "deleting without our finalizer");
        TAP_EQ_STR(cn_cluster_owner_name(owned), "c1", "owner name");
        TAP_EQ_STR(cn_cluster_step_to_string(CN_CLUSTER_PROVISION), "provision", "step names");
}

static const char *cond(json_object *patch, const char *type, const char *key) {
        json_object *l = cn_json_get(patch, "status", "conditions", NULL);

        for (size_t i = 0; l && i < json_object_array_length(l); i++) {
                json_object *c = json_object_array_get_idx(l, i);

                if (streq(strempty(cn_json_string(c, "type", NULL)), type))
                        return cn_json_string(c, key, NULL);
        }
        return NULL;
}

static void test_status_patch(void) {
        _cleanup_json_ json_object *fresh = parse("{\"metadata\":{\"name\":\"x\"}}");
        _cleanup_json_ json_object *fds = parse("[{\"name\":\"fsn1\",\"controlPlane\":true,\"attributes\":{}}]");
        _cleanup_json_ json_object *p = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL, *p5 = NULL;
        _cleanup_json_ json_object *provisioned = NULL, *failed_later = NULL;
        const char *now = "2026-11-22T05:00:00Z", *later = "2026-11-22T06:00:00Z";

        TAP_EQ_INT(cn_cluster_status_patch(fresh, fds, 1, false, NULL, NULL, now, &p), 0, "provisioned patch");
        TAP_OK(cn_capi_is_true(p, "status", "initialization", "provisioned", NULL), "v1beta2 initialization.provisioned");
        TAP_OK(cn_capi_is_true(p, "status", "ready", NULL), "v1beta1 ready");
        TAP_OK(cn_json_equal(cn_json_get(p, "status", "failureDomains", NULL), fds), "failure domains as a list");
        TAP_EQ_STR(cond(p, "Ready", "status"), "True", "Ready=True");
        TAP_EQ_STR(cond(p, "Ready", "reason"), "Provisioned", "with a reason");
        TAP_EQ_STR(cond(p, "Paused", "status"), "False", "Paused=False");
        TAP_EQ_STR(cond(p, "Ready", "lastTransitionTime"), now, "transition time");
        TAP_OK(!cn_json_get(p, "spec", NULL), "spec (controlPlaneEndpoint) is never written");

        /* The live object after that write. */
        provisioned = parse("{\"metadata\":{\"name\":\"x\"}}");
        assert(cn_json_set(provisioned, json_object_get(cn_json_get(p, "status", NULL)), "status", NULL) == 0);
        TAP_EQ_INT((int) json_object_get_int64(cn_json_get(p, "status", "observedGeneration", NULL)), 1,
                   "observedGeneration");
        TAP_EQ_INT(cn_cluster_status_patch(provisioned, fds, 1, false, NULL, NULL, later, &p2), 0, "again");
        TAP_OK(!p2, "nothing to write when the live status says it already");
        {
                _cleanup_json_ json_object *p6 = NULL;
                json_object *rec = NULL;

                TAP_EQ_INT(cn_cluster_recorded_failure_domains(provisioned, &rec), -ENOENT,
                           "recorded failure domains of another generation are not reused");
                assert(cn_json_set(provisioned, json_object_new_int64(1), "metadata", "generation", NULL) == 0);
                TAP_EQ_INT(cn_cluster_recorded_failure_domains(provisioned, &rec), 0, "those of this generation are");
                TAP_OK(cn_json_equal(rec, fds), "as written");
                TAP_EQ_INT(cn_cluster_status_patch(provisioned, fds, 2, false, NULL, NULL, later, &p6), 0,
                           "a new generation");
                TAP_EQ_INT((int) json_object_get_int64(cn_json_get(p6, "status", "observedGeneration", NULL)), 2,
                           "is observed");
        }

        TAP_EQ_INT(cn_cluster_status_patch(provisioned, NULL, 1, false, "Unauthorized", "token rejected", later, &p3), 0,
                   "a later failure");
        TAP_EQ_STR(cond(p3, "Ready", "status"), "False", "shows as Ready=False");
        TAP_EQ_STR(cond(p3, "Ready", "reason"), "Unauthorized", "with its reason");
        TAP_EQ_STR(cond(p3, "Ready", "lastTransitionTime"), later, "and a new transition time");
        TAP_EQ_STR(cond(p3, "Paused", "lastTransitionTime"), now, "an unchanged condition keeps its time");
        TAP_OK(!cn_json_get(p3, "status", "initialization", NULL), "provisioned is never taken back");

        failed_later = parse("{\"metadata\":{\"name\":\"x\"}}");
        assert(cn_json_set(failed_later, json_object_get(cn_json_get(p3, "status", NULL)), "status", NULL) == 0);
        TAP_EQ_INT(cn_cluster_status_patch(failed_later, NULL, 1, true, NULL, NULL, later, &p4), 0, "paused");
        TAP_EQ_STR(cond(p4, "Paused", "status"), "True", "Paused=True");
        TAP_EQ_STR(cond(p4, "Ready", "reason"), "Unauthorized", "Ready left as it was");
        TAP_EQ_INT(cn_cluster_status_patch(fresh, NULL, 1, false, "WaitingForCluster", "no owner", now, &p5), 0, "waiting");
        TAP_EQ_STR(cond(p5, "Ready", "reason"), "WaitingForCluster", "waiting reason");
        TAP_OK(!cn_json_get(p5, "status", "ready", NULL), "waiting does not claim readiness");
}

static void test_hetzner_failure_domains(void) {
        _cleanup_json_ json_object *locs = parse(
                "[{\"id\":1,\"name\":\"fsn1\",\"network_zone\":\"eu-central\",\"country\":\"DE\",\"city\":\"Falkenstein\"},"
                "{\"id\":2,\"name\":\"nbg1\",\"network_zone\":\"eu-central\",\"country\":\"DE\",\"city\":\"Nuremberg\"},"
                "{\"id\":4,\"name\":\"ash\",\"network_zone\":\"us-east\",\"country\":\"US\",\"city\":\"Ashburn, VA\"}]");
        _cleanup_json_ json_object *bad = parse("[{\"id\":1}]"), *notlist = parse("{}");
        _cleanup_json_ json_object *all = NULL, *eu = NULL, *one = NULL, *none = NULL, *x = NULL;

        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(locs, NULL, &all), 0, "all locations");
        TAP_EQ_INT((int) json_object_array_length(all), 3, "three");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(all, 0), "name", NULL), "fsn1", "named by location");
        TAP_OK(cn_capi_is_true(json_object_array_get_idx(all, 0), "controlPlane", NULL), "usable by the control plane");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(all, 2), "attributes", "networkZone", NULL), "us-east",
                   "network zone attribute");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(all, 2), "attributes", "city", NULL), "Ashburn, VA",
                   "city attribute");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(locs, "eu-central", &eu), 0, "a network zone as region");
        TAP_EQ_INT((int) json_object_array_length(eu), 2, "keeps its locations");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(locs, "ash", &one), 0, "a location as region");
        TAP_EQ_INT((int) json_object_array_length(one), 1, "keeps that one");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(locs, "mars", &none), 0, "an unknown region");
        TAP_EQ_INT((int) json_object_array_length(none), 0, "keeps none");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(bad, NULL, &x), -EBADMSG, "a location without a name");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(notlist, NULL, &x), -EBADMSG, "not a list");
        TAP_EQ_INT(cn_provider_hetzner_failure_domains_parse(NULL, NULL, &x), -EBADMSG, "missing");
}

static void test_openstack_failure_domains(void) {
        _cleanup_json_ json_object *body = parse(
                "{\"availabilityZoneInfo\":[{\"zoneName\":\"nova\",\"zoneState\":{\"available\":true},\"hosts\":null},"
                "{\"zoneName\":\"az-down\",\"zoneState\":{\"available\":false},\"hosts\":null},"
                "{\"zoneName\":\"az-2\",\"zoneState\":{\"available\":true},\"hosts\":null},"
                "{\"zoneName\":\"az-nostate\"}]}");
        _cleanup_json_ json_object *noname = parse("{\"availabilityZoneInfo\":[{\"zoneState\":{\"available\":true}}]}");
        _cleanup_json_ json_object *empty = parse("{}"), *list = NULL, *x = NULL;

        TAP_EQ_INT(cn_provider_openstack_failure_domains_parse(body, "RegionOne", &list), 0, "availability zones");
        TAP_EQ_INT((int) json_object_array_length(list), 2, "only the available ones");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(list, 1), "name", NULL), "az-2", "named by zone");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(list, 0), "attributes", "region", NULL), "RegionOne",
                   "region attribute");
        TAP_OK(cn_capi_is_true(json_object_array_get_idx(list, 0), "controlPlane", NULL), "control plane allowed");
        TAP_EQ_INT(cn_provider_openstack_failure_domains_parse(noname, NULL, &x), -EBADMSG, "a zone without a name");
        TAP_EQ_INT(cn_provider_openstack_failure_domains_parse(empty, NULL, &x), -EBADMSG, "no zone list");
}

static void test_hetzner_server_id(void) {
        int64_t id = 0;

        TAP_EQ_INT(cn_provider_hetzner_server_id("hcloud://42", &id), 0, "providerID");
        TAP_EQ_INT((int) id, 42, "its id");
        TAP_EQ_INT(cn_provider_hetzner_server_id("17", &id), 0, "bare instance id");
        TAP_EQ_INT((int) id, 17, "its id");
        TAP_EQ_INT(cn_provider_hetzner_server_id("hcloud://", &id), -EINVAL, "empty id");
        TAP_EQ_INT(cn_provider_hetzner_server_id("hcloud://4/2", &id), -EINVAL, "not a number");
        TAP_EQ_INT(cn_provider_hetzner_server_id("openstack:///42", &id), -EINVAL, "another cloud's providerID");
        TAP_EQ_INT(cn_provider_hetzner_server_id("0", &id), -EINVAL, "zero");
        TAP_EQ_INT(cn_provider_hetzner_server_id("99999999999999999999999", &id), -EINVAL, "overflow");
        TAP_EQ_INT(cn_provider_hetzner_server_id(NULL, &id), -EINVAL, "none");
}

static void test_hetzner_cloud_config(void) {
        static const char conf[] = "[Global]\ntoken = s3cr3t-token\nendpoint = https://hcloud.example/v1/\n";
        _cleanup_json_ json_object *cfg = NULL, *out = NULL, *out2 = NULL;
        _cleanup_json_ json_object *spec = parse("{\"networks\":[\"k8s-net\",\"other\"]}"), *bare = parse("{}");
        _cleanup_free_ char *text = NULL;
        CnProvider *p = NULL;
        CnHttp *http = NULL;
        sd_event *e = NULL;

        assert(sd_event_new(&e) >= 0);
        assert(cn_http_new(e, &http) >= 0);
        assert(cn_cloud_config_parse(conf, strlen(conf), &cfg, NULL) == 0);
        assert(cn_provider_new("hetzner", http, cfg, &p, NULL) == 0);
        TAP_EQ_INT(cn_provider_cloud_config(p, spec, &out), 0, "cloud config");
        TAP_EQ_STR(cn_json_string(out, "Global", "endpoint", NULL), "https://hcloud.example/v1", "endpoint");
        TAP_EQ_STR(cn_json_string(out, "Global", "network", NULL), "k8s-net", "the first network");
        assert(cn_json_to_string(out, CN_JSON_COMPACT, &text) >= 0);
        TAP_OK(!strstr(text, "s3cr3t"), "never the token");
        TAP_EQ_INT(cn_provider_cloud_config(p, bare, &out2), 0, "without networks");
        TAP_OK(!cn_json_get(out2, "Global", "network", NULL), "no network");
        cn_provider_free(p);
        cn_http_free(http);
        sd_event_unref(e);
}

/* A Secret object with data {k: base64(v)} from "k=v" pairs. */
static json_object *secret(const char *const *pairs) {
        _cleanup_json_ json_object *o = parse("{\"metadata\":{\"name\":\"creds\",\"resourceVersion\":\"7\"},\"data\":{}}");

        for (const char *const *p = pairs; p && *p; p++) {
                const char *eq = strchr(*p, '=');
                _cleanup_free_ char *k = strndup(*p, eq - *p), *b64 = NULL;

                assert(cn_base64_encode(eq + 1, strlen(eq + 1), &b64) >= 0);
                assert(cn_json_set_string(o, b64, "data", k, NULL) >= 0);
        }
        return TAKE_PTR(o);
}

static void test_credentials_secret(void) {
        _cleanup_json_ json_object *tok = secret((const char *const[]) { "token=hc-token\n", NULL });
        _cleanup_json_ json_object *conf = secret((const char *const[]) {
                "cloud.conf=[Global]\ntoken = t2\nendpoint = http://127.0.0.1:1/v1\n", NULL });
        _cleanup_json_ json_object *custom = secret((const char *const[]) { "hcloud=[Global]\ntoken = t3\n", "token=x", NULL });
        _cleanup_json_ json_object *notoken = secret((const char *const[]) { "endpoint=http://x", NULL });
        _cleanup_json_ json_object *file = secret((const char *const[]) { "token=t", "token-file=/var/run/secrets/x", NULL });
        _cleanup_json_ json_object *badini = secret((const char *const[]) { "cloud.conf=[Global\ntoken = s3cr3t\n", NULL });
        _cleanup_json_ json_object *os = secret((const char *const[]) {
                "auth-url=https://keystone.example/v3", "username=u", "password=pw", "project-id=p", NULL });
        _cleanup_json_ json_object *os_ac = secret((const char *const[]) {
                "auth-url=https://keystone.example/v3", "application-credential-id=i",
                "application-credential-secret=s", NULL });
        _cleanup_json_ json_object *os_nopw = secret((const char *const[]) { "auth-url=https://k", "username=u", NULL });
        _cleanup_json_ json_object *nodata = parse("{\"metadata\":{}}");
        _cleanup_json_ json_object *notb64 = parse("{\"data\":{\"token\":\"%%%\"}}");
        json_object *cfg = NULL;
        char *why = NULL;

        TAP_EQ_INT(cn_credentials_config_from_secret(tok, NULL, "hetzner", &cfg, &why), 0, "token key");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "token"), "hc-token", "token, without its newline");
        json_object_put(cfg);
        TAP_EQ_INT(cn_credentials_config_from_secret(conf, NULL, "hetzner", &cfg, &why), 0, "cloud.conf key");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "endpoint"), "http://127.0.0.1:1/v1", "read as cloud.conf");
        json_object_put(cfg);
        TAP_EQ_INT(cn_credentials_config_from_secret(custom, "hcloud", "hetzner", &cfg, &why), 0, "secretRef.key");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "token"), "t3", "that key is the cloud.conf");
        json_object_put(cfg);
        TAP_EQ_INT(cn_credentials_config_from_secret(custom, "nokey", "hetzner", &cfg, &why), -ENOENT,
                   "a missing secretRef.key");
        TAP_OK(why && strstr(why, "nokey"), "is named");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(notoken, NULL, "hetzner", &cfg, &why), -EINVAL,
                   "no token: refused (never the controller's environment)");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(file, NULL, "hetzner", &cfg, &why), -EPERM,
                   "settings naming the controller's files are refused");
        TAP_OK(why && strstr(why, "token-file") && !strstr(why, "/var/run"), "named by key, not value");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(badini, NULL, "hetzner", &cfg, &why), -EBADMSG,
                   "a malformed cloud.conf");
        TAP_OK(why && !strstr(why, "s3cr3t"), "its reason carries no value");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(os, NULL, "openstack", &cfg, &why), 0, "openstack password");
        TAP_EQ_STR(cn_cloud_config_get(cfg, "Global", "auth-url"), "https://keystone.example/v3", "auth-url");
        json_object_put(cfg);
        TAP_EQ_INT(cn_credentials_config_from_secret(os_ac, NULL, "openstack", &cfg, &why), 0,
                   "openstack application credential");
        json_object_put(cfg);
        TAP_EQ_INT(cn_credentials_config_from_secret(os_nopw, NULL, "openstack", &cfg, &why), -EINVAL,
                   "openstack without a password");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(nodata, NULL, "hetzner", &cfg, &why), -EINVAL, "no data");
        free(why), why = NULL;
        TAP_EQ_INT(cn_credentials_config_from_secret(notb64, NULL, "hetzner", &cfg, &why), -EINVAL, "not base64");
        free(why), why = NULL;
}

/* A CA certificate (base64 of its PEM) for a kubeconfig that must load; no key goes with it. */
#define TEST_CA \
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJoakNDQVN1Z0F3SUJBZ0lVR3FtWVRXaVRVU0R3" \
        "OGIvdXdFOWdFeERnTW44d0NnWUlLb1pJemowRUF3SXcKRnpFVk1CTUdBMVVFQXd3TWRXNXBkQzEwWlhO" \
        "MExXTmhNQ0FYRFRJMk1URXlOREExTkRreE9Wb1lEekl4TWpZeApNRE14TURVME9URTVXakFYTVJVd0V3" \
        "WURWUVFEREF4MWJtbDBMWFJsYzNRdFkyRXdXVEFUQmdjcWhrak9QUUlCCkJnZ3Foa2pPUFFNQkJ3TkNB" \
        "QVJsdmdRYTJJc2dlR0dXMTZNNDU5a1BZdjdORm5rMEVDNjh2Um9lbzdnY25zbVkKbHU0N29TbGczYk1W" \
        "akxWbHdYUHNsQWtOcWhWUXQ3UEl4QmdVOGhOem8xTXdVVEFkQmdOVkhRNEVGZ1FVaTZ3ZwpIYmliZ3ZT" \
        "bWtOb2M3SXFxKzNqYWNjZ3dId1lEVlIwakJCZ3dGb0FVaTZ3Z0hiaWJndlNta05vYzdJcXErM2phCmNj" \
        "Z3dEd1lEVlIwVEFRSC9CQVV3QXdFQi96QUtCZ2dxaGtqT1BRUURBZ05KQURCR0FpRUFrbmZQbFN4VC9Z" \
        "RloKdzZTYjl2UktwejBlNW9uVGFDODQ2VmRHWnVMa202WUNJUURwS0ZDY3dLT3ZjV09oa3M5eCtOaFdq" \
        "UFlpcFVuNQpVc0luTEtMTklmNmhwZz09Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"

static unsigned credential_answers;

static void on_credentials(void *userdata) {
        credential_answers++;
}

/* Every object may name a Secret of its own: the cache must stay bounded, keep entries whose read
 * is in flight, and make room from the least recently used once reads have answered. The API
 * server here refuses connections, so every read fails fast. */
static void test_credentials_cache_bound(void) {
        _cleanup_json_ json_object *kc = parse(
                "{\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://127.0.0.1:1\","
                "\"certificate-authority-data\":\"" TEST_CA "\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"t\"}}],"
                "\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
                "\"current-context\":\"x\"}");
        CnKubeClientOptions o = { .qps = 1e6, .burst = 100000, .max_retries = -1 };
        CnKubeConfig *cfg = NULL;
        CnKubeClient *client = NULL;
        CnCredentials *c = NULL;
        CnHttp *http = NULL;
        sd_event *e = NULL;
        unsigned started = 0, refused = 0;
        char name[32];
        int r;

        assert(sd_event_new(&e) >= 0);
        assert(cn_http_new(e, &http) >= 0);
        assert(cn_kube_config_from_json(kc, NULL, "test", NULL, &cfg, NULL) == 0);
        assert(cn_kube_client_new(e, cfg, &o, &client) == 0);
        assert(cn_credentials_new(client, http, "hetzner", NULL, NULL, NULL, &c) == 0);
        assert(cn_credentials_add_listener(c, on_credentials, NULL) == 0);
        for (unsigned i = 0; i < CN_CREDENTIALS_MAX + 10; i++) {
                _cleanup_json_ json_object *ref = json_object_new_object();
                _cleanup_free_ char *why = NULL;
                CnProvider *p = NULL;

                snprintf(name, sizeof(name), "s%u", i);
                assert(cn_json_set_string(ref, name, "name", NULL) == 0);
                r = cn_credentials_provider(c, "ns", ref, CN_CREDENTIALS_TTL, &p, &why);
                if (r == 0)
                        started++;
                else if (r == -ENOBUFS)
                        refused++;
        }
        TAP_EQ_INT(started, CN_CREDENTIALS_MAX, "as many Secret reads as the cache holds are started");
        TAP_EQ_INT(refused, 10, "further ones are refused while every entry waits for its answer");
        TAP_EQ_INT(cn_credentials_size(c), CN_CREDENTIALS_MAX, "the cache is at its bound");
        for (unsigned i = 0; i < 20000 && credential_answers < CN_CREDENTIALS_MAX; i++)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
        TAP_EQ_INT(credential_answers, CN_CREDENTIALS_MAX, "every read answered (refused connection)");
        {
                _cleanup_json_ json_object *ref = parse("{\"name\":\"late\"}");
                _cleanup_free_ char *why = NULL;
                CnProvider *p = NULL;

                TAP_EQ_INT(cn_credentials_provider(c, "ns", ref, CN_CREDENTIALS_TTL, &p, &why), 0,
                           "then a new Secret makes room from the least recently used");
        }
        TAP_EQ_INT(cn_credentials_size(c), CN_CREDENTIALS_MAX, "and the cache stays at its bound");
        cn_credentials_free(c);
        cn_kube_client_free(client);
        cn_http_free(http);
        sd_event_unref(e);
}

static void test_credentials_movable(void) {
        _cleanup_json_ json_object *plain = parse("{\"metadata\":{\"name\":\"c\",\"labels\":{\"a\":\"b\"}}}");
        _cleanup_json_ json_object *labelled = parse(
                "{\"metadata\":{\"name\":\"c\",\"labels\":{\"clusterctl.cluster.x-k8s.io/move\":\"\"}}}");
        _cleanup_json_ json_object *owned = parse(
                "{\"metadata\":{\"name\":\"c\",\"ownerReferences\":[{\"kind\":\"CloudnodeCluster\",\"name\":\"c1\"}]}}");
        _cleanup_json_ json_object *no_owners = parse("{\"metadata\":{\"name\":\"c\",\"ownerReferences\":[]}}");

        TAP_OK(!cn_credentials_secret_movable(plain), "a Secret without the move label or an owner stays behind");
        TAP_OK(cn_credentials_secret_movable(labelled), "the clusterctl.cluster.x-k8s.io/move label (any value) moves it");
        TAP_OK(cn_credentials_secret_movable(owned), "an owner moves it");
        TAP_OK(!cn_credentials_secret_movable(no_owners), "an empty owner list does not");
}

static void test_load_balancer_decisions(void) {
        _cleanup_json_ json_object *none = parse("{\"spec\":{\"provider\":\"hetzner\"}}");
        _cleanup_json_ json_object *empty = parse("{\"spec\":{\"controlPlaneLoadBalancer\":{}}}");
        _cleanup_json_ json_object *off = parse("{\"spec\":{\"controlPlaneLoadBalancer\":{\"enabled\":false}}}");
        _cleanup_json_ json_object *user = parse(
                "{\"spec\":{\"controlPlaneLoadBalancer\":{},\"controlPlaneEndpoint\":{\"host\":\"a.example\",\"port\":443}}}");
        _cleanup_json_ json_object *blank = parse(
                "{\"spec\":{\"controlPlaneLoadBalancer\":{},\"controlPlaneEndpoint\":{\"host\":\"\",\"port\":0}}}");
        _cleanup_json_ json_object *view = parse("{\"id\":\"7\",\"host\":\"198.51.100.8\",\"port\":6443}");
        _cleanup_json_ json_object *no_host = parse("{\"id\":\"7\",\"port\":6443}");
        _cleanup_json_ json_object *p = NULL, *q = NULL, *x = NULL;

        TAP_OK(!cn_cluster_wants_load_balancer(none), "no spec.controlPlaneLoadBalancer: no load balancer");
        TAP_OK(cn_cluster_wants_load_balancer(empty), "an empty one: enabled, as CAPH defaults it");
        TAP_OK(!cn_cluster_wants_load_balancer(off), "enabled: false");
        TAP_OK(cn_cluster_has_endpoint(user) && !cn_cluster_has_endpoint(blank) && !cn_cluster_has_endpoint(none),
               "an endpoint is one with a host");
        TAP_EQ_INT(cn_cluster_endpoint_patch(empty, view, &p), 0, "the endpoint patch");
        TAP_EQ_STR(cn_json_string(p, "spec", "controlPlaneEndpoint", "host", NULL), "198.51.100.8", "host");
        TAP_OK(cn_json_get(p, "spec", "controlPlaneEndpoint", "port", NULL) &&
               json_object_get_int(cn_json_get(p, "spec", "controlPlaneEndpoint", "port", NULL)) == 6443, "port");
        TAP_OK(!cn_json_get(p, "status", NULL), "nothing else");
        TAP_EQ_INT(cn_cluster_endpoint_patch(blank, view, &q), 0, "an endpoint without host is filled in");
        TAP_OK(q != NULL, "(a patch)");
        TAP_EQ_INT(cn_cluster_endpoint_patch(user, view, &x), 0, "a user's endpoint");
        TAP_OK(x == NULL, "is kept: no patch");
        TAP_EQ_INT(cn_cluster_endpoint_patch(empty, no_host, &x), -EBADMSG, "a view without a host is refused");
}

static void test_hetzner_load_balancer(void) {
        _cleanup_json_ json_object *custom = parse("{\"type\":\"lb21\",\"algorithm\":\"least_connections\",\"port\":443}");
        _cleanup_json_ json_object *bad_algo = parse("{\"algorithm\":\"fastest\"}"), *bad_port = parse("{\"port\":70000}");
        _cleanup_json_ json_object *bad_type = parse("{\"type\":5}"), *not_obj = parse("[]");
        _cleanup_json_ json_object *lb = parse(
                "{\"id\":42,\"public_net\":{\"enabled\":true,\"ipv4\":{\"ip\":\"198.51.100.3\"}}}");
        _cleanup_json_ json_object *private_only = parse(
                "{\"id\":42,\"public_net\":{\"enabled\":false,\"ipv4\":{\"ip\":null}}}");
        _cleanup_json_ json_object *bad_ip = parse(
                "{\"id\":42,\"public_net\":{\"enabled\":true,\"ipv4\":{\"ip\":\"1.2.3.4\\nx: y\"}}}");
        _cleanup_json_ json_object *no_id = parse("{\"public_net\":{\"enabled\":true,\"ipv4\":{\"ip\":\"198.51.100.3\"}}}");
        _cleanup_json_ json_object *v = NULL, *x = NULL;
        _cleanup_free_ char *why = NULL;
        const char *type, *algorithm;
        int port;

        TAP_EQ_INT(cn_provider_hetzner_lb_settings(NULL, &type, &algorithm, &port, NULL), 0, "no settings");
        TAP_OK(streq(type, "lb11") && streq(algorithm, "round_robin") && port == 6443,
               "CAPH's defaults: lb11, round_robin, 6443");
        TAP_EQ_INT(cn_provider_hetzner_lb_settings(custom, &type, &algorithm, &port, NULL), 0, "settings");
        TAP_OK(streq(type, "lb21") && streq(algorithm, "least_connections") && port == 443, "are used");
        TAP_EQ_INT(cn_provider_hetzner_lb_settings(bad_algo, &type, &algorithm, &port, &why), -EINVAL,
                   "an unknown algorithm");
        TAP_EQ_STR(why, "spec.controlPlaneLoadBalancer.algorithm must be round_robin or least_connections",
                   "says which field and what it may be");
        TAP_EQ_INT(cn_provider_hetzner_lb_settings(bad_port, &type, &algorithm, &port, NULL), -EINVAL, "a bad port");
        TAP_EQ_INT(cn_provider_hetzner_lb_settings(bad_type, &type, &algorithm, &port, NULL), -EINVAL, "a bad type");
        TAP_EQ_INT(cn_provider_hetzner_lb_settings(not_obj, &type, &algorithm, &port, NULL), -EINVAL, "not an object");
        TAP_EQ_INT(cn_provider_hetzner_lb_view(lb, 443, &v), 0, "the view of a load balancer");
        TAP_EQ_STR(cn_json_string(v, "id", NULL), "42", "id");
        TAP_EQ_STR(cn_json_string(v, "host", NULL), "198.51.100.3", "host: the public IPv4 address");
        TAP_OK(json_object_get_int(cn_json_get(v, "port", NULL)) == 443, "port: the listen port");
        TAP_EQ_INT(cn_provider_hetzner_lb_view(private_only, 443, &x), -ENODATA, "no public address: not yet");
        TAP_EQ_INT(cn_provider_hetzner_lb_view(bad_ip, 443, &x), -EBADMSG, "an address that is not one is refused");
        TAP_EQ_INT(cn_provider_hetzner_lb_view(no_id, 443, &x), -EBADMSG, "no id");
}

static void test_openstack_floating_ip(void) {
        _cleanup_json_ json_object *fip = parse(
                "{\"id\":\"f1\",\"floating_ip_address\":\"203.0.113.10\",\"port_id\":null}");
        _cleanup_json_ json_object *v6 = parse("{\"id\":\"f1\",\"floating_ip_address\":\"2001:db8::1\"}");
        _cleanup_json_ json_object *no_id = parse("{\"floating_ip_address\":\"203.0.113.10\"}");
        _cleanup_json_ json_object *v = NULL, *x = NULL;

        TAP_EQ_INT(cn_provider_openstack_fip_view(fip, &v), 0, "the view of a floating IP");
        TAP_EQ_STR(cn_json_string(v, "host", NULL), "203.0.113.10", "host: its address");
        TAP_OK(json_object_get_int(cn_json_get(v, "port", NULL)) == 6443, "port: the API servers' own");
        TAP_EQ_INT(cn_provider_openstack_fip_view(v6, &x), -EBADMSG, "an address that is not IPv4 is refused");
        TAP_EQ_INT(cn_provider_openstack_fip_view(no_id, &x), -EBADMSG, "no id");
        TAP_EQ_INT(cn_provider_openstack_fip_view(NULL, &x), -EBADMSG, "no object");
}

int main(void) {
        test_credentials_movable();
        test_credentials_cache_bound();
        test_steps();
        test_status_patch();
        test_hetzner_failure_domains();
        test_hetzner_server_id();
        test_openstack_failure_domains();
        test_hetzner_cloud_config();
        test_credentials_secret();
        test_load_balancer_decisions();
        test_hetzner_load_balancer();
        test_openstack_floating_ip();
        return tap_done();
}
