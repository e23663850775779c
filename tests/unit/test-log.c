/* SPDX-License-Identifier: Apache-2.0 */
/* Console log format and verbosity mapping. */
#include <fcntl.h>

#include "log.h"
#include "tap.h"

static char *capture_stderr(void (*fn)(void)) {
        char path[] = "/tmp/cn-test-log-XXXXXX";
        int fd = mkstemp(path), saved = dup(STDERR_FILENO);
        char *buf = calloc(1, 8192);

        fflush(stderr);
        dup2(fd, STDERR_FILENO);
        fn();
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        (void) pread(fd, buf, 8191, 0);
        close(fd);
        unlink(path);
        return buf;
}

static void emit_info(void) {
        log_info("hello %s", "world");
        log_debug("hidden");
}

static void emit_errno(void) {
        int r = log_error_errno(ENOENT, "Failed to open: %m");
        printf("# returned %d\n", r);
}

static void emit_fields(void) {
        log_struct(LOG_NOTICE, CN_FIELDS("CLOUDNODE_NODE", "n1", "CLOUDNODE_PROVIDER_ID", NULL),
                   "node line\nforged");
}

int main(void) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        cn_log_open("test-log", CN_LOG_TARGET_CONSOLE);
        cn_log_set_verbosity(0);
        a = capture_stderr(emit_info);
        TAP_EQ_STR(a, "<6>hello world\n", "info line is <6>-prefixed and debug is hidden at -v 0");

        b = capture_stderr(emit_errno);
        TAP_EQ_STR(b, "<3>Failed to open: No such file or directory\n", "%m expands to the logged error");
        TAP_EQ_INT(log_error_errno(EINVAL, "x"), -EINVAL, "log_error_errno returns negative errno");

        cn_log_set_verbosity(4);
        TAP_EQ_INT(cn_log_get_max_level(), LOG_DEBUG, "-v 4 enables debug");
        c = capture_stderr(emit_fields);
        TAP_EQ_STR(c, "<5>node line forged CLOUDNODE_NODE=n1\n",
                   "control characters are stripped and NULL fields skipped");
        return tap_done();
}
