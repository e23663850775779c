/* SPDX-License-Identifier: Apache-2.0 */
/* Event recorder (see kube-event.h). Like client-go's EventCorrelator, an event identical to one
 * recorded recently becomes a PATCH of count/lastTimestamp on the existing Event, which keeps a
 * flapping condition from flooding etcd with Events. */
#include <limits.h>
#include <time.h>

#include "json-util.h"
#include "kube-event.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"

/* client-go's correlator remembers 4096 events; our daemons emit few kinds. */
#define EVENT_CACHE_MAX 1024U

/* The strings of an Event, packed one after the other (NUL-terminated, "" for none) in one
 * allocation: a create sent again (the Event expired) is built from them. Up to EVENT_CACHE_MAX
 * entries stay; the body's text would take several times as much, a json-c tree more still. */
enum {
        FIELD_NAME,      /* the Event object's */
        FIELD_NAMESPACE, /* the Event object's */
        FIELD_MESSAGE,
        FIELD_KIND, /* the involved object's, to FIELD_FIELD_PATH */
        FIELD_API_VERSION,
        FIELD_OBJECT_NAMESPACE,
        FIELD_OBJECT_NAME,
        FIELD_UID,
        FIELD_RESOURCE_VERSION,
        FIELD_FIELD_PATH,
        FIELD_REASON,
        FIELD_TYPE,
        FIELD_ACTION,
        _FIELD_MAX,
};

typedef struct EventEntry {
        CnKubeEventRecorder *recorder;
        CnKubeRequest *req;
        char *fields;        /* _FIELD_MAX packed strings */
        usec_t last_mono;
        usec_t first_realtime; /* the Event's firstTimestamp */
        uint32_t hash;       /* of the fields that make the Event what it is: event_hash() */
        unsigned count;      /* occurrences, as the server has it or will have it */
        bool created:1;      /* the Event exists on the server */
        bool creating:1;     /* the write in flight is the create */
        bool dirty:1;        /* repeats arrived while a write was in flight */
        struct EventEntry *lru_prev, *lru_next; /* by last_mono: the recorder's lru_first is the oldest */
} EventEntry;

/* What makes two events the same Event (client-go's aggregation key, less the source): the
 * involved object and the event's type, reason and message. */
static const unsigned identity_fields[] = {
        FIELD_KIND, FIELD_OBJECT_NAMESPACE, FIELD_OBJECT_NAME, FIELD_UID, FIELD_TYPE, FIELD_REASON, FIELD_MESSAGE,
};

struct CnKubeEventRecorder {
        CnKubeClient *client;
        char *component, *host, *instance;
        usec_t window;
        /* The entries from the least to the most recently recorded, so that making room takes the
         * first one without a write out instead of comparing them all. */
        EventEntry *lru_first, *lru_last;
        size_t n_entries;
        /* The entries by their identity: open addressing, linear probing, at most half full. One
         * lookup per event, not a walk of them all. */
        EventEntry **slots;
        size_t n_slots;
        unsigned pending;
};

static const char *const event_type_table[_CN_KUBE_EVENT_TYPE_MAX] = {
        [CN_KUBE_EVENT_NORMAL] = "Normal",
        [CN_KUBE_EVENT_WARNING] = "Warning",
};

int cn_kube_object_ref_from_json(json_object *object, const CnKubeResource *r, CnKubeObjectRef *ret) {
        const char *kind, *api_version;

        assert(ret);
        if (!object || isempty(cn_json_string(object, "metadata", "name", NULL)))
                return -EINVAL;

        /* Objects from lists carry neither kind nor apiVersion; the resource knows them. */
        kind = cn_json_string(object, "kind", NULL);
        api_version = cn_json_string(object, "apiVersion", NULL);
        if (!kind || !api_version) {
                if (!r || !r->kind)
                        return -EINVAL;
                kind = r->kind;
                api_version = r->version;
                if (!isempty(r->group)) {
                        if ((size_t) snprintf(ret->_api_version_buf, sizeof(ret->_api_version_buf), "%s/%s", r->group,
                                              r->version) >= sizeof(ret->_api_version_buf))
                                return -EINVAL;
                        api_version = ret->_api_version_buf;
                }
        }
        /* Field by field: assigning a whole struct would clear the buffer api_version may point to. */
        ret->kind = kind;
        ret->api_version = api_version;
        ret->namespace = cn_json_string(object, "metadata", "namespace", NULL);
        ret->name = cn_json_string(object, "metadata", "name", NULL);
        ret->uid = cn_json_string(object, "metadata", "uid", NULL);
        ret->resource_version = cn_json_string(object, "metadata", "resourceVersion", NULL);
        ret->field_path = NULL;
        return 0;
}

