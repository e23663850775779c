/* SPDX-License-Identifier: Apache-2.0 */
/* Hetzner Cloud (https://docs.hetzner.cloud/): the InstancesV2 calls through GET /v1/servers/{id}
 * and GET /v1/servers?name=, with providerIDs "hcloud://<id>" as hcloud-cloud-controller-manager
 * writes them. Settings, from cloud.conf [Global] or the environment hcloud-cloud-controller-
 * manager reads: token / token-file (HCLOUD_TOKEN), endpoint (HCLOUD_ENDPOINT), network
 * (HCLOUD_NETWORK), ca-file. */
#include <arpa/inet.h>
#include <inttypes.h>

#include "cloud-config.h"
#include "json-filter.h"
#include "json-util.h"
#include "log.h"
#include "provider-hetzner.h"

#define HETZNER_DEFAULT_ENDPOINT "https://api.hetzner.cloud/v1"
#define HETZNER_PROVIDER_ID_PREFIX CN_PROVIDER_HETZNER_ID_PREFIX

typedef struct Hetzner {
        char *endpoint;
        char *token;
        char *network;
        char *ca_file;
} Hetzner;

static void hetzner_done(CnProvider *p) {
        Hetzner *h = cn_provider_data(p);

        free(h->endpoint);
        if (h->token)
                explicit_bzero(h->token, strlen(h->token));
        free(h->token);
        free(h->network);
        free(h->ca_file);
}

static int hetzner_init(CnProvider *p, json_object *cfg, char **ret_error) {
        Hetzner *h = cn_provider_data(p);
        const char *endpoint = cn_provider_setting(p, cfg, "endpoint", "HCLOUD_ENDPOINT") ?: HETZNER_DEFAULT_ENDPOINT;
        const char *network = cn_provider_setting(p, cfg, "network", "HCLOUD_NETWORK"), *ca = cn_provider_setting(p, cfg, "ca-file", NULL);
        int r;

        h->endpoint = cn_provider_endpoint_dup(endpoint);
        if (!h->endpoint)
                goto oom;
        r = cn_provider_token_setting(p, cfg, "HCLOUD_TOKEN", "Hetzner", &h->token, ret_error);
        if (r < 0) {
                hetzner_done(p);
                return r;
        }
        if (!h->token || (network && !(h->network = strdup(network))) || (ca && !(h->ca_file = strdup(ca))))
                goto oom;
        return 0;
oom:
        hetzner_done(p);
        return -ENOMEM;
}

static const char *hetzner_error_message(json_object *body) {
        return cn_json_string(body, "error", "message", NULL);
}

/* Hetzner gives the server's /64; the node's address is the first host in it, as
 * hcloud-cloud-controller-manager reports it. */
static int ipv6_first_host(const char *network, char **ret) {
        _cleanup_free_ char *copy = strdup(network);
        unsigned char a[sizeof(struct in6_addr)];
        char out[INET6_ADDRSTRLEN], *slash;

        if (!copy)
                return -ENOMEM;
        slash = strchr(copy, '/');
        if (slash)
                *slash = 0;
        if (inet_pton(AF_INET6, copy, a) != 1)
                return -EINVAL;
        if (slash)
                a[15] |= 1;
        if (!inet_ntop(AF_INET6, a, out, sizeof(out)))
                return -EINVAL;
        *ret = strdup(out);
        return *ret ? 0 : -ENOMEM;
}

static int dup_json_string(json_object *o, char **ret, ...) {
        json_object *v;
        va_list ap;

        va_start(ap, ret);
        v = cn_json_getv(o, ap);
        va_end(ap);
        *ret = NULL;
        if (!v || json_object_is_type(v, json_type_null))
                return 0;
        *ret = strdup(json_object_get_string(v));
        return *ret ? 0 : -ENOMEM;
}

int cn_provider_hetzner_parse_server(json_object *server, const char *network, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        json_object *id, *priv, *loc;
        const char *status, *v4;
        bool v4_blocked = false;
        int r;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (!server || !json_object_object_get_ex(server, "id", &id) || !json_object_is_type(id, json_type_int))
                return -EBADMSG;
        if (asprintf(&i->instance_id, "%" PRId64, json_object_get_int64(id)) < 0 ||
            asprintf(&i->provider_id, HETZNER_PROVIDER_ID_PREFIX "%s", i->instance_id) < 0)
                return -ENOMEM;
        if (dup_json_string(server, &i->name, "name", NULL) < 0 ||
            dup_json_string(server, &i->instance_type, "server_type", "name", NULL) < 0)
                return -ENOMEM;
        /* Newer API versions put the location on the server itself; the datacenter (the zone,
         * as hcloud-cloud-controller-manager labels it) is deprecated there. */
        loc = cn_json_get(server, "location", NULL) ?: cn_json_get(server, "datacenter", "location", NULL);
        if (dup_json_string(loc, &i->region, "name", NULL) < 0 ||
            dup_json_string(server, &i->zone, "datacenter", "name", NULL) < 0)
                return -ENOMEM;
        if (!i->zone && i->region && !(i->zone = strdup(i->region)))
                return -ENOMEM;

        status = cn_json_string(server, "status", NULL);
        i->shutdown = status && streq(status, "off");

        priv = cn_json_get(server, "private_net", NULL);
        for (size_t k = 0; priv && json_object_is_type(priv, json_type_array) && k < json_object_array_length(priv); k++) {
                json_object *e = json_object_array_get_idx(priv, k), *net;
                const char *ip = cn_json_string(e, "ip", NULL);

                if (network && (!json_object_object_get_ex(e, "network", &net) ||
                                !streq(strempty(json_object_get_string(net)), network)))
                        continue;
                if (ip && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_INTERNAL_IP, ip)) < 0)
                        return r == -EINVAL ? -EBADMSG : r;
        }

        (void) cn_json_get_bool(server, &v4_blocked, "public_net", "ipv4", "blocked", NULL);
        v4 = cn_json_string(server, "public_net", "ipv4", "ip", NULL);
        if (v4 && !v4_blocked && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, v4)) < 0)
                return r == -EINVAL ? -EBADMSG : r;
        const char *v6net = cn_json_string(server, "public_net", "ipv6", "ip", NULL);
        if (v6net) {
                _cleanup_free_ char *v6 = NULL;

                r = ipv6_first_host(v6net, &v6);
                if (r < 0)
                        return r == -EINVAL ? -EBADMSG : r;
                r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, v6);
                if (r < 0)
                        return r;
        }
        if (i->name && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_HOSTNAME, i->name)) < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

