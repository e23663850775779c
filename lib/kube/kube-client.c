/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes REST client (see kube-client.h): requests go through the rate limiter, out over
 * lib/core/http.h, and come back as decoded objects or errors; 429/503 and connection failures are
 * retried with backoff that honours Retry-After; watches feed the incremental parser as bytes
 * arrive; list_all follows continue tokens. Everything runs on the caller's sd_event loop. */
#include <pthread.h>

#include "backoff.h"
#include "http.h"
#include "json-util.h"
#include "kube-client.h"
#include "log.h"
#include "metrics.h"
#include "string-util.h"
#include "time-util.h"

#define KUBE_BACKOFF_BASE (250 * USEC_PER_MSEC)
#define KUBE_BACKOFF_CAP (30 * USEC_PER_SEC)
/* A watch without any bytes (events or bookmarks) for this long past its server timeout is dead. */
#define KUBE_WATCH_IDLE_GRACE (30 * USEC_PER_SEC)
#define KUBE_WATCH_IDLE_DEFAULT (10 * USEC_PER_MINUTE)

typedef enum RequestKind {
        REQUEST_PLAIN,
        REQUEST_LIST_ALL,
        REQUEST_WATCH,
} RequestKind;

struct CnKubeClient {
        sd_event *event;
        CnHttp *http;
        CnKubeConfig *config;
        char *user_agent;
        CnKubeRateLimiter limiter;
        usec_t timeout;
        unsigned max_retries;
        size_t max_response;

        CnKubeRequest *requests;
        unsigned n_requests;

        CnMetric *requests_metric;
};

struct CnKubeRequest {
        CnKubeClient *client;
        CnKubeRequest *prev, *next;
        RequestKind kind;

        char *method;
        char *path;
        char *body;
        size_t body_size;
        char *content_type;

        CnKubeCallback cb;
        CnKubeWatchHandler handler;
        void *userdata;

        bool floating;   /* owned by the client, freed after its callback */
        bool done;       /* callback delivered (or being delivered) */
        bool zombie;     /* freed by its owner while we were inside one of its callbacks */
        unsigned dispatching;

        CnHttpRequest *http;
        sd_event_source *timer;      /* rate limit wait, retry backoff */
        sd_event_source *idle_timer; /* watch inactivity */
        usec_t idle_timeout;
        CnBackoff backoff;
        unsigned retries;
        bool no_retry_429;      /* a 429 is an answer, not overload (an eviction a budget refuses) */

        /* a create of a named object: sent again, it answers AlreadyExists and makes nothing */
        bool resend_safe;

        /* what of a successful answer is parsed; for lists and watches, of each item */
        const CnJsonFilter *filter, *item_filter;

        /* watch */
        CnKubeWatchParser *parser;
        char *watch_error_message;
        int watch_error;

        /* list_all: pages are parsed as they stream in; items holds every page's items, the
         * first n_items_done of them from pages complete (the rest, of a page cut short, are
         * dropped before it is fetched again) */
        CnKubeListParser *list_parser;
        int list_error;
        char *list_base;
        char *label_selector, *field_selector, *resource_version, *continue_token;
        unsigned limit;
        json_object *accumulated, *items;
        size_t n_items_done;
        bool items_as_text;
        bool restarted;
};

static void count_request(CnKubeClient *c, const char *verb, long status) {
        char code[24];

        if (!c->requests_metric)
                return;
        if (status > 0)
                snprintf(code, sizeof(code), "%ld", status);
        else
                snprintf(code, sizeof(code), "<error>");
        (void) cn_metric_inc(c->requests_metric, CN_LABELS(verb, code));
}

int cn_kube_client_register_metrics(CnKubeClient *c, CnMetrics *m, const char *name) {
        assert(c);
        assert(m);
        assert(name);
        return cn_metrics_counter(m, name, "Kubernetes API requests, by HTTP verb and status code.",
                                  CN_LABELS("verb", "code"), &c->requests_metric);
}

static void request_stop_io(CnKubeRequest *r) {
        r->timer = sd_event_source_disable_unref(r->timer);
        r->idle_timer = sd_event_source_disable_unref(r->idle_timer);
        if (r->http) {
                cn_http_request_cancel(r->http);
                r->http = cn_http_request_unref(r->http);
        }
}

static void request_destroy(CnKubeRequest *r) {
        CnKubeClient *c;

        if (!r)
                return;
        c = r->client;
        request_stop_io(r);

        if (r->prev)
                r->prev->next = r->next;
        else if (c->requests == r)
                c->requests = r->next;
        if (r->next)
                r->next->prev = r->prev;
        c->n_requests--;

        cn_kube_watch_parser_free(r->parser);
        cn_kube_list_parser_free(r->list_parser);
        free(r->watch_error_message);
        free(r->method);
        free(r->path);
        free(r->body);
        free(r->content_type);
        free(r->list_base);
        free(r->label_selector);
        free(r->field_selector);
        free(r->resource_version);
        free(r->continue_token);
        json_object_put(r->accumulated);
        json_object_put(r->items);
        free(r);
}

CnKubeRequest *cn_kube_request_free(CnKubeRequest *r) {
        if (!r)
                return NULL;
        if (r->dispatching > 0) {
                /* Inside a callback of this very request: finish unwinding first. */
                r->zombie = true;
                r->cb = NULL;
                r->handler = NULL;
                return NULL;
        }
        request_destroy(r);
        return NULL;
}

/* Delivers the result once. The caller must not touch r afterwards: it may be gone. */
static void request_complete(CnKubeRequest *r, int error, long status, json_object *object, const char *reason,
                             const char *message) {
        CnKubeResult result = {
                .error = error,
                .http_status = status,
                .object = object,
                .reason = reason,
                .message = error < 0 ? (message ?: strerror(-error)) : NULL,
        };
        CnKubeClient *c = r->client;
        CnKubeCallback cb = r->cb;
        void *userdata = r->userdata;

        if (r->done)
                return;
        r->done = true;
        request_stop_io(r);

        if (error < 0)
                log_debug_errno(error, "%s %s failed (HTTP %ld%s%s): %s", r->method, r->path, status,
                                reason ? ", " : "", strempty(reason), result.message);

        /* The result may point into r (list_all's list, a watch's error message): an owner freeing
         * its handle inside the callback only marks it, and it goes when the callback returns. */
        r->dispatching++;
        if (cb && !r->zombie)
                cb(c, &result, userdata);
        r->dispatching--;
        if (r->floating || r->zombie)
                request_destroy(r);
}

