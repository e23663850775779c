/* SPDX-License-Identifier: Apache-2.0 */
/* DigitalOcean (API v2, https://docs.digitalocean.com/reference/api/): the InstancesV2 calls
 * through GET /v2/droplets/{id} and GET /v2/droplets?name=, with providerIDs
 * "digitalocean://<droplet id>" as digitalocean-cloud-controller-manager and cloudnode-agent write
 * them. Addresses as that controller sets them: the droplet name as Hostname, private IPv4 as
 * InternalIP, public IPv4 and IPv6 as ExternalIP; the size slug is the instance type, the region
 * slug both region and zone. A droplet "off" is shut down.
 *
 * Settings, from cloud.conf [Global] or the environment digitalocean-cloud-controller-manager
 * reads: token / token-file (DO_ACCESS_TOKEN), endpoint (DO_ENDPOINT_URL), ca-file. A token read
 * from token-file is read again once when the API refuses it (a rotated Secret). */
#include <inttypes.h>

#include "json-util.h"
#include "log.h"
#include "provider-digitalocean.h"
#include "string-util.h"

#define DO_DEFAULT_ENDPOINT "https://api.digitalocean.com"
#define DO_PROVIDER_ID_PREFIX "digitalocean://"
/* Pages of one lookup by name; the API filters by name, so one is the rule. */
#define DO_MAX_PAGES 8

typedef struct DigitalOcean {
        char *endpoint;
        char *token;
        char *token_file;
        char *ca_file;
} DigitalOcean;

static void forget_token(DigitalOcean *o) {
        if (o->token)
                explicit_bzero(o->token, strlen(o->token));
        free(o->token);
        o->token = NULL;
}

static void do_done(CnProvider *p) {
        DigitalOcean *o = cn_provider_data(p);

        free(o->endpoint);
        forget_token(o);
        free(o->token_file);
        free(o->ca_file);
}

static int do_init(CnProvider *p, json_object *cfg, char **ret_error) {
        DigitalOcean *o = cn_provider_data(p);
        const char *endpoint = cn_provider_setting(p, cfg, "endpoint", "DO_ENDPOINT_URL") ?: DO_DEFAULT_ENDPOINT;
        const char *token_file = cn_provider_setting(p, cfg, "token-file", NULL);
        const char *ca = cn_provider_setting(p, cfg, "ca-file", NULL);
        int r;

        if (!cn_startswith(endpoint, "https://") && !cn_startswith(endpoint, "http://"))
                return cn_provider_config_error(ret_error, EINVAL, "the DigitalOcean endpoint must be an http(s) URL");
        o->endpoint = cn_provider_endpoint_dup(endpoint);
        if (!o->endpoint || (ca && !(o->ca_file = strdup(ca))) || (token_file && !(o->token_file = strdup(token_file))))
                goto oom;
        r = cn_provider_token_setting(p, cfg, "DO_ACCESS_TOKEN", "DigitalOcean", &o->token, ret_error);
        if (r < 0) {
                do_done(p);
                return r;
        }
        return 0;
oom:
        do_done(p);
        return -ENOMEM;
}

static const char *do_error_message(json_object *body) {
        return cn_json_string(body, "message", NULL);
}

static int add_networks(CnProviderInstance *i, json_object *list, const char *type, CnNodeAddressType t) {
        size_t n = list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;

        for (size_t k = 0; k < n; k++) {
                json_object *e = json_object_array_get_idx(list, k);
                const char *ip = cn_json_string(e, "ip_address", NULL);
                int r;

                if (!cn_json_string_is(e, "type", type) || isempty(ip))
                        continue;
                r = cn_node_address_list_add(&i->addresses, t, ip);
                if (r < 0)
                        return r == -EINVAL ? -EBADMSG : r;
        }
        return 0;
}

int cn_provider_digitalocean_parse_droplet(json_object *droplet, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        const char *name = cn_json_string(droplet, "name", NULL), *status = cn_json_string(droplet, "status", NULL);
        const char *size = cn_json_string(droplet, "size_slug", NULL) ?: cn_json_string(droplet, "size", "slug", NULL);
        const char *region = cn_json_string(droplet, "region", "slug", NULL);
        json_object *networks = cn_json_get(droplet, "networks", NULL);
        int64_t id;
        int r;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (cn_json_get_int64(droplet, &id, "id", NULL) < 0 || id <= 0 || isempty(name) || !status)
                return -EBADMSG;
        if (asprintf(&i->instance_id, "%" PRId64, id) < 0 ||
            asprintf(&i->provider_id, DO_PROVIDER_ID_PREFIX "%" PRId64, id) < 0 || !(i->name = strdup(name)) ||
            (size && !(i->instance_type = strdup(size))) || (region && !(i->region = strdup(region))) ||
            (region && !(i->zone = strdup(region))))
                return -ENOMEM;
        i->shutdown = streq(status, "off");
        if ((r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_HOSTNAME, name)) < 0 ||
            (r = add_networks(i, cn_json_get(networks, "v4", NULL), "private", CN_NODE_ADDRESS_INTERNAL_IP)) < 0 ||
            (r = add_networks(i, cn_json_get(networks, "v4", NULL), "public", CN_NODE_ADDRESS_EXTERNAL_IP)) < 0 ||
            (r = add_networks(i, cn_json_get(networks, "v6", NULL), "public", CN_NODE_ADDRESS_EXTERNAL_IP)) < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

typedef struct Lookup {
        char *url; /* the request, again after a token refresh */
        bool reread;
        unsigned pages;
        CnProviderInstance *found;
        char *name;
} Lookup;

static void lookup_free(void *p) {
        Lookup *l = p;

        free(l->url);
        free(l->name);
        cn_provider_instance_free(l->found);
        free(l);
}

static int request(CnProviderCall *call);

static void finish(CnProviderCall *call, int error, usec_t retry_after, const char *message) {
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = error, .retry_after = retry_after, .message = message };

        cn_provider_call_finish_instance(call, &res, error < 0 ? NULL : TAKE_PTR(l->found));
}

