/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP client on sd-event against a small HTTP server on 127.0.0.1 run by this test (one thread per
 * connection): status, headers, bodies, size caps, timeouts, streaming, cancellation, and that
 * transfers do not block the loop. TLS cases run against `openssl s_server` with certificates made
 * for the test: verification cannot be skipped, CA as file and as PEM data, client certificates. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "fileio.h"
#include "http.h"
#include "string-util.h"
#include "tap.h"
#include "tlstest.h"

static int server_port;

static void send_all(int fd, const void *p, size_t n) {
        const char *c = p;
        while (n > 0) {
                ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
                if (k <= 0)
                        return;
                c += k;
                n -= (size_t) k;
        }
}

static void send_str(int fd, const char *s) {
        send_all(fd, s, strlen(s));
}

static bool send_chunk(int fd, const void *p, size_t n) {
        char hdr[32];
        snprintf(hdr, sizeof(hdr), "%zx\r\n", n);
        if (send(fd, hdr, strlen(hdr), MSG_NOSIGNAL) < 0 || send(fd, p, n, MSG_NOSIGNAL) < 0 ||
            send(fd, "\r\n", 2, MSG_NOSIGNAL) < 0)
                return false;
        return true;
}

static void *serve_connection(void *arg) {
        int fd = (int) (intptr_t) arg;
        char req[65536], method[16] = "", path[256] = "";
        size_t n = 0;
        char *end = NULL, *body;
        long clen = 0;

        for (;;) {
                ssize_t k = recv(fd, req + n, sizeof(req) - 1 - n, 0);
                if (k <= 0)
                        goto out;
                n += (size_t) k;
                req[n] = 0;
                end = strstr(req, "\r\n\r\n");
                if (end)
                        break;
        }
        body = end + 4;
        char *cl = strcasestr(req, "\r\ncontent-length:");
        if (cl && cl < end)
                clen = strtol(cl + 17, NULL, 10);
        while ((long) (n - (size_t) (body - req)) < clen && n < sizeof(req) - 1) {
                ssize_t k = recv(fd, req + n, sizeof(req) - 1 - n, 0);
                if (k <= 0)
                        break;
                n += (size_t) k;
                req[n] = 0;
        }
        (void) sscanf(req, "%15s %255s", method, path);

        if (streq(path, "/hello"))
                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Subject-Token: gAAAAtoken\r\n"
                             "RateLimit-Remaining: 5\r\nratelimit-remaining: 4\r\nConnection: close\r\n\r\nhello world");
        else if (streq(path, "/echo")) {
                char out[70000];
                *end = 0;
                int k = snprintf(out, sizeof(out), "%s\n%s\n\n%s", method, req, body);
                char hdr[128];
                snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", k);
                send_str(fd, hdr);
                send_all(fd, out, (size_t) k);
        } else if (streq(path, "/big")) {
                static char chunk[65536];
                memset(chunk, 'x', sizeof(chunk));
                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\nConnection: close\r\n\r\n");
                for (int i = 0; i < 32; i++)
                        send_all(fd, chunk, sizeof(chunk));
        } else if (streq(path, "/big-chunked")) {
                static char chunk[32768];
                memset(chunk, 'y', sizeof(chunk));
                send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
                for (int i = 0; i < 64; i++)
                        if (!send_chunk(fd, chunk, sizeof(chunk)))
                                break;
                send_str(fd, "0\r\n\r\n");
        } else if (streq(path, "/slow")) {
                usleep(1500 * 1000);
                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow");
        } else if (streq(path, "/stream") || streq(path, "/stream-forever")) {
                bool forever = streq(path, "/stream-forever");
                send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                             "Connection: close\r\n\r\n");
                for (int i = 1; forever ? i <= 100 : i <= 3; i++) {
                        char line[64];
                        int k = snprintf(line, sizeof(line), "{\"type\":\"ADDED\",\"n\":%d}\n", i);
                        /* Split each event across two chunks: parsers must cope with partial data. */
                        if (!send_chunk(fd, line, 10) || !send_chunk(fd, line + 10, (size_t) k - 10))
                                break;
                        usleep(50 * 1000);
                }
                send_str(fd, "0\r\n\r\n");
        } else if (streq(path, "/429"))
                send_str(fd, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 17\r\n"
                             "Connection: close\r\n\r\n{\"kind\":\"Status\"}");
        else if (streq(path, "/error-stream"))
                send_str(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom");
        else if (streq(path, "/header-flood")) {
                send_str(fd, "HTTP/1.1 200 OK\r\n");
                for (int i = 0; i < 2000; i++) {
                        char h[64];
                        snprintf(h, sizeof(h), "X-Flood-%d: %040d\r\n", i, i);
                        send_str(fd, h);
                }
                send_str(fd, "Content-Length: 0\r\n\r\n");
        } else if (streq(path, "/close"))
                ; /* close without answering */
        else
                send_str(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
out:
        shutdown(fd, SHUT_WR);
        close(fd);
        return NULL;
}

static void *server_main(void *arg) {
        int lfd = (int) (intptr_t) arg;
        for (;;) {
                pthread_t t;
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                if (pthread_create(&t, NULL, serve_connection, (void *) (intptr_t) fd) == 0)
                        pthread_detach(t);
                else
                        close(fd);
        }
        return NULL;
}

static void start_server(void) {
        pthread_t t;
        int fd = listen_loopback(&server_port);
        if (fd < 0 || pthread_create(&t, NULL, server_main, (void *) (intptr_t) fd) != 0) {
                printf("Bail out! cannot start test server\n");
                exit(1);
        }
        pthread_detach(t);
}

static char *url(const char *path) {
        char *u;
        if (asprintf(&u, "http://127.0.0.1:%d%s", server_port, path) < 0)
                abort();
        return u;
}

static int run(CnHttp *h, const char *method, const char *path, CnHttpRequest **ret) {
        _cleanup_free_ char *u = url(path);
        int r = cn_http_request_new(h, method, u, ret);
        return r < 0 ? r : cn_http_request_run(*ret);
}

typedef struct Order {
        char log[64];
} Order;

static void order_done(CnHttpRequest *r, int error, void *userdata) {
        Order *o = userdata;
        strcat(o->log, strstr(cn_http_request_get_url(r), "/slow") ? "S" : "H");
}

static int order_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Order *o = userdata;
        strcat(o->log, "t");
        return 0;
}

