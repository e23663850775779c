/* SPDX-License-Identifier: Apache-2.0 */
/* `cloudnode-controller render`. See controller-render.h. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "controller-assets.h"
#include "controller-operand.h"
#include "controller-render.h"
#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "render-cloud-conf.h"
#include "render-static-pod.h"
#include "yaml-util.h"

int cn_render_infrastructure_platform(json_object *infra, char **ret, char **reterr_message) {
        const char *type = cn_json_string(infra, "status", "platformStatus", "type", NULL);
        _cleanup_free_ char *id = NULL;

        if (!type)
                type = cn_json_string(infra, "status", "platform", NULL);
        if (!type)
                type = cn_json_string(infra, "spec", "platformSpec", "type", NULL);
        if (type && streq(type, "External")) {
                /* Clouds OpenShift has no type for (Hetzner among them) are "External" with a name. */
                type = cn_json_string(infra, "spec", "platformSpec", "external", "platformName", NULL);
                if (!type)
                        type = cn_json_string(infra, "status", "platformStatus", "external", "platformName", NULL);
        }
        if (isempty(type)) {
                if (reterr_message)
                        *reterr_message = strdup("the Infrastructure object names no platform "
                                                 "(status.platformStatus.type, spec.platformSpec.type)");
                return -EINVAL;
        }
        id = strdup(type);
        if (!id)
                return -ENOMEM;
        for (char *p = id; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        *ret = TAKE_PTR(id);
        return 0;
}

/* The default image is the operand Deployment's, so render and run agree without a second list. */
static int builtin_image(char **ret) {
        _cleanup_json_ json_object *assets = NULL;
        int r;

        r = cn_controller_assets_load(&assets);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(assets); i++) {
                json_object *o = json_object_array_get_idx(assets, i);
                json_object *cs = cn_json_get(o, "spec", "template", "spec", "containers", NULL);

                for (size_t j = 0; cs && j < json_object_array_length(cs); j++) {
                        json_object *ct = json_object_array_get_idx(cs, j);
                        const char *name = cn_json_string(ct, "name", NULL), *image = cn_json_string(ct, "image", NULL);

                        if (name && image && streq(name, "cloud-controller-manager")) {
                                *ret = strdup(image);
                                return *ret ? 0 : -ENOMEM;
                        }
                }
        }
        return -ENOENT;
}

static int image_from_file(const char *path, char **ret) {
        _cleanup_free_ char *text = NULL, *err = NULL;
        _cleanup_json_ json_object *images = NULL;
        const char *image;
        int r;

        r = cn_read_file(NULL, path, CN_JSON_MAX_SIZE, &text, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to read %s: %m", path);
        r = cn_operand_parse_images(text, &images, &err);
        if (r < 0)
                return log_error_errno(r, "%s: %s", path, strna(err));
        image = cn_json_string(images, CN_OPERAND_IMAGE_CCM_KEY, NULL);
        if (!image)
                return log_error_errno(ENOENT, "%s: no \"%s\" image", path, CN_OPERAND_IMAGE_CCM_KEY);
        *ret = strdup(image);
        return *ret ? 0 : log_oom();
}

int cn_controller_render(const RenderOptions *o) {
        _cleanup_json_ json_object *infra = NULL, *cloud_config = NULL, *pod = NULL;
        _cleanup_free_ char *err = NULL, *platform = NULL, *image = NULL, *pod_yaml = NULL, *conf = NULL,
                            *pod_path = NULL, *file = NULL;
        const char *name, *kind;
        size_t pod_size, conf_size;
        CnRenderParams p = {};
        int r;

        r = cn_yaml_parse_file(NULL, o->infrastructure_file, CN_YAML_MAX_SIZE, &infra, &err);
        if (r < 0)
                return log_error_errno(r, "Failed to read %s: %s", o->infrastructure_file, err ?: strerror(-r));
        if (!streq(strempty(cn_json_string(infra, "kind", NULL)), "Infrastructure"))
                return log_error_errno(EINVAL, "%s: not an Infrastructure object (kind: %s)", o->infrastructure_file,
                                       strna(cn_json_string(infra, "kind", NULL)));
        r = cn_render_infrastructure_platform(infra, &platform, &err);
        if (r < 0)
                return log_error_errno(r, "%s: %s", o->infrastructure_file, strna(err));

        if (o->cloud_config_file) {
                free(err);
                err = NULL;
                r = cn_yaml_parse_file(NULL, o->cloud_config_file, CN_YAML_MAX_SIZE, &cloud_config, &err);
                if (r < 0)
                        return log_error_errno(r, "Failed to read %s: %s", o->cloud_config_file,
                                               err ?: strerror(-r));
                if (!json_object_is_type(cloud_config, json_type_object))
                        return log_error_errno(EINVAL, "%s: expected a mapping of sections", o->cloud_config_file);
        }
        r = o->images_file ? image_from_file(o->images_file, &image) : builtin_image(&image);
        if (r < 0)
                return o->images_file ? r : log_error_errno(r, "No built-in image: %m");

        p = (CnRenderParams) {
                .platform = platform,
                .image = image,
                .cloud_config = cloud_config,
        };
        r = cn_render_static_pod(&p, &pod);
        if (r < 0)
                return log_error_errno(r, "Failed to render the bootstrap static pod: %m");
        name = cn_json_string(pod, "metadata", "name", NULL);
        kind = cn_json_string(pod, "kind", NULL);
        if (!name || !kind)
                return log_error_errno(EINVAL, "Rendered static pod has no name or kind");
        r = cn_yaml_emit(pod, &pod_yaml, &pod_size);
        if (r < 0)
                return log_error_errno(r, "Failed to write the static pod as YAML: %m");
        r = cn_render_cloud_conf(&p, &conf, &conf_size);
        if (r == -EINVAL)
                return log_error_errno(r, "Failed to render cloud.conf from %s: a section or key name is not "
                                          "valid INI, or a value contains a line break or control character",
                                       strna(o->cloud_config_file));
        if (r < 0)
                return log_error_errno(r, "Failed to render cloud.conf: %m");

        if (asprintf(&file, "%s-%s.yaml", name, kind) < 0 || asprintf(&pod_path, "bootstrap/%s", file) < 0)
                return log_oom();
        for (char *c = pod_path; *c; c++)
                *c = (char) tolower((unsigned char) *c);
        r = cn_write_file_atomic(o->dest_dir, pod_path, pod_yaml, pod_size, 0644, CN_UID_INVALID, CN_GID_INVALID,
                                 CN_WRITE_MKDIR);
        if (r < 0)
                return log_error_errno(r, "Failed to write %s/%s: %m", o->dest_dir, pod_path);
        /* cloud.conf may carry credentials. */
        r = cn_write_file_atomic(o->dest_dir, "config/cloud.conf", conf, conf_size, 0600, CN_UID_INVALID,
                                 CN_GID_INVALID, CN_WRITE_MKDIR);
        if (r < 0)
                return log_error_errno(r, "Failed to write %s/config/cloud.conf: %m", o->dest_dir);
        log_info("Wrote %s/%s and %s/config/cloud.conf for platform %s", o->dest_dir, pod_path, o->dest_dir,
                 platform);
        return 0;
}
