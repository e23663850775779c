/* SPDX-License-Identifier: Apache-2.0 */
/* The health and metrics server (see httpd.h): HTTP/1.1 on the daemon's sd-event loop, no
 * threads. A connection reads one request head (request line and headers, at most
 * HTTPD_MAX_HEAD bytes), is answered, and is kept for the next request unless the client asked
 * to close, spoke HTTP/1.0 or sent a body; requests sent ahead (pipelined) are answered in order.
 * Bodies are never read: a request announcing one is answered and the connection closed. A
 * connection that sends nothing for HTTPD_TIMEOUT, or whose answer is not taken in that time, is
 * closed, as are connections beyond HTTPD_MAX_CONNECTIONS (HTTPD_MAX_PER_ADDRESS from one
 * address).
 *
 * A server of our own, not libmicrohttpd: Debian's libmicrohttpd initialises GnuTLS when it is
 * loaded, whether or not it serves HTTPS, and that initialisation is about 1 MB of a daemon's
 * resident memory. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "string-util.h"
#include "time-util.h"

#define CN_HTTPD_MAX_BODY (8U * 1024U * 1024U)
#define HTTPD_MAX_HEAD 8192U
#define HTTPD_MAX_CONNECTIONS 64U
#define HTTPD_MAX_PER_ADDRESS 16U
#define HTTPD_TIMEOUT (10 * USEC_PER_SEC)
/* After the last answer: how long, and how much, of what the client still sends is read and
 * dropped before the connection is closed. Closing with unread input makes the kernel reset the
 * connection, and a reset can destroy the answer before the client has read it. */
#define HTTPD_LINGER (2 * USEC_PER_SEC)
#define HTTPD_LINGER_MAX (64U * 1024U)

typedef struct Handler {
        char *path;
        CnHttpdHandler handler;
        void *userdata;
} Handler;

typedef union SockAddr {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_storage storage;
} SockAddr;

typedef struct Conn Conn;

struct CnHttpd {
        sd_event *event;
        int fd;
        sd_event_source *listen;
        uint16_t port;
        Handler *handlers;
        size_t n_handlers;
        Conn *conns;
        unsigned n_conns;
        usec_t timeout;
};

struct Conn {
        CnHttpd *d;
        int fd;
        sd_event_source *io, *timer;
        SockAddr peer;
        CnBuf out;          /* the answer being written */
        size_t out_done;    /* bytes of it written */
        bool close_after;   /* close once the answer is written */
        bool lingering;     /* answered and shut down for writing: reading what the client still sends */
        size_t discarded;
        size_t n_in;
        Conn *next;
        char in[HTTPD_MAX_HEAD];
};

static Conn *conn_free(Conn *c) {
        if (!c)
                return NULL;
        for (Conn **p = &c->d->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        c->d->n_conns--;
                        break;
                }
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->fd);
        cn_buf_done(&c->out);
        free(c);
        return NULL;
}

static void conn_arm_timeout(Conn *c) {
        (void) sd_event_source_set_time(c->timer, cn_usec_add(cn_now(CLOCK_MONOTONIC), c->d->timeout));
        (void) sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static const char *reason_phrase(int status) {
        switch (status) {
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 505: return "HTTP Version Not Supported";
        default: return "Status";
        }
}

/* The answer to the request, into c->out; head_only leaves the body out (HEAD). */
static int conn_answer(Conn *c, int status, const char *content_type, const char *body, size_t size, bool head_only) {
        char head[512];
        int n;

        if (status < 100 || status > 999)
                status = 500;
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n%s%s\r\n",
                     status, reason_phrase(status), content_type, size,
                     status == 405 ? "Allow: GET, HEAD\r\n" : "", c->close_after ? "Connection: close\r\n" : "");
        if (n < 0 || (size_t) n >= sizeof(head))
                return -EINVAL;
        cn_buf_reset(&c->out);
        c->out_done = 0;
        if (cn_buf_add(&c->out, head, (size_t) n) < 0 || (!head_only && size > 0 && cn_buf_add(&c->out, body, size) < 0))
                return -ENOMEM;
        return 0;
}

static int conn_answer_text(Conn *c, int status, const char *text, bool head_only) {
        return conn_answer(c, status, "text/plain; charset=utf-8", text, strlen(text), head_only);
}

