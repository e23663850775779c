/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack control-plane endpoint of a Cluster API cluster.
 *
 * With Octavia (a load-balancer service in the Keystone catalog), as cluster-api-provider-openstack
 * builds its API server load balancer: an Octavia load balancer (<cluster>-kube-apiserver-<UID
 * prefix>, the name never how it is found) whose description names the
 * CloudnodeCluster's UID (found by it before one is created, checked again before a delete), its
 * VIP on the project's first internal network; a TCP listener on spec.port, a pool with
 * spec.algorithm, a TCP health monitor, and the control-plane servers' IPv4 addresses as members
 * on 6443, one change at a time: Octavia refuses changes while the load balancer is PENDING_*, so
 * after each (and after a 409) it is polled until ACTIVE. The endpoint is a floating IP on the
 * VIP's port (the VIP itself without an external network). Deleted with cascade=true (once it is
 * not PENDING_*, and polled until it is gone), then the floating IP.
 *
 * Without Octavia, as cluster-api-provider-openstack does with its API server load balancer
 * disabled: a Neutron floating IP on the external network, found by its description (which names
 * the CloudnodeCluster's UID) before one is allocated, and associated with the port of the first
 * control-plane server; when that server is gone it moves to the next one. Deleted only when its
 * description is the cluster's.
 *
 * One recreated by clusterctl move takes over (or, deleted first, deletes) the load balancer and
 * floating IP of its previous UID. */
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
        /* Octavia (the catalog has a load-balancer service) */
        bool octavia;
        bool lb_looking_back;  /* the load balancer list in flight is by previous_description */
        int port;              /* the listener's */
        const char *algorithm; /* ROUND_ROBIN, LEAST_CONNECTIONS */
        char *name, *tag;
        char *lb_id, *vip_port, *vip_address, *listener_id, *pool_id;
        char **addresses;      /* the control-plane servers' IPv4 addresses: the pool's members */
        usec_t poll_delay, pending_deadline;
        void (*after_active)(CnProviderCall *call); /* once the load balancer is ACTIVE again */
} FipCall;

