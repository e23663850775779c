/* SPDX-License-Identifier: Apache-2.0 */
/* Watch stream parsing: the same events whatever the chunking (whole, byte by byte, odd sizes),
 * streams cut mid-object, ERROR events (410 Gone mid-watch), malformed and oversized input; all of
 * it a second time with an object filter (json-filter.h), which must also leave out what it drops
 * and keep an ERROR event's Status. */
#include "kube-client.h"
#include "tap.h"

#define EV_ADDED "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"10\"}}}"
#define EV_MODIFIED                                                                                    \
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"11\"," \
        "\"labels\":{\"a\":\"x}{\\\"y\"}}}}"
#define EV_BOOKMARK "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":\"15\"}}}"
#define EV_DELETED "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"16\"}}}"
#define EV_GONE                                                                                        \
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","   \
        "\"message\":\"too old resource version: 5 (10)\",\"reason\":\"Expired\",\"code\":410}}"

static const char stream[] = EV_ADDED "\n" EV_MODIFIED "\n\n" EV_BOOKMARK "\r\n  " EV_DELETED "\n";

/* Set for the second pass: the objects keep metadata.name and resourceVersion only. */
static const CnJsonFilter name_rv[] = { { "name" }, { "resourceVersion" }, {} };
static const CnJsonFilter object_filter[] = { { "metadata", name_rv }, {} };
static const CnJsonFilter *filter;

typedef struct Seen {
        char log[1024];
        int n;
        int fail_at;
} Seen;

static int on_event(CnKubeWatchEventType type, json_object *object, void *userdata) {
        Seen *s = userdata;
        json_object *md = NULL, *rv = NULL;

        s->n++;
        if (s->fail_at && s->n == s->fail_at)
                return -ECANCELED;
        (void) json_object_object_get_ex(object, "metadata", &md);
        (void) json_object_object_get_ex(md, "resourceVersion", &rv);
        snprintf(s->log + strlen(s->log), sizeof(s->log) - strlen(s->log), "%s:%s%s ",
                 cn_kube_watch_event_type_to_string(type), rv ? json_object_get_string(rv) : "-",
                 json_object_object_get_ex(md, "labels", NULL) ? "+labels" : "");
        return 0;
}

static int feed_in_chunks(const char *data, size_t size, size_t chunk, Seen *s, CnKubeWatchParser **ret_p,
                          char **msg) {
        CnKubeWatchParser *p = NULL;
        int r = 0;

        assert(cn_kube_watch_parser_new(4096, on_event, s, &p) == 0);
        cn_kube_watch_parser_set_filter(p, filter);
        for (size_t i = 0; i < size && r >= 0; i += chunk)
                r = cn_kube_watch_parser_feed(p, data + i, MIN(chunk, size - i), msg);
        if (ret_p)
                *ret_p = p;
        else
                cn_kube_watch_parser_free(p);
        return r;
}

static void test_chunking(void) {
        static const size_t chunks[] = { sizeof(stream), 1, 2, 3, 7, 64, 100 };
        const char *want = filter ? "ADDED:10 MODIFIED:11 BOOKMARK:15 DELETED:16 "
                                  : "ADDED:10 MODIFIED:11+labels BOOKMARK:15 DELETED:16 ";

        for (size_t i = 0; i < ELEMENTSOF(chunks); i++) {
                Seen s = {};
                _cleanup_(cn_kube_watch_parser_freep) CnKubeWatchParser *p = NULL;

                TAP_EQ_INT(feed_in_chunks(stream, strlen(stream), chunks[i], &s, &p, NULL), 0, "stream parses");
                tap_ok(streq(s.log, want), "chunks of %zu bytes give the same four events in order%s", chunks[i],
                       filter ? ", without the members filtered out" : "");
                if (!streq(s.log, want))
                        printf("# got %s\n", s.log);
                TAP_OK(!cn_kube_watch_parser_partial(p), "nothing left over after complete events");
        }
}