static EventEntry *entry_free(EventEntry *e) {
        if (!e)
                return NULL;
        if (e->req) {
                e->req = cn_kube_request_free(e->req);
                e->recorder->pending--;
        }
        free(e->fields);
        free(e);
        return NULL;
}

/* Packs v (NULL: "") into *ret. */
static int fields_pack(const char *const v[static _FIELD_MAX], char **ret) {
        size_t n = 0;
        char *p;

        for (size_t i = 0; i < _FIELD_MAX; i++)
                n += strlen(strempty(v[i])) + 1;
        p = *ret = malloc(n);
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < _FIELD_MAX; i++)
                p = stpcpy(p, strempty(v[i])) + 1;
        return 0;
}

static void fields_unpack(const char *packed, const char *ret[static _FIELD_MAX]) {
        for (size_t i = 0; i < _FIELD_MAX; i++) {
                ret[i] = packed;
                packed += strlen(packed) + 1;
        }
}

/* The i-th of the entry's packed fields. */
static const char *entry_field(const EventEntry *e, unsigned i) {
        const char *p = e->fields;

        for (; i > 0; i--)
                p += strlen(p) + 1;
        return p;
}

/* FNV-1a over the identity fields, each ended by its NUL. */
static uint32_t event_hash(const char *const v[static _FIELD_MAX]) {
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < ELEMENTSOF(identity_fields); i++) {
                const char *p = strempty(v[identity_fields[i]]);

                do
                        h = (h ^ (unsigned char) *p) * 16777619u;
                while (*p++);
        }
        return h;
}

static bool entry_is(const EventEntry *e, uint32_t hash, const char *const v[static _FIELD_MAX]) {
        const char *mine[_FIELD_MAX];

        if (e->hash != hash)
                return false;
        fields_unpack(e->fields, mine);
        for (size_t i = 0; i < ELEMENTSOF(identity_fields); i++)
                if (!streq(mine[identity_fields[i]], strempty(v[identity_fields[i]])))
                        return false;
        return true;
}

static size_t index_find(const CnKubeEventRecorder *r, uint32_t hash, const char *const v[static _FIELD_MAX]) {
        size_t mask = r->n_slots - 1;

        if (r->n_slots == 0)
                return SIZE_MAX;
        for (size_t s = hash & mask; r->slots[s]; s = (s + 1) & mask)
                if (entry_is(r->slots[s], hash, v))
                        return s;
        return SIZE_MAX;
}

static void index_place(EventEntry **slots, size_t n_slots, EventEntry *e) {
        size_t s;

        for (s = e->hash & (n_slots - 1); slots[s]; s = (s + 1) & (n_slots - 1))
                ;
        slots[s] = e;
}

/* Room in the index for one more entry than the recorder has. */
static int index_reserve(CnKubeEventRecorder *r) {
        EventEntry **slots;
        size_t n;

        if ((r->n_entries + 1) * 2 <= r->n_slots)
                return 0;
        n = r->n_slots ? r->n_slots * 2 : 16;
        slots = calloc(n, sizeof(EventEntry *));
        if (!slots)
                return -ENOMEM;
        for (size_t s = 0; s < r->n_slots; s++)
                if (r->slots[s])
                        index_place(slots, n, r->slots[s]);
        free(r->slots);
        r->slots = slots;
        r->n_slots = n;
        return 0;
}

static void index_remove(CnKubeEventRecorder *r, const EventEntry *e) {
        size_t mask = r->n_slots - 1, hole;

        for (hole = e->hash & mask; r->slots[hole] != e; hole = (hole + 1) & mask)
                assert(r->slots[hole]);
        /* Entries after the hole move back into it when their lookup passes it. */
        for (size_t s = (hole + 1) & mask; r->slots[s]; s = (s + 1) & mask) {
                size_t home = r->slots[s]->hash & mask;

                if (((s - home) & mask) >= ((s - hole) & mask)) {
                        r->slots[hole] = r->slots[s];
                        r->slots[s] = NULL;
                        hole = s;
                }
        }
        r->slots[hole] = NULL;
}

