/* SPDX-License-Identifier: Apache-2.0 */
/* The INI writer with hostile keys and values: everything it accepts produces exactly one line
 * per key, so no value can start a section or another key. */
#include "fuzz.h"
#include "ini-writer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(cn_ini_freep) CnIni *w = NULL;
        _cleanup_free_ char *text = NULL, *input = NULL;
        size_t text_size = 0, keys = 0, lines = 0;
        char *save = NULL;

        fuzz_setup();
        if (cn_ini_new(&w) < 0)
                abort();
        if (cn_ini_section(w, "Global", NULL) < 0)
                return 0;
        input = fuzz_strndup(data, size);
        /* Input: "key\x01value\x02key\x01value..." */
        for (char *pair = strtok_r(input, "\x02", &save); pair; pair = strtok_r(NULL, "\x02", &save)) {
                char *sep = strchr(pair, '\x01');
                if (!sep)
                        continue;
                *sep = 0;
                if (cn_ini_set(w, pair, sep + 1) < 0)
                        return 0; /* refused: the whole document is refused */
                keys++;
        }
        if (cn_ini_finish(w, &text, &text_size) < 0)
                return 0;
        for (size_t i = 0; i < text_size; i++)
                if (text[i] == '\n')
                        lines++;
        if (memchr(text, '\r', text_size) || lines != keys + 1) {
                fprintf(stderr, "%zu keys written as %zu lines:\n%s\n", keys, lines, text);
                abort();
        }
        return 0;
}
