/* SPDX-License-Identifier: Apache-2.0 */
/* The common metadata struct: validation of hostile values and the JSON view. */
#include "metadata.h"
#include "tap.h"

static char **strv(const char *a, const char *b) {
        char **l = calloc(3, sizeof(char *));
        l[0] = a ? strdup(a) : NULL;
        l[1] = a && b ? strdup(b) : NULL;
        return l;
}

static CnInstanceMetadata *good(void) {
        CnInstanceMetadata *m = cn_instance_metadata_new("aws");
        m->instance_id = strdup("i-0123");
        m->provider_id = strdup("aws:///us-east-1a/i-0123");
        m->hostname = strdup("ip-10-0-0-1.ec2.internal");
        m->ipv4_private = strv("10.0.0.1", "10.0.0.2");
        m->ipv6 = strv("2001:db8::1", NULL);
        m->extra_labels = strv("example.com/zone-id=use1-az1", "plain=");
        return m;
}

static void expect_bad(const char *name, const char *field, void (*mutate)(CnInstanceMetadata *)) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = good();
        const char *f = NULL;

        mutate(m);
        TAP_OK(cn_instance_metadata_validate(m, &f) == -EBADMSG && f && streq(f, field), "%s rejected (%s)",
               name, strna(f));
}

#define SET(field, value) free(m->field), m->field = strdup(value)
static void m_newline(CnInstanceMetadata *m) { SET(hostname, "host\nKUBELET_X=1"); }
static void m_nonutf8(CnInstanceMetadata *m) { SET(instance_type, "m5\xff"); }
static void m_overlong(CnInstanceMetadata *m) { SET(instance_type, "\xc0\xaf"); }
static void m_c1(CnInstanceMetadata *m) { SET(zone, "a\xc2\x85z"); }
static void m_addr(CnInstanceMetadata *m) { SET(ipv4_private[1], "10.0.0.2\n"); }
static void m_v6(CnInstanceMetadata *m) { SET(ipv6[0], "10.0.0.1"); }
static void m_label(CnInstanceMetadata *m) { SET(extra_labels[0], "bad key=v"); }
static void m_noid(CnInstanceMetadata *m) { free(m->instance_id), m->instance_id = NULL; }

int main(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = good();
        _cleanup_json_ json_object *j = NULL;
        const char *f = NULL;

        TAP_EQ_INT(cn_instance_metadata_validate(m, &f), 0, "well-formed metadata validates");
        expect_bad("newline in hostname", "hostname", m_newline);
        expect_bad("non-UTF-8 instance type", "instance-type", m_nonutf8);
        expect_bad("overlong UTF-8", "instance-type", m_overlong);
        expect_bad("C1 control in zone", "zone", m_c1);
        expect_bad("garbage IPv4", "ipv4-private", m_addr);
        expect_bad("IPv4 in the IPv6 list", "ipv6", m_v6);
        expect_bad("invalid label", "labels", m_label);
        expect_bad("missing instance id", "instance-id", m_noid);

        free(m->zone);
        m->zone = strdup("quote\"[section] ü: &anchor");
        TAP_EQ_INT(cn_instance_metadata_validate(m, NULL), 0, "quotes, brackets, YAML specials and UTF-8 allowed");

        TAP_EQ_INT(cn_instance_metadata_to_json(m, &j), 0, "to JSON");
        TAP_EQ_STR(json_object_get_string(json_object_object_get(j, "providerID")), "aws:///us-east-1a/i-0123",
                   "providerID key");
        TAP_EQ_INT(json_object_array_length(json_object_object_get(j, "ipv4Private")), 2, "ordered address list");
        TAP_EQ_STR(json_object_get_string(json_object_object_get(json_object_object_get(j, "labels"),
                                                                 "example.com/zone-id")),
                   "use1-az1", "labels as a mapping");
        TAP_OK(cn_metadata_platform_supported("proxmoxve") && !cn_metadata_platform_supported("vmware"),
               "platform list");
        return tap_done();
}
