/* SPDX-License-Identifier: Apache-2.0 */
/* Google OAuth 2.0 access tokens for the Compute API, from one of the two sources
 * cloud-provider-gcp uses: a service account key (JSON, as GOOGLE_APPLICATION_CREDENTIALS names
 * it), exchanged for a token with a JWT assertion signed RS256 ("Using OAuth 2.0 for Server to
 * Server Applications"), or the metadata server's default service account
 * (computeMetadata/v1/instance/service-accounts/default/token). The token is cached until shortly
 * before it expires and fetched again once when the API rejects it. */
#include <openssl/pem.h>

#include "hash-util.h"
#include "json-util.h"
#include "log.h"
#include "provider-gcp.h"
#include "string-util.h"

#define GCP_KEY_FILE_MAX (64U * 1024U)
#define GCP_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define GCP_SCOPE "https://www.googleapis.com/auth/compute"
#define GCP_JWT_LIFETIME 3600

void cn_provider_gcp_free_credentials(Gcp *g) {
        cn_provider_token_forget(&g->token);
        free(g->client_email);
        free(g->private_key_id);
        free(g->token_uri);
        EVP_PKEY_free(g->key);
        g->client_email = g->private_key_id = g->token_uri = NULL;
        g->key = NULL;
}

int cn_provider_gcp_load_key(Gcp *g, const char *path, char **ret_error) {
        _cleanup_json_ json_object *doc = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_(BIO_free_allp) BIO *bio = NULL;
        const char *type, *email, *pem, *kid, *uri, *project;
        int r;

        r = cn_json_parse_file(NULL, path, GCP_KEY_FILE_MAX, &doc, &error);
        if (r < 0)
                return cn_provider_config_error(ret_error, r, "cannot read the service account key %s: %s", path,
                                                error ?: strerror(-r));
        type = cn_json_string(doc, "type", NULL);
        email = cn_json_string(doc, "client_email", NULL);
        pem = cn_json_string(doc, "private_key", NULL);
        kid = cn_json_string(doc, "private_key_id", NULL);
        uri = cn_json_string(doc, "token_uri", NULL);
        project = cn_json_string(doc, "project_id", NULL);
        if (!type || !streq(type, "service_account"))
                return cn_provider_config_error(ret_error, EINVAL,
                                                "%s is not a service account key (type \"service_account\")", path);
        if (isempty(email) || isempty(pem))
                return cn_provider_config_error(ret_error, EINVAL, "%s has no client_email or private_key", path);
        bio = BIO_new_mem_buf(pem, -1);
        if (!bio)
                return -ENOMEM;
        g->key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
        if (!g->key || EVP_PKEY_get_base_id(g->key) != EVP_PKEY_RSA) {
                EVP_PKEY_free(g->key);
                g->key = NULL;
                return cn_provider_config_error(ret_error, EINVAL, "the private_key of %s is not an RSA key in PEM",
                                                path);
        }
        g->client_email = strdup(email);
        g->token_uri = strdup(isempty(uri) ? GCP_DEFAULT_TOKEN_URI : uri);
        if (!g->client_email || !g->token_uri || (!isempty(kid) && !(g->private_key_id = strdup(kid))) ||
            (!g->project && !isempty(project) && !(g->project = strdup(project))))
                return -ENOMEM;
        /* The parsed document held the key: wipe it before it is freed. */
        explicit_bzero((char *) pem, strlen(pem));
        return 0;
}

/* base64url without padding (RFC 7515, section 2). */
static int base64url(const void *data, size_t size, char **ret) {
        char *s;
        int r;

        r = cn_base64_encode(data, size, &s);
        if (r < 0)
                return r;
        for (char *p = s; *p; p++)
                if (*p == '+')
                        *p = '-';
                else if (*p == '/')
                        *p = '_';
                else if (*p == '=') {
                        *p = 0;
                        break;
                }
        *ret = s;
        return 0;
}

static int json_part(json_object *o, char **ret) {
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        return text ? base64url(text, strlen(text), ret) : -ENOMEM;
}

