/* SPDX-License-Identifier: Apache-2.0 */
/* The Proxmox VE parsers on answers shaped as the PVE API documents them (status/current, config,
 * agent/network-get-interfaces) and on broken ones; the error classes of PVE's messages; the
 * certificate fingerprint setting; the machine spec's validation and defaults, and the NoCloud seed.
 * The requests run against tests/fake-cloud in
 * tests/integration/test-provider-lookup-proxmox.py. */
#include "json-util.h"
#include "provider-proxmox.h"
#include "string-util.h"
#include "tap.h"

static const char status_running[] = "{\"vmid\": 104, \"name\": \"worker-1\", \"status\": \"running\", \"qmpstatus\":"
                                     " \"running\", \"cpus\": 2, \"maxmem\": 2147483648, \"agent\": 1}";
static const char config[] = "{\"name\": \"worker-1\", \"cores\": 2, \"memory\": \"2048\", \"agent\": \"1\","
                             " \"smbios1\": \"uuid=5b0f7cc1-4d3b-4c53-9a3e-2f0c1a9e8a11\","
                             " \"ipconfig0\": \"ip=172.16.0.31/24,gw=172.16.0.1,ip6=fd00::31/64\","
                             " \"ipconfig1\": \"ip=dhcp,ip6=auto\"}";
static const char agent[] =
        "[{\"name\": \"lo\", \"ip-addresses\": [{\"ip-address-type\": \"ipv4\", \"ip-address\": \"127.0.0.1\","
        " \"prefix\": 8}]}, {\"name\": \"eth0\", \"hardware-address\": \"bc:24:11:00:00:01\", \"ip-addresses\": ["
        "{\"ip-address-type\": \"ipv4\", \"ip-address\": \"172.16.0.31\", \"prefix\": 24},"
        "{\"ip-address-type\": \"ipv6\", \"ip-address\": \"2001:db8::31\", \"prefix\": 64},"
        "{\"ip-address-type\": \"ipv6\", \"ip-address\": \"fe80::be24:11ff:fe00:1\", \"prefix\": 64}]},"
        "{\"name\": \"eth1\", \"ip-addresses\": [{\"ip-address-type\": \"ipv4\", \"ip-address\": \"198.51.100.7\","
        " \"prefix\": 24}, {\"ip-address-type\": \"ipv4\", \"ip-address\": \"169.254.3.4\", \"prefix\": 16}]}]";

static char *addresses(const CnProviderInstance *i) {
        _cleanup_json_ json_object *a = cn_node_address_list_to_json(&i->addresses);

        return strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
}

static void test_parse_vm(void) {
        _cleanup_json_ json_object *st = json_tokener_parse(status_running), *cfg = json_tokener_parse(config),
                                   *ag = json_tokener_parse(agent);
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        _cleanup_free_ char *a = NULL;

        TAP_EQ_INT(cn_provider_proxmox_parse_vm("cluster-1", "pve-node-1", 104, NULL, st, cfg, ag, &i), 0,
                   "a running VM with the agent's answer parses");
        TAP_EQ_STR(i->provider_id, "proxmox://cluster-1/104", "providerID proxmox://<region>/<vmid>");
        TAP_EQ_STR(i->instance_id, "104", "the vmid is the instance id");
        TAP_EQ_STR(i->instance_type, "2VCPU-2GB", "instance type as proxmox-cloud-controller-manager names it");
        TAP_EQ_STR(i->region, "cluster-1", "region: the cluster");
        TAP_EQ_STR(i->zone, "pve-node-1", "zone: the PVE node");
        TAP_OK(!i->shutdown, "running is not shut down");
        a = addresses(i);
        TAP_EQ_STR(a,
                   "[{\"type\":\"Hostname\",\"address\":\"worker-1\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"172.16.0.31\"},"
                   "{\"type\":\"ExternalIP\",\"address\":\"2001:db8::31\"},"
                   "{\"type\":\"ExternalIP\",\"address\":\"198.51.100.7\"}]",
                   "agent addresses: no loopback, no link-local; private internal, global external");
        i = cn_provider_instance_free(i);
        free(a);
        a = NULL;

        TAP_EQ_INT(cn_provider_proxmox_parse_vm("cluster-1", "pve-node-1", 104, "proxmox://5b0f7cc1-4d3b-4c53-9a3e-"
                                                "2f0c1a9e8a11", st, cfg, NULL, &i), 0, "without the agent it parses");
        TAP_EQ_STR(i->provider_id, "proxmox://5b0f7cc1-4d3b-4c53-9a3e-2f0c1a9e8a11", "a given providerID is kept");
        a = addresses(i);
        TAP_EQ_STR(a,
                   "[{\"type\":\"Hostname\",\"address\":\"worker-1\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"172.16.0.31\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"fd00::31\"}]",
                   "the static addresses of ipconfigN, not dhcp or auto");
        i = cn_provider_instance_free(i);
        free(a);
        a = NULL;

        json_object_object_add(st, "status", json_object_new_string("stopped"));
        TAP_EQ_INT(cn_provider_proxmox_parse_vm("c", "n", 104, NULL, st, cfg, NULL, &i), 0, "a stopped VM parses");
        TAP_OK(i && i->shutdown, "stopped is shut down");
}