static void fip_call_free(void *p) {
        FipCall *f = p;

        if (!f)
                return;
        free(f->description);
        free(f->previous_description);
        strv_free(f->members);
        json_object_put(f->fip);
        free(f->name);
        free(f->tag);
        free(f->lb_id);
        free(f->vip_port);
        free(f->vip_address);
        free(f->listener_id);
        free(f->pool_id);
        strv_free(f->addresses);
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

typedef enum Service { NEUTRON, OCTAVIA } Service;

/* A Neutron or Octavia v2 request on the call (after authorization). */
static int request(CnProviderCall *call, Service service, const char *method, json_object *body,
                   const char *operation, CnProviderHttpCallback cb, const char *fmt, ...) _printf_(7, 8);
static int request(CnProviderCall *call, Service service, const char *method, json_object *body,
                   const char *operation, CnProviderHttpCallback cb, const char *fmt, ...) {
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
        if (r < 0 || asprintf(&url, "%s%s", service == OCTAVIA ? o->octavia_url : o->network_url, path) < 0)
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
        FipCall *f = cn_provider_call_get_state(call);
        json_object *view = NULL;
        int r;

        if (cn_provider_openstack_fip_view(fip, &view) < 0) {
                fail(call, -EBADMSG, "unexpected floating IP object from the Neutron API");
                return;
        }
        if (f->octavia) {
                /* The load balancer's listener, on the floating IP of its VIP. */
                r = cn_json_set_string(view, f->lb_id, "id", NULL);
                if (r >= 0)
                        r = cn_json_set(view, json_object_new_int(f->port), "port", NULL);
                if (r < 0) {
                        json_object_put(view);
                        fail(call, -ENOMEM, "out of memory");
                        return;
                }
        }
        cn_provider_call_finish_machine(call, &(CnProviderResult) {}, view);
}

/* Octavia without an external network: the endpoint is the VIP itself. */
static void finish_vip(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_json_ json_object *fake = json_object_new_object();
        int r;

        r = fake ? cn_json_set_string(fake, f->lb_id, "id", NULL) : -ENOMEM;
        if (r >= 0)
                r = cn_json_set_string(fake, f->vip_address, "floating_ip_address", NULL);
        if (r < 0) {
                fail(call, r, "out of memory");
                return;
        }
        finish_view(call, fake);
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
                r = request(call, NEUTRON, "PUT", body, "load_balancer_associate", on_associated, "/v2.0/floatingips/%s",
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
        if (f->octavia) {
                /* On the VIP's port, as cluster-api-provider-openstack puts it. */
                _cleanup_json_ json_object *body = json_object_new_object();

                if (streq(strempty(cn_json_string(fip, "port_id", NULL)), f->vip_port)) {
                        finish_view(call, fip);
                        return;
                }
                r = body ? cn_json_set_string(body, f->vip_port, "floatingip", "port_id", NULL) : -ENOMEM;
                if (r >= 0)
                        r = request(call, NEUTRON, "PUT", body, "load_balancer_associate", on_associated,
                                    "/v2.0/floatingips/%s", cn_json_string(fip, "id", NULL));
                if (r < 0)
                        fail(call, r, "could not issue the floating IP association request");
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
        r = esc ? request(call, NEUTRON, "GET", NULL, "load_balancer_ports", on_ports, "/v2.0/ports?device_id=%s", esc)
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

/* The list answered as key (NULL: the call ended with the error, or with what for no list). */
static json_object *list_of(CnProviderCall *call, const CnProviderHttpReply *reply, const char *key,
                            const char *what) {
        json_object *l = cn_json_get(reply->body, key, NULL);

        if (reply->error < 0) {
                fail_reply(call, reply);
                return NULL;
        }
        if (!l || !json_object_is_type(l, json_type_array)) {
                fail(call, -EBADMSG, what);
                return NULL;
        }
        return l;
}

/* The id of the first network of a Neutron network list (NULL: none); false when the answer was an
 * error or no list, the call ended with it. */
static bool first_network(CnProviderCall *call, const CnProviderHttpReply *reply, const char **ret) {
        json_object *nets = list_of(call, reply, "networks", "unexpected network list from the Neutron API");

        if (!nets)
                return false;
        *ret = json_object_array_length(nets) > 0 ? cn_json_string(json_object_array_get_idx(nets, 0), "id", NULL)
                                                  : NULL;
        return true;
}

static void on_external_networks(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *body = NULL;
        const char *net;
        int r;

        if (!first_network(call, reply, &net))
                return;
        if (isempty(net) && f->octavia) {
                finish_vip(call);
                return;
        }
        if (isempty(net)) {
                fail(call, -EINVAL, "the cloud has no external network to allocate a floating IP from");
                return;
        }
        body = json_object_new_object();
        r = body ? cn_json_set_string(body, net, "floatingip", "floating_network_id", NULL) : -ENOMEM;
        if (r >= 0)
                r = cn_json_set_string(body, f->description, "floatingip", "description", NULL);
        if (r >= 0)
                r = request(call, NEUTRON, "POST", body, "load_balancer_create", on_created, "/v2.0/floatingips");
        json_object_put(body);
        if (r < 0)
                fail(call, r, "could not issue the floating IP create request");
}

static void on_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* Nothing carries the UID: the floating IP of the UID before a clusterctl move, if any. */
static void look_back(CnProviderCall *call, const char *operation) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_free_ char *esc = cn_http_escape(f->previous_description);
        int r;

        f->looking_back = true;
        r = esc ? request(call, NEUTRON, "GET", NULL, operation, on_list, "/v2.0/floatingips?description=%s", esc) : -ENOMEM;
        if (r < 0)
                fail(call, r, "could not issue the floating IP list request");
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

                if (n == 0 && f->previous_description && !f->looking_back) {
                        /* Recreated by clusterctl move and deleted before ensure relabelled it. */
                        look_back(call, "load_balancer_cleanup_list");
                        return;
                }
                if (n == 0) {
                        cn_provider_call_finish_cleanup(call, &(CnProviderResult) {}, true);
                        return;
                }
                if (isempty(id)) {
                        fail(call, -EBADMSG, "unexpected floating IP object from the Neutron API");
                        return;
                }
                r = request(call, NEUTRON, "DELETE", NULL, "load_balancer_delete", cn_provider_on_deleted,
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
                        r = request(call, NEUTRON, "PUT", body, "load_balancer_relabel", on_created, "/v2.0/floatingips/%s",
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
                look_back(call, "load_balancer_get");
                return;
        }
        r = request(call, NEUTRON, "GET", NULL, "load_balancer_networks", on_external_networks,
                    "/v2.0/networks?router:external=true");
        if (r < 0)
                fail(call, r, "could not issue the network request");
}

static int fip_list(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_free_ char *esc = NULL;

        f->looking_back = false;
        esc = cn_http_escape(f->description);
        if (!esc)
                return -ENOMEM;
        return request(call, NEUTRON, "GET", NULL, f->cleanup ? "load_balancer_cleanup_list" : "load_balancer_get", on_list,
                       "/v2.0/floatingips?description=%s", esc);
}

/* ---- Octavia: load balancer, listener, pool, health monitor, members; then the floating IP ---- */

/* A change under a load balancer takes Octavia seconds, a new load balancer (its amphorae boot)
 * a minute or more: the status is asked after a delay that starts short and doubles up to a cap. */
#define OCTAVIA_POLL_FIRST_USEC (200 * USEC_PER_MSEC)
#define OCTAVIA_POLL_CAP_USEC (5 * USEC_PER_SEC)
#define OCTAVIA_PENDING_MAX_USEC (10 * USEC_PER_MINUTE) /* that long PENDING_*: ask again later */
#define LB "/v2/lbaas/loadbalancers"

static void on_octavia_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
static void octavia_listeners(CnProviderCall *call);
static void octavia_members(CnProviderCall *call);
static void octavia_delete(CnProviderCall *call);

static int octavia_list(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_free_ char *esc = cn_http_escape(f->lb_looking_back ? f->previous_description : f->description);

        if (!esc)
                return -ENOMEM;
        return request(call, OCTAVIA, "GET", NULL, f->cleanup ? "load_balancer_cleanup_list" : "load_balancer_get",
                       on_octavia_list, LB "?description=%s", esc);
}

/* A mutation's answer: on to the next step once the load balancer is ACTIVE again. */
static void wait_active(CnProviderCall *call, void (*next)(CnProviderCall *call));

static void on_mutated(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);

        /* 409: Octavia refuses changes while the load balancer is PENDING_*; the step runs again
         * once it is ACTIVE. */
        if (reply->error < 0 && reply->status != 409) {
                fail_reply(call, reply);
                return;
        }
        wait_active(call, f->after_active);
}

/* A change under the load balancer (path, then suffix); next runs once it is ACTIVE again. */
static void mutate(CnProviderCall *call, const char *method, json_object *body, const char *operation,
                   void (*next)(CnProviderCall *call), const char *path, const char *suffix) {
        FipCall *f = cn_provider_call_get_state(call);
        int r;

        f->after_active = next;
        r = request(call, OCTAVIA, method, body, operation, on_mutated, "%s%s", path, strempty(suffix));
        if (r < 0)
                fail(call, r, "could not issue the Octavia request");
}

static void poll_again(CnProviderCall *call);

static int set_dup(char **dst, const char *v) {
        char *c = v ? strdup(v) : NULL;

        if (v && !c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static void on_lb_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *lb = cn_json_get(reply->body, "loadbalancer", NULL);
        const char *st = cn_json_string(lb, "provisioning_status", NULL);

        if (reply->error == -ENOENT && f->cleanup) {
                /* Deleted: then whatever else carries the UID, and the floating IP. */
                int r = octavia_list(call);

                if (r < 0)
                        fail(call, r, "could not issue the load balancer list request");
                return;
        }
        if (reply->error == -ENOENT) {
                fail(call, -EAGAIN, "the Octavia load balancer went away; it is looked up again");
                return;
        }
        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (!st || isempty(cn_json_string(lb, "vip_port_id", NULL)) || isempty(cn_json_string(lb, "vip_address", NULL))) {
                fail(call, -EBADMSG, "unexpected load balancer object from the Octavia API");
                return;
        }
        if (streq(st, "ERROR") && f->cleanup) {
                f->after_active(call); /* one in ERROR can be deleted */
                return;
        }
        if (streq(st, "ERROR")) {
                fail(call, -EAGAIN, "the Octavia load balancer is in provisioning_status ERROR");
                return;
        }
        if (!streq(st, "ACTIVE")) {
                usec_t delay = f->poll_delay;

                if (cn_now(CLOCK_MONOTONIC) > f->pending_deadline) {
                        fail(call, -EAGAIN, "the Octavia load balancer stays PENDING");
                        return;
                }
                f->poll_delay = MIN(delay * 2, OCTAVIA_POLL_CAP_USEC);
                if (cn_provider_call_after(call, delay, poll_again) < 0)
                        fail(call, -ENOMEM, "out of memory");
                return;
        }
        if (set_dup(&f->vip_port, cn_json_string(lb, "vip_port_id", NULL)) < 0 ||
            set_dup(&f->vip_address, cn_json_string(lb, "vip_address", NULL)) < 0) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        f->after_active(call);
}

static void poll_again(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        int r;

        r = request(call, OCTAVIA, "GET", NULL, "load_balancer_status", on_lb_status, LB "/%s", f->lb_id);
        if (r < 0)
                fail(call, r, "could not issue the load balancer request");
}

static void wait_active(CnProviderCall *call, void (*next)(CnProviderCall *call)) {
        FipCall *f = cn_provider_call_get_state(call);

        f->after_active = next;
        f->poll_delay = OCTAVIA_POLL_FIRST_USEC;
        f->pending_deadline = cn_now(CLOCK_MONOTONIC) + OCTAVIA_PENDING_MAX_USEC;
        poll_again(call);
}

static void octavia_fip(CnProviderCall *call) {
        int r = fip_list(call);

        if (r < 0)
                fail(call, r, "could not issue the floating IP list request");
}


static void on_members(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *l = list_of(call, reply, "members", "unexpected member list from the Octavia API");
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_strv_free_ char **have = NULL;

        if (!l)
                return;
        for (size_t i = 0; i < json_object_array_length(l); i++)
                if (strv_extend(&have, strempty(cn_json_string(json_object_array_get_idx(l, i), "address", NULL))) < 0)
                        goto oom;
        if (asprintf(&path, "/v2/lbaas/pools/%s/members", f->pool_id) < 0)
                goto oom;
        /* One change at a time: Octavia takes the next once the load balancer is ACTIVE again. */
        STRV_FOREACH(a, f->addresses)
                if (!strv_contains(have, *a)) {
                        body = json_object_new_object();
                        if (!body || cn_json_set_string(body, *a, "member", "address", NULL) < 0 ||
                            cn_json_set(body, json_object_new_int(API_SERVER_PORT), "member", "protocol_port", NULL) < 0)
                                goto oom;
                        mutate(call, "POST", body, "load_balancer_member_add", octavia_members, path, NULL);
                        return;
                }
        /* No control-plane server known (yet): the members stay as they are. */
        for (size_t i = 0; strv_length(f->addresses) > 0 && i < json_object_array_length(l); i++) {
                json_object *m = json_object_array_get_idx(l, i);
                const char *id = cn_json_string(m, "id", NULL);
                _cleanup_free_ char *one = NULL;

                if (strv_contains(f->addresses, strempty(cn_json_string(m, "address", NULL))) || isempty(id))
                        continue;
                if (asprintf(&one, "/%s", id) < 0)
                        goto oom;
                mutate(call, "DELETE", NULL, "load_balancer_member_remove", octavia_members, path, one);
                return;
        }
        octavia_fip(call);
        return;
oom:
        fail(call, -ENOMEM, "out of memory");
}

static void octavia_members(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        int r = request(call, OCTAVIA, "GET", NULL, "load_balancer_members", on_members, "/v2/lbaas/pools/%s/members", f->pool_id);

        if (r < 0)
                fail(call, r, "could not issue the member list request");
}

/* The control-plane servers' IPv4 addresses, from their Neutron ports. */
static void on_member_ports(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *ports = list_of(call, reply, "ports", "unexpected port list from the Neutron API");

        if (!ports)
                return;
        strv_free(f->addresses);
        f->addresses = NULL;
        STRV_FOREACH(m, f->members)
                for (size_t i = 0; i < json_object_array_length(ports); i++) {
                        json_object *p = json_object_array_get_idx(ports, i), *ips = cn_json_get(p, "fixed_ips", NULL);
                        const char *ip = NULL;

                        if (!streq(strempty(cn_json_string(p, "device_id", NULL)), *m))
                                continue;
                        for (size_t j = 0; ips && json_object_is_type(ips, json_type_array) &&
                                           j < json_object_array_length(ips) && !ip;
                             j++) {
                                const char *a = cn_json_string(json_object_array_get_idx(ips, j), "ip_address", NULL);
                                unsigned char b[4];

                                if (a && inet_pton(AF_INET, a, b) == 1)
                                        ip = a;
                        }
                        if (ip && !strv_contains(f->addresses, ip) && strv_extend(&f->addresses, ip) < 0) {
                                fail(call, -ENOMEM, "out of memory");
                                return;
                        }
                }
        octavia_members(call);
}

typedef struct Field {
        const char *key;
        const char *string; /* NULL: the number */
        int number;
} Field;

/* POST /v2/lbaas/<kind>s {<kind>: {name, fields...}}; the listeners are looked at again once the
 * load balancer is ACTIVE. fields ends with an empty one. */
static void create_child(CnProviderCall *call, const char *kind, const char *operation, const Field *fields) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_json_ json_object *body = json_object_new_object();
        _cleanup_free_ char *path = NULL;
        int r;

        r = body ? cn_json_set_string(body, f->name, kind, "name", NULL) : -ENOMEM;
        for (const Field *x = fields; r >= 0 && x->key; x++)
                r = x->string ? cn_json_set_string(body, x->string, kind, x->key, NULL)
                              : cn_json_set(body, json_object_new_int(x->number), kind, x->key, NULL);
        if (r >= 0 && asprintf(&path, "/v2/lbaas/%ss", kind) < 0)
                r = -ENOMEM;
        if (r < 0) {
                fail(call, r, "out of memory");
                return;
        }
        mutate(call, "POST", body, operation, octavia_listeners, path, NULL);
}

static void on_pool(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *pool = cn_json_get(reply->body, "pool", NULL);
        _cleanup_json_ json_object *body = json_object_new_object();
        int r;

        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (!body) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        if (!streq(strempty(cn_json_string(pool, "lb_algorithm", NULL)), f->algorithm)) {
                if (cn_json_set_string(body, f->algorithm, "pool", "lb_algorithm", NULL) < 0)
                        fail(call, -ENOMEM, "out of memory");
                else
                        mutate(call, "PUT", body, "load_balancer_pool_update", octavia_listeners, "/v2/lbaas/pools/",
                               f->pool_id);
                return;
        }
        if (isempty(cn_json_string(pool, "healthmonitor_id", NULL))) {
                create_child(call, "healthmonitor", "load_balancer_monitor_create",
                             (const Field[]) { { "pool_id", f->pool_id },
                                               { "type", "TCP" },
                                               { "delay", NULL, 10 },
                                               { "timeout", NULL, 5 },
                                               { "max_retries", NULL, 5 },
                                               {} });
                return;
        }
        r = request(call, NEUTRON, "GET", NULL, "load_balancer_ports", on_member_ports, "/v2.0/ports");
        if (r < 0)
                fail(call, r, "could not issue the port request");
}

static void on_listeners(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *l = list_of(call, reply, "listeners", "unexpected listener list from the Octavia API"), *mine = NULL;
        _cleanup_json_ json_object *body = json_object_new_object();
        const char *pool;
        int r;

        if (!l)
                return;
        for (size_t i = 0; i < json_object_array_length(l) && !mine; i++) {
                json_object *x = json_object_array_get_idx(l, i);
                int64_t port = 0;

                if (cn_json_get_int64(x, &port, "protocol_port", NULL) >= 0 && port == f->port &&
                    cn_json_string_is(x, "protocol", "TCP"))
                        mine = x;
        }
        if (!body) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        if (!mine) {
                create_child(call, "listener", "load_balancer_listener_create",
                             (const Field[]) { { "loadbalancer_id", f->lb_id },
                                               { "protocol", "TCP" },
                                               { "protocol_port", NULL, f->port },
                                               {} });
                return;
        }
        if (set_dup(&f->listener_id, cn_json_string(mine, "id", NULL)) < 0) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        pool = cn_json_string(mine, "default_pool_id", NULL);
        if (isempty(pool)) {
                create_child(call, "pool", "load_balancer_pool_create",
                             (const Field[]) { { "listener_id", f->listener_id },
                                               { "protocol", "TCP" },
                                               { "lb_algorithm", f->algorithm },
                                               {} });
                return;
        }
        if (set_dup(&f->pool_id, pool) < 0) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        r = request(call, OCTAVIA, "GET", NULL, "load_balancer_pool", on_pool, "/v2/lbaas/pools/%s", f->pool_id);
        if (r < 0)
                fail(call, r, "could not issue the pool request");
}

static void octavia_listeners(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        int r = request(call, OCTAVIA, "GET", NULL, "load_balancer_listeners", on_listeners,
                        "/v2/lbaas/listeners?loadbalancer_id=%s", f->lb_id);

        if (r < 0)
                fail(call, r, "could not issue the listener list request");
}

static void octavia_relabel(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_json_ json_object *body = json_object_new_object();

        if (!body || cn_json_set_string(body, f->description, "loadbalancer", "description", NULL) < 0) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        mutate(call, "PUT", body, "load_balancer_relabel", octavia_listeners, LB "/", f->lb_id);
}

static void on_lb_created(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);

        if (reply->error < 0) {
                fail_reply(call, reply);
                return;
        }
        if (isempty(cn_json_string(reply->body, "loadbalancer", "id", NULL))) {
                fail(call, -EBADMSG, "unexpected load balancer object from the Octavia API");
                return;
        }
        if (set_dup(&f->lb_id, cn_json_string(reply->body, "loadbalancer", "id", NULL)) < 0) {
                fail(call, -ENOMEM, "out of memory");
                return;
        }
        wait_active(call, octavia_listeners);
}

/* The VIP goes on the project's first internal network, the one Nova's servers are on when their
 * machine names none. */
static void on_internal_networks(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        _cleanup_json_ json_object *body = json_object_new_object(), *tags = json_object_new_array();
        const char *net;
        int r;

        if (!first_network(call, reply, &net))
                return;
        if (isempty(net)) {
                fail(call, -EINVAL, "the project has no internal network for the load balancer's VIP");
                return;
        }
        r = body && tags ? cn_json_set_string(body, f->name, "loadbalancer", "name", NULL) : -ENOMEM;
        if (r >= 0)
                r = cn_json_set_string(body, f->description, "loadbalancer", "description", NULL);
        if (r >= 0)
                r = cn_json_set_string(body, net, "loadbalancer", "vip_network_id", NULL);
        if (r >= 0)
                r = json_object_array_add(tags, json_object_new_string(f->tag));
        if (r >= 0)
                r = cn_json_set(body, TAKE_PTR(tags), "loadbalancer", "tags", NULL);
        if (r >= 0)
                r = request(call, OCTAVIA, "POST", body, "load_balancer_create", on_lb_created, LB);
        if (r < 0)
                fail(call, r, "could not issue the load balancer create request");
}

/* Deleted (or refused with 409 while PENDING_*): polled until it is gone, which lists again. */
static void on_lb_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        if (reply->error < 0 && reply->error != -ENOENT && reply->status != 409) {
                fail_reply(call, reply);
                return;
        }
        wait_active(call, octavia_delete);
}

static void octavia_delete(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        int r = request(call, OCTAVIA, "DELETE", NULL, "load_balancer_delete", on_lb_deleted, LB "/%s?cascade=true",
                        f->lb_id);

        if (r < 0)
                fail(call, r, "could not issue the load balancer delete request");
}

static void on_octavia_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        FipCall *f = cn_provider_call_get_state(call);
        json_object *l, *first = NULL;
        const char *want = f->lb_looking_back ? f->previous_description : f->description, *id;
        size_t n = 0;
        int r;

        if (cn_provider_openstack_reauthorize(call, &f->auth, reply))
                return;
        l = list_of(call, reply, "loadbalancers", "unexpected load balancer list from the Octavia API");
        if (!l)
                return;
        /* The filter says so already; checked again because a delete is not undone. */
        for (size_t i = 0; i < json_object_array_length(l); i++)
                if (cn_json_string_is(json_object_array_get_idx(l, i), "description", want) && n++ == 0)
                        first = json_object_array_get_idx(l, i);
        id = cn_json_string(first, "id", NULL);
        if (n > 0 && isempty(id)) {
                fail(call, -EBADMSG, "unexpected load balancer object from the Octavia API");
                return;
        }
        if (n == 0 && f->previous_description && !f->lb_looking_back) {
                f->lb_looking_back = true;
                r = octavia_list(call);
                if (r < 0)
                        fail(call, r, "could not issue the load balancer list request");
                return;
        }
        if (f->cleanup) {
                if (n == 0) {
                        /* No load balancer (left): then the floating IP of its VIP. */
                        r = fip_list(call);
                        if (r < 0)
                                fail(call, r, "could not issue the floating IP list request");
                        return;
                }
                /* Octavia refuses the delete while it is PENDING_*. */
                if (set_dup(&f->lb_id, id) < 0) {
                        fail(call, -ENOMEM, "out of memory");
                        return;
                }
                wait_active(call, octavia_delete);
                return;
        }
        if (n > 1) {
                fail(call, -CN_PROVIDER_EMULTIPLE, "several Octavia load balancers carry this cluster's UID");
                return;
        }
        if (n == 1) {
                if (set_dup(&f->lb_id, id) < 0) {
                        fail(call, -ENOMEM, "out of memory");
                        return;
                }
                wait_active(call, f->lb_looking_back ? octavia_relabel : octavia_listeners);
                return;
        }
        r = request(call, NEUTRON, "GET", NULL, "load_balancer_networks", on_internal_networks,
                    "/v2.0/networks?router:external=false");
        if (r < 0)
                fail(call, r, "could not issue the network request");
}


