/* SPDX-License-Identifier: Apache-2.0 */
/* The kubeconfig reader (YAML loader, then the kubeconfig structure) on arbitrary input. Paths
 * it names are resolved under a directory that does not exist, so nothing is read. */
#include "fuzz.h"
#include "kube-config.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *doc = NULL;
        CnKubeConfig *c = NULL;
        char *error = NULL;

        fuzz_setup();
        if (cn_yaml_parse((const char *) data, size, 1 << 20, &doc, &error) >= 0) {
                if (cn_kube_config_from_json(doc, "/nonexistent-fuzz-dir", "fuzz", NULL, &c, &error) >= 0)
                        cn_kube_config_free(c);
                json_object_put(doc);
        }
        free(error);
        return 0;
}
