/* SPDX-License-Identifier: Apache-2.0 */
/* `cloudnode-controller render`: the bootstrap assets an installer places on the bootstrap
 * machine, from an OpenShift-style Infrastructure object, rendered by the same functions the
 * agent uses (lib/render/render-static-pod.h, lib/render/render-cloud-conf.h). */
#pragma once

#include <json-c/json.h>

typedef struct RenderOptions {
        const char *dest_dir;
        const char *infrastructure_file;
        const char *images_file;       /* images.json; NULL: the operand's built-in image */
        const char *cloud_config_file; /* YAML {section: {key: value}}; NULL: none */
} RenderOptions;

/* The cloudnode platform id of an Infrastructure object (status.platformStatus.type, else
 * status.platform, else spec.platformSpec.type; "External" uses the external platformName),
 * lower-cased: "OpenStack" -> "openstack". -EINVAL with a message when there is none. */
int cn_render_infrastructure_platform(json_object *infra, char **ret, char **reterr_message);

int cn_controller_render(const RenderOptions *o);
