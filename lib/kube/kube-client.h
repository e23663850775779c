/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes REST client on an sd_event loop (HTTP through lib/core/http.h). Every call
 * is asynchronous: it queues the request and returns; the callback runs later from the loop, exactly
 * once, unless the request handle is freed first (which cancels it, and then no callback runs).
 *
 * Request handles: pass ret_request = NULL for a "floating" request the client owns until it
 * completes; or receive a handle, which the caller owns and must release with
 * cn_kube_request_free() (in or after the callback, or earlier to cancel). Freeing the handle
 * inside its own callback is safe: the result stays valid until the callback returns.
 *
 * Behaviour common to all requests:
 * - Client-side rate limit: token bucket with qps and burst (like client-go's, which
 *   cloud-controller-manager and kube-controller-manager configure with --kube-api-qps=20
 *   --kube-api-burst=30 by default; we use the same defaults). Watches count when they start.
 * - Retries: on 429 and 503 the request is repeated after Retry-After (seconds; capped at
 *   CN_KUBE_RETRY_AFTER_MAX_USEC; exponential backoff with jitter when the header is absent),
 *   for every verb, since the server did not process it; connection failures before anything was
 *   sent are retried for every verb; other 5xx and transport errors only for GET/LIST. At most
 *   max_retries repeats, then the last error is returned.
 * - Errors: the HTTP status and the Status object in the body are turned into negative errno (see
 *   the CN_KUBE_E* table below); the Status message and reason are handed to the callback.
 * - User-Agent: "cloudnode-<component>/<version>".
 * - One request counter per (verb, code) for /metrics, see cn_kube_client_register_metrics().
 * - Secrets (bearer token, key) are never logged nor included in messages. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "json-filter.h"
#include "kube-config.h"
#include "macro.h"

/* How HTTP status / Status.reason map to errno. */
#define CN_KUBE_EBADREQUEST EINVAL       /* 400 BadRequest, 422 Invalid */
#define CN_KUBE_EUNAUTHORIZED EPERM      /* 401 Unauthorized */
#define CN_KUBE_EFORBIDDEN EACCES        /* 403 Forbidden */
#define CN_KUBE_ENOTFOUND ENOENT         /* 404 NotFound */
#define CN_KUBE_ENOTALLOWED EOPNOTSUPP   /* 405 MethodNotAllowed */
#define CN_KUBE_EALREADYEXISTS EEXIST    /* 409 reason AlreadyExists */
#define CN_KUBE_ECONFLICT ESTALE         /* 409 Conflict (stale resourceVersion, precondition) */
#define CN_KUBE_EGONE EIDRM              /* 410 Gone / Expired: resourceVersion too old, re-list */
#define CN_KUBE_ETOOLARGE EFBIG          /* 413, or a response over the client's size cap */
#define CN_KUBE_EUNSUPPORTEDMEDIA EPROTONOSUPPORT /* 415 */
#define CN_KUBE_ETOOMANYREQUESTS EBUSY   /* 429 after retries */
#define CN_KUBE_EINTERNAL EREMOTEIO      /* 500 and other unexpected 5xx */
#define CN_KUBE_EUNAVAILABLE EHOSTUNREACH /* 502, 503 after retries */
#define CN_KUBE_ETIMEOUT ETIMEDOUT       /* 504, Status reason Timeout, client-side timeout */
#define CN_KUBE_ECONNECT ECONNREFUSED    /* could not connect */
#define CN_KUBE_ETLS EBADE               /* server certificate verification failed (lib/core/http.h) */
#define CN_KUBE_EPROTO EBADMSG           /* unparsable response */

#define CN_KUBE_DEFAULT_QPS 20.0
#define CN_KUBE_DEFAULT_BURST 30
#define CN_KUBE_DEFAULT_TIMEOUT_USEC (60ULL * 1000000ULL)
#define CN_KUBE_DEFAULT_MAX_RETRIES 10
#define CN_KUBE_DEFAULT_MAX_RESPONSE (64U * 1024U * 1024U)
#define CN_KUBE_DEFAULT_PAGE_SIZE 500
#define CN_KUBE_RETRY_AFTER_MAX_USEC (60ULL * 1000000ULL)

typedef struct CnKubeClient CnKubeClient;
typedef struct CnKubeRequest CnKubeRequest;