static int request_send(CnKubeRequest *r);
static void on_http_done(CnHttpRequest *h, int error, void *userdata);

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);
        int k;

        r->timer = sd_event_source_disable_unref(r->timer);
        k = request_send(r);
        if (k < 0)
                request_complete(r, k, 0, NULL, NULL, NULL);
        return 0;
}

static int on_defer(sd_event_source *s, void *userdata) {
        return on_timer(s, 0, userdata);
}

static int arm_timer(CnKubeRequest *r, usec_t delay) {
        int k;

        r->timer = sd_event_source_disable_unref(r->timer);
        /* Every request passes here, most with no delay at all: those go from a defer source (the
         * next loop iteration, with no timer to arm and read back). The others get a timer whose
         * accuracy is a millisecond: sd-event's default (250 ms, for accuracy 0) would let each
         * one wait for a coalesced wake-up. */
        if (delay == 0)
                k = sd_event_add_defer(r->client->event, &r->timer, on_defer, r);
        else
                k = sd_event_add_time_relative(r->client->event, &r->timer, CLOCK_MONOTONIC, delay, USEC_PER_MSEC,
                                               on_timer, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->timer, "kube-request-timer");
        return 0;
}

/* Every attempt, retries included, waits for its token; always asynchronous, so callbacks never
 * run from inside the call that queued the request. */
static int request_schedule(CnKubeRequest *r, usec_t min_delay) {
        usec_t now, wait;

        if (sd_event_now(r->client->event, CLOCK_MONOTONIC, &now) < 0)
                now = cn_now(CLOCK_MONOTONIC);
        wait = cn_kube_rate_limiter_reserve(&r->client->limiter, now);
        if (wait > 0)
                log_debug("%s %s: client-side rate limit, waiting %" PRIu64 " ms.", r->method, r->path,
                          wait / USEC_PER_MSEC);
        return arm_timer(r, MAX(wait, min_delay));
}

static int on_watch_event(CnKubeWatchEventType type, json_object *object, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);

        if (r->zombie)
                return -ECANCELED;
        if (r->handler)
                r->handler(r->client, type, object, r->userdata);
        return r->zombie ? -ECANCELED : 0;
}

static int on_watch_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);

        request_complete(r, -ETIMEDOUT, 200, NULL, NULL, "watch idle: no data from the server");
        return 0;
}

static void watch_idle_rearm(CnKubeRequest *r) {
        if (r->idle_timer)
                (void) sd_event_source_set_time_relative(r->idle_timer, r->idle_timeout);
}

static int on_watch_data(CnHttpRequest *h, const void *data, size_t size, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);
        int k;

        if (r->zombie)
                return -ECANCELED;
        watch_idle_rearm(r);

        r->dispatching++;
        k = cn_kube_watch_parser_feed(r->parser, data, size, &r->watch_error_message);
        r->dispatching--;
        if (r->zombie)
                return -ECANCELED;
        if (k < 0)
                r->watch_error = k;
        return k;
}

/* The text of a kept object is its JSON with the strings most objects of Kubernetes repeat (member
 * names with their punctuation, a few values) each replaced by one byte. JSON text has no raw
 * byte below 0x20 but its whitespace (json-c escapes control characters in strings, and writes no
 * whitespace here), and no byte 0xC0, 0xC1 or 0xF5 to 0xFF, which UTF-8 never uses (the parser
 * validates UTF-8, so no tree it builds holds one), so those bytes are free to stand for them and
 * the substitution is exactly reversible. A Node as the initializer keeps it goes from 685 bytes
 * to 316 with the first 28 tokens (the bench's Nodes), and by some 60 bytes more with the well-known
 * label keys, the uninitialized taint and the provider ID prefixes after them. */
typedef struct TextToken {
        const char *s;
        size_t len;
} TextToken;
#define TOKEN(x) { x, sizeof(x) - 1 }
/* Tokens cn_kube_object_text_plain_name() looks for by their place in text_tokens. */
enum { TEXT_TOKEN_METADATA_NAME = 0, TEXT_TOKEN_NAMESPACE = 2, TEXT_TOKEN_UID = 3, TEXT_TOKEN_CREATED = 5 };
static const TextToken text_tokens[] = {
        TOKEN("{\"metadata\":{\"name\":\""), TOKEN("\"name\":\""), TOKEN("\"namespace\":\""),
        TOKEN("\"uid\":\""), TOKEN("\"resourceVersion\":\""), TOKEN("\"creationTimestamp\":\""),
        TOKEN("\"labels\":{"), TOKEN("\"annotations\":{"), TOKEN("\"spec\":{"), TOKEN("\"providerID\":\""),
        TOKEN("\"taints\":["), TOKEN("{\"key\":\""), TOKEN("\"value\":\""), TOKEN("\"effect\":\""),
        TOKEN("\"status\":{"), TOKEN("\"conditions\":["), TOKEN("{\"type\":\""), TOKEN("\"status\":\""),
        TOKEN("\"reason\":\""), TOKEN("\"message\":\""), TOKEN("\"addresses\":["), TOKEN("\"address\":\""),
        TOKEN("InternalIP"), TOKEN("ExternalIP"), TOKEN("Hostname"), TOKEN("kubernetes.io/"), TOKEN("Ready"),
        TOKEN("kubelet is posting ready status"),
        /* Coded by bytes UTF-8 never uses. */
        TOKEN("node.cloudprovider.kubernetes.io/uninitialized"), TOKEN("NoSchedule"),
        TOKEN("\"node.kubernetes.io/instance-type\":\""), TOKEN("\"topology.kubernetes.io/region\":\""),
        TOKEN("\"topology.kubernetes.io/zone\":\""), TOKEN("KubeletReady"), TOKEN("True\""),
        TOKEN("False\""), TOKEN("hcloud://"), TOKEN("aws:///"), TOKEN("openstack:///"), TOKEN("gce://"),
        TOKEN("CloudProviderInitialized"),
};
#undef TOKEN
/* The bytes that stand for text_tokens, in order: below 0x20, neither NUL nor JSON whitespace; then
 * those no UTF-8 text has. */
static const unsigned char text_codes[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0b, 0x0c,
                                            0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
                                            0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0xc0, 0xc1,
                                            0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe,
                                            0xff };
_Static_assert(ELEMENTSOF(text_tokens) == ELEMENTSOF(text_codes), "one code per token");

/* Two more codes stand for a member with its value packed: a uid written as Kubernetes writes them
 * (a UUID in lowercase, 36 bytes) and a creationTimestamp (RFC 3339 to the second, in UTC, 20
 * bytes) become the code and their 128 bits, or the seconds since 1970, 7 bits to a byte. These
 * bytes are from an alphabet of 128 that holds neither a code nor '"', '\\' or NUL, so a scan of
 * the text for codes or for a string's end never stops inside one (the decoder reads them by
 * position). A value of another form keeps the member's plain token. JSON whitespace is free for
 * codes: json-c writes none here. */
