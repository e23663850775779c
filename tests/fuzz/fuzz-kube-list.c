/* SPDX-License-Identifier: Apache-2.0 */
/* The List page parser on arbitrary bytes, fed in pieces whose sizes come from the input, so
 * that items split at every possible place; with the first byte's high bit, through an item
 * filter (lib/core/json-filter.h) that keeps, narrows and drops members. */
#include "fuzz.h"
#include "kube-object-filter.h"
#include "kube-client.h"

static int on_item(json_object *item, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CnKubeListParser *p = NULL;
        json_object *list = NULL;
        unsigned items = 0;
        size_t step;
        int r = 0;

        fuzz_setup();
        if (size == 0)
                return 0;
        step = data[0] % 17 + 1;
        if (cn_kube_list_parser_new(64 * 1024, data[0] & 0x80 ? fuzz_filter : NULL, on_item, &items, &p) < 0)
                abort();
        for (size_t i = 1; i < size && r >= 0; i += step)
                r = cn_kube_list_parser_feed(p, data + i, MIN(step, size - i));
        if (r >= 0 && cn_kube_list_parser_finish(p, &list) >= 0 && !json_object_is_type(list, json_type_object))
                abort();
        json_object_put(list);
        cn_kube_list_parser_free(p);
        return 0;
}
