/* SPDX-License-Identifier: Apache-2.0 */
/* Filtered parsing: members kept, dropped, narrowed; arrays filtered element by element; "*" and
 * included filters; structure (brackets, strings) checked in dropped parts too. */
#include "buf.h"
#include "json-filter.h"
#include "json-util.h"
#include "tap.h"

static const CnJsonFilter cond_members[] = { { "type" }, { "status" }, {} };
static const CnJsonFilter annotations[] = { { "alpha.kubernetes.io/provided-node-ip" }, {} };
static const CnJsonFilter metadata[] = { { "name" }, { "resourceVersion" }, { "labels" },
                                         { "annotations", annotations }, {} };
static const CnJsonFilter status[] = { { "addresses" }, { "conditions", cond_members }, {} };
static const CnJsonFilter node[] = { { "metadata", metadata }, { "spec" }, { "status", status }, {} };

static const CnJsonFilter no_managed_md[] = { { "managedFields", .drop = true }, { CN_JSON_FILTER_ANY }, {} };
static const CnJsonFilter no_managed[] = { { "metadata", no_managed_md }, { CN_JSON_FILTER_ANY }, {} };

static const char *const wanted_types[] = { "Ready", "Mine", NULL };
static const CnJsonFilter selected_status[] = {
        { "conditions", cond_members, .select_key = "type", .select_values = wanted_types }, {}
};
static const CnJsonFilter selected[] = { { "status", selected_status }, {} };

static const CnJsonFilter extra[] = { { "code" }, { "reason" }, {} };
static const CnJsonFilter with_extra[] = { CN_JSON_FILTER_INCLUDE(node), { "code" }, { "reason" }, {} };

static char *filtered(const char *in, const CnJsonFilter *f) {
        char *out = NULL;
        size_t n = 0;
        int r = cn_json_filter_text(in, strlen(in), f, &out, &n);

        if (r < 0)
                return NULL;
        return n == strlen(out) ? out : NULL;
}

static void check(const char *in, const CnJsonFilter *f, const char *want, const char *what) {
        _cleanup_free_ char *out = filtered(in, f);

        TAP_EQ_STR(out, want, what);
}

static void check_bad(const char *in, const char *what) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *err = NULL;
        int r = cn_json_parse_filtered(in, strlen(in), CN_JSON_MAX_SIZE, node, &o, &err);

        TAP_OK(r == -EBADMSG && !o && err, "%s rejected (%s)", what, strna(err));
}

/* A string value of n bytes (letters, brackets, separators) whose byte at position esc (if
 * esc < n) is an escape: \\, \" or \u0041 in turn, so quotes and backslashes fall on each position
 * of a 16-byte block. */
static char *string_with_escape(size_t n, size_t esc) {
        static const char *const escapes[] = { "\\\\", "\\\"", "\\u0041" };
        /* Brackets and separators inside strings are text, not structure. */
        static const char alphabet[] = "ab{cd}ef[gh]ij:k,lmnopqrstuvwxyz";
        char *out = malloc(n * 6 + 3), *p = out;

        if (!out)
                return NULL;
        *p++ = '"';
        for (size_t i = 0; i < n; i++)
                if (i == esc)
                        p = stpcpy(p, escapes[i % ELEMENTSOF(escapes)]);
                else
                        *p++ = alphabet[i % (sizeof(alphabet) - 1)];
        *p++ = '"';
        *p = 0;
        return out;
}

/* Strings of 0 to 140 bytes with an escape at each position (or none), dropped and kept, so that
 * escapes fall on each edge of the 16- and 64-byte blocks the scans read: the kept one comes out
 * as it went in, and the boundary scan, fed in chunks of 1 to 4096 bytes, ends at the
 * document's last byte and not before. */
