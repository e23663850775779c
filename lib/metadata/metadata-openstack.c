/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack: the config drive (label config-2) when one is mounted, else the metadata service.
 * Nova's meta_data.json gives uuid, name/hostname and availability zone; addresses and flavor come
 * from the EC2-compatible part (a JSON document on the drive, single keys over HTTP).
 * providerID as the OpenStack cloud-controller-manager writes it: openstack:///<uuid>. The region
 * is not part of instance metadata; it comes from the node config's cloudConfig.Global.region. */
#include "metadata-source.h"

static const CnMetadataKey openstack_keys[] = {
        { "openstack/latest/meta_data.json", CN_METADATA_KEY_DOCUMENT },
        { "latest/meta-data/local-ipv4", CN_METADATA_KEY_OPTIONAL },
        { "latest/meta-data/public-ipv4", CN_METADATA_KEY_OPTIONAL },
        { "latest/meta-data/instance-type", CN_METADATA_KEY_OPTIONAL },
        {},
};

static const CnMetadataKey openstack_drive_keys[] = {
        { "openstack/latest/meta_data.json", CN_METADATA_KEY_DOCUMENT },
        { "ec2/latest/meta-data.json", CN_METADATA_KEY_OPTIONAL | CN_METADATA_KEY_DOCUMENT },
        {},
};

static int openstack_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *meta = NULL, *ec2 = NULL;
        _cleanup_free_ char *local4 = NULL, *public4 = NULL;
        json_object *placement;
        int r;

        r = cn_metadata_docs_get_json(d, "openstack/latest/meta_data.json", &meta);
        if (r < 0)
                return r;
        if (!json_object_is_type(meta, json_type_object))
                return -EBADMSG;
        r = cn_metadata_docs_get_json(d, "ec2/latest/meta-data.json", &ec2);
        if (r < 0)
                return r;
        if (ec2 && !json_object_is_type(ec2, json_type_object))
                return -EBADMSG;
        if ((r = cn_metadata_json_string(meta, "uuid", &m->instance_id)) < 0 ||
            (r = cn_metadata_json_string(meta, "hostname", &m->hostname)) < 0 ||
            (r = cn_metadata_json_string(meta, "availability_zone", &m->zone)) < 0)
                return r;
        if (!m->hostname && (r = cn_metadata_json_string(meta, "name", &m->hostname)) < 0)
                return r;
        /* KubeVirt's OpenStack-style config drive carries the flavor in meta_data.json itself. */
        if ((r = cn_metadata_json_string(meta, "instance_type", &m->instance_type)) < 0)
                return r;
        if (ec2) {
                if ((!m->instance_type &&
                     (r = cn_metadata_json_string(ec2, "instance-type", &m->instance_type)) < 0) ||
                    (r = cn_metadata_json_string(ec2, "local-ipv4", &local4)) < 0 ||
                    (r = cn_metadata_json_string(ec2, "public-ipv4", &public4)) < 0)
                        return r;
                if (!m->zone && json_object_object_get_ex(ec2, "placement", &placement) &&
                    (r = cn_metadata_json_string(placement, "availability-zone", &m->zone)) < 0)
                        return r;
        } else if ((!m->instance_type &&
                    (r = cn_metadata_docs_get_text(d, "latest/meta-data/instance-type", &m->instance_type)) < 0) ||
                   (r = cn_metadata_docs_get_text(d, "latest/meta-data/local-ipv4", &local4)) < 0 ||
                   (r = cn_metadata_docs_get_text(d, "latest/meta-data/public-ipv4", &public4)) < 0)
                return r;
        if (!m->instance_id)
                return -EBADMSG;
        if (asprintf(&m->provider_id, "openstack:///%s", m->instance_id) < 0)
                return -ENOMEM;
        if ((r = cn_metadata_add_address(&m->ipv4_private, local4, AF_INET)) < 0 ||
            (r = cn_metadata_add_address(&m->ipv4_public, public4, AF_INET)) < 0)
                return r;
        return 0;
}

const CnMetadataSource cn_metadata_source_openstack = {
        .platform = "openstack",
        .endpoint = "http://169.254.169.254",
        .keys = openstack_keys,
        .drive = "/run/cloudnode/configdrive",
        .drive_keys = openstack_drive_keys,
        .parse = openstack_parse,
};
