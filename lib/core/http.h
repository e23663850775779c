/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 client on sd-event, TLS through OpenSSL. One CnHttp per event loop; requests are
 * submitted and complete through a callback, transfers never block the loop (host names are
 * resolved in a thread). Connections are kept open and reused by requests with the same peer and
 * TLS settings. TLS verification is always on (there is no switch to turn it off). Response bodies
 * are capped; headers callers need (Retry-After, X-Subject-Token, RateLimit-*) are kept. Watch
 * streams use a data callback instead of the body buffer. Failures are negative errno, with a
 * message for debug logs. Proxies come from the environment as libcurl reads it (http_proxy,
 * https_proxy or HTTPS_PROXY, all_proxy, no_proxy or NO_PROXY; http:// proxies, CONNECT for https).
 *
 * Lifetime: cn_http_request_new() returns a reference the caller owns; a submitted request keeps
 * itself alive until its completion callback has returned, so a caller may drop its reference right
 * after submitting. Cancelling or freeing the CnHttp never calls completion callbacks; requests the
 * caller still holds stay valid after cn_http_free() (detached: submitting them gives -ESTALE). */
#pragma once

#include <systemd/sd-event.h>

#include "buf.h"
#include "time-util.h"

typedef struct CnHttp CnHttp;
typedef struct CnHttpRequest CnHttpRequest;

#define CN_HTTP_DEFAULT_MAX_RESPONSE (16U * 1024U * 1024U)
#define CN_HTTP_MAX_HEADER_BYTES (64U * 1024U)
#define CN_HTTP_DEFAULT_CONNECT_TIMEOUT (10 * USEC_PER_SEC)
/* Idle connections kept for reuse per CnHttp (more would stay open for good after a burst of
 * parallel writes). */
#define CN_HTTP_IDLE_CONNECTIONS_MAX 4L

/* error: 0 when an HTTP response arrived (any status), otherwise negative errno:
 * -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH (resolution/route), -EFBIG (response over the cap),
 * -EPROTO (bad HTTP/TLS handshake), -EBADE (certificate verification failed), -ECONNRESET,
 * -ECANCELED (the data callback returned an error; that error is reported instead when known). */
typedef void (*CnHttpCallback)(CnHttpRequest *req, int error, void *userdata);
/* Called with body data of a 2xx response when set; such data does not go to the body buffer.
 * A negative return aborts the transfer and is reported as the completion error. */
typedef int (*CnHttpDataCallback)(CnHttpRequest *req, const void *data, size_t size, void *userdata);

int cn_http_new(sd_event *event, CnHttp **ret);
/* Aborts every pending request without calling their callbacks. Not from within a callback. */
CnHttp *cn_http_free(CnHttp *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnHttp *, cn_http_free);
sd_event *cn_http_get_event(CnHttp *h);
/* At most n connections to one server, all kept open for reuse: a request that finds them busy
 * waits for one (within its timeout) instead of opening another, which over TLS costs a handshake,
 * more CPU than the request itself, and then is closed again once more than
 * CN_HTTP_IDLE_CONNECTIONS_MAX are idle. A streaming response (a watch) holds its connection for
 * as long as it lasts: n must leave room for every one of them. */
int cn_http_set_max_connections(CnHttp *h, unsigned n);

int cn_http_request_new(CnHttp *h, const char *method, const char *url, CnHttpRequest **ret);
CnHttpRequest *cn_http_request_ref(CnHttpRequest *r);
CnHttpRequest *cn_http_request_unref(CnHttpRequest *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnHttpRequest *, cn_http_request_unref);

/* Setup, before submitting. Header names/values with CR, LF or NUL are refused (-EINVAL). */
int cn_http_request_add_header(CnHttpRequest *r, const char *name, const char *value);
/* "Authorization: Bearer TOKEN"; the token never appears in logs. */
int cn_http_request_set_bearer_token(CnHttpRequest *r, const char *token);
/* The body is copied. content_type may be NULL. */
int cn_http_request_set_body(CnHttpRequest *r, const void *data, size_t size, const char *content_type);
/* Whole-transfer timeout; 0 means none (watch streams end by the server's timeoutSeconds). */
void cn_http_request_set_timeout(CnHttpRequest *r, usec_t timeout);
void cn_http_request_set_connect_timeout(CnHttpRequest *r, usec_t timeout);
/* A POST goes on a new connection, because a request is sent again by itself when a reused
 * connection closes before any answer, and a second POST may make a second object. For a POST
 * whose repetition does no harm (a create of a named object: the second one answers
 * AlreadyExists), this lets it reuse a connection and spare a TLS handshake. */
void cn_http_request_set_resend_safe(CnHttpRequest *r);
/* Default CN_HTTP_DEFAULT_MAX_RESPONSE. */
void cn_http_request_set_max_response(CnHttpRequest *r, size_t max);
/* Trust anchors: a PEM file or PEM data, then the only ones trusted (neither the system's CA
 * directory nor its bundle, which are trusted when neither is given). */
int cn_http_request_set_ca_file(CnHttpRequest *r, const char *path);
int cn_http_request_set_ca_pem(CnHttpRequest *r, const void *pem, size_t size);
/* Instead of trust anchors: the peer's certificate must have this SHA-256 digest (of its DER form,
 * what `openssl x509 -fingerprint -sha256` and Proxmox VE show), whoever signed it and whatever
 * names it holds: the pinning of self-signed servers. */
#define CN_HTTP_SHA256_SIZE 32
int cn_http_request_set_pinned_sha256(CnHttpRequest *r, const uint8_t digest[static CN_HTTP_SHA256_SIZE]);
/* Client certificate and key, as PEM files or as PEM data. */
int cn_http_request_set_client_cert_file(CnHttpRequest *r, const char *cert_path, const char *key_path);
int cn_http_request_set_client_cert_pem(CnHttpRequest *r, const void *cert, size_t cert_size, const void *key,
                                        size_t key_size);
void cn_http_request_set_data_callback(CnHttpRequest *r, CnHttpDataCallback cb, void *userdata);
/* Never use a proxy from the environment (link-local metadata services). */
void cn_http_request_set_no_proxy(CnHttpRequest *r);

int cn_http_request_submit(CnHttpRequest *r, CnHttpCallback cb, void *userdata);
/* Stops a submitted request; its callback is not called. Safe on finished requests. */
void cn_http_request_cancel(CnHttpRequest *r);
/* How many submitted requests of h await their answer; streaming ones (with a data callback, such
 * as watches) are not counted. 0 for NULL. */
unsigned cn_http_awaited(CnHttp *h);
/* Submits (when not yet submitted) and runs the event loop until this request completes; for CLI
 * tools and tests. Returns the completion error. Not from within a callback of the same loop. */
int cn_http_request_run(CnHttpRequest *r);

/* Results, valid after completion. */
long cn_http_request_get_status(CnHttpRequest *r);
/* Last value of a response header (case-insensitive name), or NULL. Borrowed. */
const char *cn_http_request_get_header(CnHttpRequest *r, const char *name);
/* Body buffer (empty when a data callback took the data). Borrowed. */
const char *cn_http_request_get_body(CnHttpRequest *r, size_t *ret_size);
int cn_http_request_steal_body(CnHttpRequest *r, char **ret, size_t *ret_size);
/* Retry-After of the response as a delay, -ENOENT when absent or unparsable. */
int cn_http_request_get_retry_after(CnHttpRequest *r, usec_t *ret);
/* A description of the failure, for debug logs ("" if none). */
const char *cn_http_request_get_error_message(CnHttpRequest *r);
const char *cn_http_request_get_url(CnHttpRequest *r);
const char *cn_http_request_get_method(CnHttpRequest *r);

/* Percent-escapes s as one URL query value or path segment (every byte but A-Z a-z 0-9 - . _ ~).
 * NULL when out of memory; the caller frees. */
char *cn_http_escape(const char *s);
/* Decodes the %XX escapes of n bytes of s (a '+' stays a '+'). NUL-terminated; NULL when out of
 * memory; the caller frees. */
char *cn_http_unescape(const char *s, size_t n, size_t *ret_len);
