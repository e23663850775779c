/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>

#include "node-addresses.h"
#include "tap.h"

static void add(CnNodeAddressList *l, CnNodeAddressType t, const char *a) {
        assert(cn_node_address_list_add(l, t, a) >= 0);
}

/* "InternalIP=10.0.0.1,Hostname=x" form of a list, to compare whole results in one check. */
static char *fmt(const CnNodeAddressList *l) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert(f);
        for (size_t i = 0; i < l->n; i++)
                fprintf(f, "%s%s=%s", i ? "," : "", cn_node_address_type_to_string(l->items[i].type),
                        l->items[i].address);
        fclose(f);
        return buf;
}

static int compute(const CnNodeAddressList *cloud, const char *pip, const char *hostname, char **ret) {
        _cleanup_node_address_list_ CnNodeAddressList out = {};
        CnNodeAddressInput in = { .cloud = cloud, .provided_node_ip = pip, .kubelet_hostname = hostname };
        int r;

        r = cn_node_addresses_compute(&in, &out, NULL);
        *ret = r < 0 ? NULL : fmt(&out);
        return r;
}

static void test_order_and_dedup(void) {
        _cleanup_node_address_list_ CnNodeAddressList cloud = {};
        _cleanup_free_ char *s = NULL;

        add(&cloud, CN_NODE_ADDRESS_HOSTNAME, "node-1");
        add(&cloud, CN_NODE_ADDRESS_EXTERNAL_IP, "2001:db8::10");
        add(&cloud, CN_NODE_ADDRESS_EXTERNAL_IP, "203.0.113.5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.6");
        TAP_EQ_INT(cn_node_address_list_add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5"), 0,
                   "exact duplicate is not added twice");
        TAP_EQ_INT(cn_node_address_list_add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "FD00:0::5"), 0,
                   "duplicate in another IPv6 spelling is not added twice");
        TAP_EQ_INT(cn_node_address_list_add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "not-an-ip"), -EINVAL,
                   "InternalIP that is no IP is refused");

        TAP_EQ_INT(compute(&cloud, NULL, "kubelet-name", &s), 0, "dual-stack compute succeeds");
        TAP_EQ_STR(s,
                   "InternalIP=10.0.0.5,InternalIP=10.0.0.6,InternalIP=fd00::5,"
                   "ExternalIP=203.0.113.5,ExternalIP=2001:db8::10,Hostname=node-1",
                   "order: type, then IPv4 before IPv6, then cloud order; cloud Hostname wins");
}

/* IPv4 addresses are written as inet_ntop() writes them, whatever digits each octet has. */
static void test_ipv4_spelling(void) {
        static const char *const ips[] = { "0.0.0.0", "255.255.255.255", "1.10.100.200", "9.99.109.250",
                                           "100.0.10.1", "192.168.0.9" };

        for (size_t i = 0; i < ELEMENTSOF(ips); i++) {
                _cleanup_node_address_list_ CnNodeAddressList l = {};
                struct in_addr a;
                char want[INET_ADDRSTRLEN];

                TAP_OK(inet_pton(AF_INET, ips[i], &a) == 1 && inet_ntop(AF_INET, &a, want, sizeof(want)),
                       "%s parsed", ips[i]);
                TAP_OK(cn_node_address_list_add(&l, CN_NODE_ADDRESS_INTERNAL_IP, ips[i]) == 1 && l.n == 1 &&
                               streq(l.items[0].address, want),
                       "%s kept as inet_ntop() writes it (%s)", ips[i], l.n == 1 ? l.items[0].address : "nothing");
        }
}

static void test_kubelet_hostname_kept(void) {
        _cleanup_node_address_list_ CnNodeAddressList cloud = {};
        _cleanup_free_ char *s = NULL;

        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5");
        TAP_EQ_INT(compute(&cloud, NULL, "worker-7", &s), 0, "compute without cloud hostname");
        TAP_EQ_STR(s, "InternalIP=10.0.0.5,Hostname=worker-7", "kubelet's Hostname is kept");
}

static void test_provided_node_ip(void) {
        _cleanup_node_address_list_ CnNodeAddressList cloud = {};
        _cleanup_free_ char *s = NULL, *s2 = NULL, *bad = NULL;
        _cleanup_node_address_list_ CnNodeAddressList out = {};
        CnNodeAddressInput in = { .cloud = &cloud, .provided_node_ip = "10.0.0.99" };

        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.6");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::6");
        add(&cloud, CN_NODE_ADDRESS_EXTERNAL_IP, "10.0.0.6"); /* same IP under two types */
        add(&cloud, CN_NODE_ADDRESS_HOSTNAME, "n");

        TAP_EQ_INT(compute(&cloud, "10.0.0.6", NULL, &s), 0, "single provided IP that matches");
        TAP_EQ_STR(s,
                   "InternalIP=10.0.0.6,ExternalIP=10.0.0.6,InternalIP=10.0.0.5,InternalIP=fd00::5,"
                   "InternalIP=fd00::6,Hostname=n",
                   "every entry with the provided IP goes first, rest keeps its order");

        TAP_EQ_INT(compute(&cloud, "fd00::6,10.0.0.5", NULL, &s2), 0, "dual-stack pair that matches");
        TAP_EQ_STR(s2,
                   "InternalIP=fd00::6,InternalIP=10.0.0.5,InternalIP=10.0.0.6,InternalIP=fd00::5,"
                   "ExternalIP=10.0.0.6,Hostname=n",
                   "pair entries first, in the annotation's order");

        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, &bad), -EADDRNOTAVAIL, "unmatched provided IP is refused");
        TAP_EQ_STR(bad, "10.0.0.99", "the unmatched IP is reported");
        TAP_EQ_INT(out.n, 0, "nothing is returned on refusal");

        in.provided_node_ip = "10.0.0.5,fd00::99";
        free(bad);
        bad = NULL;
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, &bad), -EADDRNOTAVAIL, "pair with one unmatched IP is refused");
        TAP_EQ_STR(bad, "fd00::99", "the unmatched member of the pair is reported");

        in.provided_node_ip = "10.0.0.5,10.0.0.6";
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, NULL), -EINVAL, "pair of one family is malformed");
        in.provided_node_ip = "10.0.0.5,fd00::5,10.0.0.6";
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, NULL), -EINVAL, "three IPs are malformed");
        in.provided_node_ip = "node-1";
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, NULL), -EINVAL, "a name is no provided IP");
        in.provided_node_ip = "FD00:0:0::6";
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, NULL), 0, "provided IPv6 matches in any spelling");
        TAP_EQ_STR(out.items[0].address, "fd00::6", "and goes first");
}

