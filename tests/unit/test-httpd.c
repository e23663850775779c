/* SPDX-License-Identifier: Apache-2.0 */
/* The health/metrics server and the HTTP client on one sd-event loop: routes, status codes,
 * methods, and /metrics output judged by promtool; then over raw connections what a client that
 * is not libcurl may send: keep-alive, pipelined requests, HTTP/1.0, Connection: close, bodies,
 * query strings, malformed and oversized heads, too many connections, and a client that stalls. */
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "httpd.h"
#include "metrics.h"
#include "httpget.h"
#include "promtool.h"
#include "tap.h"

static bool ready;

static int healthz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        int r = cn_buf_add_str(body, "ok\n");
        return r < 0 ? r : 200;
}

static int readyz(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        int r = cn_buf_add_str(body, ready ? "ok\n" : "not ready: waiting for informer sync\n");
        *content_type = "text/plain";
        return r < 0 ? r : ready ? 200 : 503;
}

static int broken(CnHttpd *d, const char *path, CnBuf *body, const char **content_type, void *userdata) {
        return -EIO;
}

static int connect_to(uint16_t port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        assert(fd >= 0);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                assert(!"connect");
        return fd;
}

/* Sends req (if any) on fd and runs the loop until `until` has appeared `times` times in what came
 * back, the server closed (*ret_closed), or a second passed. The bytes read, NUL-terminated. */
static char *exchange(sd_event *e, int fd, const char *req, const char *until, unsigned times, bool *ret_closed) {
        static char got[65536];
        size_t n = 0, sent = 0, len = req ? strlen(req) : 0;
        usec_t end = cn_now(CLOCK_MONOTONIC) + USEC_PER_SEC;

        *ret_closed = false;
        got[0] = 0;
        while (cn_now(CLOCK_MONOTONIC) < end) {
                unsigned seen = 0;
                ssize_t k;

                if (sent < len) {
                        k = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
                        if (k > 0)
                                sent += (size_t) k;
                }
                (void) sd_event_run(e, 10 * USEC_PER_MSEC);
                k = recv(fd, got + n, sizeof(got) - 1 - n, 0);
                if (k == 0 || (k < 0 && errno != EAGAIN)) {
                        *ret_closed = true;
                        break;
                }
                if (k > 0) {
                        n += (size_t) k;
                        got[n] = 0;
                }
                for (const char *p = got; until && (p = strstr(p, until)); p++)
                        seen++;
                if (until && seen >= times)
                        break;
        }
        return got;
}

static unsigned count(const char *s, const char *what) {
        unsigned n = 0;

        for (const char *p = s; (p = strstr(p, what)); p++)
                n++;
        return n;
}