#define TEXT_CODE_UID 0x09
#define TEXT_CODE_CREATED 0x0a
#define TEXT_UID_PACKED 19      /* ceil(128 / 7) */
#define TEXT_CREATED_PACKED 6   /* 42 bits of seconds: beyond year 9999 */
static const char text_uid_member[] = "\"uid\":\"";
static const char text_created_member[] = "\"creationTimestamp\":\"";
#define TEXT_UID_PLAIN (sizeof(text_uid_member) - 1 + 36 + 1)
#define TEXT_CREATED_PLAIN (sizeof(text_created_member) - 1 + 20 + 1)

/* The packing alphabet: '#' to '[' and ']' to 'c' (64), then 0x80 to 0xBF, which UTF-8 uses only
 * after a lead byte. */
static unsigned char text_pack_byte(unsigned v) {
        assert(v < 128);
        return v < 57 ? (unsigned char) ('#' + v) : v < 64 ? (unsigned char) (']' + v - 57) : (unsigned char) (0x80 + v - 64);
}

static int text_unpack_byte(unsigned char c) {
        if (c >= '#' && c <= '[')
                return c - '#';
        if (c >= ']' && c <= 'c')
                return 57 + c - ']';
        if (c >= 0x80 && c <= 0xBF)
                return 64 + c - 0x80;
        return -1;
}

/* bits[0..n_bits) of an MSB-first bit string as n bytes of 7 bits. */
static void text_pack_bits(const uint8_t *bits, size_t n_bits, char *out, size_t n) {
        for (size_t k = 0; k < n; k++) {
                unsigned v = 0;

                for (size_t b = 0; b < 7; b++) {
                        size_t at = k * 7 + b;
                        v = (v << 1) | (at < n_bits ? (bits[at / 8] >> (7 - at % 8)) & 1U : 0U);
                }
                out[k] = (char) text_pack_byte(v);
        }
}

static int text_unpack_bits(const char *in, size_t n, uint8_t *bits, size_t n_bits) {
        memset(bits, 0, (n_bits + 7) / 8);
        for (size_t k = 0; k < n; k++) {
                int v = text_unpack_byte((unsigned char) in[k]);

                if (v < 0)
                        return -EBADMSG;
                for (size_t b = 0; b < 7; b++) {
                        size_t at = k * 7 + b;
                        unsigned bit = ((unsigned) v >> (6 - b)) & 1U;

                        if (at < n_bits)
                                bits[at / 8] |= (uint8_t) (bit << (7 - at % 8));
                        else if (bit)
                                return -EBADMSG; /* padding is zero: one text per value */
                }
        }
        return 0;
}

static int hex_digit(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..n) starting with a uid member of the packable form: its packed bytes into out. */
static bool text_pack_uid(const char *s, size_t n, char out[static TEXT_UID_PACKED]) {
        const char *v = s + sizeof(text_uid_member) - 1;
        uint8_t bits[16];
        size_t d = 0;

        if (n < TEXT_UID_PLAIN || memcmp(s, text_uid_member, sizeof(text_uid_member) - 1) != 0 || v[36] != '"')
                return false;
        for (size_t i = 0; i < 36; i++) {
                int x;

                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (v[i] != '-')
                                return false;
                        continue;
                }
                x = hex_digit(v[i]);
                if (x < 0)
                        return false;
                if (d % 2 == 0)
                        bits[d / 2] = (uint8_t) (x << 4);
                else
                        bits[d / 2] |= (uint8_t) x;
                d++;
        }
        text_pack_bits(bits, 128, out, TEXT_UID_PACKED);
        return true;
}

static int text_unpack_uid(const char *in, char *out) {
        static const char hex[] = "0123456789abcdef";
        uint8_t bits[16];
        char *p = out;
        int k;

        k = text_unpack_bits(in, TEXT_UID_PACKED, bits, 128);
        if (k < 0)
                return k;
        p = mempcpy(p, text_uid_member, sizeof(text_uid_member) - 1);
        for (size_t i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        *p++ = '-';
                *p++ = hex[bits[i] >> 4];
                *p++ = hex[bits[i] & 15];
        }
        *p = '"';
        return 0;
}

static bool digits(const char *s, size_t n, unsigned *ret) {
        unsigned v = 0;

        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        *ret = v;
        return true;
}

/* t (at most 9999-12-31T23:59:59Z) as RFC 3339 in UTC to the second. */
static bool format_created(uint64_t t, char out[static 21]) {
        struct tm tm;
        time_t tt = (time_t) t;

        return t <= UINT64_C(253402300799) && gmtime_r(&tt, &tm) && strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm) == 20;
}

static bool text_pack_created(const char *s, size_t n, char out[static TEXT_CREATED_PACKED]) {
        const char *v = s + sizeof(text_created_member) - 1;
        unsigned y, mo, d, h, mi, sec;
        struct tm tm = {};
        char again[21];
        uint8_t bits[6];
        time_t t;

        if (n < TEXT_CREATED_PLAIN || memcmp(s, text_created_member, sizeof(text_created_member) - 1) != 0 ||
            v[20] != '"' || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' || v[19] != 'Z' ||
            !digits(v, 4, &y) || !digits(v + 5, 2, &mo) || !digits(v + 8, 2, &d) || !digits(v + 11, 2, &h) ||
            !digits(v + 14, 2, &mi) || !digits(v + 17, 2, &sec) || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
            h > 23 || mi > 59 || sec > 59)
                return false;
        tm.tm_year = (int) y - 1900;
        tm.tm_mon = (int) mo - 1;
        tm.tm_mday = (int) d;
        tm.tm_hour = (int) h;
        tm.tm_min = (int) mi;
        tm.tm_sec = (int) sec;
        t = timegm(&tm);
        if (t < 0 || (uint64_t) t >= (UINT64_C(1) << 42))
                return false;
        /* Only a value that comes back as it was (no 31st of February). */
        if (!format_created((uint64_t) t, again) || memcmp(again, v, 20) != 0)
                return false;
        for (size_t i = 0; i < 6; i++)
                bits[i] = (uint8_t) ((uint64_t) t << 6 >> (40 - 8 * i));
        text_pack_bits(bits, 42, out, TEXT_CREATED_PACKED);
        return true;
}

