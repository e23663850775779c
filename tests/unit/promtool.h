/* SPDX-License-Identifier: Apache-2.0 */
/* Runs `promtool check metrics` (Prometheus' own linter) on exposition text, when installed. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* 1 when promtool accepts the text, 0 when it complains (its output goes to the TAP log as
 * comments), -1 when promtool is not installed. */
static inline int promtool_check(const char *text) {
        char path[] = "/tmp/cn-test-promtool-XXXXXX", cmd[256], line[512];
        FILE *f;
        int fd, status, ok;

        if (system("command -v promtool >/dev/null 2>&1") != 0)
                return -1;
        fd = mkstemp(path);
        if (fd < 0)
                return 0;
        if (write(fd, text, strlen(text)) != (ssize_t) strlen(text)) {
                close(fd);
                unlink(path);
                return 0;
        }
        close(fd);
        snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
        f = popen(cmd, "r");
        if (!f) {
                unlink(path);
                return 0;
        }
        while (fgets(line, sizeof(line), f))
                printf("# promtool: %s", line);
        status = pclose(f);
        unlink(path);
        ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        return ok;
}
