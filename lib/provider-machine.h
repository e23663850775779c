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
/* m->provider_id names the server (providerID or bare id); m->uid, when set, is the UID the server
 * must carry now (-EEXIST otherwise). */
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
