/* SPDX-License-Identifier: Apache-2.0 */
/* Time helpers. See time-util.h. */
#include <ctype.h>
#include <inttypes.h>

#include "string-util.h"
#include "time-util.h"

usec_t cn_now(clockid_t clock) {
        struct timespec ts;

        /* Only fails for an invalid clock id, which is a programming error. */
        if (clock_gettime(clock, &ts) < 0)
                abort();
        return cn_timespec_load(&ts);
}

usec_t cn_timespec_load(const struct timespec *ts) {
        assert(ts);
        if (ts->tv_sec < 0 || ts->tv_nsec < 0)
                return 0;
        if ((uint64_t) ts->tv_sec > (UINT64_MAX - (uint64_t) ts->tv_nsec / NSEC_PER_USEC) / USEC_PER_SEC)
                return USEC_INFINITY;
        return (usec_t) ts->tv_sec * USEC_PER_SEC + (usec_t) ts->tv_nsec / NSEC_PER_USEC;
}

usec_t cn_usec_add(usec_t a, usec_t b) {
        if (a > USEC_INFINITY - b)
                return USEC_INFINITY;
        return a + b;
}

static const struct {
        const char *suffix;
        uint64_t nsec;
} duration_units[] = {
        /* Longer suffixes first, so that "ms" is not read as "m" followed by garbage. */
        { "ns", 1ULL },
        { "us", 1000ULL },
        { "\xc2\xb5s", 1000ULL }, /* µs, U+00B5 */
        { "\xce\xbcs", 1000ULL }, /* μs, U+03BC */
        { "ms", 1000000ULL },
        { "s", 1000000000ULL },
        { "m", 60ULL * 1000000000ULL },
        { "h", 3600ULL * 1000000000ULL },
};

int cn_parse_duration(const char *s, usec_t *ret) {
        uint64_t total = 0; /* in nanoseconds; Go's limit is ~292 years as well */
        const char *p = s;

        assert(s);
        if (streq(s, "0")) {
                if (ret)
                        *ret = 0;
                return 0;
        }
        if (!*p)
                return -EINVAL;
        while (*p) {
                uint64_t whole = 0, frac = 0, frac_scale = 1, unit = 0, v;
                bool digits = false;

                while (isdigit((unsigned char) *p)) {
                        if (whole > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        whole = whole * 10 + (uint64_t) (*p - '0');
                        digits = true;
                        p++;
                }
                if (*p == '.') {
                        p++;
                        while (isdigit((unsigned char) *p)) {
                                /* Digits beyond nanosecond precision of an hour do not matter. */
                                if (frac_scale < 1000000000000000000ULL) {
                                        frac = frac * 10 + (uint64_t) (*p - '0');
                                        frac_scale *= 10;
                                }
                                digits = true;
                                p++;
                        }
                }
                if (!digits)
                        return -EINVAL;
                for (size_t i = 0; i < ELEMENTSOF(duration_units); i++) {
                        const char *e = cn_startswith(p, duration_units[i].suffix);
                        if (!e)
                                continue;
                        /* "m" must not swallow the "m" of "ms". */
                        if (streq(duration_units[i].suffix, "m") && *e == 's')
                                continue;
                        unit = duration_units[i].nsec;
                        p = e;
                        break;
                }
                if (unit == 0)
                        return -EINVAL;
                if (whole > UINT64_MAX / unit)
                        return -ERANGE;
                v = whole * unit;
                /* frac/frac_scale * unit without overflow: unit <= 3.6e12, frac < frac_scale <= 1e18. */
                v += (uint64_t) ((long double) frac * (long double) unit / (long double) frac_scale);
                if (v > UINT64_MAX - total)
                        return -ERANGE;
                total += v;
        }
        if (ret)
                *ret = total / NSEC_PER_USEC;
        return 0;
}

char *cn_format_duration(char *buf, size_t size, usec_t t) {
        static const struct {
                const char *suffix;
                usec_t usec;
        } units[] = {
                { "h", USEC_PER_HOUR }, { "m", USEC_PER_MINUTE }, { "s", USEC_PER_SEC },
                { "ms", USEC_PER_MSEC }, { "us", 1 },
        };
        size_t off = 0;

        assert(buf);
        assert(size > 0);
        buf[0] = 0;
        if (t == USEC_INFINITY) {
                (void) snprintf(buf, size, "infinity");
                return buf;
        }
        if (t == 0) {
                (void) snprintf(buf, size, "0");
                return buf;
        }
        for (size_t i = 0; i < ELEMENTSOF(units) && t > 0; i++) {
                usec_t n = t / units[i].usec;
                int k;

                if (n == 0)
                        continue;
                t -= n * units[i].usec;
                k = snprintf(buf + off, size - off, "%" PRIu64 "%s", n, units[i].suffix);
                if (k < 0 || (size_t) k >= size - off)
                        break;
                off += (size_t) k;
        }
        return buf;
}

int cn_format_rfc3339(usec_t t, bool micro, char *buf, size_t size) {
        time_t sec = (time_t) (t / USEC_PER_SEC);
        struct tm tm;
        size_t n;

        assert(buf);
        if (t == USEC_INFINITY || !gmtime_r(&sec, &tm))
                return -ERANGE;
        n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0)
                return -ENOBUFS;
        if (micro) {
                if (snprintf(buf + n, size - n, ".%06" PRIu64 "Z", t % USEC_PER_SEC) >= (int) (size - n))
                        return -ENOBUFS;
        } else if (snprintf(buf + n, size - n, "Z") >= (int) (size - n))
                return -ENOBUFS;
        return 0;
}

