/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP client's connections and framing, against a scripted HTTP/1.1 server on 127.0.0.1 that
 * keeps connections open and logs every request with the number of the connection it came on:
 * reuse, a server closing an idle connection, a request resent once when a reused connection dies
 * before the answer (and a POST never), the per-host connection limit and the idle cap, chunked
 * bodies with extensions and trailers, 1xx answers, HTTP/1.0 bodies ended by the close, malformed
 * answers, host names resolved off the loop, bad URLs, and proxies from the environment: a forward
 * proxy for http with credentials from the proxy URL, no_proxy by name and by CIDR, and a CONNECT
 * tunnel to `openssl s_server` for https (and a refused CONNECT). */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fileio.h"
#include "http.h"
#include "string-util.h"
#include "tap.h"
#include "tlstest.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char req_log[65536];
static int next_id, n_conns, open_conns, max_open_conns;

static void log_add(const char *fmt, ...) _printf_(1, 2);
static void log_add(const char *fmt, ...) {
        va_list ap;
        pthread_mutex_lock(&log_lock);
        va_start(ap, fmt);
        vsnprintf(req_log + strlen(req_log), sizeof(req_log) - strlen(req_log), fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&log_lock);
}

static void log_reset(void) {
        pthread_mutex_lock(&log_lock);
        req_log[0] = 0;
        n_conns = 0;
        max_open_conns = 0;
        pthread_mutex_unlock(&log_lock);
}

static char *log_get(void) {
        char *s;
        pthread_mutex_lock(&log_lock);
        s = strdup(req_log);
        pthread_mutex_unlock(&log_lock);
        return s;
}

static void send_str(int fd, const char *s) {
        size_t n = strlen(s);
        while (n > 0) {
                ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
                if (k <= 0)
                        return;
                s += k;
                n -= (size_t) k;
        }
}

/* Reads one request (head and Content-Length body) into buf; its length, or -1 at the end. */
static ssize_t read_request(int fd, char *buf, size_t size, size_t *have) {
        for (;;) {
                char *end = memmem(buf, *have, "\r\n\r\n", 4);
                if (end) {
                        size_t head = (size_t) (end - buf) + 4, body = 0;
                        char *cl;
                        buf[*have] = 0;
                        cl = strcasestr(buf, "\r\ncontent-length:");
                        if (cl && cl < end)
                                body = (size_t) strtoul(cl + 17, NULL, 10);
                        if (*have >= head + body)
                                return (ssize_t) (head + body);
                }
                if (*have >= size - 1)
                        return -1;
                ssize_t k = recv(fd, buf + *have, size - 1 - *have, 0);
                if (k <= 0)
                        return -1;
                *have += (size_t) k;
        }
}

