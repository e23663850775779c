/* SPDX-License-Identifier: Apache-2.0 */
/* Env file writer (see render-env.h). */
#include "buf.h"
#include "render-env.h"
#include "string-util.h"

typedef enum Field {
        F_INSTANCE_ID,
        F_PROVIDER_ID,
        F_INSTANCE_TYPE,
        F_REGION,
        F_ZONE,
        F_HOSTNAME,
        F_IPV4_PRIVATE,    /* first address */
        F_IPV4_PUBLIC,     /* first address */
        F_IPV6,            /* first address */
        F_IPV4_PRIVATE_ALL,
        F_IPV4_PUBLIC_ALL,
        F_IPV6_ALL,
        F_LABEL_ZONE_ID,   /* the AWS zone-id label's value */
} Field;

typedef struct EnvKey {
        const char *name;
        Field field;
} EnvKey;

static const EnvKey cloudnode_keys[] = {
        { "CLOUDNODE_INSTANCE_ID", F_INSTANCE_ID },   { "CLOUDNODE_PROVIDER_ID", F_PROVIDER_ID },
        { "CLOUDNODE_INSTANCE_TYPE", F_INSTANCE_TYPE }, { "CLOUDNODE_REGION", F_REGION },
        { "CLOUDNODE_ZONE", F_ZONE },                 { "CLOUDNODE_HOSTNAME", F_HOSTNAME },
        { "CLOUDNODE_IPV4_PRIVATE", F_IPV4_PRIVATE_ALL }, { "CLOUDNODE_IPV4_PUBLIC", F_IPV4_PUBLIC_ALL },
        { "CLOUDNODE_IPV6", F_IPV6_ALL },             {},
};

/* The attribute names Afterburn's providers write (afterburn/src/providers/<platform>). */
static const struct {
        const char *platform;
        EnvKey keys[12];
} afterburn_keys[] = {
        { "aws",
          { { "AFTERBURN_AWS_INSTANCE_ID", F_INSTANCE_ID },
            { "AFTERBURN_AWS_INSTANCE_TYPE", F_INSTANCE_TYPE },
            { "AFTERBURN_AWS_IPV4_LOCAL", F_IPV4_PRIVATE },
            { "AFTERBURN_AWS_IPV4_PUBLIC", F_IPV4_PUBLIC },
            { "AFTERBURN_AWS_IPV6", F_IPV6 },
            { "AFTERBURN_AWS_AVAILABILITY_ZONE", F_ZONE },
            { "AFTERBURN_AWS_AVAILABILITY_ZONE_ID", F_LABEL_ZONE_ID },
            { "AFTERBURN_AWS_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_AWS_REGION", F_REGION } } },
        { "azure",
          { { "AFTERBURN_AZURE_IPV4_DYNAMIC", F_IPV4_PRIVATE },
            { "AFTERBURN_AZURE_IPV4_VIRTUAL", F_IPV4_PUBLIC },
            { "AFTERBURN_AZURE_VMSIZE", F_INSTANCE_TYPE } } },
        { "digitalocean",
          { { "AFTERBURN_DIGITALOCEAN_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_DIGITALOCEAN_IPV4_PRIVATE_0", F_IPV4_PRIVATE },
            { "AFTERBURN_DIGITALOCEAN_IPV4_PUBLIC_0", F_IPV4_PUBLIC },
            { "AFTERBURN_DIGITALOCEAN_IPV6_PUBLIC_0", F_IPV6 },
            { "AFTERBURN_DIGITALOCEAN_REGION", F_REGION } } },
        { "gcp",
          { { "AFTERBURN_GCP_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_GCP_IP_EXTERNAL_0", F_IPV4_PUBLIC },
            { "AFTERBURN_GCP_IP_LOCAL_0", F_IPV4_PRIVATE },
            { "AFTERBURN_GCP_MACHINE_TYPE", F_INSTANCE_TYPE } } },
        { "hetzner",
          { { "AFTERBURN_HETZNER_AVAILABILITY_ZONE", F_ZONE },
            { "AFTERBURN_HETZNER_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_HETZNER_INSTANCE_ID", F_INSTANCE_ID },
            { "AFTERBURN_HETZNER_PUBLIC_IPV4", F_IPV4_PUBLIC },
            { "AFTERBURN_HETZNER_PRIVATE_IPV4_0", F_IPV4_PRIVATE } } },
        { "openstack",
          { { "AFTERBURN_OPENSTACK_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_OPENSTACK_INSTANCE_ID", F_INSTANCE_ID },
            { "AFTERBURN_OPENSTACK_INSTANCE_TYPE", F_INSTANCE_TYPE },
            { "AFTERBURN_OPENSTACK_IPV4_LOCAL", F_IPV4_PRIVATE },
            { "AFTERBURN_OPENSTACK_IPV4_PUBLIC", F_IPV4_PUBLIC } } },
        { "proxmoxve",
          { { "AFTERBURN_PROXMOXVE_HOSTNAME", F_HOSTNAME },
            { "AFTERBURN_PROXMOXVE_INSTANCE_ID", F_INSTANCE_ID },
            { "AFTERBURN_PROXMOXVE_IPV4", F_IPV4_PRIVATE },
            { "AFTERBURN_PROXMOXVE_IPV6", F_IPV6 } } },
};

