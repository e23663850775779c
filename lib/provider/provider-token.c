/* SPDX-License-Identifier: Apache-2.0 */
/* The bearer token a provider's API requests carry (Keystone, Google OAuth, Entra ID): cached
 * until shortly before it expires, fetched before a request when there is none, and fetched
 * again once when the API refuses the cached one. */
#include "provider-internal.h"
#include "time-util.h"

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
