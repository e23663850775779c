/* SPDX-License-Identifier: Apache-2.0 */
/* cn_json_parse() builds the trees json-c's tokener builds (strict mode, UTF-8 validated, NaN and
 * Infinity rejected, as cn_json_parse() did with it): compared on random documents, on random
 * mutants of them, and on the cases where the two are meant to differ (RFC 8259 and RFC 3629 are
 * stricter than json-c's strict mode). */
#include "json-reference.h"
#include "json-util.h"
#include "tap.h"

/* ---- random documents ---- */

static uint64_t rnd_state = 88172645463325252ULL;

static unsigned rnd(void) {
        rnd_state ^= rnd_state << 13;
        rnd_state ^= rnd_state >> 7;
        rnd_state ^= rnd_state << 17;
        return (unsigned) rnd_state;
}

typedef struct Doc {
        char text[64 * 1024];
        size_t n;
} Doc;

static void put(Doc *d, const char *s) {
        size_t k = strlen(s);

        if (d->n + k < sizeof(d->text)) {
                memcpy(d->text + d->n, s, k);
                d->n += k;
        }
        d->text[d->n] = 0;
}

static const char *const string_parts[] = {
        "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc01", "\xc3\xa9", "\xf0\x9f\x98\x80",
        "\\n\\t\\/\\b\\f\\r", "\\u0000", "\xe2\x82\xac", "\x7f", "0123456789abcdef0123456789abcdef",
};

static void gen_string(Doc *d) {
        unsigned n = rnd() % 8;

        put(d, "\"");
        for (unsigned i = 0; i < n; i++) {
                unsigned k = rnd() % 20;

                if (k < ELEMENTSOF(string_parts))
                        put(d, string_parts[k]);
                else {
                        char c[2] = { (char) ('a' + rnd() % 26), 0 };
                        put(d, c);
                }
        }
        put(d, "\"");
}

static const char *const keys[] = {
        "metadata", "name", "uid", "labels", "a", "b", "type", "address", "x\\u0041y", "k\\n", "\\u00e9t\\u00e9",
        "status", "", "a\\u0000b", "topology.kubernetes.io/zone-with-a-rather-long-name-beyond-interning",
};

static const char *const numbers[] = {
        "0", "-0", "1", "-1", "123456789012345678", "1234567890123456789", "9223372036854775807",
        "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
        "18446744073709551616", "99999999999999999999", "1.5", "1.50", "-0.0", "1e3", "1E-3", "2.5e+10",
        "1e308", "123.456e-7", "1e-400", "0.1000000000000000055511151231257827",
};

static void gen_value(Doc *d, unsigned depth) {
        char b[32];

        switch (rnd() % (depth > 6 ? 6 : 9)) {
        case 0:
                gen_string(d);
                break;
        case 1:
                put(d, numbers[rnd() % ELEMENTSOF(numbers)]);
                break;
        case 2:
                put(d, "true");
                break;
        case 3:
                put(d, "false");
                break;
        case 4:
                put(d, "null");
                break;
        case 5:
                (void) snprintf(b, sizeof(b), "%d", (int) rnd());
                put(d, b);
                break;
        case 6:
        case 7: {
                unsigned n = rnd() % 5;

                put(d, rnd() % 2 ? "{" : " {\n\t");
                for (unsigned i = 0; i < n; i++) {
                        if (i > 0)
                                put(d, rnd() % 3 ? "," : " ,\r\n ");
                        put(d, "\"");
                        put(d, keys[rnd() % ELEMENTSOF(keys)]);
                        put(d, rnd() % 2 ? "\":" : "\" : ");
                        gen_value(d, depth + 1);
                }
                put(d, rnd() % 2 ? "}" : " } ");
                break;
        }
        default: {
                unsigned n = rnd() % 5;

                put(d, "[");
                for (unsigned i = 0; i < n; i++) {
                        if (i > 0)
                                put(d, ",");
                        gen_value(d, depth + 1);
                }
                put(d, "]");
        }
        }
}

static int parse_n(const char *s, size_t n, json_object **ret, char **ret_error) {
        return cn_json_parse(s, n, CN_JSON_MAX_SIZE, ret, ret_error);
}

/* Documents both must accept with the same tree. */
static void check_random_documents(unsigned count) {
        static Doc d;
        unsigned equal = 0, first_bad = 0;

        for (unsigned i = 0; i < count; i++) {
                _cleanup_json_ json_object *ours = NULL, *ref = NULL;
                _cleanup_free_ char *err = NULL;
                bool ok;
                int r;

                d.n = 0;
                gen_value(&d, 0);
                r = parse_n(d.text, d.n, &ours, &err);
                ref = json_reference_parse(d.text, d.n, &ok);
                if (r == 0 && ok && json_reference_same(ours, ref))
                        equal++;
                else if (!first_bad) {
                        first_bad = i + 1;
                        printf("# document %u: ours %d (%s), json-c %s: %s\n", i, r, strna(err),
                               ok ? "accepts" : "rejects", d.text);
                }
        }
        TAP_EQ_INT(equal, count, "random documents: the same trees as json-c's tokener");
}

