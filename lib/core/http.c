/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl multi socket API on sd-event. curl tells us which sockets to watch (socket callback) and
 * when to call it back (timer callback); we turn those into sd-event I/O and time sources and
 * hand their events back to curl_multi_socket_action(). Completed transfers are collected with
 * curl_multi_info_read() after each action, outside of any curl callback, so completion callbacks
 * may submit or cancel requests freely. */
#include <limits.h>
#include <strings.h>
#include <sys/epoll.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "http.h"
#include "log.h"
#include "string-util.h"

typedef struct HttpSocket HttpSocket;
struct HttpSocket {
        CnHttp *http;
        curl_socket_t fd;
        sd_event_source *source;
        HttpSocket *prev, *next;
};

struct CnHttp {
        sd_event *event;
        sd_event_source *timer;
        CURLM *multi;
        HttpSocket *sockets;
        CnHttpRequest *requests; /* every request of this client that is still alive */
};

struct CnHttpRequest {
        unsigned n_ref;
        CnHttp *http;
        CURL *easy;
        char *method, *url;
        struct curl_slist *headers;
        char *body;
        size_t max_response;
        CnBuf response;
        char **response_headers;
        size_t response_header_bytes;
        long status;
        CnHttpCallback callback;
        void *userdata;
        CnHttpDataCallback data_callback;
        void *data_userdata;
        int data_error;
        int error;
        bool submitted, done, too_big, headers_too_big, has_content_type;
        bool pinned;
        uint8_t pinned_sha256[CN_HTTP_SHA256_SIZE];
        char errbuf[CURL_ERROR_SIZE];
        CnHttpRequest *prev, *next;
};

int cn_http_error_from_curl(CURLcode c) {
        switch (c) {
        case CURLE_OK:
                return 0;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_FILESIZE_EXCEEDED:
                return -EFBIG;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
                return -EBADE;
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
                return -ENOKEY;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EPROTO;
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
                return -ECONNRESET;
        case CURLE_URL_MALFORMAT:
                return -EINVAL;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        case CURLE_TOO_MANY_REDIRECTS:
                return -ELOOP;
        default:
                return -EIO;
        }
}

static void process_done(CnHttp *h);

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CnHttp *h = ASSERT_PTR(userdata);
        int action = 0, running;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;
        (void) curl_multi_socket_action(h->multi, fd, action, &running);
        process_done(h);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnHttp *h = ASSERT_PTR(userdata);
        int running;

        (void) curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        process_done(h);
        return 0;
}

static void http_socket_free(HttpSocket *hs) {
        CnHttp *h = hs->http;

        if (hs->prev)
                hs->prev->next = hs->next;
        else
                h->sockets = hs->next;
        if (hs->next)
                hs->next->prev = hs->prev;
        sd_event_source_disable_unref(hs->source);
        free(hs);
}

static int socket_callback(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        CnHttp *h = ASSERT_PTR(userp);
        HttpSocket *hs = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                if (hs) {
                        (void) curl_multi_assign(h->multi, fd, NULL);
                        http_socket_free(hs);
                }
                return 0;
        }
        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;

        if (hs) {
                r = sd_event_source_set_io_events(hs->source, events);
                if (r >= 0)
                        r = sd_event_source_set_enabled(hs->source, SD_EVENT_ON);
                return r < 0 ? -1 : 0;
        }
        hs = calloc(1, sizeof(*hs));
        if (!hs)
                return -1;
        r = sd_event_add_io(h->event, &hs->source, fd, events, on_io, h);
        if (r < 0) {
                log_debug_errno(r, "Failed to watch curl socket: %m");
                free(hs);
                return -1;
        }
        (void) sd_event_source_set_description(hs->source, "curl-io");
        hs->http = h;
        hs->fd = fd;
        hs->next = h->sockets;
        if (hs->next)
                hs->next->prev = hs;
        h->sockets = hs;
        if (curl_multi_assign(h->multi, fd, hs) != CURLM_OK) {
                http_socket_free(hs);
                return -1;
        }
        return 0;
}

