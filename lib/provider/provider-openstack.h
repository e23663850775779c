/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: OpenStack (provider-openstack-keystone.c: Keystone tokens,
 * provider-openstack.c: settings and Nova lookups, provider-openstack-machine.c: machine
 * lifecycle). Parsers are exposed for the unit tests. */
#pragma once

#include "provider-internal.h"

/* The provider's private state (cn_provider_data()). */
typedef struct OpenStack {
        char *auth_url;
        char *region;
        char *ca_file;
        json_object *auth;     /* the body of POST /v3/auth/tokens; holds the secret */
        CnProviderToken token;
        char *compute_url;     /* from the token's catalog */
        char *network_url;     /* Neutron's, from the token's catalog (NULL: the cloud has none) */
        char *octavia_url;     /* Octavia's (service type load-balancer; NULL: none) */
        json_object *flavors;  /* flavor id -> name, for Novas older than microversion 2.47 */
        json_object *settings; /* the [Global] settings in effect (file or environment); holds the secret */
} OpenStack;

/* provider-openstack.c: a [Global] setting of the cloud config, else the environment variable env
 * (may be NULL). */
const char *cn_provider_openstack_setting(json_object *cfg, const char *key, const char *env);
/* provider-openstack.c: the message of a Nova or Keystone error body. */
const char *cn_provider_openstack_error_message(json_object *body);

/* provider-openstack-keystone.c: the body of POST /v3/auth/tokens from the settings. */
int cn_provider_openstack_build_auth(json_object *cfg, json_object **ret, char **ret_error);
/* provider-openstack-keystone.c: drops the cached token and compute endpoint. */
void cn_provider_openstack_forget_token(OpenStack *o);

/* OpenStack Nova "server" object (microversion 2.47+ for flavor.original_name). region: the
 * configured region, for the region label and the providerID. */
int cn_provider_openstack_parse_server(json_object *server, const char *region, CnProviderInstance **ret);
/* Keystone v3 token response: the endpoint URL of a service type, preferring the interface
 * ("public") and region given. Borrowed. */
const char *cn_provider_openstack_find_endpoint(json_object *token_body, const char *type, const char *interface,
                                                const char *region);

/* provider-openstack-keystone.c: the Keystone token shared by every Nova request. A call that talks to
 * Nova keeps one CnOpenStackAuth in its state: next() issues its Nova request once a token is
 * there, fail() ends the call when none can be had. */
typedef CnProviderAuth CnOpenStackAuth;

/* Runs auth->next at once when the cached token is usable, else after Keystone issued one. */
int cn_provider_openstack_authorize(CnProviderCall *call, CnOpenStackAuth *auth);
/* A Nova reply of 401 on a call whose token was not fetched afresh: forgets the token and
 * authorizes once more. True when it took the call over (the reply is then not to be used). */
bool cn_provider_openstack_reauthorize(CnProviderCall *call, CnOpenStackAuth *auth, const CnProviderHttpReply *reply);
/* Fills the token, CA, microversion header and error parser of a Nova request; returns the compute
 * endpoint (valid after authorization). */
const char *cn_provider_openstack_nova(CnProvider *p, CnProviderHttpOptions *opts);
/* GET /servers/detail with an exact-name filter (after authorization). */
int cn_provider_openstack_list_url(CnProvider *p, const char *name, char **ret_url);
/* The server id of "openstack:///<id>" or "openstack://<region>/<id>" (and, with bare_ok, of
 * "<id>"); NULL when it names none. Points into provider_id. */
const char *cn_provider_openstack_server_id(const char *provider_id, bool bare_ok);
/* The [Global] settings in effect, as {"Global": {key: value}} (holds the secret). Borrowed. */
json_object *cn_provider_openstack_settings(CnProvider *p);

/* GET /os-availability-zone's body as failure domains: the available zones, with the region as
 * an attribute. */
int cn_provider_openstack_failure_domains_parse(json_object *body, const char *region, json_object **ret);

/* provider-openstack-machine.c */
int cn_provider_openstack_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec);
int cn_provider_openstack_validate(CnProvider *p, json_object *spec, char **ret_reason);
int cn_provider_openstack_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                      void *userdata, CnProviderCall **ret);
int cn_provider_openstack_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                         CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
int cn_provider_openstack_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                          void *userdata, CnProviderCall **ret);
int cn_provider_openstack_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels);
/* As Hetzner's: m->provider_id names the server (providerID or bare id); relabelled only as
 * cn_provider_migration_check() allows (-CN_PROVIDER_EOWNED otherwise). The UID is rewritten with POST
 * /servers/{id}/metadata (a merge). */
int cn_provider_openstack_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                      CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
/* {"Global": {auth-url, region, project and domain}}: never a user or a secret. */
int cn_provider_openstack_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config);

/* provider-openstack-lb.c: the control-plane endpoint (see CnProviderOps): an Octavia load balancer
 * behind a floating IP, or without Octavia a floating IP. */
int cn_provider_openstack_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb,
                                               CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret,
                                               char **ret_reason);
int cn_provider_openstack_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb,
                                                CnProviderCleanupCallback cb, void *userdata, CnProviderCall **ret);

/* {"id", "host", "port"} of a Neutron floating IP object; -EBADMSG when it has no id or its
 * address is not an IPv4 address. */
int cn_provider_openstack_fip_view(json_object *fip, json_object **ret);

/* For the unit tests: the neutral view of a Nova server object. A server in ERROR is reported as
 * an error instead (fault code 5xx: -EAGAIN, retryable; otherwise -EINVAL, terminal), with
 * Nova's fault message in *ret_message (borrowed from server). */
int cn_provider_openstack_machine_view(json_object *server, json_object **ret, const char **ret_message);
/* The Nova POST /servers body for a machine (spec after add_defaults; userdata may be NULL). */
int cn_provider_openstack_server_body(const CnProviderMachine *m, const char *userdata_text, json_object **ret);
/* Among the servers of a Nova list, those carrying the UID in their metadata. Returns how many
 * matched; *ret (optional) is the first match, borrowed. */
size_t cn_provider_openstack_match_uid(json_object *servers, const char *uid, json_object **ret);
