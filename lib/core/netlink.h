/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's view of this host's IP addresses, kept current on an sd-event loop: one libmnl
 * socket (non-blocking, CLOEXEC) subscribed to RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR, an
 * RTM_GETADDR dump at start, incremental updates from the notifications, and a fresh dump when
 * the kernel reports that notifications were lost (ENOBUFS) or one arrived during a dump. The
 * owner is called back after each change of the address set (and after the first dump). The set
 * is bounded: past the bound the interface with the most addresses is left out (kube-ipvs0's
 * Service IPs are no node's), and no error ever stops the tracking. */
#pragma once

#include <systemd/sd-event.h>

#include "macro.h"

typedef struct CnLocalAddress {
        int family;              /* AF_INET or AF_INET6 */
        int ifindex;
        unsigned char prefixlen;
        unsigned char scope;     /* RT_SCOPE_* */
        unsigned flags;          /* IFA_F_* */
        char address[46];        /* canonical text (INET6_ADDRSTRLEN) */
} CnLocalAddress;

typedef struct CnNetlink CnNetlink;
typedef void (*CnNetlinkHandler)(CnNetlink *nl, void *userdata);

int cn_netlink_new(sd_event *e, CnNetlinkHandler cb, void *userdata, CnNetlink **ret);
CnNetlink *cn_netlink_free(CnNetlink *nl);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnNetlink *, cn_netlink_free);

/* True once the first dump completed. */
bool cn_netlink_ready(const CnNetlink *nl);
const CnLocalAddress *cn_netlink_addresses(const CnNetlink *nl, size_t *ret_n);
/* True if `ip` is assigned locally and usable: not tentative (IPv6 DAD pending) nor DAD-failed. */
bool cn_netlink_has_address(const CnNetlink *nl, const char *ip);
/* Adapter with the CnLocalAddressCheck signature of node-addresses.h. */
bool cn_netlink_check_address(const char *ip, void *userdata);
/* How many dumps were made (first one and every re-dump); for tests and metrics. */
unsigned cn_netlink_dump_count(const CnNetlink *nl);
/* The socket, for tests that shrink its receive buffer to provoke ENOBUFS. */
int cn_netlink_get_fd(const CnNetlink *nl);

/* Parses one RTM_NEWADDR/RTM_DELADDR message. Returns 0, or -EBADMSG for a malformed one, or
 * -EAFNOSUPPORT for a family we ignore. Exposed for the unit tests. */
int cn_netlink_parse_addr(const struct nlmsghdr *nlh, CnLocalAddress *ret);
