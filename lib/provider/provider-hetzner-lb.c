/* SPDX-License-Identifier: Apache-2.0 */
/* Hetzner Cloud control-plane load balancer of a Cluster API cluster, as cluster-api-provider-
 * hetzner builds it (spec.controlPlaneLoadBalancer: type lb11, algorithm round_robin, port 6443
 * by default): one load balancer labelled with the CloudnodeCluster's UID, found by that label
 * (GET /load_balancers?label_selector=) before it is created (POST /load_balancers), so that a
 * restart never makes a second (and one recreated by clusterctl move relabels the load balancer of
 * its previous UID); a TCP service from the port to the API servers' 6443; one
 * label_selector target on the label the control-plane servers carry, so the cloud itself follows
 * the control-plane machines. Deleted (DELETE /load_balancers/{id}) only when it carries the UID. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>

#include "json-util.h"
#include "provider-hetzner.h"
#include "string-util.h"

#define API_SERVER_PORT 6443
#define LB_NAME_MAX 63

static const char *const network_zones[] = { "eu-central", "us-east", "us-west", "ap-southeast" };

typedef struct LbState {
        char *uid;
        char *previous_uid;   /* looked up when nothing carries uid; relabelled to uid */
        bool looking_back;    /* the list in flight is by previous_uid */
        json_object *lb;      /* the load balancer whose target is being added */
        char *targets_of;
        char *name;
        char *region;
        char *type;
        char *algorithm;
        int port;
} LbState;

static void lb_state_free(void *p) {
        LbState *s = p;

        if (!s)
                return;
        free(s->uid);
        free(s->previous_uid);
        json_object_put(s->lb);
        free(s->targets_of);
        free(s->name);
        free(s->region);
        free(s->type);
        free(s->algorithm);
        free(s);
}

static void lb_state_freep(LbState **s) {
        lb_state_free(*s);
}

static int spec_member(json_object *spec, const char *key, json_type type, json_object **ret) {
        json_object *v = spec ? json_object_object_get(spec, key) : NULL;

        *ret = NULL;
        if (!v)
                return 0;
        if (!json_object_is_type(v, type))
                return -EINVAL;
        *ret = v;
        return 1;
}

int cn_provider_hetzner_lb_settings(json_object *spec, const char **ret_type, const char **ret_algorithm,
                                    int *ret_port, char **ret_reason) {
        json_object *type, *algorithm, *port;
        const char *t = "lb11", *a = "round_robin";
        int64_t n = API_SERVER_PORT;

        if (spec && !json_object_is_type(spec, json_type_object))
                return cn_provider_config_error(ret_reason, EINVAL, "spec.controlPlaneLoadBalancer must be an object");
        if (spec_member(spec, "type", json_type_string, &type) < 0)
                return cn_provider_config_error(ret_reason, EINVAL, "spec.controlPlaneLoadBalancer.type must be a string");
        if (type)
                t = json_object_get_string(type);
        if (isempty(t))
                return cn_provider_config_error(ret_reason, EINVAL, "spec.controlPlaneLoadBalancer.type is empty");
        if (spec_member(spec, "algorithm", json_type_string, &algorithm) < 0)
                return cn_provider_config_error(ret_reason, EINVAL,
                                                "spec.controlPlaneLoadBalancer.algorithm must be a string");
        if (algorithm)
                a = json_object_get_string(algorithm);
        if (!streq(a, "round_robin") && !streq(a, "least_connections"))
                return cn_provider_config_error(ret_reason, EINVAL,
                                                "spec.controlPlaneLoadBalancer.algorithm must be round_robin or "
                                                "least_connections");
        if (spec_member(spec, "port", json_type_int, &port) < 0)
                return cn_provider_config_error(ret_reason, EINVAL, "spec.controlPlaneLoadBalancer.port must be an integer");
        if (port)
                n = json_object_get_int64(port);
        if (n < 1 || n > 65535)
                return cn_provider_config_error(ret_reason, EINVAL,
                                                "spec.controlPlaneLoadBalancer.port must be between 1 and 65535");
        *ret_type = t;
        *ret_algorithm = a;
        *ret_port = (int) n;
        return 0;
}

/* "<cluster>-kube-apiserver-<uid prefix>": the UID part keeps two clusters of one name in
 * different namespaces (or management clusters) apart; the name is never how the load balancer
 * is found. */
static int lb_name(const char *cluster, const char *uid, char **ret) {
        int keep = LB_NAME_MAX - (int) STRLEN("-kube-apiserver-12345678");

        if (asprintf(ret, "%.*s-kube-apiserver-%.8s", keep, cluster, uid) < 0)
                return -ENOMEM;
        return 0;
}

