/* SPDX-License-Identifier: Apache-2.0 */
/* Resource types we use and how their URL paths and list/watch query strings are built. Path
 * segments are validated and percent-escaped, so a hostile object name cannot walk to another
 * resource. */
#include "http.h"
#include "kube-client.h"

const CnKubeResource cn_kube_resource_nodes = { NULL, "v1", "nodes", "Node", false };
const CnKubeResource cn_kube_resource_pods = { NULL, "v1", "pods", "Pod", true };
const CnKubeResource cn_kube_resource_events = { NULL, "v1", "events", "Event", true };
const CnKubeResource cn_kube_resource_configmaps = { NULL, "v1", "configmaps", "ConfigMap", true };
const CnKubeResource cn_kube_resource_secrets = { NULL, "v1", "secrets", "Secret", true };
const CnKubeResource cn_kube_resource_services = { NULL, "v1", "services", "Service", true };
const CnKubeResource cn_kube_resource_serviceaccounts = { NULL, "v1", "serviceaccounts", "ServiceAccount", true };
const CnKubeResource cn_kube_resource_namespaces = { NULL, "v1", "namespaces", "Namespace", false };
const CnKubeResource cn_kube_resource_leases = { "coordination.k8s.io", "v1", "leases", "Lease", true };
const CnKubeResource cn_kube_resource_deployments = { "apps", "v1", "deployments", "Deployment", true };
const CnKubeResource cn_kube_resource_daemonsets = { "apps", "v1", "daemonsets", "DaemonSet", true };

#define KUBE_NAME_MAX 253

static bool segment_valid(const char *s) {
        size_t l;

        if (isempty(s))
                return false;
        l = strlen(s);
        if (l > KUBE_NAME_MAX || streq(s, ".") || streq(s, ".."))
                return false;
        for (const char *p = s; *p; p++)
                if (*p == '/' || (unsigned char) *p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

/* Appends "/" and the escaped segment. */
static int append_segment(char **path, const char *segment) {
        _cleanup_free_ char *e = NULL;
        char *n;

        if (!segment_valid(segment))
                return -EINVAL;
        e = cn_http_escape(segment);
        if (!e)
                return -ENOMEM;
        if (asprintf(&n, "%s/%s", *path, e) < 0)
                n = NULL;
        if (!n)
                return -ENOMEM;
        free(*path);
        *path = n;
        return 0;
}

int cn_kube_resource_path(const CnKubeResource *r, const char *ns, const char *name, const char *subresource,
                          char **ret) {
        _cleanup_free_ char *p = NULL;
        int k;

        assert(r);
        assert(ret);

        if (!segment_valid(r->version) || !segment_valid(r->resource))
                return -EINVAL;
        if (!isempty(r->group) && !segment_valid(r->group))
                return -EINVAL;
        if (r->namespaced && name && isempty(ns))
                return -EINVAL;
        if (!r->namespaced && !isempty(ns))
                return -EINVAL;
        if (subresource && !name)
                return -EINVAL;

        if (isempty(r->group))
                k = asprintf(&p, "/api/%s", r->version);
        else
                k = asprintf(&p, "/apis/%s/%s", r->group, r->version);
        if (k < 0)
                return -ENOMEM;

        if (!isempty(ns)) {
                k = append_segment(&p, "namespaces");
                if (k < 0)
                        return k;
                k = append_segment(&p, ns);
                if (k < 0)
                        return k;
        }
        k = append_segment(&p, r->resource);
        if (k < 0)
                return k;
        if (name) {
                k = append_segment(&p, name);
                if (k < 0)
                        return k;
        }
        if (subresource) {
                k = append_segment(&p, subresource);
                if (k < 0)
                        return k;
        }

        *ret = TAKE_PTR(p);
        return 0;
}

static int query_add(char **q, const char *key, const char *value) {
        _cleanup_free_ char *e = NULL;
        char *n;

        if (!value)
                return 0;
        e = cn_http_escape(value);
        if (!e)
                return -ENOMEM;
        if (asprintf(&n, "%s%c%s=%s", *q, **q ? '&' : '?', key, e) < 0)
                n = NULL;
        if (!n)
                return -ENOMEM;
        free(*q);
        *q = n;
        return 0;
}

int cn_kube_list_query(const CnKubeListOptions *o, bool watch, char **ret) {
        _cleanup_free_ char *q = strdup("");
        char num[32];
        int r;

        assert(ret);
        if (!q)
                return -ENOMEM;

        if (watch && (r = query_add(&q, "watch", "1")) < 0)
                return r;
        if (o) {
                if ((r = query_add(&q, "labelSelector", isempty(o->label_selector) ? NULL : o->label_selector)) < 0 ||
                    (r = query_add(&q, "fieldSelector", isempty(o->field_selector) ? NULL : o->field_selector)) < 0 ||
                    (r = query_add(&q, "resourceVersion", isempty(o->resource_version) ? NULL : o->resource_version)) < 0)
                        return r;
                if (!watch) {
                        if (o->limit > 0) {
                                snprintf(num, sizeof(num), "%u", o->limit);
                                if ((r = query_add(&q, "limit", num)) < 0)
                                        return r;
                        }
                        if ((r = query_add(&q, "continue", isempty(o->continue_token) ? NULL : o->continue_token)) < 0)
                                return r;
                } else {
                        if (o->allow_watch_bookmarks && (r = query_add(&q, "allowWatchBookmarks", "true")) < 0)
                                return r;
                        if (o->timeout_seconds > 0) {
                                snprintf(num, sizeof(num), "%u", o->timeout_seconds);
                                if ((r = query_add(&q, "timeoutSeconds", num)) < 0)
                                        return r;
                        }
                }
        }
        *ret = TAKE_PTR(q);
        return 0;
}

static const char *const watch_event_type_table[_CN_KUBE_WATCH_EVENT_TYPE_MAX] = {
        [CN_KUBE_WATCH_ADDED] = "ADDED",
        [CN_KUBE_WATCH_MODIFIED] = "MODIFIED",
        [CN_KUBE_WATCH_DELETED] = "DELETED",
        [CN_KUBE_WATCH_BOOKMARK] = "BOOKMARK",
};

const char *cn_kube_watch_event_type_to_string(CnKubeWatchEventType t) {
        if (t < 0 || t >= _CN_KUBE_WATCH_EVENT_TYPE_MAX)
                return NULL;
        return watch_event_type_table[t];
}

CnKubeWatchEventType cn_kube_watch_event_type_from_string(const char *s) {
        if (!s)
                return _CN_KUBE_WATCH_EVENT_TYPE_INVALID;
        for (int i = 0; i < _CN_KUBE_WATCH_EVENT_TYPE_MAX; i++)
                if (streq(watch_event_type_table[i], s))
                        return (CnKubeWatchEventType) i;
        return _CN_KUBE_WATCH_EVENT_TYPE_INVALID;
}
