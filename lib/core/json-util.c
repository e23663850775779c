/* SPDX-License-Identifier: Apache-2.0 */
/* json-c helpers. See json-util.h. */
#include <math.h>
#include <stdarg.h>

#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"

int cn_parse_file_with(CnTreeParser parse, const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = cn_read_file(root, path, max_size, &data, &size);
        if (r < 0) {
                if (ret_error)
                        (void) cn_set_message(ret_error, "%s", strerror(-r));
                return r;
        }
        return parse(data, size, max_size, ret, ret_error);
}

int cn_json_parse_file(const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error) {
        return cn_parse_file_with(cn_json_parse, root, path, max_size, ret, ret_error);
}

json_object *cn_json_getv(json_object *o, va_list ap) {
        for (const char *k = va_arg(ap, const char *); k; k = va_arg(ap, const char *)) {
                if (!o || !json_object_is_type(o, json_type_object))
                        return NULL;
                if (!json_object_object_get_ex(o, k, &o))
                        return NULL;
        }
        return o;
}

json_object *cn_json_get(json_object *o, ...) {
        va_list ap;

        va_start(ap, o);
        o = cn_json_getv(o, ap);
        va_end(ap);
        return o;
}

/* Resolves the path that follows ret in the argument list and checks the type. */
#define JSON_GET_TYPED(o, ret, type, v)                                                                \
        ({                                                                                             \
                va_list _ap_;                                                                          \
                va_start(_ap_, ret);                                                                   \
                v = cn_json_getv(o, _ap_);                                                             \
                va_end(_ap_);                                                                          \
                !v || json_object_is_type(v, json_type_null) ? -ENOENT                                 \
                : !json_object_is_type(v, type)             ? -EINVAL                                  \
                                                            : 0;                                       \
        })

int cn_json_get_string(json_object *o, const char **ret, ...) {
        json_object *v;
        int r = JSON_GET_TYPED(o, ret, json_type_string, v);
        if (r < 0)
                return r;
        if (ret)
                *ret = json_object_get_string(v);
        return 0;
}

int cn_json_get_int64(json_object *o, int64_t *ret, ...) {
        json_object *v;
        int r = JSON_GET_TYPED(o, ret, json_type_int, v);
        if (r < 0)
                return r;
        errno = 0;
        int64_t i = json_object_get_int64(v);
        /* json-c clamps out-of-range numbers to INT64_MIN/MAX and sets errno. */
        if (errno == ERANGE || ((i == INT64_MAX || i == INT64_MIN) && errno != 0))
                return -ERANGE;
        if (ret)
                *ret = i;
        return 0;
}

int cn_json_get_bool(json_object *o, bool *ret, ...) {
        json_object *v;
        int r = JSON_GET_TYPED(o, ret, json_type_boolean, v);
        if (r < 0)
                return r;
        if (ret)
                *ret = json_object_get_boolean(v);
        return 0;
}

int cn_json_get_double(json_object *o, double *ret, ...) {
        va_list ap;
        json_object *v;

        va_start(ap, ret);
        v = cn_json_getv(o, ap);
        va_end(ap);
        if (!v || json_object_is_type(v, json_type_null))
                return -ENOENT;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return -EINVAL;
        if (ret)
                *ret = json_object_get_double(v);
        return 0;
}

int cn_json_get_object(json_object *o, json_object **ret, ...) {
        json_object *v;
        int r = JSON_GET_TYPED(o, ret, json_type_object, v);
        if (r < 0)
                return r;
        if (ret)
                *ret = v;
        return 0;
}

int cn_json_get_array(json_object *o, json_object **ret, ...) {
        json_object *v;
        int r = JSON_GET_TYPED(o, ret, json_type_array, v);
        if (r < 0)
                return r;
        if (ret)
                *ret = v;
        return 0;
}

