/* SPDX-License-Identifier: Apache-2.0 */
/* Platform parsers on the captured documents in $CN_FIXTURES/metadata (tests/data/fixtures), on
 * documents written here from the providers' public documentation, and on hostile documents. */
#include <fcntl.h>
#include <sys/stat.h>

#include "metadata-source.h"
#include "tap.h"

static const char *fixtures;

static bool have_fixtures(const char *sub) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (!fixtures)
                return false;
        if (asprintf(&p, "%s/metadata/%s", fixtures, sub) < 0)
                abort();
        return stat(p, &st) == 0;
}

static char *slurp(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t size = 0;

        if (!f)
                return NULL;
        buf = malloc(CN_METADATA_DOCUMENT_SIZE_MAX);
        size = fread(buf, 1, CN_METADATA_DOCUMENT_SIZE_MAX, f);
        fclose(f);
        *ret_size = size;
        return buf;
}

/* Adds the fixture file at rel (under $CN_FIXTURES/metadata) as document path. */
static void put_fixture(CnMetadataDocs *d, const char *path, const char *rel) {
        _cleanup_free_ char *p = NULL, *data = NULL;
        size_t size;

        if (asprintf(&p, "%s/metadata/%s", fixtures, rel) < 0 || !(data = slurp(p, &size)))
                abort();
        if (cn_metadata_docs_put(d, path, data, size) < 0)
                abort();
}

static void put(CnMetadataDocs *d, const char *path, const char *data) {
        if (cn_metadata_docs_put(d, path, data, strlen(data)) < 0)
                abort();
}

static int parse(const char *platform, CnMetadataDocs *d, CnInstanceMetadata **ret) {
        int r = cn_metadata_parse(cn_metadata_source_find(platform), d, ret);
        cn_metadata_docs_done(d);
        return r;
}

static const char *first(char **l) {
        return l ? l[0] : NULL;
}

static void test_aws_fixture(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        _cleanup_free_ char *dir = NULL;
        CnMetadataDocs d = {};

        if (!have_fixtures("aws")) {
                tap_ok(0, "aws fixtures present under %s/metadata", fixtures);
                return;
        }
        if (asprintf(&dir, "%s/metadata/aws", fixtures) < 0)
                abort();
        TAP_EQ_INT(cn_metadata_docs_read_dir(&d, -EBADF, dir, cn_metadata_source_aws.keys), 0,
                   "aws: fixture tree read with the source's own key paths");
        TAP_EQ_INT(parse("aws", &d, &m), 0, "aws: fixture parses");
        if (!m)
                return;
        TAP_EQ_STR(m->instance_id, "test-instance-id", "aws: instance id");
        TAP_EQ_STR(m->instance_type, "test-instance-type", "aws: instance type");
        TAP_EQ_STR(m->zone, "test-availability-zone", "aws: zone");
        TAP_EQ_STR(m->region, "test-region", "aws: region from the identity document");
        TAP_EQ_STR(m->hostname, "test-hostname", "aws: hostname");
        TAP_EQ_STR(m->provider_id, "aws:///test-availability-zone/test-instance-id", "aws: providerID form");
        TAP_EQ_STR(first(m->extra_labels), "topology.k8s.aws/zone-id=test-availability-zone-id", "aws: zone-id label");
        /* The fixture's addresses are placeholders such as "test-ipv4-local": no node address. */
        TAP_OK(!m->ipv4_private && !m->ipv4_public && !m->ipv6, "aws: placeholder addresses are not addresses");
}

static void test_aws_documented(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        put(&d, "2021-01-03/meta-data/instance-id", "i-0abcdef1234567890\n");
        put(&d, "2021-01-03/meta-data/instance-type", "m5.large");
        put(&d, "2021-01-03/meta-data/placement/availability-zone", "us-west-2b");
        put(&d, "2021-01-03/meta-data/local-ipv4", "10.0.1.23");
        put(&d, "2021-01-03/meta-data/public-ipv4", "203.0.113.25");
        put(&d, "2021-01-03/meta-data/ipv6", "2600:1f14:abc:1200::1");
        TAP_EQ_INT(parse("aws", &d, &m), 0, "aws: documented keys parse");
        if (!m)
                return;
        TAP_EQ_STR(m->region, "us-west-2", "aws: region derived from the zone without identity document");
        TAP_EQ_STR(m->provider_id, "aws:///us-west-2b/i-0abcdef1234567890", "aws: providerID");
        TAP_EQ_STR(first(m->ipv4_private), "10.0.1.23", "aws: private address");
        TAP_EQ_STR(first(m->ipv4_public), "203.0.113.25", "aws: public address");
        TAP_EQ_STR(first(m->ipv6), "2600:1f14:abc:1200::1", "aws: ipv6");
}