int cn_parse_rfc3339(const char *s, usec_t *ret) {
        struct tm tm = {};
        const char *p;
        usec_t frac = 0, scale = USEC_PER_SEC;
        long offset = 0;
        time_t t;

        assert(s);
        p = strptime(s, "%Y-%m-%d", &tm);
        if (!p || (*p != 'T' && *p != 't' && *p != ' '))
                return -EINVAL;
        p = strptime(p + 1, "%H:%M:%S", &tm);
        if (!p)
                return -EINVAL;
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                for (; isdigit((unsigned char) *p); p++)
                        if (scale > 1) {
                                scale /= 10;
                                frac += (usec_t) (*p - '0') * scale;
                        }
        }
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                int sign = *p == '-' ? -1 : 1;
                if (!isdigit((unsigned char) p[1]) || !isdigit((unsigned char) p[2]) || p[3] != ':' ||
                    !isdigit((unsigned char) p[4]) || !isdigit((unsigned char) p[5]))
                        return -EINVAL;
                offset = sign * (((p[1] - '0') * 10 + (p[2] - '0')) * 3600L +
                                 ((p[4] - '0') * 10 + (p[5] - '0')) * 60L);
                p += 6;
        } else
                return -EINVAL;
        if (*p)
                return -EINVAL;
        t = timegm(&tm);
        if (t == (time_t) -1)
                return -EINVAL;
        t -= offset;
        if (t < 0)
                return -ERANGE;
        if (ret)
                *ret = (usec_t) t * USEC_PER_SEC + frac;
        return 0;
}

int cn_parse_retry_after(const char *value, usec_t now, usec_t *ret) {
        struct tm tm = {};
        uint64_t secs;
        const char *p;
        time_t t;

        assert(value);
        if (cn_safe_atou64(value, &secs) >= 0) {
                if (secs > (USEC_INFINITY - 1) / USEC_PER_SEC)
                        return -ERANGE;
                if (ret)
                        *ret = secs * USEC_PER_SEC;
                return 0;
        }
        /* IMF-fixdate, the only form servers are allowed to send (RFC 9110 5.6.7). */
        p = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (!p || *p)
                return -EINVAL;
        t = timegm(&tm);
        if (t == (time_t) -1 || t < 0)
                return -EINVAL;
        if (ret)
                *ret = (usec_t) t * USEC_PER_SEC > now ? (usec_t) t * USEC_PER_SEC - now : 0;
        return 0;
}
