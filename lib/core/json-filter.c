/* SPDX-License-Identifier: Apache-2.0 */
/* Filtered JSON parsing; see json-filter.h. One pass over the text: kept values are copied as
 * they are, dropped ones skipped; the result, never longer than the input, goes to json-c. */
#include <ctype.h>

#include "json-filter.h"
#include "json-util.h"
#include "string-util.h"

typedef struct Scan {
        const char *p, *end;
        char *out;
        size_t n;
} Scan;

static bool is_ws(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(Scan *s) {
        while (s->p < s->end && is_ws(*s->p))
                s->p++;
}

static void emit(Scan *s, const char *from, size_t n) {
        memcpy(s->out + s->n, from, n);
        s->n += n;
}

/* Past the string that starts at s->p ('"'): its end is the first quote after an even number of
 * backslashes. Its content is not checked: a kept string is, by json-c, and a dropped one is
 * never read. */
static int skip_string(Scan *s) {
        const char *start = s->p + 1, *from = start;

        for (;;) {
                const char *q = memchr(from, '"', s->end - from);
                size_t bs = 0;

                if (!q)
                        return -EBADMSG;
                while (q - bs > start && q[-1 - (ptrdiff_t) bs] == '\\')
                        bs++;
                if (bs % 2 == 0) {
                        s->p = q + 1;
                        return 0;
                }
                from = q + 1;
        }
}

/* Past one value, whatever it holds: strings and bracket nesting are followed, the rest of the
 * grammar is left to nobody (the value is not kept). */
static int skip_value(Scan *s) {
        char stack[CN_JSON_MAX_DEPTH];
        unsigned depth = 0;
        int r;

        for (;;) {
                char c;

                skip_ws(s);
                if (s->p >= s->end)
                        return -EBADMSG;
                c = *s->p;
                if (c == '"') {
                        r = skip_string(s);
                        if (r < 0)
                                return r;
                } else if (c == '{' || c == '[') {
                        if (depth >= ELEMENTSOF(stack))
                                return -EBADMSG;
                        stack[depth++] = c == '{' ? '}' : ']';
                        s->p++;
                        continue;
                } else if (c == '}' || c == ']') {
                        if (depth == 0 || stack[depth - 1] != c)
                                return -EBADMSG;
                        depth--;
                        s->p++;
                } else if (c == ',' || c == ':') {
                        if (depth == 0)
                                return -EBADMSG;
                        s->p++;
                        continue;
                } else {
                        const char *start = s->p;

                        while (s->p < s->end && (isalnum((unsigned char) *s->p) || strchr("+-.", *s->p)))
                                s->p++;
                        if (s->p == start)
                                return -EBADMSG;
                }
                if (depth == 0)
                        return 0;
        }
}

static bool key_is(const char *name, const char *key, size_t len) {
        return strlen(name) == len && memcmp(name, key, len) == 0;
}

static const CnJsonFilter *filter_find(const CnJsonFilter *f, const char *key, size_t len, bool escaped) {
        for (; f->name || f->members; f++) {
                if (!f->name) {
                        const CnJsonFilter *e = filter_find(f->members, key, len, escaped);

                        if (e)
                                return e;
                } else if (streq(f->name, CN_JSON_FILTER_ANY) || (!escaped && key_is(f->name, key, len)))
                        return f;
        }
        return NULL;
}

static int keep_value(Scan *s) {
        const char *start = s->p;
        int r;

        r = skip_value(s);
        if (r >= 0)
                emit(s, start, s->p - start);
        return r;
}

static int filter_value(Scan *s, const CnJsonFilter *f, unsigned depth);

/* Past the opening bracket of an object or array (copied): 1 when it closes right away. */
static int open_container(Scan *s, char close) {
        emit(s, s->p++, 1);
        skip_ws(s);
        if (s->p < s->end && *s->p == close) {
                emit(s, s->p++, 1);
                return 1;
        }
        return 0;
}

/* After a member or element: 1 past the closing bracket (copied), 0 past a comma (copied when
 * copy_comma), or -EBADMSG. */
static int next_item(Scan *s, char close, bool copy_comma) {
        skip_ws(s);
        if (s->p >= s->end)
                return -EBADMSG;
        if (*s->p == close) {
                emit(s, s->p++, 1);
                return 1;
        }
        if (*s->p != ',')
                return -EBADMSG;
        if (copy_comma)
                emit(s, s->p, 1);
        s->p++;
        return 0;
}

static int filter_array(Scan *s, const CnJsonFilter *f, const CnJsonFilter *select, unsigned depth);

/* Whether the filtered element from..to (an object) has select->select_key with one of its
 * values. */
static bool element_selected(const char *from, const char *to, const CnJsonFilter *select) {
        Scan t = { .p = from, .end = to };

        skip_ws(&t);
        if (t.p >= t.end || *t.p != '{')
                return false;
        t.p++;
        for (;;) {
                const char *key, *val;
                size_t len;

                skip_ws(&t);
                if (t.p >= t.end || *t.p != '"')
                        return false;
                key = t.p + 1;
                if (skip_string(&t) < 0)
                        return false;
                len = t.p - key - 1;
                skip_ws(&t);
                if (t.p >= t.end || *t.p != ':')
                        return false;
                t.p++;
                skip_ws(&t);
                val = t.p;
                if (skip_value(&t) < 0)
                        return false;
                if (key_is(select->select_key, key, len)) {
                        if (*val != '"')
                                return false;
                        for (const char *const *v = select->select_values; *v; v++)
                                if (key_is(*v, val + 1, t.p - val - 2))
                                        return true;
                        return false;
                }
                skip_ws(&t);
                if (t.p >= t.end || *t.p != ',')
                        return false;
                t.p++;
        }
}

static int filter_member(Scan *s, const CnJsonFilter *e, unsigned depth) {
        skip_ws(s);
        if (e->select_key && s->p < s->end && *s->p == '[')
                return filter_array(s, e->members, e, depth);
        return filter_value(s, e->members, depth);
}

static int filter_object(Scan *s, const CnJsonFilter *f, unsigned depth) {
        bool first = true;
        int r;

        for (r = open_container(s, '}'); r == 0; r = next_item(s, '}', false)) {
                const char *key;
                const CnJsonFilter *e;
                size_t len;

                skip_ws(s);
                if (s->p >= s->end || *s->p != '"')
                        return -EBADMSG;
                key = s->p;
                r = skip_string(s);
                if (r < 0)
                        return r;
                len = s->p - key - 2;
                skip_ws(s);
                if (s->p >= s->end || *s->p != ':')
                        return -EBADMSG;
                s->p++;
                e = filter_find(f, key + 1, len, memchr(key + 1, '\\', len));
                if (e && !e->drop) {
                        /* Members are separated by the commas we write: dropped ones leave none. */
                        if (!first)
                                emit(s, ",", 1);
                        emit(s, key, s->p - key);
                        r = filter_member(s, e, depth + 1);
                        first = false;
                } else
                        r = skip_value(s);
                if (r < 0)
                        return r;
        }
        return r < 0 ? r : 0;
}

/* select: an entry with select_key, or NULL to keep every element. */
static int filter_array(Scan *s, const CnJsonFilter *f, const CnJsonFilter *select, unsigned depth) {
        size_t kept = 0;
        int r;

        if (depth >= CN_JSON_MAX_DEPTH)
                return -EBADMSG;
        for (r = open_container(s, ']'); r == 0; r = next_item(s, ']', false)) {
                size_t mark = s->n;

                /* Elements are separated by the commas we write: unselected ones leave none. */
                if (kept > 0)
                        emit(s, ",", 1);
                r = filter_value(s, f, depth + 1);
                if (r < 0)
                        return r;
                if (select && !element_selected(s->out + mark + (kept > 0), s->out + s->n, select)) {
                        s->n = mark;
                        continue;
                }
                kept++;
        }
        return r < 0 ? r : 0;
}

static int filter_value(Scan *s, const CnJsonFilter *f, unsigned depth) {
        skip_ws(s);
        if (s->p >= s->end || depth >= CN_JSON_MAX_DEPTH)
                return -EBADMSG;
        if (!f)
                return keep_value(s);
        if (*s->p == '{')
                return filter_object(s, f, depth);
        if (*s->p == '[')
                return filter_array(s, f, NULL, depth);
        return keep_value(s);
}

int cn_json_filter_text(const char *data, size_t size, const CnJsonFilter *f, char **ret, size_t *ret_size) {
        _cleanup_free_ char *out = NULL;
        Scan s = { .p = data, .end = data + size };
        int r;

        assert(data || size == 0);
        assert(ret);
        out = malloc(size + 1);
        if (!out)
                return -ENOMEM;
        s.out = out;
        r = filter_value(&s, f, 0);
        if (r < 0)
                return r;
        skip_ws(&s);
        if (s.p != s.end)
                return -EBADMSG;
        out[s.n] = 0;
        if (ret_size)
                *ret_size = s.n;
        *ret = TAKE_PTR(out);
        return 0;
}

size_t cn_json_value_scan(CnJsonValueScan *s, const char *data, size_t size, bool *ret_done) {
        for (size_t i = 0; i < size; i++) {
                char c = data[i];

                if (s->in_string) {
                        /* Most bytes are in strings: jump to the next quote or backslash. */
                        const char *q, *b;

                        if (s->escape) {
                                s->escape = false;
                                continue;
                        }
                        q = memchr(data + i, '"', size - i);
                        b = memchr(data + i, '\\', (q ? (size_t) (q - data) : size) - i);
                        if (b) {
                                i = b - data;
                                s->escape = true;
                        } else if (q) {
                                i = q - data;
                                s->in_string = false;
                                if (s->depth == 0) {
                                        *ret_done = true;
                                        return i + 1;
                                }
                        } else
                                i = size - 1;
                } else if (c == '"')
                        s->in_string = true;
                else if (c == '{' || c == '[')
                        s->depth++;
                else if ((c == '}' || c == ']') && s->depth > 0 && --s->depth == 0) {
                        *ret_done = true;
                        return i + 1;
                }
        }
        *ret_done = false;
        return size;
}

int cn_json_parse_filtered(const char *data, size_t size, size_t max_size, const CnJsonFilter *f, json_object **ret,
                           char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int r;

        if (!f)
                return cn_json_parse(data, size, max_size, ret, ret_error);
        if (size > max_size)
                return cn_json_parse(data, size, max_size, ret, ret_error); /* says why */
        r = cn_json_filter_text(data, size, f, &text, &n);
        if (r < 0) {
                if (ret_error)
                        (void) cn_set_message(ret_error, "malformed JSON document");
                return r;
        }
        return cn_json_parse(text, n, max_size, ret, ret_error);
}