static void test_openstack_fixtures(void) {
        if (!have_fixtures("openstack-config-drive")) {
                tap_ok(0, "openstack fixtures present under %s/metadata", fixtures);
                return;
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                CnMetadataDocs d = {};

                put_fixture(&d, "openstack/latest/meta_data.json", "openstack-config-drive/openstack/meta_data.json");
                put_fixture(&d, "ec2/latest/meta-data.json", "openstack-config-drive/ec2/meta-data.json");
                TAP_EQ_INT(parse("openstack", &d, &m), 0, "openstack: config drive fixture parses");
                TAP_EQ_STR(m ? m->provider_id : NULL, "openstack:///b3c7f4de-da0b-44ae-a42c-fa3806b61d7f",
                           "openstack: providerID form");
                TAP_EQ_STR(m ? m->hostname : NULL, "abai-fcos-afterburn-test", "openstack: hostname");
                TAP_EQ_STR(m ? m->zone : NULL, "nova", "openstack: availability zone");
                TAP_EQ_STR(m ? m->instance_type : NULL, "m1.small", "openstack: flavor from the ec2 document");
                TAP_EQ_STR(m ? first(m->ipv4_private) : NULL, "10.0.151.35", "openstack: local-ipv4");
                TAP_OK(m && !m->ipv4_public, "openstack: empty public-ipv4 is absent");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                CnMetadataDocs d = {};

                put_fixture(&d, "openstack/latest/meta_data.json",
                            "openstack-metadata/openstack/2012-08-10/meta_data.json");
                TAP_EQ_INT(parse("openstack", &d, &m), 0, "openstack: metadata service fixture parses");
                TAP_EQ_STR(m ? m->instance_id : NULL, "99dcf33b-6eb5-4acf-9abb-d81723e0c949", "openstack: uuid");
                TAP_EQ_STR(m ? m->hostname : NULL, "mule", "openstack: hostname (service)");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                CnMetadataDocs d = {};

                put_fixture(&d, "openstack/latest/meta_data.json",
                            "openstack-config-drive/openstack-config-drive2/openstack/latest/meta_data.json");
                TAP_EQ_INT(parse("openstack", &d, &m), 0, "openstack: uuid-only document parses");
                TAP_OK(m && !m->hostname && !m->zone, "openstack: absent keys stay absent");
        }
        TAP_OK(have_fixtures("kubevirt"), "kubevirt fixtures present under %s/metadata", fixtures);
        if (have_fixtures("kubevirt")) {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *dir = NULL;
                CnMetadataDocs d = {};

                if (asprintf(&dir, "%s/metadata/kubevirt/config_drive", fixtures) < 0)
                        abort();
                TAP_EQ_INT(cn_metadata_docs_read_dir(&d, -EBADF, dir, cn_metadata_source_openstack.drive_keys), 0,
                           "openstack: config drive tree read with the drive key paths");
                TAP_EQ_INT(parse("openstack", &d, &m), 0, "openstack: kubevirt config drive parses");
                TAP_EQ_STR(m ? m->instance_type : NULL, "some_type", "openstack: instance_type in meta_data.json");
        }
}

