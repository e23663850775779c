/* SPDX-License-Identifier: Apache-2.0 */
/* What the renderers of node-local files take: shared by cloudnode-agent (from the node config and
 * the metadata) and `cloudnode-controller render` (from its flags and the cluster infrastructure
 * file). Each renderer produces its file's text (or tree) through a serializer: a shell-quoting env
 * writer, systemd unit quoting, the INI writer, the YAML emitter. None does I/O. */
#pragma once

#include "macro.h"
#include "metadata.h"

#define CN_ENV_FILE_PATH "/run/metadata/cloudnode"
#define CN_KUBELET_DROPIN_PATH "/etc/systemd/system/kubelet.service.d/20-cloudnode.conf"
#define CN_CLOUD_CONF_PATH "/etc/kubernetes/bootstrap-configs/cloud.conf"
#define CN_STATIC_POD_PATH "/etc/kubernetes/manifests/cloudnode-cloud-node.yaml"
#define CN_BOOTSTRAP_KUBECONFIG_PATH "/etc/kubernetes/bootstrap-secrets/kubeconfig"
#define CN_BOOTSTRAP_SECRETS_DIR "/etc/kubernetes/bootstrap-secrets"
#define CN_BOOTSTRAP_CONFIGS_DIR "/etc/kubernetes/bootstrap-configs"
#define CN_IMAGES_KEY "cloudControllerManager"

typedef struct CnRenderParams {
        const char *platform;                /* cloud provider name passed to the initializer */
        const CnInstanceMetadata *metadata;  /* NULL when rendering without a machine (controller) */
        const char *node_name;               /* NULL: the metadata hostname */
        const char *image;                   /* static pod image */
        unsigned health_port;                /* 0: CN_HEALTH_PORT_DEFAULT */
        json_object *cloud_config;           /* {section: {key: scalar}}, may be NULL */
        json_object *credentials;            /* {key: scalar} merged into [Global], may be NULL */
} CnRenderParams;
