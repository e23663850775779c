/* SPDX-License-Identifier: Apache-2.0 */
/* cn_json_parse(): strict JSON (RFC 8259) into json-c trees, without json-c's tokener.
 *
 * The documents read most are small: a Node through the informer's filter is under a kilobyte,
 * and nine of them are parsed per Node initialized. On those the tokener costs about twice the
 * tree it builds: it copies each key and string through its print buffer and then again into
 * the tree, duplicates the locale on every call, and lets NaN, Infinity and numbers beyond a
 * double's range through, which then takes a walk of the tree to reject. Here keys are interned
 * (a Node's keys are the same few dozen in every document), strings without escapes go from the
 * input into the tree in one copy, numbers are read in the C locale, and what JSON does not allow
 * is rejected where it is read.
 *
 * The trees are those of json-c's tokener in strict mode with UTF-8 validation, which
 * tests/unit/test-json-parse.c checks on random documents and their mutants: integers as int64
 * (saturated at its bounds; positive ones beyond it as uint64, as json-c does), other numbers as
 * doubles that keep their text for serialization, a lone UTF-16 surrogate escape as U+FFFD, the
 * last of duplicate keys winning, a key cut at an escaped NUL. What json-c's strict mode lets
 * through and JSON does not allow is rejected: single quotes, leading zeros ("00", "01"), a
 * decimal point without digits on both sides ("1.", "-.5"), raw control characters in strings,
 * and UTF-8 that is not well-formed (overlong forms, encoded surrogates, beyond U+10FFFF). */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "json-util.h"
#include "string-util.h"

typedef struct Parser {
        const char *start, *p, *end;
        const char *error; /* static text */
        char *buf;         /* unescaped strings */
        size_t buf_size;
} Parser;

/* ---- interned keys ---- */

/* Keys up to KEY_INTERN_MAX bytes are kept once for the process, at most KEYS_MAX of them (a
 * document's own keys, a tenant's labels for instance, cannot grow the table beyond some 40 KB;
 * once full, keys are copied into each object as json-c does). Slots are only ever filled, so a
 * lookup reads them without the lock. */
#define KEY_SLOTS 1024U
#define KEYS_MAX 512U
#define KEY_INTERN_MAX 48U

typedef struct InternedKey {
        uint32_t hash, size;
        char text[];
} InternedKey;

static InternedKey *key_slots[KEY_SLOTS];
static unsigned n_keys;
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t key_hash(const char *s, size_t n) {
        uint32_t h = 2166136261U; /* FNV-1a */

        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char) s[i];
                h *= 16777619U;
        }
        return h;
}

static bool key_is(const InternedKey *k, uint32_t hash, const char *s, size_t n) {
        return k->hash == hash && k->size == n && memcmp(k->text, s, n) == 0;
}

/* The interned copy of s[0..n), NUL-terminated, or NULL when it is not interned. */
static const char *key_intern(const char *s, size_t n) {
        const char *found = NULL;
        uint32_t hash;
        unsigned i;

        if (n > KEY_INTERN_MAX)
                return NULL;
        hash = key_hash(s, n);
        for (i = hash & (KEY_SLOTS - 1);; i = (i + 1) & (KEY_SLOTS - 1)) {
                InternedKey *k = __atomic_load_n(&key_slots[i], __ATOMIC_ACQUIRE);

                if (!k)
                        break;
                if (key_is(k, hash, s, n))
                        return k->text;
        }
        if (__atomic_load_n(&n_keys, __ATOMIC_RELAXED) >= KEYS_MAX)
                return NULL;

        pthread_mutex_lock(&keys_lock);
        for (i = hash & (KEY_SLOTS - 1);; i = (i + 1) & (KEY_SLOTS - 1)) {
                InternedKey *k = key_slots[i];

                if (k) {
                        if (key_is(k, hash, s, n)) {
                                found = k->text;
                                break;
                        }
                        continue;
                }
                if (n_keys >= KEYS_MAX)
                        break;
                k = malloc(sizeof(InternedKey) + n + 1);
                if (!k)
                        break;
                k->hash = hash;
                k->size = (uint32_t) n;
                memcpy(k->text, s, n);
                k->text[n] = 0;
                __atomic_store_n(&n_keys, n_keys + 1, __ATOMIC_RELAXED);
                __atomic_store_n(&key_slots[i], k, __ATOMIC_RELEASE);
                found = k->text;
                break;
        }
        pthread_mutex_unlock(&keys_lock);
        return found;
}

