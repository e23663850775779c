/* SPDX-License-Identifier: Apache-2.0 */
/* Backoff: ceilings double up to the cap, delays stay within [0, ceiling], are spread out
 * (full jitter), honour a server minimum, and reset after success. */
#include "backoff.h"
#include "tap.h"

int main(void) {
        CnBackoff b;
        usec_t d, lo = USEC_INFINITY, hi = 0;
        bool within = true;

        cn_backoff_init(&b, 100 * USEC_PER_MSEC, 2 * USEC_PER_SEC);
        TAP_EQ_INT(cn_backoff_ceiling(&b), 100 * USEC_PER_MSEC, "first ceiling is the base");
        d = cn_backoff_next(&b, 0);
        TAP_OK(d <= 100 * USEC_PER_MSEC, "first delay within base");
        TAP_EQ_INT(cn_backoff_ceiling(&b), 200 * USEC_PER_MSEC, "ceiling doubles");
        for (int i = 0; i < 10; i++)
                (void) cn_backoff_next(&b, 0);
        TAP_EQ_INT(cn_backoff_ceiling(&b), 2 * USEC_PER_SEC, "ceiling stops at the cap");

        for (int i = 0; i < 2000; i++) {
                d = cn_backoff_next(&b, 0);
                within = within && d <= 2 * USEC_PER_SEC;
                lo = MIN(lo, d);
                hi = MAX(hi, d);
        }
        TAP_OK(within, "every delay is within [0, cap]");
        /* With 2000 uniform draws the chance of missing either outer fifth is 2 * 0.8^2000. */
        TAP_OK(lo < 400 * USEC_PER_MSEC && hi > 1600 * USEC_PER_MSEC, "delays spread over the range (%llu..%llu)",
               (unsigned long long) lo, (unsigned long long) hi);

        d = cn_backoff_next(&b, 30 * USEC_PER_SEC);
        TAP_OK(d >= 30 * USEC_PER_SEC, "server minimum (Retry-After) is honoured beyond the cap");
        d = cn_backoff_next(&b, 100 * USEC_PER_HOUR);
        TAP_EQ_INT(d, CN_BACKOFF_SERVER_MAX, "absurd server minimum is clamped");

        cn_backoff_reset(&b);
        TAP_EQ_INT(cn_backoff_ceiling(&b), 100 * USEC_PER_MSEC, "reset returns to the base");

        cn_backoff_init(&b, USEC_PER_SEC, USEC_PER_HOUR);
        for (int i = 0; i < 200; i++)
                (void) cn_backoff_next(&b, 0);
        TAP_EQ_INT(cn_backoff_ceiling(&b), USEC_PER_HOUR, "many attempts do not overflow");
        return tap_done();
}
