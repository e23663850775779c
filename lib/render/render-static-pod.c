/* SPDX-License-Identifier: Apache-2.0 */
/* Bootstrap static pod (see render-static-pod.h). */
#include "json-util.h"
#include "render-static-pod.h"
#include "yaml-util.h"

/* Builds JSON from a compact description without string templates: every value that comes from
 * outside (image, platform, port) is set as a json-c value, so it cannot change the structure. */
static json_object *str(const char *s) {
        return json_object_new_string(s);
}

static json_object *obj(const char *k1, json_object *v1, ...) _sentinel_;
static json_object *obj(const char *k1, json_object *v1, ...) {
        json_object *o = json_object_new_object();
        const char *k = k1;
        json_object *v = v1;
        bool failed = !o;
        va_list ap;

        va_start(ap, v1);
        while (k) {
                if (!v || failed || json_object_object_add(o, k, v) < 0) {
                        json_object_put(v);
                        failed = true;
                }
                k = va_arg(ap, const char *);
                if (k)
                        v = va_arg(ap, json_object *);
        }
        va_end(ap);
        if (failed) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static json_object *arr(json_object *first, ...) _sentinel_;
static json_object *arr(json_object *first, ...) {
        json_object *a = json_object_new_array(), *v = first;
        bool failed = !a;
        va_list ap;

        va_start(ap, first);
        while (v) {
                if (failed || json_object_array_add(a, v) < 0) {
                        json_object_put(v);
                        failed = true;
                }
                v = va_arg(ap, json_object *);
        }
        va_end(ap);
        if (failed) {
                json_object_put(a);
                return NULL;
        }
        return a;
}

static json_object *strf(const char *fmt, ...) _printf_(1, 2);
static json_object *strf(const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        return n < 0 ? NULL : json_object_new_string(s);
}

int cn_render_static_pod(const CnRenderParams *p, json_object **ret) {
        unsigned port = p->health_port ?: CN_HEALTH_PORT_DEFAULT;
        json_object *args, *pod;

        if (isempty(p->image) || isempty(p->platform))
                return -EINVAL;
        args = arr(strf("--kubeconfig=%s", CN_BOOTSTRAP_KUBECONFIG_PATH),
                   strf("--cloud-config=%s", CN_CLOUD_CONF_PATH),
                   strf("--cloud-provider=%s", p->platform),
                   str("--controllers=cloud-node"),
                   str("--leader-elect=false"),
                   strf("--port=%u", port),
                   NULL);
        pod = obj("apiVersion", str("v1"),
                  "kind", str("Pod"),
                  "metadata", obj("name", str("cloudnode-cloud-node"),
                                  "namespace", str("kube-system"),
                                  "labels", obj("app.kubernetes.io/name", str("cloudnode"),
                                                "app.kubernetes.io/component", str("cloud-node-bootstrap"),
                                                NULL),
                                  NULL),
                  "spec", obj("hostNetwork", json_object_new_boolean(true),
                              "priorityClassName", str("system-node-critical"),
                              "tolerations", arr(obj("operator", str("Exists"), NULL), NULL),
                              "containers", arr(obj(
                                      "name", str("cloud-controller-manager"),
                                      "image", str(p->image),
                                      "imagePullPolicy", str("IfNotPresent"),
                                      "command", arr(str("/usr/bin/cloudnode-initializer"), NULL),
                                      "args", args,
                                      "livenessProbe", obj("httpGet", obj("host", str("127.0.0.1"),
                                                                          "path", str("/healthz"),
                                                                          "port", json_object_new_int((int) port),
                                                                          "scheme", str("HTTP"),
                                                                          NULL),
                                                           "initialDelaySeconds", json_object_new_int(10),
                                                           "periodSeconds", json_object_new_int(10),
                                                           NULL),
                                      "resources", obj("requests", obj("cpu", str("50m"),
                                                                       "memory", str("64Mi"),
                                                                       NULL),
                                                       NULL),
                                      /* The bootstrap kubeconfig and cloud.conf on the host are root's,
                                       * mode 0600; the image's own user (65532) cannot read them. uid 0
                                       * with no capabilities reads them as their owner and nothing else. */
                                      "securityContext", obj("runAsUser", json_object_new_int(0),
                                                             "runAsNonRoot", json_object_new_boolean(false),
                                                             "allowPrivilegeEscalation",
                                                             json_object_new_boolean(false),
                                                             "readOnlyRootFilesystem", json_object_new_boolean(true),
                                                             "capabilities", obj("drop", arr(str("ALL"), NULL),
                                                                                 NULL),
                                                             NULL),
                                      "volumeMounts", arr(obj("name", str("secrets"),
                                                              "mountPath", str(CN_BOOTSTRAP_SECRETS_DIR),
                                                              "readOnly", json_object_new_boolean(true),
                                                              NULL),
                                                          obj("name", str("config"),
                                                              "mountPath", str(CN_BOOTSTRAP_CONFIGS_DIR),
                                                              "readOnly", json_object_new_boolean(true),
                                                              NULL),
                                                          NULL),
                                      NULL), NULL),
                              "volumes", arr(obj("name", str("secrets"),
                                                 "hostPath", obj("path", str(CN_BOOTSTRAP_SECRETS_DIR),
                                                                 "type", str("Directory"),
                                                                 NULL),
                                                 NULL),
                                             obj("name", str("config"),
                                                 "hostPath", obj("path", str(CN_BOOTSTRAP_CONFIGS_DIR),
                                                                 "type", str("Directory"),
                                                                 NULL),
                                                 NULL),
                                             NULL),
                              NULL),
                  NULL);
        if (!pod)
                return -ENOMEM;
        *ret = pod;
        return 0;
}

int cn_render_static_pod_yaml(const CnRenderParams *p, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *pod = NULL;
        int r;

        r = cn_render_static_pod(p, &pod);
        if (r < 0)
                return r;
        return cn_yaml_emit(pod, ret, ret_size);
}

int cn_render_resolve_image(const CnNodeConfig *cfg, const char *root, char **ret, char **ret_error) {
        _cleanup_json_ json_object *images = NULL;
        _cleanup_free_ char *error = NULL;
        const char *image;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (cfg->images_inline)
                images = json_object_get(cfg->images_inline);
        else {
                r = cn_json_parse_file(root, cfg->images_path ?: CN_IMAGES_PATH, 1024 * 1024, &images, &error);
                if (r < 0) {
                        if (ret_error && asprintf(ret_error, "%s: %s", cfg->images_path ?: CN_IMAGES_PATH,
                                                  error ?: strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
        }
        image = cn_json_string(images, CN_IMAGES_KEY, NULL);
        if (isempty(image)) {
                if (ret_error && asprintf(ret_error, "%s: no image for key '%s'",
                                          cfg->images_inline ? "images" : strna(cfg->images_path), CN_IMAGES_KEY) < 0)
                        *ret_error = NULL;
                return -ENOENT;
        }
        *ret = strdup(image);
        return *ret ? 0 : -ENOMEM;
}