static void test_gcp(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        /* Keys the fixture does not carry, written from the metadata server documentation. */
        put(&d, "computeMetadata/v1/instance/id", "4520031799277581759");
        put(&d, "computeMetadata/v1/instance/name", "node-1");
        put(&d, "computeMetadata/v1/instance/zone", "projects/123456789/zones/europe-west1-b");
        put(&d, "computeMetadata/v1/project/project-id", "my-project");
        put(&d, "computeMetadata/v1/instance/network-interfaces/0/ipv6s", "2600:1900:4000::1\n2600:1900:4000::2\n");
        TAP_OK(have_fixtures("gcp"), "gcp fixtures present under %s/metadata", fixtures);
        if (have_fixtures("gcp")) {
                put_fixture(&d, "computeMetadata/v1/instance/hostname", "gcp/computeMetadata/v1/instance/hostname");
                put_fixture(&d, "computeMetadata/v1/instance/machine-type",
                            "gcp/computeMetadata/v1/instance/machine-type");
        } else {
                put(&d, "computeMetadata/v1/instance/hostname", "test-hostname");
                put(&d, "computeMetadata/v1/instance/machine-type", "projects/1/machineTypes/test-machine-type");
        }
        put(&d, "computeMetadata/v1/instance/network-interfaces/0/ip", "10.132.0.5");
        TAP_EQ_INT(parse("gcp", &d, &m), 0, "gcp: parses");
        if (!m)
                return;
        TAP_EQ_STR(m->provider_id, "gce://my-project/europe-west1-b/node-1", "gcp: providerID form");
        TAP_EQ_STR(m->zone, "europe-west1-b", "gcp: zone from its resource path");
        TAP_EQ_STR(m->region, "europe-west1", "gcp: region from the zone");
        TAP_EQ_STR(m->hostname, "test-hostname", "gcp: hostname (fixture)");
        TAP_EQ_STR(m->instance_type, "test-machine-type", "gcp: machine type (fixture)");
        TAP_EQ_INT(m->ipv6 ? (long long) (m->ipv6[1] ? 2 : 1) : 0, 2, "gcp: one IPv6 address per line");
}

static void test_gcp_slash_in_name(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        put(&d, "computeMetadata/v1/instance/id", "1");
        put(&d, "computeMetadata/v1/instance/name", "a/../b");
        put(&d, "computeMetadata/v1/instance/zone", "projects/1/zones/us-east1-b");
        put(&d, "computeMetadata/v1/project/project-id", "p");
        TAP_EQ_INT(parse("gcp", &d, &m), -EBADMSG, "gcp: '/' in the name cannot reshape the providerID");
}

static const char azure_doc[] =
        "{\"compute\":{\"location\":\"westeurope\",\"name\":\"vm-1\",\"osProfile\":{\"computerName\":\"vm-1-host\"},"
        "\"platformFaultDomain\":\"0\",\"resourceId\":\"/subscriptions/8d10da13-8125-4ba9-a717-bf7490507b3d/"
        "resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1\",\"vmId\":"
        "\"02aab8a4-74ef-476e-8182-f6d2ba4166a6\",\"vmSize\":\"Standard_D2s_v3\",\"zone\":\"2\"},"
        "\"network\":{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.1.0.4\","
        "\"publicIpAddress\":\"20.0.0.1\"}],\"subnet\":[]},\"ipv6\":{\"ipAddress\":[{\"privateIpAddress\":"
        "\"fd00::4\"}]},\"macAddress\":\"000D3AF806EC\"}]}}";

static void test_azure(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        put(&d, "metadata/instance?api-version=2021-02-01", azure_doc);
        TAP_EQ_INT(parse("azure", &d, &m), 0, "azure: instance document parses");
        if (!m)
                return;
        TAP_EQ_STR(m->provider_id,
                   "azure:///subscriptions/8d10da13-8125-4ba9-a717-bf7490507b3d/resourceGroups/rg/providers/"
                   "Microsoft.Compute/virtualMachines/vm-1",
                   "azure: providerID form");
        TAP_EQ_STR(m->zone, "westeurope-2", "azure: zone as <location>-<zone>");
        TAP_EQ_STR(m->region, "westeurope", "azure: region");
        TAP_EQ_STR(m->instance_type, "Standard_D2s_v3", "azure: vmSize");
        TAP_EQ_STR(m->hostname, "vm-1-host", "azure: computer name");
        TAP_EQ_STR(first(m->ipv4_public), "20.0.0.1", "azure: public address");
        TAP_EQ_STR(first(m->ipv6), "fd00::4", "azure: ipv6");
}

/* An IMDS instance document with these compute members (and a location and vmId) parsed. */
static int parse_azure_compute(const char *members, CnInstanceMetadata **ret) {
        _cleanup_free_ char *doc = NULL;
        CnMetadataDocs d = {};

        if (asprintf(&doc, "{\"compute\":{\"location\":\"westeurope\",\"vmId\":\"02aab8a4\",%s}}", members) < 0)
                abort();
        put(&d, "metadata/instance?api-version=2021-02-01", doc);
        return parse("azure", &d, ret);
}

