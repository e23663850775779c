/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig loading: YAML from a user's file, then the context/cluster/user resolution. */
#include "fuzz.h"
#include "kube-config.h"
#include "yaml-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *tree = NULL;
        _cleanup_free_ char *error = NULL, *error2 = NULL;
        CnKubeConfig *c = NULL;

        fuzz_setup();
        if (cn_yaml_parse((const char *) data, size, 64 * 1024, &tree, &error) < 0)
                return 0;
        if (cn_kube_config_from_json(tree, "/nonexistent-fuzz-dir", "fuzz", NULL, &c, &error2) >= 0)
                cn_kube_config_free(c);
        return 0;
}
