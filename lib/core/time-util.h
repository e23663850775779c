/* SPDX-License-Identifier: Apache-2.0 */
/* Time in microseconds (usec_t, as sd-event uses), Go-style durations as Kubernetes flags write
 * them ("250ms", "2s", "5m", "1h30m"), RFC 3339 timestamps as the Kubernetes API writes them,
 * and the HTTP Retry-After header. */
#pragma once

#include <stdint.h>
#include <time.h>

#include "macro.h"

typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MINUTE ((usec_t) (60ULL * USEC_PER_SEC))
#define USEC_PER_HOUR ((usec_t) (60ULL * USEC_PER_MINUTE))
#define USEC_PER_DAY ((usec_t) (24ULL * USEC_PER_HOUR))

usec_t cn_now(clockid_t clock);
usec_t cn_timespec_load(const struct timespec *ts);
/* Saturating addition: never wraps past USEC_INFINITY. */
usec_t cn_usec_add(usec_t a, usec_t b) _const_;

/* Go time.ParseDuration syntax without sign: a sequence of decimal numbers with optional
 * fraction and a unit each (ns, us, µs, ms, s, m, h), e.g. "1h30m", "1.5s"; "0" alone is
 * allowed. Sub-microsecond parts are truncated. -EINVAL for bad syntax, -ERANGE on overflow. */
int cn_parse_duration(const char *s, usec_t *ret);

/* Formats as the shortest duration cn_parse_duration() reads back exactly: "1h30m", "2s500ms",
 * "0", "infinity" for USEC_INFINITY. Returns buf. */
#define CN_FORMAT_DURATION_MAX 64
char *cn_format_duration(char *buf, size_t size, usec_t t);

/* RFC 3339 in UTC: "2024-05-01T10:00:00Z", or with micro=true "2024-05-01T10:00:00.000000Z"
 * (Kubernetes MicroTime, used by Lease renewTime). t is CLOCK_REALTIME. */
#define CN_FORMAT_TIMESTAMP_MAX 40
int cn_format_rfc3339(usec_t t, bool micro, char *buf, size_t size);
/* Accepts "Z" or "+hh:mm"/"-hh:mm" offsets and an optional fraction of any length. */
int cn_parse_rfc3339(const char *s, usec_t *ret);

/* Retry-After: delay-seconds or an HTTP-date. Returns the delay relative to now (CLOCK_REALTIME
 * usec), 0 for dates in the past. -EINVAL when unparsable. */
int cn_parse_retry_after(const char *value, usec_t now, usec_t *ret);
