/* SPDX-License-Identifier: Apache-2.0 */
/* The gcp provider's parsers: gce:// providerIDs, Compute Engine instance resources (addresses,
 * machine type, zone and region, shutdown states, hostile values), GCE's throttling answers, and
 * the JWT assertion of a service account key (structure and an RS256 signature that verifies).
 * The lookups themselves run against tests/fake-cloud in tests/integration/test-provider-gcp.py. */
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "hash-util.h"
#include "json-util.h"
#include "provider-gcp.h"
#include "tap.h"

static json_object *parse(const char *text) {
        json_object *o = NULL;

        if (cn_json_parse(text, strlen(text), CN_JSON_MAX_SIZE, &o, NULL) < 0)
                abort();
        return o;
}

static void test_provider_ids(void) {
        static const char *const bad[] = {
                "gce://p/z", "gce://p/z/n/x", "gce:///z/n", "gce://p//n", "gce://p/z/", "aws:///z/i-1",
                "gce://p/z/N%2F", "gce://p/z/a b", "gce://P/z/n",
        };
        char *p = NULL, *z = NULL, *n = NULL;

        tap_ok(cn_provider_gcp_parse_provider_id("gce://my-proj/europe-west1-b/node-1", &p, &z, &n) == 0 &&
                       streq(p, "my-proj") && streq(z, "europe-west1-b") && streq(n, "node-1"),
               "gce://<project>/<zone>/<name> in its three parts");
        free(p), free(z), free(n);
        p = z = n = NULL;
        tap_ok(cn_provider_gcp_parse_provider_id("gce://example.com:proj/us-central1-a/n", &p, &z, &n) == 0 &&
                       streq(p, "example.com:proj"),
               "a domain-scoped project id");
        free(p), free(z), free(n);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                p = z = n = NULL;
                tap_ok(cn_provider_gcp_parse_provider_id(bad[i], &p, &z, &n) == -EINVAL && !p,
                       "refused: %s", bad[i]);
        }
}

static void test_instance(void) {
        _cleanup_json_ json_object *o = parse(
                "{\"id\": \"4000000000000100001\", \"name\": \"g1\", \"status\": \"TERMINATED\","
                " \"zone\": \"https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a\","
                " \"machineType\": \"https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/e2-small\","
                " \"networkInterfaces\": [{\"networkIP\": \"10.0.0.2\", \"ipv6Address\": \"fd20::2\","
                " \"accessConfigs\": [{\"type\": \"ONE_TO_ONE_NAT\", \"natIP\": \"203.0.113.2\"}],"
                " \"ipv6AccessConfigs\": [{\"type\": \"DIRECT_IPV6\", \"externalIpv6\": \"2001:db8::2\"}]},"
                " {\"networkIP\": \"10.1.0.2\", \"ipv6AccessConfigs\": [{\"type\": \"DIRECT_IPV6\","
                " \"externalIpv6\": \"2001:db8:1::2\"}]}]}");
        _cleanup_json_ json_object *hostile = parse("{\"id\": \"1\", \"name\": \"a/../b\", \"zone\": \"zones/z-a\"}");
        _cleanup_json_ json_object *badip = parse(
                "{\"id\": \"1\", \"name\": \"a\", \"zone\": \"zones/z-a\", \"networkInterfaces\": [{\"networkIP\": \"10.0.0.256\"}]}");
        CnProviderInstance *i = NULL;

        tap_ok(cn_provider_gcp_parse_instance(o, "p", &i) == 0, "an instance resource parses");
        if (!i)
                return;
        tap_ok(streq(i->provider_id, "gce://p/us-central1-a/g1") && streq(i->instance_id, "4000000000000100001"),
               "providerID and numeric id");
        tap_ok(streq(i->instance_type, "e2-small") && streq(i->zone, "us-central1-a") && streq(i->region, "us-central1"),
               "machine type, zone and region from their URLs");
        tap_ok(i->shutdown, "TERMINATED is shut down");
        tap_ok(i->addresses.n == 5 && streq(i->addresses.items[0].address, "10.0.0.2") &&
                       streq(i->addresses.items[1].address, "203.0.113.2") &&
                       i->addresses.items[1].type == CN_NODE_ADDRESS_EXTERNAL_IP &&
                       streq(i->addresses.items[2].address, "fd20::2") &&
                       i->addresses.items[2].type == CN_NODE_ADDRESS_INTERNAL_IP &&
                       streq(i->addresses.items[4].address, "2001:db8:1::2") &&
                       i->addresses.items[4].type == CN_NODE_ADDRESS_INTERNAL_IP,
               "addresses of every interface: NAT as ExternalIP, the IPv6 (internal before external) as InternalIP");
        cn_provider_instance_free(i);
        i = NULL;
        tap_ok(cn_provider_gcp_parse_instance(hostile, "p", &i) == -EBADMSG && !i, "a name with '/' is refused");
        tap_ok(cn_provider_gcp_parse_instance(badip, "p", &i) == -EBADMSG && !i, "an address that is no IP is refused");
        tap_ok(cn_provider_gcp_parse_instance(o, "p/x", &i) == -EBADMSG && !i, "a hostile project is refused");
}

