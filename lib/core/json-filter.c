/* SPDX-License-Identifier: Apache-2.0 */
/* Filtered JSON parsing; see json-filter.h. One pass over the text: kept values are copied as
 * they are, dropped ones skipped; the result, never longer than the input, goes to json-c.
 *
 * Most bytes of a Kubernetes object are inside strings (image names, managedFields' keys), so
 * the scans look for a string's end 16 bytes at a time where the CPU has SSE2 (every x86-64),
 * and pass over the bytes between strings with a table lookup each. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "json-filter.h"
#include "json-util.h"
#include "string-util.h"

typedef struct Scan {
        const char *p, *end;
        char *out;
        size_t n;
} Scan;

/* What a literal (number, true, false, null) is made of; the grammar is json-c's to check, for
 * kept values. */
#define LITERAL_BYTES \
        ['+'] = true, ['-'] = true, ['.'] = true, ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true
static const bool literal_byte[256] = { LITERAL_BYTES };

/* What a dropped value's scan passes over between its brackets and strings: whitespace, the
 * separators and literals. Any other byte there (a stray control byte, '@', a NUL) is an error. */
static const bool plain_byte[256] = {
        [' '] = true, ['\t'] = true, ['\n'] = true, ['\r'] = true, [','] = true, [':'] = true, LITERAL_BYTES
};
#undef LITERAL_BYTES

/* Where cn_json_value_scan() stops outside strings. */
static const bool structural_byte[256] = {
        ['"'] = true, ['{'] = true, ['}'] = true, ['['] = true, [']'] = true,
};

static inline bool is_ws(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline void skip_ws(Scan *s) {
        while (s->p < s->end && is_ws(*s->p))
                s->p++;
}

static void emit(Scan *s, const char *from, size_t n) {
        memcpy(s->out + s->n, from, n);
        s->n += n;
}

/* The first quote or backslash in p..end, or end. */
static inline const char *find_quote_or_backslash(const char *p, const char *end) {
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');

        for (; end - p >= 16; p += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *) (const void *) p);
                unsigned m = (unsigned) _mm_movemask_epi8(
                        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));

                if (m)
                        return p + __builtin_ctz(m);
        }
#endif
        for (; p < end; p++)
                if (*p == '"' || *p == '\\')
                        return p;
        return end;
}

/* Past the string that starts at s->p ('"'): a backslash escapes the byte after it, the first
 * unescaped quote ends it. Its content is not checked: a kept string is, by json-c, and a
 * dropped one is never read. */
static int skip_string(Scan *s) {
        const char *p = s->p + 1;

        for (;;) {
                p = find_quote_or_backslash(p, s->end);
                if (p >= s->end)
                        return -EBADMSG;
                if (*p == '"') {
                        s->p = p + 1;
                        return 0;
                }
                if (s->end - p < 2)
                        return -EBADMSG;
                p += 2;
        }
}

/* Past one value, whatever it holds: strings and bracket nesting are followed, the rest of the
 * grammar is left to nobody (the value is not kept). */
static int skip_value(Scan *s) {
        char stack[CN_JSON_MAX_DEPTH];
        unsigned depth = 0;
        const char *p, *end = s->end;
        int r;

        skip_ws(s);
        if (s->p >= end)
                return -EBADMSG;
        if (*s->p == '"')
                return skip_string(s);
        if (*s->p != '{' && *s->p != '[') {
                const char *start = s->p;

                while (s->p < end && literal_byte[(unsigned char) *s->p])
                        s->p++;
                return s->p == start ? -EBADMSG : 0;
        }
        for (p = s->p;;) {
                while (p < end && plain_byte[(unsigned char) *p])
                        p++;
                if (p >= end)
                        return -EBADMSG;
                switch (*p) {
                case '"':
                        s->p = p;
                        r = skip_string(s);
                        if (r < 0)
                                return r;
                        p = s->p;
                        break;
                case '{':
                case '[':
                        if (depth >= ELEMENTSOF(stack))
                                return -EBADMSG;
                        stack[depth++] = *p == '{' ? '}' : ']';
                        p++;
                        break;
                case '}':
                case ']':
                        if (depth == 0 || stack[depth - 1] != *p)
                                return -EBADMSG;
                        p++;
                        if (--depth == 0) {
                                s->p = p;
                                return 0;
                        }
                        break;
                default:
                        return -EBADMSG;
                }
        }
}

