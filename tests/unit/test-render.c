/* SPDX-License-Identifier: Apache-2.0 */
/* Renderers of the node-local files: content, quoting that reads back exactly, and hostile values
 * that cannot change a file's structure. */
#include <sys/wait.h>

#include "cloud-config.h"
#include "json-util.h"
#include "render-cloud-conf.h"
#include "render-env.h"
#include "render-kubelet.h"
#include "render-static-pod.h"
#include "string-util.h"
#include "tap.h"
#include "yaml-util.h"

static char **strv1(const char *a) {
        char **l = calloc(2, sizeof(char *));
        l[0] = strdup(a);
        return l;
}

static CnInstanceMetadata *sample(const char *hostname) {
        CnInstanceMetadata *m = cn_instance_metadata_new("aws");
        m->instance_id = strdup("i-0123");
        m->provider_id = strdup("aws:///us-east-1a/i-0123");
        m->zone = strdup("us-east-1a");
        m->region = strdup("us-east-1");
        m->hostname = strdup(hostname);
        m->ipv4_private = calloc(3, sizeof(char *));
        m->ipv4_private[0] = strdup("10.0.0.1");
        m->ipv4_private[1] = strdup("10.0.0.2");
        m->extra_labels = strv1("topology.k8s.aws/zone-id=use1-az1");
        return m;
}

/* Runs `sh -c '. FILE; printf %s "$NAME"'` and returns its output. */
static char *sh_read_back(const char *content, const char *name) {
        char path[] = "/tmp/cn-test-render-XXXXXX";
        int fd = mkstemp(path);
        _cleanup_free_ char *cmd = NULL;
        char *out = calloc(1, 4096);
        FILE *p;

        if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t) strlen(content))
                abort();
        close(fd);
        if (asprintf(&cmd, "sh -c '. %s && printf %%s \"$%s\"'", path, name) < 0)
                abort();
        p = popen(cmd, "r");
        if (p) {
                size_t n = fread(out, 1, 4095, p);
                out[n] = 0;
                pclose(p);
        }
        unlink(path);
        return out;
}

static void test_env(void) {
        static const char hostile[] = "a\"b'c$(id)`id`\\d [Global] #x: &y ü";
        _cleanup_instance_metadata_ CnInstanceMetadata *m = sample(hostile);
        _cleanup_free_ char *text = NULL, *compat = NULL, *back = NULL, *back2 = NULL;
        size_t size;

        TAP_EQ_INT(cn_render_env(m, false, &text, &size), 0, "env: renders");
        TAP_OK(text && strstr(text, "CLOUDNODE_PLATFORM=\"aws\"\n") && strstr(text, "CLOUDNODE_ZONE=\"us-east-1a\"\n"),
               "env: KEY=\"value\" lines");
        TAP_OK(text && !strstr(text, "CLOUDNODE_INSTANCE_TYPE") && !strstr(text, "CLOUDNODE_IPV6"),
               "env: absent values omitted, never empty");
        TAP_OK(text && strstr(text, "CLOUDNODE_IPV4_PRIVATE=\"10.0.0.1,10.0.0.2\"\n"), "env: list comma-separated, in order");
        back = sh_read_back(text, "CLOUDNODE_HOSTNAME");
        TAP_EQ_STR(back, hostile, "env: sh reads a hostile value back exactly");
        back2 = sh_read_back(text, "CLOUDNODE_PROVIDER_ID");
        TAP_EQ_STR(back2, "aws:///us-east-1a/i-0123", "env: providerID read back");
        TAP_OK(text && !strstr(text, "AFTERBURN_"), "env: no Afterburn names by default");
        TAP_EQ_INT(cn_render_env(m, true, &compat, &size), 0, "env: renders with --afterburn-compat");
        TAP_OK(compat && strstr(compat, "AFTERBURN_AWS_INSTANCE_ID=\"i-0123\"\n") &&
                       strstr(compat, "AFTERBURN_AWS_IPV4_LOCAL=\"10.0.0.1\"\n") &&
                       strstr(compat, "AFTERBURN_AWS_AVAILABILITY_ZONE_ID=\"use1-az1\"\n"),
               "env: Afterburn's names for aws");
}

static void test_env_refuses_newline(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = sample("x\nCLOUDNODE_PLATFORM=evil");
        _cleanup_free_ char *text = NULL;
        size_t size;

        TAP_EQ_INT(cn_render_env(m, false, &text, &size), -EINVAL, "env: a newline is refused, not written");
}

