/* SPDX-License-Identifier: Apache-2.0 */
/* The AWS provider's pure parts: Signature Version 4 against the example of the AWS General
 * Reference, the XML reader on EC2 answers and hostile documents, providerIDs, the instance
 * parser (addresses as cloud-provider-aws orders them, states) and instance role credentials.
 * The requests run against tests/fake-cloud in tests/integration/test-provider-lookup-aws.py. */
#include "json-util.h"
#include "provider-aws.h"
#include "string-util.h"
#include "tap.h"
#include "xml-util.h"

static void test_sigv4(void) {
        /* "Signature Version 4 signing process" example: IAM ListUsers, 20150830T123600Z. */
        AwsCredentials creds = {
                .access_key_id = (char *) "AKIDEXAMPLE",
                .secret_access_key = (char *) "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        };
        AwsSignInput in = {
                .method = "GET",
                .host = "iam.amazonaws.com",
                .path = "/",
                .query = "Version=2010-05-08&Action=ListUsers",
                .content_type = "application/x-www-form-urlencoded; charset=utf-8",
                .region = "us-east-1",
                .service = "iam",
                .now = 1440938160ULL * USEC_PER_SEC,
        };
        _cleanup_free_ char *date = NULL, *auth = NULL, *date2 = NULL, *auth2 = NULL;

        TAP_EQ_INT(cn_aws_sign(&in, &creds, &date, &auth), 0, "sigv4: signs");
        TAP_EQ_STR(date, "20150830T123600Z", "sigv4: X-Amz-Date");
        TAP_EQ_STR(auth,
                   "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
                   "SignedHeaders=content-type;host;x-amz-date, "
                   "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
                   "sigv4: the documented signature (query parameters sorted)");
        TAP_OK(!strstr(auth, creds.secret_access_key), "sigv4: the secret is not in the header");

        creds.session_token = (char *) "session";
        TAP_EQ_INT(cn_aws_sign(&in, &creds, &date2, &auth2), 0, "sigv4: signs with a session token");
        TAP_OK(strstr(auth2, "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,") != NULL,
               "sigv4: the session token is a signed header");
        creds.session_token = NULL;

        in.region = NULL;
        free(date), free(auth);
        date = auth = NULL;
        TAP_EQ_INT(cn_aws_sign(&in, &creds, &date, &auth), -EINVAL, "sigv4: no region is refused");
}

static void test_url(void) {
        static const struct {
                const char *url, *host, *path;
        } ok[] = {
                { "https://ec2.us-east-1.amazonaws.com/", "ec2.us-east-1.amazonaws.com", "/" },
                { "https://ec2.example.com:443", "ec2.example.com", "/" },
                { "http://127.0.0.1:8080/ec2?x=1", "127.0.0.1:8080", "/ec2" },
                { "http://[::1]:80/", "[::1]", "/" },
        };

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *host = NULL, *path = NULL;

                TAP_EQ_INT(cn_aws_url_host_path(ok[i].url, &host, &path), 0, "url: splits");
                TAP_EQ_STR(host, ok[i].host, "url: Host as the HTTP client sends it");
                TAP_EQ_STR(path, ok[i].path, "url: path");
        }
        {
                _cleanup_free_ char *host = NULL, *path = NULL;

                TAP_EQ_INT(cn_aws_url_host_path("ftp://x/", &host, &path), -EINVAL, "url: other schemes refused");
                TAP_EQ_INT(cn_aws_url_host_path("https://user@x/", &host, &path), -EINVAL, "url: userinfo refused");
        }
}

