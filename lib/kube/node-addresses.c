/* SPDX-License-Identifier: Apache-2.0 */
/* Node address computation; the rules are documented in node-addresses.h. */
#include <arpa/inet.h>

#include "node-addresses.h"

static const char *const type_table[_CN_NODE_ADDRESS_TYPE_MAX] = {
        [CN_NODE_ADDRESS_INTERNAL_IP] = "InternalIP",
        [CN_NODE_ADDRESS_EXTERNAL_IP] = "ExternalIP",
        [CN_NODE_ADDRESS_INTERNAL_DNS] = "InternalDNS",
        [CN_NODE_ADDRESS_EXTERNAL_DNS] = "ExternalDNS",
        [CN_NODE_ADDRESS_HOSTNAME] = "Hostname",
};

const char *cn_node_address_type_to_string(CnNodeAddressType t) {
        if (t < 0 || t >= _CN_NODE_ADDRESS_TYPE_MAX)
                return NULL;
        return type_table[t];
}

CnNodeAddressType cn_node_address_type_from_string(const char *s) {
        if (!s)
                return _CN_NODE_ADDRESS_TYPE_INVALID;
        for (int t = 0; t < _CN_NODE_ADDRESS_TYPE_MAX; t++)
                if (streq(type_table[t], s))
                        return t;
        return _CN_NODE_ADDRESS_TYPE_INVALID;
}

static bool type_is_ip(CnNodeAddressType t) {
        return t == CN_NODE_ADDRESS_INTERNAL_IP || t == CN_NODE_ADDRESS_EXTERNAL_IP;
}

void cn_node_address_list_done(CnNodeAddressList *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i].address);
        free(l->items);
        l->items = NULL;
        l->n = 0;
}

/* Canonical text of an IP (so "2001:DB8::0:1" and "2001:db8::1" are one address); the family
 * goes to *ret_family. */
/* a.b.c.d of an IPv4 address: what inet_ntop() writes, without its sprintf() (addresses are
 * compared and sorted many times per Node). */
static void ipv4_format(const unsigned char a[4], char out[static INET_ADDRSTRLEN]) {
        char *p = out;

        for (size_t i = 0; i < 4; i++) {
                unsigned v = a[i];

                if (i > 0)
                        *p++ = '.';
                if (v >= 100)
                        *p++ = (char) ('0' + v / 100);
                if (v >= 10)
                        *p++ = (char) ('0' + v / 10 % 10);
                *p++ = (char) ('0' + v % 10);
        }
        *p = 0;
}

static int ip_canonical(const char *s, char **ret, int *ret_family) {
        unsigned char buf[sizeof(struct in6_addr)];
        char out[INET6_ADDRSTRLEN];
        int family;

        if (!s)
                return -EINVAL;
        if (inet_pton(AF_INET, s, buf) == 1)
                family = AF_INET;
        else if (inet_pton(AF_INET6, s, buf) == 1)
                family = AF_INET6;
        else
                return -EINVAL;
        if (ret) {
                if (family == AF_INET)
                        ipv4_format(buf, out);
                else if (!inet_ntop(family, buf, out, sizeof(out)))
                        return -EINVAL;
                *ret = strdup(out);
                if (!*ret)
                        return -ENOMEM;
        }
        if (ret_family)
                *ret_family = family;
        return 0;
}

static int address_family(const CnNodeAddress *a) {
        int family = 0;

        if (!type_is_ip(a->type) || ip_canonical(a->address, NULL, &family) < 0)
                return 0;
        return family;
}

/* address as the list holds it (an IP canonical). */
static bool list_has(const CnNodeAddressList *l, CnNodeAddressType type, const char *address) {
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].type == type && streq(l->items[i].address, address))
                        return true;
        return false;
}

bool cn_node_address_list_contains(const CnNodeAddressList *l, CnNodeAddressType type, const char *address) {
        _cleanup_free_ char *canon = NULL;

        if (type_is_ip(type) && ip_canonical(address, &canon, NULL) >= 0)
                address = canon;
        return list_has(l, type, address);
}

