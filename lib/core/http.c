/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 client on sd-event, TLS through OpenSSL.
 *
 * A request is served by one connection at a time. Connections are kept per CnHttp and found again
 * by a key: the SHA-256 of what decides who the peer is and how it was verified (scheme, host,
 * port, proxy, trust anchors or pinned digest, client certificate), so that a request never goes
 * over a connection another request's settings made. A connection is opened for the request that
 * needs it, goes idle when its response ends (if the server keeps it), and is then handed to the
 * next request with the same key. Idle connections are watched for input: a server that closes
 * one is seen at once and the connection dropped, rather than found dead by the next request. A
 * request that still meets a dead one (the close and our write crossed) before any answer is sent
 * once more on a new connection, unless it is a POST, which always gets a connection of its own
 * (a second POST may make a second object).
 *
 * Everything runs on the event loop's thread but host name resolution, which getaddrinfo() does in
 * a short-lived thread of its own so that a slow resolver never stalls the loop. Completion
 * callbacks are called from an event handler with no connection state held across them, so they
 * may submit, cancel or drop requests freely; failures found while starting a request (a bad URL,
 * a refused connect) complete it from a deferred event, never inside cn_http_request_submit(). */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "http.h"
#include "log.h"
#include "string-util.h"

#define HTTP_READ_BUFFER (64U * 1024U)
#define HTTP_ERROR_SIZE 256
#define HTTP_KEY_SIZE 32
#define HTTP_MAX_INTERIM 16

typedef struct Conn Conn;
typedef struct Lookup Lookup;

typedef enum {
        CONN_RESOLVING,
        CONN_CONNECTING,
        CONN_PROXY_CONNECT, /* CONNECT sent to the proxy, its answer awaited */
        CONN_HANDSHAKE,
        CONN_READY,
} ConnState;

typedef enum {
        PARSE_STATUS,
        PARSE_HEADERS,
        PARSE_BODY_LENGTH,
        PARSE_BODY_CLOSE,
        PARSE_CHUNK_SIZE,
        PARSE_CHUNK_DATA,
        PARSE_CHUNK_END,
        PARSE_TRAILERS,
        PARSE_DONE,
} ParseState;

/* A getaddrinfo() in a thread. The thread and the loop each hold a reference; the loop drops its
 * reference when the connection gives up waiting. */
struct Lookup {
        atomic_uint n_ref;
        char *host, *port;
        struct addrinfo *result;
        int error;
        int pipe[2];
};

struct CnHttp {
        sd_event *event;
        sd_event_source *defer; /* completes the requests on the failed list */
        CnHttpRequest *requests; /* every request of this client that is still alive */
        CnHttpRequest *wait_first, *wait_last; /* submitted, waiting for a connection */
        CnHttpRequest *failed; /* submitted, to be completed with their error from the defer source */
        Conn *conns;
        unsigned max_host, max_idle;
        bool freeing;
        char *http_proxy, *https_proxy, *no_proxy;
        EVP_MD_CTX *md;
        /* What the last connection key was the digest of (request_route()): most requests of a
         * client go where the one before went, with the same credentials, and comparing them is
         * cheaper than hashing them again. Both hold key material: wiped when replaced. */
        CnBuf key_input, key_last_input;
        uint8_t key_last[HTTP_KEY_SIZE];
        char *buf; /* HTTP_READ_BUFFER bytes, for every read */
        unsigned awaited; /* submitted requests without a data callback, not yet done */
};

struct Conn {
        unsigned n_ref;
        CnHttp *http; /* NULL once closed */
        Conn *prev, *next;
        ConnState state;
        int fd;
        sd_event_source *io;
        uint32_t events;
        SSL *ssl;
        bool tls, tunnel; /* TLS to the origin; through a CONNECT tunnel */
        bool last_read_short;
        bool tls_end_pending; /* tls_end is what the next conn_read() returns */
        ssize_t tls_end;
        uint8_t key[HTTP_KEY_SIZE];
        char *origin; /* "host:port" of the peer counted against the per-host limit */
        char *connect_host, *connect_port; /* where the TCP connection goes */
        struct addrinfo *addrs, *next_addr;
        Lookup *lookup;
        sd_event_source *lookup_source;
        CnHttpRequest *req; /* the request it serves; NULL when idle */
        usec_t idle_since;
        uint8_t pinned_sha256[CN_HTTP_SHA256_SIZE];
        /* Output: the request (or the CONNECT) being written. */
        const char *out;
        size_t out_len, out_off;
        char *connect_request;
        /* Response parser. */
        ParseState ps;
        CnBuf line;
        uint64_t remaining;
        int http_minor;
        bool keep_alive, to_callback, got_bytes, chunked, other_coding;
        unsigned interim; /* 1xx answers before this response */
        size_t header_bytes;
};

struct CnHttpRequest {
        unsigned n_ref;
        CnHttp *http;
        char *method, *url;
        /* The target, from the URL. */
        int url_error;
        bool tls;
        char *host, *port, *path, *host_header;
        /* "Name: value\r\n" lines given by the caller; the bearer token among them. */
        CnBuf headers;
        bool has_accept, has_user_agent, has_host;
        char *body;
        size_t body_size;
        char *head; /* what is written: request line, headers, body */
        size_t head_len;
        size_t max_response;
        usec_t timeout, connect_timeout;
        bool fresh, resend_safe, no_proxy, retried, reused;
        char *ca_file, *ca_pem, *cert_file, *key_file, *cert_pem, *key_pem;
        size_t ca_pem_size, cert_pem_size, key_pem_size;
        bool pinned;
        uint8_t pinned_sha256[CN_HTTP_SHA256_SIZE];
        /* Where it goes. */
        char *proxy_host, *proxy_port, *proxy_auth;
        uint8_t key[HTTP_KEY_SIZE];
        char *origin;
        Conn *conn;
        CnHttpRequest *wait_prev, *wait_next, *failed_next;
        bool waiting, failing;
        sd_event_source *timer;
        usec_t deadline, connect_deadline;
        /* Response. */
        CnBuf response;
        char **response_headers;
        long status;
        CnHttpCallback callback;
        void *userdata;
        CnHttpDataCallback data_callback;
        void *data_userdata;
        int error;
        bool submitted, done;
        bool awaited; /* counted in http->awaited */
        char errbuf[HTTP_ERROR_SIZE];
        CnHttpRequest *prev, *next;
};

static void conn_close(Conn *c);
static void conn_process(Conn *c, uint32_t revents);
static void dispatch(CnHttp *h);
static void request_fail(CnHttpRequest *r, int error, const char *fmt, ...) _printf_(3, 4);
static void request_arm_timer(CnHttpRequest *r);

static void set_error_message(CnHttpRequest *r, const char *fmt, va_list ap) _printf_(2, 0);
static void set_error_message(CnHttpRequest *r, const char *fmt, va_list ap) {
        if (!r->errbuf[0])
                (void) vsnprintf(r->errbuf, sizeof(r->errbuf), fmt, ap);
}

static char *mfree_str(char *s) {
        free(s);
        return NULL;
}

static void free_secret(char *s, size_t n) {
        if (!s)
                return;
        explicit_bzero(s, n);
        free(s);
}

static void free_secret_str(char *s) {
        if (s)
                free_secret(s, strlen(s));
}

/* -------------------------------------------------------------------------------------------------
 * The socket under TLS: send() with MSG_NOSIGNAL, so that a peer's reset never raises SIGPIPE in a
 * daemon that did not ask for it, and a note of short reads, which tell that the socket is drained. */

static BIO_METHOD *socket_method;
static pthread_once_t socket_method_once = PTHREAD_ONCE_INIT;

static size_t strlen_ptr(const char *s) {
        return s ? strlen(s) : 0;
}

/* Forgets a buffer of key material, keeping its allocation: the bytes are overwritten first. */
static void key_buf_wipe(CnBuf *b) {
        if (b->data)
                explicit_bzero(b->data, b->alloc);
        cn_buf_reset(b);
}