static void check_strings(void) {
        size_t bad = 0, bad_scan = 0, total = 0;

        for (size_t n = 0; n <= 140; n++)
                for (size_t esc = 0; esc <= n; esc++) {
                        _cleanup_free_ char *str = string_with_escape(n, esc), *doc = NULL, *want = NULL,
                                            *out = NULL;
                        static const size_t chunks[] = { 1, 7, 16, 17, 64, 100, 4096 };

                        if (!str || asprintf(&doc, "{\"skip\":[%s,{%s:[[%s],{}]}],\"metadata\":{\"name\":%s}}", str,
                                             str, str, str) < 0 ||
                            asprintf(&want, "{\"metadata\":{\"name\":%s}}", str) < 0) {
                                bad++;
                                continue;
                        }
                        total++;
                        out = filtered(doc, node);
                        if (!out || !streq(out, want))
                                bad++;
                        for (size_t c = 0; c < ELEMENTSOF(chunks); c++) {
                                CnJsonValueScan scan = {};
                                size_t len = strlen(doc), at = 0, used = 0;
                                bool done = false;

                                while (!done && at < len) {
                                        size_t k = MIN(chunks[c], len - at);

                                        used = cn_json_value_scan(&scan, doc + at, k, &done);
                                        at += done ? used : k;
                                }
                                if (!done || at != len)
                                        bad_scan++;
                        }
                }
        TAP_OK(total > 10000 && bad == 0,
               "strings of 0 to 140 bytes with an escape anywhere: %zu documents, %zu wrong", total, bad);
        TAP_EQ_INT(bad_scan, 0, "the boundary scan ends each of them at its last byte, in chunks of 1, 7, 16, 17, 64, 100, 4096");
}

/* The scans byte by byte, as the grammar says, to hold the filter's scans to: strings (a
 * backslash escapes the byte after it), brackets, and for the skip of a dropped value the bytes
 * allowed between them. */
static bool ref_plain(char c) {
        return (c && strchr(" \t\n\r,:+-.", c)) || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
               (c >= 'a' && c <= 'z');
}

/* Where the object or array at text[0] ends (one past its last byte), or 0 when skip_value() must
 * reject it: unterminated, brackets mismatched, a stray byte outside strings, deeper than the cap. */
static size_t ref_skip(const char *text, size_t n) {
        char stack[CN_JSON_MAX_DEPTH];
        size_t depth = 0;

        for (size_t i = 0; i < n; i++) {
                char c = text[i];

                if (c == '"') {
                        for (i++; i < n && text[i] != '"'; i++)
                                if (text[i] == '\\')
                                        i++;
                        if (i >= n)
                                return 0;
                } else if (c == '{' || c == '[') {
                        if (depth >= ELEMENTSOF(stack))
                                return 0;
                        stack[depth++] = c == '{' ? '}' : ']';
                } else if (c == '}' || c == ']') {
                        if (depth == 0 || stack[depth - 1] != c)
                                return 0;
                        if (--depth == 0)
                                return i + 1;
                } else if (!ref_plain(c))
                        return 0;
        }
        return 0;
}

/* Where the value at text[0] ends for cn_json_value_scan(), or 0 when it does not end in text. */
static size_t ref_scan(const char *text, size_t n) {
        size_t depth = 0;
        bool in_string = false;

        for (size_t i = 0; i < n; i++) {
                char c = text[i];

                if (in_string) {
                        if (c == '\\')
                                i++;
                        else if (c == '"') {
                                in_string = false;
                                if (depth == 0)
                                        return i + 1;
                        }
                } else if (c == '"')
                        in_string = true;
                else if (c == '{' || c == '[')
                        depth++;
                else if ((c == '}' || c == ']') && depth > 0 && --depth == 0)
                        return i + 1;
        }
        return 0;
}

/* Each byte value at each offset of three 64-byte blocks in a dropped array, between strings and
 * inside one: the filter accepts and ends it where the byte-by-byte scan does. */