static int list_push(CnNodeAddressList *l, CnNodeAddressType type, char *address_owned) {
        CnNodeAddress *n;

        n = reallocarray(l->items, l->n + 1, sizeof(CnNodeAddress));
        if (!n) {
                free(address_owned);
                return -ENOMEM;
        }
        l->items = n;
        l->items[l->n++] = (CnNodeAddress) { .type = type, .address = address_owned };
        return 1;
}

int cn_node_address_list_add(CnNodeAddressList *l, CnNodeAddressType type, const char *address) {
        _cleanup_free_ char *a = NULL;
        int r;

        assert(l);
        if (type < 0 || type >= _CN_NODE_ADDRESS_TYPE_MAX || isempty(address))
                return -EINVAL;
        if (type_is_ip(type)) {
                r = ip_canonical(address, &a, NULL);
                if (r < 0)
                        return r;
        } else {
                a = strdup(address);
                if (!a)
                        return -ENOMEM;
        }
        if (list_has(l, type, a))
                return 0;
        return list_push(l, type, TAKE_PTR(a));
}

bool cn_node_address_list_equal(const CnNodeAddressList *a, const CnNodeAddressList *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (a->items[i].type != b->items[i].type || !streq(a->items[i].address, b->items[i].address))
                        return false;
        return true;
}

json_object *cn_node_address_list_to_json(const CnNodeAddressList *l) {
        _cleanup_json_ json_object *arr = json_object_new_array();

        if (!arr)
                return NULL;
        for (size_t i = 0; i < l->n; i++) {
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o ||
                    json_object_object_add(o, "type",
                                           json_object_new_string(cn_node_address_type_to_string(l->items[i].type))) < 0 ||
                    json_object_object_add(o, "address", json_object_new_string(l->items[i].address)) < 0 ||
                    json_object_array_add(arr, o) < 0)
                        return NULL;
                TAKE_PTR(o);
        }
        return TAKE_PTR(arr);
}

int cn_node_address_list_from_json(json_object *addresses, CnNodeAddressList *ret) {
        _cleanup_node_address_list_ CnNodeAddressList l = {};
        size_t n;
        int r;

        assert(ret);
        if (addresses && !json_object_is_type(addresses, json_type_array))
                return -EBADMSG;
        n = addresses ? json_object_array_length(addresses) : 0;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(addresses, i), *t, *a;
                CnNodeAddressType type;

                if (!json_object_object_get_ex(e, "type", &t) || !json_object_object_get_ex(e, "address", &a) ||
                    !json_object_is_type(t, json_type_string) || !json_object_is_type(a, json_type_string))
                        continue;
                type = cn_node_address_type_from_string(json_object_get_string(t));
                if (type < 0)
                        continue;
                /* Keep what the API has verbatim: comparing against it must see a non-canonical
                 * spelling as a difference worth rewriting. */
                r = list_push(&l, type, strdup(json_object_get_string(a)));
                if (r < 0 || !l.items[l.n - 1].address)
                        return -ENOMEM;
        }
        *ret = l;
        l = (CnNodeAddressList) {};
        return 0;
}

/* Splits the annotation into one or two canonical IPs; a pair must be one IPv4 and one IPv6,
 * as the kubelet requires for --node-ip. */
static int parse_provided_node_ip(const char *s, char *ret_ips[static 2], size_t *ret_n) {
        _cleanup_free_ char *copy = strdup(s), *a = NULL, *b = NULL;
        int fa = 0, fb = 0, r;
        char *comma;

        if (!copy)
                return -ENOMEM;
        comma = strchr(copy, ',');
        if (comma) {
                *comma = 0;
                if (strchr(comma + 1, ','))
                        return -EINVAL;
                r = ip_canonical(comma + 1, &b, &fb);
                if (r < 0)
                        return r;
        }
        r = ip_canonical(copy, &a, &fa);
        if (r < 0)
                return r;
        if (b && fa == fb)
                return -EINVAL;
        ret_ips[0] = TAKE_PTR(a);
        ret_ips[1] = TAKE_PTR(b);
        *ret_n = ret_ips[1] ? 2 : 1;
        return 0;
}