static int bio_write(BIO *b, const char *data, int len) {
        Conn *c = BIO_get_data(b);
        ssize_t n;

        BIO_clear_retry_flags(b);
        n = send(c->fd, data, (size_t) len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                BIO_set_retry_write(b);
        return (int) n;
}

static int bio_read(BIO *b, char *data, int len) {
        Conn *c = BIO_get_data(b);
        ssize_t n;

        BIO_clear_retry_flags(b);
        n = recv(c->fd, data, (size_t) len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                BIO_set_retry_read(b);
                c->last_read_short = true;
        } else
                c->last_read_short = n < len;
        return (int) n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
        (void) b;
        (void) num;
        (void) ptr;
        return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static void socket_method_make(void) {
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                     "cloudnode-socket");
        if (m && BIO_meth_set_write(m, bio_write) == 1 && BIO_meth_set_read(m, bio_read) == 1 &&
            BIO_meth_set_ctrl(m, bio_ctrl) == 1)
                socket_method = m;
        else
                BIO_meth_free(m);
}

/* -------------------------------------------------------------------------------------------------
 * Proxies, from the environment as libcurl reads it: http_proxy (lower case only: a CGI
 * environment sets HTTP_PROXY from a request header) for http URLs, https_proxy or HTTPS_PROXY for
 * https, all_proxy or ALL_PROXY for both, no_proxy or NO_PROXY for the hosts that go direct. */

static char *env_dup(const char *a, const char *b) {
        const char *v = getenv(a);
        if (isempty(v) && b)
                v = getenv(b);
        return isempty(v) ? NULL : strdup(v);
}

static bool host_is_ip(const char *host) {
        struct in6_addr a;
        return inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1;
}

/* One entry of no_proxy against a host: "*", a name (matching itself and its subdomains, with or
 * without a leading dot), an address, or an address range in CIDR form. */
static bool no_proxy_entry_matches(const char *entry, size_t n, const char *host) {
        char e[256];
        const char *slash;
        size_t hl = strlen(host);

        if (n == 0 || n >= sizeof(e))
                return false;
        memcpy(e, entry, n);
        e[n] = 0;
        if (streq(e, "*"))
                return true;
        if (e[0] == '[') {
                char *close = strchr(e, ']');
                if (!close)
                        return false;
                memmove(e, e + 1, (size_t) (close - e - 1));
                e[close - e - 1] = 0;
        }
        slash = strchr(e, '/');
        if (slash && host_is_ip(host)) {
                uint8_t net[16] = {}, addr[16] = {};
                char *end;
                long bits = strtol(slash + 1, &end, 10);
                int family = strchr(host, ':') ? AF_INET6 : AF_INET, size = family == AF_INET ? 4 : 16;

                e[slash - e] = 0;
                if (*end || bits < 0 || bits > size * 8 || inet_pton(family, e, net) != 1 ||
                    inet_pton(family, host, addr) != 1)
                        return false;
                for (long i = 0; i < bits; i++)
                        if ((net[i / 8] ^ addr[i / 8]) & (0x80 >> (i % 8)))
                                return false;
                return true;
        }
        if (e[0] == '.')
                memmove(e, e + 1, strlen(e));
        n = strlen(e);
        if (n == 0 || n > hl)
                return false;
        if (strcasecmp(host + hl - n, e) != 0)
                return false;
        return n == hl || host[hl - n - 1] == '.';
}

static bool no_proxy_matches(const char *list, const char *host) {
        for (const char *p = list; p && *p;) {
                size_t n;
                p += strspn(p, ", \t");
                n = strcspn(p, ", \t");
                if (no_proxy_entry_matches(p, n, host))
                        return true;
                p += n;
        }
        return false;
}

/* -------------------------------------------------------------------------------------------------
 * URLs: http or https, a host (a name, an address, or an IPv6 address in brackets), an optional
 * port, and the path with its query. No user information: credentials go in headers. */

static int parse_url(const char *url, bool *ret_tls, char **ret_host, char **ret_port, char **ret_path,
                     char **ret_host_header) {
        const char *p, *auth, *auth_end, *host, *host_end, *port = NULL;
        _cleanup_free_ char *h = NULL, *pt = NULL, *path = NULL;
        size_t n;
        bool tls;

        if (strncasecmp(url, "https://", 8) == 0) {
                tls = true;
                auth = url + 8;
        } else if (strncasecmp(url, "http://", 7) == 0) {
                tls = false;
                auth = url + 7;
        } else
                return strstr(url, "://") ? -EPROTO : -EINVAL;
        auth_end = auth + strcspn(auth, "/?#");
        if (memchr(auth, '@', (size_t) (auth_end - auth)))
                return -EINVAL;
        if (*auth == '[') {
                host = auth + 1;
                host_end = memchr(host, ']', (size_t) (auth_end - host));
                if (!host_end)
                        return -EINVAL;
                p = host_end + 1;
        } else {
                host = auth;
                host_end = memchr(auth, ':', (size_t) (auth_end - auth));
                if (!host_end)
                        host_end = auth_end;
                p = host_end;
        }
        if (p < auth_end) {
                if (*p != ':')
                        return -EINVAL;
                port = p + 1;
        }
        n = (size_t) (host_end - host);
        if (n == 0 || n > 253)
                return -EINVAL;
        h = strndup(host, n);
        if (!h)
                return -ENOMEM;
        for (char *c = h; *c; c++)
                if (!(isalnum((unsigned char) *c) || strchr("-._:%", *c)))
                        return -EINVAL;
        if (*auth == '[') {
                struct in6_addr a;
                if (inet_pton(AF_INET6, h, &a) != 1)
                        return -EINVAL;
        } else if (strchr(h, ':'))
                return -EINVAL;
        if (port && port < auth_end) {
                unsigned long v;
                char *end;
                n = (size_t) (auth_end - port);
                pt = strndup(port, n);
                if (!pt)
                        return -ENOMEM;
                if (n > 5 || strspn(pt, "0123456789") != n)
                        return -EINVAL;
                v = strtoul(pt, &end, 10);
                if (v == 0 || v > 65535)
                        return -EINVAL;
        } else {
                pt = strdup(tls ? "443" : "80");
                if (!pt)
                        return -ENOMEM;
                port = NULL;
        }
        n = strcspn(auth_end, "#");
        if (memchr(auth_end, ' ', n))
                return -EINVAL;
        if (n == 0)
                path = strdup("/");
        else if (asprintf(&path, "%s%.*s", *auth_end == '?' ? "/" : "", (int) n, auth_end) < 0)
                path = NULL;
        if (!path)
                return -ENOMEM;
        /* Host: as the URL names it, without the scheme's default port. */
        if (asprintf(ret_host_header, "%s%s%s%s%s", *auth == '[' ? "[" : "", h, *auth == '[' ? "]" : "",
                     port && !streq(pt, tls ? "443" : "80") ? ":" : "", port && !streq(pt, tls ? "443" : "80") ? pt : "") < 0)
                return -ENOMEM;
        *ret_tls = tls;
        *ret_host = TAKE_PTR(h);
        *ret_port = TAKE_PTR(pt);
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* "http://[user:password@]host[:port][/]" to host, port and the Basic credentials. */
static int parse_proxy(const char *proxy, char **ret_host, char **ret_port, char **ret_auth) {
        _cleanup_free_ char *url = NULL, *host = NULL, *port = NULL, *path = NULL, *hh = NULL;
        const char *rest = proxy, *at, *end;
        _cleanup_free_ char *auth = NULL;
        bool tls;
        int k;

        if (!strstr(proxy, "://"))
                rest = proxy;
        else if (strncasecmp(proxy, "http://", 7) == 0)
                rest = proxy + 7;
        else
                return -EPROTONOSUPPORT;
        end = rest + strcspn(rest, "/?#");
        at = memchr(rest, '@', (size_t) (end - rest));
        if (at) {
                _cleanup_free_ char *cred = strndup(rest, (size_t) (at - rest)), *plain = NULL;
                size_t len;
                if (!cred)
                        return -ENOMEM;
                plain = cn_http_unescape(cred, strlen(cred), &len);
                explicit_bzero(cred, strlen(cred));
                if (!plain)
                        return -ENOMEM;
                auth = malloc(4 * ((len + 2) / 3) + 1);
                if (!auth) {
                        free_secret(TAKE_PTR(plain), len);
                        return -ENOMEM;
                }
                EVP_EncodeBlock((unsigned char *) auth, (unsigned char *) plain, (int) len);
                free_secret(TAKE_PTR(plain), len);
                rest = at + 1;
        }
        if (asprintf(&url, "http://%.*s/", (int) (end - rest), rest) < 0) {
                free_secret_str(TAKE_PTR(auth));
                return -ENOMEM;
        }
        k = parse_url(url, &tls, &host, &port, &path, &hh);
        if (k >= 0 && !(rest[0] == '[' ? (bool) strstr(rest, "]:") && strstr(rest, "]:") < end
                                       : memchr(rest, ':', (size_t) (end - rest)) != NULL)) {
                /* libcurl's default proxy port. */
                free(port);
                port = strdup("1080");
                if (!port)
                        k = -ENOMEM;
        }
        if (k < 0) {
                free_secret_str(TAKE_PTR(auth));
                return k;
        }
        *ret_host = TAKE_PTR(host);
        *ret_port = TAKE_PTR(port);
        *ret_auth = TAKE_PTR(auth);
        return 0;
}

/* -------------------------------------------------------------------------------------------------
 * The client. */

int cn_http_new(sd_event *event, CnHttp **ret) {
        _cleanup_(cn_http_freep) CnHttp *h = NULL;

        assert(event);
        assert(ret);
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(event);
        h->max_host = UINT_MAX;
        h->max_idle = CN_HTTP_IDLE_CONNECTIONS_MAX;
        h->md = EVP_MD_CTX_new();
        h->key_input = CN_BUF_INIT(SIZE_MAX);
        h->key_last_input = CN_BUF_INIT(SIZE_MAX);
        h->buf = malloc(HTTP_READ_BUFFER);
        if (!h->md || !h->buf)
                return -ENOMEM;
        if (pthread_once(&socket_method_once, socket_method_make) != 0 || !socket_method)
                return -ENOMEM;
        h->http_proxy = env_dup("http_proxy", NULL);
        h->https_proxy = env_dup("https_proxy", "HTTPS_PROXY");
        if (!h->http_proxy)
                h->http_proxy = env_dup("all_proxy", "ALL_PROXY");
        if (!h->https_proxy)
                h->https_proxy = env_dup("all_proxy", "ALL_PROXY");
        h->no_proxy = env_dup("no_proxy", "NO_PROXY");
        *ret = TAKE_PTR(h);
        return 0;
}

int cn_http_set_max_connections(CnHttp *h, unsigned n) {
        assert(h);
        n = MAX(n, 1U);
        h->max_host = n;
        h->max_idle = n;
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

static void wait_remove(CnHttpRequest *r) {
        CnHttp *h = r->http;

        if (!r->waiting)
                return;
        if (r->wait_prev)
                r->wait_prev->wait_next = r->wait_next;
        else
                h->wait_first = r->wait_next;
        if (r->wait_next)
                r->wait_next->wait_prev = r->wait_prev;
        else
                h->wait_last = r->wait_prev;
        r->wait_prev = r->wait_next = NULL;
        r->waiting = false;
}

static void wait_append(CnHttpRequest *r) {
        CnHttp *h = r->http;

        assert(!r->waiting);
        r->wait_prev = h->wait_last;
        r->wait_next = NULL;
        if (h->wait_last)
                h->wait_last->wait_next = r;
        else
                h->wait_first = r;
        h->wait_last = r;
        r->waiting = true;
}

static void failed_remove(CnHttpRequest *r) {
        CnHttp *h = r->http;

        if (!r->failing)
                return;
        for (CnHttpRequest **p = &h->failed; *p; p = &(*p)->failed_next)
                if (*p == r) {
                        *p = r->failed_next;
                        break;
                }
        r->failed_next = NULL;
        r->failing = false;
}

/* Takes a submitted request out of the client and drops the reference the submission held. A
 * connection in the middle of its answer is closed: what is left of the answer cannot be told from
 * the next one's. */
static void request_detach(CnHttpRequest *r) {
        if (!r->submitted || r->done)
                return;
        r->done = true;
        r->timer = sd_event_source_disable_unref(r->timer);
        if (r->http) {
                if (r->awaited)
                        r->http->awaited--;
                wait_remove(r);
                failed_remove(r);
        }
        if (r->conn) {
                Conn *c = r->conn;
                r->conn = NULL;
                c->req = NULL;
                conn_close(c);
        }
        cn_http_request_unref(r);
}

CnHttp *cn_http_free(CnHttp *h) {
        if (!h)
                return NULL;
        /* Requests the caller still holds outlive the client, detached from it; the extra reference
         * keeps each alive while that happens, as the caller may hold none. */
        h->freeing = true;
        while (h->requests) {
                CnHttpRequest *r = cn_http_request_ref(h->requests);
                request_detach(r);
                request_unlink(r);
                r->http = NULL;
                cn_http_request_unref(r);
        }
        while (h->conns)
                conn_close(h->conns);
        sd_event_source_disable_unref(h->defer);
        sd_event_unref(h->event);
        EVP_MD_CTX_free(h->md);
        key_buf_wipe(&h->key_input);
        key_buf_wipe(&h->key_last_input);
        cn_buf_done(&h->key_input);
        cn_buf_done(&h->key_last_input);
        free(h->buf);
        free(h->http_proxy);
        free(h->https_proxy);
        free(h->no_proxy);
        free(h);
        return NULL;
}

int cn_http_request_new(CnHttp *h, const char *method, const char *url, CnHttpRequest **ret) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;

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
        r->timeout = USEC_INFINITY;
        r->connect_timeout = CN_HTTP_DEFAULT_CONNECT_TIMEOUT;
        cn_buf_init(&r->headers, CN_HTTP_MAX_HEADER_BYTES);
        r->method = strdup(method);
        r->url = strdup(url);
        if (!r->method || !r->url)
                return -ENOMEM;
        /* A bad URL is the request's completion error, as a refused connection would be. */
        r->url_error = parse_url(url, &r->tls, &r->host, &r->port, &r->path, &r->host_header);
        if (r->url_error == -ENOMEM)
                return -ENOMEM;
        /* A POST goes on a new connection: see http.h. */
        r->fresh = streq(method, "POST");
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
        /* A submitted request holds a reference, so it is never freed while a connection has it. */
        if (r->http)
                request_unlink(r);
        sd_event_source_disable_unref(r->timer);
        if (r->headers.data)
                explicit_bzero(r->headers.data, r->headers.alloc);
        cn_buf_done(&r->headers);
        free_secret(r->head, r->head_len);
        strv_free(r->response_headers);
        cn_buf_done(&r->response);
        free(r->body);
        free(r->method);
        free(r->url);
        free(r->host);
        free(r->port);
        free(r->path);
        free(r->host_header);
        free(r->ca_file);
        free(r->ca_pem);
        free(r->cert_file);
        free(r->key_file);
        free(r->cert_pem);
        free_secret(r->key_pem, r->key_pem_size);
        free(r->proxy_host);
        free(r->proxy_port);
        free_secret_str(r->proxy_auth);
        free(r->origin);
        free(r);
        return NULL;
}

int cn_http_request_add_header(CnHttpRequest *r, const char *name, const char *value) {
        size_t len;
        int k;

        assert(r);
        assert(name);
        assert(value);
        if (r->submitted)
                return -EBUSY;
        if (isempty(name) || strpbrk(name, ": \t") || cn_string_has_cc(name, false) ||
            cn_string_has_cc(value, true))
                return -EINVAL;
        if (strcasecmp(name, "Accept") == 0)
                r->has_accept = true;
        else if (strcasecmp(name, "User-Agent") == 0)
                r->has_user_agent = true;
        else if (strcasecmp(name, "Host") == 0)
                r->has_host = true;
        else if (strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0 ||
                 strcasecmp(name, "Connection") == 0)
                /* Framing is ours: a caller's would make the request mean something else. */
                return -EINVAL;
        len = cn_buf_len(&r->headers);
        k = cn_buf_add_str(&r->headers, name);
        if (k >= 0)
                k = cn_buf_add_str(&r->headers, isempty(value) ? ":" : ": ");
        if (k >= 0)
                k = cn_buf_add_str(&r->headers, strempty(value));
        if (k >= 0)
                k = cn_buf_add(&r->headers, "\r\n", 2);
        if (k < 0)
                cn_buf_truncate(&r->headers, len);
        return k;
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
        r->body_size = size;
        if (content_type) {
                k = cn_http_request_add_header(r, "Content-Type", content_type);
                if (k < 0)
                        return k;
        }
        return 0;
}

void cn_http_request_set_timeout(CnHttpRequest *r, usec_t timeout) {
        assert(r);
        r->timeout = timeout == 0 ? USEC_INFINITY : timeout;
}

void cn_http_request_set_resend_safe(CnHttpRequest *r) {
        assert(r);
        r->resend_safe = true;
        r->fresh = false;
}

void cn_http_request_set_connect_timeout(CnHttpRequest *r, usec_t timeout) {
        assert(r);
        r->connect_timeout = timeout == 0 ? USEC_INFINITY : timeout;
}

void cn_http_request_set_max_response(CnHttpRequest *r, size_t max) {
        assert(r);
        r->max_response = max;
}

static int dup_data(const void *data, size_t size, char **ret, size_t *ret_size) {
        char *copy;

        if (!data || size == 0)
                return -EINVAL;
        copy = malloc(size + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, data, size);
        copy[size] = 0;
        *ret = copy;
        if (ret_size)
                *ret_size = size;
        return 0;
}

/* A CA given for a request is the only one trusted: neither the system's directory nor its bundle
 * is loaded beside it, so that no public root can vouch for the peer that gets the credential. */
int cn_http_request_set_ca_file(CnHttpRequest *r, const char *path) {
        char *copy;

        assert(r);
        assert(path);
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        free(r->ca_file);
        r->ca_file = copy;
        free(r->ca_pem);
        r->ca_pem = NULL;
        return 0;
}

int cn_http_request_set_ca_pem(CnHttpRequest *r, const void *pem, size_t size) {
        char *copy;
        int k;

        assert(r);
        k = dup_data(pem, size, &copy, NULL);
        if (k < 0)
                return k;
        free(r->ca_pem);
        r->ca_pem = copy;
        r->ca_pem_size = size;
        free(r->ca_file);
        r->ca_file = NULL;
        return 0;
}

int cn_http_request_set_pinned_sha256(CnHttpRequest *r, const uint8_t digest[static CN_HTTP_SHA256_SIZE]) {
        assert(r);
        assert(digest);
        memcpy(r->pinned_sha256, digest, CN_HTTP_SHA256_SIZE);
        r->pinned = true;
        return 0;
}

int cn_http_request_set_client_cert_file(CnHttpRequest *r, const char *cert_path, const char *key_path) {
        char *c, *k;

        assert(r);
        assert(cert_path);
        assert(key_path);
        c = strdup(cert_path);
        k = strdup(key_path);
        if (!c || !k) {
                free(c);
                free(k);
                return -ENOMEM;
        }
        free(r->cert_file);
        free(r->key_file);
        r->cert_file = c;
        r->key_file = k;
        return 0;
}

int cn_http_request_set_client_cert_pem(CnHttpRequest *r, const void *cert, size_t cert_size, const void *key,
                                        size_t key_size) {
        char *c = NULL, *k = NULL;
        int e;

        assert(r);
        e = dup_data(cert, cert_size, &c, NULL);
        if (e < 0)
                return e;
        e = dup_data(key, key_size, &k, NULL);
        if (e < 0) {
                free(c);
                return e;
        }
        free(r->cert_pem);
        free_secret(r->key_pem, r->key_pem_size);
        r->cert_pem = c;
        r->cert_pem_size = cert_size;
        r->key_pem = k;
        r->key_pem_size = key_size;
        return 0;
}

void cn_http_request_set_data_callback(CnHttpRequest *r, CnHttpDataCallback cb, void *userdata) {
        assert(r);
        r->data_callback = cb;
        r->data_userdata = userdata;
}

void cn_http_request_set_no_proxy(CnHttpRequest *r) {
        assert(r);
        r->no_proxy = true;
}

/* -------------------------------------------------------------------------------------------------
 * Completion. */

static void request_complete(CnHttpRequest *r, int error) {
        _cleanup_(cn_http_request_unrefp) _unused_ CnHttpRequest *ref = cn_http_request_ref(r);

        if (r->done)
                return;
        r->error = error;
        if (error < 0)
                log_debug_errno(error, "HTTP %s %s failed: %s", r->method, r->url, r->errbuf);
        request_detach(r);
        if (r->callback)
                r->callback(r, r->error, r->userdata);
}

static int on_defer(sd_event_source *s, void *userdata) {
        CnHttp *h = ASSERT_PTR(userdata);

        while (h->failed) {
                CnHttpRequest *r = h->failed;
                h->failed = r->failed_next;
                r->failed_next = NULL;
                r->failing = false;
                request_complete(r, r->error);
        }
        return 0;
}

/* Fails a request from the next loop iteration, outside of whatever found the failure. */
static void request_fail(CnHttpRequest *r, int error, const char *fmt, ...) {
        CnHttp *h = r->http;
        va_list ap;

        va_start(ap, fmt);
        set_error_message(r, fmt, ap);
        va_end(ap);
        if (r->done || r->failing)
                return;
        r->error = error;
        wait_remove(r);
        if (r->conn) {
                Conn *c = r->conn;
                r->conn = NULL;
                c->req = NULL;
                conn_close(c);
        }
        r->failing = true;
        r->failed_next = h->failed;
        h->failed = r;
        if (!h->defer) {
                if (sd_event_add_defer(h->event, &h->defer, on_defer, h) < 0) {
                        /* No way to defer: complete now (the caller holds no state across this). */
                        on_defer(NULL, h);
                        return;
                }
                (void) sd_event_source_set_description(h->defer, "http-failed");
        }
        (void) sd_event_source_set_enabled(h->defer, SD_EVENT_ONESHOT);
}

/* -------------------------------------------------------------------------------------------------
 * Timeouts: one time source per request with a deadline, at the earlier of its whole-transfer and
 * (while its connection is being made) its connect deadline. Long timeouts are coalesced (a
 * twentieth of the timeout, at most a second late) so that the loop's timer is not re-armed for
 * every request. */

static int on_request_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnHttpRequest *r = ASSERT_PTR(userdata);
        bool connecting = r->connect_deadline != USEC_INFINITY && usec >= r->connect_deadline;

        if (usec < MIN(r->deadline, r->connect_deadline)) {
                /* Fired for a deadline that has moved since. */
                request_arm_timer(r);
                return 0;
        }
        request_fail(r, -ETIMEDOUT, connecting ? "Connection timed out" : "Operation timed out");
        return 0;
}

static void request_arm_timer(CnHttpRequest *r) {
        usec_t when = MIN(r->deadline, r->connect_deadline), accuracy;
        usec_t span = when == r->deadline ? r->timeout : r->connect_timeout;

        if (when == USEC_INFINITY) {
                if (r->timer)
                        (void) sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
                return;
        }
        accuracy = CLAMP(span / 20, USEC_PER_MSEC, USEC_PER_SEC);
        if (!r->timer) {
                if (sd_event_add_time(r->http->event, &r->timer, CLOCK_MONOTONIC, when, accuracy, on_request_timer,
                                      r) < 0) {
                        r->timer = NULL;
                        return;
                }
                (void) sd_event_source_set_description(r->timer, "http-timeout");
                return;
        }
        (void) sd_event_source_set_time(r->timer, when);
        (void) sd_event_source_set_time_accuracy(r->timer, accuracy);
        (void) sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

/* -------------------------------------------------------------------------------------------------
 * Connections. */

static Conn *conn_ref(Conn *c) {
        c->n_ref++;
        return c;
}

static void conn_unref(Conn *c) {
        if (!c || --c->n_ref > 0)
                return;
        assert(!c->http);
        free(c);
}

static void lookup_unref(Lookup *l) {
        if (!l || atomic_fetch_sub(&l->n_ref, 1) != 1)
                return;
        if (l->result)
                freeaddrinfo(l->result);
        if (l->pipe[0] >= 0)
                close(l->pipe[0]);
        if (l->pipe[1] >= 0)
                close(l->pipe[1]);
        free(l->host);
        free(l->port);
        free(l);
}

/* Closes the connection; its memory goes with the last reference (an event handler in progress
 * holds one). The request it served, if any, must have been detached from it. */
static void conn_close(Conn *c) {
        CnHttp *h = c->http;

        if (!h)
                return;
        assert(!c->req);
        if (c->prev)
                c->prev->next = c->next;
        else
                h->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        c->http = NULL;
        c->io = sd_event_source_disable_unref(c->io);
        c->lookup_source = sd_event_source_disable_unref(c->lookup_source);
        lookup_unref(c->lookup);
        c->lookup = NULL;
        if (c->ssl) {
                /* No close_notify: the connection is dropped, and a write could block or raise. */
                SSL_free(c->ssl);
                c->ssl = NULL;
        }
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        if (c->addrs)
                freeaddrinfo(c->addrs);
        c->addrs = c->next_addr = NULL;
        c->origin = mfree_str(c->origin);
        c->connect_host = mfree_str(c->connect_host);
        c->connect_port = mfree_str(c->connect_port);
        c->connect_request = mfree_str(c->connect_request);
        c->out = NULL;
        cn_buf_done(&c->line);
        conn_unref(c);
        /* A slot for the host is free now. */
        dispatch(h);
}

static int conn_set_events(Conn *c, uint32_t events) {
        if (c->events == events)
                return 0;
        c->events = events;
        return sd_event_source_set_io_events(c->io, events);
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = ASSERT_PTR(userdata);

        conn_ref(c);
        conn_process(c, revents);
        conn_unref(c);
        return 0;
}

static void conn_fail(Conn *c, int error, const char *fmt, ...) _printf_(3, 4);
static void conn_fail(Conn *c, int error, const char *fmt, ...) {
        CnHttpRequest *r = c->req;
        va_list ap;

        if (r) {
                va_start(ap, fmt);
                set_error_message(r, fmt, ap);
                va_end(ap);
                request_fail(r, error, "%s", r->errbuf);
        } else
                conn_close(c);
}

static void conn_try_connect(Conn *c) {
        int k = -ECONNREFUSED;

        while (c->next_addr) {
                struct addrinfo *a = c->next_addr;
                int fd;

                c->next_addr = a->ai_next;
                fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
                if (fd < 0) {
                        k = -errno;
                        continue;
                }
                /* Probes after a minute of silence, as libcurl's TCP_KEEPALIVE did: a peer gone
                 * without a close is found on connections that sit idle or stream. */
                (void) setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &(int){ 1 }, sizeof(int));
                (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &(int){ 60 }, sizeof(int));
                (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &(int){ 60 }, sizeof(int));
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
                if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        k = -errno;
                        close(fd);
                        continue;
                }
                c->fd = fd;
                if (sd_event_add_io(c->http->event, &c->io, fd, EPOLLOUT, on_conn_io, c) < 0) {
                        conn_fail(c, -ENOMEM, "Out of memory");
                        return;
                }
                (void) sd_event_source_set_description(c->io, "http-connection");
                c->events = EPOLLOUT;
                c->state = CONN_CONNECTING;
                return;
        }
        if (k == -ENETUNREACH || k == -EHOSTUNREACH)
                conn_fail(c, -EHOSTUNREACH, "Failed to connect to %s port %s: %s", c->connect_host, c->connect_port,
                          strerror(-k));
        else
                conn_fail(c, -ECONNREFUSED, "Failed to connect to %s port %s: %s", c->connect_host,
                          c->connect_port, strerror(-k));
}

