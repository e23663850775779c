/* SPDX-License-Identifier: Apache-2.0 */
/* JSON parser on arbitrary input; whatever it accepts must be what json-c's tokener builds from
 * it (../unit/json-reference.h), serialize and parse back unchanged, and go through the YAML
 * emitter. */
#include "../unit/json-reference.h"
#include "fuzz.h"
#include "json-util.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *o = NULL, *back = NULL, *ref = NULL;
        _cleanup_free_ char *err = NULL, *text = NULL, *yaml = NULL;
        bool ok;

        fuzz_setup();
        if (cn_json_parse((const char *) data, size, CN_JSON_MAX_SIZE, &o, &err) < 0) {
                if (!err)
                        abort(); /* a parse error always says why */
                return 0;
        }
        ref = json_reference_parse((const char *) data, size, &ok);
        if (!ok || !json_reference_same(o, ref))
                abort(); /* accepted where json-c rejects, or a different tree */
        if (cn_json_to_string(o, CN_JSON_COMPACT, &text) < 0)
                abort();
        if (cn_json_parse(text, strlen(text), SIZE_MAX, &back, NULL) < 0 || !cn_json_equal(o, back))
                abort();
        (void) cn_yaml_emit(o, &yaml, NULL);
        return 0;
}
