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
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_SCAN 1
#include <immintrin.h>
#else
#define HAVE_AVX2_SCAN 0
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

/* Past the object or array that starts at s->p, a byte at a time between strings. */
static int skip_container_portable(Scan *s) {
        char stack[CN_JSON_MAX_DEPTH];
        unsigned depth = 0;
        const char *p, *end = s->end;
        int r;

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

static bool portable_only;

void cn_json_filter_set_portable(bool on) {
        portable_only = on;
}

#if HAVE_AVX2_SCAN
/* Whether the scans of 64-byte blocks run. */
static bool use_avx2(void) {
        return !portable_only && __builtin_cpu_supports("avx2");
}

/* The same scan 64 bytes at a time, as simdjson finds structure: each block gives bit masks of
 * its quotes, backslashes, brackets and the bytes that may not stand between strings (vpshufb
 * looks each byte's two nibbles up in tables whose AND is zero for those). Escapes are resolved
 * from the backslashes, the bytes inside strings are the prefix XOR of the quotes left, and only
 * the brackets outside strings are visited one by one, for the nesting and its kinds. What it
 * accepts and where it ends are those of skip_container_portable(), byte for byte. */
typedef struct Masks {
        uint64_t quote, backslash, open, close, invalid;
} Masks;

__attribute__((target("avx2"))) static inline Masks masks_of(const char *p) {
        /* By high nibble, a bit for each set of low nibbles allowed with it: 0x0: \t \n \r;
         * 0x2: space " + , - .; 0x3: digits and ':'; 0x4 and 0x6: letters from 1; 0x5 and 0x7:
         * letters to 0xA, '[' ']' or '{' '}'. The bytes from 0x80 have no bit. */
        const __m256i hi_table = _mm256_setr_epi8(0x01, 0, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, 0, 0, 0, 0, 0, 0, 0, 0,
                                                  0x01, 0, 0x02, 0x04, 0x08, 0x10, 0x08, 0x10, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m256i lo_table = _mm256_setr_epi8(0x16, 0x1C, 0x1E, 0x1C, 0x1C, 0x1C, 0x1C, 0x1C, 0x1C, 0x1D, 0x1D, 0x1A,
                                                  0x0A, 0x1B, 0x0A, 0x08, 0x16, 0x1C, 0x1E, 0x1C, 0x1C, 0x1C, 0x1C, 0x1C,
                                                  0x1C, 0x1D, 0x1D, 0x1A, 0x0A, 0x1B, 0x0A, 0x08);
        const __m256i nibble = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
        Masks m = {};

        for (unsigned half = 0; half < 2; half++) {
                __m256i v = _mm256_loadu_si256((const __m256i *) (const void *) (p + 32 * half));
                /* '[' and '{' both become '{' with the 0x20 bit set, ']' and '}' both '}'. */
                __m256i folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
                __m256i cls = _mm256_and_si256(
                        _mm256_shuffle_epi8(hi_table, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)),
                        _mm256_shuffle_epi8(lo_table, _mm256_and_si256(v, nibble)));
                unsigned shift = 32 * half;

                m.quote |= (uint64_t) (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('"')))
                           << shift;
                m.backslash |= (uint64_t) (uint32_t) _mm256_movemask_epi8(
                                       _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')))
                               << shift;
                m.open |= (uint64_t) (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(folded, _mm256_set1_epi8('{')))
                          << shift;
                m.close |= (uint64_t) (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(folded, _mm256_set1_epi8('}')))
                           << shift;
                m.invalid |= (uint64_t) (uint32_t) _mm256_movemask_epi8(_mm256_cmpeq_epi8(cls, zero)) << shift;
        }
        return m;
}

/* The 64 bytes at p, or the left (< 64) last ones padded with spaces in tail: nothing in the
 * padding is a quote, backslash or bracket, so it opens, ends and escapes nothing. */
static inline const char *block_at(const char *p, size_t left, char tail[static 64]) {
        if (left >= 64)
                return p;
        memset(tail, ' ', 64);
        memcpy(tail, p, left);
        return tail;
}

static inline uint64_t prefix_xor(uint64_t x) {
        x ^= x << 1;
        x ^= x << 2;
        x ^= x << 4;
        x ^= x << 8;
        x ^= x << 16;
        x ^= x << 32;
        return x;
}

__attribute__((target("avx2"))) static int skip_container_avx2(Scan *s) {
        char stack[CN_JSON_MAX_DEPTH], tail[64];
        unsigned depth = 0;
        uint64_t in_string = 0; /* all ones when the block before ended inside a string */
        bool escape_first = false; /* a backslash ended the block before: the next byte is escaped */

        for (const char *p = s->p;; p += 64) {
                size_t left = (size_t) (s->end - p);
                const char *b;
                uint64_t escaped = 0, str, brackets;
                Masks m;

                if (left == 0)
                        return -EBADMSG;
                b = block_at(p, left, tail);
                m = masks_of(b);
                if (m.backslash || escape_first) {
                        uint64_t bs = m.backslash;

                        if (escape_first) {
                                escaped = 1;
                                bs &= ~UINT64_C(1);
                        }
                        escape_first = false;
                        /* Each backslash not escaped itself escapes the byte after it. */
                        while (bs) {
                                unsigned i = (unsigned) __builtin_ctzll(bs);

                                if (i == 63) {
                                        escape_first = true;
                                        break;
                                }
                                escaped |= UINT64_C(2) << i;
                                bs &= ~(UINT64_C(3) << i);
                        }
                        m.quote &= ~escaped;
                }
                /* Inside a string: from its opening quote up to the byte before its closing one. */
                str = prefix_xor(m.quote) ^ in_string;
                in_string = (uint64_t) ((int64_t) str >> 63);
                brackets = (m.open | m.close) & ~str;
                m.invalid &= ~str;
                for (; brackets; brackets &= brackets - 1) {
                        unsigned i = (unsigned) __builtin_ctzll(brackets);
                        char c = b[i];

                        if (c == '{' || c == '[') {
                                if (depth >= ELEMENTSOF(stack))
                                        return -EBADMSG;
                                stack[depth++] = c == '{' ? '}' : ']';
                                continue;
                        }
                        if (depth == 0 || stack[depth - 1] != c)
                                return -EBADMSG;
                        if (--depth == 0) {
                                /* A byte not allowed between strings before the end is an error;
                                 * after it, the caller's. */
                                if (m.invalid & ((UINT64_C(2) << i) - 1))
                                        return -EBADMSG;
                                s->p = p + i + 1;
                                return 0;
                        }
                }
                if (m.invalid || left <= 64)
                        return -EBADMSG;
        }
}
#endif

/* Past one value, whatever it holds: strings and bracket nesting are followed, the rest of the
 * grammar is left to nobody (the value is not kept). */
static int skip_value(Scan *s) {
        const char *end = s->end;

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
#if HAVE_AVX2_SCAN
        if (use_avx2())
                return skip_container_avx2(s);
#endif
        return skip_container_portable(s);
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

static size_t value_scan_portable(CnJsonValueScan *s, const char *data, size_t size, bool *ret_done) {
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

#if HAVE_AVX2_SCAN
/* value_scan_portable() 64 bytes at a time with the masks of skip_container_avx2(). A block with
 * a backslash in it (or after one) goes byte by byte: a backslash escapes only inside a string,
 * which the masks cannot tell before the escapes are known. A block in which the closing brackets
 * are fewer than the depth cannot end the value and is only counted. */
__attribute__((target("avx2"))) static size_t value_scan_avx2(CnJsonValueScan *s, const char *data, size_t size,
                                                              bool *ret_done) {
        char tail[64];

        for (size_t at = 0; at < size; at += 64) {
                size_t n = MIN(size - at, (size_t) 64);
                uint64_t str, open, close, ends;
                Masks m = masks_of(block_at(data + at, n, tail));

                if (m.backslash || s->escape) {
                        size_t used = value_scan_portable(s, data + at, n, ret_done);

                        if (*ret_done)
                                return at + used;
                        continue;
                }
                str = prefix_xor(m.quote) ^ (s->in_string ? UINT64_MAX : 0);
                open = m.open & ~str;
                close = m.close & ~str;
                s->in_string = str >> 63; /* the padding has no quote: as after the last byte */
                if (s->depth > (unsigned) __builtin_popcountll(close)) {
                        s->depth += (unsigned) __builtin_popcountll(open);
                        s->depth -= (unsigned) __builtin_popcountll(close);
                        continue;
                }
                /* The closing quotes end a string value at depth 0. */
                ends = m.quote & ~str;
                for (uint64_t ev = open | close | ends; ev; ev &= ev - 1) {
                        unsigned i = (unsigned) __builtin_ctzll(ev);
                        uint64_t bit = UINT64_C(1) << i;

                        if (open & bit)
                                s->depth++;
                        else if (close & bit ? s->depth > 0 && --s->depth == 0 : s->depth == 0) {
                                s->in_string = false;
                                *ret_done = true;
                                return at + i + 1;
                        }
                }
        }
        *ret_done = false;
        return size;
}
#endif

size_t cn_json_value_scan(CnJsonValueScan *s, const char *data, size_t size, bool *ret_done) {
#if HAVE_AVX2_SCAN
        if (use_avx2())
                return value_scan_avx2(s, data, size, ret_done);
#endif
        return value_scan_portable(s, data, size, ret_done);
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
