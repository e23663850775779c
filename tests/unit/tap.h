/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal TAP producer for the C unit tests: one "ok N - name" line per check, a plan at the end,
 * exit status 1 if any check failed, 77 to skip. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

static inline void tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void tap_ok(int cond, const char *fmt, ...) {
        va_list ap;

        printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
        if (!cond)
                tap_failed++;
}

#define TAP_OK(cond, ...)                                                                              \
        do {                                                                                           \
                int _c_ = !!(cond);                                                                    \
                if (!_c_)                                                                              \
                        printf("# %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
                tap_ok(_c_, __VA_ARGS__);                                                              \
        } while (0)
#define TAP_EQ_INT(a, b, name)                                                                         \
        do {                                                                                           \
                long long _a_ = (a), _b_ = (b);                                                        \
                if (_a_ != _b_)                                                                        \
                        printf("# %s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, _a_, _b_); \
                tap_ok(_a_ == _b_, "%s", name);                                                        \
        } while (0)
#define TAP_EQ_STR(a, b, name)                                                                         \
        do {                                                                                           \
                const char *_a_ = (a), *_b_ = (b);                                                     \
                int _c_ = _a_ && _b_ ? strcmp(_a_, _b_) == 0 : _a_ == _b_;                             \
                if (!_c_)                                                                              \
                        printf("# %s:%d: %s = \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a,      \
                               _a_ ?: "(null)", _b_ ?: "(null)");                                      \
                tap_ok(_c_, "%s", name);                                                               \
        } while (0)

static inline int tap_done(void) {
        printf("1..%d\n", tap_n);
        return tap_failed ? 1 : 0;
}

static inline void tap_skip_all(const char *why) {
        printf("1..0 # SKIP %s\n", why);
        exit(0);
}