/* The token file changed since it was read: a rotated token. */
static bool reread_token(DigitalOcean *o) {
        _cleanup_free_ char *fresh = NULL;

        if (!o->token_file || cn_provider_read_secret_file(o->token_file, &fresh) < 0 || streq(fresh, o->token)) {
                if (fresh)
                        explicit_bzero(fresh, strlen(fresh));
                return false;
        }
        forget_token(o);
        o->token = TAKE_PTR(fresh);
        return true;
}

static void on_droplets(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        DigitalOcean *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        json_object *list, *one;
        const char *next;
        int r;

        (void) userdata;
        if (reply->error == -EACCES && reply->status == 401 && !l->reread && reread_token(o)) {
                l->reread = true;
                r = request(call);
                if (r < 0)
                        finish(call, r, 0, "cannot build the DigitalOcean API request");
                return;
        }
        if (reply->error < 0)
                return finish(call, reply->error, reply->retry_after,
                              reply->error == -ENOENT ? "no such droplet" : reply->message);
        one = cn_json_get(reply->body, "droplet", NULL);
        if (one) {
                r = cn_provider_digitalocean_parse_droplet(one, &l->found);
                if (r < 0)
                        return finish(call, r == -ENOMEM ? r : -EBADMSG, 0,
                                      "unexpected droplet object from the DigitalOcean API");
                return finish(call, 0, 0, NULL);
        }
        list = cn_json_get(reply->body, "droplets", NULL);
        if (!list || !json_object_is_type(list, json_type_array))
                return finish(call, -EBADMSG, 0, "malformed answer from the DigitalOcean API");
        for (size_t k = 0; k < json_object_array_length(list); k++) {
                _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;

                r = cn_provider_digitalocean_parse_droplet(json_object_array_get_idx(list, k), &i);
                if (r < 0)
                        return finish(call, r == -ENOMEM ? r : -EBADMSG, 0,
                                      "unexpected droplet object from the DigitalOcean API");
                /* Older API versions ignore ?name=: only an exact match counts. */
                if (!streq(i->name, l->name))
                        continue;
                if (l->found)
                        return finish(call, -CN_PROVIDER_EMULTIPLE, 0, "several droplets have that name");
                l->found = TAKE_PTR(i);
        }
        next = cn_json_string(reply->body, "links", "pages", "next", NULL);
        if (!isempty(next) && l->pages < DO_MAX_PAGES) {
                /* Only a page of the same API is followed: the token goes nowhere else. */
                if (!cn_startswith(next, o->endpoint) || !strchr("/?", next[strlen(o->endpoint)]))
                        return finish(call, -EBADMSG, 0, "the DigitalOcean API named a next page elsewhere");
                free(l->url);
                l->url = strdup(next);
                if (!l->url)
                        return finish(call, -ENOMEM, 0, "out of memory");
                r = request(call);
                if (r < 0)
                        finish(call, r, 0, "cannot build the DigitalOcean API request");
                return;
        }
        if (!l->found)
                return finish(call, -ENOENT, 0, "no droplet with that name");
        finish(call, 0, 0, NULL);
}

static int request(CnProviderCall *call) {
        DigitalOcean *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderHttpOptions opts = {
                .bearer_token = o->token,
                .ca_file = o->ca_file,
                .error_parser = do_error_message,
                .operation = "instance_metadata",
        };

        l->pages++;
        return cn_provider_call_http(call, "GET", l->url, &opts, on_droplets, NULL);
}

static int do_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        DigitalOcean *o = cn_provider_data(p);
        Lookup *l = calloc(1, sizeof(Lookup));
        _cleanup_free_ char *esc = NULL;

        if (!l)
                return -ENOMEM;
        cn_provider_call_set_state(call, l, lookup_free);
        if (!isempty(node->provider_id)) {
                const char *s = cn_startswith(node->provider_id, DO_PROVIDER_ID_PREFIX);
                int64_t id;

                if (!s || cn_safe_atoi64(s, &id) < 0 || id <= 0)
                        return -EINVAL;
                if (asprintf(&l->url, "%s/v2/droplets/%" PRId64, o->endpoint, id) < 0)
                        return -ENOMEM;
        } else {
                esc = cn_http_escape(node->name);
                l->name = strdup(node->name);
                if (!esc || !l->name || asprintf(&l->url, "%s/v2/droplets?name=%s&per_page=200", o->endpoint, esc) < 0)
                        return -ENOMEM;
        }
        return request(call);
}

const CnProviderOps cn_provider_digitalocean_ops = {
        .name = "digitalocean",
        .size = sizeof(DigitalOcean),
        .init = do_init,
        .done = do_done,
        .instance_get = do_instance_get,
};
