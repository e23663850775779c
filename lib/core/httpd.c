/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd on sd-event: MHD in epoll mode without threads; its epoll fd is an I/O source and
 * MHD_get_timeout() drives a timer, both calling MHD_run(). See httpd.h. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "time-util.h"

#define CN_HTTPD_MAX_BODY (8U * 1024U * 1024U)

typedef struct Handler {
        char *path;
        CnHttpdHandler handler;
        void *userdata;
} Handler;

struct CnHttpd {
        sd_event *event;
        struct MHD_Daemon *daemon;
        sd_event_source *io, *timer;
        uint16_t port;
        Handler *handlers;
        size_t n_handlers;
};

static void httpd_schedule(CnHttpd *d) {
        MHD_UNSIGNED_LONG_LONG ms;

        if (MHD_get_timeout(d->daemon, &ms) != MHD_YES) {
                (void) sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(d->timer, cn_usec_add(cn_now(CLOCK_MONOTONIC), (usec_t) ms * USEC_PER_MSEC));
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
}

static int httpd_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CnHttpd *d = ASSERT_PTR(userdata);

        (void) MHD_run(d->daemon);
        httpd_schedule(d);
        return 0;
}

static int httpd_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnHttpd *d = ASSERT_PTR(userdata);

        (void) MHD_run(d->daemon);
        httpd_schedule(d);
        return 0;
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *content_type,
                               const char *body, size_t size) {
        struct MHD_Response *resp;
        enum MHD_Result ret;

        resp = MHD_create_response_from_buffer(size, (void *) body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result httpd_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload_data, size_t *upload_data_size,
                                    void **con_cls) {
        CnHttpd *d = ASSERT_PTR(cls);
        _cleanup_buf_ CnBuf body = CN_BUF_INIT(CN_HTTPD_MAX_BODY);
        const char *content_type = "text/plain; charset=utf-8";
        int status;

        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, content_type, "method not allowed\n", 19);
        for (size_t i = 0; i < d->n_handlers; i++) {
                if (!streq(d->handlers[i].path, url))
                        continue;
                status = d->handlers[i].handler(d, url, &body, &content_type, d->handlers[i].userdata);
                if (status < 0) {
                        log_debug_errno(status, "Handler for %s failed: %m", url);
                        return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                                       "internal error\n", 15);
                }
                return respond(c, (unsigned) status, content_type, cn_buf_str(&body), cn_buf_len(&body));
        }
        return respond(c, MHD_HTTP_NOT_FOUND, content_type, "not found\n", 10);
}

static void httpd_log(void *cls, const char *fmt, va_list ap) _printf_(2, 0);
static void httpd_log(void *cls, const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = NULL;

        if (vasprintf(&msg, fmt, ap) >= 0)
                log_debug("microhttpd: %s", msg);
}

static int listen_socket(const char *address, uint16_t port, uint16_t *ret_port) {
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } sa = {};
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
        _cleanup_close_ int fd = -EBADF;
        const union MHD_DaemonInfo *info;
        int r;

        assert(event);
        assert(address);
        assert(ret);
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(event);
        fd = listen_socket(address, port, &d->port);
        if (fd < 0)
                return log_debug_errno(fd, "Failed to listen on %s:%u: %m", address, port);
        d->daemon = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, httpd_access, d, MHD_OPTION_LISTEN_SOCKET, fd,
                                     MHD_OPTION_CONNECTION_LIMIT, 64U, MHD_OPTION_CONNECTION_TIMEOUT, 10U,
                                     MHD_OPTION_PER_IP_CONNECTION_LIMIT, 16U, MHD_OPTION_EXTERNAL_LOGGER,
                                     httpd_log, NULL, MHD_OPTION_END);
        if (!d->daemon)
                return -EIO;
        TAKE_FD(fd); /* owned by the daemon now */
        info = MHD_get_daemon_info(d->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return -EIO;
        r = sd_event_add_io(event, &d->io, info->epoll_fd, EPOLLIN, httpd_on_io, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(d->io, "httpd-io");
        r = sd_event_add_time(event, &d->timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_MSEC, httpd_on_timer, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(d->timer, "httpd-timer");
        httpd_schedule(d);
        *ret = TAKE_PTR(d);
        return 0;
}

CnHttpd *cn_httpd_free(CnHttpd *d) {
        if (!d)
                return NULL;
        sd_event_source_disable_unref(d->io);
        sd_event_source_disable_unref(d->timer);
        if (d->daemon)
                MHD_stop_daemon(d->daemon);
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
