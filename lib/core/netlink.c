/* SPDX-License-Identifier: Apache-2.0 */
/* Local address tracking over rtnetlink with libmnl; see netlink.h. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"
#include "netlink.h"

/* Bounds what a flood of notifications can make us allocate. When the set is full, the interface
 * with the most addresses is given up on (until the next dump): one with thousands of addresses
 * holds Service IPs (kube-proxy's kube-ipvs0), not a node's. */
#define CN_NETLINK_ADDRESSES_MAX 4096U
#define CN_NETLINK_SKIPPED_MAX 8U

struct CnNetlink {
        sd_event *event;
        sd_event_source *io;
        struct mnl_socket *sock;
        unsigned portid;
        unsigned seq;            /* of the dump in progress, 0 if none */
        bool dumping;
        bool dump_again;         /* a change raced with the dump, or messages were lost */
        bool unreported;         /* changed since the owner was last called */
        bool ready;
        unsigned dumps;
        CnLocalAddress *addrs;   /* current set */
        size_t n_addrs;
        CnLocalAddress *pending; /* set being filled by the dump in progress */
        size_t n_pending;
        int skipped[CN_NETLINK_SKIPPED_MAX]; /* interfaces given up on since the last dump */
        size_t n_skipped;
        CnNetlinkHandler cb;
        void *userdata;
};

static int mnl_attr_cb(const struct nlattr *attr, void *data) {
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(attr);

        if (mnl_attr_type_valid(attr, IFA_MAX) < 0)
                return MNL_CB_OK;
        tb[type] = attr;
        return MNL_CB_OK;
}

int cn_netlink_parse_addr(const struct nlmsghdr *nlh, CnLocalAddress *ret) {
        const struct nlattr *tb[IFA_MAX + 1] = {};
        const struct ifaddrmsg *ifa;
        const struct nlattr *a;
        CnLocalAddress la = {};
        size_t want;

        assert(nlh);
        assert(ret);
        if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct ifaddrmsg)))
                return -EBADMSG;
        ifa = mnl_nlmsg_get_payload(nlh);
        if (ifa->ifa_family == AF_INET)
                want = sizeof(struct in_addr);
        else if (ifa->ifa_family == AF_INET6)
                want = sizeof(struct in6_addr);
        else
                return -EAFNOSUPPORT;
        if (mnl_attr_parse(nlh, sizeof(*ifa), mnl_attr_cb, tb) < 0)
                return -EBADMSG;
        /* IFA_LOCAL is the address of this end on point-to-point links; IFA_ADDRESS is the peer
         * there and the local address everywhere else. */
        a = tb[IFA_LOCAL] ?: tb[IFA_ADDRESS];
        if (!a || mnl_attr_get_payload_len(a) != want)
                return -EBADMSG;
        if (!inet_ntop(ifa->ifa_family, mnl_attr_get_payload(a), la.address, sizeof(la.address)))
                return -EBADMSG;
        la.family = ifa->ifa_family;
        la.ifindex = (int) ifa->ifa_index;
        la.prefixlen = ifa->ifa_prefixlen;
        la.scope = ifa->ifa_scope;
        la.flags = ifa->ifa_flags;
        if (tb[IFA_FLAGS] && mnl_attr_get_payload_len(tb[IFA_FLAGS]) == sizeof(uint32_t))
                la.flags = mnl_attr_get_u32(tb[IFA_FLAGS]);
        *ret = la;
        return 0;
}

static bool same_address(const CnLocalAddress *a, const CnLocalAddress *b) {
        return a->family == b->family && a->ifindex == b->ifindex && streq(a->address, b->address);
}

static ssize_t find(const CnLocalAddress *set, size_t n, const CnLocalAddress *a) {
        for (size_t i = 0; i < n; i++)
                if (same_address(&set[i], a))
                        return (ssize_t) i;
        return -1;
}

static bool skipped(const CnNetlink *nl, int ifindex) {
        for (size_t i = 0; i < nl->n_skipped; i++)
                if (nl->skipped[i] == ifindex)
                        return true;
        return false;
}

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;

        return x < y ? -1 : x > y;
}

/* Gives up on the interface with the most addresses in the set and drops them. */
static int skip_largest(CnNetlink *nl, CnLocalAddress *set, size_t *n) {
        _cleanup_free_ int *idx = NULL;
        size_t best_n = 0, j = 0;
        int best = 0;

        if (nl->n_skipped >= CN_NETLINK_SKIPPED_MAX || *n == 0)
                return -E2BIG;
        idx = malloc(*n * sizeof(int));
        if (!idx)
                return -ENOMEM;
        for (size_t i = 0; i < *n; i++)
                idx[i] = set[i].ifindex;
        qsort(idx, *n, sizeof(int), cmp_int);
        for (size_t i = 0, run = 1; i < *n; i++, run++)
                if (i + 1 == *n || idx[i + 1] != idx[i]) {
                        if (run > best_n)
                                best_n = run, best = idx[i];
                        run = 0;
                }
        log_debug("More than %u local addresses: not tracking the %zu of interface %d.", CN_NETLINK_ADDRESSES_MAX,
                  best_n, best);
        nl->skipped[nl->n_skipped++] = best;
        for (size_t i = 0; i < *n; i++)
                if (set[i].ifindex != best)
                        set[j++] = set[i];
        *n = j;
        return 0;
}