static int timer_callback(CURLM *multi, long timeout_ms, void *userp) {
        CnHttp *h = ASSERT_PTR(userp);
        int r;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(h->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
        r = sd_event_source_set_time(h->timer, cn_usec_add(cn_now(CLOCK_MONOTONIC),
                                                            (usec_t) timeout_ms * USEC_PER_MSEC));
        if (r >= 0)
                r = sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
        return r < 0 ? -1 : 0;
}

int cn_http_new(sd_event *event, CnHttp **ret) {
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        int r;

        assert(event);
        assert(ret);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(event);
        r = sd_event_add_time(event, &h->timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_MSEC, on_timer, h);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(h->timer, "curl-timer");
        h->multi = curl_multi_init();
        if (!h->multi)
                return -ENOMEM;
        if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_callback) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_callback) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, CN_HTTP_IDLE_CONNECTIONS_MAX) != CURLM_OK)
                return -EIO;
        *ret = TAKE_PTR(h);
        return 0;
}

int cn_http_set_max_connections(CnHttp *h, unsigned n) {
        assert(h);
        n = MAX(n, 1U);
        if (curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long) n) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) n) != CURLM_OK)
                return -EINVAL;
        return 0;
}

sd_event *cn_http_get_event(CnHttp *h) {
        return ASSERT_PTR(h)->event;
}

static void request_unlink(CnHttpRequest *r) {
        CnHttp *h = r->http;

        if (r->prev)
                r->prev->next = r->next;
        else if (h && h->requests == r)
                h->requests = r->next;
        if (r->next)
                r->next->prev = r->prev;
        r->prev = r->next = NULL;
}

/* Takes a submitted request out of curl and drops the reference the submission held. */
static void request_detach(CnHttpRequest *r) {
        if (!r->submitted || r->done)
                return;
        r->done = true;
        if (r->http && r->http->multi)
                (void) curl_multi_remove_handle(r->http->multi, r->easy);
        cn_http_request_unref(r);
}

CnHttp *cn_http_free(CnHttp *h) {
        if (!h)
                return NULL;
        /* Requests the caller still holds outlive the client, detached from it; the extra reference
         * keeps each alive while that happens, as the caller may hold none. */
        while (h->requests) {
                CnHttpRequest *r = cn_http_request_ref(h->requests);
                request_detach(r);
                request_unlink(r);
                r->http = NULL;
                cn_http_request_unref(r);
        }
        if (h->multi) {
                /* Cached connections are closed now; their sources go below, not one by one. */
                (void) curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, NULL);
                (void) curl_multi_cleanup(h->multi);
        }
        while (h->sockets)
                http_socket_free(h->sockets);
        sd_event_source_disable_unref(h->timer);
        sd_event_unref(h->event);
        free(h);
        return NULL;
}

static size_t write_callback(char *ptr, size_t size, size_t nmemb, void *userdata) {
        CnHttpRequest *r = ASSERT_PTR(userdata);
        size_t n = size * nmemb;
        long status = 0;
        int k;

        (void) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        if (r->data_callback && status >= 200 && status < 300) {
                k = r->data_callback(r, ptr, n, r->data_userdata);
                if (k < 0) {
                        r->data_error = k;
                        return 0;
                }
                return n;
        }
        if (cn_buf_add(&r->response, ptr, n) < 0) {
                r->too_big = true;
                return 0;
        }
        return n;
}

static size_t header_callback(char *ptr, size_t size, size_t nmemb, void *userdata) {
        CnHttpRequest *r = ASSERT_PTR(userdata);
        size_t n = size * nmemb;
        char *line;

        /* A new status line (after 100 Continue or an HTTP/2 upgrade) starts a new header set. */
        if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
                strv_free(r->response_headers);
                r->response_headers = NULL;
                return n;
        }
        r->response_header_bytes += n;
        if (r->response_header_bytes > CN_HTTP_MAX_HEADER_BYTES) {
                r->headers_too_big = true;
                return 0;
        }
        line = strndup(ptr, n);
        if (!line)
                return 0;
        line[strcspn(line, "\r\n")] = 0;
        if (!strchr(line, ':')) {
                free(line);
                return n;
        }
        return strv_push(&r->response_headers, line) < 0 ? 0 : n;
}

