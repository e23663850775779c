/* SPDX-License-Identifier: Apache-2.0 */
/* JSON parsing with a size cap, and serialization of whatever parses. */
#include "fuzz.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *tree = NULL, *again = NULL;
        _cleanup_free_ char *error = NULL, *error2 = NULL, *text = NULL;

        fuzz_setup();
        if (cn_json_parse((const char *) data, size, 16 * 1024, &tree, &error) < 0)
                return 0;
        if (cn_json_to_string(tree, 0, &text) < 0)
                return 0;
        if (cn_json_parse(text, strlen(text), 1024 * 1024, &again, &error2) < 0 || !cn_json_equal(tree, again)) {
                fprintf(stderr, "JSON round trip failed: %s\n", strna(error2));
                abort();
        }
        return 0;
}
