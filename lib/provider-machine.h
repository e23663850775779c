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

/* The neutral instance view of a Hetzner server object (exposed for the unit tests). */
int cn_provider_hetzner_machine_view(json_object *server, json_object **ret);
