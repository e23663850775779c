/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack: Nova servers for the InstancesV2 calls, with providerIDs "openstack:///<uuid>" (also
 * accepted: the region form "openstack://<region>/<uuid>"), and the availability zones. Settings
 * as openstack-cloud-controller-manager reads them from cloud.conf [Global] (auth-url,
 * username/user-id, password, project-id/tenant-id, project-name/tenant-name,
 * user-domain-name/-id, project-domain-name/-id, domain-name/-id,
 * application-credential-id/-name/-secret, region, ca-file), or from OS_* environment variables.
 * The Keystone tokens every Nova request needs are in provider-openstack-keystone.c. */
#include "cloud-config.h"
#include "json-util.h"
#include "log.h"
#include "provider-openstack.h"

#define OPENSTACK_PROVIDER_ID_PREFIX "openstack://"
/* flavor.original_name (the flavor's name) appears in server bodies from this microversion on. */
#define OPENSTACK_NOVA_MICROVERSION "X-OpenStack-Nova-API-Version: 2.47"
static const char *const nova_headers[] = { OPENSTACK_NOVA_MICROVERSION, NULL };

typedef struct Lookup {
        CnOpenStackAuth auth;
        char *id;
        char *name;
        CnProviderInstance *instance; /* parsed, waiting for its flavor's name */
} Lookup;

const char *cn_provider_openstack_setting(json_object *cfg, const char *key, const char *env) {
        const char *v = cn_cloud_config_get(cfg, "Global", key);

        return !isempty(v) ? v : (env ? getenv(env) : NULL);
}

static const char *setting2(json_object *cfg, const char *k1, const char *k2, const char *env) {
        return cn_provider_openstack_setting(cfg, k1, NULL) ?: cn_provider_openstack_setting(cfg, k2, env);
}

static void openstack_done(CnProvider *p) {
        OpenStack *o = cn_provider_data(p);

        cn_provider_openstack_forget_token(o);
        free(o->auth_url);
        free(o->region);
        free(o->ca_file);
        json_object_put(o->auth);
        json_object_put(o->flavors);
        json_object_put(o->settings);
}

static const struct {
        const char *key, *alias, *env;
} global_keys[] = {
        { "auth-url", NULL, "OS_AUTH_URL" },
        { "region", NULL, "OS_REGION_NAME" },
        { "ca-file", NULL, "OS_CACERT" },
        { "username", NULL, "OS_USERNAME" },
        { "user-id", NULL, "OS_USER_ID" },
        { "password", NULL, "OS_PASSWORD" },
        { "domain-id", NULL, "OS_DOMAIN_ID" },
        { "domain-name", NULL, "OS_DOMAIN_NAME" },
        { "user-domain-id", NULL, "OS_USER_DOMAIN_ID" },
        { "user-domain-name", NULL, "OS_USER_DOMAIN_NAME" },
        { "project-domain-id", "tenant-domain-id", "OS_PROJECT_DOMAIN_ID" },
        { "project-domain-name", "tenant-domain-name", "OS_PROJECT_DOMAIN_NAME" },
        { "project-id", "tenant-id", "OS_PROJECT_ID" },
        { "project-name", "tenant-name", "OS_PROJECT_NAME" },
        { "application-credential-id", NULL, "OS_APPLICATION_CREDENTIAL_ID" },
        { "application-credential-name", NULL, "OS_APPLICATION_CREDENTIAL_NAME" },
        { "application-credential-secret", NULL, "OS_APPLICATION_CREDENTIAL_SECRET" },
};

