/* SPDX-License-Identifier: Apache-2.0 */
/* Patch builders for Node initialization; see node-patch.h. */
#include "json-util.h"
#include "labels.h"
#include "log.h"
#include "node-patch.h"

static const char *get_string(json_object *o, const char *a, const char *b) {
        return b ? cn_json_string(o, a, b, NULL) : cn_json_string(o, a, NULL);
}

const char *cn_node_get_name(json_object *node) {
        return get_string(node, "metadata", "name");
}

const char *cn_node_get_resource_version(json_object *node) {
        return get_string(node, "metadata", "resourceVersion");
}

const char *cn_node_get_uid(json_object *node) {
        return get_string(node, "metadata", "uid");
}

const char *cn_node_get_provider_id(json_object *node) {
        return get_string(node, "spec", "providerID");
}

json_object *cn_node_get_labels(json_object *node) {
        json_object *l = cn_json_get(node, "metadata", "labels", NULL);

        return l && json_object_is_type(l, json_type_object) ? l : NULL;
}

static json_object *node_taints(json_object *node) {
        json_object *t = cn_json_get(node, "spec", "taints", NULL);

        return t && json_object_is_type(t, json_type_array) ? t : NULL;
}

static bool taint_has_key(json_object *taint, const char *key) {
        const char *k = get_string(taint, "key", NULL);

        return k && streq(k, key);
}

bool cn_node_has_taint(json_object *node, const char *key) {
        json_object *taints = node_taints(node);
        size_t n = taints ? json_object_array_length(taints) : 0;

        for (size_t i = 0; i < n; i++)
                if (taint_has_key(json_object_array_get_idx(taints, i), key))
                        return true;
        return false;
}

