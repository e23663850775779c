/* SPDX-License-Identifier: Apache-2.0 */
/* The desired state of the operand: the embedded objects with cluster-specific values substituted
 * (namespace, images, cloud provider, proxy environment, replicas on single-node clusters, cloud config
 * hash), the
 * synced cloud-conf ConfigMap, and on every object a spec-hash annotation over what we want. Pure
 * functions of their inputs, so a resync that sees the same inputs produces the same objects. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#define CN_OPERAND_SPEC_HASH_ANNOTATION "cloudnode.io/spec-hash"
#define CN_OPERAND_CONFIG_HASH_ANNOTATION "cloudnode.io/cloud-config-hash"
#define CN_OPERAND_RELEASE_ANNOTATION "cloudnode.io/release-version"
#define CN_OPERAND_MANAGED_BY_LABEL "app.kubernetes.io/managed-by"
#define CN_OPERAND_MANAGED_BY "cloudnode-controller"
#define CN_OPERAND_CLOUD_CONF_NAME "cloud-conf"
#define CN_OPERAND_CLOUD_CONF_KEY "cloud.conf"
#define CN_OPERAND_IMAGE_CCM_KEY "cloudControllerManager"
#define CN_OPERAND_IMAGE_CNM_KEY "cloudNodeManager"

typedef struct CnOperandConfig {
        const char *namespace;      /* target namespace (required) */
        json_object *images;        /* parsed images.json, or NULL to keep the manifests' images */
        const char *cloud_provider; /* --cloud-provider of the cluster-mode initializer (required) */
        const char *http_proxy;     /* NULL or "": not set */
        const char *https_proxy;
        const char *no_proxy;
        bool single_node;
        const char *infrastructure_name; /* OpenShift's Infrastructure status.infrastructureName, or NULL */
        const char *release_version;     /* stamped on the pod templates, so an upgrade rolls them; or NULL */
        const char *cloud_config;   /* content of cloud.conf; NULL: the source does not exist */
} CnOperandConfig;

/* Parse images.json (an object of string values). -EINVAL with a message for anything else. */
int cn_operand_parse_images(const char *text, json_object **ret, char **reterr_message);

/* The cloud provider of the operand, from the first that names one: the controller's flag, the
 * CloudnodeOperator's spec.cloudProvider, the platform of OpenShift's Infrastructure (as
 * cn_render_infrastructure_platform() maps it). *ret is borrowed, *ret_source says where it came
 * from. -ENOENT when none names one, -EPROTONOSUPPORT when this build has no such provider. */
int cn_operand_cloud_provider(const char *flag, json_object *operator_object, const char *infrastructure_platform,
                              const char **ret, const char **ret_source);

/* Apply the substitutions to one object in place. */
int cn_operand_substitute(json_object *object, const CnOperandConfig *c);

/* Set the spec-hash annotation: SHA-256 of the object as it stands (without that annotation). */
int cn_operand_stamp_hash(json_object *object);

/* The cloud-conf ConfigMap for the target namespace. */
int cn_operand_cloud_conf(const CnOperandConfig *c, json_object **ret);

/* All desired objects, substituted and stamped: the embedded operand plus cloud-conf. */
int cn_operand_desired(const CnOperandConfig *c, json_object **ret_array);

/* The cloud.conf content of a source ConfigMap: data[key], else data["cloud.conf"]; NULL when
 * neither exists. Borrowed. */
const char *cn_operand_source_cloud_config(json_object *configmap, const char *key);
/* One place the cloud config may come from, in the order they are asked (OpenShift: the ConfigMap
 * the Infrastructure names in openshift-config, then openshift-config-managed/kube-cloud-config,
 * then --cloud-config-source). configmap: the cached object, NULL when it does not exist. strict:
 * the key was named by the user (Infrastructure spec.cloudConfig.key), so a ConfigMap without it
 * is an error rather than an empty cloud config. */
typedef struct CnCloudConfigSource {
        const char *namespace;
        const char *name;
        const char *key;
        const char *origin; /* what named it, for messages */
        bool strict;
        json_object *configmap;
} CnCloudConfigSource;

/* The first source whose ConfigMap exists wins; its content is data[key], else data["cloud.conf"].
 * *ret_index is the winner, *ret_text its content (borrowed; NULL for a non-strict source without
 * either key). -ENOENT: none exists. -ENOKEY: the winner is strict and has neither key
 * (*ret_index says which). */
int cn_operand_pick_cloud_config(const CnCloudConfigSource *sources, size_t n, size_t *ret_index,
                                 const char **ret_text);

/* The first setting of the cloud config text that holds a credential ("token", "password",
 * "application-credential-secret"), or NULL: such a value belongs in the Secret
 * CN_OPERAND_CREDENTIALS_SECRET, since the cloud config is a ConfigMap. */
const char *cn_operand_cloud_config_credential(const char *text);
#define CN_OPERAND_CREDENTIALS_SECRET "cloud-credentials"