int cn_http_request_new(CnHttp *h, const char *method, const char *url, CnHttpRequest **ret) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
        bool ok;

        assert(h);
        assert(method);
        assert(url);
        assert(ret);
        if (isempty(method) || strpbrk(method, " \r\n\t") || cn_string_has_cc(url, false))
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->n_ref = 1;
        r->http = h;
        r->next = h->requests;
        if (r->next)
                r->next->prev = r;
        h->requests = r;
        r->max_response = CN_HTTP_DEFAULT_MAX_RESPONSE;
        r->method = strdup(method);
        r->url = strdup(url);
        r->easy = curl_easy_init();
        if (!r->method || !r->url || !r->easy)
                return -ENOMEM;

        ok = curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_URL, url) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
             /* Verification is not configurable on purpose. */
             curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_SSLVERSION, (long) CURL_SSLVERSION_TLSv1_2) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, write_callback) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, header_callback) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->errbuf) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
             /* Over TLS libcurl copies each request into an upload buffer of this size, one per
              * request in flight; its 64 KiB default is for bulk uploads. Our bodies are small:
              * the smallest size it takes (a larger body goes out in several writes). */
             curl_easy_setopt(r->easy, CURLOPT_UPLOAD_BUFFERSIZE, 16384L) == CURLE_OK &&
             /* And each transfer has a receive buffer, 16 KiB by default, for as long as it
              * lives: 8 KiB (a TLS record of 16 KiB is then read in two). */
             curl_easy_setopt(r->easy, CURLOPT_BUFFERSIZE, 8192L) == CURLE_OK &&
             curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS,
                              (long) (CN_HTTP_DEFAULT_CONNECT_TIMEOUT / USEC_PER_MSEC)) == CURLE_OK;
        if (!ok)
                return -EIO;
        if (streq(method, "HEAD"))
                ok = curl_easy_setopt(r->easy, CURLOPT_NOBODY, 1L) == CURLE_OK;
        else if (!streq(method, "GET"))
                ok = curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
        /* libcurl sends a request once more by itself when a reused connection closes before any
         * answer. The server may have done a POST by then (a cloud creating a server whose answer
         * was lost): a second one would make a second server or object. A new connection is never
         * resent, so a POST's failure reaches the caller, whose lookup decides. */
        if (ok && streq(method, "POST"))
                ok = curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L) == CURLE_OK;
        if (!ok)
                return -EIO;
        *ret = TAKE_PTR(r);
        return 0;
}

CnHttpRequest *cn_http_request_ref(CnHttpRequest *r) {
        if (r)
                r->n_ref++;
        return r;
}

CnHttpRequest *cn_http_request_unref(CnHttpRequest *r) {
        if (!r)
                return NULL;
        assert(r->n_ref > 0);
        if (--r->n_ref > 0)
                return NULL;
        /* A submitted request holds a reference, so it is never freed while curl has it. */
        if (r->http)
                request_unlink(r);
        curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        strv_free(r->response_headers);
        cn_buf_done(&r->response);
        free(r->body);
        free(r->method);
        free(r->url);
        free(r);
        return NULL;
}

static int add_header_line(CnHttpRequest *r, const char *line) {
        struct curl_slist *l = curl_slist_append(r->headers, line);
        if (!l)
                return -ENOMEM;
        r->headers = l;
        return 0;
}

int cn_http_request_add_header(CnHttpRequest *r, const char *name, const char *value) {
        _cleanup_free_ char *line = NULL;

        assert(r);
        assert(name);
        assert(value);
        if (r->submitted)
                return -EBUSY;
        if (isempty(name) || strpbrk(name, ": \t") || cn_string_has_cc(name, false) ||
            cn_string_has_cc(value, true))
                return -EINVAL;
        if (strcasecmp(name, "Content-Type") == 0)
                r->has_content_type = true;
        /* "Name;" is curl's way of sending a header with an empty value. */
        if (asprintf(&line, isempty(value) ? "%s;" : "%s: %s", name, value) < 0)
                return -ENOMEM;
        return add_header_line(r, line);
}

