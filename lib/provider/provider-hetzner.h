/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: Hetzner Cloud (provider-hetzner.c: InstancesV2 lookups,
 * provider-hetzner-machine.c: machine lifecycle). Parsers are exposed for the unit tests. */
#pragma once

#include "provider-internal.h"

/* Hetzner Cloud "server" object. network: name or ID of the private network whose IP is the
 * InternalIP (NULL: every private network IP). */
int cn_provider_hetzner_parse_server(json_object *server, const char *network, CnProviderInstance **ret);
/* An answer of GET /v1/servers/{id} or /v1/servers?name= parsed keeping only what
 * cn_provider_hetzner_parse_server() reads of its server(s), and the error (a CnTreeParser). */
int cn_provider_hetzner_parse_server_answer(const char *data, size_t size, size_t max_size, json_object **ret,
                                            char **ret_error);

/* provider-hetzner.c: the settings machine calls need (endpoint, token, CA). */
int cn_provider_hetzner_request_options(CnProvider *p, const char **ret_endpoint, CnProviderHttpOptions *o);

/* provider-hetzner-machine.c */
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

/* provider-hetzner-lb.c: the control-plane load balancer (see CnProviderOps). */
int cn_provider_hetzner_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb,
                                             CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret,
                                             char **ret_reason);
int cn_provider_hetzner_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb,
                                              CnProviderCleanupCallback cb, void *userdata, CnProviderCall **ret);
/* spec.controlPlaneLoadBalancer (may be NULL) with CAPH's defaults: type lb11, algorithm
 * round_robin, port 6443; -EINVAL with the reason in *ret_reason (optional) otherwise. Borrowed. */
int cn_provider_hetzner_lb_settings(json_object *spec, const char **ret_type, const char **ret_algorithm,
                                    int *ret_port, char **ret_reason);
/* {"id", "host", "port"} of a load balancer object: -ENODATA without a public IPv4 address yet,
 * -EBADMSG when it is not one. */
int cn_provider_hetzner_lb_view(json_object *lb, int port, json_object **ret);

/* The neutral instance view of a Hetzner server object (exposed for the unit tests). */
int cn_provider_hetzner_machine_view(json_object *server, json_object **ret);