static void test_errors(void) {
        _cleanup_json_ json_object *rate = parse(
                "{\"error\": {\"code\": 403, \"message\": \"Rate Limit Exceeded\", \"errors\": [{\"message\": "
                "\"Rate Limit Exceeded\", \"domain\": \"usageLimits\", \"reason\": \"rateLimitExceeded\"}]}}");
        _cleanup_json_ json_object *denied = parse(
                "{\"error\": {\"code\": 403, \"message\": \"Required 'compute.instances.get' permission\","
                " \"errors\": [{\"reason\": \"forbidden\"}]}}");
        _cleanup_json_ json_object *oauth = parse("{\"error\": \"invalid_grant\", \"error_description\": \"Invalid JWT Signature.\"}");

        tap_ok(cn_provider_gcp_classify_error(403, rate, -EACCES) == -EAGAIN, "403 rateLimitExceeded is retryable");
        tap_ok(cn_provider_gcp_classify_error(403, denied, -EACCES) == -EACCES, "403 forbidden stays terminal");
        tap_ok(cn_provider_gcp_classify_error(404, rate, -ENOENT) == -ENOENT, "other statuses are left alone");
        tap_ok(cn_provider_gcp_classify_error(403, NULL, -EACCES) == -EACCES, "a 403 without body stays terminal");
        tap_ok(streq(cn_provider_gcp_error_message(denied), "Required 'compute.instances.get' permission") &&
                       streq(cn_provider_gcp_error_message(oauth), "Invalid JWT Signature."),
               "the message of Compute and OAuth errors");
}

static void *b64url_decode(const char *s, size_t n, size_t *ret_size) {
        _cleanup_free_ char *std = malloc(n + 4);
        void *out = NULL;
        size_t k;

        for (k = 0; k < n; k++)
                std[k] = s[k] == '-' ? '+' : s[k] == '_' ? '/' : s[k];
        while (k % 4)
                std[k++] = '=';
        if (cn_base64_decode(std, k, &out, ret_size) < 0)
                return NULL;
        return out;
}

static void test_jwt(void) {
        Gcp g = { .client_email = (char *) "sa@p.iam.gserviceaccount.com",
                  .token_uri = (char *) "https://oauth2.googleapis.com/token",
                  .private_key_id = (char *) "k1" };
        EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, NULL);
        _cleanup_free_ char *jwt = NULL;
        _cleanup_free_ void *header = NULL, *claims = NULL, *sig = NULL;
        _cleanup_json_ json_object *h = NULL, *c = NULL;
        const char *dot1, *dot2;
        size_t hs = 0, cs = 0, ss = 0;
        EVP_MD_CTX *md;

        if (!kctx || EVP_PKEY_keygen_init(kctx) != 1 || EVP_PKEY_CTX_set_rsa_keygen_bits(kctx, 2048) != 1 ||
            EVP_PKEY_keygen(kctx, &g.key) != 1)
                abort();
        EVP_PKEY_CTX_free(kctx);
        tap_ok(cn_provider_gcp_jwt(&g, 1700000000, &jwt) == 0, "a JWT is made");
        dot1 = jwt ? strchr(jwt, '.') : NULL;
        dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
        tap_ok(dot1 && dot2 && !strchr(dot2 + 1, '.') && !strpbrk(jwt, "+/="), "three base64url parts");
        if (!dot2) {
                EVP_PKEY_free(g.key);
                return;
        }
        header = b64url_decode(jwt, dot1 - jwt, &hs);
        claims = b64url_decode(dot1 + 1, dot2 - dot1 - 1, &cs);
        sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &ss);
        h = header ? parse(header) : NULL;
        c = claims ? parse(claims) : NULL;
        tap_ok(h && streq(strempty(cn_json_string(h, "alg", NULL)), "RS256") &&
                       streq(strempty(cn_json_string(h, "kid", NULL)), "k1"),
               "header: RS256 with the key id");
        {
                int64_t iat = 0, exp = 0;

                (void) cn_json_get_int64(c, &iat, "iat", NULL);
                (void) cn_json_get_int64(c, &exp, "exp", NULL);
                tap_ok(c && streq(strempty(cn_json_string(c, "iss", NULL)), g.client_email) &&
                               streq(strempty(cn_json_string(c, "aud", NULL)), g.token_uri) &&
                               streq(strempty(cn_json_string(c, "scope", NULL)), "https://www.googleapis.com/auth/compute") &&
                               iat == 1700000000 && exp == iat + 3600,
                       "claims: issuer, audience, compute scope, an hour from iat");
        }
        md = EVP_MD_CTX_new();
        tap_ok(sig && md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, g.key) == 1 &&
                       EVP_DigestVerify(md, sig, ss, (const unsigned char *) jwt, dot2 - jwt) == 1,
               "the signature verifies with the key's public half");
        EVP_MD_CTX_free(md);
        EVP_PKEY_free(g.key);
}

int main(void) {
        test_provider_ids();
        test_instance();
        test_errors();
        test_jwt();
        return tap_done();
}