int cn_kube_event_recorder_new(CnKubeClient *c, const CnKubeEventRecorderOptions *o, CnKubeEventRecorder **ret) {
        CnKubeEventRecorder *r;
        char host[HOST_NAME_MAX + 1] = "";

        assert(c);
        assert(o);
        assert(ret);
        if (isempty(o->component))
                return -EINVAL;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->client = c;
        r->window = o->window_usec > 0 ? o->window_usec : CN_KUBE_EVENT_DEFAULT_WINDOW_USEC;
        r->component = strdup(o->component);
        r->host = o->host ? strdup(o->host) : NULL;
        if (o->instance)
                r->instance = strdup(o->instance);
        else {
                (void) gethostname(host, sizeof(host) - 1);
                r->instance = cn_strjoin(o->component, "-", host[0] ? host : "unknown", NULL);
        }
        if (!r->component || (o->host && !r->host) || !r->instance) {
                cn_kube_event_recorder_free(r);
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

CnKubeEventRecorder *cn_kube_event_recorder_free(CnKubeEventRecorder *r) {
        if (!r)
                return NULL;
        for (EventEntry *e = r->lru_first, *next; e; e = next) {
                next = e->lru_next;
                entry_free(e);
        }
        free(r->slots);
        free(r->component);
        free(r->host);
        free(r->instance);
        free(r);
        return NULL;
}

unsigned cn_kube_event_recorder_pending(CnKubeEventRecorder *r) {
        assert(r);
        return r->pending;
}

static usec_t now_mono(CnKubeEventRecorder *r) {
        usec_t t;

        if (sd_event_now(cn_kube_client_get_event(r->client), CLOCK_MONOTONIC, &t) < 0)
                t = cn_now(CLOCK_MONOTONIC);
        return t;
}

static void now_timestamp(char buf[static CN_FORMAT_TIMESTAMP_MAX]) {
        if (cn_format_rfc3339(cn_now(CLOCK_REALTIME), false, buf, CN_FORMAT_TIMESTAMP_MAX) < 0)
                buf[0] = 0;
}

static int entry_send(EventEntry *e);

static void on_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        EventEntry *e = ASSERT_PTR(userdata);
        int k;

        e->req = cn_kube_request_free(e->req);
        e->recorder->pending--;

        if (result->error >= 0 || (result->error == -CN_KUBE_EALREADYEXISTS && e->creating))
                /* AlreadyExists: ours, from a create sent again after a lost answer (or by an
                 * earlier life of this recorder); later repeats patch it. */
                e->created = true;
        else if (result->error == -CN_KUBE_ENOTFOUND && !e->creating) {
                /* The Event expired server-side (events have a TTL): create it afresh. */
                log_debug("Event %s/%s is gone, creating it again.", entry_field(e, FIELD_NAMESPACE),
                          entry_field(e, FIELD_NAME));
                e->created = false;
                e->dirty = true;
        } else
                /* Dropped, as client-go does after its retries; the next repeat tries again. */
                log_debug_errno(result->error, "Failed to write Event %s/%s: %s", entry_field(e, FIELD_NAMESPACE),
                                entry_field(e, FIELD_NAME), strna(result->message));

        if (!e->dirty)
                return;
        e->dirty = false;
        k = entry_send(e);
        if (k < 0)
                log_debug_errno(k, "Failed to write Event %s/%s: %m", entry_field(e, FIELD_NAMESPACE),
                                entry_field(e, FIELD_NAME));
}

static json_object *count_value(EventEntry *e) {
        return json_object_new_int((int32_t) MIN(e->count, (unsigned) INT32_MAX));
}

static const CnJsonFilter event_answer_metadata[] = { { "name" }, {} };
static const CnJsonFilter event_answer[] = { { "metadata", event_answer_metadata }, {} };

/* Writes the entry's current state: a create the first time, a count/lastTimestamp patch after.
 * built: the create's body as build_create_body() made it, when at hand (else built again from
 * its text); lastTimestamp and count are set in it. */
static int build_create_body(CnKubeEventRecorder *r, EventEntry *e, json_object **ret);

static int entry_send_built(EventEntry *e, json_object *built) {
        CnKubeEventRecorder *r = e->recorder;
        _cleanup_json_ json_object *patch = NULL;
        char ts[CN_FORMAT_TIMESTAMP_MAX];
        const char *v[_FIELD_MAX];
        int k;

        if (e->req) {
                e->dirty = true;
                return 0;
        }
        fields_unpack(e->fields, v);
        now_timestamp(ts);

        if (!e->created) {
                _cleanup_json_ json_object *body = NULL;

                if (built)
                        body = json_object_get(built);
                else if ((k = build_create_body(r, e, &body)) < 0)
                        return k;
                if ((k = cn_json_set_string(body, ts, "lastTimestamp", NULL)) < 0 ||
                    (k = cn_json_set(body, count_value(e), "count", NULL)) < 0)
                        return k;
                k = cn_kube_create(r->client, &cn_kube_resource_events, v[FIELD_NAMESPACE], body, on_written, e,
                                  &e->req);
        } else {
                patch = json_object_new_object();
                if (!patch)
                        return -ENOMEM;
                if ((k = cn_json_set(patch, count_value(e), "count", NULL)) < 0 ||
                    (k = cn_json_set_string(patch, ts, "lastTimestamp", NULL)) < 0 ||
                    (k = cn_json_set_string(patch, v[FIELD_MESSAGE], "message", NULL)) < 0)
                        return k;
                k = cn_kube_patch(r->client, &cn_kube_resource_events, v[FIELD_NAMESPACE], v[FIELD_NAME], NULL,
                                  CN_KUBE_PATCH_MERGE, patch, on_written, e, &e->req);
        }
        if (k < 0)
                return k;
        /* The answer is not read beyond its status: its tree is not built. */
        cn_kube_request_set_filter(e->req, event_answer);
        e->creating = !e->created;
        r->pending++;
        return 0;
}

static int entry_send(EventEntry *e) {
        return entry_send_built(e, NULL);
}

/* The create's body, from the entry's fields. */
static int build_create_body(CnKubeEventRecorder *r, EventEntry *e, json_object **ret) {
        _cleanup_json_ json_object *ev = NULL;
        char first[CN_FORMAT_TIMESTAMP_MAX];
        const char *v[_FIELD_MAX];
        int k;

        fields_unpack(e->fields, v);
        if (cn_format_rfc3339(e->first_realtime, false, first, sizeof(first)) < 0)
                first[0] = 0;
        ev = json_object_new_object();
        struct {
                const char *value;
                const char *k1, *k2;
        } fields[] = {
                { "v1", "apiVersion", NULL },
                { "Event", "kind", NULL },
                { v[FIELD_NAME], "metadata", "name" },
                { v[FIELD_NAMESPACE], "metadata", "namespace" },
                { v[FIELD_KIND], "involvedObject", "kind" },
                { v[FIELD_API_VERSION], "involvedObject", "apiVersion" },
                { v[FIELD_OBJECT_NAMESPACE], "involvedObject", "namespace" },
                { v[FIELD_OBJECT_NAME], "involvedObject", "name" },
                { v[FIELD_UID], "involvedObject", "uid" },
                { v[FIELD_RESOURCE_VERSION], "involvedObject", "resourceVersion" },
                { v[FIELD_FIELD_PATH], "involvedObject", "fieldPath" },
                { v[FIELD_REASON], "reason", NULL },
                { v[FIELD_MESSAGE], "message", NULL },
                { v[FIELD_TYPE], "type", NULL },
                { r->component, "source", "component" },
                { r->host, "source", "host" },
                { first, "firstTimestamp", NULL },
                { r->component, "reportingComponent", NULL },
                { r->instance, "reportingInstance", NULL },
                { v[FIELD_ACTION], "action", NULL },
        };

        if (!ev)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                if (isempty(fields[i].value))
                        continue;
                k = cn_json_set_string(ev, fields[i].value, fields[i].k1, fields[i].k2, NULL);
                if (k < 0)
                        return k;
        }
        *ret = TAKE_PTR(ev);
        return 0;
}