/* Inserts or replaces; returns 1 if the set changed. */
static int set_put(CnNetlink *nl, CnLocalAddress **set, size_t *n, const CnLocalAddress *a) {
        ssize_t i = find(*set, *n, a);
        CnLocalAddress *p;
        bool dropped = false;

        if (i >= 0) {
                if (memcmp(&(*set)[i], a, sizeof(*a)) == 0)
                        return 0;
                (*set)[i] = *a;
                return 1;
        }
        while (*n >= CN_NETLINK_ADDRESSES_MAX && !skipped(nl, a->ifindex)) {
                int r = skip_largest(nl, *set, n);

                if (r == -E2BIG) {
                        log_debug("Address set full, ignoring %s.", a->address);
                        return dropped;
                }
                if (r < 0)
                        return r;
                dropped = true;
        }
        if (skipped(nl, a->ifindex))
                return dropped;
        p = reallocarray(*set, *n + 1, sizeof(CnLocalAddress));
        if (!p)
                return -ENOMEM;
        *set = p;
        (*set)[(*n)++] = *a;
        return 1;
}

static int set_remove(CnLocalAddress *set, size_t *n, const CnLocalAddress *a) {
        ssize_t i = find(set, *n, a);

        if (i < 0)
                return 0;
        memmove(set + i, set + i + 1, (*n - (size_t) i - 1) * sizeof(CnLocalAddress));
        (*n)--;
        return 1;
}

static bool sets_equal(const CnLocalAddress *a, size_t na, const CnLocalAddress *b, size_t nb) {
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++) {
                ssize_t j = find(b, nb, &a[i]);

                if (j < 0 || memcmp(&a[i], &b[j], sizeof(CnLocalAddress)) != 0)
                        return false;
        }
        return true;
}

static int start_dump(CnNetlink *nl) {
        char buf[MNL_SOCKET_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        struct rtgenmsg *rt;

        nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETADDR;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        /* Sequence numbers only need to tell our dumps apart from notifications (seq 0). */
        nl->seq = nl->seq + 1 ?: 1;
        nlh->nlmsg_seq = nl->seq;
        rt = mnl_nlmsg_put_extra_header(nlh, sizeof(struct rtgenmsg));
        rt->rtgen_family = AF_UNSPEC;

        free(nl->pending);
        nl->pending = NULL;
        nl->n_pending = 0;
        nl->n_skipped = 0;
        nl->dump_again = false;
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        nl->dumps++;
        return 0;
}

static void notify(CnNetlink *nl) {
        if (nl->cb)
                nl->cb(nl, nl->userdata);
}

static void dump_done(CnNetlink *nl) {
        bool changed = !nl->ready || nl->unreported ||
                       !sets_equal(nl->addrs, nl->n_addrs, nl->pending, nl->n_pending);

        free(nl->addrs);
        nl->addrs = TAKE_PTR(nl->pending);
        nl->n_addrs = nl->n_pending;
        nl->n_pending = 0;
        nl->ready = true;
        nl->unreported = false;
        if (changed)
                notify(nl);
}

static int handle_message(CnNetlink *nl, const struct nlmsghdr *nlh, bool *changed) {
        CnLocalAddress a;
        bool in_dump = nl->dumping && nlh->nlmsg_seq == nl->seq && nlh->nlmsg_pid == nl->portid;
        int r;

        if (nlh->nlmsg_type == NLMSG_DONE) {
                if (in_dump) {
                        nl->dumping = false;
                        if (!nl->dump_again)
                                dump_done(nl);
                }
                return 0;
        }
        if (nlh->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);

                if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(*err)) && err->error != 0)
                        return log_debug_errno(err->error, "Netlink request failed: %m");
                return 0;
        }
        if (nlh->nlmsg_type != RTM_NEWADDR && nlh->nlmsg_type != RTM_DELADDR)
                return 0;
        r = cn_netlink_parse_addr(nlh, &a);
        if (r < 0)
                return 0; /* neither IPv4 nor IPv6, or junk: not ours to track */

        if (in_dump)
                return set_put(nl, &nl->pending, &nl->n_pending, &a) < 0 ? -ENOMEM : 0;

        /* A notification while a dump runs may or may not be reflected in it: dump again after. */
        if (nl->dumping)
                nl->dump_again = true;
        if (nlh->nlmsg_type == RTM_NEWADDR)
                r = set_put(nl, &nl->addrs, &nl->n_addrs, &a);
        else
                r = set_remove(nl->addrs, &nl->n_addrs, &a);
        if (r < 0)
                return r;
        if (r > 0)
                *changed = true;
        return 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CnNetlink *nl = ASSERT_PTR(userdata);
        bool changed = false;
        int r;

        for (;;) {
                char buf[MNL_SOCKET_BUFFER_SIZE] __attribute__((aligned(NLMSG_ALIGNTO)));
                struct nlmsghdr *nlh;
                ssize_t len;

                len = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
                if (len < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        if (errno == ENOBUFS) {
                                /* The kernel dropped messages, maybe part of a dump in progress:
                                 * only a new full dump is truthful. Its new sequence number makes
                                 * us ignore the rest of any older one. */
                                log_debug("Netlink receive buffer overrun, dumping addresses again.");
                                r = start_dump(nl);
                                if (r < 0) {
                                        log_debug_errno(r, "Failed to request address dump: %m");
                                        nl->dump_again = true;
                                }
                                nl->dumping = r >= 0;
                                continue;
                        }
                        log_debug_errno(errno, "Failed to read from netlink socket: %m");
                        break;
                }
                for (nlh = (struct nlmsghdr *) buf; mnl_nlmsg_ok(nlh, (int) len); nlh = mnl_nlmsg_next(nlh, (int *) &len)) {
                        r = handle_message(nl, nlh, &changed);
                        if (r == -ENOMEM) {
                                /* Never fail the source: that would stop tracking for good. */
                                (void) log_oom();
                                nl->dump_again = true;
                        }
                }
        }

        if (!nl->dumping && nl->dump_again) {
                r = start_dump(nl);
                if (r < 0)
                        log_debug_errno(r, "Failed to request address dump: %m");
                else
                        nl->dumping = true;
        }
        if (changed) {
                if (nl->ready && !nl->dumping) {
                        nl->unreported = false;
                        notify(nl);
                } else
                        nl->unreported = true;
        }
        return 0;
}