static void test_provider_id(void) {
        static const struct {
                const char *id, *instance, *zone;
        } ok[] = {
                { "aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0", "us-east-1a" },
                { "aws:////i-0123456789abcdef0", "i-0123456789abcdef0", NULL },
                { "i-0abc1234", "i-0abc1234", NULL },
        };
        static const char *const bad[] = { "aws://us-east-1a/i-01", "aws:///a/b/i-01", "aws:///us-east-1a/",
                                           "aws:///us-east-1a/i-XYZ", "hcloud://42", "i-", "" };

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *instance = NULL, *zone = NULL;

                TAP_EQ_INT(cn_provider_aws_parse_provider_id(ok[i].id, &instance, &zone), 0, "providerID: parses");
                TAP_EQ_STR(instance, ok[i].instance, "providerID: instance id");
                TAP_EQ_STR(zone, ok[i].zone, "providerID: zone");
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *instance = NULL, *zone = NULL;

                TAP_EQ_INT(cn_provider_aws_parse_provider_id(bad[i], &instance, &zone), -EINVAL,
                           "providerID: malformed one refused");
        }
}

/* Shaped as the DescribeInstances example of the EC2 API reference. */
static const char describe[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n"
        "  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>\n"
        "  <reservationSet>\n"
        "    <item>\n"
        "      <reservationId>r-1234567890abcdef0</reservationId>\n"
        "      <ownerId>123456789012</ownerId>\n"
        "      <groupSet/>\n"
        "      <instancesSet>\n"
        "        <item>\n"
        "          <instanceId>i-1234567890abcdef0</instanceId>\n"
        "          <instanceState><code>16</code><name>running</name></instanceState>\n"
        "          <privateDnsName>ip-192-168-1-88.eu-west-1.compute.internal</privateDnsName>\n"
        "          <dnsName>ec2-54-194-252-215.eu-west-1.compute.amazonaws.com</dnsName>\n"
        "          <instanceType>t2.micro</instanceType>\n"
        "          <placement><availabilityZone>eu-west-1c</availabilityZone><tenancy>default</tenancy></placement>\n"
        "          <privateIpAddress>192.168.1.88</privateIpAddress>\n"
        "          <ipAddress>54.194.252.215</ipAddress>\n"
        "          <tagSet><item><key>Name</key><value>a &amp; b</value></item></tagSet>\n"
        "          <networkInterfaceSet>\n"
        "            <item>\n"
        "              <networkInterfaceId>eni-2</networkInterfaceId><status>in-use</status>\n"
        "              <attachment><deviceIndex>1</deviceIndex></attachment>\n"
        "              <privateIpAddressesSet><item><privateIpAddress>192.168.2.7</privateIpAddress></item>"
        "</privateIpAddressesSet>\n"
        "              <ipv6AddressesSet/>\n"
        "            </item>\n"
        "            <item>\n"
        "              <networkInterfaceId>eni-1</networkInterfaceId><status>in-use</status>\n"
        "              <attachment><deviceIndex>0</deviceIndex></attachment>\n"
        "              <privateIpAddressesSet>\n"
        "                <item><privateIpAddress>192.168.1.88</privateIpAddress><primary>true</primary></item>\n"
        "                <item><privateIpAddress>192.168.1.89</privateIpAddress><primary>false</primary></item>\n"
        "              </privateIpAddressesSet>\n"
        "              <ipv6AddressesSet><item><ipv6Address>2001:db8::5</ipv6Address></item></ipv6AddressesSet>\n"
        "            </item>\n"
        "          </networkInterfaceSet>\n"
        "        </item>\n"
        "      </instancesSet>\n"
        "    </item>\n"
        "  </reservationSet>\n"
        "</DescribeInstancesResponse>\n";

static json_object *first_instance(json_object *doc) {
        json_object *r = cn_json_get(doc, "DescribeInstancesResponse", "reservationSet", NULL);

        if (!r || !json_object_is_type(r, json_type_array) || json_object_array_length(r) < 1)
                return NULL;
        r = cn_json_get(json_object_array_get_idx(r, 0), "instancesSet", NULL);
        if (!r || !json_object_is_type(r, json_type_array) || json_object_array_length(r) < 1)
                return NULL;
        return json_object_array_get_idx(r, 0);
}

static char *addresses(const CnProviderInstance *i) {
        _cleanup_json_ json_object *a = cn_node_address_list_to_json(&i->addresses);

        return strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
}

static void test_instance(void) {
        _cleanup_json_ json_object *doc = NULL;
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL, *i6 = NULL;
        _cleanup_free_ char *a = NULL, *a6 = NULL;
        json_object *inst, *state;

        TAP_EQ_INT(cn_xml_parse(describe, strlen(describe), 1 << 20, &doc, NULL), 0, "xml: DescribeInstances reads");
        inst = first_instance(doc);
        TAP_OK(inst != NULL, "xml: item lists are arrays");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(cn_json_get(inst, "tagSet", NULL), 0), "value", NULL),
                   "a & b", "xml: entities decoded");
        TAP_OK(json_object_is_type(cn_json_get(inst, "groupSet", NULL) ?: cn_json_get(inst, "tagSet", NULL),
                                   json_type_array),
               "xml: a list with items is an array");
        TAP_EQ_STR(cn_json_string(doc, "DescribeInstancesResponse", "reservationSet", NULL), NULL,
                   "xml: a list is not a string");
        TAP_OK(json_object_is_type(cn_json_get(cn_json_get(doc, "DescribeInstancesResponse", "reservationSet", NULL)
                                                       ? json_object_array_get_idx(cn_json_get(doc,
                                                                 "DescribeInstancesResponse", "reservationSet", NULL), 0)
                                                       : NULL,
                                               "groupSet", NULL),
                                   json_type_string),
               "xml: an empty element is an empty string");

        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, false, &i), 0, "instance: parses");
        TAP_EQ_STR(i->provider_id, "aws:///eu-west-1c/i-1234567890abcdef0", "instance: providerID aws:///zone/id");
        TAP_EQ_STR(i->instance_type, "t2.micro", "instance: type");
        TAP_EQ_STR(i->zone, "eu-west-1c", "instance: zone");
        TAP_EQ_STR(i->region, "eu-west-1", "instance: region from the zone");
        TAP_OK(!i->shutdown, "instance: running is not shut down");
        a = addresses(i);
        TAP_EQ_STR(a,
                   "[{\"type\":\"InternalIP\",\"address\":\"192.168.1.88\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"192.168.1.89\"},"
                   "{\"type\":\"InternalIP\",\"address\":\"192.168.2.7\"},"
                   "{\"type\":\"ExternalIP\",\"address\":\"54.194.252.215\"},"
                   "{\"type\":\"InternalDNS\",\"address\":\"ip-192-168-1-88.eu-west-1.compute.internal\"},"
                   "{\"type\":\"Hostname\",\"address\":\"ip-192-168-1-88.eu-west-1.compute.internal\"},"
                   "{\"type\":\"ExternalDNS\",\"address\":\"ec2-54-194-252-215.eu-west-1.compute.amazonaws.com\"}]",
                   "instance: addresses by device index, then public IP and DNS names (cloud-provider-aws order)");
        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, true, &i6), 0, "instance: parses with ipv6");
        a6 = addresses(i6);
        TAP_OK(strstr(a6, "{\"type\":\"InternalIP\",\"address\":\"2001:db8::5\"}") != NULL,
               "instance: NodeIPFamilies ipv6 adds the interface's IPv6 address");
        {
                _cleanup_(cn_provider_instance_freep) CnProviderInstance *only6 = NULL;
                _cleanup_free_ char *a = NULL;

                TAP_EQ_INT(cn_provider_aws_parse_instance(inst, false, true, &only6), 0, "instance: parses ipv6 only");
                a = addresses(only6);
                TAP_OK(a && !strstr(a, "192.168.") && !strstr(a, "54.194.252.215") && strstr(a, "2001:db8::5"),
                       "instance: NodeIPFamilies ipv6 alone leaves the IPv4 addresses out");
        }

        state = cn_json_get(inst, "instanceState", NULL);
        json_object_object_add(state, "name", json_object_new_string("stopped"));
        cn_provider_instance_free(i);
        i = NULL;
        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, false, &i), 0, "instance: stopped parses");
        TAP_OK(i && i->shutdown, "instance: stopped is shut down");
        json_object_object_add(state, "name", json_object_new_string("terminated"));
        cn_provider_instance_free(i);
        i = NULL;
        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, false, &i), -ENOENT, "instance: terminated is not found");

        json_object_object_add(state, "name", json_object_new_string("running"));
        json_object_object_add(inst, "ipAddress", json_object_new_string("not-an-ip"));
        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, false, &i), -EBADMSG, "instance: a bad address is refused");
        json_object_object_add(inst, "ipAddress", json_object_new_string("54.194.252.215"));
        json_object_object_add(cn_json_get(inst, "placement", NULL), "availabilityZone",
                               json_object_new_string("eu-west-1c/../x"));
        TAP_EQ_INT(cn_provider_aws_parse_instance(inst, true, false, &i), -EBADMSG, "instance: a zone with '/' is refused");
        TAP_EQ_INT(cn_provider_aws_parse_instance(NULL, true, false, &i), -EBADMSG, "instance: no object is refused");
}