/* The connect() of the current address ended: on to the next address on failure. */
static void conn_connected(Conn *c) {
        int err = 0;
        socklen_t len = sizeof(err);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err != 0) {
                c->io = sd_event_source_disable_unref(c->io);
                close(c->fd);
                c->fd = -1;
                if (c->next_addr) {
                        conn_try_connect(c);
                        return;
                }
                conn_fail(c, err == ENETUNREACH || err == EHOSTUNREACH ? -EHOSTUNREACH : -ECONNREFUSED,
                          "Failed to connect to %s port %s: %s", c->connect_host, c->connect_port, strerror(err));
                return;
        }
        freeaddrinfo(c->addrs);
        c->addrs = c->next_addr = NULL;
        c->state = c->tunnel ? CONN_PROXY_CONNECT : c->tls ? CONN_HANDSHAKE : CONN_READY;
}

static void *lookup_thread(void *userdata) {
        Lookup *l = userdata;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM };

        l->error = getaddrinfo(l->host, l->port, &hints, &l->result);
        (void) write(l->pipe[1], "", 1);
        lookup_unref(l);
        return NULL;
}

static int on_lookup(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = ASSERT_PTR(userdata);
        Lookup *l = c->lookup;

        c->lookup_source = sd_event_source_disable_unref(c->lookup_source);
        c->lookup = NULL;
        if (l->error != 0 || !l->result) {
                conn_fail(c, -EHOSTUNREACH, "Could not resolve host: %s (%s)", l->host, gai_strerror(l->error));
                lookup_unref(l);
                return 0;
        }
        c->addrs = c->next_addr = TAKE_PTR(l->result);
        lookup_unref(l);
        conn_try_connect(c);
        return 0;
}

