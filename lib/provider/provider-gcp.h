/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: Google Compute Engine (provider-gcp-auth.c: OAuth access tokens,
 * provider-gcp.c: settings and instance lookups). Parsers are exposed for the unit tests. */
#pragma once

#include <openssl/evp.h>

#include "provider-internal.h"

#define CN_PROVIDER_GCP_ID_PREFIX "gce://"

/* The provider's private state (cn_provider_data()). */
typedef struct Gcp {
        char *api_endpoint;  /* ".../compute/v1", no trailing slash */
        char *project;
        char *local_zone;
        char *ca_file;       /* for the Compute API and the token endpoint */
        char *metadata_url;  /* the metadata server, when no key is configured */
        /* a service account key (JSON) instead of the metadata server */
        char *client_email;
        char *private_key_id;
        char *token_uri;
        EVP_PKEY *key;
        CnProviderToken token;
} Gcp;

/* provider-gcp-auth.c: reads a service account key file into g (client_email, private key,
 * token_uri, and the project when g has none). The reason of a failure goes to *ret_error,
 * without the key. */
int cn_provider_gcp_load_key(Gcp *g, const char *path, char **ret_error);
void cn_provider_gcp_free_credentials(Gcp *g);
/* The signed JWT assertion (RS256) of a token request at time now (seconds). */
int cn_provider_gcp_jwt(const Gcp *g, uint64_t now, char **ret);

/* Starts the request of an access token (cn_provider_authorize() and cn_provider_reauthorize()
 * with g->token). */
int cn_provider_gcp_fetch_token(CnProviderCall *call, CnProviderAuth *auth);

/* The message of a Compute API ({"error": {"message"}}) or OAuth ({"error_description"}) error. */
const char *cn_provider_gcp_error_message(json_object *body);
/* GCE's throttling answers (403/429 with reason rateLimitExceeded, userRateLimitExceeded,
 * quotaExceeded) as -EAGAIN. */
int cn_provider_gcp_classify_error(long status, json_object *body, int error);

/* A Compute Engine instance resource; project names it in the providerID. */
int cn_provider_gcp_parse_instance(json_object *instance, const char *project, CnProviderInstance **ret);
/* "gce://<project>/<zone>/<name>" into its three parts (each non-empty, without '/'). */
int cn_provider_gcp_parse_provider_id(const char *provider_id, char **ret_project, char **ret_zone, char **ret_name);
