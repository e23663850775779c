/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental parser of a List page (see kube-client.h): each element of "items" is gathered and
 * parsed (with the item filter) as soon as its last byte arrives, and handed out; the List's other
 * members are kept as text and parsed at the end. A page of 500 Nodes is 8 MB of JSON: read this
 * way, only one item's text is held at a time instead of the whole page. */
#include "buf.h"
#include "json-filter.h"
#include "json-util.h"
#include "kube-client.h"
#include "log.h"

typedef enum ListState {
        LIST_START,      /* before the List's '{' */
        LIST_KEY,        /* after '{' or ',': a member's key (or '}' right after '{') */
        LIST_KEY_STRING, /* in a member's key */
        LIST_COLON,      /* after a key */
        LIST_VALUE,      /* before a member's value */
        LIST_CONTAINER,  /* in a member's string, object or array */
        LIST_SCALAR,     /* in a member's number, true, false or null */
        LIST_ITEM,       /* in "items": before an element (or ']' right after '[') */
        LIST_ITEM_REST,  /* in an element */
        LIST_ITEM_NEXT,  /* after an element: ',' or ']' */
        LIST_NEXT,       /* after a member: ',' or '}' */
        LIST_END,        /* after the List: whitespace only */
} ListState;

struct CnKubeListParser {
        size_t max_size, total;
        const CnJsonFilter *item_filter;
        CnKubeListParserFn fn;
        void *userdata;
        int error;

        ListState state;
        bool first;      /* LIST_KEY, LIST_ITEM: nothing since the opening bracket */
        size_t key_start; /* where the current key starts in list */
        CnBuf list;      /* the List without its items: {"kind":...,"items":[],...} */
        CnBuf item;
        CnJsonValueScan scan;
};

int cn_kube_list_parser_new(size_t max_size, const CnJsonFilter *item_filter, CnKubeListParserFn fn, void *userdata,
                            CnKubeListParser **ret) {
        CnKubeListParser *p;

        assert(fn);
        assert(ret);

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->max_size = max_size > 0 ? max_size : CN_KUBE_DEFAULT_MAX_RESPONSE;
        p->item_filter = item_filter;
        p->fn = fn;
        p->userdata = userdata;
        cn_buf_init(&p->list, p->max_size);
        cn_buf_init(&p->item, p->max_size);
        *ret = p;
        return 0;
}

CnKubeListParser *cn_kube_list_parser_free(CnKubeListParser *p) {
        if (!p)
                return NULL;
        cn_buf_done(&p->list);
        cn_buf_done(&p->item);
        free(p);
        return NULL;
}

