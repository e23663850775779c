/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack Keystone v3: the token request (password or application credential) built from the
 * settings, the compute endpoint from the token's catalog, and the token cached until shortly
 * before it expires and fetched again once when Nova rejects it. */
#include "cloud-config.h"
#include "json-util.h"
#include "log.h"
#include "provider-openstack.h"

void cn_provider_openstack_forget_token(OpenStack *o) {
        cn_provider_token_forget(&o->token);
        free(o->compute_url);
        o->compute_url = NULL;
        free(o->network_url);
        o->network_url = NULL;
        free(o->octavia_url);
        o->octavia_url = NULL;
}

/* {"name": n} or {"id": i} for users, projects and domains. */
static json_object *name_or_id(const char *id, const char *name, json_object *domain) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (!isempty(id))
                json_object_object_add(o, "id", json_object_new_string(id));
        else if (!isempty(name)) {
                json_object_object_add(o, "name", json_object_new_string(name));
                if (domain)
                        json_object_object_add(o, "domain", json_object_get(domain));
        }
        json_object_put(domain);
        return o;
}

static json_object *domain_ref(const char *id, const char *name) {
        if (isempty(id) && isempty(name))
                return NULL;
        return name_or_id(id, name, NULL);
}

/* The Keystone v3 request body (identity and scope) from the settings; the API reference
 * "Password authentication with scoped authorization" and "Authenticating with an
 * Application Credential". */
int cn_provider_openstack_build_auth(json_object *cfg, json_object **ret, char **ret_error) {
        _cleanup_json_ json_object *auth = json_object_new_object();
        const char *ac_id = cn_provider_openstack_setting(cfg, "application-credential-id", NULL);
        const char *ac_name = cn_provider_openstack_setting(cfg, "application-credential-name", NULL);
        const char *ac_secret = cn_provider_openstack_setting(cfg, "application-credential-secret", NULL);
        const char *user = cn_provider_openstack_setting(cfg, "username", NULL), *user_id = cn_provider_openstack_setting(cfg, "user-id", NULL);
        const char *password = cn_provider_openstack_setting(cfg, "password", NULL);
        const char *domain_id = cn_provider_openstack_setting(cfg, "domain-id", NULL);
        const char *domain_name = cn_provider_openstack_setting(cfg, "domain-name", NULL);
        const char *udom_id = cn_provider_openstack_setting(cfg, "user-domain-id", NULL) ?: domain_id;
        const char *udom_name = cn_provider_openstack_setting(cfg, "user-domain-name", NULL) ?: domain_name;
        const char *pdom_id = cn_provider_openstack_setting(cfg, "project-domain-id", NULL) ?: domain_id;
        const char *pdom_name = cn_provider_openstack_setting(cfg, "project-domain-name", NULL) ?: domain_name;
        const char *project_id = cn_provider_openstack_setting(cfg, "project-id", NULL);
        const char *project_name = cn_provider_openstack_setting(cfg, "project-name", NULL);
        json_object *identity, *methods;

        if (!auth)
                return -ENOMEM;
        identity = json_object_new_object();
        methods = json_object_new_array();
        if (!identity || !methods) {
                json_object_put(identity);
                json_object_put(methods);
                return -ENOMEM;
        }
        json_object_object_add(auth, "identity", identity);
        json_object_object_add(identity, "methods", methods);

        if (!isempty(ac_secret) && (!isempty(ac_id) || !isempty(ac_name))) {
                json_object *ac = name_or_id(ac_id, ac_name, NULL);

                if (!ac)
                        return -ENOMEM;
                if (isempty(ac_id) && (isempty(user) && isempty(user_id))) {
                        json_object_put(ac);
                        return cn_provider_config_error(ret_error, EINVAL,
                                                        "an application credential given by name needs the user");
                }
                if (isempty(ac_id))
                        json_object_object_add(ac, "user",
                                               name_or_id(user_id, user, domain_ref(udom_id, udom_name)));
                json_object_object_add(ac, "secret", json_object_new_string(ac_secret));
                json_object_array_add(methods, json_object_new_string("application_credential"));
                json_object_object_add(identity, "application_credential", ac);
                /* Application credentials carry their own project scope. */
                *ret = TAKE_PTR(auth);
                return 0;
        }
        if (isempty(password) || (isempty(user) && isempty(user_id)))
                return cn_provider_config_error(ret_error, EINVAL,
                                                "no OpenStack credentials: set username (or user-id) and password, or "
                                                "application-credential-id and -secret in [Global] of the cloud config");
        {
                json_object *pw = json_object_new_object(), *u;

                u = name_or_id(user_id, user, domain_ref(udom_id, udom_name));
                if (!pw || !u) {
                        json_object_put(pw);
                        json_object_put(u);
                        return -ENOMEM;
                }
                json_object_object_add(u, "password", json_object_new_string(password));
                json_object_object_add(pw, "user", u);
                json_object_array_add(methods, json_object_new_string("password"));
                json_object_object_add(identity, "password", pw);
        }
        if (!isempty(project_id) || !isempty(project_name)) {
                json_object *scope = json_object_new_object();

                if (!scope)
                        return -ENOMEM;
                json_object_object_add(scope, "project", name_or_id(project_id, project_name, domain_ref(pdom_id, pdom_name)));
                json_object_object_add(auth, "scope", scope);
        }
        *ret = TAKE_PTR(auth);
        return 0;
}

