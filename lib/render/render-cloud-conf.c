/* SPDX-License-Identifier: Apache-2.0 */
/* cloud.conf (see render-cloud-conf.h). */
#include "ini-writer.h"
#include "json-util.h"
#include "render-cloud-conf.h"
#include "string-util.h"

static int set_global(json_object *sections, const char *key, const char *value) {
        if (isempty(value))
                return 0;
        return cn_json_set_string(sections, value, "Global", key, NULL);
}

/* "/subscriptions/S/resourceGroups/G/providers/..." -> the segment after name. */
static int resource_id_segment(const char *provider_id, const char *name, char **ret) {
        const char *p = provider_id ? strstr(provider_id, name) : NULL;
        size_t n;

        *ret = NULL;
        if (!p)
                return 0;
        p += strlen(name);
        n = strcspn(p, "/");
        if (n == 0)
                return 0;
        *ret = strndup(p, n);
        return *ret ? 0 : -ENOMEM;
}

static int add_metadata_defaults(json_object *sections, const CnRenderParams *p) {
        const CnInstanceMetadata *m = p->metadata;
        int r;

        if (!m || !p->platform)
                return 0;
        if (streq(p->platform, "aws"))
                return set_global(sections, "Zone", m->zone);
        if (streq(p->platform, "openstack"))
                return set_global(sections, "region", m->region);
        if (streq(p->platform, "gcp")) {
                /* gce://<project>/<zone>/<name> */
                const char *s = m->provider_id ? cn_startswith(m->provider_id, "gce://") : NULL;
                _cleanup_free_ char *project = s ? strndup(s, strcspn(s, "/")) : NULL;

                if (s && !project)
                        return -ENOMEM;
                if ((r = set_global(sections, "project-id", project)) < 0)
                        return r;
                return set_global(sections, "local-zone", m->zone);
        }
        if (streq(p->platform, "azure")) {
                _cleanup_free_ char *sub = NULL, *rg = NULL;

                if ((r = resource_id_segment(m->provider_id, "/subscriptions/", &sub)) < 0 ||
                    (r = resource_id_segment(m->provider_id, "/resourceGroups/", &rg)) < 0 ||
                    (r = set_global(sections, "location", m->region)) < 0 ||
                    (r = set_global(sections, "subscriptionId", sub)) < 0)
                        return r;
                return set_global(sections, "resourceGroup", rg);
        }
        return 0;
}

/* Copies the keys of members into [section] (or [section "subsection"]) of dst. An object among
 * a section's keys is a subsection of scalars, as cloud-provider-aws's [ServiceOverride "1"]. */
static int merge_section(json_object *dst, json_object *members, const char *section, const char *subsection) {
        int r;

        json_object_object_foreach(members, k, v) {
                if (json_object_is_type(v, json_type_object) && !subsection)
                        r = merge_section(dst, v, section, k);
                else if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array))
                        return -EINVAL;
                else if (subsection)
                        r = cn_json_set(dst, json_object_get(v), section, subsection, k, NULL);
                else
                        r = cn_json_set(dst, json_object_get(v), section, k, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Copies src's sections (or, with section set, src's keys into that section) over dst. */
static int merge(json_object *dst, json_object *src, const char *section) {
        int r;

        if (!src)
                return 0;
        if (!json_object_is_type(src, json_type_object))
                return -EINVAL;
        if (section)
                return merge_section(dst, src, section, NULL);
        json_object_object_foreach(src, k, v) {
                if (!json_object_is_type(v, json_type_object))
                        return -EINVAL;
                r = merge_section(dst, v, k, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_render_cloud_conf_json(const CnRenderParams *p, json_object **ret) {
        _cleanup_json_ json_object *sections = json_object_new_object();
        int r;

        if (!sections)
                return -ENOMEM;
        if ((r = add_metadata_defaults(sections, p)) < 0 || (r = merge(sections, p->cloud_config, NULL)) < 0 ||
            (r = merge(sections, p->credentials, "Global")) < 0)
                return r;
        *ret = TAKE_PTR(sections);
        return 0;
}

int cn_render_cloud_conf(const CnRenderParams *p, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *sections = NULL;
        _cleanup_ini_ CnIni *w = NULL;
        int r;

        r = cn_render_cloud_conf_json(p, &sections);
        if (r < 0)
                return r;
        r = cn_ini_new(&w);
        if (r < 0)
                return r;
        (void) cn_ini_add_json(w, sections);
        return cn_ini_finish(w, ret, ret_size);
}
