/* SPDX-License-Identifier: Apache-2.0 */
/* Exponential backoff with full jitter (delay drawn uniformly from [0, min(cap, base * 2^n)]),
 * so that many nodes retrying the same API do not synchronize. A minimum from the server
 * (Retry-After on 429/503) is honoured: the delay is never shorter than it. */
#pragma once

#include "time-util.h"

/* A server may not park us for longer than this, whatever its Retry-After says. */
#define CN_BACKOFF_SERVER_MAX USEC_PER_HOUR

typedef struct CnBackoff {
        usec_t base; /* first ceiling */
        usec_t cap;  /* largest ceiling */
        unsigned attempt;
} CnBackoff;

void cn_backoff_init(CnBackoff *b, usec_t base, usec_t cap);
/* Forget past failures, after a success. */
void cn_backoff_reset(CnBackoff *b);
/* The ceiling of the next delay: min(cap, base * 2^attempt). */
usec_t cn_backoff_ceiling(const CnBackoff *b);
/* The next delay, and counts an attempt. min_delay is the server's minimum (0 for none), clamped
 * to CN_BACKOFF_SERVER_MAX. */
usec_t cn_backoff_next(CnBackoff *b, usec_t min_delay);