/* Older api-versions carry no compute.resourceId: composed as cloud-provider-azure does. */
static void test_azure_no_resource_id(void) {
        static const struct {
                const char *compute, *want, *name;
        } cases[] = {
                { "\"name\":\"vm-1\",\"resourceGroupName\":\"My-RG\",\"subscriptionId\":\"sub-1\"",
                  "azure:///subscriptions/sub-1/resourceGroups/my-rg/providers/Microsoft.Compute/virtualMachines/vm-1",
                  "azure without resourceId: standalone VM, resource group in lower case" },
                { "\"name\":\"k8s_pool_7\",\"resourceGroupName\":\"rg\",\"subscriptionId\":\"sub-1\","
                  "\"vmScaleSetName\":\"k8s_pool\"",
                  "azure:///subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/"
                  "virtualMachineScaleSets/k8s_pool/virtualMachines/7",
                  "azure without resourceId: scale-set VM, instance id after the last '_'" },
                { "\"name\":\"flex-vm-abc\",\"resourceGroupName\":\"rg\",\"subscriptionId\":\"sub-1\","
                  "\"vmScaleSetName\":\"flex\"",
                  "azure:///subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/flex-vm-abc",
                  "azure without resourceId: flexible scale-set VM keeps the virtualMachines form" },
        };
        static const struct {
                const char *compute, *name;
        } hostile[] = {
                { "\"name\":\"vm-1\",\"resourceGroupName\":\"rg/../x\",\"subscriptionId\":\"sub-1\"",
                  "azure without resourceId: '/' in the resource group refused" },
                { "\"name\":\"a/b\",\"resourceGroupName\":\"rg\",\"subscriptionId\":\"sub-1\"",
                  "azure without resourceId: '/' in the name refused" },
                { "\"name\":\"vm-1\",\"resourceGroupName\":\"rg\"",
                  "azure without resourceId: no subscriptionId refused" },
                { "\"name\":\"vm 1\",\"resourceGroupName\":\"rg\",\"subscriptionId\":\"sub-1\"",
                  "azure without resourceId: a space in the name refused" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;

                TAP_EQ_INT(parse_azure_compute(cases[i].compute, &m), 0, "azure without resourceId: the document parses");
                TAP_EQ_STR(m ? m->provider_id : NULL, cases[i].want, cases[i].name);
        }
        for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;

                TAP_EQ_INT(parse_azure_compute(hostile[i].compute, &m), -EBADMSG, hostile[i].name);
        }
}

static void test_digitalocean(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        put(&d, "metadata/v1.json",
            "{\"droplet_id\":2756294,\"hostname\":\"sample-droplet\",\"region\":\"nyc3\",\"interfaces\":{"
            "\"public\":[{\"ipv4\":{\"ip_address\":\"104.131.20.105\",\"netmask\":\"255.255.192.0\"},"
            "\"ipv6\":{\"ip_address\":\"2604:A880:0800:0010:0000:0000:017D:2001\",\"cidr\":64},\"type\":\"public\"}],"
            "\"private\":[{\"ipv4\":{\"ip_address\":\"10.132.255.113\"},\"type\":\"private\"}]}}");
        TAP_EQ_INT(parse("digitalocean", &d, &m), 0, "digitalocean: document parses");
        if (!m)
                return;
        TAP_EQ_STR(m->provider_id, "digitalocean://2756294", "digitalocean: providerID form");
        TAP_EQ_STR(first(m->ipv4_private), "10.132.255.113", "digitalocean: private address");
        TAP_EQ_STR(first(m->ipv6), "2604:a880:800:10::17d:2001", "digitalocean: ipv6 in canonical form");
}

static void test_hetzner(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        TAP_OK(have_fixtures("hetzner"), "hetzner fixtures present under %s/metadata", fixtures);
        if (have_fixtures("hetzner")) {
                put_fixture(&d, "hetzner/v1/metadata", "hetzner/metadata.yaml");
                put_fixture(&d, "hetzner/v1/metadata/private-networks", "hetzner/private-networks.yaml");
        } else
                put(&d, "hetzner/v1/metadata",
                    "availability-zone: hel1-dc2\nhostname: my-server\ninstance-id: 42\nlocal-ipv4: ''\n"
                    "public-ipv4: 1.2.3.4\nregion: eu-central\n");
        TAP_EQ_INT(parse("hetzner", &d, &m), 0, "hetzner: YAML metadata parses");
        if (!m)
                return;
        TAP_EQ_STR(m->instance_id, "42", "hetzner: integer instance id as text");
        TAP_EQ_STR(m->provider_id, "hcloud://42", "hetzner: providerID form");
        TAP_EQ_STR(m->zone, "hel1-dc2", "hetzner: zone is the datacenter");
        TAP_EQ_STR(m->region, "hel1", "hetzner: region is the location");
        TAP_EQ_STR(first(m->ipv4_public), "1.2.3.4", "hetzner: public IPv4");
        TAP_EQ_STR(first(m->extra_labels), "hcloud.cloudnode.io/network-zone=eu-central", "hetzner: network zone label");
        TAP_OK(have_fixtures("hetzner"), "hetzner fixtures present under %s/metadata", fixtures);
        if (have_fixtures("hetzner")) {
                TAP_OK(m->ipv4_private && streq(m->ipv4_private[0], "10.0.0.2") && m->ipv4_private[1] &&
                               streq(m->ipv4_private[1], "10.128.0.2"),
                       "hetzner: private networks in order");
                TAP_EQ_STR(first(m->ipv6), "a00:a0:a000:a000::1", "hetzner: IPv6 from network-config, canonical");
        }
}