int cn_provider_gcp_jwt(const Gcp *g, uint64_t now, char **ret) {
        _cleanup_json_ json_object *header = json_object_new_object(), *claims = json_object_new_object();
        _cleanup_free_ char *h = NULL, *c = NULL, *input = NULL, *sig64 = NULL;
        _cleanup_free_ unsigned char *sig = NULL;
        EVP_MD_CTX *ctx = NULL;
        size_t n = 0;
        int r;

        assert(g->key && g->client_email && g->token_uri);
        if (!header || !claims)
                return -ENOMEM;
        if (cn_json_set_string(header, "RS256", "alg", NULL) < 0 || cn_json_set_string(header, "JWT", "typ", NULL) < 0 ||
            (g->private_key_id && cn_json_set_string(header, g->private_key_id, "kid", NULL) < 0) ||
            cn_json_set_string(claims, g->client_email, "iss", NULL) < 0 ||
            cn_json_set_string(claims, GCP_SCOPE, "scope", NULL) < 0 ||
            cn_json_set_string(claims, g->token_uri, "aud", NULL) < 0 ||
            cn_json_set(claims, json_object_new_int64((int64_t) now), "iat", NULL) < 0 ||
            cn_json_set(claims, json_object_new_int64((int64_t) now + GCP_JWT_LIFETIME), "exp", NULL) < 0)
                return -ENOMEM;
        if ((r = json_part(header, &h)) < 0 || (r = json_part(claims, &c)) < 0)
                return r;
        if (asprintf(&input, "%s.%s", h, c) < 0)
                return -ENOMEM;
        ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        r = -EIO;
        if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, g->key) == 1 &&
            EVP_DigestSign(ctx, NULL, &n, (const unsigned char *) input, strlen(input)) == 1 && (sig = malloc(n)) &&
            EVP_DigestSign(ctx, sig, &n, (const unsigned char *) input, strlen(input)) == 1)
                r = 0;
        EVP_MD_CTX_free(ctx);
        if (r < 0)
                return r;
        if ((r = base64url(sig, n, &sig64)) < 0)
                return r;
        if (asprintf(ret, "%s.%s", input, sig64) < 0)
                return -ENOMEM;
        return 0;
}

static void on_token(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Gcp *g = cn_provider_data(cn_provider_call_provider(call));
        CnProviderAuth *auth = ASSERT_PTR(userdata);

        if (reply->error < 0) {
                const char *what = reply->message;

                /* The metadata server answers 404 when the VM has no service account. */
                if (!g->key && reply->status == 404)
                        what = "the VM has no default service account on the metadata server";
                else if (g->key && (reply->status == 400 || reply->status == 401))
                        what = "the service account key was rejected by the token endpoint";
                cn_provider_auth_fail(call, auth, reply->status == 400 || reply->status == 404 ? -EACCES : reply->error,
                          reply->retry_after, what);
                return;
        }
        cn_provider_oauth_token_reply(call, auth, &g->token, reply->body);
}

int cn_provider_gcp_fetch_token(CnProviderCall *call, CnProviderAuth *auth) {
        Gcp *g = cn_provider_data(cn_provider_call_provider(call));
        _cleanup_free_ char *url = NULL, *jwt = NULL, *form = NULL;
        static const char *const metadata_headers[] = { "Metadata-Flavor: Google", NULL };
        CnProviderHttpOptions opts = {
                .error_parser = cn_provider_gcp_error_message,
                .operation = "authenticate",
        };
        int r;

        if (!g->key) {
                opts.headers = metadata_headers;
                if (asprintf(&url, "%s/computeMetadata/v1/instance/service-accounts/default/token", g->metadata_url) < 0)
                        return -ENOMEM;
                return cn_provider_call_http(call, "GET", url, &opts, on_token, auth);
        }
        r = cn_provider_gcp_jwt(g, cn_now(CLOCK_REALTIME) / USEC_PER_SEC, &jwt);
        if (r < 0)
                return r;
        /* The JWT is base64url and dots: nothing to escape. */
        if (asprintf(&form, "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer&assertion=%s",
                     jwt) < 0)
                return -ENOMEM;
        opts.form = form;
        opts.ca_file = g->ca_file;
        return cn_provider_call_http(call, "POST", g->token_uri, &opts, on_token, auth);
}
