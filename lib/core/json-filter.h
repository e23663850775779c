/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing a JSON document keeping only the members a reader uses, as a declarative transform
 * applied before the tree is built: the members dropped are scanned over (strings and brackets
 * tracked, nothing allocated) and never become json-c objects. A Node of 16 KB whose reader needs
 * its name, taints and addresses costs one small tree instead of a few hundred objects.
 *
 * A filter is an array of entries ending with { NULL }. An entry names an object member and says
 * what to keep of its value: all of it (members NULL), only some of its members (members, a
 * filter, applied to each element when the value is an array), or nothing (drop). The name "*"
 * matches every member not matched by an entry before it. An entry { NULL, .members = F } (see
 * CN_JSON_FILTER_INCLUDE) looks the member up in F first and then goes on with the entries after
 * it, so filters compose without copying. Scalars are kept as they are whatever the filter. Keys
 * written with escapes match "*" only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef struct CnJsonFilter {
        const char *name;                    /* member name, "*" for any; NULL: end, or include */
        const struct CnJsonFilter *members;  /* NULL: keep the whole value */
        bool drop;                           /* leave the member out */
        /* For an array of objects: keep only the elements whose member select_key is a string
         * among select_values (NULL-terminated), as Node conditions by type. select_key must
         * be among the members kept. */
        const char *select_key;
        const char *const *select_values;
} CnJsonFilter;

#define CN_JSON_FILTER_ANY "*"
#define CN_JSON_FILTER_INCLUDE(f) { .name = NULL, .members = (f) }

/* The text of data[0..size) with the members f drops left out (whitespace of kept values kept).
 * The result is at most size bytes and NUL-terminated. -EBADMSG for input that is not one
 * JSON value with balanced brackets and terminated strings; kept parts are checked fully only
 * by the parser that reads the result. */
int cn_json_filter_text(const char *data, size_t size, const CnJsonFilter *f, char **ret, size_t *ret_size);

/* cn_json_parse() of the filtered text; f NULL parses everything. */
int cn_json_parse_filtered(const char *data, size_t size, size_t max_size, const CnJsonFilter *f, json_object **ret,
                           char **ret_error);

/* The portable scans only, as on a CPU without AVX2 (where they are all there is): for tests that
 * hold both to the same answers. */
void cn_json_filter_set_portable(bool on);

/* Where a string, object or array ends in text that arrives in pieces (a response read as it
 * streams in): strings and bracket nesting are followed, nothing else is checked (the parser that
 * reads the value does). Start zeroed; the value's first byte must be '"', '{' or '['. */
typedef struct CnJsonValueScan {
        unsigned depth;
        bool in_string, escape;
} CnJsonValueScan;

/* How many bytes of data belong to the value (its last byte included); *ret_done when it ended
 * there. */
size_t cn_json_value_scan(CnJsonValueScan *s, const char *data, size_t size, bool *ret_done);
