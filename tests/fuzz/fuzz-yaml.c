/* SPDX-License-Identifier: Apache-2.0 */
/* The strict YAML loader on arbitrary input; whatever it accepts must survive the emitter and load
 * back to the same tree (the emitter can never change a document's structure). */
#include "fuzz.h"
#include "json-util.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *tree = NULL, *again = NULL;
        _cleanup_free_ char *error = NULL, *error2 = NULL, *text = NULL;
        size_t text_size = 0;

        fuzz_setup();
        if (cn_yaml_parse((const char *) data, size, 64 * 1024, &tree, &error) < 0)
                return 0;
        if (cn_yaml_emit(tree, &text, &text_size) < 0)
                return 0; /* e.g. a tree the emitter refuses; refusing is fine */
        if (cn_yaml_parse(text, text_size, 1024 * 1024, &again, &error2) < 0) {
                fprintf(stderr, "emitted YAML does not load back: %s\n%s\n", strna(error2), text);
                abort();
        }
        if (!cn_json_equal(tree, again)) {
                fprintf(stderr, "round trip changed the tree:\n%s\n", text);
                abort();
        }
        return 0;
}