static void test_hetzner_yaml_attack(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
        CnMetadataDocs d = {};

        put(&d, "hetzner/v1/metadata", "a: &x [1]\nb: *x\ninstance-id: 1\n");
        TAP_EQ_INT(parse("hetzner", &d, &m), -EBADMSG, "hetzner: YAML aliases rejected");
}

static void test_proxmoxve(void) {
        static const char *const cases[] = { "static", "dhcp", "static-no-gateway", "invalid-user-data" };

        if (!have_fixtures("proxmoxve")) {
                tap_ok(0, "proxmoxve fixtures present under %s/metadata", fixtures);
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *dir = NULL;
                CnMetadataDocs d = {};

                if (asprintf(&dir, "%s/metadata/proxmoxve/%s", fixtures, cases[i]) < 0)
                        abort();
                TAP_EQ_INT(cn_metadata_docs_read_dir(&d, -EBADF, dir, cn_metadata_source_proxmoxve.drive_keys), 0,
                           "proxmoxve: drive read");
                TAP_EQ_INT(parse("proxmoxve", &d, &m), 0, "proxmoxve: fixture parses");
                TAP_OK(m && m->instance_id && !m->provider_id,
                       "proxmoxve: no providerID without the SMBIOS UUID (the instance-id names nothing the API finds)");
                if (streq(cases[i], "static")) {
                        TAP_EQ_STR(m ? m->hostname : NULL, "dummy.local.com", "proxmoxve: fqdn from #cloud-config");
                        TAP_OK(m && m->ipv4_private && streq(m->ipv4_private[0], "192.168.1.1") &&
                                       m->ipv4_private[1] && streq(m->ipv4_private[1], "192.168.42.1"),
                               "proxmoxve: static v1 addresses of both interfaces");
                        TAP_EQ_STR(m ? first(m->ipv6) : NULL, "2001:db8:85a3::8a2e:370:0", "proxmoxve: static6 address");
                }
                if (streq(cases[i], "invalid-user-data"))
                        TAP_OK(m && !m->hostname, "proxmoxve: broken user-data gives no hostname, no error");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                CnMetadataDocs d = {};

                put(&d, "meta-data", "instance-id: abc\n");
                put(&d, "sys/class/dmi/id/product_uuid", "4C4C4544-0042-3510-8052-B4C04F4E3732\n");
                TAP_EQ_INT(parse("proxmoxve", &d, &m), 0, "proxmoxve: with DMI uuid");
                TAP_EQ_STR(m ? m->provider_id : NULL, "proxmox://4c4c4544-0042-3510-8052-b4c04f4e3732",
                           "proxmoxve: providerID from the SMBIOS uuid, lower case");
        }
        for (size_t i = 0; i < 2; i++) {
                static const char *const not_uuid[] = { "Not Settable\n", "00000000-0000-0000-0000-000000000000\n" };
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                CnMetadataDocs d = {};

                put(&d, "meta-data", "instance-id: abc\n");
                put(&d, "sys/class/dmi/id/product_uuid", not_uuid[i]);
                TAP_EQ_INT(parse("proxmoxve", &d, &m), 0, "proxmoxve: DMI without a usable uuid parses");
                TAP_OK(m && !m->provider_id, "proxmoxve: and gives no providerID (DMI value %zu)", i);
        }
}