static int fip_next(CnProviderCall *call) {
        FipCall *f = cn_provider_call_get_state(call);
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));

        if (!o->network_url) {
                fail(call, -EOPNOTSUPP, "no network endpoint in the Keystone catalog for this region");
                return 0;
        }
        f->octavia = !!o->octavia_url;
        if (f->octavia)
                return octavia_list(call);
        if (!f->cleanup && f->port != API_SERVER_PORT) {
                fail(call, -EINVAL, "spec.controlPlaneLoadBalancer.port: a floating IP reaches the API servers on "
                                    "their own port, 6443 (the cloud has no Octavia)");
                return 0;
        }
        return fip_list(call);
}

static void fip_fail(CnProviderCall *call, const CnProviderResult *res) {
        finish(call, res, NULL);
}

typedef struct FipArgs {
        const CnProviderLoadBalancer *lb;
        bool cleanup;
        int port;
        const char *algorithm;
} FipArgs;

static int start_fip(CnProviderCall *call, void *arg) {
        FipArgs *a = arg;
        FipCall *f = calloc(1, sizeof(FipCall));

        if (!f)
                return -ENOMEM;
        cn_provider_call_set_state(call, f, fip_call_free);
        f->auth = (CnOpenStackAuth) { .next = fip_next, .fail = fip_fail };
        f->cleanup = a->cleanup;
        f->port = a->port;
        f->algorithm = a->algorithm;
        if (asprintf(&f->description, DESCRIPTION "%s", a->lb->uid) < 0 ||
            asprintf(&f->name, "%s-kube-apiserver-%.8s", strempty(a->lb->name), a->lb->uid) < 0 ||
            asprintf(&f->tag, CN_PROVIDER_CLUSTER_UID_LABEL "=%s", a->lb->uid) < 0)
                return -ENOMEM;
        if (!isempty(a->lb->previous_uid) && !streq(a->lb->previous_uid, a->lb->uid) &&
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
        FipArgs a = { .lb = lb, .port = API_SERVER_PORT, .algorithm = "ROUND_ROBIN" };
        json_object *port = cn_json_get(lb->spec, "port", NULL);
        const char *algorithm = cn_json_string(lb->spec, "algorithm", NULL);

        if (isempty(lb->uid))
                return -EINVAL;
        if (port && (!json_object_is_type(port, json_type_int) || json_object_get_int64(port) < 1 ||
                     json_object_get_int64(port) > 65535))
                return cn_provider_config_error(ret_reason, EINVAL, "spec.controlPlaneLoadBalancer.port: 1 to 65535");
        if (port)
                a.port = (int) json_object_get_int64(port);
        if (algorithm && streq(algorithm, "least_connections"))
                a.algorithm = "LEAST_CONNECTIONS";
        else if (algorithm && !streq(algorithm, "round_robin"))
                return cn_provider_config_error(ret_reason, EINVAL,
                                                "spec.controlPlaneLoadBalancer.algorithm: round_robin or "
                                                "least_connections");
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_fip, &a, ret);
}

int cn_provider_openstack_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb,
                                                CnProviderCleanupCallback cb, void *userdata, CnProviderCall **ret) {
        FipArgs a = { .lb = lb, .cleanup = true };

        if (isempty(lb->uid))
                return -EINVAL;
        return cn_provider_start_machine_call(p, NULL, cb, userdata, start_fip, &a, ret);
}