typedef struct Stream {
        CnBuf lines;
        int chunks;
        int stop_after;
} Stream;

static int stream_data(CnHttpRequest *r, const void *data, size_t size, void *userdata) {
        Stream *s = userdata;
        s->chunks++;
        if (cn_buf_add(&s->lines, data, size) < 0)
                return -E2BIG;
        if (s->stop_after > 0 && s->chunks >= s->stop_after)
                return -ENOTRECOVERABLE;
        return 0;
}

static void never_called(CnHttpRequest *r, int error, void *userdata) {
        *(bool *) userdata = true;
}

static int set_flag(sd_event_source *s, uint64_t usec, void *userdata) {
        *(bool *) userdata = true;
        return 0;
}

/* Runs the loop for a while without finishing it, so later requests can still use it. */
static void run_for(sd_event *e, usec_t t) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *s = NULL;
        bool flag = false;

        (void) sd_event_add_time_relative(e, &s, CLOCK_MONOTONIC, t, 0, set_flag, &flag);
        while (!flag && sd_event_run(e, UINT64_MAX) >= 0)
                ;
}

static char *mfree_str(char *p) {
        free(p);
        return NULL;
}

static void test_plain(sd_event *e, CnHttp *h) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL, *r5 = NULL,
                                                        *r6 = NULL, *r7 = NULL, *r8 = NULL, *r9 = NULL, *r10 = NULL;
        _cleanup_free_ char *u = NULL, *stolen = NULL;
        const char *body;
        size_t n;
        usec_t ra = 0;

        TAP_EQ_INT(run(h, "GET", "/hello", &r1), 0, "GET completes");
        TAP_EQ_INT(cn_http_request_get_status(r1), 200, "status 200");
        body = cn_http_request_get_body(r1, &n);
        TAP_OK(n == 11 && streq(body, "hello world"), "body buffered");
        TAP_EQ_STR(cn_http_request_get_header(r1, "x-subject-token"), "gAAAAtoken", "header lookup ignores case");
        TAP_EQ_STR(cn_http_request_get_header(r1, "RateLimit-Remaining"), "4", "last header value wins");
        TAP_OK(!cn_http_request_get_header(r1, "Retry-After"), "absent header is NULL");
        TAP_EQ_INT(cn_http_request_steal_body(r1, &stolen, &n), 0, "steal body");
        TAP_EQ_STR(stolen, "hello world", "stolen body");

        u = url("/echo");
        TAP_EQ_INT(cn_http_request_new(h, "PATCH", u, &r2), 0, "new PATCH");
        TAP_EQ_INT(cn_http_request_set_body(r2, "{\"spec\":{}}", 11, "application/merge-patch+json"), 0, "body");
        TAP_EQ_INT(cn_http_request_set_bearer_token(r2, "s3cret-token"), 0, "bearer token");
        TAP_EQ_INT(cn_http_request_add_header(r2, "X-Evil", "a\r\nInjected: yes"), -EINVAL, "CRLF in header refused");
        TAP_EQ_INT(cn_http_request_set_bearer_token(r2, "tok\nX: y"), -EINVAL, "newline in token refused");
        TAP_EQ_INT(cn_http_request_run(r2), 0, "PATCH completes");
        body = cn_http_request_get_body(r2, NULL);
        TAP_OK(cn_startswith(body, "PATCH\nPATCH /echo HTTP/1.1"), "method sent");
        TAP_OK(strstr(body, "\r\nAuthorization: Bearer s3cret-token") != NULL, "Authorization header sent");
        TAP_OK(strstr(body, "\r\nContent-Type: application/merge-patch+json") != NULL, "content type sent");
        TAP_OK(!strstr(body, "Injected") && !strstr(body, "Expect:"), "no injected or Expect header");
        TAP_OK(cn_endswith(body, "\n\n{\"spec\":{}}") != NULL, "body sent");

        u = mfree_str(u);
        u = url("/echo");
        TAP_EQ_INT(cn_http_request_new(h, "PUT", u, &r10), 0, "new PUT without body");
        TAP_EQ_INT(cn_http_request_add_header(r10, "X-aws-ec2-metadata-token-ttl-seconds", "21600"), 0, "header");
        TAP_EQ_INT(cn_http_request_run(r10), 0, "PUT completes");
        body = cn_http_request_get_body(r10, NULL);
        TAP_OK(cn_startswith(body, "PUT\nPUT /echo") && strstr(body, "ttl-seconds: 21600"), "PUT with header sent");

        TAP_EQ_INT(run(h, "GET", "/429", &r3), 0, "429 is a completed response, not a transport error");
        TAP_EQ_INT(cn_http_request_get_status(r3), 429, "status 429");
        TAP_OK(cn_http_request_get_retry_after(r3, &ra) == 0 && ra == 7 * USEC_PER_SEC, "Retry-After parsed");
        TAP_EQ_STR(cn_http_request_get_body(r3, NULL), "{\"kind\":\"Status\"}", "error body kept");

        u = mfree_str(u);
        u = url("/big");
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r4), 0, "new");
        cn_http_request_set_max_response(r4, 1024 * 1024);
        TAP_EQ_INT(cn_http_request_run(r4), -EFBIG, "response over the cap (Content-Length) is -EFBIG");
        u = mfree_str(u);
        u = url("/big-chunked");
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r5), 0, "new");
        cn_http_request_set_max_response(r5, 1024 * 1024);
        TAP_EQ_INT(cn_http_request_run(r5), -EFBIG, "chunked response over the cap is -EFBIG");
        TAP_OK(cn_http_request_get_body(r5, &n) && n <= 1024 * 1024, "never more than the cap buffered");

        u = mfree_str(u);
        u = url("/slow");
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r6), 0, "new");
        cn_http_request_set_timeout(r6, 300 * USEC_PER_MSEC);
        usec_t t0 = cn_now(CLOCK_MONOTONIC);
        TAP_EQ_INT(cn_http_request_run(r6), -ETIMEDOUT, "timeout is -ETIMEDOUT");
        TAP_OK(cn_now(CLOCK_MONOTONIC) - t0 < 1400 * USEC_PER_MSEC, "timed out before the server answered");

        TAP_EQ_INT(run(h, "GET", "/close", &r7), -ECONNRESET, "server closing without answer is -ECONNRESET");
        TAP_EQ_INT(run(h, "GET", "/header-flood", &r8), -E2BIG, "oversized response headers are -E2BIG");

        u = mfree_str(u);
        int port;
        int lfd = listen_loopback(&port);
        close(lfd);
        if (asprintf(&u, "http://127.0.0.1:%d/", port) < 0)
                abort();
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r9), 0, "new");
        TAP_EQ_INT(cn_http_request_run(r9), -ECONNREFUSED, "closed port is -ECONNREFUSED");
        (void) e;
}

