/* SPDX-License-Identifier: Apache-2.0 */
/* INI writer fed with arbitrary JSON: whatever it writes must consist only of section headers and
 * single-line "key = value" lines, whatever the values were. */
#include <ctype.h>

#include "fuzz.h"
#include "ini-writer.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_(cn_ini_freep) CnIni *w = NULL;
        _cleanup_free_ char *out = NULL;
        size_t n = 0;

        fuzz_setup();
        if (cn_json_parse((const char *) data, size, CN_JSON_MAX_SIZE, &o, NULL) < 0)
                return 0;
        if (cn_ini_new(&w) < 0)
                abort();
        (void) cn_ini_add_json(w, o);
        if (cn_ini_finish(w, &out, &n) < 0)
                return 0;
        if (strlen(out) != n)
                abort();
        for (char *line = out; *line;) {
                char *end = strchr(line, '\n');
                if (!end)
                        abort(); /* every line is terminated */
                *end = 0;
                if (line[0] == '[') {
                        if (end[-1] != ']')
                                abort();
                } else if (line[0]) {
                        const char *eq = strstr(line, " = ");
                        if (!eq || !isalpha((unsigned char) line[0]))
                                abort();
                        for (const char *c = line; c < eq; c++)
                                if (!isalnum((unsigned char) *c) && *c != '-')
                                        abort();
                }
                for (const char *c = line; *c; c++)
                        if ((unsigned char) *c < 0x20 && *c != '\t')
                                abort();
                line = end + 1;
        }
        return 0;
}