/* The value of header name among the header lines in head[0..len), or NULL. */
static const char *header_value(const char *head, size_t len, const char *name, size_t *ret_len) {
        size_t nl = strlen(name);

        for (const char *p = head, *end = head + len; p < end;) {
                const char *eol = memchr(p, '\n', end - p) ?: end, *v, *ve;

                if ((size_t) (eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
                        for (v = p + nl + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
                                ;
                        for (ve = eol; ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'); ve--)
                                ;
                        *ret_len = ve - v;
                        return v;
                }
                p = eol + 1;
        }
        return NULL;
}

static bool value_has_token(const char *v, size_t len, const char *token) {
        size_t tl = strlen(token);

        for (size_t i = 0; i + tl <= len; i++)
                if (strncasecmp(v + i, token, tl) == 0 && (i == 0 || v[i - 1] == ',' || v[i - 1] == ' ') &&
                    (i + tl == len || v[i + tl] == ',' || v[i + tl] == ' '))
                        return true;
        return false;
}

/* Answers the request whose head is c->in[0..head_len) (its last line break included). */
static int conn_handle(Conn *c, size_t head_len) {
        CnHttpd *d = c->d;
        _cleanup_buf_ CnBuf body = CN_BUF_INIT(CN_HTTPD_MAX_BODY);
        const char *content_type = "text/plain; charset=utf-8";
        const char *line_end = memchr(c->in, '\n', head_len), *sp1, *sp2, *headers, *v;
        _cleanup_free_ char *path = NULL;
        bool head_only = false;
        size_t line_len, vlen, path_len;
        int status;

        assert(line_end);
        line_len = line_end - c->in;
        if (line_len > 0 && c->in[line_len - 1] == '\r')
                line_len--;
        headers = line_end + 1;
        sp1 = memchr(c->in, ' ', line_len);
        sp2 = sp1 ? memchr(sp1 + 1, ' ', c->in + line_len - sp1 - 1) : NULL;
        if (!sp1 || !sp2 || sp1 == c->in || sp2 == sp1 + 1 || sp1[1] != '/') {
                c->close_after = true;
                return conn_answer_text(c, 400, "bad request\n", false);
        }
        if (!(c->in + line_len - sp2 - 1 == 8 && memcmp(sp2 + 1, "HTTP/1.", 7) == 0 &&
              (sp2[8] == '0' || sp2[8] == '1'))) {
                c->close_after = true;
                return conn_answer_text(c, 505, "HTTP version not supported\n", false);
        }
        /* HTTP/1.0 closes unless asked otherwise; we do not keep its connections at all. */
        if (sp2[8] == '0')
                c->close_after = true;
        v = header_value(headers, c->in + head_len - headers, "Connection", &vlen);
        if (v && value_has_token(v, vlen, "close"))
                c->close_after = true;
        /* A body is never read: what follows the head would be taken for the next request. */
        v = header_value(headers, c->in + head_len - headers, "Content-Length", &vlen);
        if ((v && !(vlen == 1 && v[0] == '0')) || header_value(headers, c->in + head_len - headers, "Transfer-Encoding", &vlen))
                c->close_after = true;

        if ((size_t) (sp1 - c->in) == 4 && memcmp(c->in, "HEAD", 4) == 0)
                head_only = true;
        else if (!((size_t) (sp1 - c->in) == 3 && memcmp(c->in, "GET", 3) == 0))
                return conn_answer_text(c, 405, "method not allowed\n", false);

        /* The path without its query. */
        path_len = sp2 - sp1 - 1;
        v = memchr(sp1 + 1, '?', path_len);
        if (v)
                path_len = v - sp1 - 1;
        path = strndup(sp1 + 1, path_len);
        if (!path)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_handlers; i++) {
                if (!streq(d->handlers[i].path, path))
                        continue;
                status = d->handlers[i].handler(d, path, &body, &content_type, d->handlers[i].userdata);
                if (status < 0) {
                        log_debug_errno(status, "Handler for %s failed: %m", path);
                        return conn_answer_text(c, 500, "internal error\n", head_only);
                }
                return conn_answer(c, status, content_type, cn_buf_str(&body), cn_buf_len(&body), head_only);
        }
        return conn_answer_text(c, 404, "not found\n", head_only);
}

/* The length of the complete request head at the start of c->in (through the empty line that ends
 * it, CRLF or a bare LF), or 0 while it is incomplete. */
static size_t head_length(const Conn *c) {
        for (const char *p = c->in, *end = c->in + c->n_in; (p = memchr(p, '\n', end - p)); p++) {
                if (p + 1 < end && p[1] == '\n')
                        return p + 2 - c->in;
                if (p + 2 < end && p[1] == '\r' && p[2] == '\n')
                        return p + 3 - c->in;
        }
        return 0;
}

static int conn_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);

/* Reads what there is, answers a complete request, writes the answer; frees c when it is done. */
static void conn_run(Conn *c) {
        while (c->lingering) {
                ssize_t n = recv(c->fd, c->in, sizeof(c->in), 0);

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0 || (c->discarded += (size_t) n) > HTTPD_LINGER_MAX) {
                        conn_free(c);
                        return;
                }
        }
        for (;;) {
                size_t head;
                ssize_t n;

                /* Writing an answer. */
                if (c->out_done < cn_buf_len(&c->out)) {
                        n = send(c->fd, cn_buf_str(&c->out) + c->out_done, cn_buf_len(&c->out) - c->out_done,
                                 MSG_NOSIGNAL);
                        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                                (void) sd_event_source_set_io_events(c->io, EPOLLOUT);
                                return;
                        }
                        if (n < 0) {
                                conn_free(c);
                                return;
                        }
                        c->out_done += (size_t) n;
                        if (c->out_done < cn_buf_len(&c->out))
                                continue;
                        if (c->close_after) {
                                /* Our side first, so that the client sees the end of the answer;
                                 * then what it still sends is read until it closes too. */
                                (void) shutdown(c->fd, SHUT_WR);
                                c->lingering = true;
                                (void) sd_event_source_set_io_events(c->io, EPOLLIN);
                                (void) sd_event_source_set_time(c->timer,
                                                                cn_usec_add(cn_now(CLOCK_MONOTONIC), MIN(c->d->timeout, HTTPD_LINGER)));
                                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
                                conn_run(c);
                                return;
                        }
                        cn_buf_done(&c->out); /* an idle connection holds no answer */
                        c->out_done = 0;
                        conn_arm_timeout(c);
                        (void) sd_event_source_set_io_events(c->io, EPOLLIN);
                }

                /* A request read ahead. */
                head = head_length(c);
                if (head > 0) {
                        if (conn_handle(c, head) < 0) {
                                conn_free(c);
                                return;
                        }
                        memmove(c->in, c->in + head, c->n_in - head);
                        c->n_in -= head;
                        continue;
                }
                if (c->n_in == sizeof(c->in)) {
                        c->close_after = true;
                        c->n_in = 0;
                        if (conn_answer_text(c, 431, "request head too large\n", false) < 0) {
                                conn_free(c);
                                return;
                        }
                        continue;
                }

                n = recv(c->fd, c->in + c->n_in, sizeof(c->in) - c->n_in, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        conn_free(c);
                        return;
                }
                c->n_in += (size_t) n;
        }
}

