/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack control-plane endpoint of a Cluster API cluster without Octavia, as
 * cluster-api-provider-openstack does with its API server load balancer disabled: a Neutron
 * floating IP on the external network, found by its description (which names the
 * CloudnodeCluster's UID) before one is allocated, and associated with the port of the first
 * control-plane server; when that server is gone it moves to the next one. Deleted only when its
 * description is the cluster's. One recreated by clusterctl move takes over the floating IP of its
 * previous UID. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>

#include "json-util.h"
#include "provider-openstack.h"
#include "string-util.h"

#define API_SERVER_PORT 6443
#define DESCRIPTION "cloudnode control-plane endpoint of cluster "

typedef struct FipCall {
        CnOpenStackAuth auth; /* first: the call's state is its auth */
        char *description;
        char *previous_description; /* of the UID before a clusterctl move (NULL: none) */
        bool looking_back;          /* the list in flight is by previous_description */
        char **members;       /* server ids of the control-plane machines, in order */
        bool cleanup;
        json_object *fip;     /* the floating IP being associated */
} FipCall;

static void fip_call_free(void *p) {
        FipCall *f = p;

        if (!f)
                return;
        free(f->description);
        free(f->previous_description);
        strv_free(f->members);
        json_object_put(f->fip);
        free(f);
}

static void finish(CnProviderCall *call, const CnProviderResult *res, json_object *view) {
        FipCall *f = cn_provider_call_get_state(call);

        if (f->cleanup)
                cn_provider_call_finish_cleanup(call, res, false);
        else
                cn_provider_call_finish_machine(call, res, view);
}

static void fail(CnProviderCall *call, int error, const char *message) {
        finish(call, &(CnProviderResult) { .error = error, .message = message }, NULL);
}

static void fail_reply(CnProviderCall *call, const CnProviderHttpReply *reply) {
        finish(call, &(CnProviderResult) { .error = reply->error, .retry_after = reply->retry_after,
                                           .message = reply->message }, NULL);
}

/* A Neutron request on the call (after authorization). */
static int neutron(CnProviderCall *call, const char *method, json_object *body, const char *operation,
                   CnProviderHttpCallback cb, const char *fmt, ...) _printf_(6, 7);
static int neutron(CnProviderCall *call, const char *method, json_object *body, const char *operation,
                   CnProviderHttpCallback cb, const char *fmt, ...) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));
        CnProviderHttpOptions opts = {
                .auth_token = o->token.value,
                .ca_file = o->ca_file,
                .body = body,
                .error_parser = cn_provider_openstack_error_message,
                .operation = operation,
        };
        _cleanup_free_ char *path = NULL, *url = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&path, fmt, ap);
        va_end(ap);
        if (r < 0 || asprintf(&url, "%s%s", o->network_url, path) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, method, url, &opts, cb, NULL);
}

