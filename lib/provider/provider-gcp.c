/* SPDX-License-Identifier: Apache-2.0 */
/* Google Compute Engine: the InstancesV2 calls through instances.get (providerID
 * "gce://<project>/<zone>/<name>", as cloud-provider-gcp writes it) and, for a Node without one,
 * instances.aggregatedList filtered by the instance name (the Node name up to its first dot, as
 * cloud-provider-gcp maps it). Settings from cloud.conf [Global] as cloud-provider-gcp reads it
 * (project-id, local-zone, api-endpoint) plus credentials-file (else GOOGLE_APPLICATION_CREDENTIALS;
 * else the metadata server's default service account), metadata-endpoint (else GCE_METADATA_HOST)
 * and ca-file. Tokens are in provider-gcp-auth.c. */
#include "cloud-config.h"
#include "json-util.h"
#include "log.h"
#include "provider-gcp.h"
#include "string-util.h"

#define GCP_DEFAULT_API "https://compute.googleapis.com/compute/v1"
#define GCP_DEFAULT_METADATA "http://169.254.169.254"
/* aggregatedList pages followed for one name before giving up: a project has no more zones. */
#define GCP_MAX_PAGES 64

typedef struct Lookup {
        CnProviderAuth auth;
        char *project;
        char *zone;
        char *name;
        char *page_token;
        unsigned pages;
        json_object *found; /* the match of an aggregated list, kept across pages */
        unsigned n_found;
} Lookup;

static void gcp_done(CnProvider *p) {
        Gcp *g = cn_provider_data(p);

        cn_provider_gcp_free_credentials(g);
        free(g->api_endpoint);
        free(g->project);
        free(g->local_zone);
        free(g->ca_file);
        free(g->metadata_url);
}

static int gcp_init(CnProvider *p, json_object *cfg, char **ret_error) {
        Gcp *g = cn_provider_data(p);
        const char *api = cn_provider_setting(p, cfg, "api-endpoint", NULL);
        const char *project = cn_provider_setting(p, cfg, "project-id", NULL);
        const char *zone = cn_provider_setting(p, cfg, "local-zone", NULL);
        const char *ca = cn_provider_setting(p, cfg, "ca-file", NULL);
        const char *key = cn_provider_setting(p, cfg, "credentials-file", "GOOGLE_APPLICATION_CREDENTIALS");
        const char *md = cn_provider_setting(p, cfg, "metadata-endpoint", NULL);
        const char *md_host = cn_provider_setting(p, NULL, NULL, "GCE_METADATA_HOST");
        int r = 0;

        if (isempty(api))
                api = GCP_DEFAULT_API;
        g->api_endpoint = cn_provider_endpoint_dup(api);
        if (!isempty(md))
                g->metadata_url = cn_provider_endpoint_dup(md);
        else if (!isempty(md_host))
                r = asprintf(&g->metadata_url, "http://%s", md_host) < 0 ? -ENOMEM : 0;
        else
                g->metadata_url = strdup(GCP_DEFAULT_METADATA);
        if (r < 0 || !g->api_endpoint || !g->metadata_url || (project && !(g->project = strdup(project))) ||
            (zone && !(g->local_zone = strdup(zone))) || (ca && !(g->ca_file = strdup(ca)))) {
                gcp_done(p);
                return -ENOMEM;
        }
        /* api-endpoint may name the API root ("https://compute.googleapis.com/") or the versioned
         * base path, as cloud-provider-gcp accepts both. */
        if (!strstr(g->api_endpoint, "/compute/")) {
                char *full;

                if (asprintf(&full, "%s/compute/v1", g->api_endpoint) < 0) {
                        gcp_done(p);
                        return -ENOMEM;
                }
                free(g->api_endpoint);
                g->api_endpoint = full;
        }
        if (!isempty(key)) {
                r = cn_provider_gcp_load_key(g, key, ret_error);
                if (r < 0) {
                        gcp_done(p);
                        return r;
                }
        }
        return 0;
}