static bool only_v4_is_local(const char *ip, void *userdata) {
        return streq(ip, "10.0.0.5");
}

static void test_local_confirmation(void) {
        _cleanup_node_address_list_ CnNodeAddressList cloud = {}, out = {};
        CnNodeAddressInput in = { .cloud = &cloud, .local_check = only_v4_is_local };
        _cleanup_free_ char *s = NULL;

        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5");
        add(&cloud, CN_NODE_ADDRESS_INTERNAL_IP, "fd00::5");
        add(&cloud, CN_NODE_ADDRESS_EXTERNAL_IP, "203.0.113.5");
        TAP_EQ_INT(cn_node_addresses_compute(&in, &out, NULL), 0, "compute with local confirmation");
        s = fmt(&out);
        TAP_EQ_STR(s, "InternalIP=10.0.0.5,ExternalIP=203.0.113.5",
                   "InternalIP missing locally is withheld, ExternalIP (NAT) is not checked");
}

static void test_no_ip(void) {
        _cleanup_node_address_list_ CnNodeAddressList cloud = {};
        _cleanup_free_ char *s = NULL;

        add(&cloud, CN_NODE_ADDRESS_HOSTNAME, "n");
        TAP_EQ_INT(compute(&cloud, NULL, NULL, &s), -ENODATA, "only a hostname is not enough");
        TAP_EQ_INT(compute(NULL, NULL, "n", &s), -ENODATA, "no cloud addresses at all");
}

static void test_json(void) {
        _cleanup_node_address_list_ CnNodeAddressList l = {}, back = {};
        _cleanup_json_ json_object *j = NULL, *node = NULL;

        add(&l, CN_NODE_ADDRESS_INTERNAL_IP, "10.0.0.5");
        add(&l, CN_NODE_ADDRESS_HOSTNAME, "n");
        j = cn_node_address_list_to_json(&l);
        TAP_EQ_STR(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                   "[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},{\"type\":\"Hostname\",\"address\":\"n\"}]",
                   "list serializes as status.addresses");
        TAP_EQ_INT(cn_node_address_list_from_json(j, &back), 0, "status.addresses parses");
        TAP_OK(cn_node_address_list_equal(&l, &back), "round trip keeps the list");

        node = json_tokener_parse(
                "{\"metadata\":{\"annotations\":{\"alpha.kubernetes.io/provided-node-ip\":\"10.0.0.5\"}},"
                "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"1.2.3.4\"},"
                "{\"type\":\"Hostname\",\"address\":\"kubelet-host\"},{\"type\":\"Weird\",\"address\":\"x\"}]}}");
        TAP_EQ_STR(cn_node_get_provided_node_ip(node), "10.0.0.5", "annotation is read from the Node");
        TAP_EQ_STR(cn_node_get_kubelet_hostname(node), "kubelet-host", "kubelet Hostname is read from the Node");
        cn_node_address_list_done(&back);
        json_object *st, *addrs;
        json_object_object_get_ex(node, "status", &st);
        json_object_object_get_ex(st, "addresses", &addrs);
        TAP_EQ_INT(cn_node_address_list_from_json(addrs, &back), 0, "Node addresses parse");
        TAP_EQ_INT(back.n, 2, "unknown address types are skipped");
}

/* The Node is anyone's to write who may update its status: nulls and other types are skipped,
 * never dereferenced. */
static void test_json_hostile(void) {
        _cleanup_node_address_list_ CnNodeAddressList l = {};
        _cleanup_json_ json_object *addrs = json_tokener_parse(
                "[{\"type\":\"Hostname\",\"address\":null},{\"type\":null,\"address\":\"1.2.3.4\"},"
                "{\"type\":\"InternalIP\",\"address\":5},{\"type\":\"InternalIP\",\"address\":{}},7,null,"
                "{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]");
        _cleanup_json_ json_object *node = json_tokener_parse(
                "{\"status\":{\"addresses\":[{\"type\":\"Hostname\",\"address\":null},"
                "{\"type\":\"Hostname\",\"address\":[1]},{\"type\":\"Hostname\",\"address\":\"h\"}]}}");

        TAP_EQ_INT(cn_node_address_list_from_json(addrs, &l), 0, "addresses with null and non-string fields parse");
        TAP_OK(l.n == 1 && streq(l.items[0].address, "10.0.0.1"), "only the well-formed entry is kept");
        TAP_EQ_STR(cn_node_get_kubelet_hostname(node), "h", "a null or non-string Hostname is skipped");
}

int main(void) {
        test_order_and_dedup();
        test_ipv4_spelling();
        test_kubelet_hostname_kept();
        test_provided_node_ip();
        test_local_confirmation();
        test_no_ip();
        test_json();
        test_json_hostile();
        return tap_done();
}