static int conn_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = ASSERT_PTR(userdata);

        if ((revents & (EPOLLERR | EPOLLHUP)) && !(revents & EPOLLIN)) {
                conn_free(c);
                return 0;
        }
        conn_run(c);
        return 0;
}

static int conn_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        conn_free(userdata);
        return 0;
}

static bool same_address(const SockAddr *a, const SockAddr *b) {
        if (a->sa.sa_family != b->sa.sa_family)
                return false;
        if (a->sa.sa_family == AF_INET)
                return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
        if (a->sa.sa_family == AF_INET6)
                return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof(a->in6.sin6_addr)) == 0;
        return false;
}

static void accept_one(CnHttpd *d, int fd, const SockAddr *peer) {
        _cleanup_close_ int cfd = fd;
        unsigned same = 0;
        Conn *c;

        for (Conn *o = d->conns; o; o = o->next)
                same += same_address(&o->peer, peer);
        if (d->n_conns >= HTTPD_MAX_CONNECTIONS || same >= HTTPD_MAX_PER_ADDRESS) {
                log_debug("Health and metrics server: connection limit reached, closing a new connection.");
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->d = d;
        c->fd = TAKE_FD(cfd);
        c->peer = *peer;
        c->out = (CnBuf) CN_BUF_INIT(CN_HTTPD_MAX_BODY + 1024);
        c->next = d->conns;
        d->conns = c;
        d->n_conns++;
        if (sd_event_add_io(d->event, &c->io, c->fd, EPOLLIN, conn_on_io, c) < 0 ||
            sd_event_add_time(d->event, &c->timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_MSEC * 100, conn_on_timeout,
                              c) < 0) {
                conn_free(c);
                return;
        }
        (void) sd_event_source_set_description(c->io, "httpd-connection");
        (void) sd_event_source_set_description(c->timer, "httpd-timeout");
        conn_arm_timeout(c);
}

static int on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CnHttpd *d = ASSERT_PTR(userdata);

        /* A bounded batch, so that a flood does not starve the loop. */
        for (unsigned k = 0; k < 64; k++) {
                SockAddr peer = {};
                socklen_t l = sizeof(peer);
                int cfd = accept4(fd, &peer.sa, &l, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_debug_errno(errno, "Health and metrics server: accept failed: %m");
                        return 0;
                }
                accept_one(d, cfd, &peer);
        }
        return 0;
}