static int text_unpack_created(const char *in, char *out) {
        uint8_t bits[6];
        uint64_t t = 0;
        char v[21];
        int k;

        k = text_unpack_bits(in, TEXT_CREATED_PACKED, bits, 42);
        if (k < 0)
                return k;
        for (size_t i = 0; i < 6; i++)
                t = (t << 8) | bits[i];
        if (!format_created(t >> 6, v))
                return -EBADMSG;
        out = mempcpy(out, text_created_member, sizeof(text_created_member) - 1);
        out = mempcpy(out, v, 20);
        *out = '"';
        return 0;
}

/* The first four bytes of s (fewer when shorter, the rest zero): one comparison rules out most
 * tokens before memcmp() is called. */
static uint32_t head4(const char *s, size_t n) {
        uint32_t h = 0;

        memcpy(&h, s, MIN(n, sizeof(h)));
        return h;
}

/* Lookup tables of the codec, made once: the token of each code byte, and the tokens by their
 * first four bytes (a hash table of chains, longest token first in each). */
#define TEXT_HASH_SIZE 64
static const TextToken *text_by_code[0x100];
static bool text_starts[0x100]; /* the first bytes of tokens */
static uint32_t text_heads[ELEMENTSOF(text_tokens)];
static int8_t text_hash[TEXT_HASH_SIZE], text_next[ELEMENTSOF(text_tokens)];
static pthread_once_t text_tables_once = PTHREAD_ONCE_INIT;

static unsigned text_hash_of(uint32_t h) {
        return (h * 2654435761u) >> 26; /* the top 6 bits: TEXT_HASH_SIZE buckets */
}

static void text_tables_make(void) {
        _Static_assert(TEXT_HASH_SIZE == 64, "text_hash_of() keeps 6 bits");
        assert(streq(text_tokens[TEXT_TOKEN_METADATA_NAME].s, "{\"metadata\":{\"name\":\"") &&
               streq(text_tokens[TEXT_TOKEN_NAMESPACE].s, "\"namespace\":\"") &&
               streq(text_tokens[TEXT_TOKEN_UID].s, text_uid_member) &&
               streq(text_tokens[TEXT_TOKEN_CREATED].s, text_created_member));
        memset(text_hash, -1, sizeof(text_hash));
        for (size_t i = 0; i < ELEMENTSOF(text_tokens); i++) {
                int8_t *at;

                text_by_code[text_codes[i]] = &text_tokens[i];
                text_starts[(unsigned char) text_tokens[i].s[0]] = true;
                text_heads[i] = head4(text_tokens[i].s, text_tokens[i].len);
                /* Into its chain, before the first shorter token. */
                for (at = &text_hash[text_hash_of(text_heads[i])];
                     *at >= 0 && text_tokens[*at].len >= text_tokens[i].len; at = &text_next[*at])
                        ;
                text_next[i] = *at;
                *at = (int8_t) i;
        }
}

/* The token a byte stands for, or NULL. */
static const TextToken *text_token_of(unsigned char c) {
        return text_by_code[c];
}

/* The longest token at s[0..n), or -1. */
static int text_token_at(const char *s, size_t n) {
        uint32_t h = head4(s, n);

        for (int i = text_hash[text_hash_of(h)]; i >= 0; i = text_next[i])
                if (text_heads[i] == h && text_tokens[i].len <= n && memcmp(text_tokens[i].s, s, text_tokens[i].len) == 0)
                        return i;
        return -1;
}

int cn_kube_text_encode(json_object *object, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        const char *s;
        size_t len, n = 0;

        assert(ret);
        assert(ret_len);
        if (!json_object_is_type(object, json_type_object))
                return -EINVAL;
        (void) pthread_once(&text_tables_once, text_tables_make);
        s = json_object_to_json_string_length(object, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!s)
                return -ENOMEM;
        if (len > INT32_MAX)
                return -EFBIG;
        buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                /* Most bytes start no token. */
                int t = text_starts[(unsigned char) s[i]] ? text_token_at(s + i, len - i) : -1;

                if (t >= 0 && text_tokens[t].s == text_tokens[TEXT_TOKEN_UID].s &&
                    text_pack_uid(s + i, len - i, buf + n + 1)) {
                        buf[n] = TEXT_CODE_UID;
                        n += 1 + TEXT_UID_PACKED;
                        i += TEXT_UID_PLAIN;
                } else if (t >= 0 && text_tokens[t].s == text_tokens[TEXT_TOKEN_CREATED].s &&
                           text_pack_created(s + i, len - i, buf + n + 1)) {
                        buf[n] = TEXT_CODE_CREATED;
                        n += 1 + TEXT_CREATED_PACKED;
                        i += TEXT_CREATED_PLAIN;
                } else if (t >= 0) {
                        buf[n++] = (char) text_codes[t];
                        i += text_tokens[t].len;
                } else
                        buf[n++] = s[i++];
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

int cn_kube_object_to_text(json_object *object, json_object **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int k;

        assert(ret);
        k = cn_kube_text_encode(object, &buf, &n);
        if (k < 0)
                return k;
        *ret = json_object_new_string_len(buf, (int) n);
        return *ret ? 0 : -ENOMEM;
}

char *cn_kube_text_plain_name(const char *s, size_t len) {
        const char *name, *end;

        (void) pthread_once(&text_tables_once, text_tables_make);
        if (!s || len < 2 || (unsigned char) s[0] != text_codes[TEXT_TOKEN_METADATA_NAME] ||
            memchr(s, text_codes[TEXT_TOKEN_NAMESPACE], len))
                return NULL;
        name = s + 1;
        end = memchr(name, '"', len - 1);
        if (!end || end == name)
                return NULL;
        for (const char *p = name; p < end; p++)
                if (text_by_code[(unsigned char) *p] || *p == '\\')
                        return NULL;
        return strndup(name, end - name);
}

char *cn_kube_object_text_plain_name(json_object *text) {
        if (!json_object_is_type(text, json_type_string))
                return NULL;
        return cn_kube_text_plain_name(json_object_get_string(text), (size_t) json_object_get_string_len(text));
}

int cn_kube_text_decode(const char *s, size_t len, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        int k;

        assert(s || len == 0);
        assert(ret);
        (void) pthread_once(&text_tables_once, text_tables_make);
        for (size_t i = 0; i < len; i++) {
                const TextToken *t = text_token_of((unsigned char) s[i]);

                if (s[i] == TEXT_CODE_UID || s[i] == TEXT_CODE_CREATED) {
                        bool uid = s[i] == TEXT_CODE_UID;

                        if (len - i - 1 < (uid ? TEXT_UID_PACKED : TEXT_CREATED_PACKED))
                                return -EBADMSG;
                        n += uid ? TEXT_UID_PLAIN : TEXT_CREATED_PLAIN;
                        i += uid ? TEXT_UID_PACKED : TEXT_CREATED_PACKED;
                } else
                        n += t ? t->len : 1;
        }
        buf = malloc(n + 1);
        if (!buf)
                return -ENOMEM;
        n = 0;
        for (size_t i = 0; i < len; i++) {
                const TextToken *t = text_token_of((unsigned char) s[i]);

                if (s[i] == TEXT_CODE_UID) {
                        k = text_unpack_uid(s + i + 1, buf + n);
                        if (k < 0)
                                return k;
                        n += TEXT_UID_PLAIN;
                        i += TEXT_UID_PACKED;
                } else if (s[i] == TEXT_CODE_CREATED) {
                        k = text_unpack_created(s + i + 1, buf + n);
                        if (k < 0)
                                return k;
                        n += TEXT_CREATED_PLAIN;
                        i += TEXT_CREATED_PACKED;
                } else if (t) {
                        memcpy(buf + n, t->s, t->len);
                        n += t->len;
                } else
                        buf[n++] = s[i];
        }
        buf[n] = 0;
        k = cn_json_parse(buf, n, SIZE_MAX, &o, NULL);
        if (k < 0)
                return k;
        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        *ret = TAKE_PTR(o);
        return 0;
}

int cn_kube_object_from_text(json_object *text, json_object **ret) {
        assert(ret);
        if (!json_object_is_type(text, json_type_string))
                return -EBADMSG;
        return cn_kube_text_decode(json_object_get_string(text), (size_t) json_object_get_string_len(text), ret);
}

static int on_list_item(json_object *item, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);
        json_object *text = NULL;
        int k;

        if (!r->items_as_text) {
                /* Kept until the whole list is there, and by most callers long after: compacted
                 * now, so that the next item's parse reuses what this one's tables gave back. */
                cn_json_compact(item);
                return json_object_array_add(r->items, json_object_get(item)) < 0 ? -ENOMEM : 0;
        }
        k = cn_kube_object_to_text(item, &text);
        if (k == -EINVAL) {
                log_debug("Ignoring a list item that is not an object.");
                return 0;
        }
        if (k < 0)
                return k;
        if (json_object_array_add(r->items, text) < 0) {
                json_object_put(text);
                return -ENOMEM;
        }
        return 0;
}