int cn_provider_hetzner_lb_view(json_object *lb, int port, json_object **ret) {
        _cleanup_json_ json_object *v = json_object_new_object();
        json_object *ip = cn_json_get(lb, "public_net", "ipv4", "ip", NULL);
        unsigned char addr[sizeof(struct in_addr)];
        bool enabled = false;
        char id_text[24];
        int64_t id;
        int r;

        if (!v)
                return -ENOMEM;
        if (cn_json_get_int64(lb, &id, "id", NULL) < 0 || id <= 0 ||
            (ip && !json_object_is_type(ip, json_type_string) && !json_object_is_type(ip, json_type_null)))
                return -EBADMSG;
        (void) cn_json_get_bool(lb, &enabled, "public_net", "enabled", NULL);
        if (!enabled || !ip || json_object_is_type(ip, json_type_null))
                return -ENODATA;
        /* The endpoint's host goes into every kubeconfig of the cluster: an address, nothing else. */
        if (inet_pton(AF_INET, json_object_get_string(ip), addr) != 1)
                return -EBADMSG;
        (void) snprintf(id_text, sizeof(id_text), "%" PRIi64, id);
        r = cn_json_set_string(v, id_text, "id", NULL);
        if (r >= 0)
                r = cn_json_set_string(v, json_object_get_string(ip), "host", NULL);
        if (r >= 0)
                r = cn_json_set(v, json_object_new_int(port), "port", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        return 0;
}

static void finish_view(CnProviderCall *call, CnProviderResult *res, json_object *lb) {
        LbState *s = cn_provider_call_get_state(call);
        json_object *view = NULL;

        if (res->error >= 0) {
                int r = cn_provider_hetzner_lb_view(lb, s->port, &view);

                if (r == -ENODATA)
                        *res = (CnProviderResult) { .error = -EAGAIN,
                                                    .message = "the load balancer has no public IPv4 address yet" };
                else if (r < 0)
                        *res = (CnProviderResult) { .error = r == -ENOMEM ? r : -EBADMSG,
                                                    .message = "unexpected load balancer object from the Hetzner API" };
        }
        cn_provider_call_finish_machine(call, res, view);
}

static int target_selector(const LbState *s, char **ret) {
        return asprintf(ret, CN_PROVIDER_CONTROL_PLANE_LABEL "=%s", s->targets_of) < 0 ? -ENOMEM : 0;
}

static void on_target_added(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        LbState *s = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };

        /* 409 target_already_defined: someone added it meanwhile, which is as good. */
        if (res.error == -EEXIST)
                res = (CnProviderResult) {};
        finish_view(call, &res, s->lb);
}

/* The load balancer is there: its target is the label selector on this Cluster's control-plane
 * servers, added when it is missing (removed by hand, or the Cluster recreated by clusterctl move
 * under a new UID, whose servers carry the new one; the old selector stays for the old servers). */
static void ensure_target(CnProviderCall *call, CnProviderResult *res, json_object *lb) {
        LbState *s = cn_provider_call_get_state(call);
        json_object *targets = cn_json_get(lb, "targets", NULL);
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *selector = NULL, *url = NULL;
        CnProviderHttpOptions o = { .operation = "load_balancer_add_target" };
        const char *endpoint;
        int64_t id = 0;
        int r;

        if (res->error < 0 || cn_json_get_int64(lb, &id, "id", NULL) < 0) {
                finish_view(call, res, lb);
                return;
        }
        r = target_selector(s, &selector);
        for (size_t i = 0; r >= 0 && targets && json_object_is_type(targets, json_type_array) &&
                           i < json_object_array_length(targets);
             i++)
                if (cn_json_string_is(cn_json_get(json_object_array_get_idx(targets, i), "label_selector", NULL),
                                      "selector", selector)) {
                        finish_view(call, res, lb);
                        return;
                }
        body = json_object_new_object();
        if (r >= 0 && !body)
                r = -ENOMEM;
        if (r >= 0)
                r = cn_json_set_string(body, "label_selector", "type", NULL);
        if (r >= 0)
                r = cn_json_set_string(body, selector, "label_selector", "selector", NULL);
        if (r >= 0)
                r = cn_json_set(body, json_object_new_boolean(false), "use_private_ip", NULL);
        if (r >= 0)
                r = cn_provider_hetzner_request_options(cn_provider_call_provider(call), &endpoint, &o);
        if (r >= 0 && asprintf(&url, "%s/load_balancers/%" PRIi64 "/actions/add_target", endpoint, id) < 0)
                r = -ENOMEM;
        o.body = body;
        json_object_put(s->lb);
        s->lb = json_object_get(lb);
        if (r >= 0)
                r = cn_provider_call_http(call, "POST", url, &o, on_target_added, NULL);
        if (r < 0) {
                *res = (CnProviderResult) { .error = r, .message = "could not issue the add_target request" };
                cn_provider_call_finish_machine(call, res, NULL);
        }
}

