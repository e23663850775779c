/* SPDX-License-Identifier: Apache-2.0 */
/* AWS credentials, in the order cloud-provider-aws finds them: the cloud config ([Global]
 * access-key-id, secret-access-key, session-token), the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials; profile AWS_PROFILE, else default), then
 * the instance role from the instance metadata service (IMDSv2 session token first, IMDSv1 when
 * the token request is refused; AWS_EC2_METADATA_SERVICE_ENDPOINT, AWS_EC2_METADATA_DISABLED).
 * Role credentials are kept until shortly before they expire. A provider made without the
 * environment takes the cloud config's keys or nothing. */
#include <inttypes.h>

#include "cloud-config.h"
#include "json-util.h"
#include "log.h"
#include "provider-aws.h"
#include "string-util.h"
#include "time-util.h"

#define AWS_IMDS_DEFAULT_ENDPOINT "http://169.254.169.254"
#define AWS_IMDS_TOKEN_TTL 21600
/* Role credentials are replaced this long before they expire, as the SDKs do. */
#define AWS_CREDENTIALS_MARGIN (5 * 60 * USEC_PER_SEC)
#define AWS_SECRET_MAX 4096U

static int set_credentials(AwsCredentials *c, const char *id, const char *secret, const char *token) {
        cn_aws_credentials_done(c);
        if (strlen(id) > AWS_SECRET_MAX || strlen(secret) > AWS_SECRET_MAX || (token && strlen(token) > 4 * AWS_SECRET_MAX))
                return -E2BIG;
        c->access_key_id = strdup(id);
        c->secret_access_key = strdup(secret);
        if (!isempty(token))
                c->session_token = strdup(token);
        if (!c->access_key_id || !c->secret_access_key || (!isempty(token) && !c->session_token)) {
                cn_aws_credentials_done(c);
                return -ENOMEM;
        }
        return 0;
}

static int load_shared_file(AwsCredentialChain *chain, char **ret_error) {
        _cleanup_json_ json_object *file = NULL;
        _cleanup_free_ char *path = NULL;
        const char *env = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
        const char *profile = getenv("AWS_PROFILE"), *id, *secret;
        int r;

        if (!isempty(env))
                path = strdup(env);
        else if (!isempty(home))
                path = cn_strjoin(home, "/.aws/credentials", NULL);
        else
                return -ENOENT;
        if (!path)
                return -ENOMEM;
        r = cn_cloud_config_load(path, &file, NULL);
        if (r == -ENOENT && isempty(env))
                return -ENOENT;
        if (r < 0)
                return cn_provider_config_error(ret_error, r, "cannot read the AWS shared credentials file %s: %s", path,
                                                r == -EBADMSG ? "syntax error" : strerror(-r));
        profile = !isempty(profile) ? profile : "default";
        id = cn_cloud_config_get(file, profile, "aws_access_key_id");
        secret = cn_cloud_config_get(file, profile, "aws_secret_access_key");
        if (isempty(id) || isempty(secret))
                return -ENOENT;
        r = set_credentials(&chain->creds, id, secret, cn_cloud_config_get(file, profile, "aws_session_token"));
        if (r < 0)
                return r;
        log_debug("AWS credentials from profile %s of %s.", profile, path);
        return 0;
}