static int on_list_data(CnHttpRequest *h, const void *data, size_t size, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);
        int k;

        k = cn_kube_list_parser_feed(r->list_parser, data, size);
        if (k < 0)
                r->list_error = k;
        return k;
}

/* A page starts (again): a fresh parser, and the items of an attempt cut short are dropped. */
static int list_page_start(CnKubeRequest *r) {
        size_t n;

        if (!r->items) {
                r->items = json_object_new_array();
                if (!r->items)
                        return -ENOMEM;
        }
        n = json_object_array_length(r->items);
        if (n > r->n_items_done && json_object_array_del_idx(r->items, r->n_items_done, n - r->n_items_done) < 0)
                return -ENOMEM;
        r->list_error = 0;
        r->list_parser = cn_kube_list_parser_free(r->list_parser);
        return cn_kube_list_parser_new(r->client->max_response, r->item_filter, on_list_item, r, &r->list_parser);
}

static int request_send(CnKubeRequest *r) {
        CnKubeClient *c = r->client;
        CnKubeConfig *cfg = c->config;
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *h = NULL;
        _cleanup_free_ char *url = NULL;
        const char *token = NULL;
        int k;

        url = cn_strjoin(cfg->server, r->path, NULL);
        if (!url)
                return -ENOMEM;

        k = cn_http_request_new(c->http, r->method, url, &h);
        if (k < 0)
                return k;
        if (r->resend_safe)
                cn_http_request_set_resend_safe(h);
        if ((k = cn_http_request_add_header(h, "Accept", "application/json")) < 0 ||
            (k = cn_http_request_add_header(h, "User-Agent", c->user_agent)) < 0)
                return k;

        k = cn_kube_config_get_token(cfg, &token);
        if (k < 0)
                return log_debug_errno(k, "Failed to read the bearer token file %s: %m", strna(cfg->token_file));
        if (token && (k = cn_http_request_set_bearer_token(h, token)) < 0)
                return k;

        if (cfg->ca_pem)
                k = cn_http_request_set_ca_pem(h, cfg->ca_pem, strlen(cfg->ca_pem));
        else if (cfg->ca_file)
                k = cn_http_request_set_ca_file(h, cfg->ca_file);
        if (k < 0)
                return k;
        if (cfg->client_cert_pem || cfg->client_key_pem) {
                /* A file and a data half may be mixed in a kubeconfig; lib/http takes pairs. */
                if (cfg->client_cert_pem && cfg->client_key_pem)
                        k = cn_http_request_set_client_cert_pem(h, cfg->client_cert_pem, strlen(cfg->client_cert_pem),
                                                                cfg->client_key_pem, strlen(cfg->client_key_pem));
                else
                        k = -EOPNOTSUPP;
        } else if (cfg->client_cert_file)
                k = cn_http_request_set_client_cert_file(h, cfg->client_cert_file, cfg->client_key_file);
        if (k < 0)
                return log_debug_errno(k, "Failed to set the client certificate: %m");

        if (r->body && (k = cn_http_request_set_body(h, r->body, r->body_size, r->content_type)) < 0)
                return k;

        cn_http_request_set_max_response(h, c->max_response);
        if (r->kind == REQUEST_WATCH) {
                cn_http_request_set_timeout(h, 0);
                cn_http_request_set_data_callback(h, on_watch_data, r);
                r->parser = cn_kube_watch_parser_free(r->parser);
                k = cn_kube_watch_parser_new(c->max_response, on_watch_event, r, &r->parser);
                if (k < 0)
                        return k;
                if (r->item_filter)
                        cn_kube_watch_parser_set_filter(r->parser, r->item_filter);
                r->idle_timer = sd_event_source_disable_unref(r->idle_timer);
                k = sd_event_add_time_relative(c->event, &r->idle_timer, CLOCK_MONOTONIC, r->idle_timeout, 0,
                                               on_watch_idle, r);
                if (k < 0)
                        return k;
                (void) sd_event_source_set_description(r->idle_timer, "kube-watch-idle");
        } else {
                cn_http_request_set_timeout(h, c->timeout);
                if (r->kind == REQUEST_LIST_ALL) {
                        k = list_page_start(r);
                        if (k < 0)
                                return k;
                        cn_http_request_set_data_callback(h, on_list_data, r);
                }
        }

        log_debug("%s %s", r->method, r->path);
        k = cn_http_request_submit(h, on_http_done, r);
        if (k < 0)
                return k;
        r->http = TAKE_PTR(h);
        return 0;
}