static void test_concurrency(sd_event *e, CnHttp *h) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *slow = NULL, *fast = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *tick = NULL;
        _cleanup_free_ char *us = url("/slow"), *uf = url("/hello");
        Order o = {};

        TAP_OK(cn_http_request_new(h, "GET", us, &slow) == 0 && cn_http_request_new(h, "GET", uf, &fast) == 0, "new");
        TAP_EQ_INT(cn_http_request_submit(slow, order_done, &o), 0, "submit slow");
        TAP_EQ_INT(cn_http_request_submit(fast, order_done, &o), 0, "submit fast");
        TAP_EQ_INT(cn_http_request_submit(fast, order_done, &o), -EBUSY, "double submit refused");
        TAP_EQ_INT(cn_http_awaited(h), 2, "two answers awaited");
        (void) sd_event_add_time_relative(e, &tick, CLOCK_MONOTONIC, 500 * USEC_PER_MSEC, 0, order_tick, &o);
        TAP_EQ_INT(cn_http_request_run(slow), 0, "slow request completes");
        TAP_EQ_STR(o.log, "HtS", "fast request and a timer ran while the slow one was pending");
        TAP_EQ_INT(cn_http_awaited(h), 0, "no answer awaited once both came");
        {
                _cleanup_(cn_http_request_unrefp) CnHttpRequest *gone = NULL;

                TAP_OK(cn_http_request_new(h, "GET", us, &gone) == 0 && cn_http_request_submit(gone, order_done, &o) == 0,
                       "submit slow again");
                TAP_EQ_INT(cn_http_awaited(h), 1, "its answer awaited");
                cn_http_request_cancel(gone);
                cn_http_request_cancel(gone);
                TAP_EQ_INT(cn_http_awaited(h), 0, "a cancelled request is not awaited, cancelled twice or not");
        }
}

