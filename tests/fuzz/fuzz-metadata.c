/* SPDX-License-Identifier: Apache-2.0 */
/* Every platform's metadata parser on hostile documents. The first byte picks the platform; the
 * rest is served as every document that platform reads. Whatever a parser accepts must pass
 * validation and render into an env file without a line break inside a value. */
#include "fuzz.h"
#include "metadata-source.h"
#include "render-env.h"

static const char *const platforms[] = { "aws", "openstack", "hetzner", "gcp", "azure", "digitalocean",
                                         "proxmoxve", "file" };

static void put_keys(CnMetadataDocs *d, const CnMetadataKey *keys, const char *data, size_t size) {
        for (const CnMetadataKey *k = keys; k && k->path; k++)
                if (cn_metadata_docs_put(d, k->path, data, size) < 0)
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CnMetadataDocs docs = {};
        CnInstanceMetadata *m = NULL;
        const CnMetadataSource *s;
        _cleanup_free_ char *text = NULL, *env = NULL;
        size_t env_size = 0;

        fuzz_setup();
        if (size < 1)
                return 0;
        s = cn_metadata_source_find(platforms[data[0] % ELEMENTSOF(platforms)]);
        if (!s)
                abort();
        text = fuzz_strndup(data + 1, size - 1);
        put_keys(&docs, s->keys, text, size - 1);
        put_keys(&docs, s->drive_keys, text, size - 1);
        put_keys(&docs, s->host_keys, text, size - 1);
        if (s->file && cn_metadata_docs_put(&docs, s->file, text, size - 1) < 0)
                abort();
        if (cn_metadata_parse(s, &docs, &m) >= 0) {
                if (cn_render_env(m, true, &env, &env_size) >= 0) {
                        /* Each line is a comment or NAME="value": a value never spans lines. */
                        for (char *line = env, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                                nl = strchr(line, '\n');
                                if (line[0] != '#' && line != nl && !strchr(line, '=')) {
                                        fprintf(stderr, "env file line without '=':\n%s\n", env);
                                        abort();
                                }
                        }
                }
                cn_instance_metadata_free(m);
        }
        cn_metadata_docs_done(&docs);
        return 0;
}