static void on_created(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };

        ensure_target(call, &res, cn_json_get(reply->body, "load_balancer", NULL));
}

static int location_member(const char *region, const char **ret_key, const char **ret_value) {
        *ret_key = "location";
        *ret_value = isempty(region) ? "fsn1" : region;
        for (size_t i = 0; i < ELEMENTSOF(network_zones); i++)
                if (streq(*ret_value, network_zones[i]))
                        *ret_key = "network_zone";
        return 0;
}

static int create_body(const LbState *s, json_object **ret) {
        _cleanup_json_ json_object *b = json_object_new_object(), *target = json_object_new_object(),
                                   *service = json_object_new_object();
        _cleanup_free_ char *selector = NULL;
        const char *where_key, *where;
        int r;

        if (!b || !target || !service)
                return -ENOMEM;
        if (target_selector(s, &selector) < 0)
                return -ENOMEM;
        (void) location_member(s->region, &where_key, &where);
        r = cn_json_set_string(b, s->name, "name", NULL);
        if (r >= 0)
                r = cn_json_set_string(b, s->type, "load_balancer_type", NULL);
        if (r >= 0)
                r = cn_json_set_string(b, where, where_key, NULL);
        if (r >= 0)
                r = cn_json_set_string(b, s->algorithm, "algorithm", "type", NULL);
        if (r >= 0)
                r = cn_json_set_string(b, s->uid, "labels", CN_PROVIDER_CLUSTER_UID_LABEL, NULL);
        if (r >= 0)
                r = cn_json_set(b, json_object_new_boolean(true), "public_interface", NULL);
        if (r >= 0)
                r = cn_json_set_string(target, "label_selector", "type", NULL);
        if (r >= 0)
                r = cn_json_set_string(target, selector, "label_selector", "selector", NULL);
        if (r >= 0)
                r = cn_json_set(target, json_object_new_boolean(false), "use_private_ip", NULL);
        if (r >= 0)
                r = cn_json_set_string(service, "tcp", "protocol", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(s->port), "listen_port", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(API_SERVER_PORT), "destination_port", NULL);
        if (r >= 0)
                r = cn_json_set_string(service, "tcp", "health_check", "protocol", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(API_SERVER_PORT), "health_check", "port", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(15), "health_check", "interval", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(10), "health_check", "timeout", NULL);
        if (r >= 0)
                r = cn_json_set(service, json_object_new_int(3), "health_check", "retries", NULL);
        if (r >= 0)
                r = cn_json_set(b, json_object_new_array(), "targets", NULL);
        if (r >= 0)
                r = json_object_array_add(json_object_object_get(b, "targets"), TAKE_PTR(target));
        if (r >= 0)
                r = cn_json_set(b, json_object_new_array(), "services", NULL);
        if (r >= 0)
                r = json_object_array_add(json_object_object_get(b, "services"), TAKE_PTR(service));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* The load balancers of the list answer that carry the UID (the selector says so already; the
 * label is checked again because deleting a load balancer is not undone). */
static size_t owned(json_object *list, const char *uid, json_object **ret_first) {
        size_t n = 0;

        *ret_first = NULL;
        for (size_t i = 0; list && json_object_is_type(list, json_type_array) && i < json_object_array_length(list);
             i++) {
                json_object *lb = json_object_array_get_idx(list, i);

                if (!streq(strempty(cn_json_string(lb, "labels", CN_PROVIDER_CLUSTER_UID_LABEL, NULL)), uid))
                        continue;
                if (n++ == 0)
                        *ret_first = lb;
        }
        return n;
}

static int list_request(CnProviderCall *c, const char *uid, const char *operation, CnProviderHttpCallback cb) {
        CnProviderHttpOptions o = { .operation = operation };
        _cleanup_free_ char *sel = NULL, *esc = NULL, *url = NULL;
        const char *endpoint;
        int r;

        r = cn_provider_hetzner_request_options(cn_provider_call_provider(c), &endpoint, &o);
        if (r < 0)
                return r;
        if (asprintf(&sel, CN_PROVIDER_CLUSTER_UID_LABEL "=%s", uid) < 0)
                return -ENOMEM;
        esc = cn_http_escape(sel);
        /* One cluster has one load balancer; a page of 50 shows every duplicate there could be. */
        if (!esc || asprintf(&url, "%s/load_balancers?label_selector=%s&per_page=50", endpoint, esc) < 0)
                return -ENOMEM;
        return cn_provider_call_http(c, "GET", url, &o, cb, NULL);
}

static bool list_ok(const CnProviderHttpReply *reply, CnProviderResult *res, json_object **ret_list) {
        json_object *list = cn_json_get(reply->body, "load_balancers", NULL);

        *res = (CnProviderResult) { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        if (res->error < 0)
                return false;
        if (!list || !json_object_is_type(list, json_type_array)) {
                *res = (CnProviderResult) { .error = -EBADMSG,
                                            .message = "unexpected load balancer list from the Hetzner API" };
                return false;
        }
        *ret_list = list;
        return true;
}

static void on_ensure_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* PUT replaces all labels: the load balancer keeps its others, and carries the new UID. */
static void relabel(CnProviderCall *call, json_object *lb) {
        LbState *s = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "load_balancer_relabel" };
        _cleanup_json_ json_object *body = json_object_new_object(), *labels = NULL;
        _cleanup_free_ char *url = NULL;
        CnProviderResult res;
        const char *endpoint;
        int64_t id = 0;
        int r;

        if (!body || json_object_deep_copy(cn_json_get(lb, "labels", NULL), &labels, NULL) < 0)
                r = -ENOMEM;
        else if (cn_json_get_int64(lb, &id, "id", NULL) < 0 || id <= 0)
                r = -EBADMSG;
        else
                r = cn_json_set_string(labels, s->uid, CN_PROVIDER_CLUSTER_UID_LABEL, NULL);
        if (r >= 0)
                r = cn_json_set(body, TAKE_PTR(labels), "labels", NULL);
        if (r >= 0)
                r = cn_provider_hetzner_request_options(cn_provider_call_provider(call), &endpoint, &o);
        if (r >= 0 && asprintf(&url, "%s/load_balancers/%" PRIi64, endpoint, id) < 0)
                r = -ENOMEM;
        o.body = body;
        if (r >= 0)
                r = cn_provider_call_http(call, "PUT", url, &o, on_created, NULL);
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = r == -EBADMSG
                                                   ? "unexpected load balancer object from the Hetzner API"
                                                   : "could not issue the load balancer relabel request" };
                cn_provider_call_finish_machine(call, &res, NULL);
        }
}