static void test_parse_bad(void) {
        static const char *const bad_agent[] = {
                "{\"result\": []}",
                "[{\"name\": \"eth0\", \"ip-addresses\": [{\"ip-address\": \"10.0.0.1 x\"}]}]",
        };
        _cleanup_json_ json_object *st = json_tokener_parse(status_running), *cfg = json_tokener_parse(config),
                                   *nostatus = json_tokener_parse("{\"vmid\": 104}"),
                                   *badcfg = json_tokener_parse("{\"name\": \"w\", \"ipconfig0\": \"ip=300.1.1.1/24\"}");
        CnProviderInstance *i = NULL;

        for (size_t k = 0; k < ELEMENTSOF(bad_agent); k++) {
                _cleanup_json_ json_object *ag = json_tokener_parse(bad_agent[k]);

                TAP_EQ_INT(cn_provider_proxmox_parse_vm("c", "n", 104, NULL, st, cfg, ag, &i), -EBADMSG,
                           "a broken agent answer is refused");
                TAP_OK(!i, "and nothing is returned");
        }
        TAP_EQ_INT(cn_provider_proxmox_parse_vm("c", "n", 104, NULL, nostatus, cfg, NULL, &i), -EBADMSG,
                   "a status without state is refused");
        TAP_EQ_INT(cn_provider_proxmox_parse_vm("c", "n", 104, NULL, st, badcfg, NULL, &i), -EBADMSG,
                   "an ipconfig address that is no IP is refused");
        TAP_EQ_INT(cn_provider_proxmox_parse_vm("c", "", 104, NULL, st, cfg, NULL, &i), -EBADMSG,
                   "a VM without node is refused");
        TAP_OK(!i, "and nothing is returned");
}

static int classify(long status, const char *message) {
        _cleanup_json_ json_object *b = json_object_new_object();

        json_object_object_add(b, "data", NULL);
        json_object_object_add(b, "message", json_object_new_string(message));
        return cn_provider_proxmox_classify(status, b, status >= 500 ? -EAGAIN : -EINVAL);
}

static void test_classify(void) {
        TAP_EQ_INT(classify(500, "Configuration file 'nodes/pve1/qemu-server/104.conf' does not exist\n"), -ENOENT,
                   "a missing VM config is not-found");
        TAP_EQ_INT(classify(500, "VM is locked (backup)\n"), -EBUSY, "a locked VM is retryable (EBUSY)");
        TAP_EQ_INT(classify(500, "can't lock file '/var/lock/qemu-server/lock-104.conf' - got timeout\n"), -EBUSY,
                   "a lock timeout (busy storage or config) is retryable");
        TAP_EQ_INT(classify(596, "Connection timed out\n"), -EAGAIN, "596 is retryable");
        TAP_EQ_INT(classify(500, "unable to create VM 104: something broke\n"), -EAGAIN, "another 500 is retryable");
        TAP_EQ_INT(classify(501, "Method 'GET /nodes/x' not implemented\n"), -ENOTSUP, "501 is terminal");
        TAP_EQ_INT(classify(400, "Parameter verification failed.\n"), -EINVAL, "400 stays terminal");
        TAP_OK(cn_provider_error_class(-EBUSY) == CN_PROVIDER_RETRYABLE, "EBUSY is in the retryable class");
}

static void test_fingerprint(void) {
        uint8_t d[CN_HTTP_SHA256_SIZE];

        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint("AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:"
                                                         "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:8f", d),
                   0, "colon-separated SHA-256 fingerprint");
        TAP_OK(d[0] == 0xab && d[31] == 0x8f, "its bytes");
        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint("abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                                                         "0123456789", d),
                   0, "plain lower-case hex");
        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint("AB:CD", d), -EINVAL, "too short is refused");
        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint("abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                                                         "0123456789aa", d),
                   -EINVAL, "too long is refused");
        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint("zz", d), -EINVAL, "not hex is refused");
        TAP_EQ_INT(cn_provider_proxmox_parse_fingerprint(":ab", d), -EINVAL, "a leading colon is refused");
}

static void check_spec(const char *json, const char *reason_part, const char *what) {
        _cleanup_json_ json_object *spec = json_tokener_parse(json);
        _cleanup_free_ char *reason = NULL;
        int r = cn_provider_proxmox_validate(NULL, spec, &reason);

        if (!reason_part)
                TAP_EQ_INT(r, 0, what);
        else
                TAP_OK(r == -EINVAL && reason && strstr(reason, reason_part), "%s: %s", what, strna(reason));
}

