/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's providerSpec to cloudnode's provider spec and credentials. See
 * mc-machine-spec.h. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "json-util.h"
#include "mc-machine-spec.h"
#include "string-util.h"

typedef struct Ctx {
        const char *ns;
        McLookup lookup;
        McGetenv getenv_fn;
        void *userdata;
        McMachineSpec *out;
        char **reason;
} Ctx;

static int fail(Ctx *c, int error, const char *fmt, ...) _printf_(3, 4);
static int fail(Ctx *c, int error, const char *fmt, ...) {
        va_list ap;

        free(*c->reason);
        *c->reason = NULL;
        va_start(ap, fmt);
        if (vasprintf(c->reason, fmt, ap) < 0)
                *c->reason = NULL;
        va_end(ap);
        return error;
}

static void erase(char *s) {
        if (s)
                explicit_bzero(s, strlen(s));
        free(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char *, erase);

static const char *ref_kind_name(McRefKind k) {
        return k == MC_REF_SECRET ? "secretKeyRef" : "configMapKeyRef";
}

/* A secretKeyRef/configMapKeyRef with all three members, as machine-controller requires before it
 * reads one: 1 and the value in *ret, 0 when o holds no such reference. */
static int resolve_ref(Ctx *c, json_object *o, McRefKind kind, const char *field, char **ret) {
        json_object *r = json_object_object_get(o, ref_kind_name(kind));
        McRef ref = { .kind = kind };
        const char *v = NULL;
        int k;

        if (!r)
                return 0;
        ref.namespace = cn_json_string(r, "namespace", NULL);
        ref.name = cn_json_string(r, "name", NULL);
        ref.key = cn_json_string(r, "key", NULL);
        if (isempty(ref.namespace) || isempty(ref.name) || isempty(ref.key))
                return 0;
        if (!streq(ref.namespace, c->ns))
                return fail(c, -EINVAL,
                            "cloudProviderSpec.%s.%s names namespace %s: only Secrets and ConfigMaps of the "
                            "Machine's namespace %s are read", field, ref_kind_name(kind), ref.namespace, c->ns);
        k = c->lookup(&ref, &v, c->userdata);
        if (k == -EAGAIN) {
                c->out->pending = ref;
                return -EAGAIN;
        }
        if (k == -ENOENT)
                return fail(c, -ENOENT, "cloudProviderSpec.%s: %s %s has no key %s (or does not exist)", field,
                            kind == MC_REF_SECRET ? "Secret" : "ConfigMap", ref.name, ref.key);
        if (k < 0)
                return fail(c, k, "cloudProviderSpec.%s: %s %s is not usable", field,
                            kind == MC_REF_SECRET ? "Secret" : "ConfigMap", ref.name);
        *ret = strdup(strempty(v));
        return *ret ? 1 : -ENOMEM;
}

/* A ConfigVarString: *ret is the value ("" when unset, then env's value when env is given and
 * set); *ret_from_env tells where it came from. */
static int configvar(Ctx *c, json_object *v, const char *field, const char *env, char **ret, bool *ret_from_env) {
        _cleanup_(erasep) char *s = NULL;
        const char *e;
        int k;

        if (ret_from_env)
                *ret_from_env = false;
        if (v && json_object_is_type(v, json_type_string))
                s = strdup(json_object_get_string(v));
        else if (v && json_object_is_type(v, json_type_object)) {
                k = resolve_ref(c, v, MC_REF_SECRET, field, &s);
                if (k == 0)
                        k = resolve_ref(c, v, MC_REF_CONFIGMAP, field, &s);
                if (k < 0)
                        return k;
                if (k == 0) {
                        json_object *val = json_object_object_get(v, "value");

                        if (val && !json_object_is_type(val, json_type_string))
                                return fail(c, -EINVAL, "cloudProviderSpec.%s.value must be a string", field);
                        s = strdup(val ? json_object_get_string(val) : "");
                }
        } else if (!v || json_object_is_type(v, json_type_null))
                s = strdup("");
        else
                return fail(c, -EINVAL, "cloudProviderSpec.%s must be a string or a secretKeyRef/configMapKeyRef",
                            field);
        if (!s)
                return -ENOMEM;
        if (isempty(s) && env && c->getenv_fn && !isempty(e = c->getenv_fn(env, c->userdata))) {
                erase(s);
                s = strdup(e);
                if (!s)
                        return -ENOMEM;
                if (ret_from_env)
                        *ret_from_env = true;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* A ConfigVarBool: 1 true, 0 false, -ENODATA unset. */
static int configvar_bool(Ctx *c, json_object *v, const char *field) {
        _cleanup_(erasep) char *s = NULL;
        int k;

        if (!v || json_object_is_type(v, json_type_null))
                return -ENODATA;
        if (json_object_is_type(v, json_type_boolean))
                return json_object_get_boolean(v);
        if (json_object_is_type(v, json_type_object)) {
                json_object *val = json_object_object_get(v, "value");

                if (val && json_object_is_type(val, json_type_boolean) &&
                    !json_object_object_get(v, "secretKeyRef") && !json_object_object_get(v, "configMapKeyRef"))
                        return json_object_get_boolean(val);
        }
        k = configvar(c, v, field, NULL, &s, NULL);
        if (k < 0)
                return k;
        if (isempty(s))
                return -ENODATA;
        k = cn_parse_boolean(s);
        if (k < 0)
                return fail(c, -EINVAL, "cloudProviderSpec.%s must be true or false", field);
        return k;
}

/* A ConfigVarString that lands in the provider spec or the cloud config (skipped when empty). */
static int copy_var(Ctx *c, json_object *src, const char *field, const char *env, json_object *dst,
                    const char *section, const char *to, bool *ret_from_env) {
        _cleanup_(erasep) char *s = NULL;
        int k;

        k = configvar(c, json_object_object_get(src, field), field, env, &s, ret_from_env);
        if (k < 0)
                return k;
        if (isempty(s))
                return 0;
        return section ? cn_json_set_string(dst, s, section, to, NULL) : cn_json_set_string(dst, s, to, NULL);
}

/* Settings machine-controller has and cloudnode's provider does not: refused when set, so that a
 * firewall or a floating IP the user asked for is never silently left out. */
static int refuse_if_set(Ctx *c, json_object *src, const char *field, const char *provider) {
        json_object *v = json_object_object_get(src, field);
        _cleanup_(erasep) char *s = NULL;
        int k;

        if (!v || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_array)) {
                if (json_object_array_length(v) == 0)
                        return 0;
        } else if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
                if (json_object_get_double(v) == 0)
                        return 0;
        } else if (json_object_is_type(v, json_type_boolean)) {
                if (!json_object_get_boolean(v))
                        return 0;
        } else {
                k = configvar(c, v, field, NULL, &s, NULL);
                if (k < 0)
                        return k;
                if (isempty(s) || cn_parse_boolean(s) == 0)
                        return 0;
        }
        return fail(c, -ENOTSUP, "cloudProviderSpec.%s is not supported by cloudnode's %s provider; remove it",
                    field, provider);
}

static int check_keys(Ctx *c, json_object *src, const char *const *known, const char *provider) {
        json_object_object_foreach(src, k, v) {
                bool ok = false;

                (void) v;
                for (size_t i = 0; known[i] && !ok; i++)
                        ok = streq(k, known[i]);
                if (!ok)
                        return fail(c, -EINVAL, "cloudProviderSpec.%s is not a %s setting", k, provider);
        }
        return 0;
}

static int string_map(Ctx *c, json_object *src, const char *field, json_object *dst, const char *to) {
        json_object *m = json_object_object_get(src, field), *copy = NULL;

        if (!m || json_object_is_type(m, json_type_null))
                return 0;
        if (!json_object_is_type(m, json_type_object))
                return fail(c, -EINVAL, "cloudProviderSpec.%s must be a map of strings", field);
        json_object_object_foreach(m, k, v) {
                (void) k;
                if (!json_object_is_type(v, json_type_string))
                        return fail(c, -EINVAL, "cloudProviderSpec.%s.%s must be a string", field, k);
        }
        if (json_object_object_length(m) == 0)
                return 0;
        if (json_object_deep_copy(m, &copy, NULL) < 0)
                return -ENOMEM;
        return cn_json_set(dst, copy, to, NULL);
}

/* A list of ConfigVarStrings, as a JSON array of its non-empty values (NULL when there are none);
 * as_ids: Hetzner IDs, which its API takes as numbers. */
static int var_list(Ctx *c, json_object *src, const char *field, bool as_ids, json_object **ret) {
        json_object *v = json_object_object_get(src, field);
        _cleanup_json_ json_object *out = NULL;
        int k;

        *ret = NULL;
        if (!v || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_array))
                return fail(c, -EINVAL, "cloudProviderSpec.%s must be a list", field);
        out = json_object_new_array();
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                _cleanup_(erasep) char *s = NULL;
                json_object *item;
                uint64_t id;

                k = configvar(c, json_object_array_get_idx(v, i), field, NULL, &s, NULL);
                if (k < 0)
                        return k;
                if (isempty(s))
                        continue;
                if (as_ids && (cn_safe_atou64(s, &id) < 0 || id == 0 || id > INT64_MAX))
                        return fail(c, -ENOTSUP, "cloudProviderSpec.%s[%zu]: cloudnode takes Hetzner IDs, not names",
                                    field, i);
                item = as_ids ? json_object_new_int64((int64_t) id) : json_object_new_string(s);
                if (!item || json_object_array_add(out, item) < 0) {
                        json_object_put(item);
                        return -ENOMEM;
                }
        }
        if (json_object_array_length(out) > 0)
                *ret = TAKE_PTR(out);
        return 0;
}