static int resolve_settings(CnProvider *p, json_object *cfg, json_object **ret) {
        _cleanup_json_ json_object *resolved = json_object_new_object();

        if (!resolved)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(global_keys); i++) {
                const char *env = cn_provider_uses_environment(p) ? global_keys[i].env : NULL;
                const char *v = global_keys[i].alias ? setting2(cfg, global_keys[i].key, global_keys[i].alias, env)
                                                     : cn_provider_openstack_setting(cfg, global_keys[i].key, env);

                if (!isempty(v) && cn_json_set_string(resolved, v, "Global", global_keys[i].key, NULL) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(resolved);
        return 0;
}

static int openstack_init(CnProvider *p, json_object *config, char **ret_error) {
        OpenStack *o = cn_provider_data(p);
        _cleanup_json_ json_object *inner = NULL, *cfg = NULL;
        const char *auth_url, *region, *ca;
        int r;

        r = resolve_settings(p, config, &cfg);
        if (r < 0)
                return r;
        auth_url = cn_provider_openstack_setting(cfg, "auth-url", NULL);
        region = cn_provider_openstack_setting(cfg, "region", NULL);
        ca = cn_provider_openstack_setting(cfg, "ca-file", NULL);
        if (isempty(auth_url))
                return cn_provider_config_error(ret_error, EINVAL,
                                                "no OpenStack auth-url in [Global] of the cloud config (or OS_AUTH_URL)");
        r = cn_provider_openstack_build_auth(cfg, &inner, ret_error);
        if (r < 0)
                return r;
        o->auth = json_object_new_object();
        o->auth_url = strdup(auth_url);
        if (!o->auth || !o->auth_url || (region && !(o->region = strdup(region))) || (ca && !(o->ca_file = strdup(ca)))) {
                openstack_done(p);
                return -ENOMEM;
        }
        json_object_object_add(o->auth, "auth", TAKE_PTR(inner));
        o->settings = TAKE_PTR(cfg);
        /* auth-url is the Keystone root, with or without /v3 (both appear in real cloud.conf). */
        for (size_t l = strlen(o->auth_url); l > 0 && o->auth_url[l - 1] == '/'; l--)
                o->auth_url[l - 1] = 0;
        {
                size_t l = strlen(o->auth_url);
                if (l >= 3 && streq(o->auth_url + l - 3, "/v3"))
                        o->auth_url[l - 3] = 0;
        }
        return 0;
}

const char *cn_provider_openstack_error_message(json_object *body) {
        /* Nova: {"itemNotFound": {"message": ..., "code": 404}}; Keystone: {"error": {"message": ...}};
         * Octavia: {"faultcode": "Client", "faultstring": ...}. */
        const char *fault = cn_json_string(body, "faultstring", NULL);

        if (fault)
                return fault;
        json_object_object_foreach(body, k, v) {
                const char *m = cn_json_string(v, "message", NULL);
                (void) k;
                if (m)
                        return m;
        }
        return NULL;
}

int cn_provider_openstack_parse_server(json_object *server, const char *region, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        const char *id = cn_json_string(server, "id", NULL), *status, *v;
        json_object *addrs;
        int r;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (isempty(id))
                return -EBADMSG;
        if (!(i->instance_id = strdup(id)) || asprintf(&i->provider_id, OPENSTACK_PROVIDER_ID_PREFIX "/%s", id) < 0)
                return -ENOMEM;
        if ((v = cn_json_string(server, "name", NULL)) && !(i->name = strdup(v)))
                return -ENOMEM;
        v = cn_json_string(server, "flavor", "original_name", NULL) ?: cn_json_string(server, "flavor", "id", NULL);
        if (v && !(i->instance_type = strdup(v)))
                return -ENOMEM;
        if (region && !(i->region = strdup(region)))
                return -ENOMEM;
        if ((v = cn_json_string(server, "OS-EXT-AZ:availability_zone", NULL)) && *v && !(i->zone = strdup(v)))
                return -ENOMEM;
        status = cn_json_string(server, "status", NULL);
        i->shutdown = status && streq(status, "SHUTOFF");

        /* Networks come as an object keyed by network name; json-c keeps the server's order, and
         * node-addresses sorts by type and family, so the result does not depend on it. */
        addrs = cn_json_get(server, "addresses", NULL);
        if (addrs && json_object_is_type(addrs, json_type_object)) {
                json_object_object_foreach(addrs, net, list) {
                        (void) net;
                        if (!json_object_is_type(list, json_type_array))
                                continue;
                        for (size_t k = 0; k < json_object_array_length(list); k++) {
                                json_object *a = json_object_array_get_idx(list, k);
                                const char *ip = cn_json_string(a, "addr", NULL);
                                const char *type = cn_json_string(a, "OS-EXT-IPS:type", NULL);
                                CnNodeAddressType t = type && streq(type, "floating") ? CN_NODE_ADDRESS_EXTERNAL_IP
                                                                                       : CN_NODE_ADDRESS_INTERNAL_IP;

                                if (!ip)
                                        continue;
                                r = cn_node_address_list_add(&i->addresses, t, ip);
                                if (r < 0)
                                        return r == -EINVAL ? -EBADMSG : r;
                        }
                }
        }
        if ((v = cn_json_string(server, "accessIPv4", NULL)) && *v &&
            (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, v)) < 0 && r != -EINVAL)
                return r;
        if ((v = cn_json_string(server, "accessIPv6", NULL)) && *v &&
            (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, v)) < 0 && r != -EINVAL)
                return r;
        if (i->name && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_HOSTNAME, i->name)) < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