static bool is_read(const CnKubeRequest *r) {
        return streq(r->method, "GET");
}

/* Whether to try again, and the server's minimum delay (Retry-After) if it gave one. */
static bool should_retry(CnKubeRequest *r, CnHttpRequest *h, int error, long status, usec_t *ret_min_delay) {
        usec_t ra = 0;

        *ret_min_delay = 0;
        if (r->retries >= r->client->max_retries)
                return false;

        if (error < 0)
                /* Nothing reached the server when the connection could not be made. */
                return error == -ECONNREFUSED || error == -EHOSTUNREACH ||
                       (is_read(r) && r->kind != REQUEST_WATCH &&
                        (error == -ETIMEDOUT || error == -ECONNRESET || error == -EPROTO));

        if (cn_http_request_get_retry_after(h, &ra) >= 0)
                *ret_min_delay = MIN(ra, (usec_t) CN_KUBE_RETRY_AFTER_MAX_USEC);
        if (status == 429 && r->no_retry_429)
                return false;
        if (status == 429 || status == 503)
                return true;
        /* client-go retries any 5xx that carries Retry-After; reads are safe to repeat anyway. */
        if (status >= 500 && (*ret_min_delay > 0 || (is_read(r) && r->kind != REQUEST_WATCH)))
                return true;
        return false;
}

static int list_page_path(CnKubeRequest *r) {
        _cleanup_free_ char *q = NULL;
        CnKubeListOptions o = {
                .label_selector = r->label_selector,
                .field_selector = r->field_selector,
                .resource_version = r->continue_token ? NULL : r->resource_version,
                .limit = r->limit,
                .continue_token = r->continue_token,
        };
        char *p;
        int k;

        k = cn_kube_list_query(&o, false, &q);
        if (k < 0)
                return k;
        p = cn_strjoin(r->list_base, q, NULL);
        if (!p)
                return -ENOMEM;
        free(r->path);
        r->path = p;
        return 0;
}

/* A page arrived whole: its items join the list; returns 1 when another page is needed. */
static int list_all_page(CnKubeRequest *r) {
        _cleanup_json_ json_object *page = NULL;
        const char *cont;
        int k;

        k = cn_kube_list_parser_finish(r->list_parser, &page);
        if (k < 0)
                return k;
        r->list_parser = cn_kube_list_parser_free(r->list_parser);
        r->n_items_done = json_object_array_length(r->items);
        if (!r->accumulated)
                r->accumulated = json_object_get(page);

        cont = cn_json_string(page, "metadata", "continue", NULL);
        free(r->continue_token);
        r->continue_token = NULL;
        if (!isempty(cont)) {
                r->continue_token = strdup(cont);
                if (!r->continue_token)
                        return -ENOMEM;
                k = list_page_path(r);
                return k < 0 ? k : 1;
        }

        json_object *md = cn_json_get(r->accumulated, "metadata", NULL);
        if (md) {
                json_object_object_del(md, "continue");
                json_object_object_del(md, "remainingItemCount");
        }
        return cn_json_set(r->accumulated, json_object_get(r->items), "items", NULL);
}

static void on_http_done(CnHttpRequest *h, int error, void *userdata) {
        CnKubeRequest *r = ASSERT_PTR(userdata);
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *held = NULL;
        _cleanup_json_ json_object *obj = NULL;
        _cleanup_free_ char *generic = NULL;
        const char *reason = NULL, *message = NULL, *body;
        long status = 0;
        usec_t min_delay;
        size_t size = 0;
        int k;

        /* Our reference; the request stays valid until we return. */
        held = TAKE_PTR(r->http);
        if (error >= 0 || r->watch_error < 0)
                status = cn_http_request_get_status(h);
        count_request(r->client, r->method, status);

        if (r->zombie) {
                request_destroy(r);
                return;
        }

        if (r->kind == REQUEST_LIST_ALL && r->list_error < 0) {
                /* Not retried: the server would send the same again. */
                if (r->list_error == -E2BIG)
                        request_complete(r, -CN_KUBE_ETOOLARGE, status, NULL, NULL, "list page too large");
                else if (r->list_error == -EBADMSG)
                        request_complete(r, -CN_KUBE_EPROTO, status, NULL, NULL, "response is not valid JSON");
                else
                        request_complete(r, r->list_error, status, NULL, NULL, NULL);
                return;
        }

        if (r->kind == REQUEST_WATCH && status >= 200 && status < 300) {
                if (r->watch_error < 0)
                        request_complete(r, r->watch_error, status, NULL, NULL, r->watch_error_message);
                else if (error < 0)
                        request_complete(r, error, status, NULL, NULL, cn_http_request_get_error_message(h));
                else
                        /* The server ended the watch (timeoutSeconds, shutdown): normal; a partial
                         * event at the end is replayed by the next watch from the last version seen. */
                        request_complete(r, 0, status, NULL, NULL, NULL);
                return;
        }

        if (should_retry(r, h, error, status, &min_delay)) {
                usec_t d = cn_backoff_next(&r->backoff, min_delay);

                r->retries++;
                log_debug("%s %s: %s, retry %u in %" PRIu64 " ms.", r->method, r->path,
                          error < 0 ? strerror(-error) : "server busy", r->retries, d / USEC_PER_MSEC);
                k = request_schedule(r, d);
                if (k < 0)
                        request_complete(r, k, status, NULL, NULL, NULL);
                return;
        }

        if (error < 0) {
                request_complete(r, error, 0, NULL, NULL, cn_http_request_get_error_message(h));
                return;
        }

        body = cn_http_request_get_body(h, &size);
        if (size > 0 && (r->kind != REQUEST_LIST_ALL || status < 200 || status >= 300)) {
                k = cn_json_parse_filtered(body, size, r->client->max_response,
                                           status >= 200 && status < 300 ? r->filter : NULL, &obj, NULL);
                if (k < 0 && status >= 200 && status < 300) {
                        request_complete(r, -CN_KUBE_EPROTO, status, NULL, NULL, "response is not valid JSON");
                        return;
                }
        }

        if (status >= 200 && status < 300) {
                if (r->kind == REQUEST_LIST_ALL) {
                        k = list_all_page(r);
                        if (k == -EBADMSG) {
                                request_complete(r, -CN_KUBE_EPROTO, status, NULL, NULL, "response is not valid JSON");
                                return;
                        }
                        if (k > 0) {
                                cn_backoff_reset(&r->backoff);
                                r->retries = 0;
                                k = request_schedule(r, 0);
                                if (k < 0)
                                        request_complete(r, k, status, NULL, NULL, NULL);
                        } else if (k < 0)
                                request_complete(r, k, status, NULL, NULL, NULL);
                        else
                                request_complete(r, 0, status, r->accumulated, NULL, NULL);
                        return;
                }
                request_complete(r, 0, status, obj, NULL, NULL);
                return;
        }

        k = cn_kube_status_object_to_errno(status, obj, &reason, &message);
        if (r->kind == REQUEST_LIST_ALL && k == -CN_KUBE_EGONE && r->continue_token && !r->restarted) {
                /* The continue token expired between pages: start over with a fresh snapshot. */
                log_debug("%s: continue token expired, listing again from the start.", r->list_base);
                r->restarted = true;
                free(r->continue_token);
                r->continue_token = NULL;
                json_object_put(r->accumulated);
                r->accumulated = NULL;
                r->n_items_done = 0;
                k = list_page_path(r);
                if (k >= 0)
                        k = request_schedule(r, 0);
                if (k < 0)
                        request_complete(r, k, status, NULL, NULL, NULL);
                return;
        }
        if (!message) {
                if (asprintf(&generic, "HTTP status %ld", status) < 0)
                        generic = NULL;
                message = generic;
        }
        request_complete(r, k, status, obj, reason, message);
}