static int listen_socket(const char *address, uint16_t port, uint16_t *ret_port) {
        SockAddr sa = {};
        socklen_t l;
        _cleanup_close_ int fd = -EBADF;
        int one = 1;

        if (inet_pton(AF_INET, address, &sa.in.sin_addr) == 1) {
                sa.in.sin_family = AF_INET;
                sa.in.sin_port = htons(port);
                l = sizeof(sa.in);
        } else if (inet_pton(AF_INET6, address, &sa.in6.sin6_addr) == 1) {
                sa.in6.sin6_family = AF_INET6;
                sa.in6.sin6_port = htons(port);
                l = sizeof(sa.in6);
        } else
                return -EINVAL;
        fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, &sa.sa, l) < 0 || listen(fd, 64) < 0 || getsockname(fd, &sa.sa, &l) < 0)
                return -errno;
        *ret_port = ntohs(sa.sa.sa_family == AF_INET ? sa.in.sin_port : sa.in6.sin6_port);
        return TAKE_FD(fd);
}

int cn_httpd_new(sd_event *event, const char *address, uint16_t port, CnHttpd **ret) {
        _cleanup_(cn_httpd_freep) CnHttpd *d = NULL;
        int r;

        assert(event);
        assert(address);
        assert(ret);
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(event);
        d->timeout = HTTPD_TIMEOUT;
        d->fd = listen_socket(address, port, &d->port);
        if (d->fd < 0)
                return log_debug_errno(d->fd, "Failed to listen on %s:%u: %m", address, port);
        r = sd_event_add_io(event, &d->listen, d->fd, EPOLLIN, on_listen, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(d->listen, "httpd-listen");
        *ret = TAKE_PTR(d);
        return 0;
}

CnHttpd *cn_httpd_free(CnHttpd *d) {
        if (!d)
                return NULL;
        while (d->conns)
                conn_free(d->conns);
        sd_event_source_disable_unref(d->listen);
        if (d->fd >= 0)
                safe_close(d->fd);
        for (size_t i = 0; i < d->n_handlers; i++)
                free(d->handlers[i].path);
        free(d->handlers);
        sd_event_unref(d->event);
        free(d);
        return NULL;
}

uint16_t cn_httpd_get_port(CnHttpd *d) {
        return ASSERT_PTR(d)->port;
}

void cn_httpd_set_timeout(CnHttpd *d, usec_t timeout) {
        ASSERT_PTR(d)->timeout = timeout;
}

int cn_httpd_add_handler(CnHttpd *d, const char *path, CnHttpdHandler handler, void *userdata) {
        Handler *n;
        char *p;

        assert(d);
        assert(handler);
        if (!path || path[0] != '/')
                return -EINVAL;
        for (size_t i = 0; i < d->n_handlers; i++)
                if (streq(d->handlers[i].path, path))
                        return -EEXIST;
        p = strdup(path);
        if (!p)
                return -ENOMEM;
        n = reallocarray(d->handlers, d->n_handlers + 1, sizeof(Handler));
        if (!n) {
                free(p);
                return -ENOMEM;
        }
        d->handlers = n;
        d->handlers[d->n_handlers++] = (Handler){ .path = p, .handler = handler, .userdata = userdata };
        return 0;
}

static int metrics_handler(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        CnMetrics *m = ASSERT_PTR(userdata);
        int r;

        r = cn_metrics_format(m, body);
        if (r < 0)
                return r;
        *content_type = CN_METRICS_CONTENT_TYPE;
        return 200;
}

int cn_httpd_add_metrics(CnHttpd *d, CnMetrics *m) {
        assert(m);
        return cn_httpd_add_handler(d, "/metrics", metrics_handler, m);
}
