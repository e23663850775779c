/* SPDX-License-Identifier: Apache-2.0 */
/* The reference cn_json_parse() is held to: json-c's tokener in strict mode with UTF-8 validation,
 * NaN and Infinity rejected after it, as cn_json_parse() used it before it had its own parser.
 * json_reference_parse() returns NULL with *ok false for what it rejects. */
#pragma once

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "json-util.h"

static inline bool json_reference_finite(json_object *o) {
        switch (json_object_get_type(o)) {
        case json_type_double:
                return isfinite(json_object_get_double(o));
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++)
                        if (!json_reference_finite(json_object_array_get_idx(o, i)))
                                return false;
                return true;
        case json_type_object: {
                json_object_object_foreach(o, k, v) {
                        (void) k;
                        if (!json_reference_finite(v))
                                return false;
                }
                return true;
        }
        default:
                return true;
        }
}

static inline json_object *json_reference_parse(const char *s, size_t n, bool *ok) {
        json_tokener *tok = json_tokener_new_ex(CN_JSON_MAX_DEPTH);
        enum json_tokener_error e;
        json_object *o;
        size_t off;

        assert(tok);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, s, (int) n);
        e = json_tokener_get_error(tok);
        off = json_tokener_get_parse_end(tok);
        if (e == json_tokener_continue) {
                o = json_tokener_parse_ex(tok, "", 1);
                e = json_tokener_get_error(tok);
                off = n;
        }
        json_tokener_free(tok);
        *ok = e == json_tokener_success;
        for (; *ok && off < n; off++)
                if (!strchr(" \t\r\n", s[off]) || !s[off])
                        *ok = false;
        if (*ok && !json_reference_finite(o))
                *ok = false;
        if (!*ok) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

/* Equal as json-c compares them, and serialized alike: key order, number texts. */
static inline bool json_reference_same(json_object *a, json_object *b) {
        if (!json_object_equal(a, b))
                return false;
        if (!a || !b)
                return a == b;
        return streq(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN),
                     json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));
}