const char *cn_provider_gcp_error_message(json_object *body) {
        json_object *e = cn_json_get(body, "error", NULL);

        if (e && json_object_is_type(e, json_type_object))
                return cn_json_string(e, "message", NULL);
        return cn_json_string(body, "error_description", NULL) ?: cn_json_string(body, "error", NULL);
}

int cn_provider_gcp_classify_error(long status, json_object *body, int error) {
        json_object *errors = cn_json_get(body, "error", NULL);
        const char *status_text = cn_json_string(body, "error", "status", NULL);

        if (status != 403 && status != 429)
                return error;
        if (status_text && streq(status_text, "RESOURCE_EXHAUSTED"))
                return -EAGAIN;
        errors = errors ? cn_json_get(errors, "errors", NULL) : NULL;
        for (size_t i = 0; errors && json_object_is_type(errors, json_type_array) && i < json_object_array_length(errors);
             i++) {
                const char *reason = cn_json_string(json_object_array_get_idx(errors, i), "reason", NULL);

                if (reason && (streq(reason, "rateLimitExceeded") || streq(reason, "userRateLimitExceeded") ||
                               streq(reason, "quotaExceeded")))
                        return -EAGAIN;
        }
        return error;
}

/* Project ids also take dots and colons (domain-scoped projects: "example.com:proj"). */
static bool segment_ok(const char *s) {
        if (isempty(s) || strlen(s) > 128)
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr("-.:_", *c)))
                        return false;
        return true;
}

int cn_provider_gcp_parse_provider_id(const char *provider_id, char **ret_project, char **ret_zone, char **ret_name) {
        _cleanup_strv_free_ char **parts = NULL;
        const char *rest = provider_id ? cn_startswith(provider_id, CN_PROVIDER_GCP_ID_PREFIX) : NULL;
        size_t n = 0;
        int r;

        if (!rest)
                return -EINVAL;
        /* Exactly three non-empty segments. */
        for (const char *c = rest; *c; c++)
                n += *c == '/';
        if (n != 2)
                return -EINVAL;
        r = strv_split(rest, "/", &parts);
        if (r < 0)
                return r;
        if (strv_length(parts) != 3 || !segment_ok(parts[0]) || !segment_ok(parts[1]) || !segment_ok(parts[2]))
                return -EINVAL;
        *ret_project = TAKE_PTR(parts[0]);
        *ret_zone = TAKE_PTR(parts[1]);
        *ret_name = TAKE_PTR(parts[2]);
        return 0;
}

/* ".../zones/us-central1-a" -> "us-central1-a" */
static const char *basename_of(const char *url) {
        const char *s = url ? strrchr(url, '/') : NULL;

        return s ? s + 1 : url;
}

/* Each network interface as cloud-provider-gcp reports it: networkIP (InternalIP), the NAT
 * addresses of its accessConfigs (ExternalIP) and its IPv6 address, the internal ipv6Address or
 * else the DIRECT_IPV6 access config's externalIpv6, as InternalIP (the node's own address in a
 * dual-stack cluster, as the metadata server's ipv6s in node mode). */
static int add_interfaces(CnProviderInstance *i, json_object *nics) {
        int r;

        for (size_t k = 0; nics && json_object_is_type(nics, json_type_array) && k < json_object_array_length(nics); k++) {
                json_object *nic = json_object_array_get_idx(nics, k);
                json_object *nat = cn_json_get(nic, "accessConfigs", NULL), *v6 = cn_json_get(nic, "ipv6AccessConfigs", NULL);
                const char *ipv6 = cn_json_string(nic, "ipv6Address", NULL);

                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_INTERNAL_IP, cn_json_string(nic, "networkIP", NULL));
                if (r < 0)
                        return r;
                for (size_t j = 0; nat && json_object_is_type(nat, json_type_array) && j < json_object_array_length(nat); j++)
                        if ((r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_EXTERNAL_IP,
                                             cn_json_string(json_object_array_get_idx(nat, j), "natIP", NULL))) < 0)
                                return r;
                for (size_t j = 0; isempty(ipv6) && v6 && json_object_is_type(v6, json_type_array) &&
                                   j < json_object_array_length(v6);
                     j++) {
                        json_object *c = json_object_array_get_idx(v6, j);
                        const char *type = cn_json_string(c, "type", NULL);

                        if (type && streq(type, "DIRECT_IPV6"))
                                ipv6 = cn_json_string(c, "externalIpv6", NULL);
                }
                if ((r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_INTERNAL_IP, ipv6)) < 0)
                        return r;
        }
        return 0;
}