int cn_provider_openstack_fip_view(json_object *fip, json_object **ret) {
        _cleanup_json_ json_object *v = json_object_new_object();
        const char *id = cn_json_string(fip, "id", NULL), *ip = cn_json_string(fip, "floating_ip_address", NULL);
        unsigned char addr[16];
        int r;

        if (!v)
                return -ENOMEM;
        /* The endpoint's host goes into every kubeconfig of the cluster: an address, nothing else. */
        if (isempty(id) || !ip || inet_pton(AF_INET, ip, addr) != 1)
                return -EBADMSG;
        r = cn_json_set_string(v, id, "id", NULL);
        if (r >= 0)
                r = cn_json_set_string(v, ip, "host", NULL);
        if (r >= 0)
                r = cn_json_set(v, json_object_new_int(API_SERVER_PORT), "port", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        return 0;
}

static void finish_view(CnProviderCall *call, json_object *fip) {
        json_object *view = NULL;

        if (cn_provider_openstack_fip_view(fip, &view) < 0) {
                fail(call, -EBADMSG, "unexpected floating IP object from the Neutron API");
                return;
        }
        cn_provider_call_finish_machine(call, &(CnProviderResult) {}, view);
}

static void on_associated(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        finish_view(call, cn_json_get(reply->body, "floatingip", NULL));
}

static void on_ports(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *ports = cn_json_get(reply->body, "ports", NULL), *body = NULL;
        const char *port_id = NULL;
        int r;

        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (!ports || !json_object_is_type(ports, json_type_array)) {
                fail(call, -EBADMSG, "unexpected port list from the Neutron API");
                return;
        }
        for (size_t i = 0; !port_id && i < json_object_array_length(ports); i++) {
                json_object *ips = cn_json_get(json_object_array_get_idx(ports, i), "fixed_ips", NULL);

                for (size_t j = 0; ips && json_object_is_type(ips, json_type_array) && j < json_object_array_length(ips);
                     j++) {
                        const char *ip = cn_json_string(json_object_array_get_idx(ips, j), "ip_address", NULL);
                        unsigned char a[4];

                        if (ip && inet_pton(AF_INET, ip, a) == 1) {
                                port_id = cn_json_string(json_object_array_get_idx(ports, i), "id", NULL);
                                break;
                        }
                }
        }
        if (!port_id) {
                /* The server has no IPv4 port yet: associate once it has. */
                fail(call, -EAGAIN, "the first control-plane server has no IPv4 port yet");
                return;
        }
        body = json_object_new_object();
        r = body ? cn_json_set_string(body, port_id, "floatingip", "port_id", NULL) : -ENOMEM;
        if (r >= 0)
                r = neutron(call, "PUT", body, "load_balancer_associate", on_associated, "/v2.0/floatingips/%s",
                            cn_json_string(f->fip, "id", NULL));
        json_object_put(body);
        if (r < 0)
                fail(call, r, "could not issue the floating IP association request");
}

/* The floating IP is there: associated with a control-plane server, or moved to the first one. */
static void associate(CnProviderCall *call, json_object *fip) {
        FipCall *f = cn_provider_call_get_state(call);
        const char *device = cn_json_string(fip, "port_details", "device_id", NULL);
        _cleanup_free_ char *esc = NULL;
        int r;

        if (isempty(cn_json_string(fip, "id", NULL))) {
                fail(call, -EBADMSG, "unexpected floating IP object from the Neutron API");
                return;
        }
        if (strv_length(f->members) == 0 || (device && strv_contains(f->members, device)) ||
            (!device && !isempty(cn_json_string(fip, "port_id", NULL)))) {
                finish_view(call, fip);
                return;
        }
        json_object_put(f->fip);
        f->fip = json_object_get(fip);
        esc = cn_http_escape(f->members[0]);
        r = esc ? neutron(call, "GET", NULL, "load_balancer_ports", on_ports, "/v2.0/ports?device_id=%s", esc)
                : -ENOMEM;
        if (r < 0)
                fail(call, r, "could not issue the port request");
}

static void on_created(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        associate(call, cn_json_get(reply->body, "floatingip", NULL));
}

static void on_external_networks(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *nets = cn_json_get(reply->body, "networks", NULL), *body = NULL;
        const char *net;
        int r;

        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (!nets || !json_object_is_type(nets, json_type_array)) {
                fail(call, -EBADMSG, "unexpected network list from the Neutron API");
                return;
        }
        net = json_object_array_length(nets) > 0 ? cn_json_string(json_object_array_get_idx(nets, 0), "id", NULL)
                                                 : NULL;
        if (isempty(net)) {
                fail(call, -EINVAL, "the cloud has no external network to allocate a floating IP from");
                return;
        }
        body = json_object_new_object();
        r = body ? cn_json_set_string(body, net, "floatingip", "floating_network_id", NULL) : -ENOMEM;
        if (r >= 0)
                r = cn_json_set_string(body, f->description, "floatingip", "description", NULL);
        if (r >= 0)
                r = neutron(call, "POST", body, "load_balancer_create", on_created, "/v2.0/floatingips");
        json_object_put(body);
        if (r < 0)
                fail(call, r, "could not issue the floating IP create request");
}

static void on_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *fips = cn_json_get(reply->body, "floatingips", NULL), *first = NULL;
        size_t n = 0;
        int r;

        if (cn_provider_openstack_reauthorize(call, &f->auth, reply))
                return;
        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (!fips || !json_object_is_type(fips, json_type_array)) {
                fail(call, -EBADMSG, "unexpected floating IP list from the Neutron API");
                return;
        }
        /* The filter says so already; checked again because a delete is not undone. */
        for (size_t i = 0; i < json_object_array_length(fips); i++) {
                json_object *fip = json_object_array_get_idx(fips, i);

                if (!streq(strempty(cn_json_string(fip, "description", NULL)),
                           f->looking_back ? f->previous_description : f->description))
                        continue;
                if (n++ == 0)
                        first = fip;
        }
        if (f->cleanup) {
                const char *id = cn_json_string(first, "id", NULL);

                if (n == 0) {
                        cn_provider_call_finish_cleanup(call, &(CnProviderResult) {}, true);
                        return;
                }
                if (isempty(id)) {
                        fail(call, -EBADMSG, "unexpected floating IP object from the Neutron API");
                        return;
                }
                r = neutron(call, "DELETE", NULL, "load_balancer_delete", cn_provider_on_deleted,
                            "/v2.0/floatingips/%s", id);
                if (r < 0)
                        fail(call, r, "could not issue the floating IP delete request");
                return;
        }
        if (n > 1) {
                fail(call, -CN_PROVIDER_EMULTIPLE, "several floating IPs carry this cluster's UID");
                return;
        }
        if (n == 1 && f->looking_back) {
                /* Recreated (clusterctl move): its floating IP now names the new UID. */
                _cleanup_json_ json_object *body = json_object_new_object();

                r = body ? cn_json_set_string(body, f->description, "floatingip", "description", NULL) : -ENOMEM;
                if (r >= 0 && isempty(cn_json_string(first, "id", NULL)))
                        r = -EBADMSG;
                if (r >= 0)
                        r = neutron(call, "PUT", body, "load_balancer_relabel", on_created, "/v2.0/floatingips/%s",
                                    cn_json_string(first, "id", NULL));
                if (r < 0)
                        fail(call, r, r == -EBADMSG ? "unexpected floating IP object from the Neutron API"
                                                    : "could not issue the floating IP relabel request");
                return;
        }
        if (n == 1) {
                associate(call, first);
                return;
        }
        if (f->previous_description && !f->looking_back) {
                _cleanup_free_ char *esc = cn_http_escape(f->previous_description);

                f->looking_back = true;
                r = esc ? neutron(call, "GET", NULL, "load_balancer_get", on_list, "/v2.0/floatingips?description=%s",
                                  esc)
                        : -ENOMEM;
                if (r < 0)
                        fail(call, r, "could not issue the floating IP list request");
                return;
        }
        r = neutron(call, "GET", NULL, "load_balancer_networks", on_external_networks,
                    "/v2.0/networks?router:external=true");
        if (r < 0)
                fail(call, r, "could not issue the network request");
}

