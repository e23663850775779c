/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: what the provider implementations (provider-<cloud>*.c) share with
 * the provider table (provider.c) and the cloud API requests (provider-http.c).
 *
 * The machine lifecycle of the providers (Cluster API infrastructure machines) is kept apart from
 * the InstancesV2 lookups in provider-<cloud>.c. Instances are reported to the controller as a
 * provider-neutral JSON view:
 *   {"id": "42", "providerID": "hcloud://42", "state": "running", "ready": true,
 *    "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, ...]}
 * and found by the label/tag CN_MACHINE_UID_LABEL = the CloudnodeMachine's UID, so that a create
 * is never repeated after a crash between the create and the status write. */
#pragma once

#include "http.h"
#include "json-util.h"
#include "provider.h"

/* [Global] key of the cloud config, else (when the provider may use it) the environment variable
 * env (may be NULL). Borrowed. */
const char *cn_provider_setting(CnProvider *p, json_object *cfg, const char *key, const char *env);
/* A secret from a file: its first line, trailing whitespace removed (-ENODATA when empty,
 * -E2BIG beyond 4 KiB). */
int cn_provider_read_secret_file(const char *path, char **ret);

/* The API token of clouds with one: [Global] token (or the environment variable env), else the
 * first line of token-file; what names the cloud in the error. */
int cn_provider_token_setting(CnProvider *p, json_object *cfg, const char *env, const char *what, char **ret_token,
                              char **ret_error);
/* Appends an address from a cloud's answer (none when empty); one that is not an IP address
 * is -EBADMSG. */
int cn_provider_instance_add_address(CnProviderInstance *i, CnNodeAddressType t, const char *address);
/* An endpoint URL copied without trailing slashes (paths are joined to it). */
char *cn_provider_endpoint_dup(const char *url);

/* Sets *ret_error (when non-NULL) to the formatted reason and returns -abs(error). */
int cn_provider_config_error(char **ret_error, int error, const char *fmt, ...) _printf_(3, 4);

/* Private state of the provider (ops->size bytes, zeroed). */
void *cn_provider_data(CnProvider *p);
CnHttp *cn_provider_http(CnProvider *p);

/* One JSON request to the cloud API, decoded: 2xx -> body parsed (NULL when empty); 404 ->
 * -ENOENT; 401/403 -> -EACCES; 400/422 -> -EINVAL; 409 -> -EEXIST; 429 and 5xx -> -EAGAIN with
 * Retry-After; transport errors as lib/core/http.h reports them. `message` is the API's error text,
 * extracted by the provider's error parser. */
typedef struct CnProviderHttpReply {
        int error;
        long status;
        json_object *body;
        json_object *error_body; /* the parsed body of an error answer, when it had one */
        usec_t retry_after;
        const char *message;
        const char *subject_token; /* X-Subject-Token (Keystone) */
} CnProviderHttpReply;

typedef void (*CnProviderHttpCallback)(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
/* Pulls a human-readable message out of an error body (may return NULL). Borrowed from body. */
typedef const char *(*CnProviderErrorParser)(json_object *body);
/* Reclassifies an error answer from its body where a cloud says more than the status (GCE's 403
 * rateLimitExceeded is a retryable throttle, not a refusal); returns the errno to use. */
typedef int (*CnProviderErrorClassifier)(long status, json_object *body, int error);

typedef struct CnProviderHttpOptions {
        const char *bearer_token;       /* Authorization: Bearer */
        const char *auth_token;         /* X-Auth-Token (OpenStack) */
        const char *ca_file;
        const uint8_t *pinned_sha256;   /* or the server certificate's SHA-256 (CN_HTTP_SHA256_SIZE bytes) */
        const char *const *headers;     /* NULL-terminated "Name: value" list */
        json_object *body;              /* sent as application/json */
        const char *form;               /* or this, as application/x-www-form-urlencoded */
        const void *raw_body;           /* or these raw_body_size bytes, as content_type */
        size_t raw_body_size;
        const char *content_type;
        CnTreeParser body_parser;       /* of answers; NULL: JSON */
        CnProviderErrorParser error_parser;
        CnProviderErrorClassifier error_classifier;
        const char *operation;          /* metric label */
} CnProviderHttpOptions;

/* A provider keeps per-call state (copied lookup keys, the stage of a multi-request lookup) on
 * the call; it is freed with the call. */
void cn_provider_call_set_state(CnProviderCall *c, void *state, void (*free_state)(void *));
void *cn_provider_call_get_state(CnProviderCall *c);
CnProvider *cn_provider_call_provider(CnProviderCall *c);
/* Issues a request on the call; replaces any previous one. The callback runs on the loop. */
int cn_provider_call_http(CnProviderCall *c, const char *method, const char *url, const CnProviderHttpOptions *o,
                          CnProviderHttpCallback cb, void *userdata);
/* Runs next(c) on the loop after delay (the wait between polls of a cloud's asynchronous task);
 * the call stays in flight meanwhile, and freeing it cancels the wait. Not while a request is in
 * flight. */
int cn_provider_call_after(CnProviderCall *c, usec_t delay, void (*next)(CnProviderCall *c));
/* Finishes an instance lookup: answers the caller (once) and releases the call's in-flight
 * reference. Takes ownership of instance. */
void cn_provider_call_finish_instance(CnProviderCall *c, const CnProviderResult *res, CnProviderInstance *instance);
/* The same without an instance: the fail() of an instance lookup's CnProviderAuth. */
void cn_provider_call_fail_instance(CnProviderCall *c, const CnProviderResult *res);

/* provider-token.c: the bearer token of a provider's API, cached until shortly before it
 * expires. */
typedef struct CnProviderToken {
        char *value;    /* secret */
        usec_t expires; /* CLOCK_REALTIME; 0 when unknown */
} CnProviderToken;

void cn_provider_token_forget(CnProviderToken *t);
int cn_provider_token_set(CnProviderToken *t, const char *value, usec_t expires);
bool cn_provider_token_usable(const CnProviderToken *t);

/* A call that needs the token keeps one CnProviderAuth in its state: next() issues its request
 * once a token is there, fail() ends the call when none can be had. */
typedef struct CnProviderAuth {
        int (*next)(CnProviderCall *call);
        void (*fail)(CnProviderCall *call, const CnProviderResult *res);
        bool refreshed; /* the token was fetched for this call */
} CnProviderAuth;

/* An OAuth 2.0 token answer ({"access_token", "expires_in"}): stores the token and runs
 * auth->next, or fails the call when the answer holds no usable token. */
void cn_provider_oauth_token_reply(CnProviderCall *call, CnProviderAuth *auth, CnProviderToken *token,
                                   json_object *body);
/* Starts the provider's token request; its answer stores the token and runs auth->next. */
typedef int (*CnProviderTokenFetch)(CnProviderCall *call, CnProviderAuth *auth);
void cn_provider_auth_fail(CnProviderCall *call, CnProviderAuth *auth, int error, usec_t retry_after,
                           const char *message);
/* Runs auth->next at once when the token is usable, else fetch(). */
int cn_provider_authorize(CnProviderCall *call, CnProviderAuth *auth, const CnProviderToken *token,
                          CnProviderTokenFetch fetch);
/* A reply of 401 on a call whose token was not fetched afresh: forgets the token and fetches one
 * more. True when it took the call over (the reply is then not to be used). */
bool cn_provider_reauthorize(CnProviderCall *call, CnProviderAuth *auth, CnProviderToken *token,
                             CnProviderTokenFetch fetch, const CnProviderHttpReply *reply);

/* Machine lifecycle calls (provider-<cloud>-machine.c): creates the call (exactly one of mcb/ccb),
 * runs start(call, arg) to issue its first request, and finishes it with one of the two functions
 * below. A negative return from start unwinds and is returned (no callback). The instance passed
 * to finish_machine is consumed (the callback borrows it). */
typedef int (*CnProviderCallStart)(CnProviderCall *c, void *arg);
int cn_provider_start_machine_call(CnProvider *p, CnProviderMachineCallback mcb, CnProviderCleanupCallback ccb,
                                   void *userdata, CnProviderCallStart start, void *arg, CnProviderCall **ret);
void cn_provider_call_finish_machine(CnProviderCall *c, const CnProviderResult *res, json_object *instance);
void cn_provider_call_finish_cleanup(CnProviderCall *c, const CnProviderResult *res, bool done);
/* The answer of a DELETE in a cleanup call that lists again until nothing is left: finishes it
 * not done (a 404 counts as deleted). */
void cn_provider_on_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* Appends the failure domain {"name", "controlPlane": true, "attributes"} to list; attributes are
 * key, value pairs up to a NULL key (empty or NULL values left out). */
int cn_provider_failure_domain_add(json_object *list, const char *name, const char *const *attributes);


/* Cloud API error bodies are small; a body bigger than this is not an answer we can use. */
#define PROVIDER_MAX_RESPONSE (8U * 1024U * 1024U)
#define PROVIDER_REQUEST_TIMEOUT (30 * USEC_PER_SEC)

struct CnProvider {
        unsigned n_ref;
        const CnProviderOps *ops;
        CnHttp *http;
        CnProviderRequestCounter counter;
        void *counter_userdata;
        void *data;
        bool no_environment;
};

typedef enum CallMode {
        CALL_METADATA,
        CALL_EXISTS,
        CALL_SHUTDOWN,
        CALL_MACHINE,
        CALL_CLEANUP,
} CallMode;

struct CnProviderCall {
        unsigned n_ref;
        CnProvider *provider;
        CnHttpRequest *req;
        bool http_pending;   /* req is submitted and its completion has not run yet */
        bool finished;
        CallMode mode;
        CnProviderInstanceCallback instance_cb;
        CnProviderBoolCallback bool_cb;
        CnProviderMachineCallback machine_cb;
        CnProviderCleanupCallback cleanup_cb;
        void *userdata;
        void *state;
        void (*free_state)(void *);
        /* the request in flight */
        CnProviderHttpCallback http_cb;
        void *http_userdata;
        CnProviderErrorParser error_parser;
        CnProviderErrorClassifier error_classifier;
        CnTreeParser body_parser;
        const char *operation;
        /* a wait between requests (cn_provider_call_after()) */
        sd_event_source *timer;
        void (*timer_cb)(CnProviderCall *c);
};

/* Drops one reference; the last one frees the call and cancels its request. */
CnProviderCall *cn_provider_call_unref(CnProviderCall *c);

#define CN_PROVIDER_MACHINE_UID_LABEL "cloudnode.io/machine-uid"

/* provider.c: the neutral view of an instance the provider parsed, with the cloud's own state
 * name and whether that state is "running". */
int cn_provider_machine_view(const CnProviderInstance *i, const char *state, bool ready, json_object **ret);

