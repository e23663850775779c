/* SPDX-License-Identifier: Apache-2.0 */
/* rusage-run PROGRAM [ARG...]: runs the program and writes, as the last line of stderr,
 * "rusage-run: utime_us stime_us maxrss_kib status". A benchmark written in Python cannot take
 * ru_maxrss from its own wait4(): a child forked from the interpreter starts with the
 * interpreter's memory, whose peak the kernel keeps across exec, so every program would show at
 * least the interpreter's RSS. Forked from this small process instead, the program's peak is its
 * own. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct rusage ru;
        int status;
        pid_t pid;

        if (argc < 2) {
                fprintf(stderr, "usage: rusage-run PROGRAM [ARG...]\n");
                return 2;
        }
        pid = fork();
        if (pid < 0)
                return 2;
        if (pid == 0) {
                execvp(argv[1], argv + 1);
                _exit(127);
        }
        if (wait4(pid, &status, 0, &ru) != pid)
                return 2;
        fprintf(stderr, "\nrusage-run: %lld %lld %ld %d\n",
                (long long) ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                (long long) ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss,
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
