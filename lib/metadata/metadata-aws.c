/* SPDX-License-Identifier: Apache-2.0 */
/* Amazon EC2 instance metadata (IMDS). The IMDSv2 session token is fetched first by the fetcher
 * (metadata-fetch.c, see cn_metadata_source_aws.token_*); the keys below are then fetched in
 * parallel. A dated API version is used, as AWS recommends, so the layout cannot change under us.
 * providerID as the AWS cloud-controller-manager writes it: aws:///<availability-zone>/<instance-id>. */
#include "metadata-source.h"

#define V "2021-01-03/"

static const CnMetadataKey aws_keys[] = {
        { V "meta-data/instance-id" },
        { V "meta-data/instance-type", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/placement/availability-zone" },
        { V "meta-data/placement/availability-zone-id", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/placement/region", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/hostname", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/local-ipv4", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/public-ipv4", CN_METADATA_KEY_OPTIONAL },
        { V "meta-data/ipv6", CN_METADATA_KEY_OPTIONAL },
        { V "dynamic/instance-identity/document", CN_METADATA_KEY_OPTIONAL | CN_METADATA_KEY_DOCUMENT },
        {},
};

int cn_aws_region_from_zone(const char *zone, char **ret) {
        size_t n = strlen(zone);

        while (n > 0 && zone[n - 1] >= 'a' && zone[n - 1] <= 'z')
                n--;
        if (n == 0 || n == strlen(zone))
                return 0;
        *ret = strndup(zone, n);
        return *ret ? 0 : -ENOMEM;
}

static int aws_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *identity = NULL;
        _cleanup_free_ char *local4 = NULL, *public4 = NULL, *ipv6 = NULL, *zone_id = NULL;
        int r;

        if ((r = cn_metadata_docs_get_text(d, V "meta-data/instance-id", &m->instance_id)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/instance-type", &m->instance_type)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/placement/availability-zone", &m->zone)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/placement/availability-zone-id", &zone_id)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/placement/region", &m->region)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/hostname", &m->hostname)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/local-ipv4", &local4)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/public-ipv4", &public4)) < 0 ||
            (r = cn_metadata_docs_get_text(d, V "meta-data/ipv6", &ipv6)) < 0 ||
            (r = cn_metadata_docs_get_json(d, V "dynamic/instance-identity/document", &identity)) < 0)
                return r;
        if (!m->region && (r = cn_metadata_json_string(identity, "region", &m->region)) < 0)
                return r;
        if (!m->region && m->zone && (r = cn_aws_region_from_zone(m->zone, &m->region)) < 0)
                return r;
        if (!m->instance_id || !m->zone)
                return -EBADMSG;
        if (asprintf(&m->provider_id, "aws:///%s/%s", m->zone, m->instance_id) < 0)
                return -ENOMEM;
        if ((r = cn_metadata_add_address(&m->ipv4_private, local4, AF_INET)) < 0 ||
            (r = cn_metadata_add_address(&m->ipv4_public, public4, AF_INET)) < 0 ||
            (r = cn_metadata_add_address(&m->ipv6, ipv6, AF_INET6)) < 0 ||
            (r = cn_metadata_add_label(&m->extra_labels, CN_LABEL_AWS_ZONE_ID, zone_id)) < 0)
                return r;
        return 0;
}

static const char *const aws_token_headers[] = { "X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL };

const CnMetadataSource cn_metadata_source_aws = {
        .platform = "aws",
        .endpoint = "http://169.254.169.254",
        .keys = aws_keys,
        .token_path = "latest/api/token",
        .token_request_headers = aws_token_headers,
        .token_header = "X-aws-ec2-metadata-token",
        .parse = aws_parse,
};