static void on_ensure_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        LbState *s = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "load_balancer_create" };
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *url = NULL;
        CnProviderResult res;
        json_object *list, *first;
        const char *endpoint;
        size_t n;
        int r;

        if (!list_ok(reply, &res, &list)) {
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        n = owned(list, s->looking_back ? s->previous_uid : s->uid, &first);
        if (n > 1) {
                res = (CnProviderResult) { .error = -CN_PROVIDER_EMULTIPLE,
                                           .message = "several load balancers carry this cluster's UID" };
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        if (n == 1 && s->looking_back) {
                relabel(call, first);
                return;
        }
        if (n == 1) {
                ensure_target(call, &res, first);
                return;
        }
        if (s->previous_uid && !s->looking_back) {
                /* Recreated (clusterctl move): its load balancer carries the UID it had. */
                s->looking_back = true;
                r = list_request(call, s->previous_uid, "load_balancer_get", on_ensure_list);
                if (r < 0) {
                        res = (CnProviderResult) { .error = r, .message = "could not issue the load balancer list request" };
                        cn_provider_call_finish_machine(call, &res, NULL);
                }
                return;
        }
        r = create_body(s, &body);
        if (r >= 0)
                r = cn_provider_hetzner_request_options(cn_provider_call_provider(call), &endpoint, &o);
        if (r >= 0 && asprintf(&url, "%s/load_balancers", endpoint) < 0)
                r = -ENOMEM;
        o.body = body;
        if (r >= 0)
                r = cn_provider_call_http(call, "POST", url, &o, on_created, NULL);
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = "could not issue the load balancer create request" };
                cn_provider_call_finish_machine(call, &res, NULL);
        }
}

