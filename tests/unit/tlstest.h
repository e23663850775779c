/* SPDX-License-Identifier: Apache-2.0 */
/* For the unit tests of the HTTP client: a listening socket on 127.0.0.1, shell commands, test
 * certificates (a CA, a server certificate for 127.0.0.1 only, a client certificate) made with the
 * openssl command in a directory, and `openssl s_server -www` serving with them. */
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "macro.h"

/* A listening socket on 127.0.0.1 with a free port; -1 on failure. */
static inline int listen_loopback(int *ret_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &l) < 0)
                return -1;
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

static inline int sh(const char *fmt, ...) _printf_(1, 2);
static inline int sh(const char *fmt, ...) {
        _cleanup_free_ char *cmd = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -1;
        r = system(cmd);
        return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* ca.pem/ca.key, server.pem/server.key (CN and IP SAN 127.0.0.1), client.pem/client.key (signed by
 * the CA) in dir. 0 on success. */
static inline int make_test_certs(const char *dir) {
        return sh("cd %s && "
                  "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
                  "-out ca.pem -days 2 -subj /CN=test-ca 2>/dev/null && "
                  "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key "
                  "-out server.csr -subj /CN=127.0.0.1 2>/dev/null && "
                  "printf 'subjectAltName=IP:127.0.0.1\\n' >ext && "
                  "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
                  "-extfile ext -out server.pem 2>/dev/null && "
                  "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key "
                  "-out client.csr -subj /CN=system:node:n1 2>/dev/null && "
                  "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
                  "-out client.pem 2>/dev/null",
                  dir);
}

/* `openssl s_server -www` on 127.0.0.1:port with dir's server certificate (and, when asked, a
 * client certificate from dir's CA required), once it accepts connections. */
static inline pid_t start_s_server(const char *dir, int port, bool require_client_cert) {
        char accept[32], cert[300], key[300], ca[300];
        pid_t pid;

        snprintf(accept, sizeof(accept), "127.0.0.1:%d", port);
        snprintf(cert, sizeof(cert), "%s/server.pem", dir);
        snprintf(key, sizeof(key), "%s/server.key", dir);
        snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
        pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0), dup2(null, 1), dup2(null, 2);
                if (require_client_cert)
                        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert", cert, "-key", key,
                               "-Verify", "1", "-CAfile", ca, "-www", "-naccept", "20", NULL);
                else
                        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert", cert, "-key", key,
                               "-www", "-naccept", "20", NULL);
                _exit(127);
        }
        for (int i = 0; i < 100; i++) {
                struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int ok = connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0;
                close(fd);
                if (ok)
                        break;
                usleep(50 * 1000);
        }
        return pid;
}