int cn_netlink_new(sd_event *e, CnNetlinkHandler cb, void *userdata, CnNetlink **ret) {
        _cleanup_(cn_netlink_freep) CnNetlink *nl = NULL;
        int r;

        assert(e);
        assert(ret);
        nl = calloc(1, sizeof(*nl));
        if (!nl)
                return -ENOMEM;
        nl->event = sd_event_ref(e);
        nl->cb = cb;
        nl->userdata = userdata;

        nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (!nl->sock)
                return -errno;
        if (mnl_socket_bind(nl->sock, RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        nl->portid = mnl_socket_get_portid(nl->sock);

        r = sd_event_add_io(e, &nl->io, mnl_socket_get_fd(nl->sock), EPOLLIN, on_io, nl);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(nl->io, "netlink-addresses");
        r = start_dump(nl);
        if (r < 0)
                return r;
        nl->dumping = true;
        *ret = TAKE_PTR(nl);
        return 0;
}

CnNetlink *cn_netlink_free(CnNetlink *nl) {
        if (!nl)
                return NULL;
        sd_event_source_disable_unref(nl->io);
        if (nl->sock)
                mnl_socket_close(nl->sock);
        sd_event_unref(nl->event);
        free(nl->addrs);
        free(nl->pending);
        free(nl);
        return NULL;
}

bool cn_netlink_ready(const CnNetlink *nl) {
        return nl && nl->ready;
}

const CnLocalAddress *cn_netlink_addresses(const CnNetlink *nl, size_t *ret_n) {
        assert(nl);
        if (ret_n)
                *ret_n = nl->n_addrs;
        return nl->addrs;
}

bool cn_netlink_has_address(const CnNetlink *nl, const char *ip) {
        unsigned char want[sizeof(struct in6_addr)], have[sizeof(struct in6_addr)];
        int family;

        if (!nl || !ip)
                return false;
        if (inet_pton(AF_INET, ip, want) == 1)
                family = AF_INET;
        else if (inet_pton(AF_INET6, ip, want) == 1)
                family = AF_INET6;
        else
                return false;
        for (size_t i = 0; i < nl->n_addrs; i++) {
                const CnLocalAddress *a = &nl->addrs[i];

                if (a->family != family || (a->flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED)))
                        continue;
                if (inet_pton(family, a->address, have) == 1 &&
                    memcmp(want, have, family == AF_INET ? sizeof(struct in_addr) : sizeof(struct in6_addr)) == 0)
                        return true;
        }
        return false;
}

bool cn_netlink_check_address(const char *ip, void *userdata) {
        return cn_netlink_has_address(userdata, ip);
}

unsigned cn_netlink_dump_count(const CnNetlink *nl) {
        return nl ? nl->dumps : 0;
}

int cn_netlink_get_fd(const CnNetlink *nl) {
        return nl && nl->sock ? mnl_socket_get_fd(nl->sock) : -EBADF;
}
