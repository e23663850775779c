/* SPDX-License-Identifier: Apache-2.0 */
/* The platform metadata parsers on arbitrary documents, and every renderer on what they accept.
 * The first input byte picks the platform; the rest is served as each of its documents. */
#include "fuzz.h"
#include "metadata-source.h"
#include "render-cloud-conf.h"
#include "render-env.h"
#include "render-kubelet.h"
#include "render-static-pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const platforms[] = { "aws", "openstack", "gcp", "azure", "digitalocean",
                                                 "hetzner", "proxmoxve", "file" };
        const CnMetadataSource *s;
        CnMetadataDocs d = {};
        CnInstanceMetadata *m = NULL;

        fuzz_setup();
        if (size < 1)
                return 0;
        s = cn_metadata_source_find(platforms[data[0] % ELEMENTSOF(platforms)]);
        data++, size--;
        for (const CnMetadataKey *k = s->keys ?: s->drive_keys ?: (const CnMetadataKey[]) { { "metadata.yaml" }, {} };
             k->path; k++)
                (void) cn_metadata_docs_put(&d, k->path, (const char *) data, size);
        if (cn_metadata_parse(s, &d, &m) >= 0) {
                CnRenderParams p = { .platform = m->platform, .metadata = m, .image = "img" };
                json_object *j = NULL;
                char *t = NULL;
                size_t n;

                if (cn_render_env(m, true, &t, &n) >= 0)
                        free(t);
                t = NULL;
                if (cn_render_kubelet_dropin(&p, &t, &n) >= 0)
                        free(t);
                t = NULL;
                if (cn_render_cloud_conf(&p, &t, &n) >= 0)
                        free(t);
                t = NULL;
                if (cn_render_static_pod_yaml(&p, &t, &n) >= 0)
                        free(t);
                if (cn_instance_metadata_to_json(m, &j) >= 0)
                        json_object_put(j);
                cn_instance_metadata_free(m);
        }
        cn_metadata_docs_done(&d);
        return 0;
}
