/* SPDX-License-Identifier: Apache-2.0 */
/* See mc-queue.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller-waiting.h"
#include "json-util.h"
#include "log.h"
#include "mc-queue.h"
#include "string-util.h"

CnWorkItem *mc_queue_item(CnWorkQueue *q, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;

        if (asprintf(&key, "%s/%s", ns, name) < 0)
                return NULL;
        return cn_work_queue_get(q, key, true);
}

int mc_queue_key_split(const char *key, char **ret_ns, char **ret_name) {
        const char *slash = strchr(key, '/');
        _cleanup_free_ char *ns = NULL, *name = NULL;

        if (!slash)
                return -EINVAL;
        ns = strndup(key, slash - key);
        name = strdup(slash + 1);
        if (!ns || !name)
                return -ENOMEM;
        *ret_ns = TAKE_PTR(ns);
        *ret_name = TAKE_PTR(name);
        return 0;
}

int mc_queue_watch(CnKubeClient *client, const CnKubeResource *r, const char *ns, const CnKubeInformerHandlers *h,
                   void *userdata, CnKubeInformer **ret) {
        int k;

        k = cn_kube_informer_get_shared(client, r, &(CnKubeInformerOptions) { .namespace = ns }, ret);
        if (k < 0)
                return log_error_errno(k, "Failed to create the %s informer: %m", r->resource);
        k = cn_kube_informer_add_handlers(*ret, h, userdata, NULL);
        if (k < 0)
                return k;
        k = cn_waiting_watch_api(*ret);
        if (k < 0)
                return k;
        return cn_kube_informer_start(*ret);
}

void mc_queue_add_owners(CnWorkQueue *q, json_object *object, const char *kind) {
        json_object *refs = cn_json_get(object, "metadata", "ownerReferences", NULL);
        const char *ns = cn_json_string(object, "metadata", "namespace", NULL);

        for (size_t k = 0; ns && refs && json_object_is_type(refs, json_type_array) && k < json_object_array_length(refs);
             k++) {
                json_object *r = json_object_array_get_idx(refs, k);
                const char *name = cn_json_string(r, "name", NULL);
                CnWorkItem *item;

                if (!name || !streq(strempty(cn_json_string(r, "kind", NULL)), kind))
                        continue;
                item = mc_queue_item(q, ns, name);
                if (item)
                        cn_work_queue_add(item);
        }
}

void mc_loop_enqueue(McLoop *l, json_object *object) {
        const char *ns = cn_json_string(object, "metadata", "namespace", NULL);
        const char *name = cn_json_string(object, "metadata", "name", NULL);
        CnWorkItem *item;

        if (!ns || !name)
                return;
        item = mc_queue_item(l->queue, ns, name);
        if (item)
                cn_work_queue_add(item);
        else
                log_oom();
}

static int enqueue_one(json_object *object, void *userdata) {
        mc_loop_enqueue(userdata, object);
        return 0;
}

void mc_loop_enqueue_all(McLoop *l) {
        if (l->n_informers > 0)
                (void) cn_kube_informer_foreach(l->informers[0], enqueue_one, l);
}

static void on_event(CnKubeInformer *i, json_object *object, void *userdata) {
        McLoop *l = ASSERT_PTR(userdata);

        if (i == l->informers[0])
                mc_loop_enqueue(l, object);
        else if (l->on_other)
                l->on_other(i, object, l->userdata);
}

static void on_updated(CnKubeInformer *i, json_object *old, json_object *object, void *userdata) {
        on_event(i, object, userdata);
}

static void on_synced(CnKubeInformer *i, void *userdata) {
        McLoop *l = ASSERT_PTR(userdata);

        if (mc_loop_synced(l)) {
                if (l->on_synced)
                        l->on_synced(l->userdata);
                mc_loop_enqueue_all(l);
        }
        cn_work_queue_kick(l->queue);
}

static const CnKubeInformerHandlers loop_handlers = {
        .added = on_event,
        .updated = on_updated,
        .deleted = on_event,
        .synced = on_synced,
};

int mc_loop_watch(McLoop *l, const CnKubeResource *r, const char *ns, CnKubeInformer **ret) {
        int k;

        assert(l->n_informers < MC_LOOP_INFORMERS_MAX);
        k = mc_queue_watch(l->client, r, ns, &loop_handlers, l, &l->informers[l->n_informers]);
        *ret = l->informers[l->n_informers];
        if (*ret)
                l->n_informers++; /* dropped by mc_loop_done(), also after a failed start */
        return k;
}

bool mc_loop_synced(McLoop *l) {
        if (l->n_informers == 0)
                return false;
        for (size_t i = 0; i < l->n_informers; i++)
                if (!cn_kube_informer_has_synced(l->informers[i]))
                        return false;
        return true;
}

bool mc_loop_ready(McLoop *l) {
        return l->leading && mc_loop_synced(l);
}

void mc_loop_set_leading(McLoop *l, bool leading) {
        l->leading = leading;
        if (leading)
                mc_loop_enqueue_all(l);
        cn_work_queue_kick(l->queue);
}

void mc_loop_done(McLoop *l) {
        l->queue = cn_work_queue_free(l->queue);
        for (size_t i = 0; i < l->n_informers; i++)
                cn_kube_informer_unref(l->informers[i]);
        l->n_informers = 0;
}