static void check_bytes(void) {
        static const char prefix[] = "{\"skip\":[", suffix[] = ",0],\"metadata\":{\"name\":\"x\"}}";
        size_t wrong = 0, total = 0, rejected = 0;

        for (unsigned c = 0; c < 256; c++)
                for (size_t at = 0; at < 192; at++)
                        for (unsigned quoted = 0; quoted < 2; quoted++) {
                                char doc[256], *p = doc;
                                _cleanup_free_ char *out = NULL;
                                size_t n, end;
                                int r;

                                p = stpcpy(p, prefix);
                                if (quoted)
                                        *p++ = '"';
                                for (size_t i = 0; i < at; i++)
                                        *p++ = quoted ? "ab{]:,"[i % 6] : "1,"[i % 2];
                                *p++ = (char) c;
                                if (quoted)
                                        *p++ = '"';
                                p = stpcpy(p, suffix);
                                n = (size_t) (p - doc);
                                /* The value: from its '[' to the ']' of the suffix when it ends there. */
                                end = ref_skip(doc + strlen(prefix) - 1, n - strlen(prefix) + 1);
                                r = cn_json_filter_text(doc, n, node, &out, NULL);
                                total++;
                                if (end == 0) {
                                        rejected++;
                                        wrong += r != -EBADMSG;
                                } else if (end == n - strlen(prefix) + 1 - (strlen(suffix) - 3) &&
                                           (r < 0 || !streq(out, "{\"metadata\":{\"name\":\"x\"}}")))
                                        wrong++;
                        }
        TAP_OK(total == 256 * 192 * 2 && rejected > 256 * 192 / 2,
               "%zu documents with each byte at each offset, %zu rejected", total, rejected);
        TAP_EQ_INT(wrong, 0, "... each accepted or rejected as the byte-by-byte scan does");
}

/* A random value: nested objects and arrays, strings of up to 150 bytes with runs of backslashes
 * and escaped quotes (so both fall on every position of the string scan's 16-byte blocks and
 * across their edges), literals. Returns false when the buffer refused a byte. */
static bool random_value(CnBuf *b, unsigned depth) {
        static const char *const literals[] = { "0", "-12.5e+3", "true", "false", "null", "1234567" };
        unsigned k = (unsigned) random() % (depth > 6 ? 3 : 5);
        bool ok = true;

        if (k == 0)
                return cn_buf_add_str(b, literals[random() % ELEMENTSOF(literals)]) >= 0;
        if (k <= 2) {
                size_t len = (size_t) random() % 150;

                ok = cn_buf_add_char(b, '"') >= 0;
                for (size_t i = 0; ok && i < len; i++) {
                        long r = random() % 16;

                        if (r == 0) /* a run of 1 to 5 escaped backslashes */
                                for (long j = random() % 5; ok && j >= 0; j--)
                                        ok = cn_buf_add_str(b, "\\\\") >= 0;
                        else if (r == 1)
                                ok = cn_buf_add_str(b, "\\\"") >= 0;
                        else if (r == 2)
                                ok = cn_buf_add(b, "{}[],:", 1 + (size_t) random() % 6) >= 0;
                        else
                                ok = cn_buf_add_char(b, (char) ('a' + random() % 26)) >= 0;
                }
                return ok && cn_buf_add_char(b, '"') >= 0;
        }
        ok = cn_buf_add_char(b, k == 3 ? '{' : '[') >= 0;
        for (unsigned i = 0, members = (unsigned) random() % 6; ok && i < members; i++)
                ok = (i == 0 || cn_buf_add_char(b, ',') >= 0) &&
                     (k != 3 || cn_buf_add_str(b, "\"k\\\"ey\":") >= 0) && random_value(b, depth + 1);
        return ok && cn_buf_add_char(b, k == 3 ? '}' : ']') >= 0;
}

/* Random documents {"skip":V,"metadata":{"name":"x"}}, V whole or with one byte changed, deleted
 * or inserted (a backslash, a quote, a bracket, a stray byte): the filter drops V exactly where
 * the byte-by-byte scan ends it (and rejects what it rejects), and the boundary scan, fed in
 * random chunks, ends the document where the byte-by-byte scan does. */
