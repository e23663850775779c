/* SPDX-License-Identifier: Apache-2.0 */
/* Shared bits of the fuzz targets: quiet logging and a NUL-terminated copy of the input. */
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = 0;
        return s;
}

static inline void fuzz_setup(void) {
        static int done;

        if (done)
                return;
        done = 1;
        cn_log_open("fuzz", CN_LOG_TARGET_CONSOLE);
        cn_log_set_max_level(LOG_CRIT);
}
