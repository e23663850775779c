/* SPDX-License-Identifier: Apache-2.0 */
/* Exponential backoff with full jitter. See backoff.h. */
#include "backoff.h"
#include "hash-util.h"

void cn_backoff_init(CnBackoff *b, usec_t base, usec_t cap) {
        assert(b);
        *b = (CnBackoff){ .base = base, .cap = MAX(cap, base) };
}

void cn_backoff_reset(CnBackoff *b) {
        assert(b);
        b->attempt = 0;
}

usec_t cn_backoff_ceiling(const CnBackoff *b) {
        usec_t c = b->base;

        assert(b);
        for (unsigned i = 0; i < b->attempt && c < b->cap; i++)
                c = c > b->cap / 2 ? b->cap : c * 2;
        return MIN(c, b->cap);
}

usec_t cn_backoff_next(CnBackoff *b, usec_t min_delay) {
        usec_t ceiling = cn_backoff_ceiling(b), d;
        uint64_t rnd;

        assert(b);
        if (b->attempt < UINT32_MAX)
                b->attempt++;
        /* Without entropy, retrying at the ceiling is still correct, only less spread out. */
        if (cn_random_u64(&rnd) < 0)
                d = ceiling;
        else
                d = ceiling == USEC_INFINITY ? rnd : rnd % (ceiling + 1);
        return MAX(d, MIN(min_delay, CN_BACKOFF_SERVER_MAX));
}
