/* SPDX-License-Identifier: Apache-2.0 */
/* The node config parser (YAML loader, then key checks) on arbitrary input. */
#include "fuzz.h"
#include "node-config.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *doc = NULL;
        CnNodeConfig *c = NULL;
        char *error = NULL;

        fuzz_setup();
        if (cn_yaml_parse((const char *) data, size, 1 << 20, &doc, &error) >= 0) {
                free(error);
                error = NULL;
                if (cn_node_config_from_json(doc, &c, &error) >= 0)
                        cn_node_config_free(c);
                json_object_put(doc);
        }
        free(error);
        return 0;
}
