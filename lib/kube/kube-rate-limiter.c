/* SPDX-License-Identifier: Apache-2.0 */
/* Client-side token bucket, with the reservation semantics of Go's rate.Limiter that client-go's
 * flowcontrol limiter wraps: a request takes a token even when none is left (the count goes
 * negative) and waits for as long as the refill takes, so waiting requests keep their order and
 * the long-run rate never exceeds qps. */
#include "kube-client.h"

void cn_kube_rate_limiter_init(CnKubeRateLimiter *l, double qps, unsigned burst, uint64_t now_usec) {
        assert(l);
        *l = (CnKubeRateLimiter){
                .qps = qps > 0 ? qps : CN_KUBE_DEFAULT_QPS,
                .burst = burst > 0 ? burst : CN_KUBE_DEFAULT_BURST,
                .last_usec = now_usec,
        };
        l->tokens = l->burst;
}

uint64_t cn_kube_rate_limiter_reserve(CnKubeRateLimiter *l, uint64_t now_usec) {
        assert(l);

        if (now_usec > l->last_usec) {
                l->tokens += (double) (now_usec - l->last_usec) * l->qps / 1e6;
                if (l->tokens > l->burst)
                        l->tokens = l->burst;
                l->last_usec = now_usec;
        }
        l->tokens -= 1.0;
        if (l->tokens >= 0)
                return 0;
        /* Round up: waking a microsecond early would find the token not yet there. */
        return (uint64_t) (-l->tokens * 1e6 / l->qps + 0.999999);
}
