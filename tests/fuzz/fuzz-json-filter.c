/* SPDX-License-Identifier: Apache-2.0 */
/* The filter's scans against themselves (lib/core/json-filter.h): on arbitrary input the scans of
 * 64-byte blocks, where the CPU has them, and the portable ones drop, keep and reject alike, and
 * the boundary scan, fed in pieces whose size comes from the first byte, ends the value at the
 * same byte in both. */
#include "fuzz.h"
#include "kube-object-filter.h"

static int filter(const char *text, size_t size, bool portable, char **ret, size_t *ret_size) {
        cn_json_filter_set_portable(portable);
        return cn_json_filter_text(text, size, fuzz_filter, ret, ret_size);
}

/* Where the value ends (one past its last byte), or 0 when it does not end in text. */
static size_t scan(const char *text, size_t size, size_t step, bool portable) {
        CnJsonValueScan s = {};

        cn_json_filter_set_portable(portable);
        for (size_t at = 0; at < size; at += step) {
                size_t k = MIN(step, size - at), used;
                bool done = false;

                used = cn_json_value_scan(&s, text + at, k, &done);
                if (done)
                        return at + used;
                if (used != k)
                        abort(); /* not done, so every byte belongs to the value */
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *fast = NULL, *portable = NULL;
        const char *text = (const char *) data + 1;
        size_t n_fast = 0, n_portable = 0, step;
        int r_fast, r_portable;

        fuzz_setup();
        if (size == 0)
                return 0;
        step = (size_t) data[0] % 130 + 1;
        size--;
        r_fast = filter(text, size, false, &fast, &n_fast);
        r_portable = filter(text, size, true, &portable, &n_portable);
        if (r_fast != r_portable)
                abort();
        if (r_fast >= 0 && (n_fast != n_portable || memcmp(fast, portable, n_fast) != 0))
                abort();
        if (size > 0 && (*text == '"' || *text == '{' || *text == '[') &&
            scan(text, size, step, false) != scan(text, size, step, true))
                abort();
        cn_json_filter_set_portable(false);
        return 0;
}