int cn_aws_credentials_load(CnProvider *p, json_object *cfg, AwsCredentialChain *chain, char **ret_error) {
        const char *id = cn_cloud_config_get(cfg, "Global", "access-key-id");
        const char *secret = cn_cloud_config_get(cfg, "Global", "secret-access-key");
        const char *imds = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"), *disabled;
        int r;

        if (!isempty(id) || !isempty(secret)) {
                if (isempty(id) || isempty(secret))
                        return cn_provider_config_error(ret_error, EINVAL, "the cloud config's [Global] needs both "
                                                        "access-key-id and secret-access-key");
                return set_credentials(&chain->creds, id, secret, cn_cloud_config_get(cfg, "Global", "session-token"));
        }
        if (!cn_provider_uses_environment(p))
                return cn_provider_config_error(ret_error, EINVAL, "no AWS credentials: set access-key-id and "
                                                "secret-access-key in [Global] of the cloud config");
        id = getenv("AWS_ACCESS_KEY_ID");
        secret = getenv("AWS_SECRET_ACCESS_KEY");
        if (!isempty(id) && !isempty(secret))
                return set_credentials(&chain->creds, id, secret, getenv("AWS_SESSION_TOKEN"));
        r = load_shared_file(chain, ret_error);
        if (r != -ENOENT)
                return r;
        disabled = getenv("AWS_EC2_METADATA_DISABLED");
        if (disabled && cn_parse_boolean(disabled) > 0)
                return cn_provider_config_error(ret_error, ENOENT, "no AWS credentials in the cloud config, the "
                                                "environment or the shared credentials file, and the instance "
                                                "metadata service is disabled");
        chain->from_imds = true;
        chain->imds_endpoint = strdup(!isempty(imds) ? imds : AWS_IMDS_DEFAULT_ENDPOINT);
        if (!chain->imds_endpoint)
                return -ENOMEM;
        for (size_t l = strlen(chain->imds_endpoint); l > 0 && chain->imds_endpoint[l - 1] == '/'; l--)
                chain->imds_endpoint[l - 1] = 0;
        return 0;
}

void cn_aws_credential_chain_done(AwsCredentialChain *chain) {
        cn_aws_credentials_done(&chain->creds);
        free(chain->imds_endpoint);
        if (chain->imds_token)
                explicit_bzero(chain->imds_token, strlen(chain->imds_token));
        free(chain->imds_token);
        *chain = (AwsCredentialChain) {};
}

bool cn_aws_credentials_fresh(const AwsCredentialChain *chain, usec_t now) {
        if (!chain->creds.access_key_id)
                return false;
        return chain->creds.expires == 0 || chain->creds.expires > now + AWS_CREDENTIALS_MARGIN;
}

void cn_aws_credentials_forget(AwsCredentialChain *chain) {
        if (!chain->from_imds)
                return;
        cn_aws_credentials_done(&chain->creds);
        if (chain->imds_token)
                explicit_bzero(chain->imds_token, strlen(chain->imds_token));
        free(chain->imds_token);
        chain->imds_token = NULL;
        chain->imds_token_expires = 0;
}

int cn_aws_parse_role_credentials(json_object *doc, AwsCredentials *ret) {
        const char *code = cn_json_string(doc, "Code", NULL), *id = cn_json_string(doc, "AccessKeyId", NULL);
        const char *secret = cn_json_string(doc, "SecretAccessKey", NULL), *token = cn_json_string(doc, "Token", NULL);
        const char *expiration = cn_json_string(doc, "Expiration", NULL);
        AwsCredentials c = {};
        usec_t expires;
        int r;

        if ((code && !streq(code, "Success")) || isempty(id) || isempty(secret) || isempty(token) || !expiration ||
            cn_parse_rfc3339(expiration, &expires) < 0)
                return -EBADMSG;
        r = set_credentials(&c, id, secret, token);
        if (r < 0)
                return r;
        c.expires = expires;
        cn_aws_credentials_done(ret);
        *ret = c;
        return 0;
}

/* IMDS answers text: the tree gets one string. */
static int text_body(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error) {
        (void) ret_error;
        if (size > max_size || size > INT_MAX)
                return -EFBIG;
        if (memchr(data, 0, size))
                return -EBADMSG;
        *ret = json_object_new_string_len(data, (int) size);
        return *ret ? 0 : -ENOMEM;
}

static int imds_get(CnProviderCall *call, AwsRefresh *rf, const char *path, CnTreeParser parser,
                    CnProviderHttpCallback cb);

static void refresh_fail(CnProviderCall *call, AwsRefresh *rf, int error, usec_t retry_after, const char *what) {
        rf->done(call, error, retry_after, what);
}

static void on_role_credentials(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        AwsRefresh *rf = userdata;
        int r;

        if (reply->error < 0)
                return refresh_fail(call, rf, reply->error == -EINVAL ? -EAGAIN : reply->error, reply->retry_after,
                                    "cannot read the instance role's credentials from the instance metadata service");
        r = cn_aws_parse_role_credentials(reply->body, &rf->chain->creds);
        if (r < 0)
                return refresh_fail(call, rf, r, 0,
                                    "malformed instance role credentials from the instance metadata service");
        log_debug("AWS credentials of the instance role, valid until %" PRIu64 ".",
                  (uint64_t) (rf->chain->creds.expires / USEC_PER_SEC));
        rf->done(call, 0, 0, NULL);
}