/* ---- scanning ---- */

static int fail(Parser *p, const char *what) {
        p->error = what;
        return -EBADMSG;
}

static inline bool is_ws(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline void skip_ws(Parser *p) {
        while (p->p < p->end && is_ws(*p->p))
                p->p++;
}

/* Bytes a string's scan stops at: its end, an escape, a control byte (not allowed) and the
 * first byte of a multi-byte UTF-8 sequence (validated). */
static inline bool string_special(unsigned char c) {
        return c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

static inline const char *find_string_special(const char *q, const char *end) {
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);

        for (; end - q >= 16; q += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *) (const void *) q);
                /* A signed compare: bytes from 0x80 are negative, so below 0x20 too. */
                __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                         _mm_cmplt_epi8(v, space));
                int bits = _mm_movemask_epi8(m);

                if (bits)
                        return q + __builtin_ctz((unsigned) bits);
        }
#endif
        while (q < end && !string_special((unsigned char) *q))
                q++;
        return q;
}

/* The length of the well-formed UTF-8 sequence at s (s[0] >= 0x80), 0 if it is not one:
 * no overlong forms, no encoded surrogates, nothing above U+10FFFF. */
static size_t utf8_sequence(const unsigned char *s, const unsigned char *end) {
        unsigned c = s[0];
        size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;

        if (n == 0 || (size_t) (end - s) < n)
                return 0;
        for (size_t i = 1; i < n; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) || (c == 0xf0 && s[1] < 0x90) ||
            (c == 0xf4 && s[1] >= 0x90))
                return 0;
        return n;
}

