/* SPDX-License-Identifier: Apache-2.0 */
/* Machine lifecycle of the providers (Cluster API infrastructure machines), kept apart from the
 * InstancesV2 lookups in lib/provider-<name>.c. Instances are reported to the controller as a
 * provider-neutral JSON view:
 *   {"id": "42", "providerID": "hcloud://42", "state": "running", "ready": true,
 *    "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, ...]}
 * and found by the label/tag CN_MACHINE_UID_LABEL = the CloudnodeMachine's UID, so that a create
 * is never repeated after a crash between the create and the status write. */
#pragma once

#include "provider.h"

#define CN_PROVIDER_MACHINE_UID_LABEL "cloudnode.io/machine-uid"

/* Several instances carry one machine's UID: refused, a human decides. */
#define CN_PROVIDER_EMULTIPLE ENOTUNIQ
/* The instance a migration names belongs to another machine: refused for good. */
#define CN_PROVIDER_EOWNED EADDRINUSE

typedef bool (*CnProviderUidIsLive)(const char *uid, void *userdata);

/* lib/provider.c: whether migrate_uid may relabel an instance that carries the UID current (NULL:
 * no label) to new_uid: 1 when it carries new_uid already, 0 when it may, -CN_PROVIDER_EOWNED when
 * it is another machine's: any UID but expected when that is set, else a UID is_live() knows, or
 * no label at all (an instance no machine created). */
int cn_provider_migration_check(const char *expected, CnProviderUidIsLive is_live, void *userdata,
                                const char *current, const char *new_uid);

/* lib/provider.c: the neutral view of an instance the provider parsed, with the cloud's own state
 * name and whether that state is "running". */
int cn_provider_machine_view(const CnProviderInstance *i, const char *state, bool ready, json_object **ret);

/* lib/provider-hetzner.c: the settings machine calls need (endpoint, token, CA). */
int cn_provider_hetzner_request_options(CnProvider *p, const char **ret_endpoint, CnProviderHttpOptions *o);

/* lib/provider-hetzner-machine.c */
int cn_provider_hetzner_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec);
int cn_provider_hetzner_validate(CnProvider *p, json_object *spec, char **ret_reason);
int cn_provider_hetzner_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                    void *userdata, CnProviderCall **ret);
int cn_provider_hetzner_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                       CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
int cn_provider_hetzner_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                        void *userdata, CnProviderCall **ret);
int cn_provider_hetzner_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels);

int cn_provider_hetzner_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb,
                                        void *userdata, CnProviderCall **ret);
/* m->provider_id names the server (providerID or bare id); it is relabelled only as
 * cn_provider_migration_check() allows with m->uid and m->uid_is_live (-CN_PROVIDER_EOWNED
 * otherwise). */
int cn_provider_hetzner_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                    CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
/* {"Global": {"endpoint", "network"}} for the workload cluster's cloud.conf; never the token. */
int cn_provider_hetzner_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config);

#define CN_PROVIDER_HETZNER_ID_PREFIX "hcloud://"
/* The server id of "hcloud://42" or "42". */
int cn_provider_hetzner_server_id(const char *provider_id, int64_t *ret);
/* GET /locations' "locations" as failure domains; region keeps a network zone or one location. */
int cn_provider_hetzner_failure_domains_parse(json_object *locations, const char *region, json_object **ret);

/* The neutral instance view of a Hetzner server object (exposed for the unit tests). */
int cn_provider_hetzner_machine_view(json_object *server, json_object **ret);

/* lib/provider-openstack.c: the Keystone token shared by every Nova request. A call that talks to
 * Nova keeps one CnOpenStackAuth in its state: next() issues its Nova request once a token is
 * there, fail() ends the call when none can be had. */
typedef struct CnOpenStackAuth {
        int (*next)(CnProviderCall *call);
        void (*fail)(CnProviderCall *call, const CnProviderResult *res);
        bool reauthenticated;
} CnOpenStackAuth;

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

/* lib/provider-openstack-machine.c */
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

/* For the unit tests: the neutral view of a Nova server object. A server in ERROR is reported as
 * an error instead (fault code 5xx: -EAGAIN, retryable; otherwise -EINVAL, terminal), with
 * Nova's fault message in *ret_message (borrowed from server). */
int cn_provider_openstack_machine_view(json_object *server, json_object **ret, const char **ret_message);
/* The Nova POST /servers body for a machine (spec after add_defaults; userdata may be NULL). */
int cn_provider_openstack_server_body(const CnProviderMachine *m, const char *userdata_text, json_object **ret);
/* Among the servers of a Nova list, those carrying the UID in their metadata. Returns how many
 * matched; *ret (optional) is the first match, borrowed. */
size_t cn_provider_openstack_match_uid(json_object *servers, const char *uid, json_object **ret);
