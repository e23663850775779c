/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to the journal (structured) or to stderr ("<N>" prefixed lines). See log.h. */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;
static int verbosity = 0;
static bool use_journal = false;
static const char *identifier = "cloudnode";

static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void cn_log_open(const char *ident, CnLogTarget target) {
        const char *e;

        if (ident)
                identifier = ident;
        e = getenv("CLOUDNODE_LOG_TARGET");
        if (target == CN_LOG_TARGET_AUTO && e) {
                if (streq(e, "journal"))
                        target = CN_LOG_TARGET_JOURNAL;
                else if (streq(e, "console"))
                        target = CN_LOG_TARGET_CONSOLE;
        }
        switch (target) {
        case CN_LOG_TARGET_JOURNAL:
                use_journal = true;
                break;
        case CN_LOG_TARGET_CONSOLE:
                use_journal = false;
                break;
        default:
                use_journal = stderr_is_journal();
        }
}

void cn_log_set_max_level(int level) {
        max_level = level & LOG_PRIMASK;
}

int cn_log_get_max_level(void) {
        return max_level;
}

int cn_log_set_verbosity(int v) {
        int old = verbosity;

        verbosity = MAX(v, 0);
        cn_log_set_max_level(verbosity >= 4 ? LOG_DEBUG : LOG_INFO);
        return old;
}

int cn_log_get_verbosity(void) {
        return verbosity;
}

bool cn_log_is_journal(void) {
        return use_journal;
}

/* Field values may come from remote peers: strip control characters so that one log call is one
 * line on the console, and a value cannot forge another journal field. */
static void sanitize(char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < ' ' && *s != '\t')
                        *s = ' ';
}

int cn_log_internalv(int level, int error, const char *file, int line, const char *func,
                     const char *const *fields, const char *format, va_list ap) {
        char msg[4096];
        int saved_errno = errno;

        if (error < 0)
                error = -error;
        /* Let %m in the format refer to the error we are logging. */
        errno = error;
        (void) vsnprintf(msg, sizeof msg, format, ap);
        sanitize(msg);

        if (use_journal) {
                struct iovec iov[64];
                char buf[8][64];
                char *dyn[24] = {};
                size_t n = 0, ndyn = 0;
                char *m = NULL;

                if (asprintf(&m, "MESSAGE=%s", msg) >= 0)
                        iov[n++] = (struct iovec){ m, strlen(m) };
                snprintf(buf[0], sizeof buf[0], "PRIORITY=%i", level & LOG_PRIMASK);
                iov[n++] = (struct iovec){ buf[0], strlen(buf[0]) };
                if (asprintf(&dyn[ndyn], "SYSLOG_IDENTIFIER=%s", identifier) >= 0) {
                        iov[n++] = (struct iovec){ dyn[ndyn], strlen(dyn[ndyn]) };
                        ndyn++;
                }
                if (file && asprintf(&dyn[ndyn], "CODE_FILE=%s", file) >= 0) {
                        iov[n++] = (struct iovec){ dyn[ndyn], strlen(dyn[ndyn]) };
                        ndyn++;
                }
                snprintf(buf[1], sizeof buf[1], "CODE_LINE=%i", line);
                iov[n++] = (struct iovec){ buf[1], strlen(buf[1]) };
                if (func && asprintf(&dyn[ndyn], "CODE_FUNC=%s", func) >= 0) {
                        iov[n++] = (struct iovec){ dyn[ndyn], strlen(dyn[ndyn]) };
                        ndyn++;
                }
                if (error > 0) {
                        snprintf(buf[2], sizeof buf[2], "ERRNO=%i", error);
                        iov[n++] = (struct iovec){ buf[2], strlen(buf[2]) };
                }
                for (const char *const *f = fields; f && f[0] && ndyn < ELEMENTSOF(dyn); f += 2) {
                        if (!f[1])
                                continue;
                        if (asprintf(&dyn[ndyn], "%s=%s", f[0], f[1]) < 0)
                                break;
                        sanitize(dyn[ndyn]);
                        iov[n++] = (struct iovec){ dyn[ndyn], strlen(dyn[ndyn]) };
                        ndyn++;
                }
                (void) sd_journal_sendv(iov, (int) n);
                free(m);
                for (size_t i = 0; i < ndyn; i++)
                        free(dyn[i]);
        } else {
                /* At debug verbosity the structured fields are shown on the console too. */
                char extra[1024] = "";
                size_t off = 0;

                if (verbosity >= 4)
                        for (const char *const *f = fields; f && f[0]; f += 2) {
                                int k;
                                if (!f[1])
                                        continue;
                                k = snprintf(extra + off, sizeof extra - off, " %s=%s", f[0], f[1]);
                                if (k < 0 || (size_t) k >= sizeof extra - off)
                                        break;
                                off += (size_t) k;
                        }
                sanitize(extra);
                fprintf(stderr, "<%i>%s%s\n", level & LOG_PRIMASK, msg, extra);
        }

        errno = saved_errno;
        return -error;
}

int cn_log_internal(int level, int error, const char *file, int line, const char *func,
                    const char *const *fields, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = cn_log_internalv(level, error, file, line, func, fields, format, ap);
        va_end(ap);
        return r;
}
