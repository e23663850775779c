/* SPDX-License-Identifier: Apache-2.0 */
/* The bearer token a provider's API requests carry (Keystone, Google OAuth, Entra ID): cached
 * until shortly before it expires, fetched before a request when there is none, and fetched
 * again once when the API refuses the cached one. */
#include "json-util.h"
#include "provider-internal.h"
#include "time-util.h"

/* Access tokens are opaque but bounded (Entra ID's JWTs run to a few kB). */
#define PROVIDER_TOKEN_MAX 16384

/* A token is not reused when it expires within this margin. */
#define PROVIDER_TOKEN_MARGIN (60 * USEC_PER_SEC)

void cn_provider_token_forget(CnProviderToken *t) {
        if (t->value)
                explicit_bzero(t->value, strlen(t->value));
        free(t->value);
        t->value = NULL;
        t->expires = 0;
}

int cn_provider_token_set(CnProviderToken *t, const char *value, usec_t expires) {
        char *copy = strdup(value);

        if (!copy)
                return -ENOMEM;
        cn_provider_token_forget(t);
        t->value = copy;
        t->expires = expires;
        return 0;
}

bool cn_provider_token_usable(const CnProviderToken *t) {
        if (!t->value)
                return false;
        /* Tokens without a known expiry are used until the API refuses them. */
        return t->expires == 0 || cn_now(CLOCK_REALTIME) + PROVIDER_TOKEN_MARGIN < t->expires;
}

void cn_provider_auth_fail(CnProviderCall *call, CnProviderAuth *auth, int error, usec_t retry_after,
                           const char *message) {
        CnProviderResult res = { .error = error, .retry_after = retry_after, .message = message };

        auth->fail(call, &res);
}

int cn_provider_authorize(CnProviderCall *call, CnProviderAuth *auth, const CnProviderToken *token,
                          CnProviderTokenFetch fetch) {
        assert(auth && auth->next && auth->fail);
        if (cn_provider_token_usable(token))
                return auth->next(call);
        auth->refreshed = true;
        return fetch(call, auth);
}

bool cn_provider_reauthorize(CnProviderCall *call, CnProviderAuth *auth, CnProviderToken *token,
                             CnProviderTokenFetch fetch, const CnProviderHttpReply *reply) {
        int r;

        if (reply->error != -EACCES || reply->status != 401 || auth->refreshed)
                return false;
        /* Revoked or expired early: one fresh token, then give up. */
        cn_provider_token_forget(token);
        auth->refreshed = true;
        r = fetch(call, auth);
        if (r < 0)
                cn_provider_auth_fail(call, auth, r, 0, "failed to start the token request");
        return true;
}

void cn_provider_oauth_token_reply(CnProviderCall *call, CnProviderAuth *auth, CnProviderToken *token,
                                   json_object *body) {
        json_object *exp = cn_json_get(body, "expires_in", NULL);
        const char *value = cn_json_string(body, "access_token", NULL);
        int64_t seconds = 0;
        int r;

        /* Azure's IMDS writes expires_in as a string, the others as a number. */
        if (exp && json_object_is_type(exp, json_type_string)) {
                char *end;

                errno = 0;
                seconds = strtoll(json_object_get_string(exp), &end, 10);
                if (errno != 0 || *end)
                        seconds = 0;
        } else if (exp && json_object_is_type(exp, json_type_int))
                seconds = json_object_get_int64(exp);
        if (isempty(value) || strlen(value) > PROVIDER_TOKEN_MAX || strpbrk(value, " \t\r\n")) {
                cn_provider_auth_fail(call, auth, -EBADMSG, 0, "no usable access_token in the token response");
                return;
        }
        r = cn_provider_token_set(token, value,
                                  seconds > 0 ? cn_now(CLOCK_REALTIME) + (usec_t) seconds * USEC_PER_SEC : 0);
        if (r < 0) {
                cn_provider_auth_fail(call, auth, r, 0, "out of memory");
                return;
        }
        r = auth->next(call);
        if (r < 0)
                cn_provider_auth_fail(call, auth, r, 0, "failed to start the API request");
}