int cn_http_request_set_bearer_token(CnHttpRequest *r, const char *token) {
        _cleanup_free_ char *v = NULL;
        int r2;

        assert(r);
        assert(token);
        if (isempty(token) || strpbrk(token, " \t") || cn_string_has_cc(token, false))
                return -EINVAL;
        v = cn_strjoin("Bearer ", token, NULL);
        if (!v)
                return -ENOMEM;
        r2 = cn_http_request_add_header(r, "Authorization", v);
        explicit_bzero(v, strlen(v));
        return r2;
}

int cn_http_request_set_body(CnHttpRequest *r, const void *data, size_t size, const char *content_type) {
        char *copy;
        int k;

        assert(r);
        assert(data || size == 0);
        if (r->submitted)
                return -EBUSY;
        copy = malloc(size + 1);
        if (!copy)
                return -ENOMEM;
        if (size > 0)
                memcpy(copy, data, size);
        copy[size] = 0;
        free(r->body);
        r->body = copy;
        if (curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) size) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body) != CURLE_OK)
                return -EIO;
        /* POSTFIELDS turns the method into POST; keep what the caller asked for. */
        if (!streq(r->method, "POST") &&
            curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, r->method) != CURLE_OK)
                return -EIO;
        if (content_type) {
                k = cn_http_request_add_header(r, "Content-Type", content_type);
                if (k < 0)
                        return k;
        }
        return 0;
}

/* curl counts in milliseconds and reads 0 as "no timeout": round up so that a short timeout stays
 * one, and map infinity to 0. */
static long timeout_to_ms(usec_t timeout) {
        if (timeout == USEC_INFINITY)
                return 0;
        return (long) MIN(timeout / USEC_PER_MSEC + (timeout % USEC_PER_MSEC ? 1 : 0), (usec_t) LONG_MAX);
}

void cn_http_request_set_timeout(CnHttpRequest *r, usec_t timeout) {
        assert(r);
        (void) curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, timeout_to_ms(timeout));
}

void cn_http_request_set_resend_safe(CnHttpRequest *r) {
        assert(r);
        (void) curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 0L);
}

void cn_http_request_set_connect_timeout(CnHttpRequest *r, usec_t timeout) {
        assert(r);
        (void) curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, timeout_to_ms(timeout));
}

void cn_http_request_set_max_response(CnHttpRequest *r, size_t max) {
        assert(r);
        r->max_response = max;
}

/* A CA given for a request is the only one trusted: libcurl would otherwise keep its build's CA
 * directory (Debian's: /etc/ssl/certs) beside CAINFO, and its default bundle beside a blob, so
 * that any public root could vouch for the peer that gets the credential. */
static int trust_only(CnHttpRequest *r, CURLoption keep) {
        if ((keep != CURLOPT_CAINFO && curl_easy_setopt(r->easy, CURLOPT_CAINFO, NULL) != CURLE_OK) ||
            curl_easy_setopt(r->easy, CURLOPT_CAPATH, NULL) != CURLE_OK)
                return -EIO;
        return 0;
}

int cn_http_request_set_ca_file(CnHttpRequest *r, const char *path) {
        assert(r);
        assert(path);
        if (curl_easy_setopt(r->easy, CURLOPT_CAINFO, path) != CURLE_OK)
                return -EIO;
        return trust_only(r, CURLOPT_CAINFO);
}

static int set_blob(CnHttpRequest *r, CURLoption option, const void *data, size_t size) {
        struct curl_blob blob = { .data = (void *) data, .len = size, .flags = CURL_BLOB_COPY };

        if (!data || size == 0)
                return -EINVAL;
        return curl_easy_setopt(r->easy, option, &blob) == CURLE_OK ? 0 : -EIO;
}

int cn_http_request_set_ca_pem(CnHttpRequest *r, const void *pem, size_t size) {
        int k;

        assert(r);
        k = set_blob(r, CURLOPT_CAINFO_BLOB, pem, size);
        if (k < 0)
                return k;
        return trust_only(r, CURLOPT_CAINFO_BLOB);
}