static void lookup_free(void *p) {
        Lookup *l = p;

        if (!l)
                return;
        free(l->id);
        free(l->name);
        cn_provider_instance_free(l->instance);
        free(l);
}

/* Bounds the flavor cache: a cloud has a few dozen flavors, not thousands. */
#define OPENSTACK_FLAVOR_CACHE_MAX 1024

static void on_flavor(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = {};
        const char *name = reply->error >= 0 ? cn_json_string(reply->body, "flavor", "name", NULL) : NULL;

        /* Without the name the flavor id is still a usable instance type: no failure here. */
        if (name) {
                char *copy = strdup(name);

                if (copy) {
                        free(l->instance->instance_type);
                        l->instance->instance_type = copy;
                        if (o->flavors && json_object_object_length(o->flavors) < OPENSTACK_FLAVOR_CACHE_MAX)
                                json_object_object_add(o->flavors, cn_json_string(reply->body, "flavor", "id", NULL) ?: "",
                                                       json_object_new_string(name));
                }
        }
        cn_provider_call_finish_instance(call, &res, TAKE_PTR(l->instance));
}

/* Novas before microversion 2.47 name only the flavor's id; the label wants its name. Returns 1
 * when a flavor request was started (the call finishes from on_flavor()). */
static int resolve_flavor(CnProviderCall *call, json_object *server, CnProviderInstance **instance) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        const char *id = cn_json_string(server, "flavor", "id", NULL);
        _cleanup_free_ char *url = NULL, *esc = NULL;
        json_object *cached;
        CnProviderHttpOptions opts = {
                .auth_token = o->token.value,
                .ca_file = o->ca_file,
                .error_parser = cn_provider_openstack_error_message,
                .operation = "flavor",
        };

        if (!id || cn_json_string(server, "flavor", "original_name", NULL))
                return 0;
        if (!o->flavors && !(o->flavors = json_object_new_object()))
                return 0;
        if (json_object_object_get_ex(o->flavors, id, &cached)) {
                char *copy = strdup(json_object_get_string(cached));

                if (copy) {
                        free((*instance)->instance_type);
                        (*instance)->instance_type = copy;
                }
                return 0;
        }
        esc = cn_http_escape(id);
        if (!esc || asprintf(&url, "%s/flavors/%s", o->compute_url, esc) < 0)
                return 0;
        if (cn_provider_call_http(call, "GET", url, &opts, on_flavor, NULL) < 0)
                return 0;
        l->instance = TAKE_PTR(*instance);
        return 1;
}

static void on_server(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProvider *p = cn_provider_call_provider(call);
        OpenStack *o = cn_provider_data(p);
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        CnProviderInstance *instance = NULL;
        json_object *server;

        if (cn_provider_openstack_reauthorize(call, &l->auth, reply))
                return;
        if (res.error >= 0) {
                server = cn_json_get(reply->body, "server", NULL);
                if (!server) {
                        json_object *list = cn_json_get(reply->body, "servers", NULL);
                        size_t n = list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;

                        /* Nova matches names as regular expressions: keep exact matches only. */
                        for (size_t k = 0; k < n && !server; k++) {
                                json_object *s = json_object_array_get_idx(list, k);
                                const char *name = cn_json_string(s, "name", NULL);

                                if (name && streq(name, l->name))
                                        server = s;
                        }
                        if (!server) {
                                res.error = -ENOENT;
                                res.message = "no server with that name";
                        }
                }
                if (res.error >= 0) {
                        res.error = cn_provider_openstack_parse_server(server, o->region, &instance);
                        if (res.error < 0)
                                res.message = "unexpected server object from the Nova API";
                        else if (resolve_flavor(call, server, &instance) > 0)
                                return;
                }
        }
        cn_provider_call_finish_instance(call, &res, instance);
}