/* One byte of a random document changed, or the document cut: what we accept, json-c accepts
 * with the same tree; what json-c accepts, we accept unless it is one of the forms JSON does not
 * allow (checked separately below). */
static const char mutant_bytes[] = "{}[]\",:\\ 0-.eE+\x01\xff\xc3u\t";

static void check_mutants(unsigned count) {
        static Doc d;
        unsigned accepted = 0, rejected = 0, bad = 0;

        for (unsigned i = 0; i < count; i++) {
                _cleanup_json_ json_object *ours = NULL, *ref = NULL;
                _cleanup_free_ char *err = NULL;
                size_t at;
                bool ok;
                int r;

                d.n = 0;
                gen_value(&d, 0);
                if (d.n == 0)
                        continue;
                at = rnd() % d.n;
                d.text[at] = mutant_bytes[rnd() % (sizeof(mutant_bytes) - 1)];
                if (rnd() % 4 == 0)
                        d.n = at;
                r = parse_n(d.text, d.n, &ours, &err);
                ref = json_reference_parse(d.text, d.n, &ok);
                if (r == 0) {
                        accepted++;
                        if (!ok || !json_reference_same(ours, ref)) {
                                if (!bad++)
                                        printf("# mutant %u accepted, json-c %s: %.*s\n", i,
                                               ok ? "differs" : "rejects", (int) d.n, d.text);
                        }
                } else {
                        rejected++;
                        if (r != -EBADMSG || !err || ours) {
                                if (!bad++)
                                        printf("# mutant %u: %d without a message\n", i, r);
                        }
                }
        }
        TAP_OK(bad == 0 && accepted > 0 && rejected > 0,
               "mutants: %u accepted as json-c builds them, %u rejected with a message", accepted, rejected);
}

static void check_accepted(const char *s, const char *what) {
        _cleanup_json_ json_object *ours = NULL, *ref = NULL;
        _cleanup_free_ char *err = NULL;
        bool ok;
        int r = parse_n(s, strlen(s), &ours, &err);

        ref = json_reference_parse(s, strlen(s), &ok);
        TAP_OK(r == 0 && ok && json_reference_same(ours, ref), "%s: accepted as json-c builds it (%s)", what, strna(err));
}

static void check_rejected(const char *s, size_t n, const char *what) {
        _cleanup_json_ json_object *ours = NULL;
        _cleanup_free_ char *err = NULL;
        int r = parse_n(s, n, &ours, &err);

        TAP_OK(r == -EBADMSG && !ours && err && strstr(err, " at offset "), "%s: rejected (%s)", what,
               strna(err));
}

#define REJECTED(s, what) check_rejected(s, sizeof(s) - 1, what)

static void check_nesting(void) {
        char b[2 * (CN_JSON_MAX_DEPTH + 1) + 1];

        for (unsigned n = CN_JSON_MAX_DEPTH; n <= CN_JSON_MAX_DEPTH + 1; n++) {
                _cleanup_json_ json_object *o = NULL;
                bool ok;

                memset(b, '[', n);
                memset(b + n, ']', n);
                b[2 * n] = 0;
                json_object_put(json_reference_parse(b, 2 * n, &ok));
                if (n == CN_JSON_MAX_DEPTH)
                        TAP_OK(parse_n(b, 2 * n, &o, NULL) == 0 && ok, "%u nested arrays accepted, as by json-c", n);
                else
                        TAP_OK(parse_n(b, 2 * n, &o, NULL) == -EBADMSG && !ok,
                               "%u nested arrays rejected, as by json-c", n);
        }
}

/* More distinct keys than are interned, long and short, each read back with its value. */
#define LONG_KEY "a-key-too-long-to-be-interned-in-the-table-of-keys"

static void check_many_keys(void) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        unsigned found = 0;

        assert(f);
        fputc('{', f);
        for (unsigned i = 0; i < 3000; i++)
                fprintf(f, "%s\"key-%u-%s\":%u", i ? "," : "", i, i % 3 ? "x" : LONG_KEY, i);
        fputc('}', f);
        fclose(f);
        for (unsigned round = 0; round < 2; round++) {
                _cleanup_json_ json_object *o = NULL;

                if (parse_n(text, size, &o, NULL) < 0)
                        continue;
                for (unsigned i = 0; i < 3000; i++) {
                        char k[96];
                        int64_t v = -1;

                        (void) snprintf(k, sizeof(k), "key-%u-%s", i, i % 3 ? "x" : LONG_KEY);
                        if (cn_json_get_int64(o, &v, k, NULL) == 0 && v == i)
                                found++;
                }
        }
        TAP_EQ_INT(found, 2 * 3000, "3000 distinct keys, twice: each found with its value");
}

static void check_messages(void) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;

        TAP_OK(parse_n("{\"a\":[1,", 8, &o, &e1) == -EBADMSG && streq(strna(e1), "unexpected end of data at offset 8"),
               "a cut document: where it ends (%s)", strna(e1));
        TAP_OK(parse_n("{} x", 4, &o, &e2) == -EBADMSG && streq(strna(e2), "trailing data at offset 3"),
               "trailing data: where it starts (%s)", strna(e2));
        TAP_OK(parse_n("{\"a\":1}", 7, &o, &e3) == 0 && !e3, "a whole document leaves no message");
}