/* The peer is the one whose leaf certificate has the pinned digest, whoever issued it: the chain is
 * not built, and the name is not checked (the digest names exactly one certificate). */
static int verify_pinned(X509_STORE_CTX *store, void *userdata) {
        CnHttpRequest *r = ASSERT_PTR(userdata);
        X509 *leaf = X509_STORE_CTX_get0_cert(store);
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;

        if (leaf && X509_digest(leaf, EVP_sha256(), md, &len) == 1 && len == CN_HTTP_SHA256_SIZE &&
            CRYPTO_memcmp(md, r->pinned_sha256, len) == 0) {
                X509_STORE_CTX_set_error(store, X509_V_OK);
                return 1;
        }
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
        return 0;
}

static CURLcode pinned_ssl_ctx(CURL *easy, void *ssl_ctx, void *userdata) {
        (void) easy;
        SSL_CTX_set_cert_verify_callback(ssl_ctx, verify_pinned, userdata);
        return CURLE_OK;
}

int cn_http_request_set_pinned_sha256(CnHttpRequest *r, const uint8_t digest[static CN_HTTP_SHA256_SIZE]) {
        assert(r);
        assert(digest);
        memcpy(r->pinned_sha256, digest, CN_HTTP_SHA256_SIZE);
        r->pinned = true;
        /* Peer verification stays on (its result is the callback's); a connection made this way is
         * never reused by a request that checks the name, since libcurl matches VERIFYHOST too. */
        if (curl_easy_setopt(r->easy, CURLOPT_SSL_CTX_FUNCTION, pinned_ssl_ctx) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSL_CTX_DATA, r) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSL_SESSIONID_CACHE, 0L) != CURLE_OK)
                return -EIO;
        return 0;
}

int cn_http_request_set_client_cert_file(CnHttpRequest *r, const char *cert_path, const char *key_path) {
        assert(r);
        assert(cert_path);
        assert(key_path);
        if (curl_easy_setopt(r->easy, CURLOPT_SSLCERT, cert_path) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSLKEY, key_path) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK)
                return -EIO;
        return 0;
}

int cn_http_request_set_client_cert_pem(CnHttpRequest *r, const void *cert, size_t cert_size, const void *key,
                                        size_t key_size) {
        int k;

        assert(r);
        k = set_blob(r, CURLOPT_SSLCERT_BLOB, cert, cert_size);
        if (k < 0)
                return k;
        k = set_blob(r, CURLOPT_SSLKEY_BLOB, key, key_size);
        if (k < 0)
                return k;
        if (curl_easy_setopt(r->easy, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK)
                return -EIO;
        return 0;
}

void cn_http_request_set_data_callback(CnHttpRequest *r, CnHttpDataCallback cb, void *userdata) {
        assert(r);
        r->data_callback = cb;
        r->data_userdata = userdata;
}

void cn_http_request_set_no_proxy(CnHttpRequest *r) {
        assert(r);
        (void) curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*");
}

int cn_http_request_submit(CnHttpRequest *r, CnHttpCallback cb, void *userdata) {
        CnHttp *h;

        assert(r);
        h = r->http;
        if (!h)
                return -ESTALE;
        if (r->submitted)
                return -EBUSY;
        /* Bodies curl sends itself must not carry its form content type or wait for 100 Continue. */
        if (r->body && !r->has_content_type && add_header_line(r, "Content-Type:") < 0)
                return -ENOMEM;
        if (add_header_line(r, "Expect:") < 0)
                return -ENOMEM;
        if (curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK)
                return -EIO;
        /* With a data callback the body buffer only holds error responses; those stay capped. */
        cn_buf_init(&r->response, r->max_response);
        if (!r->data_callback &&
            curl_easy_setopt(r->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) r->max_response) != CURLE_OK)
                return -EIO;

        r->callback = cb;
        r->userdata = userdata;
        if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
                return -EIO;
        r->submitted = true;
        cn_http_request_ref(r);
        return 0;
}