/* A resource type. group NULL or "" for the core group ("/api/v1/..."), else "/apis/GROUP/VERSION".
 * resource is the lower-case plural ("nodes"). */
typedef struct CnKubeResource {
        const char *group;
        const char *version;
        const char *resource;
        const char *kind; /* for involvedObject/ownerReferences; e.g. "Node" */
        bool namespaced;
} CnKubeResource;

extern const CnKubeResource cn_kube_resource_nodes;
extern const CnKubeResource cn_kube_resource_pods;
extern const CnKubeResource cn_kube_resource_events;
extern const CnKubeResource cn_kube_resource_configmaps;
extern const CnKubeResource cn_kube_resource_secrets;
extern const CnKubeResource cn_kube_resource_services;
extern const CnKubeResource cn_kube_resource_serviceaccounts;
extern const CnKubeResource cn_kube_resource_namespaces;
extern const CnKubeResource cn_kube_resource_leases;      /* coordination.k8s.io/v1 */
extern const CnKubeResource cn_kube_resource_deployments; /* apps/v1 */
extern const CnKubeResource cn_kube_resource_daemonsets;  /* apps/v1 */

typedef struct CnKubeClientOptions {
        const char *component;        /* User-Agent "cloudnode-<component>/<version>"; NULL: "client" */
        double qps;                   /* <= 0: CN_KUBE_DEFAULT_QPS */
        unsigned burst;               /* 0: CN_KUBE_DEFAULT_BURST */
        uint64_t timeout_usec;        /* per non-watch request; 0: CN_KUBE_DEFAULT_TIMEOUT_USEC */
        int max_retries;              /* < 0: none; 0: CN_KUBE_DEFAULT_MAX_RETRIES */
        size_t max_response_size;     /* 0: CN_KUBE_DEFAULT_MAX_RESPONSE */
        /* At most this many connections to the API server, all kept for reuse (lib/core/http.h,
         * cn_http_set_max_connections()): requests beyond wait for a free one rather than pay a
         * TLS handshake each. Each watch holds one. 0: no cap, CN_HTTP_IDLE_CONNECTIONS_MAX kept. */
        unsigned max_connections;
} CnKubeClientOptions;

/* What a finished request hands to its callback. Everything is borrowed for the duration of the
 * callback (json_object_get() to keep the object). */
typedef struct CnKubeResult {
        int error;          /* 0, or negative errno per the table above */
        long http_status;   /* 0 when no response was received */
        json_object *object;/* parsed body on success (NULL for empty bodies); the Status on error */
        const char *reason; /* Status.reason ("Conflict", "AlreadyExists", ...) or NULL */
        const char *message;/* Status.message or a transport error text; NULL on success */
} CnKubeResult;

typedef void (*CnKubeCallback)(CnKubeClient *c, const CnKubeResult *result, void *userdata);

/* The config is copied by reference: the client takes ownership of it (the caller must not free it
 * after success). e is referenced. */
int cn_kube_client_new(sd_event *e, CnKubeConfig *config, const CnKubeClientOptions *options,
                       CnKubeClient **ret);
/* Cancels every outstanding request without calling their callbacks. Not from within a callback
 * of this client (leave the loop first). Informers, leader electors and event recorders built on
 * the client must be freed before it. */
CnKubeClient *cn_kube_client_free(CnKubeClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeClient *, cn_kube_client_free);
#define _cleanup_kube_client_ _cleanup_(cn_kube_client_freep)
/* Requests sent whose answer is awaited (watches not counted; those waiting for the rate limiter
 * not sent yet): cn_http_awaited() of the client's connections. 0 for NULL. */
unsigned cn_kube_client_awaited(CnKubeClient *c);

sd_event *cn_kube_client_get_event(CnKubeClient *c);
CnKubeConfig *cn_kube_client_get_config(CnKubeClient *c);
/* Number of requests queued or in flight (watches included). */
unsigned cn_kube_client_pending(CnKubeClient *c);

/* Count every request into a counter `name` of a metrics registry (lib/core/metrics.h) with the
 * labels verb (the HTTP method: "GET", "POST", "PATCH", "PUT", "DELETE") and code (the HTTP status
 * as text, "<error>" when none was received), like client-go's rest_client_requests_total.
 * Retries count as separate requests. The registry must outlive the client; -EEXIST when it has
 * the metric already (one client per registry). */
typedef struct CnMetrics CnMetrics;
int cn_kube_client_register_metrics(CnKubeClient *c, CnMetrics *m, const char *name);