static void conn_resolve(Conn *c) {
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
        pthread_attr_t attr;
        pthread_t thread;
        Lookup *l;
        int k;

        /* An address needs no resolver. */
        if (getaddrinfo(c->connect_host, c->connect_port, &hints, &c->addrs) == 0) {
                c->next_addr = c->addrs;
                conn_try_connect(c);
                return;
        }
        c->addrs = NULL;
        l = calloc(1, sizeof(*l));
        if (!l) {
                conn_fail(c, -ENOMEM, "Out of memory");
                return;
        }
        atomic_init(&l->n_ref, 1);
        l->pipe[0] = l->pipe[1] = -1;
        l->host = strdup(c->connect_host);
        l->port = strdup(c->connect_port);
        if (!l->host || !l->port || pipe2(l->pipe, O_CLOEXEC) < 0) {
                lookup_unref(l);
                conn_fail(c, -ENOMEM, "Out of resources for a resolver");
                return;
        }
        c->lookup = l;
        if (sd_event_add_io(c->http->event, &c->lookup_source, l->pipe[0], EPOLLIN, on_lookup, c) < 0) {
                conn_fail(c, -ENOMEM, "Out of memory");
                return;
        }
        (void) sd_event_source_set_description(c->lookup_source, "http-resolve");
        atomic_fetch_add(&l->n_ref, 1);
        k = pthread_attr_init(&attr);
        if (k == 0) {
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                (void) pthread_attr_setstacksize(&attr, 256U * 1024U);
                k = pthread_create(&thread, &attr, lookup_thread, l);
                (void) pthread_attr_destroy(&attr);
        }
        if (k != 0) {
                lookup_unref(l);
                conn_fail(c, -ENOMEM, "Failed to start a resolver thread: %s", strerror(k));
                return;
        }
        c->state = CONN_RESOLVING;
}

/* The peer is the one whose leaf certificate has the pinned digest, whoever issued it: the chain is
 * not built, and the name is not checked (the digest names exactly one certificate). */
static int verify_pinned(X509_STORE_CTX *store, void *userdata) {
        Conn *c = ASSERT_PTR(userdata);
        X509 *leaf = X509_STORE_CTX_get0_cert(store);
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;

        if (leaf && X509_digest(leaf, EVP_sha256(), md, &len) == 1 && len == CN_HTTP_SHA256_SIZE &&
            CRYPTO_memcmp(md, c->pinned_sha256, len) == 0) {
                X509_STORE_CTX_set_error(store, X509_V_OK);
                return 1;
        }
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
        return 0;
}