void cn_http_request_cancel(CnHttpRequest *r) {
        if (r)
                request_detach(r);
}

static void request_complete(CnHttpRequest *r, CURLcode code) {
        _cleanup_(cn_http_request_unrefp) _unused_ CnHttpRequest *ref = cn_http_request_ref(r);

        (void) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
        if (r->too_big)
                r->error = -EFBIG;
        else if (r->headers_too_big)
                r->error = -E2BIG;
        else if (r->data_error < 0)
                r->error = r->data_error;
        else
                r->error = cn_http_error_from_curl(code);
        if (r->error < 0)
                log_debug_errno(r->error, "HTTP %s %s failed: %s", r->method, r->url,
                                r->errbuf[0] ? r->errbuf : curl_easy_strerror(code));
        request_detach(r);
        if (r->callback)
                r->callback(r, r->error, r->userdata);
}

static void process_done(CnHttp *h) {
        CURLMsg *msg;
        int left;

        /* Read one message at a time: a callback may remove other handles, which drops their
         * pending messages. */
        while ((msg = curl_multi_info_read(h->multi, &left))) {
                CnHttpRequest *r = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &r) != CURLE_OK || !r)
                        continue;
                request_complete(r, msg->data.result);
        }
}

static void run_callback(CnHttpRequest *r, int error, void *userdata) {
}

int cn_http_request_run(CnHttpRequest *r) {
        _cleanup_(cn_http_request_unrefp) _unused_ CnHttpRequest *ref = cn_http_request_ref(r);
        int k;

        assert(r);
        if (!r->submitted) {
                k = cn_http_request_submit(r, run_callback, NULL);
                if (k < 0)
                        return k;
        }
        while (!r->done) {
                if (!r->http)
                        return -ECANCELED;
                k = sd_event_run(r->http->event, UINT64_MAX);
                if (k < 0)
                        return k;
                if (sd_event_get_state(r->http->event) == SD_EVENT_FINISHED && !r->done)
                        return -ECANCELED;
        }
        return r->error;
}

long cn_http_request_get_status(CnHttpRequest *r) {
        return ASSERT_PTR(r)->status;
}

const char *cn_http_request_get_header(CnHttpRequest *r, const char *name) {
        const char *found = NULL;
        size_t l;

        assert(r);
        assert(name);
        l = strlen(name);
        STRV_FOREACH(h, r->response_headers)
                if (strncasecmp(*h, name, l) == 0 && (*h)[l] == ':')
                        found = *h + l + 1 + strspn(*h + l + 1, " \t");
        return found;
}

const char *cn_http_request_get_body(CnHttpRequest *r, size_t *ret_size) {
        assert(r);
        if (ret_size)
                *ret_size = cn_buf_len(&r->response);
        return cn_buf_str(&r->response);
}

int cn_http_request_steal_body(CnHttpRequest *r, char **ret, size_t *ret_size) {
        assert(r);
        return cn_buf_steal(&r->response, ret, ret_size);
}

int cn_http_request_get_retry_after(CnHttpRequest *r, usec_t *ret) {
        const char *v = cn_http_request_get_header(r, "Retry-After");
        _cleanup_free_ char *copy = NULL;
        usec_t d;

        if (!v)
                return -ENOENT;
        copy = strdup(v);
        if (!copy)
                return -ENOMEM;
        if (cn_parse_retry_after(cn_strstrip(copy), cn_now(CLOCK_REALTIME), &d) < 0)
                return -ENOENT;
        if (ret)
                *ret = d;
        return 0;
}

const char *cn_http_request_get_error_message(CnHttpRequest *r) {
        return ASSERT_PTR(r)->errbuf;
}

const char *cn_http_request_get_url(CnHttpRequest *r) {
        return ASSERT_PTR(r)->url;
}

const char *cn_http_request_get_method(CnHttpRequest *r) {
        return ASSERT_PTR(r)->method;
}

char *cn_http_escape(const char *s) {
        char *e = curl_easy_escape(NULL, s, 0), *copy;

        if (!e)
                return NULL;
        copy = strdup(e);
        curl_free(e);
        return copy;
}