static int request_new(CnKubeClient *c, RequestKind kind, const char *method, const char *path, json_object *body,
                       const char *content_type, CnKubeCallback cb, CnKubeWatchHandler handler, void *userdata,
                       CnKubeRequest **ret) {
        CnKubeRequest *r;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->client = c;
        r->kind = kind;
        r->cb = cb;
        r->handler = handler;
        r->userdata = userdata;
        cn_backoff_init(&r->backoff, KUBE_BACKOFF_BASE, KUBE_BACKOFF_CAP);
        r->next = c->requests;
        if (c->requests)
                c->requests->prev = r;
        c->requests = r;
        c->n_requests++;

        r->method = strdup(method);
        r->path = strdup(path);
        if (!r->method || !r->path)
                goto oom;
        if (body) {
                const char *s = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN |
                                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
                if (!s)
                        goto oom;
                r->body = strdup(s);
                r->content_type = strdup(content_type ?: "application/json");
                if (!r->body || !r->content_type)
                        goto oom;
                r->body_size = strlen(r->body);
                r->resend_safe = streq(method, "POST") && !isempty(cn_json_string(body, "metadata", "name", NULL)) &&
                                 !cn_json_get(body, "metadata", "generateName", NULL);
        }
        *ret = r;
        return 0;

oom:
        request_destroy(r);
        return -ENOMEM;
}

static int request_queue(CnKubeRequest *r, CnKubeRequest **ret_request) {
        int k;

        k = request_schedule(r, 0);
        if (k < 0) {
                request_destroy(r);
                return k;
        }
        if (ret_request)
                *ret_request = r;
        else
                r->floating = true;
        return 0;
}

void cn_kube_request_set_filter(CnKubeRequest *r, const CnJsonFilter *f) {
        assert(r);
        r->filter = f;
}

void cn_kube_request_set_no_retry_429(CnKubeRequest *r) {
        assert(r);
        r->no_retry_429 = true;
}

int cn_kube_request(CnKubeClient *c, const char *method, const char *path, json_object *body,
                    const char *content_type, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        CnKubeRequest *r;
        int k;

        assert(c);
        assert(method);
        assert(path && path[0] == '/');

        k = request_new(c, REQUEST_PLAIN, method, path, body, content_type, cb, NULL, userdata, &r);
        if (k < 0)
                return k;
        return request_queue(r, ret_request);
}

int cn_kube_get(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                const char *subresource, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        _cleanup_free_ char *path = NULL;
        int k;

        if (!name)
                return -EINVAL;
        k = cn_kube_resource_path(r, ns, name, subresource, &path);
        if (k < 0)
                return k;
        return cn_kube_request(c, "GET", path, NULL, NULL, cb, userdata, ret_request);
}

int cn_kube_list(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                 CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        _cleanup_free_ char *path = NULL, *q = NULL, *full = NULL;
        int k;

        k = cn_kube_resource_path(r, ns, NULL, NULL, &path);
        if (k < 0)
                return k;
        k = cn_kube_list_query(o, false, &q);
        if (k < 0)
                return k;
        full = cn_strjoin(path, q, NULL);
        if (!full)
                return -ENOMEM;
        return cn_kube_request(c, "GET", full, NULL, NULL, cb, userdata, ret_request);
}