static void *serve_connection(void *arg) {
        int fd = (int) (intptr_t) arg, id, served = 0;
        char buf[16384];
        size_t have = 0;

        pthread_mutex_lock(&log_lock);
        id = ++next_id;
        n_conns++;
        open_conns++;
        max_open_conns = MAX(max_open_conns, open_conns);
        pthread_mutex_unlock(&log_lock);
        for (;;) {
                char method[16] = "", path[256] = "";
                ssize_t n = read_request(fd, buf, sizeof(buf), &have);
                bool close_after = false;

                if (n < 0)
                        break;
                (void) sscanf(buf, "%15s %255s", method, path);
                log_add("%d %s %s\n", id, method, path);
                if (cn_startswith(path, "/ka"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                else if (streq(path, "/slow")) {
                        usleep(200 * 1000);
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow");
                } else if (streq(path, "/idle-close")) {
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        usleep(100 * 1000);
                        close_after = true;
                } else if (streq(path, "/drop-if-reused")) {
                        if (served > 0)
                                close_after = true;
                        else
                                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh");
                } else if (streq(path, "/drop"))
                        close_after = true;
                else if (streq(path, "/chunked"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                     "5;name=value\r\nhello\r\n1\nX\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
                else if (streq(path, "/continue"))
                        send_str(fd, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                                     "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Final: yes\r\n\r\ndone");
                else if (streq(path, "/endless-continue")) {
                        for (int i = 0; i < 1000; i++)
                                send_str(fd, "HTTP/1.1 100 Continue\r\n\r\n");
                        close_after = true;
                } else if (streq(path, "/http10")) {
                        send_str(fd, "HTTP/1.0 200 OK\r\nX-Old: 1\r\n\r\nuntil the close");
                        close_after = true;
                } else if (streq(path, "/bad-version"))
                        send_str(fd, "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n");
                else if (streq(path, "/bad-header"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 0\r\n\r\n");
                else if (streq(path, "/folded"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n");
                else if (streq(path, "/two-lengths"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd");
                else if (streq(path, "/bad-chunk"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
                else if (streq(path, "/short")) {
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
                        close_after = true;
                } else if (streq(path, "/extra"))
                        /* More than the answer: the connection cannot be trusted after it. */
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n");
                else if (streq(path, "/head"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
                else if (cn_startswith(path, "/random/")) {
                        /* A valid answer with bytes changed, dropped or cut, then the close. */
                        static const char *const templates[] = {
                                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello",
                                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
                                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 404 Not Found\r\nConnection: keep-alive\r\n\r\nbody",
                        };
                        unsigned seed = (unsigned) strtoul(path + 8, NULL, 10);
                        char out[512];
                        size_t len;
                        snprintf(out, sizeof(out), "%s", templates[seed % ELEMENTSOF(templates)]);
                        len = strlen(out);
                        for (unsigned i = 0, m = 1 + rand_r(&seed) % 4; i < m && len > 0; i++) {
                                size_t at = (size_t) rand_r(&seed) % len;
                                switch (rand_r(&seed) % 4) {
                                case 0:
                                        out[at] = (char) (rand_r(&seed) % 256);
                                        break;
                                case 1:
                                        memmove(out + at, out + at + 1, len - at);
                                        len--;
                                        break;
                                case 2:
                                        len = at;
                                        break;
                                default:
                                        out[at] = "\r\n:; 0F"[rand_r(&seed) % 8];
                                }
                        }
                        send(fd, out, len, MSG_NOSIGNAL);
                        close_after = true;
                } else if (cn_startswith(path, "http://"))
                        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nproxied");
                else
                        send_str(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                served++;
                memmove(buf, buf + n, have - (size_t) n);
                have -= (size_t) n;
                if (close_after)
                        break;
        }
        pthread_mutex_lock(&log_lock);
        open_conns--;
        pthread_mutex_unlock(&log_lock);
        close(fd);
        return NULL;
}

typedef void *(*Handler)(void *);
typedef struct Server {
        int fd;
        Handler handler;
} Server;

static void *server_main(void *arg) {
        Server *s = arg;
        for (;;) {
                pthread_t t;
                int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                if (pthread_create(&t, NULL, s->handler, (void *) (intptr_t) fd) == 0)
                        pthread_detach(t);
                else
                        close(fd);
        }
        return NULL;
}

static int start(Handler handler) {
        static Server servers[4];
        static int n;
        pthread_t t;
        int port;
        Server *s = &servers[n++];

        s->fd = listen_loopback(&port);
        s->handler = handler;
        if (s->fd < 0 || pthread_create(&t, NULL, server_main, s) != 0) {
                printf("Bail out! cannot start a test server\n");
                exit(1);
        }
        pthread_detach(t);
        return port;
}

/* The proxy: logs the request line and Proxy-Authorization of what it gets, answers forward
 * requests itself (as "proxied"), refuses a CONNECT to port 1, and relays any other CONNECT. */
static void relay(int a, int b) {
        struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
        char buf[16384];

        while (poll(p, 2, 10000) > 0) {
                for (int i = 0; i < 2; i++)
                        if (p[i].revents) {
                                ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
                                if (n <= 0 || send(p[1 - i].fd, buf, (size_t) n, MSG_NOSIGNAL) != n)
                                        return;
                        }
        }
}

static void *serve_proxy(void *arg) {
        int fd = (int) (intptr_t) arg;
        char buf[16384], line[512] = "", *auth;
        size_t have = 0;
        ssize_t n = read_request(fd, buf, sizeof(buf), &have);
        int port = 0;

        if (n < 0)
                goto out;
        buf[n] = 0;
        sscanf(buf, "%511[^\r]", line);
        auth = strcasestr(buf, "\r\nProxy-Authorization: ");
        log_add("proxy %s auth=%.*s\n", line, auth ? (int) strcspn(auth + 23, "\r") : 4, auth ? auth + 23 : "none");
        if (!cn_startswith(line, "CONNECT ")) {
                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nproxied");
                goto out;
        }
        (void) sscanf(line, "CONNECT 127.0.0.1:%d", &port);
        if (port == 1) {
                send_str(fd, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
                goto out;
        }
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (up < 0 || connect(up, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                send_str(fd, "HTTP/1.1 502 Bad Gateway\r\n\r\n");
                if (up >= 0)
                        close(up);
                goto out;
        }
        send_str(fd, "HTTP/1.1 200 Connection established\r\n\r\n");
        relay(fd, up);
        close(up);
out:
        close(fd);
        return NULL;
}

static int port;

static char *url(const char *path) {
        char *u;
        if (asprintf(&u, "http://127.0.0.1:%d%s", port, path) < 0)
                abort();
        return u;
}

/* One request; its error, status and body (replacing *body). */
static int get(CnHttp *h, const char *method, const char *u, long *status, char **body) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
        int k = cn_http_request_new(h, method, u, &r);

        if (k < 0)
                return k;
        cn_http_request_set_timeout(r, 5 * USEC_PER_SEC);
        k = cn_http_request_run(r);
        if (status)
                *status = cn_http_request_get_status(r);
        if (body) {
                free(*body);
                *body = strdup(cn_http_request_get_body(r, NULL));
        }
        return k;
}

static int get_path(CnHttp *h, const char *method, const char *path, long *status, char **body) {
        _cleanup_free_ char *u = url(path);
        return get(h, method, u, status, body);
}

static void run_for(sd_event *e, usec_t t) {
        for (usec_t end = cn_now(CLOCK_MONOTONIC) + t; cn_now(CLOCK_MONOTONIC) < end;)
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
}

/* The log with connection numbers named A, B, ... in the order they first appear. */
static char *log_named(void) {
        _cleanup_free_ char *l = log_get();
        int ids[26] = {}, n = 0;
        CnBuf b = CN_BUF_INIT(SIZE_MAX);
        char *ret;

        for (char *line = l, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                if (isdigit((unsigned char) *line)) {
                        int id = atoi(line), i;
                        for (i = 0; i < n && ids[i] != id; i++)
                                ;
                        if (i == n && n < 26)
                                ids[n++] = id;
                        (void) cn_buf_printf(&b, "%c%s\n", 'A' + i, line + strspn(line, "0123456789"));
                } else
                        (void) cn_buf_printf(&b, "%s\n", line);
        }
        if (cn_buf_steal(&b, &ret, NULL) < 0)
                abort();
        return ret;
}

static void log_is(const char *want, const char *what) {
        _cleanup_free_ char *l = log_named();
        bool ok = streq(l, want);

        tap_ok(ok, "%s", what);
        if (!ok)
                printf("# got:\n%s# want:\n%s", l, want);
}

static int conns_opened(void) {
        int n;
        pthread_mutex_lock(&log_lock);
        n = n_conns;
        pthread_mutex_unlock(&log_lock);
        return n;
}

static void test_connections(sd_event *e, CnHttp *h) {
        _cleanup_free_ char *body = NULL, *want = NULL;
        long status = 0;

        log_reset();
        TAP_EQ_INT(get_path(h, "GET", "/ka1", &status, &body), 0, "first request");
        TAP_EQ_INT(get_path(h, "GET", "/ka2", NULL, NULL), 0, "second request");
        TAP_EQ_INT(get_path(h, "PUT", "/ka3", NULL, NULL), 0, "third request");
        log_is("A GET /ka1\nA GET /ka2\nA PUT /ka3\n", "one connection serves requests one after another");

        log_reset();
        TAP_EQ_INT(get_path(h, "POST", "/ka4", NULL, NULL), 0, "POST");
        TAP_EQ_INT(get_path(h, "GET", "/ka5", NULL, NULL), 0, "GET after the POST");
        log_is("A POST /ka4\nA GET /ka5\n", "the GET after the POST reused the POST's connection");
        TAP_EQ_INT(conns_opened(), 1, "the POST opened a connection of its own");

        log_reset();
        TAP_EQ_INT(get_path(h, "GET", "/idle-close", NULL, NULL), 0, "answer, then the server closes");
        run_for(e, 300 * USEC_PER_MSEC);
        TAP_EQ_INT(get_path(h, "GET", "/ka6", &status, NULL), 0, "next request after the server closed");
        TAP_EQ_INT(status, 200, "status 200");
        log_is("A GET /idle-close\nB GET /ka6\n", "the next request went on another connection");

        /* The server drops a reused connection on receiving the request: resent once, fresh. */
        log_reset();
        TAP_EQ_INT(get_path(h, "GET", "/ka7", NULL, NULL), 0, "a connection to reuse");
        TAP_EQ_INT(get_path(h, "GET", "/drop-if-reused", &status, &body), 0, "dropped request resent");
        TAP_OK(status == 200 && streq(body, "fresh"), "answered on the new connection");
        log_is("A GET /ka7\nA GET /drop-if-reused\nB GET /drop-if-reused\n",
               "sent on the reused connection, then once on a new one");

        /* A POST is never sent twice. */
        log_reset();
        TAP_EQ_INT(get_path(h, "POST", "/drop", NULL, NULL), -ECONNRESET, "POST closed without answer fails");
        log_is("A POST /drop\n", "the POST was sent once");
        {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                _cleanup_free_ char *u = url("/drop-if-reused");
                log_reset();
                TAP_EQ_INT(get_path(h, "GET", "/ka8", NULL, NULL), 0, "a connection to reuse");
                TAP_EQ_INT(cn_http_request_new(h, "POST", u, &r), 0, "new POST");
                cn_http_request_set_resend_safe(r);
                TAP_EQ_INT(cn_http_request_run(r), 0, "a resend-safe POST reuses a connection and is resent");
                log_is("A GET /ka8\nA POST /drop-if-reused\nB POST /drop-if-reused\n",
                       "resend-safe POST: reused connection, then a new one");
        }
        TAP_EQ_INT(get_path(h, "GET", "/drop", NULL, NULL), -ECONNRESET,
                   "a GET dropped on a new connection fails (only a reused one is retried)");

        /* Framing. */
        free(body);
        body = NULL;
        TAP_EQ_INT(get_path(h, "GET", "/chunked", &status, &body), 0, "chunked with extension, LF lines, trailer");
        TAP_EQ_STR(body, "helloX world", "chunked body");
        free(body);
        body = NULL;
        {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                _cleanup_free_ char *u = url("/continue");
                TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r), 0, "new");
                TAP_EQ_INT(cn_http_request_run(r), 0, "100 and 103 before the answer");
                TAP_OK(cn_http_request_get_status(r) == 200 && streq(cn_http_request_get_body(r, NULL), "done"),
                       "the final answer is the one kept");
                TAP_EQ_STR(cn_http_request_get_header(r, "X-Final"), "yes", "its headers");
                TAP_OK(!cn_http_request_get_header(r, "Link"), "not the 103's");
        }
        TAP_EQ_INT(get_path(h, "GET", "/endless-continue", NULL, NULL), -EPROTO,
                   "a thousand 100 Continue: -EPROTO, not an endless wait");
        TAP_EQ_INT(get_path(h, "GET", "/http10", &status, &body), 0, "HTTP/1.0 body ended by the close");
        TAP_EQ_STR(body, "until the close", "whole body");
        TAP_EQ_INT(get_path(h, "HEAD", "/head", &status, NULL), 0, "HEAD: no body despite Content-Length");
        TAP_EQ_INT(get_path(h, "GET", "/ka9", NULL, NULL), 0, "connection usable after HEAD");
        TAP_EQ_INT(get_path(h, "GET", "/bad-version", NULL, NULL), -EPROTO, "HTTP/2.0 status line: -EPROTO");
        TAP_EQ_INT(get_path(h, "GET", "/bad-header", NULL, NULL), -EPROTO, "space in a header name: -EPROTO");
        TAP_EQ_INT(get_path(h, "GET", "/folded", NULL, NULL), -EPROTO, "folded header line: -EPROTO");
        TAP_EQ_INT(get_path(h, "GET", "/two-lengths", NULL, NULL), -EPROTO, "two Content-Lengths: -EPROTO");
        TAP_EQ_INT(get_path(h, "GET", "/bad-chunk", NULL, NULL), -EPROTO, "bad chunk size: -EPROTO");
        TAP_EQ_INT(get_path(h, "GET", "/short", NULL, NULL), -ECONNRESET, "body cut short: -ECONNRESET");
        log_reset();
        TAP_EQ_INT(get_path(h, "GET", "/extra", &status, &body), 0, "answer followed by stray bytes");
        TAP_EQ_INT(get_path(h, "GET", "/ka10", NULL, NULL), 0, "next request");
        log_is("A GET /extra\nB GET /ka10\n", "a connection with stray bytes after an answer is not reused");

        /* Names are resolved (in a thread); bad URLs fail as completion errors. */
        if (asprintf(&want, "http://localhost:%d/ka11", port) < 0)
                abort();
        TAP_EQ_INT(get(h, "GET", want, &status, NULL), 0, "host name resolved");
        TAP_EQ_INT(get(h, "GET", "http://name.invalid/", NULL, NULL), -EHOSTUNREACH, "unknown host: -EHOSTUNREACH");
        TAP_EQ_INT(get(h, "GET", "ftp://127.0.0.1/", NULL, NULL), -EPROTO, "ftp: -EPROTO");
        TAP_EQ_INT(get(h, "GET", "http://user@127.0.0.1/", NULL, NULL), -EINVAL, "user information: -EINVAL");
        TAP_EQ_INT(get(h, "GET", "http://127.0.0.1:99999/", NULL, NULL), -EINVAL, "port out of range: -EINVAL");
        TAP_EQ_INT(get(h, "GET", "http:///x", NULL, NULL), -EINVAL, "no host: -EINVAL");
        TAP_EQ_INT(get(h, "GET", "http://[::1/", NULL, NULL), -EINVAL, "unclosed IPv6 bracket: -EINVAL");
}

static int discard(CnHttpRequest *r, const void *data, size_t size, void *userdata) {
        *(size_t *) userdata += size;
        return 0;
}

/* Mangled answers: each ends in an answer or one error, never a hang or a crash, and a body
 * never holds more than the answer sent. */
static void test_mangled(CnHttp *h) {
        int ok = 0, failed = 0, bad = 0;

        for (unsigned i = 0; i < 300; i++) {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                _cleanup_free_ char *u = NULL;
                char path[32];
                size_t streamed = 0, n = 0;
                int k;

                snprintf(path, sizeof(path), "/random/%u", i);
                u = url(path);
                if (cn_http_request_new(h, "GET", u, &r) < 0)
                        abort();
                cn_http_request_set_timeout(r, 5 * USEC_PER_SEC);
                if (i % 2)
                        cn_http_request_set_data_callback(r, discard, &streamed);
                k = cn_http_request_run(r);
                (void) cn_http_request_get_body(r, &n);
                if (k == -ETIMEDOUT || n + streamed > 512)
                        bad++;
                else if (k == 0)
                        ok++;
                else
                        failed++;
        }
        TAP_OK(bad == 0, "300 mangled answers: %d answered, %d failed, %d hung or overran", ok, failed, bad);
        TAP_OK(ok > 0 && failed > 0, "both outcomes seen");
}

typedef struct Count {
        int done, failed;
} Count;

static void count_done(CnHttpRequest *r, int error, void *userdata) {
        Count *c = userdata;
        c->done++;
        if (error < 0 || cn_http_request_get_status(r) != 200)
                c->failed++;
}

static void test_limits(sd_event *e) {
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        _cleanup_free_ char *u = url("/slow");
        Count c = {};

        TAP_OK(cn_http_new(e, &h) == 0 && cn_http_set_max_connections(h, 2) == 0, "client with 2 connections");
        /* The server has seen the earlier client's connections close. */
        for (int i = 0; i < 200; i++) {
                int open;
                pthread_mutex_lock(&log_lock);
                open = open_conns;
                pthread_mutex_unlock(&log_lock);
                if (open == 0)
                        break;
                usleep(10 * 1000);
        }
        log_reset();
        for (int i = 0; i < 5; i++) {
                CnHttpRequest *r = NULL;
                TAP_OK(cn_http_request_new(h, "GET", u, &r) == 0 && cn_http_request_submit(r, count_done, &c) == 0,
                       "submit %d", i);
                cn_http_request_unref(r);
        }
        for (usec_t end = cn_now(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC; c.done < 5 && cn_now(CLOCK_MONOTONIC) < end;)
                (void) sd_event_run(e, 100 * USEC_PER_MSEC);
        TAP_OK(c.done == 5 && c.failed == 0, "all five completed (%d, %d failed)", c.done, c.failed);
        pthread_mutex_lock(&log_lock);
        TAP_OK(n_conns == 2 && max_open_conns == 2, "two connections served them (%d opened, %d at once)", n_conns,
               max_open_conns);
        pthread_mutex_unlock(&log_lock);
}

static char tmpdir[] = "/tmp/cn-test-http-conn-XXXXXX";

static int tls_get(CnHttp *h, int p, const char *ca_pem, const uint8_t *pin, bool no_proxy) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
        _cleanup_free_ char *u = NULL;
        int k;

        if (asprintf(&u, "https://127.0.0.1:%d/", p) < 0)
                abort();
        k = cn_http_request_new(h, "GET", u, &r);
        if (k < 0)
                return k;
        cn_http_request_set_timeout(r, 10 * USEC_PER_SEC);
        if (no_proxy)
                cn_http_request_set_no_proxy(r);
        if (ca_pem)
                (void) cn_http_request_set_ca_pem(r, ca_pem, strlen(ca_pem));
        if (pin)
                (void) cn_http_request_set_pinned_sha256(r, pin);
        k = cn_http_request_run(r);
        return k < 0 ? k : (int) cn_http_request_get_status(r);
}

static void test_proxies(sd_event *e) {
        _cleanup_free_ char *proxy = NULL, *u = NULL, *ca_pem = NULL, *want = NULL, *body = NULL;
        int proxy_port = start(serve_proxy), tls_port, fd;
        uint8_t pin[CN_HTTP_SHA256_SIZE], wrong[CN_HTTP_SHA256_SIZE] = {};
        long status = 0;
        pid_t s_server;

        if (asprintf(&proxy, "http://us%%65r:p%%40ss@127.0.0.1:%d", proxy_port) < 0 || asprintf(&u, "http://127.0.0.1:%d/ka", port) < 0)
                abort();
        /* Forward proxy for http; credentials decoded from the URL and sent as Basic. */
        setenv("http_proxy", proxy, 1);
        setenv("no_proxy", "example.invalid, .other.invalid", 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with http_proxy");
                log_reset();
                TAP_EQ_INT(get(h, "GET", u, &status, &body), 0, "request through the proxy");
                TAP_EQ_STR(body, "proxied", "the proxy answered");
                if (asprintf(&want, "proxy GET %s HTTP/1.1 auth=Basic dXNlcjpwQHNz\n", u) < 0)
                        abort();
                log_is(want, "absolute URL and Proxy-Authorization: Basic user:p@ss");
                log_reset();
                TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r), 0, "new");
                cn_http_request_set_no_proxy(r);
                TAP_EQ_INT(cn_http_request_run(r), 0, "a request set to no proxy goes direct");
                log_is("A GET /ka\n", "to the server itself");
        }
        setenv("no_proxy", "10.0.0.0/8,127.0.0.0/8", 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with no_proxy by CIDR");
                log_reset();
                TAP_EQ_INT(get(h, "GET", u, NULL, NULL), 0, "request");
                log_is("A GET /ka\n", "127.0.0.1 in no_proxy's 127.0.0.0/8 goes direct");
        }
        setenv("no_proxy", "*", 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with no_proxy=*");
                log_reset();
                TAP_EQ_INT(get(h, "GET", u, NULL, NULL), 0, "request");
                log_is("A GET /ka\n", "no_proxy=* goes direct");
        }
        unsetenv("no_proxy");
        unsetenv("http_proxy");
        setenv("HTTP_PROXY", proxy, 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with HTTP_PROXY only");
                log_reset();
                TAP_EQ_INT(get(h, "GET", u, NULL, NULL), 0, "request");
                log_is("A GET /ka\n", "upper-case HTTP_PROXY is ignored for http, as libcurl does");
        }
        unsetenv("HTTP_PROXY");

        /* https through a CONNECT tunnel. */
        if (system("openssl version >/dev/null 2>&1") != 0 || !mkdtemp(tmpdir)) {
                tap_ok(1, "# SKIP openssl command not available");
                return;
        }
        if (make_test_certs(tmpdir) != 0) {
                tap_ok(0, "test certificates created");
                return;
        }
        (void) cn_read_file(tmpdir, "ca.pem", 65536, &ca_pem, NULL);
        {
                _cleanup_free_ char *path = NULL;
                FILE *f;
                X509 *x = NULL;
                unsigned len = 0;
                (void) cn_path_prefix_root(tmpdir, "server.pem", &path);
                f = path ? fopen(path, "re") : NULL;
                if (f)
                        x = PEM_read_X509(f, NULL, NULL, NULL);
                TAP_OK(x && X509_digest(x, EVP_sha256(), pin, &len) == 1 && len == sizeof(pin),
                       "server certificate digest");
                X509_free(x);
                if (f)
                        fclose(f);
        }
        fd = listen_loopback(&tls_port);
        close(fd);
        s_server = start_s_server(tmpdir, tls_port, false);

        setenv("https_proxy", proxy, 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with https_proxy");
                log_reset();
                TAP_EQ_INT(tls_get(h, tls_port, ca_pem, NULL, false), 200, "https through the CONNECT tunnel");
                free(want);
                if (asprintf(&want, "proxy CONNECT 127.0.0.1:%d HTTP/1.1 auth=Basic dXNlcjpwQHNz\n", tls_port) < 0)
                        abort();
                log_is(want, "CONNECT with Proxy-Authorization");
                TAP_EQ_INT(tls_get(h, tls_port, NULL, NULL, false), -EBADE,
                           "through the tunnel, the certificate is still verified (system store: -EBADE)");
                TAP_EQ_INT(tls_get(h, tls_port, NULL, pin, false), 200, "pinned digest through the tunnel");
                TAP_EQ_INT(tls_get(h, tls_port, NULL, wrong, false), -EBADE, "wrong pinned digest: -EBADE");
                TAP_EQ_INT(tls_get(h, 1, ca_pem, NULL, false), -ECONNREFUSED, "CONNECT refused by the proxy");
                log_reset();
                TAP_EQ_INT(tls_get(h, tls_port, ca_pem, NULL, true), 200, "no proxy for this request: direct");
                log_is("", "the proxy saw nothing");
                /* The connection key is remembered for the last input only: each change of it is
                 * a key of its own, and coming back to the one before finds its connection. */
                TAP_EQ_INT(tls_get(h, tls_port, NULL, NULL, true), -EBADE,
                           "direct without the CA right after it: not its connection (-EBADE)");
                TAP_EQ_INT(tls_get(h, tls_port, NULL, wrong, true), -EBADE, "direct with a wrong pin: -EBADE");
                TAP_EQ_INT(tls_get(h, tls_port, ca_pem, NULL, true), 200, "direct with the CA again: 200");
                TAP_EQ_INT(tls_get(h, tls_port, ca_pem, NULL, true), 200, "and once more");
        }
        unsetenv("https_proxy");
        setenv("https_proxy", "https://127.0.0.1:1", 1);
        {
                _cleanup_(cn_http_freep) CnHttp *h = NULL;
                TAP_EQ_INT(cn_http_new(e, &h), 0, "client with an https:// proxy");
                TAP_EQ_INT(tls_get(h, tls_port, ca_pem, NULL, false), -EINVAL, "https:// proxies refused: -EINVAL");
        }
        unsetenv("https_proxy");
        kill(s_server, SIGTERM);
        waitpid(s_server, NULL, 0);
        (void) sh("rm -rf %s", tmpdir);
}

static void test_escape(void) {
        _cleanup_free_ char *e = cn_http_escape("a b/c~d%é"), *u = NULL;
        size_t n = 0;

        TAP_EQ_STR(e, "a%20b%2Fc~d%25%C3%A9", "escape: all but unreserved");
        u = cn_http_unescape("a%20b%2fc+%zz%4", 15, &n);
        TAP_OK(u && streq(u, "a b/c+%zz%4") && n == 11, "unescape: %%XX only, bad escapes kept");
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *h = NULL;

        signal(SIGPIPE, SIG_IGN);
        unsetenv("http_proxy");
        unsetenv("https_proxy");
        unsetenv("HTTPS_PROXY");
        unsetenv("all_proxy");
        unsetenv("ALL_PROXY");
        port = start(serve_connection);
        if (sd_event_new(&e) < 0 || cn_http_new(e, &h) < 0)
                return 1;
        test_connections(e, h);
        test_mangled(h);
        h = cn_http_free(h);
        test_limits(e);
        test_proxies(e);
        test_escape();
        return tap_done();
}
