/* SPDX-License-Identifier: Apache-2.0 */
/* Informer: a shared, watch-maintained cache of one resource type (optionally narrowed by
 * namespace and label/field selectors), like client-go's SharedInformer. It lists (paged) and then
 * watches from the list's resourceVersion with allowWatchBookmarks=true; a watch that ends normally
 * is restarted from the last resourceVersion seen; 410 Gone re-lists and delivers the difference as
 * add/update/delete; errors restart with exponential backoff and jitter. Controllers read the cache
 * and react to callbacks instead of polling.
 *
 * A filter (json-filter.h) is the informer's transform, as client-go's SetTransform is used to drop
 * managedFields and the like: applied while parsing every list item and watch event object
 * (DELETED ones too), so the cache and the handlers see only the members the consumer reads and
 * the rest is never built. metadata.name, namespace and resourceVersion must be kept (the cache
 * is keyed and compared by them).
 *
 * Objects in the cache are json-c trees owned by the informer; callbacks and lookups hand out
 * borrowed references (json_object_get() to keep one beyond the call). Never modify them.
 *
 * With store_text the cache keeps each object as its text (cn_kube_object_to_text(): after the
 * initializer's filter a Node is about 320 bytes against 6 KB or more as a json-c tree) and builds a tree when one
 * is asked for: the object a callback or foreach function gets lives for that call, the one
 * cn_kube_informer_lookup() returns until the event loop's next iteration; json_object_get() keeps
 * either longer. The trees of the 64 values parsed last (and of the last watch events) are kept
 * and shared by the lookups of those values; any other lookup parses anew, so a caller that reads
 * one object many times keeps the tree it got. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "kube-client.h"
#include "macro.h"

typedef struct CnKubeInformer CnKubeInformer;

typedef struct CnKubeInformerOptions {
        const char *namespace;      /* namespaced resources: one namespace; NULL: all */
        const char *label_selector; /* optional */
        const char *field_selector; /* optional; node mode: "metadata.name=NODE" */
        unsigned page_size;         /* list page size; 0: CN_KUBE_DEFAULT_PAGE_SIZE */
        unsigned watch_timeout_sec; /* server-side watch timeout; 0: random 300..600 like client-go */
        const CnJsonFilter *filter; /* optional: the members kept of each object (see above);
                                     * static storage, shared informers match on it too */
        bool store_text;            /* cache objects as JSON text (see above) */
} CnKubeInformerOptions;

typedef struct CnKubeInformerHandlers {
        void (*added)(CnKubeInformer *i, json_object *object, void *userdata);
        /* old is the previous cached version. Called for every change of resourceVersion. */
        void (*updated)(CnKubeInformer *i, json_object *old, json_object *object, void *userdata);
        /* object is the last known state (from the DELETED event, or the cache for objects that
         * vanished across a re-list). */
        void (*deleted)(CnKubeInformer *i, json_object *object, void *userdata);
        /* Once, when the first complete list has been delivered (has_synced becomes true). */
        void (*synced)(CnKubeInformer *i, void *userdata);
        /* When the API server stops or starts serving the resource: false when a list or watch
         * answers 404 (its CRD or API is not installed), true when a list succeeds after that.
         * Called on changes only, so a caller can say "waiting for X" once per episode. */
        void (*served)(CnKubeInformer *i, bool served, void *userdata);
} CnKubeInformerHandlers;

/* Create an informer (not started). Reference counted: see cn_kube_informer_get_shared(). */
int cn_kube_informer_new(CnKubeClient *c, const CnKubeResource *r, const CnKubeInformerOptions *o,
                         CnKubeInformer **ret);

/* The one informer of this client for (resource, namespace, selectors): an existing one gets a
 * new reference, otherwise one is created and remembered. Lets several controllers share one
 * list+watch. */
int cn_kube_informer_get_shared(CnKubeClient *c, const CnKubeResource *r, const CnKubeInformerOptions *o,
                                CnKubeInformer **ret);

CnKubeInformer *cn_kube_informer_ref(CnKubeInformer *i);
/* Dropping the last reference stops the informer; no callbacks after that. */
CnKubeInformer *cn_kube_informer_unref(CnKubeInformer *i);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeInformer *, cn_kube_informer_unref);
#define _cleanup_kube_informer_ _cleanup_(cn_kube_informer_unrefp)

/* Register callbacks. Handler sets added after objects are cached get "added" for each cached
 * object (and "synced" if already synced, "served" false if the resource is not served), from the
 * event loop, not from inside this call. The returned id removes them again. */
int cn_kube_informer_add_handlers(CnKubeInformer *i, const CnKubeInformerHandlers *h, void *userdata,
                                  uint64_t *ret_id);
int cn_kube_informer_remove_handlers(CnKubeInformer *i, uint64_t id);
/* Handlers for a controller that reconciles everything in one pass: any event (added, updated,
 * deleted, synced, served) enables `source`, a defer event source of the caller, for one run. */
int cn_kube_informer_add_trigger(CnKubeInformer *i, sd_event_source *source, uint64_t *ret_id);

/* Start list+watch (idempotent). */
int cn_kube_informer_start(CnKubeInformer *i);

bool cn_kube_informer_has_synced(CnKubeInformer *i);
/* False while the API server answers 404 for the resource (see the "served" handler); the cache
 * keeps what it last saw. */
bool cn_kube_informer_is_served(CnKubeInformer *i);
/* The error of the last list (a CN_KUBE_E* code, e.g. -CN_KUBE_EFORBIDDEN), 0 before the first
 * answer and after a list succeeded; the informer keeps retrying meanwhile. */
int cn_kube_informer_get_list_error(CnKubeInformer *i);
/* Resource version of the cache (last list or event seen), NULL before the first list. */
const char *cn_kube_informer_get_resource_version(CnKubeInformer *i);
const CnKubeResource *cn_kube_informer_get_resource(CnKubeInformer *i);

/* Borrowed object from the cache or NULL. ns NULL for cluster-scoped resources. */
json_object *cn_kube_informer_lookup(CnKubeInformer *i, const char *ns, const char *name);
/* The same as a new reference (json_object_put() it): with store_text, what a caller that looks
 * up many objects in one pass of the event loop uses, so that their trees do not all stay until
 * the next iteration. */
json_object *cn_kube_informer_get(CnKubeInformer *i, const char *ns, const char *name);

size_t cn_kube_informer_size(CnKubeInformer *i);

/* How many times a watch ended and was restarted (server-side timeout, error, dropped
 * connection, or 410 Gone with a re-list): a counter for metrics. */
uint64_t cn_kube_informer_get_watch_restarts(CnKubeInformer *i);

/* Call fn for each cached object (order unspecified); a negative return stops and is returned.
 * The cache must not be changed meanwhile (no re-entry into the loop from fn). */
typedef int (*CnKubeInformerForeachFn)(json_object *object, void *userdata);
int cn_kube_informer_foreach(CnKubeInformer *i, CnKubeInformerForeachFn fn, void *userdata);

/* Cache key of an object: "ns/name" or "name". */
int cn_kube_object_key(json_object *object, char **ret);
