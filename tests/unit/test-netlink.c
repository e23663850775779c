/* SPDX-License-Identifier: Apache-2.0 */
/* Runs in a private network namespace (unshare) so that it can add and remove addresses on its own
 * loopback device and watch the notifications arrive; skipped without CAP_SYS_ADMIN. */
#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>

#include "netlink.h"
#include "tap.h"

static unsigned callbacks;

static void on_change(CnNetlink *nl, void *userdata) {
        callbacks++;
}

/* Sends one request on a fresh blocking socket and returns the kernel's acknowledgement. */
static int request(struct nlmsghdr *nlh) {
        _cleanup_(mnl_socket_closep) struct mnl_socket *s = NULL;
        char buf[MNL_SOCKET_BUFFER_SIZE];
        ssize_t n;

        s = mnl_socket_open(NETLINK_ROUTE);
        if (!s || mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        if (mnl_socket_sendto(s, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        n = mnl_socket_recvfrom(s, buf, sizeof(buf));
        if (n < 0)
                return -errno;
        return mnl_cb_run(buf, n, 1, mnl_socket_get_portid(s), NULL, NULL) < 0 ? -errno : 0;
}

/* Adds or removes addr/plen on ifindex through a separate, blocking request socket. */
static int addr_request(int type, int family, const char *addr, int plen, int ifindex, unsigned flags) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct ifaddrmsg *ifa;
        unsigned char bin[16];

        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_EXCL : 0);
        nlh->nlmsg_seq = 1;
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = family;
        ifa->ifa_prefixlen = plen;
        ifa->ifa_index = ifindex;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        assert(inet_pton(family, addr, bin) == 1);
        mnl_attr_put(nlh, IFA_LOCAL, family == AF_INET ? 4 : 16, bin);
        mnl_attr_put(nlh, IFA_ADDRESS, family == AF_INET ? 4 : 16, bin);
        if (flags)
                mnl_attr_put_u32(nlh, IFA_FLAGS, flags);
        return request(nlh);
}

static int link_up(int ifindex) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct ifinfomsg *ifi;

        nlh->nlmsg_type = RTM_NEWLINK;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = 1;
        ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = ifindex;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        return request(nlh);
}

/* Runs the loop until the callback count passes `want` or a second elapses. */
static void run_until(sd_event *e, unsigned want) {
        for (int i = 0; i < 100 && callbacks < want; i++)
                (void) sd_event_run(e, 10 * 1000);
}

static void test_parse_message(void) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        struct ifaddrmsg *ifa;
        struct in6_addr a6, peer;
        CnLocalAddress la;

        nlh->nlmsg_type = RTM_NEWADDR;
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET6;
        ifa->ifa_prefixlen = 64;
        ifa->ifa_index = 3;
        inet_pton(AF_INET6, "2001:db8::1", &a6);
        inet_pton(AF_INET6, "2001:db8::2", &peer);
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(peer), &peer);
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(a6), &a6);
        mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_TENTATIVE | IFA_F_NODAD);
        TAP_EQ_INT(cn_netlink_parse_addr(nlh, &la), 0, "RTM_NEWADDR parses");
        TAP_EQ_STR(la.address, "2001:db8::1", "IFA_LOCAL wins over IFA_ADDRESS (point-to-point peer)");
        TAP_EQ_INT(la.ifindex, 3, "ifindex");
        TAP_EQ_INT(la.prefixlen, 64, "prefix length");
        TAP_EQ_INT(la.flags, IFA_F_TENTATIVE | IFA_F_NODAD, "32-bit IFA_FLAGS are used");

        nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_NEWADDR;
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        mnl_attr_put(nlh, IFA_ADDRESS, 16, &a6); /* IPv6-sized payload for an IPv4 address */
        TAP_EQ_INT(cn_netlink_parse_addr(nlh, &la), -EBADMSG, "address of the wrong size is refused");

        ifa->ifa_family = AF_PACKET;
        TAP_EQ_INT(cn_netlink_parse_addr(nlh, &la), -EAFNOSUPPORT, "other families are ignored");

        nlh->nlmsg_len = sizeof(struct nlmsghdr);
        TAP_EQ_INT(cn_netlink_parse_addr(nlh, &la), -EBADMSG, "truncated message is refused");
}