static int load_ca_pem(SSL_CTX *ctx, const char *pem, size_t size) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, (int) size);
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        unsigned n = 0;
        X509 *x;

        if (!b || !store)
                return -ENOMEM;
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
                int ok = X509_STORE_add_cert(store, x);
                X509_free(x);
                if (ok != 1)
                        return -EBADE;
                n++;
        }
        ERR_clear_error();
        return n > 0 ? 0 : -EBADE;
}

static int load_client_pem(SSL_CTX *ctx, const char *cert, size_t cert_size, const char *key, size_t key_size) {
        _cleanup_(BIO_free_allp) BIO *cb = BIO_new_mem_buf(cert, (int) cert_size);
        _cleanup_(BIO_free_allp) BIO *kb = BIO_new_mem_buf(key, (int) key_size);
        EVP_PKEY *pkey;
        X509 *x;
        int ok;

        if (!cb || !kb)
                return -ENOMEM;
        x = PEM_read_bio_X509(cb, NULL, NULL, NULL);
        if (!x)
                return -ENOKEY;
        ok = SSL_CTX_use_certificate(ctx, x);
        X509_free(x);
        if (ok != 1)
                return -ENOKEY;
        /* The rest of the file is the chain the server may need. */
        while ((x = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
                if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
                        X509_free(x);
                        return -ENOKEY;
                }
        ERR_clear_error();
        pkey = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
        if (!pkey)
                return -ENOKEY;
        ok = SSL_CTX_use_PrivateKey(ctx, pkey);
        EVP_PKEY_free(pkey);
        return ok == 1 && SSL_CTX_check_private_key(ctx) == 1 ? 0 : -ENOKEY;
}

/* The TLS session to the origin, set up with the settings of the request that opened the
 * connection: they are part of its key, so every request it serves has the same. */
static int conn_tls_setup(Conn *c, CnHttpRequest *r) {
        SSL_CTX *ctx;
        BIO *bio;
        int k = 0;

        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx)
                return -ENOMEM;
        (void) SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        /* Whole records and what follows them in one read, not a header and a body in two. */
        SSL_CTX_set_read_ahead(ctx, 1);
        SSL_CTX_set_default_read_buffer_len(ctx, 48 * 1024);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (r->pinned) {
                memcpy(c->pinned_sha256, r->pinned_sha256, CN_HTTP_SHA256_SIZE);
                SSL_CTX_set_cert_verify_callback(ctx, verify_pinned, c);
        } else if (r->ca_pem)
                k = load_ca_pem(ctx, r->ca_pem, r->ca_pem_size);
        else if (r->ca_file)
                k = SSL_CTX_load_verify_locations(ctx, r->ca_file, NULL) == 1 ? 0 : -EBADE;
        else
                k = SSL_CTX_set_default_verify_paths(ctx) == 1 ? 0 : -EBADE;
        if (k >= 0 && r->cert_pem)
                k = load_client_pem(ctx, r->cert_pem, r->cert_pem_size, r->key_pem, r->key_pem_size);
        else if (k >= 0 && r->cert_file)
                k = SSL_CTX_use_certificate_chain_file(ctx, r->cert_file) == 1 &&
                                    SSL_CTX_use_PrivateKey_file(ctx, r->key_file, SSL_FILETYPE_PEM) == 1 &&
                                    SSL_CTX_check_private_key(ctx) == 1
                            ? 0
                            : -ENOKEY;
        if (k < 0) {
                SSL_CTX_free(ctx);
                ERR_clear_error();
                return k;
        }

        c->ssl = SSL_new(ctx);
        SSL_CTX_free(ctx);
        if (!c->ssl)
                return -ENOMEM;
        bio = BIO_new(socket_method);
        if (!bio)
                return -ENOMEM;
        BIO_set_data(bio, c);
        BIO_set_init(bio, 1);
        SSL_set_bio(c->ssl, bio, bio);
        if (!host_is_ip(r->host) && SSL_set_tlsext_host_name(c->ssl, r->host) != 1)
                return -ENOMEM;
        /* HTTP/1.1 is what is spoken; a server that would pick another protocol is told so. */
        if (SSL_set_alpn_protos(c->ssl, (const unsigned char *) "\x08http/1.1", 9) != 0)
                return -ENOMEM;
        if (!r->pinned) {
                X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
                X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                if (host_is_ip(r->host) ? X509_VERIFY_PARAM_set1_ip_asc(param, r->host) != 1
                                        : X509_VERIFY_PARAM_set1_host(param, r->host, 0) != 1)
                        return -ENOMEM;
        }
        SSL_set_connect_state(c->ssl);
        return 0;
}

static const char *ssl_error_text(void) {
        static char buf[160];
        unsigned long e = ERR_peek_last_error();

        if (e == 0)
                return "connection closed";
        ERR_error_string_n(e, buf, sizeof(buf));
        return buf;
}

static void conn_handshake(Conn *c) {
        int k, e;

        ERR_clear_error();
        k = SSL_do_handshake(c->ssl);
        if (k == 1) {
                c->state = CONN_READY;
                return;
        }
        e = SSL_get_error(c->ssl, k);
        if (e == SSL_ERROR_WANT_READ) {
                (void) conn_set_events(c, EPOLLIN);
                return;
        }
        if (e == SSL_ERROR_WANT_WRITE) {
                (void) conn_set_events(c, EPOLLIN | EPOLLOUT);
                return;
        }
        long v = SSL_get_verify_result(c->ssl);
        if (v != X509_V_OK)
                conn_fail(c, -EBADE, "SSL certificate problem: %s", X509_verify_cert_error_string(v));
        else if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0)
                conn_fail(c, -ECONNRESET, "TLS connection to %s closed during the handshake", c->origin);
        else
                conn_fail(c, -EPROTO, "TLS handshake with %s failed: %s", c->origin, ssl_error_text());
        ERR_clear_error();
}

/* Writes what is left of c->out. 1 when all is written, 0 when the socket is full, <0 on error. */
static int conn_write(Conn *c) {
        while (c->out_off < c->out_len) {
                size_t left = c->out_len - c->out_off;
                ssize_t n;

                if (c->ssl) {
                        int k, e;
                        ERR_clear_error();
                        k = SSL_write(c->ssl, c->out + c->out_off, (int) MIN(left, (size_t) INT_MAX));
                        if (k <= 0) {
                                e = SSL_get_error(c->ssl, k);
                                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                                        return 0;
                                ERR_clear_error();
                                return -ECONNRESET;
                        }
                        n = k;
                } else {
                        n = send(c->fd, c->out + c->out_off, left, MSG_NOSIGNAL);
                        if (n < 0) {
                                if (errno == EAGAIN || errno == EINTR)
                                        return 0;
                                return -ECONNRESET;
                        }
                }
                c->out_off += (size_t) n;
        }
        return 1;
}

/* Reads into h->buf: >0 bytes, 0 at the end of the stream, -EAGAIN when nothing is there. */
/* What an SSL_read() that returned k <= 0 means: -EAGAIN, 0 for the end, -ECONNRESET. */
static ssize_t tls_read_result(Conn *c, int k) {
        int e = SSL_get_error(c->ssl, k);

        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return -EAGAIN;
        if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
        return e == SSL_ERROR_SYSCALL && errno == 0 ? 0 : -ECONNRESET;
}

static ssize_t conn_read(Conn *c) {
        char *buf = c->http->buf;

        if (c->ssl) {
                size_t got = 0;
                ssize_t n;
                int k;

                if (c->tls_end_pending) {
                        /* The end or error met after the data the last read returned. */
                        c->tls_end_pending = false;
                        return c->tls_end;
                }
                /* SSL_read() hands out one record at a time, at most 16 KB: a Kubernetes object
                 * is often more. What the read-ahead already holds is taken too, so that the
                 * parser above sees such an object whole (one line of a watch is parsed where
                 * it lies) and is called once for it. */
                for (;;) {
                        ERR_clear_error();
                        k = SSL_read(c->ssl, buf + got, (int) (HTTP_READ_BUFFER - got));
                        if (k <= 0)
                                break;
                        got += (size_t) k;
                        if (got >= HTTP_READ_BUFFER || !SSL_has_pending(c->ssl))
                                return (ssize_t) got;
                }
                n = tls_read_result(c, k);
                ERR_clear_error();
                if (got == 0)
                        return n;
                if (n != -EAGAIN) {
                        /* Kept for the next read: the data goes up first. */
                        c->tls_end_pending = true;
                        c->tls_end = n;
                        c->last_read_short = false;
                }
                return (ssize_t) got;
        }
        for (;;) {
                ssize_t n = recv(c->fd, buf, HTTP_READ_BUFFER, 0);
                if (n >= 0) {
                        c->last_read_short = (size_t) n < HTTP_READ_BUFFER;
                        return n;
                }
                if (errno == EINTR)
                        continue;
                c->last_read_short = true;
                return errno == EAGAIN ? -EAGAIN : -ECONNRESET;
        }
}

static void conn_start_request(Conn *c, CnHttpRequest *r);