static int hetzner(Ctx *c, json_object *cps) {
        static const char *const known[] = {
                "token", "serverType", "datacenter", "image", "location", "placementGroupPrefix", "networks",
                "firewalls", "labels", "assignPublicIPv4", "assignPublicIPv6", NULL,
        };
        static const char *const unsupported[] = { "placementGroupPrefix", "firewalls" };
        McMachineSpec *o = c->out;
        _cleanup_(erasep) char *dc = NULL;
        json_object *nets = NULL;
        const char *e;
        int k;

        k = check_keys(c, cps, known, "hetzner");
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(unsupported); i++)
                k = refuse_if_set(c, cps, unsupported[i], "hetzner");
        if (k < 0)
                return k;
        /* Hetzner gives every server both public addresses unless told otherwise; cloudnode does not
         * tell it otherwise. */
        for (size_t i = 0; i < 2; i++) {
                const char *f = i == 0 ? "assignPublicIPv4" : "assignPublicIPv6";

                k = configvar_bool(c, json_object_object_get(cps, f), f);
                if (k == 0)
                        return fail(c, -ENOTSUP, "cloudProviderSpec.%s false is not supported by cloudnode's "
                                    "hetzner provider", f);
                if (k < 0 && k != -ENODATA)
                        return k;
        }

        k = copy_var(c, cps, "token", "HZ_TOKEN", o->cloud_config, "Global", "token", NULL);
        if (k < 0)
                return k;
        if (!cn_json_string(o->cloud_config, "Global", "token", NULL))
                return fail(c, -EINVAL, "no Hetzner token: set cloudProviderSpec.token or HZ_TOKEN");
        /* The API endpoint is the operator's, never the Machine's. */
        if (c->getenv_fn && !isempty(e = c->getenv_fn("HCLOUD_ENDPOINT", c->userdata))) {
                k = cn_json_set_string(o->cloud_config, e, "Global", "endpoint", NULL);
                if (k < 0)
                        return k;
        }

        k = copy_var(c, cps, "serverType", NULL, o->spec, NULL, "serverType", NULL);
        if (k >= 0)
                k = copy_var(c, cps, "image", NULL, o->spec, NULL, "image", NULL);
        if (k >= 0)
                k = copy_var(c, cps, "location", NULL, o->spec, NULL, "location", NULL);
        if (k >= 0)
                k = configvar(c, json_object_object_get(cps, "datacenter"), "datacenter", NULL, &dc, NULL);
        if (k >= 0)
                k = string_map(c, cps, "labels", o->spec, "labels");
        if (k < 0)
                return k;
        if (!cn_json_string(o->spec, "serverType", NULL))
                return fail(c, -EINVAL, "cloudProviderSpec.serverType is required");
        /* machine-controller migrates the retired datacenter (fsn1-dc14) to its location. */
        if (!cn_json_string(o->spec, "location", NULL) && !isempty(dc)) {
                dc[strcspn(dc, "-")] = 0;
                k = cn_json_set_string(o->spec, dc, "location", NULL);
                if (k < 0)
                        return k;
        }
        /* Without an image machine-controller picks the operating system's. */
        if (!cn_json_string(o->spec, "image", NULL)) {
                const char *img = streq(o->operating_system, "ubuntu") ? "ubuntu-24.04" : "rocky-9";

                k = cn_json_set_string(o->spec, img, "image", NULL);
                if (k < 0)
                        return k;
        }

        k = var_list(c, cps, "networks", true, &nets);
        if (k >= 0 && nets)
                k = cn_json_set(o->spec, nets, "networks", NULL);
        return k;
}

