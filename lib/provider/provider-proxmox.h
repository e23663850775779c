/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: Proxmox VE (provider-proxmox.c). The parsers are exposed for the unit
 * tests. */
#pragma once

#include "provider-internal.h"

/* "AA:BB:..." (colons optional, any case): the 32 bytes of a SHA-256 certificate fingerprint. */
int cn_provider_proxmox_parse_fingerprint(const char *s, uint8_t ret[static CN_HTTP_SHA256_SIZE]);
/* The errno of a PVE error answer: a missing VM config is -ENOENT, a locked VM or a storage timeout
 * -EBUSY (retryable), 501 -ENOTSUP; else error. */
int cn_provider_proxmox_classify(long status, json_object *body, int error);
/* A VM from its status/current and config data and, when the guest agent answered, the "result"
 * of agent/network-get-interfaces (NULL: the config's ipconfigN); provider_id NULL means
 * proxmox://<region>/<vmid>. */
int cn_provider_proxmox_parse_vm(const char *region, const char *node, int64_t vmid, const char *provider_id,
                                 json_object *status, json_object *config, json_object *agent_result,
                                 CnProviderInstance **ret);

/* provider-proxmox.c, for the machine lifecycle (provider-proxmox-machine.c): the cluster's name;
 * one request to the API (path under /api2/json) with the provider's authentication and error
 * parsing (opts gives operation and the body); authorize runs auth->next once a ticket is there (at
 * once with an API token); reauthorize takes a 401 over as cn_provider_reauthorize(); the message of
 * a failed reply (a refused token, an untrusted certificate, else the API's). */
const char *cn_provider_proxmox_region(CnProvider *p);
int cn_provider_proxmox_request(CnProviderCall *call, const char *method, const char *path,
                                CnProviderHttpOptions *opts, CnProviderHttpCallback cb, void *userdata);
int cn_provider_proxmox_authorize(CnProviderCall *call, CnProviderAuth *auth);
bool cn_provider_proxmox_reauthorize(CnProviderCall *call, CnProviderAuth *auth, const CnProviderHttpReply *reply);
const char *cn_provider_proxmox_reply_message(CnProvider *p, const CnProviderHttpReply *reply);
/* Whether the config's agent option enables the QEMU guest agent ("1", "enabled=1,..."). */
bool cn_provider_proxmox_agent_enabled(json_object *config);

/* provider-proxmox-machine.c: the machine lifecycle (spec.proxmoxve). */
int cn_provider_proxmox_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec);
int cn_provider_proxmox_validate(CnProvider *p, json_object *spec, char **ret_reason);
int cn_provider_proxmox_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels);
int cn_provider_proxmox_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                    void *userdata, CnProviderCall **ret);
int cn_provider_proxmox_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                       CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
int cn_provider_proxmox_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                        void *userdata, CnProviderCall **ret);
/* The NoCloud seed image of a machine: user-data, meta-data (instance-id uid, local-hostname
 * name), network-config (DHCP on every Ethernet interface). */
int cn_provider_proxmox_seed(const char *uid, const char *name, const char *userdata, void **ret, size_t *ret_size);
/* The online nodes of GET /nodes as failure domains, each with the attribute region. */
int cn_provider_proxmox_failure_domains_parse(json_object *nodes, const char *region, json_object **ret);
int cn_provider_proxmox_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb,
                                        void *userdata, CnProviderCall **ret);
/* m->provider_id (proxmox://REGION/VMID, or the VMID) names the VM; it takes new_uid (tag and
 * description) only as cn_provider_migration_check() allows with m->uid and m->uid_is_live
 * (-CN_PROVIDER_EOWNED otherwise). */
int cn_provider_proxmox_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                    CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