static int hex4(const char *s, unsigned *ret) {
        unsigned v = 0;

        for (int i = 0; i < 4; i++) {
                char c = s[i];

                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (unsigned) (c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (unsigned) (c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (unsigned) (c - 'A' + 10);
                else
                        return -EBADMSG;
        }
        *ret = v;
        return 0;
}

static size_t utf8_encode(unsigned c, char *out) {
        if (c < 0x80) {
                out[0] = (char) c;
                return 1;
        }
        if (c < 0x800) {
                out[0] = (char) (0xc0 | c >> 6);
                out[1] = (char) (0x80 | (c & 0x3f));
                return 2;
        }
        if (c < 0x10000) {
                out[0] = (char) (0xe0 | c >> 12);
                out[1] = (char) (0x80 | ((c >> 6) & 0x3f));
                out[2] = (char) (0x80 | (c & 0x3f));
                return 3;
        }
        out[0] = (char) (0xf0 | c >> 18);
        out[1] = (char) (0x80 | ((c >> 12) & 0x3f));
        out[2] = (char) (0x80 | ((c >> 6) & 0x3f));
        out[3] = (char) (0x80 | (c & 0x3f));
        return 4;
}

/* Appends to p->buf at *n; the buffer never outgrows the document (an unescaped string is
 * shorter than its text), so its size is bounded by the caller's max_size. */
static int buf_put(Parser *p, size_t *n, const char *s, size_t k) {
        if (*n + k + 1 > p->buf_size) {
                size_t size = p->buf_size ?: 256;
                char *b;

                while (size < *n + k + 1)
                        size *= 2;
                b = realloc(p->buf, size);
                if (!b)
                        return -ENOMEM;
                p->buf = b;
                p->buf_size = size;
        }
        memcpy(p->buf + *n, s, k);
        *n += k;
        return 0;
}

/* The escape at q ('\\'), decoded into out; the bytes it took in *ret_len. */
static int unescape(Parser *p, const char *q, char out[static 4], size_t *ret_out, size_t *ret_len) {
        unsigned c, low;

        if (p->end - q < 2)
                return fail(p, "unexpected end of data");
        switch (q[1]) {
        case '"': case '\\': case '/':
                out[0] = q[1];
                break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u':
                if (p->end - q < 6)
                        return fail(p, "unexpected end of data");
                if (hex4(q + 2, &c) < 0)
                        return fail(p, "invalid escape in a string");
                *ret_len = 6;
                if (c >= 0xd800 && c <= 0xdbff) {
                        /* A pair makes one code point; a lone half stands for U+FFFD. */
                        if (p->end - q >= 12 && q[6] == '\\' && q[7] == 'u' && hex4(q + 8, &low) == 0 &&
                            low >= 0xdc00 && low <= 0xdfff) {
                                c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
                                *ret_len = 12;
                        } else
                                c = 0xfffd;
                } else if (c >= 0xdc00 && c <= 0xdfff)
                        c = 0xfffd;
                *ret_out = utf8_encode(c, out);
                return 0;
        default:
                return fail(p, "invalid escape in a string");
        }
        *ret_out = 1;
        *ret_len = 2;
        return 0;
}

/* The string at p->p ('"'): its bytes in the input when it has no escape, else unescaped in
 * p->buf; NUL-terminated only in the latter case. */
static int parse_string(Parser *p, const char **ret, size_t *ret_size) {
        const char *s = ++p->p, *q = s;
        bool escaped = false;
        size_t n = 0;
        int r;

        for (;;) {
                unsigned char c;

                q = find_string_special(q, p->end);
                if (q >= p->end) {
                        p->p = q;
                        return fail(p, "unexpected end of data");
                }
                c = (unsigned char) *q;
                if (c == '"')
                        break;
                if (c >= 0x80) {
                        size_t k = utf8_sequence((const unsigned char *) q, (const unsigned char *) p->end);

                        if (k == 0) {
                                p->p = q;
                                return fail(p, "invalid UTF-8 in a string");
                        }
                        q += k;
                        continue;
                }
                if (c < 0x20) {
                        p->p = q;
                        return fail(p, "control character in a string");
                }

                char out[4];
                size_t out_size, len;

                r = unescape(p, q, out, &out_size, &len);
                if (r < 0) {
                        p->p = q;
                        return r;
                }
                if (!escaped) {
                        escaped = true;
                        n = 0;
                }
                r = buf_put(p, &n, s, (size_t) (q - s));
                if (r >= 0)
                        r = buf_put(p, &n, out, out_size);
                if (r < 0)
                        return r;
                q += len;
                s = q;
        }
        if (escaped) {
                r = buf_put(p, &n, s, (size_t) (q - s));
                if (r < 0)
                        return r;
                p->buf[n] = 0;
                *ret = p->buf;
                *ret_size = n;
        } else {
                *ret = s;
                *ret_size = (size_t) (q - s);
        }
        p->p = q + 1;
        return 0;
}

static locale_t c_locale(void) {
        static locale_t loc;
        locale_t l = __atomic_load_n(&loc, __ATOMIC_ACQUIRE), expected = (locale_t) 0;

        if (l)
                return l;
        l = newlocale(LC_NUMERIC_MASK, "C", (locale_t) 0);
        if (!l)
                return (locale_t) 0;
        if (!__atomic_compare_exchange_n(&loc, &expected, l, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                freelocale(l);
                return expected;
        }
        return l;
}

static const char *skip_digits(const char *q, const char *end) {
        while (q < end && *q >= '0' && *q <= '9')
                q++;
        return q;
}

static int parse_number(Parser *p, json_object **ret) {
        const char *s = p->p, *q = s, *digits;
        bool negative = false, integer = true;
        char small[64], *text;
        size_t n;

        if (*q == '-') {
                negative = true;
                q++;
        }
        if (q >= p->end)
                return fail(p, "unexpected end of data");
        if (*q == '0')
                q++;
        else if (*q >= '1' && *q <= '9')
                q = skip_digits(q, p->end);
        else
                return fail(p, "unexpected character");
        if (q < p->end && *q == '.') {
                integer = false;
                digits = ++q;
                q = skip_digits(q, p->end);
                if (q == digits) {
                        p->p = q;
                        return fail(p, q < p->end ? "unexpected character" : "unexpected end of data");
                }
        }
        if (q < p->end && (*q == 'e' || *q == 'E')) {
                integer = false;
                q++;
                if (q < p->end && (*q == '+' || *q == '-'))
                        q++;
                digits = q;
                q = skip_digits(q, p->end);
                if (q == digits) {
                        p->p = q;
                        return fail(p, q < p->end ? "unexpected character" : "unexpected end of data");
                }
        }
        n = (size_t) (q - s);

        if (integer && n - negative <= 18) {
                int64_t v = 0;

                for (const char *d = s + negative; d < q; d++)
                        v = v * 10 + (*d - '0');
                *ret = json_object_new_int64(negative ? -v : v);
                p->p = q;
                return *ret ? 0 : -ENOMEM;
        }

        text = n < sizeof(small) ? small : malloc(n + 1);
        if (!text)
                return -ENOMEM;
        memcpy(text, s, n);
        text[n] = 0;
        if (integer) {
                /* As json-c: saturated at the bounds of int64, or of uint64 for positive ones. */
                if (negative)
                        *ret = json_object_new_int64(strtoll(text, NULL, 10));
                else {
                        unsigned long long v = strtoull(text, NULL, 10);

                        *ret = v <= INT64_MAX ? json_object_new_int64((int64_t) v) : json_object_new_uint64(v);
                }
        } else {
                locale_t loc = c_locale();
                double d;

                if (!loc) {
                        if (text != small)
                                free(text);
                        return -ENOMEM;
                }
                d = strtod_l(text, NULL, loc);
                if (!isfinite(d)) {
                        if (text != small)
                                free(text);
                        return fail(p, "number out of range");
                }
                *ret = json_object_new_double_s(d, text);
        }
        if (text != small)
                free(text);
        p->p = q;
        return *ret ? 0 : -ENOMEM;
}

static int parse_literal(Parser *p, const char *word, size_t n) {
        size_t left = (size_t) (p->end - p->p);

        if (memcmp(p->p, word, MIN(left, n)) != 0)
                return fail(p, "unexpected character");
        if (left < n)
                return fail(p, "unexpected end of data");
        p->p += n;
        return 0;
}

static int parse_value(Parser *p, unsigned depth, json_object **ret);

static int expect_more(Parser *p) {
        skip_ws(p);
        return p->p < p->end ? 0 : fail(p, "unexpected end of data");
}

static int parse_member(Parser *p, json_object *o, unsigned depth) {
        _cleanup_free_ char *copy = NULL;
        _cleanup_json_ json_object *v = NULL;
        const char *k, *key;
        char small[KEY_INTERN_MAX + 1];
        unsigned flags = 0;
        size_t n;
        int r;

        if (*p->p != '"')
                return fail(p, "quoted object property name expected");
        r = parse_string(p, &k, &n);
        if (r < 0)
                return r;
        /* json-c's keys are C strings: one with an escaped NUL ends there. */
        n = strnlen(k, n);
        key = key_intern(k, n);
        if (key)
                flags = JSON_C_OBJECT_ADD_CONSTANT_KEY;
        else if (n < sizeof(small)) {
                memcpy(small, k, n);
                small[n] = 0;
                key = small;
        } else {
                copy = strndup(k, n);
                if (!copy)
                        return -ENOMEM;
                key = copy;
        }
        r = expect_more(p);
        if (r < 0)
                return r;
        if (*p->p != ':')
                return fail(p, "object property name separator ':' expected");
        p->p++;
        r = parse_value(p, depth + 1, &v);
        if (r < 0)
                return r;
        if (json_object_object_add_ex(o, key, v, flags) < 0)
                return -ENOMEM;
        TAKE_PTR(v);
        return 0;
}

static int parse_object(Parser *p, unsigned depth, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        p->p++;
        r = expect_more(p);
        if (r < 0)
                return r;
        if (*p->p != '}')
                for (;;) {
                        r = parse_member(p, o, depth);
                        if (r >= 0)
                                r = expect_more(p);
                        if (r < 0)
                                return r;
                        if (*p->p == '}')
                                break;
                        if (*p->p != ',')
                                return fail(p, "object value separator ',' expected");
                        p->p++;
                        r = expect_more(p);
                        if (r < 0)
                                return r;
                }
        p->p++;
        *ret = TAKE_PTR(o);
        return 0;
}

static int parse_array(Parser *p, unsigned depth, json_object **ret) {
        _cleanup_json_ json_object *a = json_object_new_array_ext(4);
        int r;

        if (!a)
                return -ENOMEM;
        p->p++;
        r = expect_more(p);
        if (r < 0)
                return r;
        if (*p->p != ']')
                for (;;) {
                        _cleanup_json_ json_object *v = NULL;

                        r = parse_value(p, depth + 1, &v);
                        if (r < 0)
                                return r;
                        if (json_object_array_add(a, v) < 0)
                                return -ENOMEM;
                        TAKE_PTR(v);
                        r = expect_more(p);
                        if (r < 0)
                                return r;
                        if (*p->p == ']')
                                break;
                        if (*p->p != ',')
                                return fail(p, "array value separator ',' expected");
                        p->p++;
                }
        p->p++;
        *ret = TAKE_PTR(a);
        return 0;
}

/* depth: the containers around this value; as json-c's tokener with CN_JSON_MAX_DEPTH, a
 * document may nest that many. */
static int parse_value(Parser *p, unsigned depth, json_object **ret) {
        const char *s;
        size_t n;
        int r;

        *ret = NULL;
        r = expect_more(p);
        if (r < 0)
                return r;
        switch (*p->p) {
        case '{':
        case '[':
                if (depth >= CN_JSON_MAX_DEPTH)
                        return fail(p, "nesting too deep");
                return *p->p == '{' ? parse_object(p, depth, ret) : parse_array(p, depth, ret);
        case '"':
                r = parse_string(p, &s, &n);
                if (r < 0)
                        return r;
                *ret = json_object_new_string_len(s, (int) n);
                return *ret ? 0 : -ENOMEM;
        case 't':
        case 'f': {
                bool b = *p->p == 't';

                r = b ? parse_literal(p, "true", 4) : parse_literal(p, "false", 5);
                if (r < 0)
                        return r;
                *ret = json_object_new_boolean(b);
                return *ret ? 0 : -ENOMEM;
        }
        case 'n':
                return parse_literal(p, "null", 4);
        case '-':
        case '0' ... '9':
                return parse_number(p, ret);
        default:
                return fail(p, "unexpected character");
        }
}

int cn_json_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error) {
        _cleanup_json_ json_object *o = NULL;
        Parser p = { .start = data, .p = data, .end = data + size };
        int r;

        assert(data || size == 0);
        assert(ret);

        if (size > max_size || size > INT32_MAX) {
                if (ret_error)
                        (void) cn_set_message(ret_error, "document of %zu bytes exceeds the limit of %zu bytes", size,
                                              max_size);
                return -EFBIG;
        }
        r = parse_value(&p, 0, &o);
        if (r >= 0) {
                skip_ws(&p);
                if (p.p < p.end)
                        r = fail(&p, "trailing data");
        }
        free(p.buf);
        if (r == -EBADMSG && ret_error)
                (void) cn_set_message(ret_error, "%s at offset %zu", p.error, (size_t) (p.p - p.start));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}