const char *cn_json_string(json_object *o, ...) {
        va_list ap;
        json_object *v;

        va_start(ap, o);
        v = cn_json_getv(o, ap);
        va_end(ap);
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

bool cn_json_string_is(json_object *o, const char *key, const char *value) {
        return streq(strempty(cn_json_string(o, key, NULL)), strempty(value));
}

json_object *cn_json_array_find(json_object *array, const char *key, const char *value) {
        if (!array || !json_object_is_type(array, json_type_array))
                return NULL;
        for (size_t i = 0, n = json_object_array_length(array); i < n; i++) {
                json_object *e = json_object_array_get_idx(array, i);
                const char *v = cn_json_string(e, key, NULL);

                if (v && streq(v, value))
                        return e;
        }
        return NULL;
}

static int json_setv(json_object *o, json_object *value, va_list ap) {
        _cleanup_json_ json_object *owned = value;
        const char *k = va_arg(ap, const char *);

        if (!o || !k || !json_object_is_type(o, json_type_object))
                return -EINVAL;
        for (;;) {
                const char *next = va_arg(ap, const char *);
                json_object *child;

                if (!next)
                        return json_object_object_add(o, k, TAKE_PTR(owned)) < 0 ? -ENOMEM : 0;
                if (!json_object_object_get_ex(o, k, &child)) {
                        child = json_object_new_object();
                        if (!child)
                                return -ENOMEM;
                        if (json_object_object_add(o, k, child) < 0) {
                                json_object_put(child);
                                return -ENOMEM;
                        }
                } else if (!json_object_is_type(child, json_type_object))
                        return -EINVAL;
                o = child;
                k = next;
        }
}

int cn_json_set(json_object *o, json_object *value, ...) {
        va_list ap;
        int r;

        va_start(ap, value);
        r = json_setv(o, value, ap);
        va_end(ap);
        return r;
}

int cn_json_set_string(json_object *o, const char *value, ...) {
        json_object *v = NULL;
        va_list ap;
        int r;

        if (value) {
                v = json_object_new_string(value);
                if (!v)
                        return -ENOMEM;
        }
        va_start(ap, value);
        r = json_setv(o, v, ap);
        va_end(ap);
        return r;
}

int cn_json_to_string(json_object *o, CnJsonFormat format, char **ret) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE;
        const char *s;
        size_t len;
        char *r;

        assert(ret);
        flags |= (format & CN_JSON_PRETTY) ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED
                                           : JSON_C_TO_STRING_PLAIN;
        s = json_object_to_json_string_length(o, flags, &len);
        if (!s)
                return -ENOMEM;
        r = malloc(len + 2);
        if (!r)
                return -ENOMEM;
        memcpy(r, s, len);
        if (format & CN_JSON_NEWLINE)
                r[len++] = '\n';
        r[len] = 0;
        *ret = r;
        return 0;
}

bool cn_json_equal(json_object *a, json_object *b) {
        return json_object_equal(a, b) != 0;
}

void cn_json_compact(json_object *o) {
        if (json_object_is_type(o, json_type_array)) {
                for (size_t i = 0, n = json_object_array_length(o); i < n; i++)
                        cn_json_compact(json_object_array_get_idx(o, i));
                (void) json_object_array_shrink(o, 0);
                return;
        }
        if (!json_object_is_type(o, json_type_object))
                return;

        struct lh_table *t = json_object_get_object(o);
        int want;

        json_object_object_foreach(o, key, val) {
                (void) key;
                cn_json_compact(val);
        }
        /* json-c grows a table once count >= size * LH_LOAD_FACTOR, also while lh_table_resize()
         * fills the new table; a nested grow there leaves t->size smaller than the table it
         * installs, and the members hashed past t->size are never found again. The smallest
         * size that takes count members without growing: count / LH_LOAD_FACTOR, plus one so
         * that lookups always find a free slot to stop at. */
        want = (int) ((double) t->count / LH_LOAD_FACTOR) + 1;
        if (want < t->size)
                (void) lh_table_resize(t, want);
}