static void test_live(void) {
        _cleanup_(cn_netlink_freep) CnNetlink *nl = NULL;
        sd_event *e = NULL;
        unsigned before, dumps;
        int r, lo = (int) if_nametoindex("lo"), small = 4096;
        char ip[32];

        /* Without root there is no private network namespace: a visible skip. As root, a namespace
         * that cannot be made is a failure, never a quiet return. */
        if (geteuid() != 0) {
                printf("ok %d - live netlink tests # SKIP they need root for a private network namespace\n", ++tap_n);
                return;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                tap_ok(0, "a private network namespace for the live tests (unshare: %s)", strerror(errno));
                return;
        }
        lo = (int) if_nametoindex("lo");
        assert(lo > 0);
        assert(link_up(lo) == 0);
        assert(sd_event_new(&e) >= 0);

        TAP_EQ_INT(cn_netlink_new(e, on_change, NULL, &nl), 0, "netlink tracker starts");
        run_until(e, 1);
        TAP_OK(cn_netlink_ready(nl), "first dump completes");
        TAP_OK(cn_netlink_has_address(nl, "127.0.0.1"), "loopback address is in the dump");
        TAP_OK(!cn_netlink_has_address(nl, "10.20.30.40"), "an unassigned address is not");

        before = callbacks;
        TAP_EQ_INT(addr_request(RTM_NEWADDR, AF_INET, "10.20.30.40", 32, lo, 0), 0, "address added");
        run_until(e, before + 1);
        TAP_OK(cn_netlink_has_address(nl, "10.20.30.40"), "an added address is seen through the subscription");

        before = callbacks;
        TAP_EQ_INT(addr_request(RTM_NEWADDR, AF_INET6, "fd00::40", 128, lo, IFA_F_NODAD), 0, "IPv6 address added");
        run_until(e, before + 1);
        TAP_OK(cn_netlink_has_address(nl, "FD00:0::40"), "an added IPv6 address is seen (any spelling)");

        before = callbacks;
        TAP_EQ_INT(addr_request(RTM_DELADDR, AF_INET, "10.20.30.40", 32, lo, 0), 0, "address removed");
        run_until(e, before + 1);
        TAP_OK(!cn_netlink_has_address(nl, "10.20.30.40"), "a removed address disappears");

        /* Overrun the socket: tiny receive buffer, many changes while the loop is not running. The
         * kernel drops notifications and tells us with ENOBUFS; only a re-dump can recover. */
        r = setsockopt(cn_netlink_get_fd(nl), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        assert(r == 0);
        dumps = cn_netlink_dump_count(nl);
        for (int i = 1; i <= 200; i++) {
                snprintf(ip, sizeof(ip), "10.99.%d.%d", i / 250, i % 250);
                assert(addr_request(RTM_NEWADDR, AF_INET, ip, 32, lo, 0) == 0);
        }
        before = callbacks;
        for (int i = 0; i < 200 && !(cn_netlink_has_address(nl, "10.99.0.200") && cn_netlink_has_address(nl, "10.99.0.1") &&
                                     callbacks > before); i++)
                (void) sd_event_run(e, 10 * 1000);
        TAP_OK(cn_netlink_dump_count(nl) > dumps, "ENOBUFS triggers a new dump");
        TAP_OK(cn_netlink_has_address(nl, "10.99.0.1") && cn_netlink_has_address(nl, "10.99.0.200"),
               "after the re-dump every address is known");
        size_t n;
        (void) cn_netlink_addresses(nl, &n);
        TAP_OK(n >= 202, "the set holds all addresses (%zu)", n);

        nl = cn_netlink_free(nl);
        sd_event_unref(e);
}

int main(void) {
        test_parse_message();
        test_live();
        return tap_done();
}
