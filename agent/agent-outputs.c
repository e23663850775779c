/* SPDX-License-Identifier: Apache-2.0 */
/* The node-local files: rendered all first, so that a value no output can carry leaves every
 * previous file in place, then written atomically, each only when its content changed. */
#include <sys/stat.h>

#include "agent.h"
#include "fileio.h"
#include "log.h"
#include "provider.h"
#include "render-cloud-conf.h"
#include "render-env.h"
#include "render-kubelet.h"
#include "render-static-pod.h"
#include "yaml-util.h"

typedef struct Output {
        const char *path;
        mode_t mode;
        CnWriteFlags flags;
        bool secret; /* never printed by --dry-run */
        char *data;
        size_t size;
} Output;

static void outputs_free(Output *o, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(o[i].data);
}

static int load_credentials(Manager *m, json_object **ret) {
        _cleanup_free_ char *error = NULL;
        int r;

        *ret = NULL;
        if (!m->config->credentials_file)
                return 0;
        r = cn_yaml_parse_file(m->args->root, m->config->credentials_file, 1024 * 1024, ret, &error);
        if (r < 0)
                /* The loader's message names a line and column, never file content. */
                return log_error_errno(r, "Failed to read the credentials file %s: %s", m->config->credentials_file,
                                       error ?: strerror(-r));
        if (!json_object_is_type(*ret, json_type_object))
                return log_error_errno(EINVAL, "The credentials file %s must be a mapping of keys to values.",
                                       m->config->credentials_file);
        return 0;
}

int agent_write_outputs(Manager *m, unsigned *ret_written) {
        Output out[4] = {
                { CN_ENV_FILE_PATH, 0644, CN_WRITE_MKDIR | CN_WRITE_NO_SYNC },
                { CN_KUBELET_DROPIN_PATH, 0644, CN_WRITE_MKDIR },
                { CN_CLOUD_CONF_PATH, 0600, CN_WRITE_MKDIR, true },
                { CN_STATIC_POD_PATH, 0600, CN_WRITE_MKDIR },
        };
        size_t n = m->config->role == CN_ROLE_WORKER ? 2 : 3;
        _cleanup_json_ json_object *credentials = NULL;
        _cleanup_free_ char *image = NULL, *image_error = NULL;
        CnRenderParams p = {
                .platform = m->metadata->platform,
                .metadata = m->metadata,
                .node_name = m->config->node_name,
                .health_port = m->config->health_port,
                .cloud_config = m->config->cloud_config,
        };
        unsigned written = 0;
        int r;

        r = cn_render_env(m->metadata, m->args->afterburn_compat, &out[0].data, &out[0].size);
        if (r < 0) {
                log_error_errno(r, "Failed to render %s: %m", CN_ENV_FILE_PATH);
                goto finish;
        }
        r = cn_render_kubelet_dropin(&p, &out[1].data, &out[1].size);
        if (r == -EBADMSG) {
                log_error("The node name '%s' is not a valid Kubernetes Node name (a lower-case DNS-1123 "
                          "subdomain); nothing written.", strna(p.node_name ?: m->metadata->hostname));
                goto finish;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to render %s: %m", CN_KUBELET_DROPIN_PATH);
                goto finish;
        }
        if (n > 2) {
                r = load_credentials(m, &credentials);
                if (r < 0)
                        goto finish;
                p.credentials = credentials;
                r = cn_render_cloud_conf(&p, &out[2].data, &out[2].size);
                if (r < 0) {
                        log_error_errno(r, "Failed to render %s (check cloudConfig and the credentials file): %m",
                                        CN_CLOUD_CONF_PATH);
                        goto finish;
                }
        }
        /* Elsewhere the static pod's initializer would exit ("Unknown cloud provider") and crash-loop;
         * the in-cluster initializer and the node-mode one initialize the Nodes there. */
        m->static_pod = n > 2 && cn_provider_find(m->metadata->platform);
        if (n > 2 && !m->static_pod)
                log_info("Platform %s has no cluster-mode provider in this build: no bootstrap static pod.",
                         m->metadata->platform);
        if (m->static_pod) {
                n = 4;
                r = cn_render_resolve_image(m->config, m->args->root, &image, &image_error);
                if (r < 0) {
                        log_error_errno(r, "No image for the bootstrap static pod: %s", strna(image_error));
                        goto finish;
                }
                p.image = image;
                r = cn_render_static_pod_yaml(&p, &out[3].data, &out[3].size);
                if (r < 0) {
                        log_error_errno(r, "Failed to render %s: %m", CN_STATIC_POD_PATH);
                        goto finish;
                }
        }

        for (size_t i = 0; i < n; i++) {
                if (m->args->dry_run) {
                        printf("# %s (mode %04o)\n", out[i].path, (unsigned) out[i].mode);
                        if (out[i].secret)
                                printf("# content not shown: it may hold credentials\n");
                        else
                                fwrite(out[i].data, 1, out[i].size, stdout);
                        continue;
                }
                r = cn_write_file_atomic(m->args->root, out[i].path, out[i].data, out[i].size, out[i].mode,
                                         CN_UID_INVALID, CN_GID_INVALID, out[i].flags);
                if (r < 0) {
                        log_error_errno(r, "Failed to write %s: %m", out[i].path);
                        goto finish;
                }
                if (r > 0) {
                        written++;
                        log_info("Wrote %s.", out[i].path);
                } else
                        log_debug("%s unchanged.", out[i].path);
        }
        if (ret_written)
                *ret_written = written;
        r = (int) written;
finish:
        outputs_free(out, ELEMENTSOF(out));
        return r;
}