int cn_node_patch_status_addresses(const CnNodeAddressList *addresses, json_object **ret) {
        _cleanup_json_ json_object *patch = json_object_new_object(), *status = json_object_new_object();
        json_object *arr;

        assert(addresses);
        assert(ret);
        arr = cn_node_address_list_to_json(addresses);
        if (!patch || !status || !arr || json_object_object_add(status, "addresses", arr) < 0) {
                json_object_put(arr);
                return -ENOMEM;
        }
        if (json_object_object_add(patch, "status", TAKE_PTR(status)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(patch);
        return 0;
}

json_object *cn_node_get_condition(json_object *node, const char *type) {
        return cn_json_array_find(cn_json_get(node, "status", "conditions", NULL), "type", type);
}

int cn_node_patch_status_condition(json_object *node, const CnNodeCondition *c, const CnNodeAddressList *addresses,
                                   usec_t now, json_object **ret) {
        _cleanup_json_ json_object *patch = json_object_new_object(), *cond = json_object_new_object(),
                                   *conds = json_object_new_array();
        json_object *have;
        char ts[CN_FORMAT_TIMESTAMP_MAX];
        bool transition;
        int r;

        assert(c);
        assert(ret);
        have = cn_node_get_condition(node, c->type);
        transition = !have || !cn_json_string_is(have, "status", c->status);
        if (!patch || !cond || !conds)
                return -ENOMEM;
        if (!addresses && !transition && cn_json_string_is(have, "reason", c->reason) &&
            cn_json_string_is(have, "message", c->message))
                return -EALREADY;
        r = cn_format_rfc3339(now, false, ts, sizeof(ts));
        if (r < 0)
                return r;
        if (cn_json_set_string(cond, c->type, "type", NULL) < 0 ||
            cn_json_set_string(cond, c->status, "status", NULL) < 0 ||
            cn_json_set_string(cond, c->reason, "reason", NULL) < 0 ||
            cn_json_set_string(cond, strempty(c->message), "message", NULL) < 0 ||
            cn_json_set_string(cond, ts, "lastHeartbeatTime", NULL) < 0 ||
            (transition && cn_json_set_string(cond, ts, "lastTransitionTime", NULL) < 0))
                return -ENOMEM;
        if (json_object_array_add(conds, json_object_get(cond)) < 0 ||
            cn_json_set(patch, TAKE_PTR(conds), "status", "conditions", NULL) < 0)
                return -ENOMEM;
        if (addresses) {
                _cleanup_json_ json_object *arr = cn_node_address_list_to_json(addresses),
                                           *replace = json_object_new_object();

                if (!arr || !replace || cn_json_set_string(replace, "replace", "$patch", NULL) < 0 ||
                    json_object_array_add(arr, json_object_get(replace)) < 0 ||
                    cn_json_set(patch, TAKE_PTR(arr), "status", "addresses", NULL) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(patch);
        return 0;
}

/* A copy of the Node's taints with `key` removed, or with it added when `add`. */
static json_object *taints_with(json_object *node, const char *key, bool add) {
        _cleanup_json_ json_object *out = json_object_new_array();
        json_object *taints = node_taints(node);
        size_t n = taints ? json_object_array_length(taints) : 0;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *t = json_object_array_get_idx(taints, i);

                if (taint_has_key(t, key))
                        continue;
                if (json_object_array_add(out, json_object_get(t)) < 0)
                        return NULL;
        }
        if (add) {
                _cleanup_json_ json_object *t = json_object_new_object();

                if (!t || json_object_object_add(t, "key", json_object_new_string(key)) < 0 ||
                    json_object_object_add(t, "effect", json_object_new_string("NoSchedule")) < 0 ||
                    json_object_array_add(out, t) < 0)
                        return NULL;
                TAKE_PTR(t);
        }
        return TAKE_PTR(out);
}

static int patch_skeleton(json_object *node, json_object **ret_patch, json_object **ret_metadata,
                          json_object **ret_spec) {
        _cleanup_json_ json_object *patch = json_object_new_object();
        json_object *md = json_object_new_object(), *spec = json_object_new_object();
        const char *rv = cn_node_get_resource_version(node);

        if (!patch || !md || !spec || json_object_object_add(patch, "metadata", md) < 0) {
                json_object_put(md);
                json_object_put(spec);
                return -ENOMEM;
        }
        if (json_object_object_add(patch, "spec", spec) < 0) {
                json_object_put(spec);
                return -ENOMEM;
        }
        if (isempty(rv))
                return -EBADMSG;
        if (json_object_object_add(md, "resourceVersion", json_object_new_string(rv)) < 0)
                return -ENOMEM;
        *ret_metadata = md;
        *ret_spec = spec;
        *ret_patch = TAKE_PTR(patch);
        return 0;
}

static int set_label(json_object *labels, json_object *existing, const char *key, const char *value) {
        json_object *cur = NULL;

        if (isempty(value))
                return 0;
        if (!cn_label_value_is_valid(value)) {
                log_debug("Not setting label %s: value '%s' is not a valid label value.", key, value);
                return 0;
        }
        if (existing && json_object_object_get_ex(existing, key, &cur) && json_object_is_type(cur, json_type_string) &&
            streq(json_object_get_string(cur), value))
                return 0;
        return json_object_object_add(labels, key, json_object_new_string(value)) < 0 ? -ENOMEM : 1;
}

int cn_node_patch_initialize(json_object *node, const CnNodeInitData *d, json_object **ret) {
        _cleanup_json_ json_object *patch = NULL, *labels = json_object_new_object();
        json_object *md, *spec, *existing = cn_node_get_labels(node), *taints;
        int r;

        assert(node);
        assert(d);
        assert(ret);
        if (!labels)
                return -ENOMEM;
        r = patch_skeleton(node, &patch, &md, &spec);
        if (r < 0)
                return r;

        if (isempty(cn_node_get_provider_id(node)) && !isempty(d->provider_id) &&
            json_object_object_add(spec, "providerID", json_object_new_string(d->provider_id)) < 0)
                return -ENOMEM;

        if ((r = set_label(labels, existing, CN_LABEL_INSTANCE_TYPE, d->instance_type)) < 0 ||
            (r = set_label(labels, existing, CN_LABEL_REGION, d->region)) < 0 ||
            (r = set_label(labels, existing, CN_LABEL_ZONE, d->zone)) < 0)
                return r;
        r = cn_labels_add_extra(labels, existing, d->extra_labels);
        if (r < 0)
                return r;
        if (json_object_object_length(labels) > 0 && json_object_object_add(md, "labels", TAKE_PTR(labels)) < 0)
                return -ENOMEM;

        taints = taints_with(node, CN_TAINT_UNINITIALIZED, false);
        if (!taints || json_object_object_add(spec, "taints", taints) < 0) {
                json_object_put(taints);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(patch);
        return 0;
}

int cn_node_patch_taint(json_object *node, const char *key, bool add, json_object **ret) {
        _cleanup_json_ json_object *patch = NULL;
        json_object *md, *spec, *taints;
        int r;

        assert(node);
        assert(key);
        assert(ret);
        if (cn_node_has_taint(node, key) == add)
                return -EALREADY;
        r = patch_skeleton(node, &patch, &md, &spec);
        if (r < 0)
                return r;
        taints = taints_with(node, key, add);
        if (!taints || json_object_object_add(spec, "taints", taints) < 0) {
                json_object_put(taints);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(patch);
        return 0;
}