/* A string with escapes is rebuilt beside the input: longer than any first buffer, and many
 * of them in one document. */
static void check_long_escaped_strings(void) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *text = NULL, *expect = NULL;
        size_t size = 0, at = 0;
        FILE *f = open_memstream(&text, &size);
        const char *v;

        assert(f);
        expect = malloc(5000 + 1);
        assert(expect);
        fputs("[\"", f);
        for (unsigned i = 0; i < 1000; i++) {
                fputs("ab\\\"\\u00e9", f);
                memcpy(expect + at, "ab\"\xc3\xa9", 5);
                at += 5;
        }
        expect[at] = 0;
        fputs("\",\"x\\ty\",\"plain\"]", f);
        fclose(f);
        TAP_OK(parse_n(text, size, &o, NULL) == 0 && (v = json_object_get_string(json_object_array_get_idx(o, 0))) &&
                       streq(v, expect) && json_object_get_string_len(json_object_array_get_idx(o, 0)) == 5000 &&
                       streq(json_object_get_string(json_object_array_get_idx(o, 1)), "x\ty") &&
                       streq(json_object_get_string(json_object_array_get_idx(o, 2)), "plain"),
               "long escaped strings rebuilt whole, the next ones too");
}

int main(void) {
        check_random_documents(20000);
        check_mutants(20000);

        check_accepted("{\"a\":1,\"a\":2,\"b\":{\"a\":3}}", "duplicate keys: the last wins");
        check_accepted("{\"a\\u0000b\":1}", "a key with an escaped NUL is cut there");
        check_accepted("[\"\\ud800\\u0041\",\"\\udc00\",\"\\ud83d\\ude00\"]", "lone surrogates as U+FFFD, a pair joined");
        check_accepted("[9223372036854775807,9223372036854775808,18446744073709551616,-9223372036854775809]",
                       "integers beyond int64: as json-c saturates them");
        check_accepted("[1e-400,-0,-0.0,0.0e0,1.50,1E+2]", "doubles keep their text");
        check_accepted(" \t\r\n{ } \n", "whitespace around a value");
        check_accepted("\"\x7f\xef\xbf\xbf\xf4\x8f\xbf\xbf\"", "DEL, U+FFFF and U+10FFFF in a string");

        /* What JSON does not allow; json-c's strict mode lets the first ones through. */
        REJECTED("\"a\tb\"", "a raw tab in a string");
        REJECTED("{\"a\":\"line\nline\"}", "a raw newline in a string");
        REJECTED("00", "two zeros");
        REJECTED("[08e002]", "a leading zero before an exponent");
        REJECTED("-.1", "a point without digits before it");
        REJECTED("[51.e3]", "a point without digits after it, then an exponent");
        REJECTED("\"\xc0\x80\"", "an overlong UTF-8 sequence");
        REJECTED("\"\xe0\x80\x80\"", "an overlong three-byte sequence");
        REJECTED("\"\xed\xa0\x80\"", "a surrogate encoded in UTF-8");
        REJECTED("\"\xf4\x90\x80\x80\"", "a code point above U+10FFFF");
        REJECTED("\"\xf5\x80\x80\x80\"", "a byte that is never UTF-8");
        REJECTED("{'a':1}", "a single-quoted key");
        REJECTED("1.", "a number ending in its point");
        REJECTED("[1.e5]", "a point without digits");
        REJECTED("NaN", "NaN");
        REJECTED("[Infinity]", "Infinity");
        REJECTED("[-1e400]", "a number beyond a double's range");
        REJECTED("\"\x80\"", "a stray continuation byte");
        REJECTED("\"\xe2\x82\"", "a cut UTF-8 sequence");
        REJECTED("\"a\x01\"", "a control byte in a string");
        REJECTED("\"a\0b\"", "a NUL byte in a string");
        REJECTED("{}\0", "a NUL byte after the value");
        REJECTED("\"\\x41\"", "an unknown escape");
        REJECTED("\"\\u00g1\"", "a \\u escape with a non-hex digit");
        REJECTED("[1,]", "a trailing comma");
        REJECTED("{\"a\":1,}", "a trailing comma in an object");
        REJECTED("01", "a leading zero");
        REJECTED("+1", "a plus sign");
        REJECTED(".5", "a leading point");
        REJECTED("[-]", "a minus alone");
        REJECTED("[true false]", "a missing comma");
        REJECTED("{\"a\" 1}", "a missing colon");
        REJECTED("{1:2}", "a key that is not a string");
        REJECTED("tru", "a cut literal");
        REJECTED("nul!", "a wrong literal");
        REJECTED("", "nothing");
        REJECTED("  ", "whitespace only");
        REJECTED("\"abc", "an unterminated string");
        REJECTED("\"\\ud83d\\ude0", "a cut surrogate pair");

        check_nesting();
        check_many_keys();
        check_messages();
        check_long_escaped_strings();
        return tap_done();
}