static int openstack(Ctx *c, json_object *cps) {
        static const char *const known[] = {
                "identityEndpoint", "username", "password", "applicationCredentialID",
                "applicationCredentialSecret", "domainName", "projectName", "projectID", "tenantName", "tenantID",
                "tokenId", "region", "instanceReadyCheckPeriod", "instanceReadyCheckTimeout", "computeAPIVersion",
                "image", "flavor", "securityGroups", "network", "networks", "subnet", "floatingIpPool",
                "availabilityZone", "trustDevicePath", "rootDiskSizeGB", "rootDiskVolumeType",
                "nodeVolumeAttachLimit", "serverGroup", "configDrive", "disablePortSecurity", "tags", NULL,
        };
        static const char *const unsupported[] = {
                "tokenId", "subnet", "floatingIpPool", "rootDiskSizeGB", "rootDiskVolumeType", "serverGroup",
                "configDrive", "disablePortSecurity",
        };
        static const struct {
                const char *field, *env, *key;
        } creds[] = {
                { "username", "OS_USER_NAME", "username" },
                { "domainName", "OS_DOMAIN_NAME", "domain-name" },
                { "region", "OS_REGION_NAME", "region" },
                { "applicationCredentialID", "OS_APPLICATION_CREDENTIAL_ID", "application-credential-id" },
                /* projectName wins over tenantName, projectID over tenantID, as in machine-controller */
                { "tenantName", "OS_TENANT_NAME", "project-name" },
                { "projectName", "OS_PROJECT_NAME", "project-name" },
                { "tenantID", "OS_TENANT_ID", "project-id" },
                { "projectID", "OS_PROJECT_ID", "project-id" },
        };
        McMachineSpec *o = c->out;
        bool url_env = false, password_env = false, secret_env = false;
        json_object *v;
        int k;

        k = check_keys(c, cps, known, "openstack");
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(unsupported); i++)
                k = refuse_if_set(c, cps, unsupported[i], "openstack");
        if (k < 0)
                return k;

        k = copy_var(c, cps, "identityEndpoint", "OS_AUTH_URL", o->cloud_config, "Global", "auth-url", &url_env);
        if (k >= 0)
                k = copy_var(c, cps, "password", "OS_PASSWORD", o->cloud_config, "Global", "password", &password_env);
        if (k >= 0)
                k = copy_var(c, cps, "applicationCredentialSecret", "OS_APPLICATION_CREDENTIAL_SECRET",
                             o->cloud_config, "Global", "application-credential-secret", &secret_env);
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(creds); i++)
                k = copy_var(c, cps, creds[i].field, creds[i].env, o->cloud_config, "Global", creds[i].key, NULL);
        if (k < 0)
                return k;
        if (!cn_json_string(o->cloud_config, "Global", "auth-url", NULL))
                return fail(c, -EINVAL, "no OpenStack identity endpoint: set cloudProviderSpec.identityEndpoint or "
                            "OS_AUTH_URL");
        if (!(cn_json_string(o->cloud_config, "Global", "username", NULL) &&
              cn_json_string(o->cloud_config, "Global", "password", NULL)) &&
            !(cn_json_string(o->cloud_config, "Global", "application-credential-id", NULL) &&
              cn_json_string(o->cloud_config, "Global", "application-credential-secret", NULL)))
                return fail(c, -EINVAL, "no OpenStack credentials: set username and password or "
                            "applicationCredentialID and applicationCredentialSecret (or their OS_* variables)");
        /* The controller's own secret goes only to the controller's own endpoint. */
        if (!url_env && (password_env || secret_env))
                return fail(c, -EINVAL, "cloudProviderSpec.identityEndpoint is set but the password comes from the "
                            "controller's environment: give both in the Machine, or both in the environment");

        k = copy_var(c, cps, "image", NULL, o->spec, NULL, "image", NULL);
        if (k >= 0)
                k = copy_var(c, cps, "flavor", NULL, o->spec, NULL, "flavor", NULL);
        if (k >= 0)
                k = copy_var(c, cps, "availabilityZone", NULL, o->spec, NULL, "availabilityZone", NULL);
        if (k >= 0)
                k = copy_var(c, cps, "network", NULL, o->spec, NULL, "network", NULL);
        if (k >= 0)
                k = string_map(c, cps, "tags", o->spec, "metadata");
        if (k < 0)
                return k;
        if (!cn_json_string(o->spec, "image", NULL) || !cn_json_string(o->spec, "flavor", NULL))
                return fail(c, -EINVAL, "cloudProviderSpec.image and cloudProviderSpec.flavor are required");

        k = var_list(c, cps, "networks", false, &v);
        if (k < 0)
                return k;
        if (v) {
                if (json_object_array_length(v) > 1 || cn_json_string(o->spec, "network", NULL)) {
                        json_object_put(v);
                        return fail(c, -ENOTSUP, "cloudnode's openstack provider attaches one network: give "
                                    "cloudProviderSpec.network or one networks entry");
                }
                k = cn_json_set_string(o->spec, json_object_get_string(json_object_array_get_idx(v, 0)), "network", NULL);
                json_object_put(v);
                if (k < 0)
                        return k;
        }
        k = var_list(c, cps, "securityGroups", false, &v);
        if (k >= 0 && v)
                k = cn_json_set(o->spec, v, "securityGroups", NULL);
        return k;
}