int cn_node_addresses_compute(const CnNodeAddressInput *in, CnNodeAddressList *ret, char **ret_bad_ip) {
        _cleanup_node_address_list_ CnNodeAddressList sorted = {}, out = {};
        _cleanup_free_ char *pip0 = NULL, *pip1 = NULL;
        char *pips[2] = {};
        size_t n_pips = 0;
        bool have_hostname = false, have_ip = false;
        int r;

        assert(in);
        assert(ret);

        if (!isempty(in->provided_node_ip)) {
                r = parse_provided_node_ip(in->provided_node_ip, pips, &n_pips);
                pip0 = pips[0];
                pip1 = pips[1];
                if (r < 0)
                        return r;
        }

        /* Deterministic order: type, then family, then the cloud's order. */
        for (int t = 0; t < _CN_NODE_ADDRESS_TYPE_MAX; t++)
                for (int pass = 0; pass < 2; pass++)
                        for (size_t i = 0; in->cloud && i < in->cloud->n; i++) {
                                const CnNodeAddress *a = &in->cloud->items[i];
                                int family;

                                if ((int) a->type != t)
                                        continue;
                                family = address_family(a);
                                if (type_is_ip(a->type)) {
                                        if (family == 0)
                                                continue; /* not an IP: the cloud is wrong, drop it */
                                        if ((pass == 0) != (family == AF_INET))
                                                continue;
                                } else if (pass == 1)
                                        continue;
                                if (a->type == CN_NODE_ADDRESS_INTERNAL_IP && in->local_check &&
                                    !in->local_check(a->address, in->local_userdata))
                                        continue;
                                r = cn_node_address_list_add(&sorted, a->type, a->address);
                                if (r < 0)
                                        return r;
                        }

        for (size_t i = 0; i < sorted.n; i++)
                if (sorted.items[i].type == CN_NODE_ADDRESS_HOSTNAME)
                        have_hostname = true;
        if (!have_hostname && !isempty(in->kubelet_hostname)) {
                r = cn_node_address_list_add(&sorted, CN_NODE_ADDRESS_HOSTNAME, in->kubelet_hostname);
                if (r < 0)
                        return r;
        }

        /* Every provided IP must be one of ours; the entries that carry it go first. */
        for (size_t p = 0; p < n_pips; p++) {
                bool found = false;

                for (size_t i = 0; i < sorted.n; i++)
                        if (type_is_ip(sorted.items[i].type) && streq(sorted.items[i].address, pips[p])) {
                                found = true;
                                r = cn_node_address_list_add(&out, sorted.items[i].type, sorted.items[i].address);
                                if (r < 0)
                                        return r;
                        }
                if (!found) {
                        if (ret_bad_ip) {
                                *ret_bad_ip = strdup(pips[p]);
                                if (!*ret_bad_ip)
                                        return -ENOMEM;
                        }
                        return -EADDRNOTAVAIL;
                }
        }
        for (size_t i = 0; i < sorted.n; i++) {
                r = cn_node_address_list_add(&out, sorted.items[i].type, sorted.items[i].address);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < out.n; i++)
                if (type_is_ip(out.items[i].type))
                        have_ip = true;
        if (!have_ip)
                return -ENODATA;

        *ret = out;
        out = (CnNodeAddressList) {};
        return 0;
}

const char *cn_node_get_provided_node_ip(json_object *node) {
        json_object *md, *ann, *v;

        if (!json_object_object_get_ex(node, "metadata", &md) ||
            !json_object_object_get_ex(md, "annotations", &ann) ||
            !json_object_object_get_ex(ann, "alpha.kubernetes.io/provided-node-ip", &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

const char *cn_node_get_kubelet_hostname(json_object *node) {
        json_object *st, *addrs;
        size_t n;

        if (!json_object_object_get_ex(node, "status", &st) || !json_object_object_get_ex(st, "addresses", &addrs) ||
            !json_object_is_type(addrs, json_type_array))
                return NULL;
        n = json_object_array_length(addrs);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(addrs, i), *t, *a;

                if (json_object_object_get_ex(e, "type", &t) && json_object_object_get_ex(e, "address", &a) &&
                    json_object_is_type(a, json_type_string) && streq(strempty(json_object_get_string(t)), "Hostname"))
                        return json_object_get_string(a);
        }
        return NULL;
}
