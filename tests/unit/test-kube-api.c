/* SPDX-License-Identifier: Apache-2.0 */
/* Pure parts of the Kubernetes client: URL paths, query strings, Status error decoding and the
 * client-side rate limiter on a fake clock. */
#include "kube-client.h"
#include "tap.h"

static void expect_path(const CnKubeResource *r, const char *ns, const char *name, const char *sub, int want_r,
                        const char *want, const char *what) {
        _cleanup_free_ char *p = NULL;
        int k = cn_kube_resource_path(r, ns, name, sub, &p);

        TAP_EQ_INT(k, want_r, what);
        if (want_r == 0)
                TAP_EQ_STR(p, want, what);
}

static void test_paths(void) {
        const CnKubeResource machines = { "infrastructure.cluster.x-k8s.io", "v1beta1", "cloudmachines",
                                          "CloudMachine", true };

        expect_path(&cn_kube_resource_nodes, NULL, NULL, NULL, 0, "/api/v1/nodes", "core cluster-scoped list");
        expect_path(&cn_kube_resource_nodes, NULL, "n1", "status", 0, "/api/v1/nodes/n1/status",
                    "core cluster-scoped status subresource");
        expect_path(&cn_kube_resource_pods, NULL, NULL, NULL, 0, "/api/v1/pods", "namespaced list across namespaces");
        expect_path(&cn_kube_resource_configmaps, "kube-system", "cloud-conf", NULL, 0,
                    "/api/v1/namespaces/kube-system/configmaps/cloud-conf", "core namespaced object");
        expect_path(&cn_kube_resource_leases, "kube-system", "cloud-controller-manager", NULL, 0,
                    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager",
                    "group namespaced object");
        expect_path(&machines, "default", "m-1", "status", 0,
                    "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/default/cloudmachines/m-1/status",
                    "CRD status subresource");
        expect_path(&cn_kube_resource_namespaces, NULL, "system:x", NULL, 0, "/api/v1/namespaces/system%3Ax",
                    "special characters escaped");
        expect_path(&cn_kube_resource_nodes, NULL, "../secrets", NULL, -EINVAL, NULL, "slash in a name refused");
        expect_path(&cn_kube_resource_nodes, NULL, "..", NULL, -EINVAL, NULL, "dot-dot name refused");
        expect_path(&cn_kube_resource_nodes, NULL, "", NULL, -EINVAL, NULL, "empty name refused");
        expect_path(&cn_kube_resource_pods, NULL, "p", NULL, -EINVAL, NULL, "namespaced object without namespace");
        expect_path(&cn_kube_resource_nodes, "default", "n1", NULL, -EINVAL, NULL,
                    "namespace on a cluster-scoped resource");
        expect_path(&cn_kube_resource_pods, "a/b", NULL, NULL, -EINVAL, NULL, "slash in a namespace refused");
        expect_path(&cn_kube_resource_nodes, NULL, "n\n1", NULL, -EINVAL, NULL, "control character refused");
}

static void test_queries(void) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
        CnKubeListOptions o = {
                .label_selector = "app=x,tier!=db",
                .field_selector = "metadata.name=node-1",
                .limit = 50,
                .continue_token = "abc+/=",
                .resource_version = "123",
                .timeout_seconds = 300,
                .allow_watch_bookmarks = true,
        };

        TAP_EQ_INT(cn_kube_list_query(NULL, false, &a), 0, "no options");
        TAP_EQ_STR(a, "", "no options give no query");
        TAP_EQ_INT(cn_kube_list_query(&o, false, &b), 0, "list query");
        TAP_EQ_STR(b, "?labelSelector=app%3Dx%2Ctier%21%3Ddb&fieldSelector=metadata.name%3Dnode-1&resourceVersion=123"
                      "&limit=50&continue=abc%2B%2F%3D",
                   "list query escapes values and has no watch parameters");
        TAP_EQ_INT(cn_kube_list_query(&o, true, &c), 0, "watch query");
        TAP_EQ_STR(c, "?watch=1&labelSelector=app%3Dx%2Ctier%21%3Ddb&fieldSelector=metadata.name%3Dnode-1"
                      "&resourceVersion=123&allowWatchBookmarks=true&timeoutSeconds=300",
                   "watch query has bookmarks and timeout, no limit/continue");
}

static void expect_status(long code, const char *body, int want, const char *want_reason, const char *want_msg,
                          const char *what) {
        _cleanup_free_ char *reason = NULL, *msg = NULL;

        TAP_EQ_INT(cn_kube_status_to_errno(code, body, body ? strlen(body) : 0, &reason, &msg), want, what);
        TAP_EQ_STR(reason, want_reason, what);
        TAP_EQ_STR(msg, want_msg, what);
}