/* What cn_provider_hetzner_parse_server() reads of a server, and the error: the rest of an answer
 * (image, ISO, protection, volumes, load balancers, the datacenter's server types, ...), three
 * quarters of it, is never built. */
static const CnJsonFilter server_named[] = { { "name" }, {} };
static const CnJsonFilter server_datacenter[] = { { "name" }, { "location", server_named }, {} };
static const CnJsonFilter server_public_ip[] = { { "ip" }, { "blocked" }, {} };
static const CnJsonFilter server_public_net[] = { { "ipv4", server_public_ip }, { "ipv6", server_public_ip }, {} };
static const CnJsonFilter server_private_net[] = { { "network" }, { "ip" }, {} };
static const CnJsonFilter server_members[] = {
        { "id" }, { "name" }, { "status" }, { "server_type", server_named }, { "location", server_named },
        { "datacenter", server_datacenter }, { "private_net", server_private_net }, { "public_net", server_public_net },
        {}
};
static const CnJsonFilter server_answer[] = {
        { "server", server_members }, { "servers", server_members }, { "error" }, {}
};

int cn_provider_hetzner_parse_server_answer(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error) {
        return cn_json_parse_filtered(data, size, max_size, server_answer, ret, ret_error);
}

static void on_server(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProvider *p = cn_provider_call_provider(call);
        Hetzner *h = cn_provider_data(p);
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        CnProviderInstance *instance = NULL;
        json_object *server;

        if (res.error >= 0) {
                server = cn_json_get(reply->body, "server", NULL);
                if (!server) {
                        /* Lookup by name: a list, which is empty when there is no such server. */
                        json_object *list = cn_json_get(reply->body, "servers", NULL);

                        if (list && json_object_is_type(list, json_type_array) && json_object_array_length(list) > 0)
                                server = json_object_array_get_idx(list, 0);
                        else if (list) {
                                res.error = -ENOENT;
                                res.message = "no server with that name";
                        }
                }
                if (res.error >= 0) {
                        res.error = cn_provider_hetzner_parse_server(server, h->network, &instance);
                        if (res.error < 0)
                                res.message = "unexpected server object from the Hetzner API";
                }
        }
        cn_provider_call_finish_instance(call, &res, instance);
}

static int hetzner_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Hetzner *h = cn_provider_data(p);
        _cleanup_free_ char *url = NULL, *esc = NULL;
        CnProviderHttpOptions o = {
                .bearer_token = h->token,
                .ca_file = h->ca_file,
                .error_parser = hetzner_error_message,
                .body_parser = cn_provider_hetzner_parse_server_answer,
                .operation = "instance_metadata",
        };

        if (!isempty(node->provider_id)) {
                int64_t id;

                /* A Node's providerID always has the prefix; a bare id is for machines only. */
                if (!strneq(node->provider_id, HETZNER_PROVIDER_ID_PREFIX, STRLEN(HETZNER_PROVIDER_ID_PREFIX)) ||
                    cn_provider_hetzner_server_id(node->provider_id, &id) < 0)
                        return -EINVAL;
                if (asprintf(&url, "%s/servers/%" PRIi64, h->endpoint, id) < 0)
                        return -ENOMEM;
        } else {
                esc = cn_http_escape(node->name);
                if (!esc || asprintf(&url, "%s/servers?name=%s", h->endpoint, esc) < 0)
                        return -ENOMEM;
        }
        return cn_provider_call_http(call, "GET", url, &o, on_server, NULL);
}

/* For the machine lifecycle in provider-hetzner-machine.c. */
int cn_provider_hetzner_request_options(CnProvider *p, const char **ret_endpoint, CnProviderHttpOptions *o) {
        Hetzner *h = cn_provider_data(p);

        *ret_endpoint = h->endpoint;
        o->bearer_token = h->token;
        o->ca_file = h->ca_file;
        o->error_parser = hetzner_error_message;
        return 0;
}

const CnProviderOps cn_provider_hetzner_ops = {
        .name = "hetzner",
        .size = sizeof(Hetzner),
        .init = hetzner_init,
        .done = hetzner_done,
        .instance_get = hetzner_instance_get,
        .add_defaults = cn_provider_hetzner_add_defaults,
        .validate = cn_provider_hetzner_validate,
        .machine_get = cn_provider_hetzner_machine_get,
        .machine_create = cn_provider_hetzner_machine_create,
        .machine_cleanup = cn_provider_hetzner_machine_cleanup,
        .metrics_labels = cn_provider_hetzner_metrics_labels,
        .migrate_uid = cn_provider_hetzner_migrate_uid,
        .cloud_config = cn_provider_hetzner_cloud_config,
        .failure_domains = cn_provider_hetzner_failure_domains,
        .load_balancer_ensure = cn_provider_hetzner_load_balancer_ensure,
        .load_balancer_cleanup = cn_provider_hetzner_load_balancer_cleanup,
        .failure_domain_field = "location",
        .ratelimit_refills_evenly = true,
};