static void test_xml_hostile(void) {
        static const struct {
                const char *doc, *what;
        } bad[] = {
                { "<a>", "unclosed element" },
                { "<a>x<b/></a>", "mixed content" },
                { "<!DOCTYPE a [<!ENTITY x \"xx\">]><a>&x;</a>", "document type declaration" },
                { "<a>&x;</a>", "undefined entity" },
                { "<l><item>1</item><other>2</other></l>", "list mixing items and other elements" },
                { "", "empty document" },
                { "{\"json\": true}", "not XML" },
        };
        _cleanup_free_ char *deep = NULL, *big = NULL;
        _cleanup_json_ json_object *o = NULL;
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *d = NULL;
                _cleanup_free_ char *err = NULL;

                TAP_EQ_INT(cn_xml_parse(bad[i].doc, strlen(bad[i].doc), 1 << 20, &d, &err), -EBADMSG, bad[i].what);
        }
        deep = malloc(64 * 7 + 1);
        assert(deep);
        for (int i = 0; i < 64; i++)
                n += sprintf(deep + n, "<a>");
        TAP_EQ_INT(cn_xml_parse(deep, n, 1 << 20, &o, NULL), -EBADMSG, "nesting beyond the bound refused");
        big = strdup("<a>too long</a>");
        TAP_EQ_INT(cn_xml_parse(big, strlen(big), 8, &o, NULL), -EFBIG, "document over the size bound refused");
}