int cn_provider_gcp_parse_instance(json_object *instance, const char *project, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        const char *id = cn_json_string(instance, "id", NULL), *name = cn_json_string(instance, "name", NULL);
        const char *zone = basename_of(cn_json_string(instance, "zone", NULL));
        const char *type = basename_of(cn_json_string(instance, "machineType", NULL));
        const char *status = cn_json_string(instance, "status", NULL), *dash;
        int r;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (!segment_ok(project) || isempty(id) || !segment_ok(name) || !segment_ok(zone))
                return -EBADMSG;
        if (!(i->instance_id = strdup(id)) || !(i->name = strdup(name)) || !(i->zone = strdup(zone)) ||
            asprintf(&i->provider_id, CN_PROVIDER_GCP_ID_PREFIX "%s/%s/%s", project, zone, name) < 0)
                return -ENOMEM;
        if (!isempty(type) && !(i->instance_type = strdup(type)))
                return -ENOMEM;
        dash = strrchr(zone, '-');
        if (dash && dash != zone && !(i->region = strndup(zone, dash - zone)))
                return -ENOMEM;
        /* A stopped (TERMINATED) or suspended instance still exists and keeps its disks. */
        i->shutdown = status && (streq(status, "TERMINATED") || streq(status, "STOPPING") ||
                                 streq(status, "SUSPENDING") || streq(status, "SUSPENDED"));
        r = add_interfaces(i, cn_json_get(instance, "networkInterfaces", NULL));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

static void lookup_free(void *p) {
        Lookup *l = p;

        if (!l)
                return;
        free(l->project);
        free(l->zone);
        free(l->name);
        free(l->page_token);
        json_object_put(l->found);
        free(l);
}

static void finish_with(CnProviderCall *call, json_object *instance, const char *project) {
        CnProviderResult res = {};
        CnProviderInstance *i = NULL;

        res.error = cn_provider_gcp_parse_instance(instance, project, &i);
        if (res.error < 0)
                res.message = "unexpected instance object from the Compute Engine API";
        cn_provider_call_finish_instance(call, &res, i);
}

static int request(CnProviderCall *call);

/* aggregatedList: {"items": {"zones/<zone>": {"instances": [...]} or {"warning": ...}},
 * "nextPageToken"}; the filter matched the name already, an exact comparison makes sure. */
static int scan_page(Lookup *l, json_object *body) {
        json_object *items = cn_json_get(body, "items", NULL);
        const char *next = cn_json_string(body, "nextPageToken", NULL);

        if (items && !json_object_is_type(items, json_type_object))
                return -EBADMSG;
        free(l->page_token);
        l->page_token = NULL;
        if (!isempty(next) && !(l->page_token = strdup(next)))
                return -ENOMEM;
        /* An empty page has no items at all. */
        if (!items)
                return 0;
        json_object_object_foreach(items, scope, v) {
                json_object *list = cn_json_get(v, "instances", NULL);

                (void) scope;
                for (size_t k = 0; list && json_object_is_type(list, json_type_array) && k < json_object_array_length(list);
                     k++) {
                        json_object *inst = json_object_array_get_idx(list, k);
                        const char *name = cn_json_string(inst, "name", NULL);

                        if (!name || !streq(name, l->name))
                                continue;
                        l->n_found++;
                        json_object_put(l->found);
                        l->found = json_object_get(inst);
                }
        }
        return 0;
}

static void on_reply(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Gcp *g = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        int r;

        if (cn_provider_reauthorize(call, &l->auth, &g->token, cn_provider_gcp_fetch_token, reply))
                return;
        if (res.error < 0) {
                cn_provider_call_finish_instance(call, &res, NULL);
                return;
        }
        if (l->zone) {
                finish_with(call, reply->body, l->project);
                return;
        }
        r = scan_page(l, reply->body);
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = "unexpected instance list from the Compute Engine API" };
                cn_provider_call_finish_instance(call, &res, NULL);
                return;
        }
        if (l->page_token && ++l->pages < GCP_MAX_PAGES) {
                r = request(call);
                if (r < 0) {
                        res = (CnProviderResult) { .error = r, .message = "failed to request the next page" };
                        cn_provider_call_finish_instance(call, &res, NULL);
                }
                return;
        }
        if (l->page_token)
                res = (CnProviderResult) { .error = -E2BIG, .message = "the instance list has too many pages" };
        else if (l->n_found == 0)
                res = (CnProviderResult) { .error = -ENOENT, .message = "no instance with that name" };
        else if (l->n_found > 1)
                res = (CnProviderResult) { .error = -CN_PROVIDER_EMULTIPLE,
                                           .message = "several instances with that name in the project" };
        if (res.error < 0) {
                cn_provider_call_finish_instance(call, &res, NULL);
                return;
        }
        finish_with(call, l->found, l->project);
}