static void test_kubelet(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = sample("node-1");
        _cleanup_free_ char *text = NULL, *text2 = NULL, *q = NULL;
        CnRenderParams p = { .platform = "aws", .metadata = m };
        size_t size;

        TAP_EQ_INT(cn_render_kubelet_dropin(&p, &text, &size), 0, "kubelet: renders");
        TAP_OK(text && strstr(text, "[Service]\nEnvironment=\"KUBELET_PROVIDERID=aws:///us-east-1a/i-0123\"\n"
                                    "Environment=\"KUBELET_NODE_NAME=node-1\"\n"),
               "kubelet: provider id and node name");
        p.node_name = "override";
        TAP_EQ_INT(cn_render_kubelet_dropin(&p, &text2, &size), 0, "kubelet: node name override");
        TAP_OK(text2 && strstr(text2, "KUBELET_NODE_NAME=override\""), "kubelet: nodeName from config wins");
        TAP_EQ_INT(cn_unit_quote_environment("K", "a\"b\\c%n", &q), 0, "kubelet: quoting");
        TAP_EQ_STR(q, "\"K=a\\\"b\\\\c%%n\"", "kubelet: quotes and backslashes escaped, % doubled");
}

static void test_cloud_conf(void) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = sample("node-1");
        _cleanup_json_ json_object *cfg = json_tokener_parse(
                "{\"Global\":{\"Zone\":\"override-zone\",\"KubernetesClusterTag\":\"c1\"},\"ServiceOverride\":{\"x\":\"y\","
                "\"1\":{\"Service\":\"ec2\",\"URL\":\"https://ec2.example.com\"}}}");
        _cleanup_json_ json_object *cred = json_tokener_parse("{\"secret\":\"p;a#s\\\"s\"}");
        _cleanup_json_ json_object *bad = json_tokener_parse("{\"secret\":\"x\\n[Evil]\\nk=v\"}");
        _cleanup_free_ char *text = NULL, *text2 = NULL, *text3 = NULL;
        CnRenderParams p = { .platform = "aws", .metadata = m };
        size_t size;

        TAP_EQ_INT(cn_render_cloud_conf(&p, &text, &size), 0, "cloud.conf: metadata only");
        TAP_OK(text && strstr(text, "[Global]") && strstr(text, "Zone = us-east-1a"), "cloud.conf: aws Zone from metadata");
        p.cloud_config = cfg;
        p.credentials = cred;
        TAP_EQ_INT(cn_render_cloud_conf(&p, &text2, &size), 0, "cloud.conf: with config and credentials");
        TAP_OK(text2 && strstr(text2, "Zone = override-zone") && !strstr(text2, "us-east-1a"), "cloud.conf: config wins");
        TAP_OK(text2 && strstr(text2, "KubernetesClusterTag = c1") && strstr(text2, "[ServiceOverride]"),
               "cloud.conf: config sections kept");
        TAP_OK(text2 && strstr(text2, "secret = \"p;a#s\\\"s\""), "cloud.conf: credential value quoted");
        {
                _cleanup_json_ json_object *parsed = NULL;
                _cleanup_free_ char *err = NULL;

                TAP_EQ_INT(cn_cloud_config_parse(text2, strlen(text2), &parsed, &err), 0,
                           "cloud.conf: the providers' reader parses it");
                TAP_EQ_STR(cn_cloud_config_get(parsed, "Global", "secret"), "p;a#s\"s",
                           "cloud.conf: a value with ; # and quotes reads back exactly");
                TAP_EQ_STR(cn_cloud_config_get(parsed, "Global", "Zone"), "override-zone", "cloud.conf: Zone reads back");
                TAP_EQ_STR(cn_cloud_config_get(parsed, "ServiceOverride", "x"), "y", "cloud.conf: other section");
                TAP_EQ_STR(cn_cloud_config_get(parsed, "ServiceOverride \"1\"", "URL"), "https://ec2.example.com",
                           "cloud.conf: an object in a section is a subsection ([ServiceOverride \"1\"])");
        }
        p.credentials = bad;
        TAP_OK(cn_render_cloud_conf(&p, &text3, &size) < 0 && !text3, "cloud.conf: a newline cannot start a section");
}

