/* SPDX-License-Identifier: Apache-2.0 */
/* cloud.conf for the bootstrap cloud-node controller, in the gcfg INI syntax the Kubernetes cloud
 * providers read, written by the escaping INI writer. Content, later sources winning key by key:
 *   1. what the metadata says about this machine, under [Global] (per platform: aws Zone; gcp
 *      project-id, local-zone; azure location, subscriptionId, resourceGroup; openstack region);
 *   2. the node config's cloudConfig sections;
 *   3. the credentials file's mapping, under [Global] (secrets stay out of the node config).
 * The result is a secret: it is written 0600 and never logged. */
#pragma once

#include "render-params.h"

/* The merged JSON sections (for tests and for `render`'s ConfigMap). */
int cn_render_cloud_conf_json(const CnRenderParams *p, json_object **ret);
int cn_render_cloud_conf(const CnRenderParams *p, char **ret, size_t *ret_size);