/* Every [Global] key the provider reads, with its alias and environment variable: the settings in
 * effect are resolved once, so that the token request and the cloud config handed to a workload
 * cluster (cn_provider_cloud_config()) agree. */
const char *cn_provider_openstack_find_endpoint(json_object *token_body, const char *type, const char *interface,
                                                const char *region) {
        json_object *catalog = cn_json_get(token_body, "token", "catalog", NULL);
        size_t n = catalog && json_object_is_type(catalog, json_type_array) ? json_object_array_length(catalog) : 0;

        for (size_t i = 0; i < n; i++) {
                json_object *svc = json_object_array_get_idx(catalog, i), *eps;
                const char *t = cn_json_string(svc, "type", NULL);

                if (!t || !streq(t, type) || !(eps = cn_json_get(svc, "endpoints", NULL)) ||
                    !json_object_is_type(eps, json_type_array))
                        continue;
                for (size_t j = 0; j < json_object_array_length(eps); j++) {
                        json_object *ep = json_object_array_get_idx(eps, j);
                        const char *itf = cn_json_string(ep, "interface", NULL);
                        const char *reg = cn_json_string(ep, "region_id", NULL) ?: cn_json_string(ep, "region", NULL);

                        if (!itf || !streq(itf, interface))
                                continue;
                        if (!isempty(region) && (!reg || !streq(reg, region)))
                                continue;
                        return cn_json_string(ep, "url", NULL);
                }
        }
        return NULL;
}

static void on_token(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProvider *p = cn_provider_call_provider(call);
        OpenStack *o = cn_provider_data(p);
        CnOpenStackAuth *auth = ASSERT_PTR(userdata);
        const char *compute, *network, *octavia, *expires;
        usec_t exp = 0;
        int r;

        if (reply->error < 0) {
                /* 401 from Keystone means the credentials are wrong: terminal, say so. */
                cn_provider_auth_fail(call, auth, reply->error, reply->retry_after,
                          reply->status == 401 ? "OpenStack credentials rejected by Keystone" : reply->message);
                return;
        }
        if (isempty(reply->subject_token)) {
                cn_provider_auth_fail(call, auth, -EBADMSG, 0, "Keystone returned no X-Subject-Token");
                return;
        }
        compute = cn_provider_openstack_find_endpoint(reply->body, "compute", "public", o->region);
        if (!compute) {
                cn_provider_auth_fail(call, auth, -EINVAL, 0, "no compute endpoint in the Keystone catalog for this region");
                return;
        }
        expires = cn_json_string(reply->body, "token", "expires_at", NULL);
        if (expires)
                (void) cn_parse_rfc3339(expires, &exp);

        network = cn_provider_openstack_find_endpoint(reply->body, "network", "public", o->region);
        octavia = cn_provider_openstack_find_endpoint(reply->body, "load-balancer", "public", o->region);
        cn_provider_openstack_forget_token(o);
        o->compute_url = cn_provider_endpoint_dup(compute);
        o->network_url = network ? cn_provider_endpoint_dup(network) : NULL;
        o->octavia_url = octavia ? cn_provider_endpoint_dup(octavia) : NULL;
        if (!o->compute_url || (network && !o->network_url) || (octavia && !o->octavia_url) ||
            cn_provider_token_set(&o->token, reply->subject_token, exp) < 0) {
                cn_provider_openstack_forget_token(o);
                cn_provider_auth_fail(call, auth, -ENOMEM, 0, "out of memory");
                return;
        }
        r = auth->next(call);
        if (r < 0)
                cn_provider_auth_fail(call, auth, r, 0, "failed to start the Nova request");
}

static int authenticate(CnProviderCall *call, CnOpenStackAuth *auth) {
        CnProvider *p = cn_provider_call_provider(call);
        OpenStack *o = cn_provider_data(p);
        _cleanup_free_ char *url = NULL;
        CnProviderHttpOptions opts = {
                .ca_file = o->ca_file,
                .body = o->auth,
                .error_parser = cn_provider_openstack_error_message,
                .operation = "authenticate",
        };

        if (asprintf(&url, "%s/v3/auth/tokens", o->auth_url) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "POST", url, &opts, on_token, auth);
}

int cn_provider_openstack_authorize(CnProviderCall *call, CnOpenStackAuth *auth) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));

        return cn_provider_authorize(call, auth, &o->token, authenticate);
}

bool cn_provider_openstack_reauthorize(CnProviderCall *call, CnOpenStackAuth *auth, const CnProviderHttpReply *reply) {
        OpenStack *o = cn_provider_data(cn_provider_call_provider(call));

        return cn_provider_reauthorize(call, auth, &o->token, authenticate, reply);
}
