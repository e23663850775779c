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
