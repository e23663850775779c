/* SPDX-License-Identifier: Apache-2.0 */
/* The Deckhouse module's hooks (controller/deckhouse-hooks.c) on arbitrary binding contexts: the
 * first byte picks the hook, the rest is BINDING_CONTEXT_PATH's content. Whatever it holds, the
 * hook returns 0 or 1 and never crashes. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "../../controller/deckhouse-hooks.c"

static char dir[] = "/tmp/cn-fuzz-hook-XXXXXX";
static char contexts[64], values[64];

static void remove_dir(void) {
        (void) unlink(contexts);
        (void) unlink(values);
        (void) rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const names[] = { "cluster-configuration", "discovery-data", "instance-class",
                                              "wait-for-masters" };
        char *argv[] = { NULL, NULL };
        FILE *f;
        int r;

        fuzz_setup();
        if (size < 1)
                return 0;
        if (!contexts[0]) {
                if (!mkdtemp(dir))
                        abort();
                if (atexit(remove_dir) != 0)
                        abort();
                snprintf(contexts, sizeof(contexts), "%s/contexts", dir);
                snprintf(values, sizeof(values), "%s/values", dir);
                f = fopen(values, "we");
                if (!f)
                        abort();
                fputs("{\"" MODULE_KEY "\":{\"storageClass\":{\"exclude\":[\"x.*\",\"a|b\"]},\"internal\":{}}}", f);
                fclose(f);
                setenv("VALUES_PATH", values, 1);
                setenv("CONFIG_VALUES_PATH", values, 1);
                setenv("VALUES_JSON_PATCH_PATH", "/dev/null", 1);
                setenv("KUBERNETES_PATCH_PATH", "/dev/null", 1);
                setenv("BINDING_CONTEXT_PATH", contexts, 1);
        }
        f = fopen(contexts, "we");
        if (!f)
                abort();
        if (fwrite(data + 1, 1, size - 1, f) != size - 1)
                abort();
        fclose(f);
        argv[0] = (char *) names[data[0] % ELEMENTSOF(names)];
        r = cn_deckhouse_hook_main(1, argv);
        if (r != 0 && r != 1)
                abort();
        return 0;
}