static void test_stream(sd_event *e, CnHttp *h) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL, *f = NULL, *err = NULL, *c = NULL;
        _cleanup_free_ char *u = url("/stream"), *uf = url("/stream-forever"), *ue = url("/error-stream");
        Stream s = { .lines = CN_BUF_INIT(4096) }, s2 = { .lines = CN_BUF_INIT(4096), .stop_after = 3 },
               s3 = { .lines = CN_BUF_INIT(4096) }, s4 = { .lines = CN_BUF_INIT(65536) };
        bool called = false;

        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &r), 0, "new stream");
        cn_http_request_set_data_callback(r, stream_data, &s);
        TAP_EQ_INT(cn_http_request_run(r), 0, "stream completes");
        TAP_EQ_STR(cn_buf_str(&s.lines), "{\"type\":\"ADDED\",\"n\":1}\n{\"type\":\"ADDED\",\"n\":2}\n{\"type\":\"ADDED\",\"n\":3}\n",
                   "all streamed data delivered in order");
        TAP_OK(s.chunks >= 3, "delivered incrementally (%d pieces)", s.chunks);
        TAP_EQ_INT(cn_http_request_get_body(r, NULL)[0], 0, "streamed data is not buffered");

        TAP_EQ_INT(cn_http_request_new(h, "GET", uf, &f), 0, "new endless stream");
        cn_http_request_set_data_callback(f, stream_data, &s2);
        TAP_EQ_INT(cn_http_request_run(f), -ENOTRECOVERABLE, "data callback error aborts and is reported");

        TAP_EQ_INT(cn_http_request_new(h, "GET", ue, &err), 0, "new");
        cn_http_request_set_data_callback(err, stream_data, &s3);
        TAP_EQ_INT(cn_http_request_run(err), 0, "error response completes");
        TAP_OK(cn_http_request_get_status(err) == 500 && streq(cn_http_request_get_body(err, NULL), "boom") &&
                       s3.chunks == 0,
               "non-2xx body goes to the buffer, not the data callback");

        /* Cancel a running stream: no callback, loop keeps working. */
        TAP_EQ_INT(cn_http_request_new(h, "GET", uf, &c), 0, "new endless stream");
        cn_http_request_set_data_callback(c, stream_data, &s4);
        TAP_EQ_INT(cn_http_request_submit(c, never_called, &called), 0, "submit");
        TAP_EQ_INT(cn_http_awaited(h), 0, "a stream is not an awaited answer");
        run_for(e, 200 * USEC_PER_MSEC);
        int before = s4.chunks;
        cn_http_request_cancel(c);
        cn_http_request_cancel(c);
        TAP_OK(before > 0, "stream delivered data before cancel (%d)", before);
        run_for(e, 200 * USEC_PER_MSEC);
        TAP_OK(!called && s4.chunks == before, "cancelled request gets no callback and no more data");
        cn_buf_done(&s.lines);
        cn_buf_done(&s2.lines);
        cn_buf_done(&s3.lines);
        cn_buf_done(&s4.lines);
}