CnKubeRequest *cn_kube_request_free(CnKubeRequest *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeRequest *, cn_kube_request_free);
#define _cleanup_kube_request_ _cleanup_(cn_kube_request_freep)

/* URL path of a resource: "/api/v1/namespaces/NS/pods/NAME/status". ns NULL for cluster-scoped
 * (or "all namespaces" for namespaced lists); name, subresource optional. Names and namespaces are
 * validated (non-empty, no '/', not "." or "..", at most 253 characters): -EINVAL otherwise.
 * Namespaced resource with a name but no ns: -EINVAL. */
int cn_kube_resource_path(const CnKubeResource *r, const char *ns, const char *name, const char *subresource,
                          char **ret);

/* The generic request: method, path (with query, already escaped), optional body (serialized with
 * json_object_to_json_string_ext(..., JSON_C_TO_STRING_PLAIN)) and its content type (NULL:
 * "application/json"). Decoding, retries and rate limit as above. */
int cn_kube_request(CnKubeClient *c, const char *method, const char *path, json_object *body,
                    const char *content_type, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

int cn_kube_get(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                const char *subresource, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

typedef struct CnKubeListOptions {
        const char *label_selector;   /* e.g. "app=x,tier!=y" */
        const char *field_selector;   /* e.g. "metadata.name=node-1" */
        unsigned limit;               /* page size; 0: no limit parameter */
        const char *continue_token;   /* from a previous page's metadata.continue */
        const char *resource_version; /* list: "0" allows the watch cache; watch: where to start */
        unsigned timeout_seconds;     /* watch: server-side timeoutSeconds; 0: none sent */
        bool allow_watch_bookmarks;   /* watch only */
        /* list_all and watch: keep only these members of each object (list items, watch event
         * objects, DELETED ones included), parsed with json-filter.h so that the rest is never
         * built; the List's and a watch ERROR's own members are kept. NULL: everything. */
        const CnJsonFilter *filter;
        /* list_all: each item of the List is its JSON text (a json-c string, the filtered object
         * serialized) instead of a tree: a cache that keeps objects as text (the informer's
         * store_text) never holds the whole list as trees. */
        bool items_as_text;
} CnKubeListOptions;

/* The text kept of an object (items_as_text, the informer's store_text, cached Event bodies): a
 * json-c string, the object serialized without whitespace and with each of the strings most
 * Kubernetes objects repeat (member names such as "resourceVersion", a few values) written as one
 * byte below 0x20, which JSON text never has raw (-EINVAL if it is not an object); and the tree
 * built from such a text. Anything but a string holding one JSON object that way is -EBADMSG. */
int cn_kube_object_to_text(json_object *object, json_object **ret);
int cn_kube_object_from_text(json_object *text, json_object **ret);
/* The same text as plain bytes (a store that keeps it in its own allocations): *ret is malloc()ed
 * and NUL-terminated, *ret_len does not count the NUL; decoding reads s[0..len). */
int cn_kube_text_encode(json_object *object, char **ret, size_t *ret_len);
int cn_kube_text_decode(const char *s, size_t len, json_object **ret);
/* The key (metadata.name) of an object kept as such a text, read without building its tree when
 * that is certain to give what the tree would: the text starts with metadata.name, a string with
 * no escape or code byte in it, and names no namespace anywhere. A new string, or NULL (then build
 * the tree). */
char *cn_kube_object_text_plain_name(json_object *text);
char *cn_kube_text_plain_name(const char *s, size_t len);

/* Query string for the options, "?a=b&c=d" (escaped) or "" when none apply. watch adds watch=1
 * and the watch-only parameters. */
int cn_kube_list_query(const CnKubeListOptions *o, bool watch, char **ret);

/* One page; the result object is the List (items, metadata.resourceVersion, metadata.continue). */
int cn_kube_list(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                 CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

/* All pages, following metadata.continue with page size o->limit (0: CN_KUBE_DEFAULT_PAGE_SIZE).
 * The result object is one List whose items are all pages' items (compacted, cn_json_compact(), or
 * their text with o->items_as_text) and
 * whose metadata.resourceVersion is the consistent snapshot's (the first page's). A continue token that
 * expired (410) restarts the list from the beginning once. */
int cn_kube_list_all(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                     CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

typedef enum CnKubeWatchEventType {
        CN_KUBE_WATCH_ADDED,
        CN_KUBE_WATCH_MODIFIED,
        CN_KUBE_WATCH_DELETED,
        CN_KUBE_WATCH_BOOKMARK,
        _CN_KUBE_WATCH_EVENT_TYPE_MAX,
        _CN_KUBE_WATCH_EVENT_TYPE_INVALID = -EINVAL,
} CnKubeWatchEventType;

const char *cn_kube_watch_event_type_to_string(CnKubeWatchEventType t);
CnKubeWatchEventType cn_kube_watch_event_type_from_string(const char *s);

/* One watch event; object borrowed for the call. For BOOKMARK only metadata.resourceVersion is
 * meaningful. */
typedef void (*CnKubeWatchHandler)(CnKubeClient *c, CnKubeWatchEventType type, json_object *object,
                                   void *userdata);

/* The watch ended: result->error is 0 when the server closed the stream normally (timeout, rolling
 * restart: watch again from the last resourceVersion seen), CN_KUBE_EGONE (-EIDRM) when the
 * resourceVersion is too old (either as HTTP 410 or as an ERROR event with code 410 mid-stream:
 * re-list), or another error. The handle (if the caller holds one) must still be freed. */
typedef CnKubeCallback CnKubeWatchEnd;

/* Start a watch. o->resource_version is where to start (the list's resourceVersion). No client
 * timeout applies to the stream itself; if the server sends nothing (not even bookmarks) for
 * 2 * timeout_seconds + 30 s the watch ends with -ETIMEDOUT. Events arrive as the bytes come
 * in (parsed incrementally). */
int cn_kube_watch(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                  CnKubeWatchHandler handler, CnKubeWatchEnd end, void *userdata, CnKubeRequest **ret_request);

/* A create of an object with metadata.name may go over a connection in use before (a lost answer
 * that the HTTP client resends answers AlreadyExists); one with generateName always opens a new one. */
int cn_kube_create(CnKubeClient *c, const CnKubeResource *r, const char *ns, json_object *object,
                   CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

typedef enum CnKubePatchType {
        CN_KUBE_PATCH_MERGE, /* application/merge-patch+json (RFC 7386) */
        CN_KUBE_PATCH_JSON,  /* application/json-patch+json (RFC 6902), patch is an array */
        /* application/strategic-merge-patch+json: built-in types only; lists with a
         * patchMergeKey (e.g. Node status.conditions by type) merge element-wise */
        CN_KUBE_PATCH_STRATEGIC,
        _CN_KUBE_PATCH_TYPE_MAX,
} CnKubePatchType;

/* Parse the body of this request's successful response with a filter (json-filter.h): the
 * callback's object keeps only those members. For a caller that reads a few fields of a large
 * answer (a Node returned by a PATCH). Error bodies (Status) are parsed whole. */
void cn_kube_request_set_filter(CnKubeRequest *r, const CnJsonFilter *f);
/* A 429 of this request goes to the callback at once instead of being retried: for requests the
 * server refuses by policy rather than by load (a Pod eviction a PodDisruptionBudget forbids),
 * which the caller retries on its own schedule. */
void cn_kube_request_set_no_retry_429(CnKubeRequest *r);

/* PATCH; subresource "status" for the status subresource. To make a merge patch conditional, put
 * metadata.resourceVersion in it: a stale one fails with CN_KUBE_ECONFLICT. */
int cn_kube_patch(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                  const char *subresource, CnKubePatchType type, json_object *patch, CnKubeCallback cb,
                  void *userdata, CnKubeRequest **ret_request);

/* PUT of a whole object (with its metadata.resourceVersion). Not for Nodes (docs/design.md,
 * "Node writes"). */
int cn_kube_update(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                   const char *subresource, json_object *object, CnKubeCallback cb, void *userdata,
                   CnKubeRequest **ret_request);

typedef struct CnKubeDeleteOptions {
        const char *precondition_uid;              /* optional */
        const char *precondition_resource_version; /* optional */
        const char *propagation_policy;            /* "Background", "Foreground", "Orphan" or NULL */
} CnKubeDeleteOptions;

int cn_kube_delete(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                   const CnKubeDeleteOptions *o, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request);

/* Decode an error response: http_status plus body (may be NULL/not JSON). Returns the negative
 * errno; reason/message (optional, caller frees) from the Status object when there is one, else a
 * generic text naming the HTTP status. */
int cn_kube_status_to_errno(long http_status, const char *body, size_t size, char **ret_reason,
                            char **ret_message);

/* Same for an already parsed Status object (e.g. of a watch ERROR event, whose "code" is used when
 * http_status is 0). reason/message are borrowed from status. */
int cn_kube_status_object_to_errno(long http_status, json_object *status, const char **ret_reason,
                                   const char **ret_message);

/* Client-side token bucket (client-go's flowcontrol.NewTokenBucketRateLimiter): starts full with
 * burst tokens, refills at qps per second up to burst. Exposed for tests with a fake clock. */
typedef struct CnKubeRateLimiter {
        double qps;
        double burst;
        double tokens;
        uint64_t last_usec;
} CnKubeRateLimiter;

void cn_kube_rate_limiter_init(CnKubeRateLimiter *l, double qps, unsigned burst, uint64_t now_usec);
/* Take one token: returns 0 when the request may go now, else how many µs from now_usec it must
 * wait (the token is reserved either way, so consecutive callers queue up in order). */
uint64_t cn_kube_rate_limiter_reserve(CnKubeRateLimiter *l, uint64_t now_usec);

/* Incremental parser for a watch stream: a sequence of JSON objects {"type":..., "object":...}
 * separated by optional whitespace/newlines, fed in arbitrary pieces (single bytes included).
 * Exposed for tests and fuzzing. Each complete event is handed to the callback; returning a
 * negative value from it stops parsing with that error. ERROR events with Status code 410 turn
 * into CN_KUBE_EGONE; other ERROR events into the errno of their Status. */
typedef struct CnKubeWatchParser CnKubeWatchParser;
typedef int (*CnKubeWatchParserFn)(CnKubeWatchEventType type, json_object *object, void *userdata);

int cn_kube_watch_parser_new(size_t max_event_size, CnKubeWatchParserFn fn, void *userdata,
                             CnKubeWatchParser **ret);
CnKubeWatchParser *cn_kube_watch_parser_free(CnKubeWatchParser *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeWatchParser *, cn_kube_watch_parser_free);
/* Returns 0, a negative errno from the callback, -EBADMSG on malformed input, -E2BIG when one event
 * exceeds max_event_size. After an error the parser refuses further input. reterr_message optional:
 * the Status message of an ERROR event. */
int cn_kube_watch_parser_feed(CnKubeWatchParser *p, const void *data, size_t size, char **reterr_message);
/* True when the input so far ended in the middle of an event (a cut stream). */
bool cn_kube_watch_parser_partial(CnKubeWatchParser *p);
/* Parse each event's object with this filter (json-filter.h; a Status's members are kept too).
 * Before the first feed. */
void cn_kube_watch_parser_set_filter(CnKubeWatchParser *p, const CnJsonFilter *object_filter);

/* Incremental parser of one List page, fed as the response arrives (single bytes included):
 * each element of "items", parsed with item_filter (json-filter.h; NULL keeps it whole), goes to
 * the callback as soon as its last byte is there, so a page is never held whole. Exposed for tests
 * and fuzzing. A negative return of the callback stops parsing with that error. */
typedef struct CnKubeListParser CnKubeListParser;
typedef int (*CnKubeListParserFn)(json_object *item, void *userdata);

int cn_kube_list_parser_new(size_t max_size, const CnJsonFilter *item_filter, CnKubeListParserFn fn, void *userdata,
                            CnKubeListParser **ret);
CnKubeListParser *cn_kube_list_parser_free(CnKubeListParser *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeListParser *, cn_kube_list_parser_free);
/* Returns 0, a negative errno from the callback, -EBADMSG on input that is not a List (an object
 * whose items, if any, are objects), -E2BIG once the page exceeds max_size bytes. After an error
 * the parser refuses further input. */
int cn_kube_list_parser_feed(CnKubeListParser *p, const void *data, size_t size);
/* After the last byte: the List's members other than its items, with "items": [] (-EBADMSG for a
 * page that ended early or is not valid JSON). */
int cn_kube_list_parser_finish(CnKubeListParser *p, json_object **ret);

/* The object's metadata.resourceVersion as a number. resourceVersions are opaque to clients, but
 * every API server hands out etcd revisions (the fake its counter), which are decimal and
 * increase; 0 when it is not such a number, which turns an ordering check off. */
uint64_t cn_kube_object_resource_version(json_object *o);