static void test_raw(sd_event *e, CnHttpd *d) {
        uint16_t port = cn_httpd_get_port(d);
        int fd, fds[17];
        bool closed;
        char *got, big[9000];

        fd = connect_to(port);
        got = exchange(e, fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "ok\n", 1, &closed);
        TAP_OK(strncmp(got, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(got, "Content-Length: 3\r\n") &&
                       strstr(got, "Cache-Control: no-store\r\n") && !strstr(got, "Connection: close") && !closed,
               "an HTTP/1.1 request is answered and the connection kept");
        got = exchange(e, fd, "GET /healthz?verbose=1 HTTP/1.1\r\n\r\n", "ok\n", 1, &closed);
        TAP_OK(strncmp(got, "HTTP/1.1 200 OK", 15) == 0 && !closed, "a second request on it, with a query string, is answered");
        got = exchange(e, fd, "GET /nope HTTP/1.1\r\n\r\nHEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\n\n", "HTTP/1.1", 3,
                       &closed);
        TAP_OK(count(got, "HTTP/1.1 ") == 3 && strstr(got, "404 Not Found") < strstr(got, "200 OK") &&
                       count(got, "ok\n") == 1 && !closed,
               "three pipelined requests (the last with bare line feeds) are answered in order, HEAD without a body");
        got = exchange(e, fd, "GET /healthz HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n", NULL, 0, &closed);
        TAP_OK(strstr(got, "200 OK") && strstr(got, "Connection: close\r\n") && strstr(got, "\r\n\r\nok\n") && closed,
               "Connection: close is answered and the connection closed");
        close(fd);

        fd = connect_to(port);
        got = exchange(e, fd, "GET /healthz HTTP/1.0\r\n\r\n", NULL, 0, &closed);
        TAP_OK(strstr(got, "200 OK") && strstr(got, "Connection: close") && closed, "HTTP/1.0 is answered, then closed");
        close(fd);

        fd = connect_to(port);
        got = exchange(e, fd, "POST /healthz HTTP/1.1\r\nContent-Length: 24\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n", NULL, 0,
                       &closed);
        TAP_OK(strstr(got, "405 Method Not Allowed") && strstr(got, "Allow: GET, HEAD\r\n") && count(got, "HTTP/1.1 ") == 1 &&
                       closed,
               "a request with a body is answered and the connection closed: the body is never taken for a request");
        close(fd);

        static const struct {
                const char *req, *want, *what;
        } bad[] = {
                { "GARBAGE\r\n\r\n", "400 Bad Request", "a request line without a target is 400" },
                { "GET healthz HTTP/1.1\r\n\r\n", "400 Bad Request", "a target not starting with / is 400" },
                { "GET /healthz HTTP/2.0\r\n\r\n", "505 HTTP Version Not Supported", "HTTP/2.0 in the request line is 505" },
                { "GET /healthz\r\n\r\n", "400 Bad Request", "an HTTP/0.9 request line is 400" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                fd = connect_to(port);
                got = exchange(e, fd, bad[i].req, NULL, 0, &closed);
                TAP_OK(strstr(got, bad[i].want) && closed, "%s, and the connection closed", bad[i].what);
                close(fd);
        }

        fd = connect_to(port);
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        memcpy(big, "GET /healthz HTTP/1.1\r\nX-Long: ", 31);
        got = exchange(e, fd, big, NULL, 0, &closed);
        TAP_OK(strstr(got, "431 Request Header Fields Too Large") && closed,
               "a request head over 8 KB is 431 and the connection closed");
        close(fd);

        /* 16 connections from one address are the most it keeps; the 17th is closed at once. */
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                fds[i] = connect_to(port);
                (void) exchange(e, fds[i], i < 16 ? "GET /healthz HTTP/1.1\r\n\r\n" : NULL, i < 16 ? "ok\n" : NULL, 1,
                                &closed);
        }
        TAP_OK(closed, "a 17th connection from one address is closed");
        got = exchange(e, fds[0], "GET /healthz HTTP/1.1\r\n\r\n", "ok\n", 1, &closed);
        TAP_OK(strstr(got, "200 OK") && !closed, "the 16 before it are served");
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                close(fds[i]);

        cn_httpd_set_timeout(d, 200 * USEC_PER_MSEC);
        fd = connect_to(port);
        got = exchange(e, fd, "GET /healthz HTTP/1.1\r\nHost:", NULL, 0, &closed);
        TAP_OK(closed && !*got, "a client that stops mid-request is closed after the timeout, unanswered");
        close(fd);
        fd = connect_to(port);
        (void) exchange(e, fd, "GET /healthz HTTP/1.1\r\n\r\n", "ok\n", 1, &closed);
        got = exchange(e, fd, NULL, NULL, 0, &closed);
        TAP_OK(closed, "an idle kept connection is closed after the timeout");
        close(fd);
        cn_httpd_set_timeout(d, 10 * USEC_PER_SEC);
        got = exchange(e, connect_to(port), "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", NULL, 0, &closed);
        TAP_OK(strstr(got, "200 OK") && closed, "the server still serves after all that");
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        _cleanup_(cn_httpd_freep) CnHttpd *d = NULL, *d6 = NULL, *bad = NULL;
        _cleanup_(cn_metrics_freep) CnMetrics *m = NULL;
        _cleanup_free_ char *b1 = NULL, *b2 = NULL, *b3 = NULL, *ct = NULL, *b4 = NULL, *b6 = NULL;
        CnMetric *c = NULL;
        uint16_t port;
        int p;

        if (sd_event_new(&e) < 0 || cn_http_new(e, &h) < 0 || cn_metrics_new(&m) < 0)
                return 1;
        TAP_EQ_INT(cn_httpd_new(e, "127.0.0.1", 0, &d), 0, "server on an ephemeral loopback port");
        port = cn_httpd_get_port(d);
        TAP_OK(port > 0, "port %u assigned", port);
        TAP_EQ_INT(cn_httpd_add_handler(d, "/healthz", healthz, NULL), 0, "healthz");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/readyz", readyz, NULL), 0, "readyz");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/broken", broken, NULL), 0, "broken");
        TAP_EQ_INT(cn_httpd_add_handler(d, "/healthz", healthz, NULL), -EEXIST, "path registered twice");
        TAP_EQ_INT(cn_httpd_add_handler(d, "healthz", healthz, NULL), -EINVAL, "relative path");
        TAP_EQ_INT(cn_httpd_add_metrics(d, m), 0, "metrics");
        (void) cn_metrics_counter(m, "cloudnode_test_events", "Test events.", CN_LABELS("kind"), &c);
        (void) cn_metric_inc(c, CN_LABELS("a\"b"));

        TAP_EQ_INT(get(h, port, "GET", "/healthz", &b1, NULL), 200, "GET /healthz is 200");
        TAP_EQ_STR(b1, "ok\n", "healthz body");
        TAP_EQ_INT(get(h, port, "GET", "/readyz", &b2, NULL), 503, "GET /readyz is 503 before ready");
        ready = true;
        TAP_EQ_INT(get(h, port, "GET", "/readyz", NULL, NULL), 200, "GET /readyz is 200 once ready");
        TAP_EQ_INT(get(h, port, "HEAD", "/healthz", &b6, NULL), 200, "HEAD /healthz");
        TAP_EQ_STR(b6, "", "HEAD has no body");
        TAP_EQ_INT(get(h, port, "GET", "/nope", NULL, NULL), 404, "unknown path is 404");
        TAP_EQ_INT(get(h, port, "GET", "/healthz/", NULL, NULL), 404, "paths match exactly");
        TAP_EQ_INT(get(h, port, "POST", "/healthz", NULL, NULL), 405, "POST is 405");
        TAP_EQ_INT(get(h, port, "GET", "/broken", &b4, NULL), 500, "failing handler is 500");
        TAP_EQ_INT(get(h, port, "GET", "/metrics", &b3, &ct), 200, "GET /metrics");
        TAP_EQ_STR(ct, CN_METRICS_CONTENT_TYPE, "metrics content type");
        TAP_OK(b3 && strstr(b3, "cloudnode_test_events_total{kind=\"a\\\"b\"} 1\n"), "metrics body served");
        p = promtool_check(b3 ?: "");
        if (p < 0)
                tap_ok(1, "# SKIP promtool not installed");
        else
                TAP_OK(p == 1, "promtool check metrics accepts /metrics");

        TAP_EQ_INT(cn_httpd_new(e, "::1", 0, &d6), 0, "IPv6 loopback");
        TAP_EQ_INT(cn_httpd_add_handler(d6, "/healthz", healthz, NULL), 0, "healthz on IPv6");
        {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
                _cleanup_free_ char *u = NULL;
                TAP_OK(asprintf(&u, "http://[::1]:%u/healthz", cn_httpd_get_port(d6)) > 0 &&
                               cn_http_request_new(h, "GET", u, &r) == 0 && cn_http_request_run(r) == 0 &&
                               cn_http_request_get_status(r) == 200,
                       "GET over IPv6");
        }
        test_raw(e, d);
        TAP_EQ_INT(cn_httpd_new(e, "localhost", 0, &bad), -EINVAL, "address must be numeric");
        TAP_OK(cn_httpd_new(e, "127.0.0.1", port, &bad) < 0, "port in use is an error");
        return tap_done();
}
