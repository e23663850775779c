/* SPDX-License-Identifier: Apache-2.0 */
/* JSON parser on arbitrary input; whatever it accepts must serialize and parse back unchanged,
 * and must also go through the YAML emitter unless it holds a NUL character. */
#include "fuzz.h"
#include "json-util.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *o = NULL, *back = NULL;
        _cleanup_free_ char *err = NULL, *text = NULL, *yaml = NULL;

        fuzz_setup();
        if (cn_json_parse((const char *) data, size, CN_JSON_MAX_SIZE, &o, &err) < 0) {
                if (!err)
                        abort(); /* a parse error always says why */
                return 0;
        }
        if (cn_json_to_string(o, CN_JSON_COMPACT, &text) < 0)
                abort();
        if (cn_json_parse(text, strlen(text), SIZE_MAX, &back, NULL) < 0 || !cn_json_equal(o, back))
                abort();
        (void) cn_yaml_emit(o, &yaml, NULL);
        return 0;
}
