/* SPDX-License-Identifier: Apache-2.0 */
/* The DigitalOcean droplet parser on the droplet of the API reference's "Retrieve an Existing
 * Droplet" example and on broken ones. The requests run against tests/fake-cloud in
 * tests/integration/test-provider-lookup-digitalocean.py. */
#include "json-util.h"
#include "provider-digitalocean.h"
#include "string-util.h"
#include "tap.h"

static const char droplet[] =
        "{\"id\": 3164444, \"name\": \"example.com\", \"memory\": 1024, \"vcpus\": 1, \"disk\": 25,"
        " \"locked\": false, \"status\": \"active\", \"size_slug\": \"s-1vcpu-1gb\","
        " \"networks\": {\"v4\": [{\"ip_address\": \"10.128.192.124\", \"netmask\": \"255.255.0.0\","
        " \"gateway\": \"nil\", \"type\": \"private\"}, {\"ip_address\": \"192.241.165.154\","
        " \"netmask\": \"255.255.255.0\", \"gateway\": \"192.241.165.1\", \"type\": \"public\"}],"
        " \"v6\": [{\"ip_address\": \"2604:a880:0:1010::18a:a001\", \"netmask\": 64,"
        " \"gateway\": \"2604:a880:0:1010::1\", \"type\": \"public\"}]},"
        " \"region\": {\"name\": \"New York 3\", \"slug\": \"nyc3\"}, \"tags\": [\"web\"]}";

static void test_parse(void) {
        _cleanup_json_ json_object *d = json_tokener_parse(droplet);
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        _cleanup_json_ json_object *a = NULL;

        TAP_EQ_INT(cn_provider_digitalocean_parse_droplet(d, &i), 0, "droplet parses");
        TAP_EQ_STR(i->provider_id, "digitalocean://3164444", "providerID digitalocean://<id>");
        TAP_EQ_STR(i->instance_type, "s-1vcpu-1gb", "size slug is the instance type");
        TAP_EQ_STR(i->region, "nyc3", "region slug");
        TAP_EQ_STR(i->zone, "nyc3", "the region slug is the zone too");
        TAP_OK(!i->shutdown, "active is not shut down");
        a = cn_node_address_list_to_json(&i->addresses);
        TAP_EQ_STR(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN),
                   "[{\"type\":\"Hostname\",\"address\":\"example.com\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"10.128.192.124\"},"
                   "{\"type\":\"ExternalIP\",\"address\":\"192.241.165.154\"},"
                   "{\"type\":\"ExternalIP\",\"address\":\"2604:a880:0:1010::18a:a001\"}]",
                   "name, private v4, public v4 and v6 as digitalocean-cloud-controller-manager");
        cn_provider_instance_free(i);
        i = NULL;
        json_object_object_add(d, "status", json_object_new_string("off"));
        TAP_EQ_INT(cn_provider_digitalocean_parse_droplet(d, &i), 0, "off droplet parses");
        TAP_OK(i && i->shutdown, "off is shut down");
}

static void test_bad(void) {
        static const char *const bad[] = {
                "{\"id\": \"3164444\", \"name\": \"x\", \"status\": \"active\"}",
                "{\"id\": -1, \"name\": \"x\", \"status\": \"active\"}",
                "{\"id\": 1, \"status\": \"active\"}",
                "{\"id\": 1, \"name\": \"x\"}",
                "{\"id\": 1, \"name\": \"x\", \"status\": \"active\", \"networks\": {\"v4\": [{\"ip_address\":"
                " \"10.0.0.1 x\", \"type\": \"private\"}]}}",
        };

        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                _cleanup_json_ json_object *d = json_tokener_parse(bad[k]);
                _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;

                TAP_EQ_INT(cn_provider_digitalocean_parse_droplet(d, &i), -EBADMSG, "a broken droplet is refused");
                TAP_OK(!i, "and nothing is returned");
        }
}

int main(void) {
        test_parse();
        test_bad();
        return tap_done();
}