/* TLS */

static char tmpdir[] = "/tmp/cn-test-http-XXXXXX";

static int tls_get(CnHttp *h, const char *host, int port, const char *ca_file, const char *ca_pem,
                   const char *cert_pem, const char *key_pem, long *ret_status) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
        _cleanup_free_ char *u = NULL;
        int k;

        if (asprintf(&u, "https://%s:%d/", host, port) < 0)
                abort();
        k = cn_http_request_new(h, "GET", u, &r);
        if (k < 0)
                return k;
        cn_http_request_set_no_proxy(r);
        cn_http_request_set_timeout(r, 10 * USEC_PER_SEC);
        if (ca_file)
                (void) cn_http_request_set_ca_file(r, ca_file);
        if (ca_pem)
                (void) cn_http_request_set_ca_pem(r, ca_pem, strlen(ca_pem));
        if (cert_pem)
                (void) cn_http_request_set_client_cert_pem(r, cert_pem, strlen(cert_pem), key_pem, strlen(key_pem));
        k = cn_http_request_run(r);
        *ret_status = cn_http_request_get_status(r);
        return k;
}

static void test_tls(CnHttp *h) {
        _cleanup_free_ char *ca_pem = NULL, *cert_pem = NULL, *key_pem = NULL, *ca_file = NULL;
        pid_t plain, mtls;
        int port1, port2, fd;
        long status = 0;

        if (system("openssl version >/dev/null 2>&1") != 0 || !mkdtemp(tmpdir)) {
                tap_ok(1, "# SKIP openssl command not available");
                return;
        }
        /* A CA, a server certificate for 127.0.0.1 only, and a client certificate. */
        if (make_test_certs(tmpdir) != 0) {
                tap_ok(0, "test certificates created");
                return;
        }
        (void) cn_read_file(tmpdir, "ca.pem", 65536, &ca_pem, NULL);
        (void) cn_read_file(tmpdir, "client.pem", 65536, &cert_pem, NULL);
        (void) cn_read_file(tmpdir, "client.key", 65536, &key_pem, NULL);
        (void) cn_path_prefix_root(tmpdir, "ca.pem", &ca_file);

        fd = listen_loopback(&port1);
        close(fd);
        fd = listen_loopback(&port2);
        close(fd);
        plain = start_s_server(tmpdir, port1, false);
        mtls = start_s_server(tmpdir, port2, true);

        TAP_EQ_INT(tls_get(h, "127.0.0.1", port1, NULL, NULL, NULL, NULL, &status), -EBADE,
                   "self-signed server rejected without its CA");
        TAP_EQ_INT(tls_get(h, "127.0.0.1", port1, NULL, ca_pem, NULL, NULL, &status), 0, "CA as PEM data");
        TAP_EQ_INT(status, 200, "HTTPS status 200");
        TAP_EQ_INT(tls_get(h, "127.0.0.1", port1, ca_file, NULL, NULL, NULL, &status), 0, "CA as file");
        TAP_EQ_INT(tls_get(h, "localhost", port1, NULL, ca_pem, NULL, NULL, &status), -EBADE,
                   "host name not in the certificate rejected");
        TAP_OK(tls_get(h, "127.0.0.1", port2, NULL, ca_pem, NULL, NULL, &status) < 0,
               "server requiring a client certificate refuses us without one");
        TAP_EQ_INT(tls_get(h, "127.0.0.1", port2, NULL, ca_pem, cert_pem, key_pem, &status), 0,
                   "client certificate and key as PEM data");
        TAP_EQ_INT(status, 200, "mutual TLS status 200");

        kill(plain, SIGTERM);
        kill(mtls, SIGTERM);
        waitpid(plain, NULL, 0);
        waitpid(mtls, NULL, 0);
        (void) sh("rm -rf %s", tmpdir);
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *h = NULL;
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *pending = NULL;
        _cleanup_free_ char *u = NULL;
        bool called = false;

        signal(SIGPIPE, SIG_IGN);
        start_server();
        if (sd_event_new(&e) < 0 || cn_http_new(e, &h) < 0)
                return 1;
        test_plain(e, h);
        test_concurrency(e, h);
        test_stream(e, h);
        test_tls(h);

        /* A request whose caller dropped its reference after submitting completes and is freed. */
        {
                CnHttpRequest *fire = NULL;
                _cleanup_free_ char *uh = url("/hello");
                Order o = {};
                TAP_EQ_INT(cn_http_request_new(h, "GET", uh, &fire), 0, "new fire-and-forget");
                TAP_EQ_INT(cn_http_request_submit(fire, order_done, &o), 0, "submit");
                cn_http_request_unref(fire);
                for (usec_t end = cn_now(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;
                     !o.log[0] && cn_now(CLOCK_MONOTONIC) < end;)
                        (void) sd_event_run(e, 100 * USEC_PER_MSEC);
                TAP_EQ_STR(o.log, "H", "fire-and-forget request completed");
        }

        /* Freeing the client with requests in flight calls nothing and leaks nothing, whether the
         * caller still holds them or not. */
        u = url("/slow");
        CnHttpRequest *dropped = NULL;
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *unsubmitted = NULL;
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &pending), 0, "new");
        TAP_EQ_INT(cn_http_request_submit(pending, never_called, &called), 0, "submit");
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &dropped), 0, "new");
        TAP_EQ_INT(cn_http_request_submit(dropped, never_called, &called), 0, "submit");
        cn_http_request_unref(dropped);
        TAP_EQ_INT(cn_http_request_new(h, "GET", u, &unsubmitted), 0, "new, never submitted");
        h = cn_http_free(h);
        TAP_EQ_INT(cn_http_request_submit(unsubmitted, never_called, &called), -ESTALE,
                   "a request created before the client was freed cannot be submitted after");
        TAP_OK(!called, "freeing the client does not call pending callbacks");
        TAP_EQ_INT(cn_http_request_submit(pending, never_called, &called), -ESTALE,
                   "a request of a freed client cannot be submitted");
        return tap_done();
}