static void test_status(void) {
        expect_status(404,
                      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                      "\"message\":\"nodes \\\"n9\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"n9\","
                      "\"kind\":\"nodes\"},\"code\":404}",
                      -ENOENT, "NotFound", "nodes \"n9\" not found", "404 NotFound Status");
        expect_status(409,
                      "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"nodes \\\"n1\\\" already exists\","
                      "\"reason\":\"AlreadyExists\",\"code\":409}",
                      -EEXIST, "AlreadyExists", "nodes \"n1\" already exists", "409 AlreadyExists");
        expect_status(409,
                      "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Operation cannot be fulfilled on nodes "
                      "\\\"n1\\\": the object has been modified; please apply your changes to the latest version and try "
                      "again\",\"reason\":\"Conflict\",\"code\":409}",
                      -CN_KUBE_ECONFLICT, "Conflict",
                      "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your "
                      "changes to the latest version and try again",
                      "409 Conflict");
        expect_status(410, "{\"kind\":\"Status\",\"message\":\"too old\",\"reason\":\"Expired\",\"code\":410}",
                      -CN_KUBE_EGONE, "Expired", "too old", "410 Expired");
        expect_status(403, "{\"kind\":\"Status\",\"message\":\"nodes is forbidden\",\"reason\":\"Forbidden\"}", -EACCES,
                      "Forbidden", "nodes is forbidden", "403 Forbidden");
        expect_status(401, "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\"}", -EPERM,
                      "Unauthorized", "Unauthorized", "401 Unauthorized");
        expect_status(422, "{\"kind\":\"Status\",\"message\":\"invalid\",\"reason\":\"Invalid\"}", -EINVAL, "Invalid",
                      "invalid", "422 Invalid");
        expect_status(429, NULL, -CN_KUBE_ETOOMANYREQUESTS, NULL, "HTTP status 429", "429 without a body");
        expect_status(503, "<html>bad gateway</html>", -CN_KUBE_EUNAVAILABLE, NULL, "HTTP status 503",
                      "503 with a non-JSON body");
        expect_status(504, "{\"kind\":\"Status\",\"reason\":\"Timeout\",\"message\":\"t\"}", -ETIMEDOUT, "Timeout", "t",
                      "504 Timeout");
        expect_status(500, "{\"kind\":\"Status\",\"message\":\"boom\"", -CN_KUBE_EINTERNAL, NULL, "HTTP status 500",
                      "500 with a truncated Status");
        expect_status(415, "{}", -CN_KUBE_EUNSUPPORTEDMEDIA, NULL, "HTTP status 415", "415 unsupported media type");
}

static void test_rate_limiter(void) {
        CnKubeRateLimiter l;
        uint64_t t = 1000000000ULL, d;
        int immediate = 0;

        cn_kube_rate_limiter_init(&l, 0, 0, t);
        TAP_OK(l.qps == CN_KUBE_DEFAULT_QPS && l.burst == CN_KUBE_DEFAULT_BURST,
               "defaults are qps 20 burst 30 (cloud-controller-manager's --kube-api-qps/--kube-api-burst)");

        cn_kube_rate_limiter_init(&l, 5, 10, t);
        for (int i = 0; i < 10; i++)
                immediate += cn_kube_rate_limiter_reserve(&l, t) == 0;
        TAP_EQ_INT(immediate, 10, "a full bucket lets a burst of 10 through at once");
        d = cn_kube_rate_limiter_reserve(&l, t);
        TAP_EQ_INT(d, 200000, "the 11th waits one refill period (1/qps = 200ms)");
        d = cn_kube_rate_limiter_reserve(&l, t);
        TAP_EQ_INT(d, 400000, "the 12th queues behind it");
        /* After the waits have passed, the bucket is empty again but not owing. */
        t += 400000;
        d = cn_kube_rate_limiter_reserve(&l, t);
        TAP_EQ_INT(d, 200000, "next one after the queue drained waits one period");
        t += 10 * 1000000ULL;
        immediate = 0;
        for (int i = 0; i < 12; i++)
                immediate += cn_kube_rate_limiter_reserve(&l, t) == 0;
        TAP_EQ_INT(immediate, 10, "after a long idle time the bucket refills to burst, not more");

        /* Sustained: over 10 s at most burst + qps * 10 requests go without waiting. */
        cn_kube_rate_limiter_init(&l, 5, 10, 0);
        immediate = 0;
        for (uint64_t now = 0; now < 10 * 1000000ULL; now += 10000)
                if (cn_kube_rate_limiter_reserve(&l, now) == 0)
                        immediate++;
                else
                        l.tokens += 1; /* caller gave up instead of waiting: return the token */
        TAP_OK(immediate >= 59 && immediate <= 60, "sustained rate is qps (got %d of max 60 in 10 s)", immediate);
}

int main(void) {
        test_paths();
        test_queries();
        test_status();
        test_rate_limiter();
        return tap_done();
}