static void check_random(void) {
        static const char prefix[] = "{\"skip\":", suffix[] = ",\"metadata\":{\"name\":\"x\"}}";
        static const char mutations[] = "\\\"{}[]@\001 ,:";
        size_t docs = 0, filter_wrong = 0, scan_wrong = 0, rejected = 0, long_docs = 0, broken = 0;
        _cleanup_buf_ CnBuf v = CN_BUF_INIT(1 << 20), doc = CN_BUF_INIT(1 << 20);

        srandom(25);
        for (unsigned iter = 0; iter < 6000; iter++) {
                const char *value;
                size_t at, cut = 0, n, end, want_end;
                char c = 0;

                cn_buf_reset(&v);
                cn_buf_reset(&doc);
                if (cn_buf_add_char(&v, '[') < 0 || !random_value(&v, 1) || cn_buf_add_char(&v, ']') < 0) {
                        broken++;
                        continue;
                }
                /* The mutation: the bytes before at, then c (none when 0), then those after cut. */
                at = cn_buf_len(&v);
                if (iter % 2) {
                        long how = random() % 3;

                        at = 1 + (size_t) random() % (cn_buf_len(&v) - 1);
                        c = mutations[random() % (sizeof(mutations) - 1)];
                        cut = how == 2 ? 0 : 1; /* 0: change, 1: delete, 2: insert */
                        if (how == 1)
                                c = 0;
                }
                if (cn_buf_add_str(&doc, prefix) < 0 || cn_buf_add(&doc, cn_buf_str(&v), at) < 0 ||
                    (c && cn_buf_add_char(&doc, c) < 0) ||
                    cn_buf_add(&doc, cn_buf_str(&v) + at + cut, cn_buf_len(&v) - at - cut) < 0 ||
                    cn_buf_add_str(&doc, suffix) < 0) {
                        broken++;
                        continue;
                }
                value = cn_buf_str(&doc) + strlen(prefix);
                n = cn_buf_len(&doc) - strlen(prefix) - strlen(suffix);
                long_docs += n > 128;
                docs++;

                /* The filter against the reference skip of the dropped value. */
                end = ref_skip(value, n);
                {
                        _cleanup_free_ char *out = NULL;
                        int r = cn_json_filter_text(cn_buf_str(&doc), cn_buf_len(&doc), node, &out, NULL);

                        if (end == 0) {
                                rejected++;
                                if (r != -EBADMSG)
                                        filter_wrong++;
                        } else if (end == n && (r < 0 || !streq(out, "{\"metadata\":{\"name\":\"x\"}}")))
                                filter_wrong++;
                        /* else the value ends early and the rest decides: not compared */
                }

                /* The boundary scan against the reference, in random chunks. */
                want_end = ref_scan(cn_buf_str(&doc), cn_buf_len(&doc));
                {
                        CnJsonValueScan scan = {};
                        size_t pos = 0, got = 0;
                        bool done = false;

                        while (!done && pos < cn_buf_len(&doc)) {
                                size_t k = 1 + (size_t) random() % 200, used;

                                k = MIN(k, cn_buf_len(&doc) - pos);
                                used = cn_json_value_scan(&scan, cn_buf_str(&doc) + pos, k, &done);
                                if (done)
                                        got = pos + used;
                                else if (used != k)
                                        scan_wrong++;
                                pos += k;
                        }
                        if (got != want_end)
                                scan_wrong++;
                }
        }
        TAP_OK(docs == 6000 && broken == 0 && long_docs > 1000 && rejected > 500,
               "%zu random documents, %zu longer than 128 bytes, %zu with a dropped value to reject", docs, long_docs,
               rejected);
        TAP_EQ_INT(filter_wrong, 0, "the filter drops or rejects each as the byte-by-byte scan does");
        TAP_EQ_INT(scan_wrong, 0, "the boundary scan ends each where the byte-by-byte scan does, in random chunks");
}

