/* SPDX-License-Identifier: Apache-2.0 */
/* The node config /etc/cloudnode/cloudnode.yaml, read by cloudnode-agent and by
 * cloudnode-initializer's node mode. camelCase keys like Kubernetes objects; an unknown key is an
 * error that names the key (with its path, e.g. "metadata.timout"). docs/cloudnode.yaml.5 is the
 * user documentation.
 *
 *   platform: aws                    # Ignition/Afterburn platform id; default: detect
 *   role: worker                     # bootstrap | control-plane | worker (default worker)
 *   nodeName: ip-10-0-0-1            # default: the metadata hostname
 *   kubeconfig: /etc/kubernetes/kubeconfig
 *   metadata:
 *     endpoint: http://169.254.169.254   # base URL override
 *     configDrive: /run/cloudnode/config-drive
 *     file: /etc/cloudnode/metadata.yaml # platform "file"
 *     timeout: 2s                        # per request (Go duration or integer seconds)
 *     retries: 5
 *     deadline: 30s                      # whole fetch
 *     requireIMDSv2: false               # aws: no fallback to IMDSv1
 *   cloudConfig:                     # cloud.conf content: section -> key -> scalar
 *     Global: { region: RegionOne }
 *   credentialsFile: /etc/cloudnode/credentials.yaml  # mapping merged into cloud.conf [Global]
 *   images: /etc/cloudnode/images.json   # or an inline mapping {cloudControllerManager: IMAGE}
 *   healthPort: 10269                # liveness port of the bootstrap static pod */
#pragma once

#include <stdint.h>

#include "macro.h"

#define CN_NODE_CONFIG_PATH "/etc/cloudnode/cloudnode.yaml"
#define CN_IMAGES_PATH "/etc/cloudnode/images.json"
/* Not the cluster-mode Deployment's 10267: both run with the host network on the same
 * control-plane node until the hand-off, which waits for the Deployment to be available. */
#define CN_HEALTH_PORT_DEFAULT 10269U

typedef enum CnRole {
        CN_ROLE_WORKER,
        CN_ROLE_BOOTSTRAP,
        CN_ROLE_CONTROL_PLANE,
        _CN_ROLE_MAX,
        _CN_ROLE_INVALID = -EINVAL,
} CnRole;

const char *cn_role_to_string(CnRole r);
CnRole cn_role_from_string(const char *s);

typedef struct CnNodeConfig {
        char *platform;
        CnRole role;
        char *node_name;
        char *kubeconfig;
        char *metadata_endpoint;
        char *metadata_config_drive;
        char *metadata_file;
        uint64_t metadata_timeout_usec;  /* 0: default */
        unsigned metadata_retries;       /* (unsigned) -1: default */
        uint64_t metadata_deadline_usec; /* 0: default */
        bool metadata_require_imdsv2;
        json_object *cloud_config;       /* object: section -> object of scalars; never NULL after parse */
        char *credentials_file;
        char *images_path;               /* NULL with images_inline set, else path (default CN_IMAGES_PATH) */
        json_object *images_inline;      /* inline images mapping, or NULL */
        unsigned health_port;
} CnNodeConfig;

/* Defaults for a missing config file. */
int cn_node_config_new(CnNodeConfig **ret);
CnNodeConfig *cn_node_config_free(CnNodeConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnNodeConfig *, cn_node_config_free);
#define _cleanup_node_config_ _cleanup_(cn_node_config_freep)

/* From an already parsed document (a JSON object). On error returns -EINVAL (or -ENOMEM) and, if
 * ret_error is non-NULL, a malloc'd one-line message naming the key ("unknown key 'metadata.foo'"). */
int cn_node_config_from_json(json_object *doc, CnNodeConfig **ret, char **ret_error);

/* Reads a YAML (or JSON) file. path NULL: CN_NODE_CONFIG_PATH. root prefixes path (NULL = "/").
 * A missing file is -ENOENT unless allow_missing, which yields defaults. */
int cn_node_config_load(const char *root, const char *path, bool allow_missing, CnNodeConfig **ret,
                        char **ret_error);
