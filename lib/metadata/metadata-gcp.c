/* SPDX-License-Identifier: Apache-2.0 */
/* Google Compute Engine metadata server (header Metadata-Flavor: Google). Single keys, fetched in
 * parallel. providerID as the GCE cloud provider writes it: gce://<project-id>/<zone>/<name>. */
#include "metadata-source.h"

#define I "computeMetadata/v1/instance/"

static const CnMetadataKey gcp_keys[] = {
        { I "id" },
        { I "name" },
        { I "zone" },
        { "computeMetadata/v1/project/project-id" },
        { I "hostname", CN_METADATA_KEY_OPTIONAL },
        { I "machine-type", CN_METADATA_KEY_OPTIONAL },
        { I "network-interfaces/0/ip", CN_METADATA_KEY_OPTIONAL },
        { I "network-interfaces/0/access-configs/0/external-ip", CN_METADATA_KEY_OPTIONAL },
        { I "network-interfaces/0/ipv6s", CN_METADATA_KEY_OPTIONAL },
        {},
};

/* "us-central1-a" -> "us-central1" */
static int region_from_zone(const char *zone, char **ret) {
        const char *dash = strrchr(zone, '-');

        if (!dash || dash == zone)
                return 0;
        *ret = strndup(zone, dash - zone);
        return *ret ? 0 : -ENOMEM;
}

static int gcp_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_free_ char *name = NULL, *zone_path = NULL, *project = NULL, *machine_type = NULL,
                            *ip = NULL, *external = NULL, *ipv6s = NULL;
        int r;

        if ((r = cn_metadata_docs_get_text(d, I "id", &m->instance_id)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "name", &name)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "zone", &zone_path)) < 0 ||
            (r = cn_metadata_docs_get_text(d, "computeMetadata/v1/project/project-id", &project)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "hostname", &m->hostname)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "machine-type", &machine_type)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "network-interfaces/0/ip", &ip)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "network-interfaces/0/access-configs/0/external-ip", &external)) < 0 ||
            (r = cn_metadata_docs_get_text(d, I "network-interfaces/0/ipv6s", &ipv6s)) < 0)
                return r;
        /* zone and machine-type come as "projects/<number>/zones/<zone>" paths. */
        if (zone_path && !(m->zone = strdup(cn_metadata_basename(zone_path))))
                return -ENOMEM;
        if (machine_type && !(m->instance_type = strdup(cn_metadata_basename(machine_type))))
                return -ENOMEM;
        if (m->zone && (r = region_from_zone(m->zone, &m->region)) < 0)
                return r;
        if (!m->instance_id || !name || !m->zone || !project)
                return -EBADMSG;
        /* A name or project id containing "/" would change the providerID's structure. */
        if (strchr(name, '/') || strchr(project, '/') || strchr(m->zone, '/'))
                return -EBADMSG;
        if (asprintf(&m->provider_id, "gce://%s/%s/%s", project, m->zone, name) < 0)
                return -ENOMEM;
        if ((r = cn_metadata_add_address(&m->ipv4_private, ip, AF_INET)) < 0 ||
            (r = cn_metadata_add_address(&m->ipv4_public, external, AF_INET)) < 0)
                return r;
        /* ipv6s lists one address per line. */
        for (char *p = ipv6s, *save = NULL, *tok; (tok = strtok_r(p, "\n", &save)); p = NULL)
                if ((r = cn_metadata_add_address(&m->ipv6, tok, AF_INET6)) < 0)
                        return r;
        return 0;
}

static const char *const gcp_headers[] = { "Metadata-Flavor: Google", NULL };

const CnMetadataSource cn_metadata_source_gcp = {
        .platform = "gcp",
        .endpoint = "http://169.254.169.254",
        .headers = gcp_headers,
        .keys = gcp_keys,
        .parse = gcp_parse,
};