static void on_role_name(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        AwsRefresh *rf = userdata;
        _cleanup_free_ char *path = NULL;
        const char *list = json_object_get_string(reply->body);
        size_t n;
        int r;

        if (reply->error == -ENOENT)
                return refresh_fail(call, rf, -EACCES, 0, "no AWS credentials: the instance has no instance role");
        if (reply->error < 0)
                return refresh_fail(call, rf, reply->error == -EINVAL ? -EAGAIN : reply->error, reply->retry_after,
                                    "cannot list the instance role from the instance metadata service");
        n = list ? strcspn(list, "\r\n") : 0;
        if (n == 0 || n > 128 || memchr(list, '/', n) || memchr(list, '?', n))
                return refresh_fail(call, rf, -EBADMSG, 0, "malformed instance role name from the instance metadata service");
        if (asprintf(&path, "/latest/meta-data/iam/security-credentials/%.*s", (int) n, list) < 0)
                return refresh_fail(call, rf, -ENOMEM, 0, "out of memory");
        r = imds_get(call, rf, path, cn_json_parse, on_role_credentials);
        if (r < 0)
                refresh_fail(call, rf, r, 0, "cannot ask the instance metadata service");
}

static int imds_get(CnProviderCall *call, AwsRefresh *rf, const char *path, CnTreeParser parser,
                    CnProviderHttpCallback cb) {
        _cleanup_free_ char *url = cn_strjoin(rf->chain->imds_endpoint, path, NULL), *header = NULL;
        const char *headers[2] = {};
        CnProviderHttpOptions o = { .body_parser = parser, .headers = headers, .operation = "credentials" };

        if (!url)
                return -ENOMEM;
        if (rf->chain->imds_token) {
                if (asprintf(&header, "X-aws-ec2-metadata-token: %s", rf->chain->imds_token) < 0)
                        return -ENOMEM;
                headers[0] = header;
        }
        return cn_provider_call_http(call, "GET", url, &o, cb, rf);
}

static void on_imds_token(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        AwsRefresh *rf = userdata;
        const char *token = json_object_get_string(reply->body);
        int r;

        if (reply->error >= 0 && !isempty(token) && strlen(token) <= AWS_SECRET_MAX) {
                free(rf->chain->imds_token);
                rf->chain->imds_token = strdup(token);
                if (!rf->chain->imds_token)
                        return refresh_fail(call, rf, -ENOMEM, 0, "out of memory");
                rf->chain->imds_token_expires = cn_now(CLOCK_MONOTONIC) + (AWS_IMDS_TOKEN_TTL - 60) * USEC_PER_SEC;
        } else
                /* IMDSv1, as the SDKs fall back to when the token request is refused. */
                log_debug("No IMDSv2 session token (%s), trying IMDSv1.", strna(reply->message));
        r = imds_get(call, rf, "/latest/meta-data/iam/security-credentials/", text_body, on_role_name);
        if (r < 0)
                refresh_fail(call, rf, r, 0, "cannot ask the instance metadata service");
}

int cn_aws_credentials_refresh(CnProviderCall *call, AwsRefresh *rf) {
        _cleanup_free_ char *url = NULL, *ttl = NULL;
        AwsCredentialChain *chain = rf->chain;
        int r;

        if (!chain->from_imds)
                return -EACCES;
        if (chain->imds_token && chain->imds_token_expires > cn_now(CLOCK_MONOTONIC)) {
                r = imds_get(call, rf, "/latest/meta-data/iam/security-credentials/", text_body, on_role_name);
        } else {
                const char *headers[2] = {};
                CnProviderHttpOptions o = { .body_parser = text_body, .headers = headers, .operation = "credentials" };

                if (asprintf(&ttl, "X-aws-ec2-metadata-token-ttl-seconds: %d", AWS_IMDS_TOKEN_TTL) < 0 ||
                    !(url = cn_strjoin(chain->imds_endpoint, "/latest/api/token", NULL)))
                        return -ENOMEM;
                headers[0] = ttl;
                r = cn_provider_call_http(call, "PUT", url, &o, on_imds_token, rf);
        }
        return r;
}
