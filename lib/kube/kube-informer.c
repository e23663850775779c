/* SPDX-License-Identifier: Apache-2.0 */
/* Informer (see kube-informer.h): list, then watch from the list's resourceVersion; keep a cache
 * keyed "namespace/name" (kube-store.h), each object compacted (cn_json_compact()) since it is
 * kept until it changes, or with store_text its text; tell handlers what changed. */
#include "backoff.h"
#include "hash-util.h"
#include "json-util.h"
#include "kube-informer.h"
#include "kube-store.h"
#include "log.h"
#include "string-util.h"

#define INFORMER_BACKOFF_BASE (1 * USEC_PER_SEC)
#define INFORMER_BACKOFF_CAP (30 * USEC_PER_SEC)
/* client-go: a random server-side watch timeout between 5 and 10 minutes spreads reconnects. */
#define INFORMER_MIN_WATCH_TIMEOUT_SEC 300U

typedef struct Handlers {
        uint64_t id;
        CnKubeInformerHandlers h;
        void *userdata;
        bool replay_pending;
        bool removed;
        struct Handlers *next;
} Handlers;

#define TREE_CACHE_SIZE 64

typedef CnKubeStoreEntry Entry;

struct CnKubeInformer {
        unsigned n_ref;
        CnKubeClient *client;
        CnKubeResource resource;
        char *group, *version, *resource_name, *kind;
        char *namespace, *label_selector, *field_selector;
        unsigned page_size, watch_timeout_sec;
        const CnJsonFilter *filter;
        bool shared;
        bool store_text;

        CnKubeStore cache;
        json_object *scratch; /* store_text: the trees lookups handed out, until the next iteration */
        /* store_text: the trees of the entries parsed last (a sync looks one Node up several times,
         * and the watch event of its write compares with the version it read). A slot is emptied
         * when its entry is freed (entry_free()), so an address reused is never taken for it. */
        struct {
                const Entry *entry;
                json_object *tree;
        } trees[TREE_CACHE_SIZE];
        unsigned trees_next;
        sd_event_source *scratch_defer;
        char *resource_version;
        bool started, synced;
        bool not_served; /* the last list or watch answered 404 */
        int list_error;   /* the last list's error, 0 once one succeeded */

        CnKubeRequest *list_req, *watch_req;
        sd_event_source *retry_timer, *replay_defer;
        CnBackoff backoff;
        uint64_t watch_restarts;

        Handlers *handlers;
        uint64_t next_id;
        unsigned dispatching;

        CnKubeInformer *registry_next;
};

/* Shared informers of all clients; single-threaded like the event loop that drives them. */
static CnKubeInformer *registry;

static int informer_list(CnKubeInformer *i);
static int informer_watch(CnKubeInformer *i);

int cn_kube_object_key(json_object *object, char **ret) {
        const char *ns = cn_json_string(object, "metadata", "namespace", NULL),
                   *name = cn_json_string(object, "metadata", "name", NULL);
        char *k;

        assert(ret);
        if (isempty(name))
                return -EINVAL;
        k = isempty(ns) ? strdup(name) : cn_strjoin(ns, "/", name, NULL);
        if (!k)
                return -ENOMEM;
        *ret = k;
        return 0;
}

static bool streq_opt(const char *a, const char *b) {
        return streq(strempty(a), strempty(b));
}