static int strdup_opt(const char *s, char **ret) {
        if (isempty(s)) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int cn_kube_list_all(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                     CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        _cleanup_free_ char *base = NULL;
        CnKubeRequest *req;
        int k;

        k = cn_kube_resource_path(r, ns, NULL, NULL, &base);
        if (k < 0)
                return k;
        k = request_new(c, REQUEST_LIST_ALL, "GET", base, NULL, NULL, cb, NULL, userdata, &req);
        if (k < 0)
                return k;
        req->list_base = TAKE_PTR(base);
        req->limit = o && o->limit > 0 ? o->limit : CN_KUBE_DEFAULT_PAGE_SIZE;
        req->item_filter = o ? o->filter : NULL;
        req->items_as_text = o && o->items_as_text;
        if (o && ((k = strdup_opt(o->label_selector, &req->label_selector)) < 0 ||
                  (k = strdup_opt(o->field_selector, &req->field_selector)) < 0 ||
                  (k = strdup_opt(o->resource_version, &req->resource_version)) < 0 ||
                  (k = strdup_opt(o->continue_token, &req->continue_token)) < 0)) {
                request_destroy(req);
                return k;
        }
        k = list_page_path(req);
        if (k < 0) {
                request_destroy(req);
                return k;
        }
        return request_queue(req, ret_request);
}

int cn_kube_watch(CnKubeClient *c, const CnKubeResource *r, const char *ns, const CnKubeListOptions *o,
                  CnKubeWatchHandler handler, CnKubeWatchEnd end, void *userdata, CnKubeRequest **ret_request) {
        _cleanup_free_ char *path = NULL, *q = NULL, *full = NULL;
        CnKubeRequest *req;
        int k;

        assert(handler);
        k = cn_kube_resource_path(r, ns, NULL, NULL, &path);
        if (k < 0)
                return k;
        k = cn_kube_list_query(o, true, &q);
        if (k < 0)
                return k;
        full = cn_strjoin(path, q, NULL);
        if (!full)
                return -ENOMEM;
        k = request_new(c, REQUEST_WATCH, "GET", full, NULL, NULL, end, handler, userdata, &req);
        if (k < 0)
                return k;
        req->item_filter = o ? o->filter : NULL;
        req->idle_timeout = o && o->timeout_seconds > 0
                                    ? o->timeout_seconds * 2 * USEC_PER_SEC + KUBE_WATCH_IDLE_GRACE
                                    : KUBE_WATCH_IDLE_DEFAULT;
        return request_queue(req, ret_request);
}

static int request_for_object(CnKubeClient *c, const char *method, const CnKubeResource *r, const char *ns,
                              const char *name, const char *subresource, json_object *body,
                              const char *content_type, CnKubeCallback cb, void *userdata,
                              CnKubeRequest **ret_request) {
        _cleanup_free_ char *path = NULL;
        int k;

        k = cn_kube_resource_path(r, ns, name, subresource, &path);
        if (k < 0)
                return k;
        return cn_kube_request(c, method, path, body, content_type, cb, userdata, ret_request);
}

int cn_kube_create(CnKubeClient *c, const CnKubeResource *r, const char *ns, json_object *object,
                   CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        assert(object);
        return request_for_object(c, "POST", r, ns, NULL, NULL, object, NULL, cb, userdata, ret_request);
}

int cn_kube_patch(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                  const char *subresource, CnKubePatchType type, json_object *patch, CnKubeCallback cb,
                  void *userdata, CnKubeRequest **ret_request) {
        static const char *const types[_CN_KUBE_PATCH_TYPE_MAX] = {
                [CN_KUBE_PATCH_MERGE] = "application/merge-patch+json",
                [CN_KUBE_PATCH_JSON] = "application/json-patch+json",
                [CN_KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
        };

        assert(patch);
        if (type < 0 || type >= _CN_KUBE_PATCH_TYPE_MAX || !name)
                return -EINVAL;
        if (type == CN_KUBE_PATCH_JSON && !json_object_is_type(patch, json_type_array))
                return -EINVAL;
        if (type != CN_KUBE_PATCH_JSON && !json_object_is_type(patch, json_type_object))
                return -EINVAL;
        return request_for_object(c, "PATCH", r, ns, name, subresource, patch, types[type], cb, userdata,
                                  ret_request);
}

int cn_kube_update(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                   const char *subresource, json_object *object, CnKubeCallback cb, void *userdata,
                   CnKubeRequest **ret_request) {
        assert(object);
        if (!name)
                return -EINVAL;
        return request_for_object(c, "PUT", r, ns, name, subresource, object, NULL, cb, userdata, ret_request);
}

int cn_kube_delete(CnKubeClient *c, const CnKubeResource *r, const char *ns, const char *name,
                   const CnKubeDeleteOptions *o, CnKubeCallback cb, void *userdata, CnKubeRequest **ret_request) {
        _cleanup_json_ json_object *body = NULL;

        if (!name)
                return -EINVAL;
        if (o && (o->precondition_uid || o->precondition_resource_version || o->propagation_policy)) {
                body = json_object_new_object();
                if (!body || cn_json_set_string(body, "DeleteOptions", "kind", NULL) < 0 ||
                    cn_json_set_string(body, "v1", "apiVersion", NULL) < 0)
                        return -ENOMEM;
                if (o->precondition_uid && cn_json_set_string(body, o->precondition_uid, "preconditions", "uid", NULL) < 0)
                        return -ENOMEM;
                if (o->precondition_resource_version &&
                    cn_json_set_string(body, o->precondition_resource_version, "preconditions", "resourceVersion",
                                       NULL) < 0)
                        return -ENOMEM;
                if (o->propagation_policy &&
                    cn_json_set_string(body, o->propagation_policy, "propagationPolicy", NULL) < 0)
                        return -ENOMEM;
        }
        return request_for_object(c, "DELETE", r, ns, name, NULL, body, NULL, cb, userdata, ret_request);
}

unsigned cn_kube_client_awaited(CnKubeClient *c) {
        return c ? cn_http_awaited(c->http) : 0;
}

int cn_kube_client_new(sd_event *e, CnKubeConfig *config, const CnKubeClientOptions *options,
                       CnKubeClient **ret) {
        CnKubeClient *c;
        usec_t now;
        int k;

        assert(e);
        assert(config);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        k = cn_http_new(e, &c->http);
        if (k >= 0 && options && options->max_connections > 0)
                k = cn_http_set_max_connections(c->http, options->max_connections);
        if (k < 0) {
                cn_http_free(c->http);
                free(c);
                return k;
        }
        if (asprintf(&c->user_agent, "cloudnode-%s/%s", options && options->component ? options->component : "client",
                     PACKAGE_VERSION) < 0) {
                cn_http_free(c->http);
                free(c);
                return -ENOMEM;
        }
        c->event = sd_event_ref(e);
        c->config = config;
        c->timeout = options && options->timeout_usec > 0 ? options->timeout_usec : CN_KUBE_DEFAULT_TIMEOUT_USEC;
        c->max_retries = !options || options->max_retries == 0 ? CN_KUBE_DEFAULT_MAX_RETRIES
                         : options->max_retries < 0           ? 0
                                                              : (unsigned) options->max_retries;
        c->max_response = options && options->max_response_size > 0 ? options->max_response_size
                                                                      : CN_KUBE_DEFAULT_MAX_RESPONSE;
        if (sd_event_now(e, CLOCK_MONOTONIC, &now) < 0)
                now = cn_now(CLOCK_MONOTONIC);
        cn_kube_rate_limiter_init(&c->limiter, options ? options->qps : 0, options ? options->burst : 0, now);

        *ret = c;
        return 0;
}

CnKubeClient *cn_kube_client_free(CnKubeClient *c) {
        if (!c)
                return NULL;
        while (c->requests)
                request_destroy(c->requests);
        cn_http_free(c->http);
        cn_kube_config_free(c->config);
        sd_event_unref(c->event);
        free(c->user_agent);
        free(c);
        return NULL;
}

sd_event *cn_kube_client_get_event(CnKubeClient *c) {
        assert(c);
        return c->event;
}

CnKubeConfig *cn_kube_client_get_config(CnKubeClient *c) {
        assert(c);
        return c->config;
}

unsigned cn_kube_client_pending(CnKubeClient *c) {
        assert(c);
        return c->n_requests;
}

uint64_t cn_kube_object_resource_version(json_object *o) {
        uint64_t v;

        return cn_safe_atou64(strempty(cn_json_string(o, "metadata", "resourceVersion", NULL)), &v) >= 0 ? v : 0;
}