static bool is_ws(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_scalar_char(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' ||
               c == '.';
}

static int add(CnBuf *b, const char *data, size_t n) {
        return cn_buf_add(b, data, n) < 0 ? -E2BIG : 0;
}

static int item_done(CnKubeListParser *p) {
        _cleanup_json_ json_object *item = NULL;

        if (cn_json_parse_filtered(cn_buf_str(&p->item), cn_buf_len(&p->item), p->max_size, p->item_filter, &item,
                                   NULL) < 0 ||
            !json_object_is_type(item, json_type_object))
                return log_debug_errno(EBADMSG, "Malformed List: an item is not valid JSON.");
        cn_buf_reset(&p->item);
        return p->fn(item, p->userdata);
}

/* One step: consumes at least one byte of data (or fails). Returns the bytes used. */
static int step(CnKubeListParser *p, const char *data, size_t size, size_t *ret_used) {
        char c = data[0];
        size_t used = 1;
        bool done;
        int r = 0;

        if (is_ws(c) && p->state != LIST_KEY_STRING && p->state != LIST_CONTAINER && p->state != LIST_ITEM_REST) {
                if (p->state == LIST_SCALAR)
                        p->state = LIST_NEXT;
                *ret_used = 1;
                return 0;
        }

        switch (p->state) {
        case LIST_START:
                if (c != '{')
                        return log_debug_errno(EBADMSG, "Malformed List: not an object.");
                r = add(&p->list, data, 1);
                p->state = LIST_KEY;
                p->first = true;
                break;
        case LIST_KEY:
                if (c == '}' && p->first) {
                        r = add(&p->list, data, 1);
                        p->state = LIST_END;
                        break;
                }
                if (c != '"')
                        return log_debug_errno(EBADMSG, "Malformed List: a member without a key.");
                p->key_start = cn_buf_len(&p->list);
                p->scan = (CnJsonValueScan) {};
                p->state = LIST_KEY_STRING;
                used = 0; /* the scan takes the quote */
                break;
        case LIST_KEY_STRING:
        case LIST_CONTAINER:
                used = cn_json_value_scan(&p->scan, data, size, &done);
                r = add(&p->list, data, used);
                if (done)
                        p->state = p->state == LIST_KEY_STRING ? LIST_COLON : LIST_NEXT;
                break;
        case LIST_COLON:
                if (c != ':')
                        return log_debug_errno(EBADMSG, "Malformed List: a key without a value.");
                r = add(&p->list, data, 1);
                p->state = LIST_VALUE;
                break;
        case LIST_VALUE: {
                const char *key = cn_buf_str(&p->list) + p->key_start;

                if (c == '[' && strneq(key, "\"items\":", STRLEN("\"items\":"))) {
                        r = add(&p->list, "[]", 2);
                        p->state = LIST_ITEM;
                        p->first = true;
                } else if (c == '"' || c == '{' || c == '[') {
                        p->scan = (CnJsonValueScan) {};
                        p->state = LIST_CONTAINER;
                        used = 0;
                } else if (is_scalar_char(c)) {
                        r = add(&p->list, data, 1);
                        p->state = LIST_SCALAR;
                } else
                        return log_debug_errno(EBADMSG, "Malformed List: a member without a value.");
                break;
        }
        case LIST_SCALAR:
                if (is_scalar_char(c))
                        r = add(&p->list, data, 1);
                else {
                        p->state = LIST_NEXT;
                        used = 0;
                }
                break;
        case LIST_NEXT:
                if (c == ',') {
                        r = add(&p->list, data, 1);
                        p->state = LIST_KEY;
                        p->first = false;
                } else if (c == '}') {
                        r = add(&p->list, data, 1);
                        p->state = LIST_END;
                } else
                        return log_debug_errno(EBADMSG, "Malformed List: members not separated by ','.");
                break;
        case LIST_ITEM:
                if (c == ']' && p->first) {
                        p->state = LIST_NEXT;
                        break;
                }
                if (c != '{')
                        return log_debug_errno(EBADMSG, "Malformed List: an item is not an object.");
                p->scan = (CnJsonValueScan) {};
                p->state = LIST_ITEM_REST;
                used = 0;
                break;
        case LIST_ITEM_REST:
                used = cn_json_value_scan(&p->scan, data, size, &done);
                r = add(&p->item, data, used);
                if (r >= 0 && done) {
                        p->state = LIST_ITEM_NEXT;
                        r = item_done(p);
                }
                break;
        case LIST_ITEM_NEXT:
                if (c == ',') {
                        p->state = LIST_ITEM;
                        p->first = false;
                } else if (c == ']')
                        p->state = LIST_NEXT;
                else
                        return log_debug_errno(EBADMSG, "Malformed List: items not separated by ','.");
                break;
        case LIST_END:
                return log_debug_errno(EBADMSG, "Malformed List: data after its end.");
        }
        if (r == -E2BIG)
                return log_debug_errno(E2BIG, "List larger than %zu bytes.", p->max_size);
        if (r < 0)
                return r;
        *ret_used = used;
        return 0;
}

int cn_kube_list_parser_feed(CnKubeListParser *p, const void *data, size_t size) {
        const char *d = data;

        assert(p);
        assert(data || size == 0);

        if (p->error < 0)
                return p->error;
        if (size > p->max_size - p->total) {
                p->error = log_debug_errno(E2BIG, "List larger than %zu bytes.", p->max_size);
                return p->error;
        }
        p->total += size;
        while (size > 0) {
                size_t used = 0;
                int r;

                r = step(p, d, size, &used);
                if (r < 0) {
                        p->error = r;
                        return r;
                }
                d += used;
                size -= used;
        }
        return 0;
}

int cn_kube_list_parser_finish(CnKubeListParser *p, json_object **ret) {
        _cleanup_json_ json_object *list = NULL;

        assert(p);
        assert(ret);

        if (p->error < 0)
                return p->error;
        if (p->state != LIST_END)
                return log_debug_errno(EBADMSG, "Malformed List: the page ended early.");
        if (cn_json_parse(cn_buf_str(&p->list), cn_buf_len(&p->list), p->max_size, &list, NULL) < 0 ||
            !json_object_is_type(list, json_type_object))
                return log_debug_errno(EBADMSG, "Malformed List: not valid JSON.");
        *ret = TAKE_PTR(list);
        return 0;
}