int main(void) {
        static const char *full =
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u\","
                "\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\",\"kubernetes.io/hostname\":\"n1\"},"
                "\"annotations\":{\"x\":\"{\\\"y\\\":[1,2]}\",\"alpha.kubernetes.io/provided-node-ip\":\"10.0.0.1\"},"
                "\"managedFields\":[{\"manager\":\"kubelet\",\"fieldsV1\":{\"f:status\":{\"f:images\":{}}}}]},"
                "\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},"
                "\"status\":{\"images\":[{\"names\":[\"a@sha256:00\",\"a:1\"],\"sizeBytes\":12}],"
                "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"t\"},"
                "{\"type\":\"DiskPressure\",\"status\":\"False\",\"message\":\"m\"}],"
                "\"addresses\":[{\"type\":\"Hostname\",\"address\":\"n1\"}],\"nodeInfo\":{\"bootID\":\"b\"}}}";
        _cleanup_json_ json_object *o = NULL, *plain = NULL;
        _cleanup_free_ char *err = NULL;

        check(full, node,
              "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\","
              "\"kubernetes.io/hostname\":\"n1\"},\"annotations\":{\"alpha.kubernetes.io/provided-node-ip\":"
              "\"10.0.0.1\"}},\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},"
              "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"DiskPressure\","
              "\"status\":\"False\"}],\"addresses\":[{\"type\":\"Hostname\",\"address\":\"n1\"}]}}",
              "a Node keeps what its reader reads; array elements narrowed one by one");
        check(full, no_managed,
              "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u\","
              "\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\",\"kubernetes.io/hostname\":\"n1\"},"
              "\"annotations\":{\"x\":\"{\\\"y\\\":[1,2]}\",\"alpha.kubernetes.io/provided-node-ip\":\"10.0.0.1\"}},"
              "\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},"
              "\"status\":{\"images\":[{\"names\":[\"a@sha256:00\",\"a:1\"],\"sizeBytes\":12}],"
              "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"t\"},"
              "{\"type\":\"DiskPressure\",\"status\":\"False\",\"message\":\"m\"}],"
              "\"addresses\":[{\"type\":\"Hostname\",\"address\":\"n1\"}],\"nodeInfo\":{\"bootID\":\"b\"}}}",
              "\"*\" keeps every member but the one dropped before it");
        check("{\"code\":410,\"reason\":\"Expired\",\"metadata\":{\"name\":\"x\",\"uid\":\"u\"},\"message\":\"m\"}",
              with_extra, "{\"code\":410,\"reason\":\"Expired\",\"metadata\":{\"name\":\"x\"}}",
              "an included filter is looked up first, then the entries after it");
        check("{\"code\":1}", extra, "{\"code\":1}", "a filter without includes");
        check(full, selected, "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
              "array elements selected by the value of a member");
        check("{\"status\":{\"conditions\":[{\"type\":\"Disk\"},{\"status\":\"x\",\"type\":\"Mine\"},7,"
              "{\"type\":1},{\"type\":\"Ready\"},{\"type\":\"R\\u0065ady\"}]}}",
              selected, "{\"status\":{\"conditions\":[{\"status\":\"x\",\"type\":\"Mine\"},{\"type\":\"Ready\"}]}}",
              "selection: the key anywhere in the element; non-objects, other types and escaped values left out");
        check("{\"status\":{\"conditions\":[{\"type\":\"Disk\"}]}}", selected, "{\"status\":{\"conditions\":[]}}",
              "no element selected leaves an empty array");
        check("{\"status\":{\"conditions\":{\"type\":\"Disk\"}}}", selected,
              "{\"status\":{\"conditions\":{\"type\":\"Disk\"}}}", "selection applies to arrays only");
        check(" [ {\"metadata\" : {\"name\" : \"a\" , \"x\" : [ ] } } , 3 , \"s\" , null ] ", node,
              "[{\"metadata\" :{\"name\" :\"a\"}},3,\"s\",null]",
              "an array at the top is filtered element by element; scalars stay");
        check("{\"metadata\":{},\"spec\":[],\"status\":{}}", node, "{\"metadata\":{},\"spec\":[],\"status\":{}}",
              "empty objects and arrays");
        check("{\"status\":\"Failure\",\"spec\":true}", node, "{\"status\":\"Failure\",\"spec\":true}",
              "a scalar where the filter expects an object is kept as it is");
        check("{\"meta\\u0064ata\":{\"name\":\"a\"},\"kind\":\"x\"}", node, "{}",
              "a key written with escapes matches no named entry");
        check("{\"meta\\u0064ata\":{\"name\":\"a\"}}", no_managed, "{\"meta\\u0064ata\":{\"name\":\"a\"}}",
              "a key written with escapes still matches \"*\"");
        check("{\"skip\":\"a\\\"}b\",\"metadata\":{\"name\":\"\\\\\"}}", node, "{\"metadata\":{\"name\":\"\\\\\"}}",
              "quotes and backslashes inside dropped and kept strings");

        TAP_EQ_INT(cn_json_parse_filtered(full, strlen(full), CN_JSON_MAX_SIZE, node, &o, &err), 0, "parse filtered");
        TAP_EQ_INT(json_object_array_length(cn_json_get(o, "status", "conditions", NULL)), 2, "conditions kept");
        TAP_OK(!cn_json_get(o, "status", "images", NULL) && !cn_json_get(o, "metadata", "managedFields", NULL) &&
               !cn_json_get(o, "kind", NULL),
               "images, managedFields, kind dropped from the tree");
        TAP_EQ_STR(cn_json_string(o, "metadata", "annotations", "alpha.kubernetes.io/provided-node-ip", NULL),
                   "10.0.0.1", "the one annotation read is there");
        TAP_EQ_INT(cn_json_parse_filtered(full, strlen(full), CN_JSON_MAX_SIZE, NULL, &plain, NULL), 0,
                   "no filter parses everything");
        TAP_OK(cn_json_get(plain, "status", "images", NULL) != NULL, "... images included");

        check_bad("{\"skip\":{\"a\":[1,2}},\"metadata\":{}}", "mismatched brackets in a dropped member");
        check_bad("{\"skip\":\"unterminated}", "an unterminated string in a dropped member");
        check_bad("{\"metadata\":{\"name\":\"a\"}", "a missing closing brace");
        check_bad("{\"metadata\":{\"name\":\"a\"}} x", "trailing bytes");
        check_bad("{\"metadata\" {}}", "a missing colon");
        check_bad("{\"skip\":}", "a member without a value");
        check_bad("{\"skip\":[1,@],\"metadata\":{}}", "a stray byte in a dropped member");
        check_bad("{\"skip\":[\"a\\", "a backslash at the very end");
        {
                static const char nul[] = "{\"skip\":[1,\0],\"metadata\":{}}";
                _cleanup_json_ json_object *nul_tree = NULL;

                TAP_EQ_INT(cn_json_parse_filtered(nul, sizeof(nul) - 1, CN_JSON_MAX_SIZE, node, &nul_tree, NULL),
                           -EBADMSG,
                           "a NUL byte in a dropped member rejected");
        }
        /* The scans of 64-byte blocks where the CPU has them, then the portable ones. */
        for (unsigned portable = 0; portable < 2; portable++) {
                cn_json_filter_set_portable(portable);
                printf("# %s\n", portable ? "portable scans" : "the scans of 64-byte blocks, where the CPU has them");
                check_strings();
                check_bytes();
                check_random();
        }
        cn_json_filter_set_portable(false);
        check_bad("", "empty input");
        check_bad("{\"metadata\":{\"name\":nope}}", "a bad literal in a kept member (json-c checks kept parts)");
        {
                /* Deeper than CN_JSON_MAX_DEPTH inside a dropped member. */
                size_t n = 2 * CN_JSON_MAX_DEPTH + 2;
                _cleanup_free_ char *deep = malloc(n + 16);

                strcpy(deep, "{\"skip\":");
                for (size_t i = 0; i < CN_JSON_MAX_DEPTH + 1; i++)
                        strcat(deep, "[");
                for (size_t i = 0; i < CN_JSON_MAX_DEPTH + 1; i++)
                        strcat(deep, "]");
                strcat(deep, "}");
                check_bad(deep, "nesting deeper than the cap in a dropped member");
        }
        return tap_done();
}