/* The CONNECT to the proxy and its answer, read a line at a time into c->line. */
static void conn_proxy_connect(Conn *c) {
        int k;

        if (!c->connect_request) {
                CnHttpRequest *r = c->req;
                if (asprintf(&c->connect_request,
                             "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n%s%s%sUser-Agent: %s/%s\r\n\r\n",
                             strchr(r->host, ':') ? "[" : "", r->host, strchr(r->host, ':') ? "]" : "", r->port,
                             strchr(r->host, ':') ? "[" : "", r->host, strchr(r->host, ':') ? "]" : "", r->port,
                             r->proxy_auth ? "Proxy-Authorization: Basic " : "", r->proxy_auth ? r->proxy_auth : "",
                             r->proxy_auth ? "\r\n" : "", PACKAGE_NAME, PACKAGE_VERSION) < 0) {
                        c->connect_request = NULL;
                        conn_fail(c, -ENOMEM, "Out of memory");
                        return;
                }
                c->out = c->connect_request;
                c->out_len = strlen(c->connect_request);
                c->out_off = 0;
                cn_buf_init(&c->line, CN_HTTP_MAX_HEADER_BYTES);
        }
        k = conn_write(c);
        if (k < 0) {
                conn_fail(c, -ECONNREFUSED, "Proxy %s closed the connection", c->connect_host);
                return;
        }
        if (k == 0) {
                (void) conn_set_events(c, EPOLLIN | EPOLLOUT);
                return;
        }
        (void) conn_set_events(c, EPOLLIN);
        for (;;) {
                char b[512];
                ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK);
                const char *end;
                size_t take;

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        conn_fail(c, -ECONNREFUSED, "Proxy %s closed the connection", c->connect_host);
                        return;
                }
                /* Only the answer's head is taken from the socket: what follows is the tunnel's. */
                end = memmem(b, (size_t) n, "\n", 1);
                take = end ? (size_t) (end - b) + 1 : (size_t) n;
                n = recv(c->fd, b, take, 0);
                if (n <= 0 || cn_buf_add(&c->line, b, (size_t) n) < 0) {
                        conn_fail(c, -ECONNREFUSED, "Proxy %s answered CONNECT badly", c->connect_host);
                        return;
                }
                if (!end)
                        continue;
                {
                        const char *s = cn_buf_str(&c->line);
                        size_t len = cn_buf_len(&c->line);
                        if (len >= 4 && (memcmp(s + len - 4, "\r\n\r\n", 4) == 0 || memcmp(s + len - 2, "\n\n", 2) == 0)) {
                                int status = 0;
                                if (sscanf(s, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 200 || status > 299) {
                                        conn_fail(c, -ECONNREFUSED, "Proxy %s refused CONNECT to %s (status %d)",
                                                  c->connect_host, c->origin, status);
                                        return;
                                }
                                cn_buf_done(&c->line);
                                c->out = NULL;
                                c->connect_request = mfree_str(c->connect_request);
                                c->state = CONN_HANDSHAKE;
                                return;
                        }
                }
        }
}

/* -------------------------------------------------------------------------------------------------
 * The response. */

static bool is_token_char(char ch) {
        return isalnum((unsigned char) ch) || strchr("!#$%&'*+-.^_`|~", ch);
}

/* Whether a comma-separated header value holds the token (case-insensitive). */
static bool has_token(const char *v, size_t n, const char *token) {
        size_t tl = strlen(token);

        for (size_t i = 0; i < n;) {
                size_t s, e;
                while (i < n && (v[i] == ',' || v[i] == ' ' || v[i] == '\t'))
                        i++;
                s = i;
                while (i < n && v[i] != ',')
                        i++;
                e = i;
                while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                        e--;
                if (e - s == tl && strncasecmp(v + s, token, tl) == 0)
                        return true;
        }
        return false;
}

static void response_reset(Conn *c) {
        CnHttpRequest *r = c->req;

        strv_free(r->response_headers);
        r->response_headers = NULL;
        c->header_bytes = 0;
        c->remaining = UINT64_MAX;
        c->keep_alive = true;
}

/* The last coding of Transfer-Encoding: chunked, or not. */
static bool ends_chunked(const char *v, size_t n) {
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        return n >= 7 && strncasecmp(v + n - 7, "chunked", 7) == 0 && (n == 7 || v[n - 8] == ',' || v[n - 8] == ' ');
}

static int parse_status_line(Conn *c, const char *s, size_t n) {
        CnHttpRequest *r = c->req;
        int status;

        if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
            !isdigit((unsigned char) s[9]) || !isdigit((unsigned char) s[10]) || !isdigit((unsigned char) s[11]) ||
            (n > 12 && s[12] != ' '))
                return -EPROTO;
        status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
        if (status < 100 || status > 599 || status == 101)
                return -EPROTO;
        c->http_minor = s[7] - '0';
        r->status = status;
        response_reset(c);
        if (c->http_minor == 0)
                c->keep_alive = false;
        c->ps = PARSE_HEADERS;
        return 0;
}

static int parse_header_line(Conn *c, const char *s, size_t n, bool *chunked, bool *other_coding) {
        CnHttpRequest *r = c->req;
        const char *colon, *v;
        size_t vn;
        char *line;

        if (s[0] == ' ' || s[0] == '\t')
                return -EPROTO; /* obsolete line folding */
        colon = memchr(s, ':', n);
        if (!colon || colon == s)
                return -EPROTO;
        for (const char *p = s; p < colon; p++)
                if (!is_token_char(*p))
                        return -EPROTO;
        v = colon + 1;
        while (v < s + n && (*v == ' ' || *v == '\t'))
                v++;
        vn = (size_t) (s + n - v);
        while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
                vn--;
        for (size_t i = 0; i < vn; i++)
                if ((unsigned char) v[i] < 0x20 && v[i] != '\t')
                        return -EPROTO;

        switch (colon - s) {
        case 10:
                if (strncasecmp(s, "Connection", 10) == 0) {
                        if (has_token(v, vn, "close"))
                                c->keep_alive = false;
                        else if (has_token(v, vn, "keep-alive") && c->http_minor == 0)
                                c->keep_alive = true;
                }
                break;
        case 14:
                if (strncasecmp(s, "Content-Length", 14) == 0) {
                        uint64_t len = 0;
                        if (vn == 0 || vn > 18)
                                return -EPROTO;
                        for (size_t i = 0; i < vn; i++) {
                                if (!isdigit((unsigned char) v[i]))
                                        return -EPROTO;
                                len = len * 10 + (uint64_t) (v[i] - '0');
                        }
                        if (c->remaining != UINT64_MAX && c->remaining != len)
                                return -EPROTO;
                        c->remaining = len;
                }
                break;
        case 17:
                if (strncasecmp(s, "Transfer-Encoding", 17) == 0) {
                        if (ends_chunked(v, vn))
                                *chunked = true;
                        else
                                *other_coding = true;
                }
                break;
        }
        line = malloc((size_t) (colon - s) + 2 + vn + 1);
        if (!line)
                return -ENOMEM;
        memcpy(line, s, (size_t) (colon - s));
        memcpy(line + (colon - s), ": ", 2);
        memcpy(line + (colon - s) + 2, v, vn);
        line[(colon - s) + 2 + vn] = 0;
        return strv_push(&r->response_headers, line) < 0 ? -ENOMEM : 0;
}

/* The end of the head: how the body is framed, and where it goes. */
static int headers_done(Conn *c, bool chunked, bool other_coding) {
        CnHttpRequest *r = c->req;
        bool no_body = streq(r->method, "HEAD") || r->status == 204 || r->status == 304;

        c->to_callback = r->data_callback && r->status >= 200 && r->status < 300;
        if (no_body) {
                c->ps = PARSE_DONE;
                return 0;
        }
        if (chunked) {
                c->ps = PARSE_CHUNK_SIZE;
                c->remaining = 0;
        } else if (other_coding || c->remaining == UINT64_MAX) {
                c->ps = PARSE_BODY_CLOSE;
                c->keep_alive = false;
        } else {
                if (!c->to_callback && c->remaining > r->max_response)
                        return -EFBIG;
                /* The body's buffer at its size at once, not grown (and copied) as it comes. */
                if (!c->to_callback && c->remaining > 0)
                        (void) cn_buf_reserve(&r->response, (size_t) c->remaining);
                c->ps = c->remaining == 0 ? PARSE_DONE : PARSE_BODY_LENGTH;
        }
        return 0;
}

/* Body bytes to the data callback or the buffer. The request may be gone when this returns. */
static int deliver(Conn *c, const char *p, size_t n) {
        CnHttpRequest *r = c->req;

        if (n == 0)
                return 0;
        if (c->to_callback) {
                int k = r->data_callback(r, p, n, r->data_userdata);
                if (k < 0)
                        return k;
                return c->req == r ? 0 : -ECANCELED;
        }
        if (cn_buf_add(&r->response, p, n) < 0)
                return -EFBIG;
        return 0;
}

/* One line of the head, chunk framing or trailers, complete or not: a whole line found in the
 * input is used where it lies, a partial one is kept in c->line. Returns the bytes consumed, with
 * *ret_line and *ret_len set when a line is complete (without its CR LF). */
static ssize_t take_line(Conn *c, const char *p, size_t n, const char **ret_line, size_t *ret_len) {
        const char *lf = memchr(p, '\n', n);
        size_t take = lf ? (size_t) (lf - p) + 1 : n;
        const char *s;
        size_t len;

        *ret_line = NULL;
        if (c->ps == PARSE_HEADERS || c->ps == PARSE_TRAILERS || c->ps == PARSE_STATUS) {
                c->header_bytes += take;
                if (c->header_bytes > CN_HTTP_MAX_HEADER_BYTES)
                        return -E2BIG;
        } else if (cn_buf_len(&c->line) + take > 1024)
                return -EPROTO; /* a chunk size line */
        if (!lf || cn_buf_len(&c->line) > 0) {
                if (cn_buf_add(&c->line, p, take) < 0)
                        return -E2BIG;
                if (!lf)
                        return (ssize_t) take;
                s = cn_buf_str(&c->line);
                len = cn_buf_len(&c->line);
        } else {
                s = p;
                len = take;
        }
        len--; /* LF */
        if (len > 0 && s[len - 1] == '\r')
                len--;
        *ret_line = s;
        *ret_len = len;
        return (ssize_t) take;
}

