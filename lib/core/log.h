/* SPDX-License-Identifier: Apache-2.0 */
/* Logging. When stderr is connected to the journal (JOURNAL_STREAM matches it), messages go out
 * through sd_journal_sendv() with SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC, ERRNO and our own
 * CLOUDNODE_* fields; otherwise they are printed to stderr as "<N>message" lines that
 * systemd, kubelet and humans all read. Verbosity follows klog: -v N, with debug output at N >= 4. */
#pragma once

#include <stdarg.h>
#include <syslog.h>

#include "macro.h"

typedef enum CnLogTarget {
        CN_LOG_TARGET_AUTO,
        CN_LOG_TARGET_CONSOLE,
        CN_LOG_TARGET_JOURNAL,
} CnLogTarget;

void cn_log_open(const char *identifier, CnLogTarget target);
void cn_log_set_max_level(int level);
int cn_log_get_max_level(void);
/* klog-style: 0..3 → info, >= 4 → debug. Returns the previous verbosity. */
int cn_log_set_verbosity(int v);
int cn_log_get_verbosity(void);
bool cn_log_is_journal(void);

/* fields: NULL-terminated list of key, value pairs; a NULL value skips its key. Returns -abs(error)
 * (or 0 when error is 0) so that callers can "return log_error_errno(r, ...)". */
int cn_log_internal(int level, int error, const char *file, int line, const char *func,
                    const char *const *fields, const char *format, ...) _printf_(7, 8);
int cn_log_internalv(int level, int error, const char *file, int line, const char *func,
                     const char *const *fields, const char *format, va_list ap) _printf_(7, 0);

#define CN_FIELDS(...) ((const char *const[]){ __VA_ARGS__, NULL })

#define cn_log_full(level, error, fields, ...)                                                         \
        ({                                                                                             \
                int _l_ = (level), _e_ = (error);                                                      \
                (_l_ & LOG_PRIMASK) <= cn_log_get_max_level()                                          \
                        ? cn_log_internal(_l_, _e_, __FILE__, __LINE__, __func__, fields, __VA_ARGS__) \
                        : -abs(_e_);                                                                   \
        })

#define log_debug(...) cn_log_full(LOG_DEBUG, 0, NULL, __VA_ARGS__)
#define log_info(...) cn_log_full(LOG_INFO, 0, NULL, __VA_ARGS__)
#define log_notice(...) cn_log_full(LOG_NOTICE, 0, NULL, __VA_ARGS__)
#define log_warning(...) cn_log_full(LOG_WARNING, 0, NULL, __VA_ARGS__)
#define log_error(...) cn_log_full(LOG_ERR, 0, NULL, __VA_ARGS__)
#define log_debug_errno(e, ...) cn_log_full(LOG_DEBUG, e, NULL, __VA_ARGS__)
#define log_info_errno(e, ...) cn_log_full(LOG_INFO, e, NULL, __VA_ARGS__)
#define log_notice_errno(e, ...) cn_log_full(LOG_NOTICE, e, NULL, __VA_ARGS__)
#define log_warning_errno(e, ...) cn_log_full(LOG_WARNING, e, NULL, __VA_ARGS__)
#define log_error_errno(e, ...) cn_log_full(LOG_ERR, e, NULL, __VA_ARGS__)
/* Structured: log_struct(LOG_INFO, CN_FIELDS("CLOUDNODE_NODE", name), "Initialized %s", name) */
#define log_struct(level, fields, ...) cn_log_full(level, 0, fields, __VA_ARGS__)
#define log_struct_errno(level, e, fields, ...) cn_log_full(level, e, fields, __VA_ARGS__)
/* klog V(n): logged at info priority when verbosity >= n. */
#define log_v(n, ...) (cn_log_get_verbosity() >= (n) ? log_info(__VA_ARGS__) : 0)

/* Out of memory: logged once, returns -ENOMEM. */
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
