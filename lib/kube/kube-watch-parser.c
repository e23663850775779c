/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental parser of a watch response: the API server streams one JSON object per event,
 * {"type": "ADDED", "object": {...}}, in chunks that split events anywhere. An event's bytes are
 * gathered (its end found by following strings and brackets, at most max_event_size of them) and
 * then parsed, with the reader's object filter (json-filter.h) when it set one, so what it drops
 * is never built; an event that arrives whole with its newline is parsed in place. Each event is
 * handed out as soon as its last byte arrives. */
#include "buf.h"
#include "json-filter.h"
#include "kube-client.h"
#include "log.h"

struct CnKubeWatchParser {
        size_t max_event_size;
        bool in_event;  /* a non-whitespace byte was seen since the last complete event */
        int error;
        char *error_message;
        CnKubeWatchParserFn fn;
        void *userdata;

        CnJsonFilter object_filter[8], event_filter[3];
        bool filtered;
        /* the event so far and where the scan of it stands */
        CnBuf event;
        CnJsonValueScan scan;
};

/* What an ERROR event's Status carries, kept whatever the reader's filter drops. */
static const CnJsonFilter status_members[] = {
        { "kind" }, { "apiVersion" }, { "code" }, { "reason" }, { "message" }, { "details" }, { "status" }, {}
};

void cn_kube_watch_parser_set_filter(CnKubeWatchParser *p, const CnJsonFilter *object_filter) {
        assert(p);
        p->filtered = object_filter;
        if (!object_filter)
                return;
        p->object_filter[0] = (CnJsonFilter) CN_JSON_FILTER_INCLUDE(object_filter);
        p->object_filter[1] = (CnJsonFilter) CN_JSON_FILTER_INCLUDE(status_members);
        p->object_filter[2] = (CnJsonFilter) {};
        p->event_filter[0] = (CnJsonFilter) { "type" };
        p->event_filter[1] = (CnJsonFilter) { "object", p->object_filter };
        p->event_filter[2] = (CnJsonFilter) {};
}

int cn_kube_watch_parser_new(size_t max_event_size, CnKubeWatchParserFn fn, void *userdata,
                             CnKubeWatchParser **ret) {
        CnKubeWatchParser *p;

        assert(fn);
        assert(ret);

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->max_event_size = max_event_size > 0 ? max_event_size : CN_KUBE_DEFAULT_MAX_RESPONSE;
        cn_buf_init(&p->event, p->max_event_size);
        p->fn = fn;
        p->userdata = userdata;
        *ret = p;
        return 0;
}

CnKubeWatchParser *cn_kube_watch_parser_free(CnKubeWatchParser *p) {
        if (!p)
                return NULL;
        cn_buf_done(&p->event);
        free(p->error_message);
        free(p);
        return NULL;
}

bool cn_kube_watch_parser_partial(CnKubeWatchParser *p) {
        assert(p);
        return p->in_event;
}

static int dispatch(CnKubeWatchParser *p, json_object *event) {
        json_object *type_o, *object;
        const char *type;
        CnKubeWatchEventType t;

        if (!json_object_is_type(event, json_type_object) ||
            !json_object_object_get_ex(event, "type", &type_o) || !json_object_is_type(type_o, json_type_string) ||
            !json_object_object_get_ex(event, "object", &object) || !json_object_is_type(object, json_type_object))
                return log_debug_errno(EBADMSG, "Watch event is not {\"type\": ..., \"object\": {...}}.");
        type = json_object_get_string(type_o);

        if (streq(type, "ERROR")) {
                const char *message = NULL;
                int r = cn_kube_status_object_to_errno(0, object, NULL, &message);

                free(p->error_message);
                p->error_message = message ? strdup(message) : NULL;
                log_debug_errno(r, "Watch ERROR event: %s", strna(message));
                return r;
        }

        t = cn_kube_watch_event_type_from_string(type);
        if (t < 0)
                return log_debug_errno(EBADMSG, "Unknown watch event type \"%.32s\".", type);
        return p->fn(t, object, p->userdata);
}

static int feed(CnKubeWatchParser *p, const char *data, size_t size) {
        const CnJsonFilter *f = p->filtered ? p->event_filter : NULL;

        while (size > 0) {
                _cleanup_json_ json_object *event = NULL;
                const char *nl;
                size_t used;
                bool done;
                int r;

                if (!p->in_event) {
                        while (size > 0 && strchr(" \t\r\n", *data)) {
                                data++;
                                size--;
                        }
                        if (size == 0)
                                return 0;
                        if (*data != '{')
                                return log_debug_errno(EBADMSG, "Malformed watch stream: an event is not an object.");
                        /* The API server writes each event as one line of compact JSON (no raw
                         * newline can be inside it): an event whose line is all here is parsed
                         * where it lies, neither copied nor scanned first. Anything else (a line
                         * cut by the read, several events or garbage on it, indented JSON) takes
                         * the scan below from this same byte, as if this had not been tried. */
                        nl = memchr(data, '\n', MIN(size, p->max_event_size + 1));

                        if (nl && cn_json_parse_filtered(data, (size_t) (nl - data), p->max_event_size, f, &event,
                                                         NULL) >= 0 && event) {
                                size -= (size_t) (nl + 1 - data);
                                data = nl + 1;
                                r = dispatch(p, event);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        p->in_event = true;
                        p->scan = (CnJsonValueScan) {};
                        cn_buf_reset(&p->event);
                }
                used = cn_json_value_scan(&p->scan, data, size, &done);
                if (cn_buf_add(&p->event, data, used) < 0)
                        return log_debug_errno(E2BIG, "Watch event larger than %zu bytes.", p->max_event_size);
                data += used;
                size -= used;
                if (!done)
                        continue;
                p->in_event = false;
                r = cn_json_parse_filtered(cn_buf_str(&p->event), cn_buf_len(&p->event), p->max_event_size, f,
                                           &event, NULL);
                if (r < 0 || !event)
                        return log_debug_errno(EBADMSG, "Malformed watch stream: an event is not valid JSON.");
                r = dispatch(p, event);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_kube_watch_parser_feed(CnKubeWatchParser *p, const void *data, size_t size, char **reterr_message) {
        assert(p);
        assert(data || size == 0);

        if (p->error >= 0)
                p->error = feed(p, data, size);
        if (p->error < 0 && reterr_message && p->error_message) {
                free(*reterr_message);
                *reterr_message = strdup(p->error_message);
        }
        return p->error;
}