static void test_cut(void) {
        _cleanup_(cn_kube_watch_parser_freep) CnKubeWatchParser *p = NULL;
        size_t cut = strlen(EV_ADDED "\n") + 30;
        Seen s = {};

        TAP_EQ_INT(feed_in_chunks(stream, cut, 1, &s, &p, NULL), 0, "stream cut mid-object is not an error by itself");
        TAP_EQ_STR(s.log, "ADDED:10 ", "events before the cut are delivered, the cut one is not");
        TAP_OK(cn_kube_watch_parser_partial(p), "parser reports the partial event");

        /* The rest arrives later: the partial event completes. */
        TAP_EQ_INT(cn_kube_watch_parser_feed(p, stream + cut, strlen(stream) - cut, NULL), 0, "rest of the stream");
        TAP_EQ_STR(s.log, filter ? "ADDED:10 MODIFIED:11 BOOKMARK:15 DELETED:16 "
                                 : "ADDED:10 MODIFIED:11+labels BOOKMARK:15 DELETED:16 ",
                   "partial event completes with more bytes");
}

static void test_gone(void) {
        static const char gone_stream[] = EV_ADDED "\n" EV_GONE "\n" EV_DELETED "\n";
        _cleanup_(cn_kube_watch_parser_freep) CnKubeWatchParser *p = NULL;
        _cleanup_free_ char *msg = NULL;
        Seen s = {};
        int r;

        r = feed_in_chunks(gone_stream, strlen(gone_stream), 5, &s, &p, &msg);
        TAP_EQ_INT(r, -CN_KUBE_EGONE, "410 ERROR event mid-watch ends it with CN_KUBE_EGONE");
        TAP_EQ_STR(s.log, "ADDED:10 ", "events before the error are delivered, none after it");
        TAP_EQ_STR(msg, "too old resource version: 5 (10)", "Status message of the ERROR event");
        TAP_EQ_INT(cn_kube_watch_parser_feed(p, EV_DELETED, strlen(EV_DELETED), NULL), -CN_KUBE_EGONE,
                   "parser refuses input after an error");
}

static void test_bad(void) {
        Seen s = {};
        char big[8192];
        int n;

        TAP_EQ_INT(feed_in_chunks("{\"type\":\"ADDED\",\"object\":{]}", 29, 1, &s, NULL, NULL), -EBADMSG,
                   "malformed JSON");
        TAP_EQ_INT(feed_in_chunks("{\"type\":\"NOPE\",\"object\":{}}", 27, 4, &s, NULL, NULL), -EBADMSG,
                   "unknown event type");
        TAP_EQ_INT(feed_in_chunks("{\"type\":\"ADDED\",\"object\":\"x\"}", 29, 100, &s, NULL, NULL), -EBADMSG,
                   "object is not an object");
        TAP_EQ_INT(feed_in_chunks("[1,2,3]", 7, 100, &s, NULL, NULL), -EBADMSG, "array instead of an event");
        TAP_EQ_INT(feed_in_chunks("{\"type\":\"ADDED\",\"object\":{}} garbage", 36, 3, &s, NULL, NULL), -EBADMSG,
                   "garbage after an event");

        n = snprintf(big, sizeof(big), "{\"type\":\"ADDED\",\"object\":{\"data\":\"");
        memset(big + n, 'x', 5000);
        strcpy(big + n + 5000, "\"}}");
        s = (Seen){};
        TAP_EQ_INT(feed_in_chunks(big, strlen(big), 512, &s, NULL, NULL), -E2BIG, "event over the size cap, chunked");
        s = (Seen){};
        TAP_EQ_INT(feed_in_chunks(big, strlen(big), strlen(big), &s, NULL, NULL), -E2BIG,
                   "event over the size cap, in one piece");

        s = (Seen){ .fail_at = 2 };
        TAP_EQ_INT(feed_in_chunks(stream, strlen(stream), 1000, &s, NULL, NULL), -ECANCELED,
                   "callback error stops parsing");
        TAP_EQ_INT(s.n, 2, "no event after the callback's error");
}

/* Each event a line of its own (as the API server writes them), in one piece: those parsed where
 * they lie must give what the scan gives for lines it has to take (two events on one line, an
 * event spread over indented lines, a line cut by the read), and a bad line fails the same way. */