int cn_provider_openstack_list_url(CnProvider *p, const char *name, char **ret_url) {
        OpenStack *o = cn_provider_data(p);
        _cleanup_free_ char *re = NULL, *esc = NULL;
        size_t n = 0;

        /* Nova matches names as regular expressions: anchored, with the name's specials escaped. */
        re = malloc(strlen(name) * 2 + 3);
        if (!re)
                return -ENOMEM;
        re[n++] = '^';
        for (const char *c = name; *c; c++) {
                if (strchr(".^$*+?()[]{}|\\", *c))
                        re[n++] = '\\';
                re[n++] = *c;
        }
        re[n++] = '$';
        re[n] = 0;
        esc = cn_http_escape(re);
        if (!esc || asprintf(ret_url, "%s/servers/detail?name=%s", o->compute_url, esc) < 0)
                return -ENOMEM;
        return 0;
}

static int get_server(CnProviderCall *call) {
        CnProvider *p = cn_provider_call_provider(call);
        OpenStack *o = cn_provider_data(p);
        Lookup *l = cn_provider_call_get_state(call);
        _cleanup_free_ char *url = NULL;
        CnProviderHttpOptions opts = { .operation = "instance_metadata" };
        int r;

        (void) cn_provider_openstack_nova(p, &opts);

        if (l->id) {
                _cleanup_free_ char *esc = cn_http_escape(l->id);

                if (!esc || asprintf(&url, "%s/servers/%s", o->compute_url, esc) < 0)
                        return -ENOMEM;
        } else {
                r = cn_provider_openstack_list_url(p, l->name, &url);
                if (r < 0)
                        return r;
        }
        return cn_provider_call_http(call, "GET", url, &opts, on_server, NULL);
}

const char *cn_provider_openstack_nova(CnProvider *p, CnProviderHttpOptions *opts) {
        OpenStack *o = cn_provider_data(p);

        opts->auth_token = o->token.value;
        opts->ca_file = o->ca_file;
        opts->headers = nova_headers;
        opts->error_parser = cn_provider_openstack_error_message;
        return o->compute_url;
}

json_object *cn_provider_openstack_settings(CnProvider *p) {
        OpenStack *o = cn_provider_data(p);

        return o->settings;
}

const char *cn_provider_openstack_server_id(const char *provider_id, bool bare_ok) {
        const char *rest, *slash;

        if (!provider_id)
                return NULL;
        if (!strneq(provider_id, OPENSTACK_PROVIDER_ID_PREFIX, STRLEN(OPENSTACK_PROVIDER_ID_PREFIX)))
                return bare_ok && !isempty(provider_id) && !strchr(provider_id, '/') ? provider_id : NULL;
        rest = provider_id + STRLEN(OPENSTACK_PROVIDER_ID_PREFIX);
        slash = strrchr(rest, '/');
        return slash && !isempty(slash + 1) ? slash + 1 : NULL;
}

static int openstack_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Lookup *l;

        l = calloc(1, sizeof(Lookup));
        if (!l)
                return -ENOMEM;
        l->auth = (CnOpenStackAuth) { .next = get_server, .fail = cn_provider_call_fail_instance };
        cn_provider_call_set_state(call, l, lookup_free);
        if (!isempty(node->provider_id)) {
                const char *id = cn_provider_openstack_server_id(node->provider_id, false);

                if (!id)
                        return -EINVAL;
                l->id = strdup(id);
                if (!l->id)
                        return -ENOMEM;
        } else {
                l->name = strdup(node->name);
                if (!l->name)
                        return -ENOMEM;
        }
        return cn_provider_openstack_authorize(call, &l->auth);
}

/* ---- failure domains: the availability zones ---- */