static bool key_is(const char *name, const char *key, size_t len) {
        /* Most names differ from the key in their first byte: no strlen() for those. */
        if (len > 0 && name[0] != key[0])
                return false;
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

/* The filtered text of data[0..size) into out (size + 1 bytes at least). */
static int filter_into(const char *data, size_t size, const CnJsonFilter *f, char *out, size_t *ret_size) {
        Scan s = { .p = data, .end = data + size, .out = out };
        int r;

        r = filter_value(&s, f, 0);
        if (r < 0)
                return r;
        skip_ws(&s);
        if (s.p != s.end)
                return -EBADMSG;
        out[s.n] = 0;
        *ret_size = s.n;
        return 0;
}

int cn_json_filter_text(const char *data, size_t size, const CnJsonFilter *f, char **ret, size_t *ret_size) {
        _cleanup_free_ char *out = NULL;
        size_t n;
        int r;

        assert(data || size == 0);
        assert(ret);
        out = malloc(size + 1);
        if (!out)
                return -ENOMEM;
        r = filter_into(data, size, f, out, &n);
        if (r < 0)
                return r;
        if (ret_size)
                *ret_size = n;
        *ret = TAKE_PTR(out);
        return 0;
}

size_t cn_json_value_scan(CnJsonValueScan *s, const char *data, size_t size, bool *ret_done) {
        const char *p = data, *end = data + size;

        while (p < end) {
                char c;

                if (s->in_string) {
                        if (s->escape) {
                                s->escape = false;
                                p++;
                                continue;
                        }
                        p = find_quote_or_backslash(p, end);
                        if (p >= end)
                                break;
                        if (*p++ == '\\') {
                                s->escape = true;
                                continue;
                        }
                        s->in_string = false;
                        if (s->depth == 0) {
                                *ret_done = true;
                                return p - data;
                        }
                        continue;
                }
                while (p < end && !structural_byte[(unsigned char) *p])
                        p++;
                if (p >= end)
                        break;
                c = *p++;
                if (c == '"')
                        s->in_string = true;
                else if (c == '{' || c == '[')
                        s->depth++;
                else if (s->depth > 0 && --s->depth == 0) {
                        *ret_done = true;
                        return p - data;
                }
        }
        *ret_done = false;
        return size;
}

/* The filtered text of a document parsed goes to one buffer per thread, kept between calls up to
 * SCRATCH_KEEP bytes: each document would otherwise cost an allocation of its whole size (for a
 * Node some 16 KB, for a result of a few hundred bytes) and the allocator's work on it. */
#define SCRATCH_KEEP ((size_t) 256 * 1024)
static _Thread_local char *scratch;
static _Thread_local size_t scratch_size;

int cn_json_parse_filtered(const char *data, size_t size, size_t max_size, const CnJsonFilter *f, json_object **ret,
                           char **ret_error) {
        size_t n;
        int r;

        if (!f)
                return cn_json_parse(data, size, max_size, ret, ret_error);
        if (size > max_size)
                return cn_json_parse(data, size, max_size, ret, ret_error); /* says why */
        assert(data || size == 0);
        if (scratch_size < size + 1) {
                char *p = realloc(scratch, size + 1);

                if (!p)
                        return -ENOMEM;
                scratch = p;
                scratch_size = size + 1;
        }
        r = filter_into(data, size, f, scratch, &n);
        if (r >= 0)
                r = cn_json_parse(scratch, n, max_size, ret, ret_error);
        else if (ret_error)
                (void) cn_set_message(ret_error, "malformed JSON document");
        if (scratch_size > SCRATCH_KEEP) {
                free(scratch);
                scratch = NULL;
                scratch_size = 0;
        }
        return r;
}