static void test_lines(void) {
        static const char odd[] = EV_ADDED EV_MODIFIED "\n{\n  \"type\": \"BOOKMARK\",\n  \"object\": "
                                  "{\"metadata\": {\"resourceVersion\": \"15\"}}\n}\n" EV_DELETED "\n";
        static const char bad[] = EV_ADDED "\n{\"type\":\"ADDED\",\"object\":{]}\n" EV_DELETED "\n";
        const char *want = filter ? "ADDED:10 MODIFIED:11 BOOKMARK:15 DELETED:16 "
                                  : "ADDED:10 MODIFIED:11+labels BOOKMARK:15 DELETED:16 ";
        Seen s = {};

        TAP_EQ_INT(feed_in_chunks(stream, strlen(stream), strlen(stream), &s, NULL, NULL), 0, "event lines in one piece");
        TAP_EQ_STR(s.log, want, "event lines in one piece give the four events");
        s = (Seen){};
        TAP_EQ_INT(feed_in_chunks(odd, strlen(odd), strlen(odd), &s, NULL, NULL), 0,
                   "two events on a line and an indented event");
        TAP_EQ_STR(s.log, want, "two events on a line and an indented event give the four events");
        s = (Seen){};
        TAP_EQ_INT(feed_in_chunks(odd, strlen(odd), 50, &s, NULL, NULL), 0, "the same cut every 50 bytes");
        TAP_EQ_STR(s.log, want, "the same cut every 50 bytes gives the four events");
        s = (Seen){};
        TAP_EQ_INT(feed_in_chunks(bad, strlen(bad), strlen(bad), &s, NULL, NULL), -EBADMSG,
                   "a malformed line after a good one");
        TAP_EQ_STR(s.log, "ADDED:10 ", "the good line before it is delivered, none after it");
}

/* Streams built at random from events, separators, indentation and the odd bad byte give the same
 * events and the same result in one piece (lines parsed where they lie) as a byte at a time (every
 * event scanned) and in pieces of random sizes. */
static void test_random_streams(void) {
        static const char *const parts[] = {
                EV_ADDED, EV_MODIFIED, EV_BOOKMARK, EV_DELETED, "\n", "\n", "\r\n", " ", "\t",
                "{\n \"type\" : \"ADDED\",\n \"object\" : {\"metadata\":{\"resourceVersion\":\"20\"}}\n}",
                "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"21\",\"x\":\"a\\n\\\"}\"}}}",
                "x", "}", "{\"type\":\"ADDED\",\"object\":{\"metadata\":", "\"",
        };
        unsigned seed = 1, mismatches = 0, rich = 0, failed = 0;

        for (int round = 0; round < 400; round++) {
                char stream_buf[2048] = "";
                size_t len = 0;
                Seen whole = {}, bytes = {}, pieces = {};
                int r_whole, r_bytes, r_pieces;
                bool rare = round % 4 == 0; /* a quarter of the streams may hold the bad parts */

                for (int n = 0; n < 12; n++) {
                        size_t k = (size_t) rand_r(&seed) % (rare ? ELEMENTSOF(parts) : ELEMENTSOF(parts) - 4);
                        size_t l = strlen(parts[k]);

                        if (len + l >= sizeof(stream_buf))
                                break;
                        memcpy(stream_buf + len, parts[k], l);
                        len += l;
                }
                stream_buf[len] = 0;
                r_whole = feed_in_chunks(stream_buf, len, len ? len : 1, &whole, NULL, NULL);
                r_bytes = feed_in_chunks(stream_buf, len, 1, &bytes, NULL, NULL);
                r_pieces = feed_in_chunks(stream_buf, len, 1 + (size_t) rand_r(&seed) % 97, &pieces, NULL, NULL);
                rich += r_whole == 0 && whole.n >= 3;
                failed += r_whole < 0;
                if (r_whole != r_bytes || r_whole != r_pieces || !streq(whole.log, bytes.log) ||
                    !streq(whole.log, pieces.log)) {
                        if (mismatches++ == 0)
                                printf("# stream %s: %d %s / %d %s / %d %s\n", stream_buf, r_whole, whole.log, r_bytes,
                                       bytes.log, r_pieces, pieces.log);
                }
        }
        TAP_EQ_INT(mismatches, 0, "400 random streams: the same events and result whole, by bytes and in pieces");
        tap_ok(rich >= 100 && failed >= 20, "of them %u streams of three events or more, %u failing", rich, failed);
}

int main(void) {
        for (int pass = 0; pass < 2; pass++) {
                filter = pass ? object_filter : NULL;
                printf("# %s\n", pass ? "with an object filter" : "whole objects");
                test_chunking();
                test_cut();
                test_gone();
                test_bad();
                test_lines();
                test_random_streams();
        }
        return tap_done();
}
