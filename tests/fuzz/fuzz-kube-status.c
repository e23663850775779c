/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding a Status error body sent by an API server (or anything pretending to be one). */
#include "fuzz.h"
#include "kube-client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *reason = NULL, *message = NULL;
        long code;
        int r;

        fuzz_setup();
        if (size < 2)
                return 0;
        code = 400 + (data[0] % 200);
        r = cn_kube_status_to_errno(code, (const char *) data + 1, size - 1, &reason, &message);
        if (r >= 0) {
                fprintf(stderr, "HTTP %ld decoded as success\n", code);
                abort();
        }
        return 0;
}