static int field_value(const CnInstanceMetadata *m, Field f, char **ret) {
        const char *v = NULL;

        *ret = NULL;
        switch (f) {
        case F_INSTANCE_ID:
                v = m->instance_id;
                break;
        case F_PROVIDER_ID:
                v = m->provider_id;
                break;
        case F_INSTANCE_TYPE:
                v = m->instance_type;
                break;
        case F_REGION:
                v = m->region;
                break;
        case F_ZONE:
                v = m->zone;
                break;
        case F_HOSTNAME:
                v = m->hostname;
                break;
        case F_IPV4_PRIVATE:
                v = m->ipv4_private ? m->ipv4_private[0] : NULL;
                break;
        case F_IPV4_PUBLIC:
                v = m->ipv4_public ? m->ipv4_public[0] : NULL;
                break;
        case F_IPV6:
                v = m->ipv6 ? m->ipv6[0] : NULL;
                break;
        case F_IPV4_PRIVATE_ALL:
                return m->ipv4_private && m->ipv4_private[0] ? strv_join(m->ipv4_private, ",", ret) : 0;
        case F_IPV4_PUBLIC_ALL:
                return m->ipv4_public && m->ipv4_public[0] ? strv_join(m->ipv4_public, ",", ret) : 0;
        case F_IPV6_ALL:
                return m->ipv6 && m->ipv6[0] ? strv_join(m->ipv6, ",", ret) : 0;
        case F_LABEL_ZONE_ID:
                for (char **l = m->extra_labels; l && *l; l++)
                        if ((v = cn_startswith(*l, "topology.k8s.aws/zone-id=")))
                                break;
                break;
        }
        if (isempty(v))
                return 0;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

static int add_line(CnBuf *b, const char *name, const char *value) {
        _cleanup_free_ char *q = NULL;
        int r;

        if (isempty(value))
                return 0;
        r = cn_shell_quote(value, &q);
        if (r < 0)
                return r;
        return cn_buf_printf(b, "%s=%s\n", name, q);
}

static int add_keys(CnBuf *b, const CnInstanceMetadata *m, const EnvKey *keys) {
        int r;

        for (const EnvKey *k = keys; k->name; k++) {
                _cleanup_free_ char *v = NULL;

                if ((r = field_value(m, k->field, &v)) < 0 || (r = add_line(b, k->name, v)) < 0)
                        return r;
        }
        return 0;
}

int cn_render_env(const CnInstanceMetadata *m, bool afterburn_compat, char **ret, size_t *ret_size) {
        _cleanup_buf_ CnBuf b = CN_BUF_INIT(64 * 1024);
        int r;

        if ((r = cn_buf_add_str(&b, "# Written by cloudnode-agent from the instance metadata.\n")) < 0 ||
            (r = add_line(&b, "CLOUDNODE_PLATFORM", m->platform)) < 0 || (r = add_keys(&b, m, cloudnode_keys)) < 0)
                return r;
        if (afterburn_compat)
                for (size_t i = 0; i < ELEMENTSOF(afterburn_keys); i++)
                        if (m->platform && streq(afterburn_keys[i].platform, m->platform) &&
                            (r = add_keys(&b, m, afterburn_keys[i].keys)) < 0)
                                return r;
        return cn_buf_steal(&b, ret, ret_size);
}