static int request(CnProviderCall *call) {
        Gcp *g = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        _cleanup_free_ char *url = NULL;
        CnProviderHttpOptions opts = {
                .bearer_token = g->token.value,
                .ca_file = g->ca_file,
                .error_parser = cn_provider_gcp_error_message,
                .error_classifier = cn_provider_gcp_classify_error,
                .operation = "instance_metadata",
        };

        /* The providerID's parts were checked to need no escaping. */
        if (l->zone) {
                if (asprintf(&url, "%s/projects/%s/zones/%s/instances/%s", g->api_endpoint, l->project, l->zone,
                             l->name) < 0)
                        return -ENOMEM;
        } else {
                _cleanup_free_ char *page = l->page_token ? cn_http_escape(l->page_token) : NULL;
                _cleanup_free_ char *name = cn_http_escape(l->name), *project = cn_http_escape(l->project);

                if ((l->page_token && !page) || !name || !project)
                        return -ENOMEM;
                if (asprintf(&url, "%s/projects/%s/aggregated/instances?filter=name%%20%%3D%%20%%22%s%%22"
                             "&returnPartialSuccess=true%s%s",
                             g->api_endpoint, project, name, page ? "&pageToken=" : "", strempty(page)) < 0)
                        return -ENOMEM;
        }
        return cn_provider_call_http(call, "GET", url, &opts, on_reply, NULL);
}

static int gcp_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Gcp *g = cn_provider_data(p);
        Lookup *l;
        int r;

        l = calloc(1, sizeof(Lookup));
        if (!l)
                return -ENOMEM;
        l->auth = (CnProviderAuth) { .next = request, .fail = cn_provider_call_fail_instance };
        cn_provider_call_set_state(call, l, lookup_free);
        if (!isempty(node->provider_id)) {
                r = cn_provider_gcp_parse_provider_id(node->provider_id, &l->project, &l->zone, &l->name);
                if (r < 0)
                        return r;
        } else {
                /* A Node named by its FQDN ("w1.c.project.internal") is instance "w1". */
                l->name = strndup(node->name, strcspn(node->name, "."));
                if (!l->name)
                        return -ENOMEM;
                /* The name goes into a filter string: quotes and backslashes cannot be in one. */
                if (strpbrk(l->name, "\"\\") || isempty(l->name))
                        return -EINVAL;
                if (!g->project)
                        return -EINVAL;
                l->project = strdup(g->project);
                if (!l->project)
                        return -ENOMEM;
        }
        return cn_provider_authorize(call, &l->auth, &g->token, cn_provider_gcp_fetch_token);
}

const CnProviderOps cn_provider_gcp_ops = {
        .name = "gcp",
        .size = sizeof(Gcp),
        .init = gcp_init,
        .done = gcp_done,
        .instance_get = gcp_instance_get,
};
