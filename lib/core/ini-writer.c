/* SPDX-License-Identifier: Apache-2.0 */
/* INI (gcfg) writer. See ini-writer.h. */
#include <ctype.h>
#include <inttypes.h>

#include "buf.h"
#include "ini-writer.h"
#include "string-util.h"

#define CN_INI_MAX_SIZE (1U * 1024U * 1024U)

struct CnIni {
        CnBuf buf;
        bool in_section;
        int error;
};

int cn_ini_new(CnIni **ret) {
        CnIni *w;

        assert(ret);
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        cn_buf_init(&w->buf, CN_INI_MAX_SIZE);
        *ret = w;
        return 0;
}

CnIni *cn_ini_free(CnIni *w) {
        if (!w)
                return NULL;
        cn_buf_done(&w->buf);
        free(w);
        return NULL;
}

static int ini_fail(CnIni *w, int r) {
        if (w->error == 0)
                w->error = r;
        return r;
}

static bool valid_name(const char *s, bool allow_dot) {
        if (!isalpha((unsigned char) s[0]))
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && *c != '-' && !(allow_dot && *c == '.'))
                        return false;
        return true;
}

/* Inside double quotes gcfg knows \\ \" \t (and \n \b, which we never need). */
static int add_quoted(CnBuf *b, const char *s) {
        int r = cn_buf_add_char(b, '"');
        for (const char *c = s; r >= 0 && *c; c++) {
                if (*c == '\\' || *c == '"')
                        r = cn_buf_printf(b, "\\%c", *c);
                else if (*c == '\t')
                        r = cn_buf_add_str(b, "\\t");
                else
                        r = cn_buf_add_char(b, *c);
        }
        if (r >= 0)
                r = cn_buf_add_char(b, '"');
        return r;
}

static bool needs_quotes(const char *v) {
        size_t l = strlen(v);

        /* Unquoted, gcfg trims blanks, ends the value at ; or #, and reads \ as an escape or a line
         * continuation. */
        return l == 0 || strchr(" \t", v[0]) || strchr(" \t", v[l - 1]) || strpbrk(v, ";#\"\\\t");
}

int cn_ini_section(CnIni *w, const char *name, const char *subsection) {
        int r;

        assert(w);
        if (w->error < 0)
                return w->error;
        if (!name || !valid_name(name, true))
                return ini_fail(w, -EINVAL);
        if (subsection && (cn_string_has_cc(subsection, false) ||
                           !cn_utf8_is_valid(subsection, strlen(subsection))))
                return ini_fail(w, -EINVAL);
        r = cn_buf_printf(&w->buf, "%s[%s", cn_buf_len(&w->buf) > 0 ? "\n" : "", name);
        if (r >= 0 && subsection) {
                r = cn_buf_add_char(&w->buf, ' ');
                if (r >= 0)
                        r = add_quoted(&w->buf, subsection);
        }
        if (r >= 0)
                r = cn_buf_add_str(&w->buf, "]\n");
        if (r < 0)
                return ini_fail(w, r);
        w->in_section = true;
        return 0;
}

int cn_ini_set(CnIni *w, const char *key, const char *value) {
        int r;

        assert(w);
        if (w->error < 0)
                return w->error;
        if (!w->in_section || !key || !value || !valid_name(key, false))
                return ini_fail(w, -EINVAL);
        /* No newline, CR or other control character may reach the file: it could start a new key
         * or section. A tab is fine quoted. */
        if (cn_string_has_cc(value, true) || !cn_utf8_is_valid(value, strlen(value)))
                return ini_fail(w, -EINVAL);
        r = cn_buf_printf(&w->buf, "%s = ", key);
        if (r >= 0)
                r = needs_quotes(value) ? add_quoted(&w->buf, value) : cn_buf_add_str(&w->buf, value);
        if (r >= 0)
                r = cn_buf_add_char(&w->buf, '\n');
        return r < 0 ? ini_fail(w, r) : 0;
}

int cn_ini_set_bool(CnIni *w, const char *key, bool value) {
        return cn_ini_set(w, key, true_false(value));
}

int cn_ini_set_int(CnIni *w, const char *key, int64_t value) {
        char s[32];

        (void) snprintf(s, sizeof(s), "%" PRId64, value);
        return cn_ini_set(w, key, s);
}

/* A JSON scalar as one key; arrays of scalars as repeated keys; null is omitted. */
static int set_json(CnIni *w, const char *key, json_object *v) {
        char num[CN_DOUBLE_MAX];
        int r;

        switch (json_object_get_type(v)) {
        case json_type_null:
                return 0;
        case json_type_boolean:
                return cn_ini_set_bool(w, key, json_object_get_boolean(v));
        case json_type_int:
                return cn_ini_set_int(w, key, json_object_get_int64(v));
        case json_type_double:
                return cn_ini_set(w, key, cn_format_double(num, json_object_get_double(v)));
        case json_type_string:
                if ((size_t) json_object_get_string_len(v) != strlen(json_object_get_string(v)))
                        return ini_fail(w, -EINVAL);
                return cn_ini_set(w, key, json_object_get_string(v));
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *item = json_object_array_get_idx(v, i);
                        if (json_object_is_type(item, json_type_array) || json_object_is_type(item, json_type_object))
                                return ini_fail(w, -EINVAL);
                        r = set_json(w, key, item);
                        if (r < 0)
                                return r;
                }
                return 0;
        default:
                return ini_fail(w, -EINVAL);
        }
}

static int add_json_section(CnIni *w, const char *name, const char *subsection, json_object *members,
                            bool allow_subsections) {
        bool has_scalars = false;
        int r;

        if (!json_object_is_type(members, json_type_object))
                return ini_fail(w, -EINVAL);
        json_object_object_foreach(members, k, v) {
                (void) k;
                if (!json_object_is_type(v, json_type_object))
                        has_scalars = true;
                else if (!allow_subsections)
                        return ini_fail(w, -EINVAL);
        }
        /* A section that only holds subsections needs no header of its own. */
        if (has_scalars || json_object_object_length(members) == 0) {
                r = cn_ini_section(w, name, subsection);
                if (r < 0)
                        return r;
                json_object_object_foreach(members, key, value) {
                        if (json_object_is_type(value, json_type_object))
                                continue;
                        r = set_json(w, key, value);
                        if (r < 0)
                                return r;
                }
        }
        json_object_object_foreach(members, sub, value) {
                if (!json_object_is_type(value, json_type_object))
                        continue;
                r = add_json_section(w, name, sub, value, false);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_ini_add_json(CnIni *w, json_object *sections) {
        int r;

        assert(w);
        if (w->error < 0)
                return w->error;
        if (!json_object_is_type(sections, json_type_object))
                return ini_fail(w, -EINVAL);
        json_object_object_foreach(sections, name, members) {
                r = add_json_section(w, name, NULL, members, true);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_ini_finish(CnIni *w, char **ret, size_t *ret_size) {
        assert(w);
        assert(ret);
        if (w->error < 0)
                return w->error;
        return cn_buf_steal(&w->buf, ret, ret_size);
}