/* Room for one more entry: drop the least recently used idle entry when full. */
static void lru_unlink(CnKubeEventRecorder *r, EventEntry *e) {
        if (e->lru_prev)
                e->lru_prev->lru_next = e->lru_next;
        else if (r->lru_first == e)
                r->lru_first = e->lru_next;
        if (e->lru_next)
                e->lru_next->lru_prev = e->lru_prev;
        else if (r->lru_last == e)
                r->lru_last = e->lru_prev;
        e->lru_prev = e->lru_next = NULL;
}

/* e was recorded now: the most recent entry. */
static void lru_touch(CnKubeEventRecorder *r, EventEntry *e, usec_t now) {
        e->last_mono = now;
        if (r->lru_last == e)
                return;
        lru_unlink(r, e);
        e->lru_prev = r->lru_last;
        if (r->lru_last)
                r->lru_last->lru_next = e;
        else
                r->lru_first = e;
        r->lru_last = e;
}

/* Room for one more entry: the least recently recorded one without a write out goes when the
 * cache is full. */
static int make_room(CnKubeEventRecorder *r) {
        EventEntry *victim;

        if (r->n_entries < EVENT_CACHE_MAX)
                return index_reserve(r) < 0 ? -ENOMEM : 0;
        for (victim = r->lru_first; victim && victim->req; victim = victim->lru_next)
                ;
        if (!victim)
                return -EBUSY;
        index_remove(r, victim);
        lru_unlink(r, victim);
        entry_free(victim);
        r->n_entries--;
        return 0;
}