static int parse_chunk_size(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        for (; i < n && isxdigit((unsigned char) s[i]); i++) {
                if (v >> 56)
                        return -EPROTO;
                v = v * 16 + (uint64_t) (isdigit((unsigned char) s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
        }
        if (i == 0)
                return -EPROTO;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
                i++;
        if (i < n && s[i] != ';')
                return -EPROTO;
        *ret = v;
        return 0;
}

/* Feeds response bytes to the parser. Returns the bytes consumed (fewer than n only once the
 * response is complete, c->ps == PARSE_DONE), or <0 on error. */
static ssize_t conn_feed(Conn *c, const char *p, size_t n) {
        size_t used = 0;
        int k;

        while (used < n && c->ps != PARSE_DONE) {
                const char *line;
                size_t len, take;
                ssize_t t;

                switch (c->ps) {
                case PARSE_STATUS:
                case PARSE_HEADERS:
                case PARSE_TRAILERS:
                case PARSE_CHUNK_SIZE:
                case PARSE_CHUNK_END:
                        t = take_line(c, p + used, n - used, &line, &len);
                        if (t < 0)
                                return t;
                        used += (size_t) t;
                        if (!line)
                                break;
                        if (c->ps == PARSE_STATUS) {
                                c->chunked = c->other_coding = false;
                                k = parse_status_line(c, line, len);
                        } else if (c->ps == PARSE_HEADERS) {
                                if (len > 0)
                                        k = parse_header_line(c, line, len, &c->chunked, &c->other_coding);
                                else if (c->req->status < 200) {
                                        /* 100 Continue, 103 Early Hints: the answer is still to come,
                                         * after a few of them at most. */
                                        c->ps = PARSE_STATUS;
                                        k = ++c->interim > HTTP_MAX_INTERIM ? -EPROTO : 0;
                                } else
                                        k = headers_done(c, c->chunked, c->other_coding);
                        } else if (c->ps == PARSE_CHUNK_SIZE) {
                                k = parse_chunk_size(line, len, &c->remaining);
                                if (k >= 0)
                                        c->ps = c->remaining == 0 ? PARSE_TRAILERS : PARSE_CHUNK_DATA;
                        } else if (c->ps == PARSE_CHUNK_END) {
                                k = len == 0 ? 0 : -EPROTO;
                                c->ps = PARSE_CHUNK_SIZE;
                        } else {
                                k = 0;
                                if (len == 0)
                                        c->ps = PARSE_DONE;
                        }
                        cn_buf_reset(&c->line);
                        if (k < 0)
                                return k;
                        break;
                case PARSE_BODY_LENGTH:
                case PARSE_CHUNK_DATA:
                        take = (size_t) MIN((uint64_t) (n - used), c->remaining);
                        k = deliver(c, p + used, take);
                        if (k < 0)
                                return k;
                        used += take;
                        c->remaining -= take;
                        if (c->remaining == 0)
                                c->ps = c->ps == PARSE_CHUNK_DATA ? PARSE_CHUNK_END : PARSE_DONE;
                        break;
                case PARSE_BODY_CLOSE:
                        k = deliver(c, p + used, n - used);
                        if (k < 0)
                                return k;
                        used = n;
                        break;
                case PARSE_DONE:
                        break;
                }
        }
        return (ssize_t) used;
}

/* The response ended: the connection goes idle (or is closed), then the request completes. */
static void conn_response_done(Conn *c, bool leftover) {
        CnHttpRequest *r = c->req;
        CnHttp *h = c->http;

        c->req = NULL;
        r->conn = NULL;
        if (c->keep_alive && !leftover) {
                c->idle_since = cn_now(CLOCK_MONOTONIC);
                c->ps = PARSE_STATUS;
                c->out = NULL;
                cn_buf_done(&c->line);
                (void) conn_set_events(c, EPOLLIN);
        } else
                conn_close(c);
        request_complete(r, 0);
        if (h)
                dispatch(h);
}

/* A request that met a reused connection's end before any answer (the server closed it as we
 * wrote) goes once more, on a new connection. Only requests that may be sent twice ever reuse a
 * connection. */
static bool request_retry(Conn *c, CnHttpRequest *r) {
        if (!r->reused || r->retried)
                return false;
        r->retried = true;
        r->reused = false;
        r->fresh = true;
        r->conn = NULL;
        c->req = NULL;
        conn_close(c);
        wait_append(r);
        dispatch(r->http);
        return true;
}

static void conn_read_response(Conn *c) {
        for (;;) {
                CnHttpRequest *r = c->req;
                ssize_t n, used;

                if (!r) {
                        /* Idle: anything but silence ends the connection (a close, or bytes no request
                         * asked for). */
                        n = conn_read(c);
                        if (n != -EAGAIN)
                                conn_close(c);
                        return;
                }
                n = conn_read(c);
                if (n == -EAGAIN)
                        return;
                if (n == 0 && c->ps == PARSE_BODY_CLOSE) {
                        conn_response_done(c, false);
                        return;
                }
                if (n <= 0) {
                        /* A reused connection the server closed before any answer: once more on a
                         * new one. */
                        if (!c->got_bytes && request_retry(c, r))
                                return;
                        conn_fail(c, n == 0 ? -ECONNRESET : (int) n, n == 0 ? "Server closed the connection before the answer ended"
                                                               : "Failed to receive the answer");
                        return;
                }
                c->got_bytes = true;
                used = conn_feed(c, c->http->buf, (size_t) n);
                if (c->req != r)
                        return; /* cancelled from the data callback */
                if (used < 0) {
                        if (used == -EFBIG)
                                conn_fail(c, -EFBIG, "Response over %zu bytes", r->max_response);
                        else if (used == -E2BIG)
                                conn_fail(c, -E2BIG, "Response headers over %u bytes", CN_HTTP_MAX_HEADER_BYTES);
                        else if (used == -EPROTO)
                                conn_fail(c, -EPROTO, "Bad HTTP response from %s", c->origin);
                        else
                                conn_fail(c, (int) used, "Transfer stopped by the data callback");
                        return;
                }
                if (c->ps == PARSE_DONE) {
                        conn_response_done(c, used < n || c->tls_end_pending || (c->ssl && SSL_has_pending(c->ssl)));
                        return;
                }
                /* The socket is drained: epoll tells when there is more (saves a read that fails). */
                if (c->last_read_short && !(c->ssl && SSL_has_pending(c->ssl)))
                        return;
        }
}

static void conn_process(Conn *c, uint32_t revents) {
        int k;

        if (!c->http)
                return;
        if (c->state == CONN_CONNECTING) {
                conn_connected(c);
                if (!c->http || c->state == CONN_CONNECTING)
                        return;
        }
        if (c->state == CONN_PROXY_CONNECT) {
                conn_proxy_connect(c);
                if (!c->http || c->state == CONN_PROXY_CONNECT)
                        return;
        }
        if (c->state == CONN_HANDSHAKE) {
                if (!c->ssl) {
                        k = conn_tls_setup(c, c->req);
                        if (k < 0) {
                                conn_fail(c, k, "%s",
                                          k == -EBADE    ? "Trust anchors could not be loaded"
                                          : k == -ENOKEY ? "Client certificate or key could not be loaded"
                                                         : "Out of memory");
                                return;
                        }
                }
                conn_handshake(c);
                if (!c->http || c->state == CONN_HANDSHAKE)
                        return;
                /* Connected: the connect timeout no longer applies. */
                if (c->req) {
                        c->req->connect_deadline = USEC_INFINITY;
                        request_arm_timer(c->req);
                }
        }
        if (c->state == CONN_READY && c->req && !c->out) {
                CnHttpRequest *r = c->req;
                if (r->connect_deadline != USEC_INFINITY) {
                        r->connect_deadline = USEC_INFINITY;
                        request_arm_timer(r);
                }
                conn_start_request(c, r);
                return;
        }
        if (c->out && c->out_off < c->out_len) {
                k = conn_write(c);
                if (k < 0) {
                        if (c->req && request_retry(c, c->req))
                                return;
                        conn_fail(c, -ECONNRESET, "Failed to send the request");
                        return;
                }
                (void) conn_set_events(c, k == 0 ? EPOLLIN | EPOLLOUT : EPOLLIN);
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) || (c->ssl && SSL_has_pending(c->ssl)))
                conn_read_response(c);
}

/* Writes the request; what does not fit now goes when the socket can take it. A failure is found
 * by the event handler, never here: the caller may be anywhere. */
static void conn_start_request(Conn *c, CnHttpRequest *r) {
        int k;

        c->out = r->head;
        c->out_len = r->head_len;
        c->out_off = 0;
        c->ps = PARSE_STATUS;
        c->got_bytes = false;
        c->interim = 0;
        c->remaining = UINT64_MAX;
        cn_buf_init(&c->line, CN_HTTP_MAX_HEADER_BYTES);
        k = conn_write(c);
        (void) conn_set_events(c, k == 1 ? EPOLLIN : EPOLLIN | EPOLLOUT);
}

static void conn_assign(Conn *c, CnHttpRequest *r) {
        c->req = r;
        r->conn = c;
        c->out = NULL;
        if (c->state == CONN_READY) {
                r->reused = true;
                conn_start_request(c, r);
        }
}

static int conn_open(CnHttp *h, CnHttpRequest *r) {
        Conn *c;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->http = h;
        c->fd = -1;
        c->tls = r->tls;
        c->tunnel = r->proxy_host && r->tls;
        memcpy(c->key, r->key, HTTP_KEY_SIZE);
        c->origin = strdup(r->origin);
        c->connect_host = strdup(r->proxy_host ? r->proxy_host : r->host);
        c->connect_port = strdup(r->proxy_host ? r->proxy_port : r->port);
        c->next = h->conns;
        if (c->next)
                c->next->prev = c;
        h->conns = c;
        if (!c->origin || !c->connect_host || !c->connect_port) {
                conn_close(c);
                return -ENOMEM;
        }
        c->req = r;
        r->conn = c;
        r->reused = false;
        if (r->connect_timeout != USEC_INFINITY) {
                r->connect_deadline = cn_usec_add(cn_now(CLOCK_MONOTONIC), r->connect_timeout);
                request_arm_timer(r);
        }
        conn_resolve(c);
        return 0;
}

/* Gives waiting requests connections: an idle one with their key (the most recently used, so the
 * others age out), else a new one while the host has fewer than max_host, else an idle one of the
 * host's with another key is closed to make room, else they wait. */
static void dispatch(CnHttp *h) {
        CnHttpRequest *r, *next;

        if (h->freeing)
                return;
        for (r = h->wait_first; r; r = next) {
                Conn *idle = NULL, *other = NULL;
                unsigned count = 0;

                next = r->wait_next;
                for (Conn *c = h->conns; c; c = c->next) {
                        if (!streq(c->origin, r->origin))
                                continue;
                        count++;
                        if (c->req)
                                continue;
                        if (!r->fresh && memcmp(c->key, r->key, HTTP_KEY_SIZE) == 0) {
                                if (!idle || c->idle_since > idle->idle_since)
                                        idle = c;
                        } else if (!other || c->idle_since < other->idle_since)
                                other = c;
                }
                if (idle) {
                        wait_remove(r);
                        conn_assign(idle, r);
                } else if (count < h->max_host || other) {
                        if (count >= h->max_host) {
                                conn_close(other);
                                /* conn_close() dispatched already, this request included. */
                                return;
                        }
                        wait_remove(r);
                        if (conn_open(h, r) < 0)
                                request_fail(r, -ENOMEM, "Out of memory");
                }
                /* The next one may have been served by a nested dispatch. */
                if (next && !next->waiting)
                        next = h->wait_first;
        }
        /* Idle connections over the cap go, the least recently used first. */
        for (;;) {
                Conn *oldest = NULL;
                unsigned idle = 0;
                for (Conn *c = h->conns; c; c = c->next)
                        if (!c->req && c->state == CONN_READY) {
                                idle++;
                                if (!oldest || c->idle_since < oldest->idle_since)
                                        oldest = c;
                        }
                if (idle <= h->max_idle || !oldest)
                        break;
                conn_close(oldest);
        }
}

/* -------------------------------------------------------------------------------------------------
 * Submission. */

static int key_add(CnBuf *b, const char *tag, const void *data, size_t n) {
        uint64_t len = data ? n : UINT64_MAX;
        int k;

        k = cn_buf_add(b, tag, strlen(tag) + 1);
        if (k >= 0)
                k = cn_buf_add(b, &len, sizeof(len));
        if (k >= 0 && data && n > 0)
                k = cn_buf_add(b, data, n);
        return k;
}

static int key_add_str(CnBuf *b, const char *tag, const char *s) {
        return key_add(b, tag, s, s ? strlen(s) : 0);
}

static int request_route(CnHttpRequest *r) {
        CnHttp *h = r->http;
        const char *proxy = r->tls ? h->https_proxy : h->http_proxy;
        unsigned len = 0;
        CnBuf *in, swap;
        int k;

        if (proxy && !r->no_proxy && !(h->no_proxy && no_proxy_matches(h->no_proxy, r->host))) {
                k = parse_proxy(proxy, &r->proxy_host, &r->proxy_port, &r->proxy_auth);
                if (k < 0)
                        return k;
        }
        if (r->proxy_host && !r->tls)
                k = asprintf(&r->origin, "proxy %s:%s", r->proxy_host, r->proxy_port);
        else
                k = asprintf(&r->origin, "%s://%s:%s", r->tls ? "https" : "http", r->host, r->port);
        if (k < 0) {
                r->origin = NULL;
                return -ENOMEM;
        }

        /* The key: a digest of where the connection goes and of everything that makes its TLS. */
        in = &h->key_input;
        key_buf_wipe(in);
        /* At its size at once: a buffer grown by realloc() would leave copies of the key behind. */
        k = cn_buf_reserve(in, 512 + strlen(r->origin) + strlen_ptr(r->proxy_host) + strlen_ptr(r->proxy_port) +
                                       strlen_ptr(r->proxy_auth) + r->ca_pem_size + strlen_ptr(r->ca_file) +
                                       r->cert_pem_size + r->key_pem_size + strlen_ptr(r->cert_file) +
                                       strlen_ptr(r->key_file));
        if (k >= 0)
                k = key_add_str(in, "origin", r->origin);
        if (k >= 0)
                k = key_add_str(in, "proxy", r->proxy_host);
        if (k >= 0)
                k = key_add_str(in, "proxy-port", r->proxy_port);
        if (k >= 0)
                k = key_add_str(in, "proxy-auth", r->proxy_auth);
        if (k >= 0 && r->tls) {
                k = key_add(in, "pin", r->pinned ? r->pinned_sha256 : NULL, CN_HTTP_SHA256_SIZE);
                if (k >= 0)
                        k = key_add(in, "ca-pem", r->ca_pem, r->ca_pem_size);
                if (k >= 0)
                        k = key_add_str(in, "ca-file", r->ca_file);
                if (k >= 0)
                        k = key_add(in, "cert-pem", r->cert_pem, r->cert_pem_size);
                if (k >= 0)
                        k = key_add(in, "key-pem", r->key_pem, r->key_pem_size);
                if (k >= 0)
                        k = key_add_str(in, "cert-file", r->cert_file);
                if (k >= 0)
                        k = key_add_str(in, "key-file", r->key_file);
        }
        if (k < 0) {
                key_buf_wipe(in);
                return -ENOMEM;
        }
        if (cn_buf_len(in) == cn_buf_len(&h->key_last_input) && cn_buf_len(in) > 0 &&
            memcmp(in->data, h->key_last_input.data, cn_buf_len(in)) == 0) {
                memcpy(r->key, h->key_last, HTTP_KEY_SIZE);
                key_buf_wipe(in);
                return 0;
        }
        if (EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(h->md, in->data, cn_buf_len(in)) != 1 ||
            EVP_DigestFinal_ex(h->md, r->key, &len) != 1 || len != HTTP_KEY_SIZE) {
                key_buf_wipe(in);
                return -ENOMEM;
        }
        /* This input is the last one now; the buffers swap, so that neither is allocated again. */
        key_buf_wipe(&h->key_last_input);
        swap = h->key_last_input;
        h->key_last_input = h->key_input;
        h->key_input = swap;
        memcpy(h->key_last, r->key, HTTP_KEY_SIZE);
        return 0;
}

static int request_build(CnHttpRequest *r) {
        CnBuf b = CN_BUF_INIT(SIZE_MAX);
        bool forward = r->proxy_host && !r->tls;
        bool length = r->body || streq(r->method, "POST") || streq(r->method, "PUT") || streq(r->method, "PATCH");
        int k;

        /* At its size at once (the fixed lines are under 256 bytes and a proxy's credentials under
         * the host's share): each line printed once, the body copied once, no copy of the headers
         * (a bearer token) left behind by a realloc(). */
        k = cn_buf_reserve(&b, 256 + strlen(r->method) + 2 * strlen(r->host_header) + strlen(r->path) +
                                       strlen_ptr(r->proxy_auth) + cn_buf_len(&r->headers) + r->body_size);
        if (k >= 0)
                k = cn_buf_printf(&b, "%s %s%s%s HTTP/1.1\r\n", r->method, forward ? "http://" : "",
                                  forward ? r->host_header : "", r->path);
        if (k >= 0 && !r->has_host)
                k = cn_buf_printf(&b, "Host: %s\r\n", r->host_header);
        if (k >= 0 && !r->has_user_agent)
                k = cn_buf_add_str(&b, "User-Agent: " PACKAGE_NAME "/" PACKAGE_VERSION "\r\n");
        if (k >= 0 && !r->has_accept)
                k = cn_buf_add_str(&b, "Accept: */*\r\n");
        if (k >= 0 && forward && r->proxy_auth)
                k = cn_buf_printf(&b, "Proxy-Authorization: Basic %s\r\n", r->proxy_auth);
        if (k >= 0)
                k = cn_buf_add(&b, cn_buf_str(&r->headers), cn_buf_len(&r->headers));
        if (k >= 0 && length)
                k = cn_buf_printf(&b, "Content-Length: %zu\r\n", r->body_size);
        if (k >= 0)
                k = cn_buf_add_str(&b, "\r\n");
        if (k >= 0 && r->body_size > 0)
                k = cn_buf_add(&b, r->body, r->body_size);
        if (k < 0) {
                if (b.data)
                        explicit_bzero(b.data, b.alloc);
                cn_buf_done(&b);
                return -ENOMEM;
        }
        r->head_len = cn_buf_len(&b);
        return cn_buf_steal(&b, &r->head, NULL);
}

int cn_http_request_submit(CnHttpRequest *r, CnHttpCallback cb, void *userdata) {
        CnHttp *h;
        int k;

        assert(r);
        h = r->http;
        if (!h)
                return -ESTALE;
        if (r->submitted)
                return -EBUSY;
        /* With a data callback the body buffer only holds error responses; those stay capped. */
        cn_buf_init(&r->response, r->max_response);
        r->callback = cb;
        r->userdata = userdata;
        r->submitted = true;
        r->awaited = !r->data_callback;
        h->awaited += r->awaited;
        cn_http_request_ref(r);
        r->deadline = r->timeout == USEC_INFINITY ? USEC_INFINITY : cn_usec_add(cn_now(CLOCK_MONOTONIC), r->timeout);
        r->connect_deadline = USEC_INFINITY;

        if (r->url_error < 0) {
                request_fail(r, r->url_error, "Bad URL %s", r->url);
                return 0;
        }
        k = request_route(r);
        if (k >= 0)
                k = request_build(r);
        if (k < 0) {
                request_fail(r, k == -ENOMEM ? -ENOMEM : -EINVAL,
                             k == -EPROTONOSUPPORT ? "Only http:// proxies are supported" : "Bad proxy setting");
                return 0;
        }
        request_arm_timer(r);
        wait_append(r);
        dispatch(h);
        return 0;
}

unsigned cn_http_awaited(CnHttp *h) {
        return h ? h->awaited : 0;
}

void cn_http_request_cancel(CnHttpRequest *r) {
        if (r)
                request_detach(r);
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
        static const char hex[] = "0123456789ABCDEF";
        size_t n = 0;
        char *e, *o;

        for (const char *p = s; *p; p++)
                n += isalnum((unsigned char) *p) || strchr("-._~", *p) ? 1 : 3;
        e = malloc(n + 1);
        if (!e)
                return NULL;
        o = e;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (isalnum(*p) || strchr("-._~", *p))
                        *o++ = (char) *p;
                else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        *o = 0;
        return e;
}

char *cn_http_unescape(const char *s, size_t n, size_t *ret_len) {
        char *d = malloc(n + 1), *o = d;

        if (!d)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char) s[i + 1]) &&
                    isxdigit((unsigned char) s[i + 2])) {
                        char hx[3] = { s[i + 1], s[i + 2], 0 };
                        *o++ = (char) strtol(hx, NULL, 16);
                        i += 2;
                } else
                        *o++ = s[i];
        *o = 0;
        if (ret_len)
                *ret_len = (size_t) (o - d);
        return d;
}