static void test_spec(void) {
        _cleanup_json_ json_object *spec = json_tokener_parse("{\"sourceNode\": \"pve1\", \"templateID\": 9000}");
        _cleanup_json_ json_object *defaulted = NULL, *explicit_full = NULL;
        _cleanup_strv_free_ char **labels = NULL;
        bool full = false;

        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"target\": \"pve2\", \"numCores\": 4, "
                   "\"memoryMiB\": 8192, \"pool\": \"k8s\", \"storage\": \"local-lvm\", \"tags\": [\"k8s\", \"a.b+c\"]}",
                   NULL, "a whole spec is valid");
        check_spec("{\"templateID\": 9000}", "sourceNode is required", "sourceNode is required");
        check_spec("{\"sourceNode\": \"pve1\"}", "templateID is required", "templateID is required");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 99}", "templateID must be an integer from 100",
                   "a VMID below 100 is refused");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": \"9000\"}", "templateID must be an integer",
                   "a VMID as a string is refused");
        check_spec("{\"sourceNode\": \"pve1/../x\", \"templateID\": 9000}", "sourceNode must be a Proxmox VE name",
                   "a node name with a slash is refused");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"isoStorage\": \"\"}",
                   "isoStorage must be a Proxmox VE name", "an empty storage name is refused");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"tags\": [\"has space\"]}",
                   "tags[0] is not a Proxmox VE tag", "a tag with a space is refused");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"tags\": [\"cloudnode-machine-x\"]}",
                   "must not start with cloudnode-machine-", "the machine's own tag prefix is refused");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"full\": \"yes\"}", "full must be true or false",
                   "full must be a boolean");
        check_spec("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"numCores\": 0}", "numCores must be",
                   "zero cores are refused");
        check_spec("[]", "spec.proxmoxve is missing", "a spec that is no object is refused");

        TAP_EQ_INT(cn_provider_proxmox_add_defaults(NULL, spec, &defaulted), 0, "defaults added");
        TAP_OK(cn_json_get_bool(defaulted, &full, "full", NULL) >= 0 && full, "full clone by default");
        TAP_EQ_STR(cn_json_string(defaulted, "isoStorage", NULL), "local", "seed on local by default");
        TAP_OK(!json_object_object_get(spec, "full"), "the given spec is left alone");
        explicit_full = json_tokener_parse("{\"sourceNode\": \"pve1\", \"templateID\": 9000, \"full\": false}");
        json_object_put(TAKE_PTR(defaulted));
        TAP_OK(cn_provider_proxmox_add_defaults(NULL, explicit_full, &defaulted) == 0 &&
                       cn_json_get_bool(defaulted, &full, "full", NULL) >= 0 && !full,
               "a linked clone asked for stays one");
        TAP_OK(cn_provider_proxmox_metrics_labels(NULL, spec, &labels) == 0 && strv_length(labels) == 4 &&
                       streq(labels[0], "template") && streq(labels[1], "9000") && streq(labels[2], "zone") &&
                       streq(labels[3], "pve1"),
               "metrics labels: template and zone (the node)");
}

static void test_seed(void) {
        _cleanup_free_ void *iso = NULL;
        size_t size = 0;

        TAP_EQ_INT(cn_provider_proxmox_seed("6f1c2b3a-0000-4000-8000-000000000001", "m1", "#cloud-config\n", &iso, &size),
                   0, "a seed image is built");
        TAP_OK(iso && size > 16 * 2048 && memcmp((char *) iso + 16 * 2048 + 1, "CD001", 5) == 0 &&
                       memcmp((char *) iso + 16 * 2048 + 40, "cidata ", 7) == 0,
               "an ISO 9660 image with the volume id cidata");
        TAP_OK(memmem(iso, size, "\"instance-id\":\"6f1c2b3a-0000-4000-8000-000000000001\"", 51) != NULL,
               "meta-data names the instance by the machine's UID");
}

static void test_failure_domains(void) {
        _cleanup_json_ json_object *nodes = json_tokener_parse(
                "[{\"node\": \"pve1\", \"status\": \"online\", \"type\": \"node\"},"
                " {\"node\": \"pve2\", \"status\": \"offline\"}, {\"node\": \"pve3\"},"
                " {\"node\": \"pve4\", \"status\": \"online\"}]");
        _cleanup_json_ json_object *bad = json_tokener_parse("[{\"node\": \"../x\", \"status\": \"online\"}]");
        _cleanup_json_ json_object *list = NULL, *none = NULL;

        TAP_EQ_INT(cn_provider_proxmox_failure_domains_parse(nodes, "pve", &list), 0, "node list parsed");
        TAP_EQ_STR(json_object_to_json_string_ext(list, JSON_C_TO_STRING_PLAIN),
                   "[{\"name\":\"pve1\",\"controlPlane\":true,\"attributes\":{\"region\":\"pve\"}},"
                   "{\"name\":\"pve4\",\"controlPlane\":true,\"attributes\":{\"region\":\"pve\"}}]",
                   "the online nodes are the failure domains, with the region");
        TAP_EQ_INT(cn_provider_proxmox_failure_domains_parse(bad, "pve", &none), -EBADMSG,
                   "a node name that is no PVE name is refused");
        TAP_EQ_INT(cn_provider_proxmox_failure_domains_parse(NULL, "pve", &none), -EBADMSG, "no list is refused");
}

int main(void) {
        test_failure_domains();
        test_spec();
        test_seed();
        test_parse_vm();
        test_parse_bad();
        test_classify();
        test_fingerprint();
        return tap_done();
}
