/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap static pod kube-system/cloudnode-cloud-node: cloudnode-initializer in cluster mode
 * running only the cloud-node controller (--controllers=cloud-node --leader-elect=false) before the
 * control plane can schedule the in-cluster Deployment. Layout as manifests/bootstrap/
 * cloudnode-cloud-node-pod.yaml: container cloud-controller-manager (so image substitution by
 * container name works), hostNetwork, priorityClassName system-node-critical, liveness GET /healthz
 * on the health port, resource requests without limits, and two read-only hostPath volumes (the
 * bootstrap kubeconfig directory and the cloud.conf directory). Built as a json-c tree; write it
 * with cn_yaml_emit(). */
#pragma once

#include "node-config.h"
#include "render-params.h"

int cn_render_static_pod(const CnRenderParams *p, json_object **ret);
/* The tree emitted as YAML. */
int cn_render_static_pod_yaml(const CnRenderParams *p, char **ret, size_t *ret_size);

/* The initializer image: the node config's inline images mapping, else its images.json (read under
 * root), key "cloudControllerManager". -ENOENT when there is none; ret_error names the file. */
int cn_render_resolve_image(const CnNodeConfig *cfg, const char *root, char **ret, char **ret_error);
