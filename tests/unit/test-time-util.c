/* SPDX-License-Identifier: Apache-2.0 */
/* Durations in Go syntax, RFC 3339 timestamps, Retry-After. */
#include "tap.h"
#include "time-util.h"

static void check_duration(const char *s, usec_t expected) {
        usec_t t = 0;
        int r = cn_parse_duration(s, &t);
        TAP_OK(r == 0 && t == expected, "parse \"%s\" = %llu (got r=%d t=%llu)", s,
               (unsigned long long) expected, r, (unsigned long long) t);
}

static void check_bad_duration(const char *s, int expected) {
        usec_t t = 12345;
        TAP_OK(cn_parse_duration(s, &t) == expected && t == 12345, "reject \"%s\" and leave output alone", s);
}

int main(void) {
        char buf[CN_FORMAT_DURATION_MAX], ts[CN_FORMAT_TIMESTAMP_MAX];
        usec_t t, a, b;

        check_duration("250ms", 250 * USEC_PER_MSEC);
        check_duration("2s", 2 * USEC_PER_SEC);
        check_duration("5m", 5 * USEC_PER_MINUTE);
        check_duration("1h30m", 90 * USEC_PER_MINUTE);
        check_duration("1.5s", 1500 * USEC_PER_MSEC);
        check_duration("0", 0);
        check_duration("137s", 137 * USEC_PER_SEC);
        check_duration("10us", 10);
        check_duration("1500ns", 1);
        check_duration("1m1ms", USEC_PER_MINUTE + USEC_PER_MSEC);
        check_bad_duration("", -EINVAL);
        check_bad_duration("5", -EINVAL);
        check_bad_duration("5x", -EINVAL);
        check_bad_duration("-5s", -EINVAL);
        check_bad_duration("s", -EINVAL);
        check_bad_duration("1h 30m", -EINVAL);
        check_bad_duration("99999999999999999999h", -ERANGE);
        check_bad_duration("9999999999h", -ERANGE);

        TAP_EQ_STR(cn_format_duration(buf, sizeof(buf), 90 * USEC_PER_MINUTE), "1h30m", "format 1h30m");
        TAP_EQ_STR(cn_format_duration(buf, sizeof(buf), 2500 * USEC_PER_MSEC), "2s500ms", "format 2s500ms");
        TAP_EQ_STR(cn_format_duration(buf, sizeof(buf), 0), "0", "format 0");
        TAP_EQ_STR(cn_format_duration(buf, sizeof(buf), USEC_INFINITY), "infinity", "format infinity");
        t = 3 * USEC_PER_HOUR + 7 * USEC_PER_SEC + 11;
        TAP_OK(cn_parse_duration(cn_format_duration(buf, sizeof(buf), t), &a) == 0 && a == t,
               "format/parse round trip (%s)", buf);

        TAP_EQ_INT(cn_format_rfc3339(1714557600ULL * USEC_PER_SEC + 123456, false, ts, sizeof(ts)), 0, "format");
        TAP_EQ_STR(ts, "2024-05-01T10:00:00Z", "RFC 3339 seconds");
        TAP_EQ_INT(cn_format_rfc3339(1714557600ULL * USEC_PER_SEC + 123456, true, ts, sizeof(ts)), 0, "format");
        TAP_EQ_STR(ts, "2024-05-01T10:00:00.123456Z", "RFC 3339 micro (MicroTime)");
        TAP_OK(cn_parse_rfc3339(ts, &a) == 0 && a == 1714557600ULL * USEC_PER_SEC + 123456, "parse MicroTime");
        TAP_OK(cn_parse_rfc3339("2024-05-01T12:00:00+02:00", &b) == 0 && b == 1714557600ULL * USEC_PER_SEC,
               "parse with offset");
        TAP_EQ_INT(cn_parse_rfc3339("2024-05-01T10:00:00", &b), -EINVAL, "zone is required");
        TAP_EQ_INT(cn_parse_rfc3339("2024-05-01T10:00:00Zjunk", &b), -EINVAL, "trailing junk rejected");

        TAP_OK(cn_parse_retry_after("120", 0, &a) == 0 && a == 120 * USEC_PER_SEC, "Retry-After seconds");
        TAP_OK(cn_parse_retry_after("Wed, 01 May 2024 10:00:30 GMT", 1714557600ULL * USEC_PER_SEC, &a) == 0 &&
                       a == 30 * USEC_PER_SEC,
               "Retry-After HTTP-date relative to now");
        TAP_OK(cn_parse_retry_after("Wed, 01 May 2024 09:00:00 GMT", 1714557600ULL * USEC_PER_SEC, &a) == 0 &&
                       a == 0,
               "Retry-After date in the past is no delay");
        TAP_EQ_INT(cn_parse_retry_after("soon", 0, &a), -EINVAL, "Retry-After garbage");
        TAP_EQ_INT(cn_usec_add(USEC_INFINITY - 1, 5), (long long) USEC_INFINITY, "saturating add");
        TAP_OK(cn_now(CLOCK_MONOTONIC) > 0, "monotonic clock readable");
        return tap_done();
}