static int dup_opt(const char *s, char **ret) {
        *ret = NULL;
        if (isempty(s))
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* Frees an entry and forgets its tree: the address may be reused by the next entry. */
static void entry_free(CnKubeInformer *i, Entry *e) {
        if (!e)
                return;
        for (size_t k = 0; k < ELEMENTSOF(i->trees); k++)
                if (i->trees[k].entry == e) {
                        json_object_put(i->trees[k].tree);
                        i->trees[k] = (typeof(i->trees[k])){};
                }
        cn_kube_store_entry_free(e);
}

static void entry_free_cb(Entry *e, void *userdata) {
        entry_free(userdata, e);
}

static void store_clear(CnKubeInformer *i, CnKubeStore *st) {
        cn_kube_store_clear(st, entry_free_cb, i);
}

static void informer_stop(CnKubeInformer *i) {
        i->list_req = cn_kube_request_free(i->list_req);
        i->watch_req = cn_kube_request_free(i->watch_req);
        i->retry_timer = sd_event_source_disable_unref(i->retry_timer);
        i->replay_defer = sd_event_source_disable_unref(i->replay_defer);
}

static void handlers_gc(CnKubeInformer *i) {
        if (i->dispatching > 0)
                return;
        for (Handlers **h = &i->handlers; *h;) {
                if ((*h)->removed) {
                        Handlers *d = *h;
                        *h = d->next;
                        free(d);
                } else
                        h = &(*h)->next;
        }
}

static CnKubeInformer *informer_free(CnKubeInformer *i) {
        informer_stop(i);
        if (i->shared)
                for (CnKubeInformer **p = &registry; *p; p = &(*p)->registry_next)
                        if (*p == i) {
                                *p = i->registry_next;
                                break;
                        }
        while (i->handlers) {
                Handlers *h = i->handlers;
                i->handlers = h->next;
                free(h);
        }
        store_clear(i, &i->cache);
        for (size_t k = 0; k < ELEMENTSOF(i->trees); k++)
                json_object_put(i->trees[k].tree);
        i->scratch_defer = sd_event_source_disable_unref(i->scratch_defer);
        json_object_put(i->scratch);
        free(i->resource_version);
        free(i->group);
        free(i->version);
        free(i->resource_name);
        free(i->kind);
        free(i->namespace);
        free(i->label_selector);
        free(i->field_selector);
        free(i);
        return NULL;
}

CnKubeInformer *cn_kube_informer_ref(CnKubeInformer *i) {
        if (i)
                i->n_ref++;
        return i;
}

CnKubeInformer *cn_kube_informer_unref(CnKubeInformer *i) {
        if (!i)
                return NULL;
        assert(i->n_ref > 0);
        if (--i->n_ref == 0)
                informer_free(i);
        return NULL;
}

int cn_kube_informer_new(CnKubeClient *c, const CnKubeResource *r, const CnKubeInformerOptions *o,
                         CnKubeInformer **ret) {
        CnKubeInformer *i;
        int k;

        assert(c);
        assert(r);
        assert(ret);

        if (o && !isempty(o->namespace) && !r->namespaced)
                return -EINVAL;

        i = calloc(1, sizeof(*i));
        if (!i)
                return -ENOMEM;
        i->n_ref = 1;
        i->client = c;
        i->next_id = 1;
        cn_backoff_init(&i->backoff, INFORMER_BACKOFF_BASE, INFORMER_BACKOFF_CAP);

        /* Own copies, so callers may pass resources built on the stack. */
        if (dup_opt(r->group, &i->group) < 0 || dup_opt(r->version, &i->version) < 0 ||
            dup_opt(r->resource, &i->resource_name) < 0 || dup_opt(r->kind, &i->kind) < 0)
                goto oom;
        i->resource = (CnKubeResource){ i->group, i->version, i->resource_name, i->kind, r->namespaced };

        if (o) {
                if (dup_opt(o->namespace, &i->namespace) < 0 || dup_opt(o->label_selector, &i->label_selector) < 0 ||
                    dup_opt(o->field_selector, &i->field_selector) < 0)
                        goto oom;
                i->page_size = o->page_size;
                i->watch_timeout_sec = o->watch_timeout_sec;
                i->filter = o->filter;
                i->store_text = o->store_text;
        }
        if (i->watch_timeout_sec == 0) {
                uint64_t rnd = 0;

                (void) cn_random_u64(&rnd);
                i->watch_timeout_sec = INFORMER_MIN_WATCH_TIMEOUT_SEC + (unsigned) (rnd % INFORMER_MIN_WATCH_TIMEOUT_SEC);
        }

        *ret = i;
        return 0;

oom:
        k = -ENOMEM;
        informer_free(i);
        return k;
}

int cn_kube_informer_get_shared(CnKubeClient *c, const CnKubeResource *r, const CnKubeInformerOptions *o,
                                CnKubeInformer **ret) {
        CnKubeInformer *i;
        int k;

        for (i = registry; i; i = i->registry_next)
                if (i->client == c && streq_opt(i->group, r->group) && streq_opt(i->version, r->version) &&
                    streq_opt(i->resource_name, r->resource) && streq_opt(i->namespace, o ? o->namespace : NULL) &&
                    streq_opt(i->label_selector, o ? o->label_selector : NULL) &&
                    streq_opt(i->field_selector, o ? o->field_selector : NULL) &&
                    i->filter == (o ? o->filter : NULL) && i->store_text == (o && o->store_text)) {
                        *ret = cn_kube_informer_ref(i);
                        return 0;
                }

        k = cn_kube_informer_new(c, r, o, &i);
        if (k < 0)
                return k;
        i->shared = true;
        i->registry_next = registry;
        registry = i;
        *ret = i;
        return 0;
}

bool cn_kube_informer_is_served(CnKubeInformer *i) {
        assert(i);
        return !i->not_served;
}

int cn_kube_informer_get_list_error(CnKubeInformer *i) {
        assert(i);
        return i->list_error;
}

bool cn_kube_informer_has_synced(CnKubeInformer *i) {
        assert(i);
        return i->synced;
}

const char *cn_kube_informer_get_resource_version(CnKubeInformer *i) {
        assert(i);
        return i->resource_version;
}

const CnKubeResource *cn_kube_informer_get_resource(CnKubeInformer *i) {
        assert(i);
        return &i->resource;
}

/* The entry the cache keeps of an object under key: the tree itself (compacted), or its text.
 * NULL when out of memory. */
static Entry *entry_of_object(CnKubeInformer *i, const char *key, json_object *object) {
        _cleanup_free_ char *text = NULL;
        size_t len;

        if (!i->store_text) {
                cn_json_compact(object);
                return cn_kube_store_entry_new(key, object, NULL, 0);
        }
        if (cn_kube_text_encode(object, &text, &len) < 0)
                return NULL;
        return cn_kube_store_entry_new(key, NULL, text, len);
}

/* store_text: remembers tree as the parsed form of e (the tree referenced), in place of the
 * oldest pair. */
static void tree_cache_put(CnKubeInformer *i, const Entry *e, json_object *tree) {
        unsigned k = i->trees_next++ % ELEMENTSOF(i->trees);

        json_object_put(i->trees[k].tree);
        i->trees[k].entry = e;
        i->trees[k].tree = json_object_get(tree);
}

/* A new reference to the tree of a cached entry: its own tree, or its text parsed (once for the
 * entries parsed last; the tree is shared then, as the cache's trees are without store_text, and
 * nobody changes it). NULL only when out of memory (the text is our own serialization). */
static json_object *value_tree(CnKubeInformer *i, const Entry *e) {
        json_object *o = NULL;
        int k;

        if (!i->store_text)
                return json_object_get(e->tree);
        for (size_t n = 0; n < ELEMENTSOF(i->trees); n++)
                if (i->trees[n].entry == e)
                        return json_object_get(i->trees[n].tree);
        k = cn_kube_text_decode(cn_kube_store_entry_text(e), e->text_len, &o);
        if (k < 0) {
                log_debug_errno(k, "Cannot parse a cached %s object: %m", i->resource_name);
                return NULL;
        }
        tree_cache_put(i, e, o);
        return o;
}

/* store_text: whether two cached entries are the same text (then nothing changed). */
static bool value_same_text(CnKubeInformer *i, const Entry *a, const Entry *b) {
        return i->store_text && a->text_len == b->text_len && memcmp(cn_kube_store_entry_text(a), cn_kube_store_entry_text(b), a->text_len) == 0;
}

static bool same_version(json_object *a, json_object *b) {
        return streq_opt(cn_json_string(a, "metadata", "resourceVersion", NULL),
                         cn_json_string(b, "metadata", "resourceVersion", NULL));
}

static int on_scratch_release(sd_event_source *s, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        size_t n = i->scratch ? json_object_array_length(i->scratch) : 0;

        if (n > 0)
                (void) json_object_array_del_idx(i->scratch, 0, n);
        return 0;
}

/* Keeps a tree a lookup hands out until the event loop's next iteration. */
static int scratch_keep(CnKubeInformer *i, json_object *tree) {
        int k;

        if (!i->scratch) {
                i->scratch = json_object_new_array();
                if (!i->scratch)
                        return -ENOMEM;
        }
        if (!i->scratch_defer) {
                k = sd_event_add_defer(cn_kube_client_get_event(i->client), &i->scratch_defer, on_scratch_release, i);
                if (k < 0)
                        return k;
                /* Before anything else: a defer source that stays on (a work queue with work)
                 * would otherwise be dispatched first on every iteration, and the trees pile up. */
                k = sd_event_source_set_priority(i->scratch_defer, SD_EVENT_PRIORITY_IMPORTANT);
                if (k < 0)
                        return k;
                (void) sd_event_source_set_description(i->scratch_defer, "kube-informer-scratch");
        }
        if (json_object_array_add(i->scratch, json_object_get(tree)) < 0) {
                json_object_put(tree);
                return -ENOMEM;
        }
        return sd_event_source_set_enabled(i->scratch_defer, SD_EVENT_ONESHOT);
}

json_object *cn_kube_informer_get(CnKubeInformer *i, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;
        const Entry *e;

        assert(i);
        if (isempty(name))
                return NULL;
        key = isempty(ns) ? strdup(name) : cn_strjoin(ns, "/", name, NULL);
        if (!key)
                return NULL;
        e = cn_kube_store_get(&i->cache, key);
        return e ? value_tree(i, e) : NULL;
}

json_object *cn_kube_informer_lookup(CnKubeInformer *i, const char *ns, const char *name) {
        _cleanup_json_ json_object *tree = cn_kube_informer_get(i, ns, name);

        if (!tree || !i->store_text)
                return tree; /* the cache's own reference keeps it */
        if (scratch_keep(i, tree) < 0) {
                log_debug("Out of memory looking up %s %s.", i->resource_name, name);
                return NULL;
        }
        return tree; /* the scratch array holds it */
}

uint64_t cn_kube_informer_get_watch_restarts(CnKubeInformer *i) {
        assert(i);
        return i->watch_restarts;
}

size_t cn_kube_informer_size(CnKubeInformer *i) {
        assert(i);
        return i->cache.n;
}

int cn_kube_informer_foreach(CnKubeInformer *i, CnKubeInformerForeachFn fn, void *userdata) {
        Entry *e;

        assert(i);
        assert(fn);
        CN_KUBE_STORE_FOREACH(e, &i->cache) {
                _cleanup_json_ json_object *tree = value_tree(i, e);
                int k;

                if (!tree)
                        return -ENOMEM;
                k = fn(tree, userdata);
                if (k < 0)
                        return k;
        }
        return 0;
}

typedef enum Notify {
        NOTIFY_ADDED,
        NOTIFY_UPDATED,
        NOTIFY_DELETED,
        NOTIFY_SYNCED,
        NOTIFY_SERVED,
        NOTIFY_NOT_SERVED,
} Notify;

/* Tells every live handler set; ones still waiting for their replay see the change then. */
static void notify(CnKubeInformer *i, Notify what, json_object *old, json_object *object) {
        cn_kube_informer_ref(i);
        i->dispatching++;
        for (Handlers *h = i->handlers; h; h = h->next) {
                if (h->removed || h->replay_pending)
                        continue;
                switch (what) {
                case NOTIFY_ADDED:
                        if (h->h.added)
                                h->h.added(i, object, h->userdata);
                        break;
                case NOTIFY_UPDATED:
                        if (h->h.updated)
                                h->h.updated(i, old, object, h->userdata);
                        break;
                case NOTIFY_DELETED:
                        if (h->h.deleted)
                                h->h.deleted(i, object, h->userdata);
                        break;
                case NOTIFY_SYNCED:
                        if (h->h.synced)
                                h->h.synced(i, h->userdata);
                        break;
                case NOTIFY_SERVED:
                case NOTIFY_NOT_SERVED:
                        if (h->h.served)
                                h->h.served(i, what == NOTIFY_SERVED, h->userdata);
                        break;
                }
        }
        i->dispatching--;
        handlers_gc(i);
        cn_kube_informer_unref(i);
}

/* 404 on a list or watch: the resource's API is not installed (yet, or any more). */
static void set_served(CnKubeInformer *i, bool served) {
        if (i->not_served == !served)
                return;
        i->not_served = !served;
        notify(i, served ? NOTIFY_SERVED : NOTIFY_NOT_SERVED, NULL, NULL);
}

static int set_resource_version(CnKubeInformer *i, const char *rv) {
        char *n;

        if (isempty(rv))
                return 0;
        n = strdup(rv);
        if (!n)
                return -ENOMEM;
        free(i->resource_version);
        i->resource_version = n;
        return 0;
}

static void schedule_retry(CnKubeInformer *i, bool relist, int error);

/* The entry of a list item (a tree, or with items_as_text its text); *ret NULL when the item has
 * no name. */
static int entry_of_item(CnKubeInformer *i, json_object *item, Entry **ret) {
        _cleanup_json_ json_object *tree = NULL;
        _cleanup_free_ char *key = NULL;
        const char *text = NULL;
        size_t len = 0;

        *ret = NULL;
        if (i->store_text && json_object_is_type(item, json_type_string)) {
                text = json_object_get_string(item);
                len = (size_t) json_object_get_string_len(item);
                /* A cluster-scoped object's key is its name, mostly read from the text as it is. */
                if (!i->resource.namespaced)
                        key = cn_kube_text_plain_name(text, len);
                if (!key && cn_kube_text_decode(text, len, &tree) < 0)
                        return -ENOMEM; /* our own text: only memory fails */
        } else
                tree = json_object_get(item);
        if (!key && cn_kube_object_key(tree, &key) < 0) {
                log_debug("Ignoring %s list item without a name.", i->resource_name);
                return 0;
        }
        /* Compacted already by list_all as each item arrived, or its text. */
        *ret = text ? cn_kube_store_entry_new(key, NULL, text, len) : entry_of_object(i, key, tree);
        return *ret ? 0 : -ENOMEM;
}

/* Replace the cache with a fresh list and deliver the difference. */
static int informer_replace(CnKubeInformer *i, json_object *list) {
        CnKubeStore fresh = {}, old;
        json_object *items = NULL;
        Entry *e;
        bool first = !i->synced;
        int k;

        (void) cn_json_get_array(list, &items, "items", NULL);
        for (size_t n = 0, len = items ? json_object_array_length(items) : 0; n < len; n++) {
                Entry *item = NULL, *dup = NULL;

                k = entry_of_item(i, json_object_array_get_idx(items, n), &item);
                if (k == 0 && item)
                        k = cn_kube_store_put(&fresh, item, &dup);
                if (k < 0) {
                        entry_free(i, item);
                        store_clear(i, &fresh);
                        return k;
                }
                entry_free(i, dup);
                /* The list's copy goes now: the whole list is never held twice. */
                (void) json_object_array_put_idx(items, n, NULL);
        }

        k = set_resource_version(i, cn_json_string(list, "metadata", "resourceVersion", NULL));
        if (k < 0) {
                store_clear(i, &fresh);
                return k;
        }

        old = i->cache;
        i->cache = fresh;
        i->synced = true;

        /* The cache already shows the new state while handlers run. */
        CN_KUBE_STORE_FOREACH(e, &i->cache) {
                _cleanup_json_ json_object *obj = NULL, *prev_tree = NULL;
                const Entry *prev = cn_kube_store_get(&old, e->key);

                if (!prev) {
                        obj = value_tree(i, e);
                        if (obj)
                                notify(i, NOTIFY_ADDED, NULL, obj);
                        continue;
                }
                if (value_same_text(i, prev, e))
                        continue;
                obj = value_tree(i, e);
                prev_tree = value_tree(i, prev);
                if (obj && prev_tree && !same_version(prev_tree, obj))
                        notify(i, NOTIFY_UPDATED, prev_tree, obj);
        }
        CN_KUBE_STORE_FOREACH(e, &old)
                if (!cn_kube_store_get(&i->cache, e->key)) {
                        _cleanup_json_ json_object *oobj = value_tree(i, e);

                        if (oobj)
                                notify(i, NOTIFY_DELETED, NULL, oobj);
                }
        store_clear(i, &old);

        if (first)
                notify(i, NOTIFY_SYNCED, NULL, NULL);
        return 0;
}

static void on_list_done(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        int k;

        i->list_req = cn_kube_request_free(i->list_req);
        if (result->error < 0) {
                log_debug_errno(result->error, "Listing %s failed: %s", i->resource_name, strna(result->message));
                i->list_error = result->error;
                cn_kube_informer_ref(i);
                if (result->error == -CN_KUBE_ENOTFOUND)
                        set_served(i, false);
                /* Unless a handler dropped the last other reference. */
                if (i->n_ref > 1)
                        schedule_retry(i, true, result->error);
                cn_kube_informer_unref(i);
                return;
        }

        i->list_error = 0;
        cn_kube_informer_ref(i);
        set_served(i, true);
        k = informer_replace(i, result->object);
        if (k < 0)
                schedule_retry(i, true, k);
        /* Unless a handler dropped the last other reference (we hold one ourselves here). */
        else if (i->n_ref > 1 && !i->watch_req && !i->list_req && !i->retry_timer) {
                k = informer_watch(i);
                if (k < 0)
                        schedule_retry(i, true, k);
        }
        cn_kube_informer_unref(i);
}

static void on_watch_event(CnKubeClient *c, CnKubeWatchEventType type, json_object *object, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        _cleanup_json_ json_object *prev_tree = NULL;
        _cleanup_free_ char *key = NULL;
        Entry *e, *prev = NULL;

        (void) set_resource_version(i, cn_json_string(object, "metadata", "resourceVersion", NULL));
        if (type == CN_KUBE_WATCH_BOOKMARK)
                return;
        if (cn_kube_object_key(object, &key) < 0) {
                log_debug("Ignoring %s watch event without a name.", i->resource_name);
                return;
        }

        if (type == CN_KUBE_WATCH_DELETED) {
                entry_free(i, cn_kube_store_take(&i->cache, key));
                notify(i, NOTIFY_DELETED, NULL, object);
                return;
        }

        e = entry_of_object(i, key, object);
        if (!e) {
                log_oom();
                return;
        }
        prev = cn_kube_store_get(&i->cache, key);
        if (prev && value_same_text(i, prev, e)) {
                entry_free(i, e);
                return;
        }
        if (cn_kube_store_put(&i->cache, e, &prev) < 0) {
                entry_free(i, e);
                log_oom();
                return;
        }
        if (i->store_text)
                tree_cache_put(i, e, object);
        if (!prev) {
                notify(i, NOTIFY_ADDED, NULL, object);
                return;
        }
        /* The previous entry is out of the cache: its tree is made before it goes. */
        prev_tree = value_tree(i, prev);
        entry_free(i, prev);
        if (!prev_tree)
                log_oom();
        else if (!same_version(prev_tree, object))
                notify(i, NOTIFY_UPDATED, prev_tree, object);
}

static void on_watch_end(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        int k;

        i->watch_req = cn_kube_request_free(i->watch_req);
        /* Every end leads to a new watch (directly, after a backoff, or after a re-list): a
         * climbing count shows an unhealthy connection to the API server. */
        i->watch_restarts++;
        if (result->error == -CN_KUBE_EGONE) {
                log_debug("Watch of %s: resourceVersion %s too old, listing again.", i->resource_name,
                          strna(i->resource_version));
                k = informer_list(i);
        } else if (result->error == -CN_KUBE_ENOTFOUND) {
                /* The CRD went away: list again (after a backoff) until it is back. */
                log_debug("Watch of %s: the resource is not served any more.", i->resource_name);
                cn_kube_informer_ref(i);
                set_served(i, false);
                if (i->n_ref > 1)
                        schedule_retry(i, true, result->error);
                cn_kube_informer_unref(i);
                return;
        } else if (result->error < 0) {
                log_debug_errno(result->error, "Watch of %s ended: %s", i->resource_name, strna(result->message));
                schedule_retry(i, false, result->error);
                return;
        } else {
                /* Server-side timeout: normal; continue where we were. */
                cn_backoff_reset(&i->backoff);
                k = informer_watch(i);
        }
        if (k < 0)
                schedule_retry(i, true, k);
}

static int informer_list(CnKubeInformer *i) {
        CnKubeListOptions o = {
                .label_selector = i->label_selector,
                .field_selector = i->field_selector,
                .limit = i->page_size,
                .filter = i->filter,
                .items_as_text = i->store_text,
        };

        i->list_req = cn_kube_request_free(i->list_req);
        return cn_kube_list_all(i->client, &i->resource, i->namespace, &o, on_list_done, i, &i->list_req);
}

static int informer_watch(CnKubeInformer *i) {
        CnKubeListOptions o = {
                .label_selector = i->label_selector,
                .field_selector = i->field_selector,
                .resource_version = i->resource_version,
                .allow_watch_bookmarks = true,
                .timeout_seconds = i->watch_timeout_sec,
                .filter = i->filter,
        };

        i->watch_req = cn_kube_request_free(i->watch_req);
        return cn_kube_watch(i->client, &i->resource, i->namespace, &o, on_watch_event, on_watch_end, i,
                             &i->watch_req);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        int k;

        /* A watch needs a resourceVersion to resume from; without one, list. */
        i->retry_timer = sd_event_source_disable_unref(i->retry_timer);
        k = !i->synced || !i->resource_version ? informer_list(i) : informer_watch(i);
        if (k < 0)
                schedule_retry(i, true, k);
        return 0;
}

static int on_relist(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        int k;

        i->retry_timer = sd_event_source_disable_unref(i->retry_timer);
        k = informer_list(i);
        if (k < 0)
                schedule_retry(i, true, k);
        return 0;
}

static void schedule_retry(CnKubeInformer *i, bool relist, int error) {
        usec_t d = cn_backoff_next(&i->backoff, 0);
        sd_event *e = cn_kube_client_get_event(i->client);
        int k;

        log_debug_errno(error, "%s informer: retrying %s in %" PRIu64 " ms.", i->resource_name,
                        relist ? "list" : "watch", d / USEC_PER_MSEC);
        i->retry_timer = sd_event_source_disable_unref(i->retry_timer);
        k = sd_event_add_time_relative(e, &i->retry_timer, CLOCK_MONOTONIC, d, 0, relist ? on_relist : on_retry, i);
        if (k < 0) {
                log_error_errno(k, "Failed to schedule the %s informer's retry, it stops: %m", i->resource_name);
                return;
        }
        (void) sd_event_source_set_description(i->retry_timer, "kube-informer-retry");
}

int cn_kube_informer_start(CnKubeInformer *i) {
        int k;

        assert(i);
        if (i->started)
                return 0;
        k = informer_list(i);
        if (k < 0)
                return k;
        i->started = true;
        return 0;
}

static int on_replay(sd_event_source *s, void *userdata) {
        CnKubeInformer *i = ASSERT_PTR(userdata);
        Entry *e;

        i->replay_defer = sd_event_source_disable_unref(i->replay_defer);
        cn_kube_informer_ref(i);
        i->dispatching++;
        for (Handlers *h = i->handlers; h; h = h->next) {
                if (h->removed || !h->replay_pending)
                        continue;
                h->replay_pending = false;
                if (h->h.added) {
                        CN_KUBE_STORE_FOREACH(e, &i->cache) {
                                _cleanup_json_ json_object *obj = value_tree(i, e);

                                if (!obj) {
                                        log_oom();
                                        continue;
                                }
                                h->h.added(i, obj, h->userdata);
                                if (h->removed)
                                        break;
                        }
                }
                if (!h->removed && i->synced && h->h.synced)
                        h->h.synced(i, h->userdata);
                if (!h->removed && i->not_served && h->h.served)
                        h->h.served(i, false, h->userdata);
        }
        i->dispatching--;
        handlers_gc(i);
        cn_kube_informer_unref(i);
        return 0;
}

int cn_kube_informer_add_handlers(CnKubeInformer *i, const CnKubeInformerHandlers *handlers, void *userdata,
                                  uint64_t *ret_id) {
        Handlers *h, **tail;
        int k;

        assert(i);
        assert(handlers);

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->id = i->next_id++;
        h->h = *handlers;
        h->userdata = userdata;

        if (i->synced || i->not_served || i->cache.n > 0) {
                h->replay_pending = true;
                if (!i->replay_defer) {
                        k = sd_event_add_defer(cn_kube_client_get_event(i->client), &i->replay_defer, on_replay, i);
                        if (k < 0) {
                                free(h);
                                return k;
                        }
                        (void) sd_event_source_set_description(i->replay_defer, "kube-informer-replay");
                }
        }

        for (tail = &i->handlers; *tail; tail = &(*tail)->next)
                ;
        *tail = h;
        if (ret_id)
                *ret_id = h->id;
        return 0;
}

int cn_kube_informer_remove_handlers(CnKubeInformer *i, uint64_t id) {
        assert(i);
        for (Handlers *h = i->handlers; h; h = h->next)
                if (h->id == id && !h->removed) {
                        h->removed = true;
                        handlers_gc(i);
                        return 0;
                }
        return -ENOENT;
}

static void trigger(sd_event_source *source) {
        (void) sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
}

static void trigger_added(CnKubeInformer *i, json_object *object, void *userdata) {
        trigger(userdata);
}

static void trigger_updated(CnKubeInformer *i, json_object *old, json_object *object, void *userdata) {
        trigger(userdata);
}

static void trigger_synced(CnKubeInformer *i, void *userdata) {
        trigger(userdata);
}

static void trigger_served(CnKubeInformer *i, bool served, void *userdata) {
        trigger(userdata);
}

int cn_kube_informer_add_trigger(CnKubeInformer *i, sd_event_source *source, uint64_t *ret_id) {
        static const CnKubeInformerHandlers handlers = {
                .added = trigger_added,
                .updated = trigger_updated,
                .served = trigger_served,
                .deleted = trigger_added,
                .synced = trigger_synced,
        };

        assert(source);
        return cn_kube_informer_add_handlers(i, &handlers, source, ret_id);
}