static void test_role_credentials(void) {
        _cleanup_json_ json_object *doc = json_tokener_parse(
                "{\"Code\":\"Success\",\"LastUpdated\":\"2026-11-24T12:00:00Z\",\"Type\":\"AWS-HMAC\","
                "\"AccessKeyId\":\"ASIAEXAMPLE\",\"SecretAccessKey\":\"secret\",\"Token\":\"token\","
                "\"Expiration\":\"2026-11-24T18:00:00Z\"}");
        _cleanup_json_ json_object *bad = json_tokener_parse("{\"Code\":\"Failure\",\"AccessKeyId\":\"x\"}");
        AwsCredentials c = {};

        TAP_EQ_INT(cn_aws_parse_role_credentials(doc, &c), 0, "role: credentials parse");
        TAP_EQ_STR(c.access_key_id, "ASIAEXAMPLE", "role: access key id");
        TAP_EQ_STR(c.session_token, "token", "role: session token");
        TAP_EQ_INT((long long) (c.expires / USEC_PER_SEC), 1795543200LL, "role: expiration");
        TAP_EQ_INT(cn_aws_parse_role_credentials(bad, &c), -EBADMSG, "role: a failed document is refused");
        TAP_EQ_STR(c.access_key_id, "ASIAEXAMPLE", "role: a refused document keeps the previous credentials");
        cn_aws_credentials_done(&c);
}

int main(void) {
        test_sigv4();
        test_url();
        test_provider_id();
        test_instance();
        test_xml_hostile();
        test_role_credentials();
        return tap_done();
}
