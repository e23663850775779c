/* SPDX-License-Identifier: Apache-2.0 */
/* List page parsing as the page streams in: the same items and List members whatever the chunking
 * (whole, byte by byte, odd sizes), with and without an item filter; pages cut short, malformed
 * and oversized pages are one error each, and nothing after it is handed out. */
#include "json-util.h"
#include "kube-client.h"
#include "tap.h"

#define ITEM(name, rv)                                                                                 \
        "{\"metadata\":{\"name\":\"" name "\",\"resourceVersion\":\"" rv "\",\"labels\":{\"a\":\"x]}{\\\"y\"}}," \
        "\"status\":{\"images\":[{\"names\":[\"i\"],\"sizeBytes\":1}]}}"

static const char page[] = "{ \"kind\" : \"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"42\","
                           "\"continue\":\"tok]\\\"\",\"remainingItemCount\":3},\n\"items\" : [ " ITEM("n1", "10")
                           " ,\n" ITEM("n2", "11") "],\"extra\":true, \"n\" : -1.5e3 }\n";

static const CnJsonFilter name_rv[] = { { "name" }, { "resourceVersion" }, {} };
static const CnJsonFilter item_filter[] = { { "metadata", name_rv }, {} };

typedef struct Seen {
        char log[1024];
        int n;
        int fail_at;
} Seen;

static int on_item(json_object *item, void *userdata) {
        Seen *s = userdata;

        s->n++;
        if (s->fail_at && s->n == s->fail_at)
                return -ECANCELED;
        snprintf(s->log + strlen(s->log), sizeof(s->log) - strlen(s->log), "%s:%s%s%s ",
                 strna(cn_json_string(item, "metadata", "name", NULL)),
                 strna(cn_json_string(item, "metadata", "resourceVersion", NULL)),
                 cn_json_get(item, "metadata", "labels", NULL) ? "+labels" : "",
                 cn_json_get(item, "status", NULL) ? "+status" : "");
        return 0;
}

static int parse(const char *data, size_t size, size_t chunk, size_t max, const CnJsonFilter *f, Seen *s,
                 json_object **ret_list) {
        _cleanup_(cn_kube_list_parser_freep) CnKubeListParser *p = NULL;
        int r = 0;

        assert(cn_kube_list_parser_new(max, f, on_item, s, &p) == 0);
        for (size_t i = 0; i < size && r >= 0; i += chunk)
                r = cn_kube_list_parser_feed(p, data + i, MIN(chunk, size - i));
        if (r < 0)
                return r;
        return cn_kube_list_parser_finish(p, ret_list);
}

static void test_chunking(void) {
        static const size_t chunks[] = { sizeof(page), 1, 2, 3, 7, 64, 100 };

        for (int pass = 0; pass < 2; pass++) {
                const CnJsonFilter *f = pass ? item_filter : NULL;
                const char *want = pass ? "n1:10 n2:11 " : "n1:10+labels+status n2:11+labels+status ";

                for (size_t i = 0; i < ELEMENTSOF(chunks); i++) {
                        _cleanup_json_ json_object *list = NULL;
                        json_object *items = NULL;
                        Seen s = {};

                        TAP_EQ_INT(parse(page, strlen(page), chunks[i], 4096, f, &s, &list), 0, "page parses");
                        tap_ok(streq(s.log, want), "chunks of %zu bytes give the two items in order%s", chunks[i],
                               pass ? ", without the members filtered out" : "");
                        if (!streq(s.log, want))
                                printf("# got %s\n", s.log);
                        TAP_EQ_STR(cn_json_string(list, "metadata", "continue", NULL), "tok]\"",
                                   "the List's metadata is kept");
                        TAP_OK(cn_json_get_array(list, &items, "items", NULL) >= 0 &&
                                       json_object_array_length(items) == 0 && cn_json_get(list, "extra", NULL) &&
                                       cn_json_get(list, "n", NULL),
                               "the List's other members are kept, its items left to the callback");
                }
        }
}

static void test_shapes(void) {
        static const char *const ok[] = {
                "{}",
                "{\"items\":[]}",
                "{\"items\":null,\"kind\":\"NodeList\"}",
                " {\"metadata\":{},\"items\":[ ]} \n",
        };
        static const char *const bad[] = {
                "",
                "   ",
                "[]",
                "{\"items\":[1]}",
                "{\"items\":[{}],}",
                "{\"items\":[{},]}",
                "{\"items\":[{}{}]}",
                "{\"items\":[{\"a\":]}]}",
                "{\"a\" \"b\"}",
                "{\"a\":}",
                "{\"a\":1 \"b\":2}",
                "{,}",
                "{\"a\":tru e}",
                "{\"items\":[]}x",
                "{\"items\":[]}{}",
                "{\"items\":[{}]",
                "{\"kind\":\"NodeList\"",
                "{\"kind\":\"NodeL",
                "garbage",
                "<html>502 Bad Gateway</html>",
        };

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_json_ json_object *list = NULL;
                Seen s = {};

                tap_ok(parse(ok[i], strlen(ok[i]), 1, 4096, NULL, &s, &list) == 0 && list, "'%s' is a List", ok[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *list = NULL;
                Seen s = {};
                int r;

                r = parse(bad[i], strlen(bad[i]), 3, 4096, NULL, &s, &list);
                tap_ok(r == -EBADMSG && !list, "'%s' is refused (%d)", bad[i], r);
        }
}

static void test_limits(void) {
        _cleanup_free_ char *big = NULL;
        _cleanup_json_ json_object *list = NULL;
        Seen s = {};
        size_t n = 0;

        /* Ten items of ~500 bytes: the page is over a cap of 4096 bytes although each item is under. */
        big = malloc(8192);
        assert(big);
        n += sprintf(big, "{\"items\":[");
        for (int i = 0; i < 10; i++) {
                n += sprintf(big + n, "%s{\"metadata\":{\"name\":\"n%d\"},\"data\":\"", i ? "," : "", i);
                memset(big + n, 'x', 480);
                n += 480;
                n += sprintf(big + n, "\"}");
        }
        n += sprintf(big + n, "]}");

        TAP_EQ_INT(parse(big, n, 100, 4096, NULL, &s, &list), -E2BIG, "page over the size cap, chunked");
        TAP_OK(s.n < 10, "the items before the cap were read, not the rest");
        s = (Seen){};
        TAP_EQ_INT(parse(big, n, n, 4096, NULL, &s, &list), -E2BIG, "page over the size cap, in one piece");
        TAP_EQ_INT(s.n, 0, "no item of a page refused whole");
        s = (Seen){};
        TAP_EQ_INT(parse(big, n, 64, n, NULL, &s, &list), 0, "the same page under a cap its size");
        TAP_EQ_INT(s.n, 10, "all its items");

        s = (Seen){ .fail_at = 2 };
        json_object_put(TAKE_PTR(list));
        TAP_EQ_INT(parse(page, strlen(page), 1000, 4096, NULL, &s, &list), -ECANCELED, "callback error stops parsing");
        TAP_EQ_INT(s.n, 2, "no item after the callback's error");
}

int main(void) {
        test_chunking();
        test_shapes();
        test_limits();
        return tap_done();
}
