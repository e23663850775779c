/* SPDX-License-Identifier: Apache-2.0 */
/* Azure Instance Metadata Service (header Metadata: true): one JSON document for the instance.
 * providerID as cloud-provider-azure writes it: azure://<resource id>, the resource id beginning
 * with "/subscriptions/". IMDS documents of older api-versions (and some Azure Stack Hub
 * stamps) carry no compute.resourceId; the id is then composed from subscriptionId,
 * resourceGroupName and name as cloud-provider-azure composes it (resource group in lower case; a
 * scale-set VM named "<scale set>_<instance id>" gets the virtualMachineScaleSets form). The zone
 * follows cloud-provider-azure too: "<location>-<zone>" for zonal VMs, else the fault domain
 * number. */
#include "metadata-source.h"

#define AZURE_INSTANCE "metadata/instance?api-version=2021-02-01"

static const CnMetadataKey azure_keys[] = {
        { AZURE_INSTANCE, CN_METADATA_KEY_DOCUMENT },
        {},
};

static int add_interface_addresses(CnInstanceMetadata *m, json_object *iface) {
        json_object *v4, *v6, *list;
        int r;

        if (json_object_object_get_ex(iface, "ipv4", &v4) && json_object_object_get_ex(v4, "ipAddress", &list) &&
            json_object_is_type(list, json_type_array))
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        json_object *a = json_object_array_get_idx(list, i), *v;

                        if (json_object_object_get_ex(a, "privateIpAddress", &v) &&
                            (r = cn_metadata_add_address(&m->ipv4_private, json_object_get_string(v), AF_INET)) < 0)
                                return r;
                        if (json_object_object_get_ex(a, "publicIpAddress", &v) &&
                            (r = cn_metadata_add_address(&m->ipv4_public, json_object_get_string(v), AF_INET)) < 0)
                                return r;
                }
        if (json_object_object_get_ex(iface, "ipv6", &v6) && json_object_object_get_ex(v6, "ipAddress", &list) &&
            json_object_is_type(list, json_type_array))
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        json_object *v;

                        if (json_object_object_get_ex(json_object_array_get_idx(list, i), "privateIpAddress", &v) &&
                            (r = cn_metadata_add_address(&m->ipv6, json_object_get_string(v), AF_INET6)) < 0)
                                return r;
                }
        return 0;
}

/* One path segment of a resource id: non-empty, no '/', no control characters or spaces, so that
 * a hostile value cannot reshape the providerID. */
static bool resource_segment_ok(const char *s) {
        if (isempty(s))
                return false;
        for (const char *p = s; *p; p++)
                if (*p == '/' || (unsigned char) *p <= ' ' || *p == 0x7f)
                        return false;
        return true;
}

static int azure_compose_resource_id(json_object *compute, char **ret) {
        _cleanup_free_ char *subscription = NULL, *group = NULL, *name = NULL, *scale_set = NULL;
        const char *sep;
        int r;

        if ((r = cn_metadata_json_string(compute, "subscriptionId", &subscription)) < 0 ||
            (r = cn_metadata_json_string(compute, "resourceGroupName", &group)) < 0 ||
            (r = cn_metadata_json_string(compute, "name", &name)) < 0 ||
            (r = cn_metadata_json_string(compute, "vmScaleSetName", &scale_set)) < 0)
                return r;
        if (!resource_segment_ok(subscription) || !resource_segment_ok(group) || !resource_segment_ok(name))
                return -EBADMSG;
        for (char *p = group; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p += 'a' - 'A';
        /* A uniform scale set's VM is "<scale set>_<instance id>"; the scale set name may hold '_'
         * itself, so the instance id is what follows the last one. */
        sep = strrchr(name, '_');
        if (!isempty(scale_set) && sep && sep != name && sep[1] &&
            strneq(name, scale_set, sep - name) && strlen(scale_set) == (size_t) (sep - name))
                r = asprintf(ret, "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/"
                             "virtualMachineScaleSets/%s/virtualMachines/%s", subscription, group, scale_set, sep + 1);
        else
                r = asprintf(ret, "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/"
                             "virtualMachines/%s", subscription, group, name);
        return r < 0 ? -ENOMEM : 0;
}

static int azure_parse(CnMetadataDocs *d, CnInstanceMetadata *m) {
        _cleanup_json_ json_object *doc = NULL;
        _cleanup_free_ char *resource_id = NULL, *zone = NULL, *fault_domain = NULL;
        json_object *compute, *network, *ifaces, *os;
        int r;

        r = cn_metadata_docs_get_json(d, AZURE_INSTANCE, &doc);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(doc, "compute", &compute) || !json_object_is_type(compute, json_type_object))
                return -EBADMSG;
        if ((r = cn_metadata_json_string(compute, "vmId", &m->instance_id)) < 0 ||
            (r = cn_metadata_json_string(compute, "vmSize", &m->instance_type)) < 0 ||
            (r = cn_metadata_json_string(compute, "location", &m->region)) < 0 ||
            (r = cn_metadata_json_string(compute, "resourceId", &resource_id)) < 0 ||
            (r = cn_metadata_json_string(compute, "zone", &zone)) < 0 ||
            (r = cn_metadata_json_string(compute, "platformFaultDomain", &fault_domain)) < 0)
                return r;
        if (json_object_object_get_ex(compute, "osProfile", &os) &&
            (r = cn_metadata_json_string(os, "computerName", &m->hostname)) < 0)
                return r;
        if (!m->hostname && (r = cn_metadata_json_string(compute, "name", &m->hostname)) < 0)
                return r;
        if (zone && m->region) {
                if (asprintf(&m->zone, "%s-%s", m->region, zone) < 0)
                        return -ENOMEM;
        } else if (fault_domain)
                m->zone = TAKE_PTR(fault_domain);
        if (!resource_id && (r = azure_compose_resource_id(compute, &resource_id)) < 0)
                return r;
        if (!m->instance_id || !resource_id || resource_id[0] != '/')
                return -EBADMSG;
        if (asprintf(&m->provider_id, "azure://%s", resource_id) < 0)
                return -ENOMEM;
        if (json_object_object_get_ex(doc, "network", &network) &&
            json_object_object_get_ex(network, "interface", &ifaces) && json_object_is_type(ifaces, json_type_array))
                for (size_t i = 0; i < json_object_array_length(ifaces); i++)
                        if ((r = add_interface_addresses(m, json_object_array_get_idx(ifaces, i))) < 0)
                                return r;
        return 0;
}

static const char *const azure_headers[] = { "Metadata: true", NULL };

const CnMetadataSource cn_metadata_source_azure = {
        .platform = "azure",
        .endpoint = "http://169.254.169.254",
        .headers = azure_headers,
        .keys = azure_keys,
        .parse = azure_parse,
};