bool mc_operating_system_supported(const char *provider, const char *os) {
        /* machine-controller's own answers: Hetzner offers images of these two; on OpenStack the
         * image is the user's, so every operating system machine-controller provisions there. */
        static const char *const hetzner_os[] = { "ubuntu", "rockylinux", NULL };
        static const char *const openstack_os[] = { "ubuntu", "rhel", "flatcar", "rockylinux", NULL };
        const char *const *l = streq(provider, "hetzner") ? hetzner_os : streq(provider, "openstack") ? openstack_os
                                                                                                      : NULL;

        for (size_t i = 0; l && l[i]; i++)
                if (streq(l[i], os))
                        return true;
        return false;
}

void mc_machine_spec_done(McMachineSpec *s) {
        free(s->provider);
        free(s->operating_system);
        json_object_put(s->spec);
        json_object_put(s->cloud_config);
        *s = (McMachineSpec) {};
}

int mc_machine_spec_translate(json_object *value, const char *ns, McLookup lookup, McGetenv getenv_fn,
                              void *userdata, McMachineSpec *ret, char **ret_reason) {
        _cleanup_(mc_machine_spec_done) McMachineSpec out = {};
        Ctx c = { .ns = ns, .lookup = lookup, .getenv_fn = getenv_fn, .userdata = userdata, .out = &out,
                  .reason = ret_reason };
        const char *provider = cn_json_string(value, "cloudProvider", NULL);
        const char *os = cn_json_string(value, "operatingSystem", NULL);
        json_object *cps = json_object_object_get(value, "cloudProviderSpec");
        int k;

        *ret_reason = NULL;
        if (!value || !json_object_is_type(value, json_type_object))
                return fail(&c, -EINVAL, "spec.providerSpec.value is missing");
        if (isempty(provider))
                return fail(&c, -EINVAL, "spec.providerSpec.value.cloudProvider is required");
        if (!streq(provider, "hetzner") && !streq(provider, "openstack"))
                return fail(&c, -ENOTSUP, "cloudProvider %s is not served by cloudnode (hetzner, openstack)",
                            provider);
        if (isempty(os))
                return fail(&c, -EINVAL, "spec.providerSpec.value.operatingSystem is required");
        if (!mc_operating_system_supported(provider, os))
                return fail(&c, -ENOTSUP, "operating system %s is not supported on %s", os, provider);
        if (!cps || !json_object_is_type(cps, json_type_object))
                return fail(&c, -EINVAL, "spec.providerSpec.value.cloudProviderSpec must be an object");

        out.provider = strdup(provider);
        out.operating_system = strdup(os);
        out.spec = json_object_new_object();
        out.cloud_config = json_object_new_object();
        if (!out.provider || !out.operating_system || !out.spec || !out.cloud_config)
                return -ENOMEM;
        k = streq(provider, "hetzner") ? hetzner(&c, cps) : openstack(&c, cps);
        if (k == -EAGAIN)
                ret->pending = out.pending;
        if (k < 0)
                return k;
        *ret = out;
        out = (McMachineSpec) {};
        return 0;
}

