/* SPDX-License-Identifier: Apache-2.0 */
/* YAML loader on arbitrary input; whatever it accepts must survive emit and load unchanged. */
#include "fuzz.h"
#include "json-util.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *docs = NULL, *back = NULL;
        _cleanup_free_ char *err = NULL, *text = NULL, *err2 = NULL;
        size_t n;

        fuzz_setup();
        if (cn_yaml_parse_multi((const char *) data, size, CN_YAML_MAX_SIZE, &docs, &err) < 0)
                return 0;
        if (cn_yaml_emit_multi(docs, &text, &n) < 0)
                abort();
        if (cn_yaml_parse_multi(text, n, SIZE_MAX, &back, &err2) < 0 || !cn_json_equal(docs, back))
                abort();
        return 0;
}
