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