const char *const mc_metric_label_names[MC_METRIC_LABELS_N + 1] = {
        "kubelet_version", "provider", "os", "size", "location", "image", "region", NULL,
};

/* A ConfigVarString's value when it is written in the Machine ("" otherwise). */
static const char *literal(json_object *cps, const char *field) {
        json_object *v = json_object_object_get(cps, field);

        if (v && json_object_is_type(v, json_type_object))
                v = json_object_object_get(v, "value");
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

int mc_machine_metric_labels(json_object *machine, const char *ret[static MC_METRIC_LABELS_N + 1]) {
        json_object *value = cn_json_get(machine, "spec", "providerSpec", "value", NULL);
        json_object *cps = json_object_object_get(value, "cloudProviderSpec");
        const char *provider = cn_json_string(value, "cloudProvider", NULL);
        bool hetzner = streq(strempty(provider), "hetzner"), openstack = streq(strempty(provider), "openstack");

        if (isempty(provider))
                return -EINVAL;
        ret[0] = strempty(cn_json_string(machine, "spec", "versions", "kubelet", NULL));
        ret[1] = provider;
        ret[2] = strempty(cn_json_string(value, "operatingSystem", NULL));
        ret[3] = hetzner ? literal(cps, "serverType") : openstack ? literal(cps, "flavor") : "";
        ret[4] = hetzner ? literal(cps, "location") : "";
        ret[5] = openstack ? literal(cps, "image") : "";
        ret[6] = openstack ? literal(cps, "region") : "";
        ret[7] = NULL;
        return 0;
}