static void test_file(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL, *m2 = NULL, *m3 = NULL;
        CnMetadataDocs d = {};

        put(&d, "metadata.yaml",
            "instanceID: node-17\nproviderID: baremetal://node-17\nregion: dc1\nzone: dc1-row3\n"
            "hostname: node-17.example.net\nipv4Private: [10.0.0.17, 10.0.1.17]\nipv4Public: 192.0.2.17\n"
            "labels: {example.com/rack: r3}\n");
        TAP_EQ_INT(parse("file", &d, &m), 0, "file: document parses");
        TAP_EQ_STR(m ? m->provider_id : NULL, "baremetal://node-17", "file: providerID as given");
        TAP_OK(m && m->ipv4_private && m->ipv4_private[1] && streq(m->ipv4_private[1], "10.0.1.17"),
               "file: address list");
        TAP_EQ_STR(m ? first(m->extra_labels) : NULL, "example.com/rack=r3", "file: labels");

        put(&d, "metadata.yaml", "instanceID: x\nipv4Private: [not-an-address]\n");
        TAP_EQ_INT(parse("file", &d, &m2), -EBADMSG, "file: a wrong address is an error");
        put(&d, "metadata.yaml", "instanceID: x\ninstanceId: y\n");
        TAP_EQ_INT(parse("file", &d, &m3), -EBADMSG, "file: an unknown key is an error");
}

static void test_hostile(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL;
        CnMetadataDocs d = {};

        put(&d, "2021-01-03/meta-data/instance-id", "i-1");
        put(&d, "2021-01-03/meta-data/placement/availability-zone", "us-east-1a");
        put(&d, "2021-01-03/meta-data/hostname", "evil\nKUBELET_PROVIDERID=x");
        TAP_EQ_INT(parse("aws", &d, &m1), -EBADMSG, "hostile: newline inside a value rejected");

        put(&d, "2021-01-03/meta-data/instance-id", "i-1");
        put(&d, "2021-01-03/meta-data/placement/availability-zone", "us-east-1a");
        put(&d, "2021-01-03/meta-data/instance-type", "m5\xfe\xff");
        TAP_EQ_INT(parse("aws", &d, &m2), -EBADMSG, "hostile: non-UTF-8 rejected");

        put(&d, "2021-01-03/meta-data/instance-id", "i-1");
        put(&d, "2021-01-03/meta-data/placement/availability-zone", "us-east-1a");
        if (cn_metadata_docs_put(&d, "2021-01-03/meta-data/hostname", "a\0b", 3) < 0)
                abort();
        TAP_EQ_INT(parse("aws", &d, &m3), -EBADMSG, "hostile: embedded NUL rejected");

        put(&d, "metadata/instance?api-version=2021-02-01", "{\"compute\": {\"vmId\": \"x\"");
        TAP_EQ_INT(parse("azure", &d, &m4), -EBADMSG, "hostile: truncated JSON rejected");
}

static void test_size_cap(void) {
        char dir[] = "/tmp/cn-test-metadata-XXXXXX";
        _cleanup_free_ char *big = NULL, *path = NULL;
        static const CnMetadataKey keys[] = { { "doc" }, {} };
        CnMetadataDocs d = {};
        FILE *f;

        if (!mkdtemp(dir) || asprintf(&path, "%s/doc", dir) < 0 || !(f = fopen(path, "we")))
                abort();
        big = calloc(1, CN_METADATA_SIZE_MAX + 1);
        memset(big, 'a', CN_METADATA_SIZE_MAX + 1);
        fwrite(big, 1, CN_METADATA_SIZE_MAX + 1, f);
        fclose(f);
        TAP_EQ_INT(cn_metadata_docs_read_dir(&d, -EBADF, dir, keys), -EFBIG, "size cap: oversized file rejected");
        cn_metadata_docs_done(&d);
        if (truncate(path, CN_METADATA_SIZE_MAX) < 0)
                abort();
        TAP_EQ_INT(cn_metadata_docs_read_dir(&d, -EBADF, dir, keys), 0, "size cap: file at the cap accepted");
        cn_metadata_docs_done(&d);
        unlink(path);
        rmdir(dir);
}

int main(void) {
        fixtures = getenv("CN_FIXTURES") ?: "tests/data/fixtures";
        test_aws_fixture();
        test_aws_documented();
        test_openstack_fixtures();
        test_gcp();
        test_gcp_slash_in_name();
        test_azure();
        test_azure_no_resource_id();
        test_digitalocean();
        test_hetzner();
        test_hetzner_yaml_attack();
        test_proxmoxve();
        test_file();
        test_hostile();
        test_size_cap();
        return tap_done();
}
