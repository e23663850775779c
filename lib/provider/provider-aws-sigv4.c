/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 with OpenSSL's SHA-256 and HMAC: the canonical request, the string to
 * sign over the credential scope date/region/service/aws4_request, and the derived signing key.
 * The secret never leaves this file other than as HMAC input. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "hash-util.h"
#include "http.h"
#include "provider-aws.h"
#include "string-util.h"

void cn_aws_credentials_done(AwsCredentials *c) {
        if (c->secret_access_key)
                explicit_bzero(c->secret_access_key, strlen(c->secret_access_key));
        if (c->session_token)
                explicit_bzero(c->session_token, strlen(c->session_token));
        free(c->access_key_id);
        free(c->secret_access_key);
        free(c->session_token);
        *c = (AwsCredentials) {};
}

static int hmac(const void *key, size_t key_size, const char *data, unsigned char out[static 32]) {
        unsigned n = 0;

        if (!HMAC(EVP_sha256(), key, (int) key_size, (const unsigned char *) data, strlen(data), out, &n) || n != 32)
                return -EIO;
        return 0;
}

static int cmp_param(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Each name and value decoded and encoded again as SigV4 wants (RFC 3986 unreserved characters
 * only), sorted by name, then value ("name=value" sorts that way since '=' is below every
 * character encoding leaves). */
static int canonical_query(const char *query, char **ret) {
        _cleanup_(strv_freep) char **params = NULL, **out = NULL;
        int r;

        if (isempty(query))
                return (*ret = strdup("")) ? 0 : -ENOMEM;
        r = strv_split(query, "&", &params);
        if (r < 0)
                return r;
        for (char **p = params; *p; p++) {
                _cleanup_free_ char *name = NULL, *value = NULL, *ename = NULL, *evalue = NULL, *pair = NULL;
                char *eq = strchr(*p, '=');

                if (**p == 0)
                        continue;
                name = cn_http_unescape(*p, eq ? (size_t) (eq - *p) : strlen(*p), NULL);
                value = cn_http_unescape(eq ? eq + 1 : "", eq ? strlen(eq + 1) : 0, NULL);
                if (!name || !value)
                        return -ENOMEM;
                ename = cn_http_escape(name);
                evalue = cn_http_escape(value);
                if (!ename || !evalue || asprintf(&pair, "%s=%s", ename, evalue) < 0)
                        return -ENOMEM;
                r = strv_push(&out, TAKE_PTR(pair));
                if (r < 0)
                        return r;
        }
        if (out)
                qsort(out, strv_length(out), sizeof(char *), cmp_param);
        if (!out)
                return (*ret = strdup("")) ? 0 : -ENOMEM;
        return strv_join(out, "&", ret);
}

int cn_aws_sign(const AwsSignInput *in, const AwsCredentials *creds, char **ret_amz_date, char **ret_authorization) {
        _cleanup_free_ char *query = NULL, *creq = NULL, *sts = NULL, *kdate_key = NULL, *auth = NULL,
                            *amz_date = NULL, *headers = NULL;
        char payload_hash[CN_SHA256_HEX_SIZE], creq_hash[CN_SHA256_HEX_SIZE], date[9], sig[65];
        unsigned char k[32];
        struct tm tm;
        time_t t;
        const char *signed_headers;
        int r;

        assert(in && creds && ret_amz_date && ret_authorization);
        if (isempty(creds->access_key_id) || isempty(creds->secret_access_key) || isempty(in->region))
                return -EINVAL;
        t = (time_t) (in->now / USEC_PER_SEC);
        if (!gmtime_r(&t, &tm) || asprintf(&amz_date, "%04d%02d%02dT%02d%02d%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                                           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec) < 0)
                return -ENOMEM;
        memcpy(date, amz_date, 8);
        date[8] = 0;

        r = canonical_query(in->query, &query);
        if (r < 0)
                return r;
        r = cn_sha256_hex(in->payload ?: "", in->payload ? in->payload_size : 0, payload_hash);
        if (r < 0)
                return r;
        /* Header names in order; the session token is signed as the SDKs sign it. */
        if (asprintf(&headers, "%s%s%shost:%s\nx-amz-date:%s\n%s%s%s", in->content_type ? "content-type:" : "",
                     strempty(in->content_type), in->content_type ? "\n" : "", in->host, amz_date,
                     creds->session_token ? "x-amz-security-token:" : "", strempty(creds->session_token),
                     creds->session_token ? "\n" : "") < 0)
                return -ENOMEM;
        signed_headers = in->content_type ? (creds->session_token ? "content-type;host;x-amz-date;x-amz-security-token"
                                                                  : "content-type;host;x-amz-date")
                                          : (creds->session_token ? "host;x-amz-date;x-amz-security-token"
                                                                  : "host;x-amz-date");
        if (asprintf(&creq, "%s\n%s\n%s\n%s\n%s\n%s", in->method, in->path, query, headers, signed_headers,
                     payload_hash) < 0)
                return -ENOMEM;
        r = cn_sha256_hex(creq, strlen(creq), creq_hash);
        if (r < 0)
                return r;
        if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amz_date, date, in->region, in->service,
                     creq_hash) < 0)
                return -ENOMEM;

        kdate_key = cn_strjoin("AWS4", creds->secret_access_key, NULL);
        if (!kdate_key)
                return -ENOMEM;
        r = hmac(kdate_key, strlen(kdate_key), date, k);
        explicit_bzero(kdate_key, strlen(kdate_key));
        if (r < 0 || (r = hmac(k, sizeof(k), in->region, k)) < 0 || (r = hmac(k, sizeof(k), in->service, k)) < 0 ||
            (r = hmac(k, sizeof(k), "aws4_request", k)) < 0 || (r = hmac(k, sizeof(k), sts, k)) < 0) {
                explicit_bzero(k, sizeof(k));
                return r;
        }
        for (unsigned i = 0; i < 32; i++)
                (void) snprintf(sig + 2 * i, 3, "%02x", k[i]);
        explicit_bzero(k, sizeof(k));
        if (asprintf(&auth, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, Signature=%s",
                     creds->access_key_id, date, in->region, in->service, signed_headers, sig) < 0)
                return -ENOMEM;
        *ret_amz_date = TAKE_PTR(amz_date);
        *ret_authorization = TAKE_PTR(auth);
        return 0;
}

int cn_aws_url_host_path(const char *url, char **ret_host, char **ret_path) {
        const char *rest, *slash;
        _cleanup_free_ char *host = NULL;
        bool https;
        size_t n;

        https = !!cn_startswith(url, "https://");
        rest = cn_startswith(url, https ? "https://" : "http://");
        if (!rest)
                return -EINVAL;
        n = strcspn(rest, "/?#");
        if (n == 0 || memchr(rest, '@', n))
                return -EINVAL;
        host = strndup(rest, n);
        if (!host)
                return -ENOMEM;
        /* The HTTP client leaves the scheme's default port out of Host:. */
        char *colon = strrchr(host, ':');
        if (colon && !strchr(colon, ']') && streq(colon + 1, https ? "443" : "80"))
                *colon = 0;
        slash = rest + n;
        if (*slash == '/')
                *ret_path = strndup(slash, strcspn(slash, "?#"));
        else
                *ret_path = strdup("/");
        if (!*ret_path)
                return -ENOMEM;
        *ret_host = TAKE_PTR(host);
        return 0;
}
