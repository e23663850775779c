/* SPDX-License-Identifier: Apache-2.0 */
/* The incremental watch-stream decoder fed in pieces whose sizes come from the input itself, so
 * objects are cut at every possible place. */
#include "fuzz.h"
#include "kube-client.h"

static int on_event(CnKubeWatchEventType type, json_object *object, void *userdata) {
        size_t *n = userdata;

        (*n)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(cn_kube_watch_parser_freep) CnKubeWatchParser *p = NULL;
        size_t events = 0, step;

        fuzz_setup();
        if (size < 1)
                return 0;
        step = 1 + data[0] % 17;
        data++, size--;
        if (cn_kube_watch_parser_new(8 * 1024, on_event, &events, &p) < 0)
                abort();
        for (size_t off = 0; off < size; off += step) {
                _cleanup_free_ char *msg = NULL;

                if (cn_kube_watch_parser_feed(p, data + off, MIN(step, size - off), &msg) < 0)
                        break;
        }
        (void) cn_kube_watch_parser_partial(p);
        return 0;
}
