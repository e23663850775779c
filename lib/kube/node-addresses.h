/* SPDX-License-Identifier: Apache-2.0 */
/* The addresses of a Node (status.addresses), computed the way the cloud-node controller of
 * Kubernetes does it (cloudnode-initializer(8) documents the same rules):
 *   - InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname; IPv4 and IPv6 (dual stack);
 *   - deterministic order: by type (InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname),
 *     within a type IPv4 before IPv6, otherwise in the order the cloud gave them; no duplicates;
 *   - alpha.kubernetes.io/provided-node-ip (one IP or a dual-stack comma pair): every given IP
 *     must be among the cloud's addresses, else the Node must not be initialized; the entries
 *     matching them move to the front, in the annotation's order;
 *   - the kubelet's Hostname is kept when the cloud provides none;
 *   - optionally (node mode) InternalIPs are only reported once the kernel has them on an
 *     interface: an address still being configured, or a NAT address, is not the node's yet. */
#pragma once

#include "macro.h"

typedef enum CnNodeAddressType {
        CN_NODE_ADDRESS_INTERNAL_IP,
        CN_NODE_ADDRESS_EXTERNAL_IP,
        CN_NODE_ADDRESS_INTERNAL_DNS,
        CN_NODE_ADDRESS_EXTERNAL_DNS,
        CN_NODE_ADDRESS_HOSTNAME,
        _CN_NODE_ADDRESS_TYPE_MAX,
        _CN_NODE_ADDRESS_TYPE_INVALID = -EINVAL,
} CnNodeAddressType;

const char *cn_node_address_type_to_string(CnNodeAddressType t) _const_;
CnNodeAddressType cn_node_address_type_from_string(const char *s) _pure_;

typedef struct CnNodeAddress {
        CnNodeAddressType type;
        char *address;
} CnNodeAddress;

typedef struct CnNodeAddressList {
        CnNodeAddress *items;
        size_t n;
} CnNodeAddressList;

void cn_node_address_list_done(CnNodeAddressList *l);
#define _cleanup_node_address_list_ _cleanup_(cn_node_address_list_done)

/* Appends unless the same (type, address) pair is already there; IP addresses are compared and
 * stored in canonical form. Returns 1 if added, 0 if it was a duplicate, -EINVAL for an IP type
 * with a string that is no IP address, -ENOMEM. */
int cn_node_address_list_add(CnNodeAddressList *l, CnNodeAddressType type, const char *address);
bool cn_node_address_list_equal(const CnNodeAddressList *a, const CnNodeAddressList *b);
bool cn_node_address_list_contains(const CnNodeAddressList *l, CnNodeAddressType type, const char *address);

/* JSON form of status.addresses: [{"type":"InternalIP","address":"10.0.0.1"}, ...]. */
json_object *cn_node_address_list_to_json(const CnNodeAddressList *l);
/* Parses a Node's status.addresses; entries of unknown type are skipped (the API may grow). */
int cn_node_address_list_from_json(json_object *addresses, CnNodeAddressList *ret);

/* A set of IPs assigned locally (from a netlink dump), used to confirm InternalIPs. */
typedef bool (*CnLocalAddressCheck)(const char *ip, void *userdata);

typedef struct CnNodeAddressInput {
        const CnNodeAddressList *cloud;   /* what the metadata service or the cloud API reports */
        const char *provided_node_ip;     /* annotation value, NULL when absent */
        const char *kubelet_hostname;     /* the Hostname entry the kubelet reported, may be NULL */
        CnLocalAddressCheck local_check;  /* NULL: no local confirmation (cluster mode) */
        void *local_userdata;
} CnNodeAddressInput;

/* Returns 0 and fills *ret; -EINVAL if the annotation is malformed (not one IP or an IPv4/IPv6
 * pair); -EADDRNOTAVAIL if an IP of the annotation matches none of the addresses; -ENODATA if no
 * IP address remains. *ret_bad_ip (may be NULL) receives the first annotation IP that matched
 * nothing, for the Event that tells the user why. */
int cn_node_addresses_compute(const CnNodeAddressInput *in, CnNodeAddressList *ret, char **ret_bad_ip);

/* Helpers that read the inputs out of a Node object. Returned strings point into the object. */
const char *cn_node_get_provided_node_ip(json_object *node);
const char *cn_node_get_kubelet_hostname(json_object *node);