static void test_static_pod(void) {
        static const char hostile_image[] = "registry/x:1\n    hostPID: true\n  - name: evil";
        _cleanup_json_ json_object *pod = NULL, *back = NULL;
        _cleanup_free_ char *yaml = NULL, *error = NULL;
        CnRenderParams p = { .platform = "aws", .image = "ghcr.io/cloudnode/cloudnode-initializer:0.1.0" };
        json_object *c, *args;
        int64_t uid = -1;
        size_t size;

        TAP_EQ_INT(cn_render_static_pod(&p, &pod), 0, "pod: renders");
        if (!pod)
                return;
        c = json_object_array_get_idx(cn_json_get(pod, "spec", "containers", NULL), 0);
        TAP_EQ_STR(cn_json_string(pod, "metadata", "name", NULL), "cloudnode-cloud-node", "pod: name");
        TAP_EQ_STR(cn_json_string(pod, "metadata", "namespace", NULL), "kube-system", "pod: namespace");
        TAP_EQ_STR(cn_json_string(c, "name", NULL), "cloud-controller-manager", "pod: container name for image substitution");
        TAP_OK(json_object_get_boolean(cn_json_get(pod, "spec", "hostNetwork", NULL)), "pod: hostNetwork");
        TAP_EQ_STR(cn_json_string(pod, "spec", "priorityClassName", NULL), "system-node-critical", "pod: priority class");
        args = cn_json_get(c, "args", NULL);
        {
                bool ctl = false, le = false, kc = false, cc = false;
                for (size_t i = 0; i < json_object_array_length(args); i++) {
                        const char *a = json_object_get_string(json_object_array_get_idx(args, i));
                        ctl |= streq(a, "--controllers=cloud-node");
                        le |= streq(a, "--leader-elect=false");
                        kc |= streq(a, "--kubeconfig=/etc/kubernetes/bootstrap-secrets/kubeconfig");
                        cc |= streq(a, "--cloud-config=/etc/kubernetes/bootstrap-configs/cloud.conf");
                }
                TAP_OK(ctl && le && kc && cc, "pod: cloud-node only, no leader election, bootstrap kubeconfig and cloud.conf");
        }
        TAP_EQ_STR(cn_json_string(c, "livenessProbe", "httpGet", "path", NULL), "/healthz", "pod: liveness /healthz");
        TAP_EQ_INT(json_object_get_int(cn_json_get(c, "livenessProbe", "httpGet", "port", NULL)), 10269,
                   "pod: liveness on its own health port, not the Deployment's 10267 on the same host network");
        TAP_OK(cn_json_get(c, "resources", "requests", NULL) && !cn_json_get(c, "resources", "limits", NULL),
               "pod: requests, no limits");
        TAP_OK(cn_json_get_int64(c, &uid, "securityContext", "runAsUser", NULL) >= 0 && uid == 0 &&
               json_object_array_length(cn_json_get(c, "securityContext", "capabilities", "drop", NULL)) == 1,
               "pod: runs as uid 0 without capabilities, to read the root-owned 0600 bootstrap files");
        TAP_EQ_INT(json_object_array_length(cn_json_get(pod, "spec", "volumes", NULL)), 2, "pod: two volumes");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(cn_json_get(pod, "spec", "volumes", NULL), 0), "hostPath",
                                  "path", NULL),
                   "/etc/kubernetes/bootstrap-secrets", "pod: hostPath of the bootstrap kubeconfig");

        p.image = hostile_image;
        json_object_put(pod);
        pod = NULL;
        TAP_EQ_INT(cn_render_static_pod(&p, &pod), 0, "pod: hostile image renders");
        TAP_EQ_INT(cn_render_static_pod_yaml(&p, &yaml, &size), 0, "pod: emitted as YAML");
        TAP_EQ_INT(cn_yaml_parse(yaml, size, 1 << 20, &back, &error), 0, "pod: YAML parses back");
        TAP_OK(back && cn_json_equal(pod, back), "pod: the hostile image stays one string, structure unchanged");
        p.image = NULL;
        json_object_put(pod);
        pod = NULL;
        TAP_EQ_INT(cn_render_static_pod(&p, &pod), -EINVAL, "pod: no image is an error");
}

static void test_resolve_image(void) {
        _cleanup_node_config_ CnNodeConfig *c = NULL;
        _cleanup_json_ json_object *doc = json_tokener_parse("{\"images\":{\"cloudControllerManager\":\"img:1\"}}");
        _cleanup_json_ json_object *doc2 = json_tokener_parse("{\"images\":\"/nonexistent/images.json\"}");
        _cleanup_node_config_ CnNodeConfig *c2 = NULL;
        _cleanup_free_ char *image = NULL, *image2 = NULL, *err = NULL;

        TAP_EQ_INT(cn_node_config_from_json(doc, &c, NULL), 0, "images: inline config");
        TAP_EQ_INT(cn_render_resolve_image(c, NULL, &image, NULL), 0, "images: inline resolves");
        TAP_EQ_STR(image, "img:1", "images: cloudControllerManager key");
        TAP_EQ_INT(cn_node_config_from_json(doc2, &c2, NULL), 0, "images: path config");
        TAP_OK(cn_render_resolve_image(c2, NULL, &image2, &err) < 0 && err && strstr(err, "/nonexistent/images.json"),
               "images: missing file named in the error");
}

int main(void) {
        test_env();
        test_env_refuses_newline();
        test_kubelet();
        test_cloud_conf();
        test_static_pod();
        test_resolve_image();
        return tap_done();
}