static int fip_next(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));
        _cleanup_free_ char *esc = NULL;

        if (!o->network_url) {
                fail(call, -EOPNOTSUPP, "no network endpoint in the Keystone catalog for this region");
                return 0;
        }
        esc = cn_http_escape(f->description);
        if (!esc)
                return -ENOMEM;
        return neutron(call, "GET", NULL, f->cleanup ? "load_balancer_cleanup_list" : "load_balancer_get", on_list,
                       "/v2.0/floatingips?description=%s", esc);
}

static void fip_fail(CnProviderCall *call, const CnProviderResult *res) {
        finish(call, res, NULL);
}

typedef struct FipArgs {
        const CnProviderLoadBalancer *lb;
        bool cleanup;
} FipArgs;

static int start_fip(CnProviderCall *call, void *arg) {
        FipArgs *a = arg;
        FipCall *f = calloc(1, sizeof(FipCall));

        if (!f)
                return -ENOMEM;
        cn_provider_call_set_state(call, f, fip_call_free);
        f->auth = (CnOpenStackAuth) { .next = fip_next, .fail = fip_fail };
        f->cleanup = a->cleanup;
        if (asprintf(&f->description, DESCRIPTION "%s", a->lb->uid) < 0)
                return -ENOMEM;
        if (!a->cleanup && !isempty(a->lb->previous_uid) && !streq(a->lb->previous_uid, a->lb->uid) &&
            asprintf(&f->previous_description, DESCRIPTION "%s", a->lb->previous_uid) < 0)
                return -ENOMEM;
        for (size_t i = 0; a->lb->members && a->lb->members[i]; i++) {
                const char *id = cn_provider_openstack_server_id(a->lb->members[i], true);

                if (id && strv_extend(&f->members, id) < 0)
                        return -ENOMEM;
        }
        return cn_provider_openstack_authorize(call, &f->auth);
}

int cn_provider_openstack_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb,
                                               CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret,
                                               char **ret_reason) {
        FipArgs a = { .lb = lb };
        json_object *port = cn_json_get(lb->spec, "port", NULL);

        if (isempty(lb->uid))
                return -EINVAL;
        if (port && (!json_object_is_type(port, json_type_int) || json_object_get_int64(port) != API_SERVER_PORT))
                return cn_provider_config_error(ret_reason, EINVAL,
                                                "spec.controlPlaneLoadBalancer.port: a floating IP reaches the API "
                                                "servers on their own port, 6443");
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_fip, &a, ret);
}

int cn_provider_openstack_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb,
                                                CnProviderCleanupCallback cb, void *userdata, CnProviderCall **ret) {
        FipArgs a = { .lb = lb, .cleanup = true };

        if (isempty(lb->uid))
                return -EINVAL;
        return cn_provider_start_machine_call(p, NULL, cb, userdata, start_fip, &a, ret);
}