int cn_provider_openstack_failure_domains_parse(json_object *body, const char *region, json_object **ret) {
        _cleanup_json_ json_object *list = json_object_new_array();
        json_object *zones = cn_json_get(body, "availabilityZoneInfo", NULL);

        if (!list)
                return -ENOMEM;
        if (!zones || !json_object_is_type(zones, json_type_array))
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(zones); i++) {
                json_object *z = json_object_array_get_idx(zones, i), *up = cn_json_get(z, "zoneState", "available", NULL);
                const char *name = cn_json_string(z, "zoneName", NULL);
                int r;

                if (isempty(name))
                        return -EBADMSG;
                /* A zone whose hosts are all disabled takes no servers. */
                if (!up || !json_object_get_boolean(up))
                        continue;
                r = cn_provider_failure_domain_add(list, name, (const char *const[]) { "region", region, NULL });
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

typedef struct ZonesCall {
        CnOpenStackAuth auth; /* first: the call's state is its auth */
        char *region;         /* the cluster's spec.region */
} ZonesCall;

static void zones_call_free(void *p) {
        ZonesCall *z = p;

        if (z)
                free(z->region);
        free(z);
}

static void zones_fail(CnProviderCall *call, const CnProviderResult *res) {
        cn_provider_call_finish_machine(call, res, NULL);
}

static void on_zones(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));
        ZonesCall *z = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        json_object *list = NULL;

        if (cn_provider_openstack_reauthorize(call, &z->auth, reply))
                return;
        /* Zones are the credentials' region's: a cluster meant for another region would get
         * failure domains its machines cannot use. (Checked on the answer: a call never finishes
         * before its start returns.) */
        if (res.error >= 0 && z->region && o->region && !streq(z->region, o->region))
                res = (CnProviderResult) { .error = -EINVAL,
                                           .message = "the cluster's region is not the cloud config's region" };
        if (res.error >= 0) {
                res.error = cn_provider_openstack_failure_domains_parse(reply->body, o->region, &list);
                if (res.error < 0)
                        res.message = "unexpected availability zone list from the Nova API";
                else if (json_object_array_length(list) == 0) {
                        json_object_put(TAKE_PTR(list));
                        res = (CnProviderResult) { .error = -EINVAL, .message = "no available compute zone" };
                }
        }
        cn_provider_call_finish_machine(call, &res, list);
}

static int zones_next(CnProviderCall *call) {
        CnProviderHttpOptions opts = {};
        _cleanup_free_ char *url = NULL;
        const char *compute = cn_provider_openstack_nova(cn_provider_call_provider(call), &opts);

        opts.operation = "failure_domains";
        if (asprintf(&url, "%s/os-availability-zone", compute) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "GET", url, &opts, on_zones, NULL);
}

static int start_zones(CnProviderCall *call, void *arg) {
        const char *region = arg;
        ZonesCall *z = calloc(1, sizeof(ZonesCall));

        if (!z)
                return -ENOMEM;
        cn_provider_call_set_state(call, z, zones_call_free);
        z->auth = (CnOpenStackAuth) { .next = zones_next, .fail = zones_fail };
        if (!isempty(region) && !(z->region = strdup(region)))
                return -ENOMEM;
        return cn_provider_openstack_authorize(call, &z->auth);
}

static int openstack_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb, void *userdata,
                                     CnProviderCall **ret) {
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_zones, (void *) region, ret);
}

const CnProviderOps cn_provider_openstack_ops = {
        .name = "openstack",
        .size = sizeof(OpenStack),
        .init = openstack_init,
        .done = openstack_done,
        .instance_get = openstack_instance_get,
        .add_defaults = cn_provider_openstack_add_defaults,
        .validate = cn_provider_openstack_validate,
        .machine_get = cn_provider_openstack_machine_get,
        .machine_create = cn_provider_openstack_machine_create,
        .machine_cleanup = cn_provider_openstack_machine_cleanup,
        .metrics_labels = cn_provider_openstack_metrics_labels,
        .migrate_uid = cn_provider_openstack_migrate_uid,
        .cloud_config = cn_provider_openstack_cloud_config,
        .failure_domains = openstack_failure_domains,
        .load_balancer_ensure = cn_provider_openstack_load_balancer_ensure,
        .load_balancer_cleanup = cn_provider_openstack_load_balancer_cleanup,
        .failure_domain_field = "availabilityZone",
};
