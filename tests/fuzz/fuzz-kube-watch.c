/* SPDX-License-Identifier: Apache-2.0 */
/* The watch stream parser on arbitrary bytes, fed in pieces whose sizes come from the input, so
 * that events split at every possible place; with the first byte's high bit, through an object
 * filter (lib/core/json-filter.h) that keeps, narrows and drops members, in arrays too, and
 * selects array elements by a member's value. */
#include "fuzz.h"
#include "kube-object-filter.h"
#include "kube-client.h"

static int on_event(CnKubeWatchEventType type, json_object *object, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CnKubeWatchParser *p = NULL;
        unsigned events = 0;
        char *msg = NULL;
        size_t step;

        fuzz_setup();
        if (size == 0)
                return 0;
        step = data[0] % 17 + 1;
        if (cn_kube_watch_parser_new(64 * 1024, on_event, &events, &p) < 0)
                abort();
        if (data[0] & 0x80)
                cn_kube_watch_parser_set_filter(p, fuzz_filter);
        for (size_t i = 1; i < size; i += step)
                if (cn_kube_watch_parser_feed(p, data + i, MIN(step, size - i), &msg) < 0)
                        break;
        (void) cn_kube_watch_parser_partial(p);
        cn_kube_watch_parser_free(p);
        free(msg);
        return 0;
}