int cn_kube_event_recordv(CnKubeEventRecorder *r, const CnKubeObjectRef *o, CnKubeEventType type,
                          const char *reason, const char *action, const char *format, va_list ap) {
        _cleanup_free_ char *message = NULL, *name = NULL, *fields = NULL;
        _cleanup_json_ json_object *built = NULL;
        const char *v[_FIELD_MAX] = {};
        EventEntry *e;
        uint32_t hash;
        usec_t now;
        size_t s;
        int k;

        assert(r);
        assert(o);
        if (isempty(reason) || isempty(o->name) || isempty(o->kind) || type < 0 || type >= _CN_KUBE_EVENT_TYPE_MAX)
                return -EINVAL;

        if (vasprintf(&message, format, ap) < 0)
                return -ENOMEM;
        if (strlen(message) > CN_KUBE_EVENT_MAX_MESSAGE) {
                /* Cut at a UTF-8 character boundary. */
                size_t l = CN_KUBE_EVENT_MAX_MESSAGE;
                while (l > 0 && ((unsigned char) message[l] & 0xC0) == 0x80)
                        l--;
                message[l] = 0;
        }

        v[FIELD_KIND] = o->kind;
        v[FIELD_OBJECT_NAMESPACE] = o->namespace;
        v[FIELD_OBJECT_NAME] = o->name;
        v[FIELD_UID] = o->uid;
        v[FIELD_TYPE] = event_type_table[type];
        v[FIELD_REASON] = reason;
        v[FIELD_MESSAGE] = message;
        hash = event_hash(v);
        now = now_mono(r);
        s = index_find(r, hash, v);
        e = s == SIZE_MAX ? NULL : r->slots[s];

        if (e && now - e->last_mono < r->window) {
                e->count++;
                lru_touch(r, e, now);
                return entry_send(e);
        }

        /* A new Event: client-go names them "<object>.<unix nanoseconds in hex>". */
        if (asprintf(&name, "%s.%" PRIx64, o->name, (uint64_t) cn_now(CLOCK_REALTIME) * 1000) < 0)
                return -ENOMEM;
        v[FIELD_NAME] = name;
        v[FIELD_NAMESPACE] = isempty(o->namespace) ? "default" : o->namespace;
        v[FIELD_API_VERSION] = o->api_version;
        v[FIELD_RESOURCE_VERSION] = o->resource_version;
        v[FIELD_FIELD_PATH] = o->field_path;
        v[FIELD_ACTION] = action;
        k = fields_pack(v, &fields);
        if (k < 0)
                return k;

        if (!e) {
                k = make_room(r);
                if (k < 0)
                        return k;
                e = calloc(1, sizeof(*e));
                if (!e)
                        return -ENOMEM;
                e->recorder = r;
                e->hash = hash;
                r->n_entries++;
                index_place(r->slots, r->n_slots, e);
        } else if (e->req) {
                /* A new Event is due but the last write is still out: let it finish first. */
                e->req = cn_kube_request_free(e->req);
                r->pending--;
        }

        free(e->fields);
        e->fields = TAKE_PTR(fields);
        e->count = 1;
        e->created = false;
        e->dirty = false;
        lru_touch(r, e, now);
        e->first_realtime = cn_now(CLOCK_REALTIME);

        k = build_create_body(r, e, &built);
        if (k < 0)
                return k;
        return entry_send_built(e, built);
}

int cn_kube_event_record(CnKubeEventRecorder *r, const CnKubeObjectRef *object, CnKubeEventType type,
                         const char *reason, const char *action, const char *format, ...) {
        va_list ap;
        int k;

        va_start(ap, format);
        k = cn_kube_event_recordv(r, object, type, reason, action, format, ap);
        va_end(ap);
        return k;
}