static int lb_state_new(const CnProviderLoadBalancer *lb, bool settings, LbState **ret, char **ret_reason) {
        _cleanup_(lb_state_freep) LbState *s = calloc(1, sizeof(LbState));
        const char *type = NULL, *algorithm = NULL;
        int r;

        if (!s)
                return -ENOMEM;
        if (isempty(lb->uid) || isempty(lb->name))
                return -EINVAL;
        if (settings) {
                if (isempty(lb->targets_of))
                        return -EINVAL;
                r = cn_provider_hetzner_lb_settings(lb->spec, &type, &algorithm, &s->port, ret_reason);
                if (r < 0)
                        return r;
                if (!(s->type = strdup(type)) || !(s->algorithm = strdup(algorithm)) ||
                    !(s->targets_of = strdup(lb->targets_of)) ||
                    (!isempty(lb->region) && !(s->region = strdup(lb->region))) ||
                    lb_name(lb->name, lb->uid, &s->name) < 0)
                        return -ENOMEM;
        }
        s->uid = strdup(lb->uid);
        if (!s->uid || (!isempty(lb->previous_uid) && !streq(lb->previous_uid, lb->uid) &&
                        !(s->previous_uid = strdup(lb->previous_uid))))
                return -ENOMEM;
        *ret = TAKE_PTR(s);
        return 0;
}

typedef struct LbArgs {
        const CnProviderLoadBalancer *lb;
        bool settings;
        const char *operation;
        CnProviderHttpCallback cb;
} LbArgs;

static int start_list(CnProviderCall *c, void *arg) {
        LbArgs *a = arg;
        LbState *s = NULL;
        int r;

        r = lb_state_new(a->lb, a->settings, &s, NULL);
        if (r < 0)
                return r;
        cn_provider_call_set_state(c, s, lb_state_free);
        return list_request(c, s->uid, a->operation, a->cb);
}

int cn_provider_hetzner_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb,
                                             CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret,
                                             char **ret_reason) {
        LbArgs a = { .lb = lb, .settings = true, .operation = "load_balancer_get", .cb = on_ensure_list };
        const char *type, *algorithm;
        int port, r;

        /* A spec that cannot be built is refused before any request. */
        r = cn_provider_hetzner_lb_settings(lb->spec, &type, &algorithm, &port, ret_reason);
        if (r < 0)
                return r;
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_list, &a, ret);
}

static void on_cleanup_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        LbState *s = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "load_balancer_delete" };
        _cleanup_free_ char *url = NULL;
        CnProviderResult res;
        json_object *list, *first;
        const char *endpoint;
        int64_t id;
        int r;

        if (!list_ok(reply, &res, &list)) {
                cn_provider_call_finish_cleanup(call, &res, false);
                return;
        }
        if (owned(list, s->looking_back ? s->previous_uid : s->uid, &first) == 0) {
                /* Recreated by clusterctl move and deleted before ensure relabelled it: the load
                 * balancer still carries the UID this object's status recorded. */
                if (s->previous_uid && !s->looking_back) {
                        s->looking_back = true;
                        r = list_request(call, s->previous_uid, "load_balancer_cleanup_list", on_cleanup_list);
                        if (r < 0) {
                                res = (CnProviderResult) { .error = r,
                                                           .message = "could not issue the load balancer list request" };
                                cn_provider_call_finish_cleanup(call, &res, false);
                        }
                        return;
                }
                cn_provider_call_finish_cleanup(call, &res, true);
                return;
        }
        if (cn_json_get_int64(first, &id, "id", NULL) < 0 || id <= 0) {
                res = (CnProviderResult) { .error = -EBADMSG,
                                           .message = "unexpected load balancer object from the Hetzner API" };
                cn_provider_call_finish_cleanup(call, &res, false);
                return;
        }
        r = cn_provider_hetzner_request_options(cn_provider_call_provider(call), &endpoint, &o);
        if (r >= 0 && asprintf(&url, "%s/load_balancers/%" PRIi64, endpoint, id) < 0)
                r = -ENOMEM;
        if (r >= 0)
                r = cn_provider_call_http(call, "DELETE", url, &o, cn_provider_on_deleted, NULL);
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = "could not issue the load balancer delete request" };
                cn_provider_call_finish_cleanup(call, &res, false);
        }
}

int cn_provider_hetzner_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb,
                                              CnProviderCleanupCallback cb, void *userdata, CnProviderCall **ret) {
        LbArgs a = { .lb = lb, .operation = "load_balancer_cleanup_list", .cb = on_cleanup_list };

        return cn_provider_start_machine_call(p, NULL, cb, userdata, start_list, &a, ret);
}
