/* SPDX-License-Identifier: Apache-2.0 */
/* Azure Resource Manager: the InstancesV2 calls through virtualMachines get (with its instance view),
 * then the primary network interface and the public IP addresses of its IP configurations, as
 * cloud-provider-azure reads them. providerIDs "azure:///subscriptions/<s>/resourceGroups/<g>/
 * providers/Microsoft.Compute/virtualMachines/<name>" with the resource group in lower case, as
 * cloud-provider-azure and the agent write them; a Node without one is the VM of its name in the
 * configured resource group. Zones: "<location>-<zone>" for a zonal VM, else the fault domain.
 * Settings from cloud.conf [Global] with the names of cloud-provider-azure's azure.json
 * (subscriptionId, resourceGroup, location, tenantId, aadClientId, aadClientSecret,
 * useManagedIdentityExtension, userAssignedIdentityID, resourceManagerEndpoint,
 * activeDirectoryEndpoint) plus metadata-endpoint (IMDS) and ca-file; AZURE_* variables as the
 * Azure SDKs read them fill what the file leaves out. Tokens: the managed identity endpoint of
 * IMDS, or a client secret at the Entra ID token endpoint. */
#include <ctype.h>
#include <inttypes.h>
#include <strings.h>

#include "cloud-config.h"
#include "json-util.h"
#include "log.h"
#include "provider-internal.h"
#include "string-util.h"

#define AZURE_PROVIDER_ID_PREFIX "azure://"
#define AZURE_DEFAULT_ARM "https://management.azure.com"
#define AZURE_DEFAULT_AAD "https://login.microsoftonline.com"
#define AZURE_DEFAULT_IMDS "http://169.254.169.254"
/* The API versions are pinned: the answers' shapes are those of these versions. */
#define AZURE_COMPUTE_API "2023-03-01"
#define AZURE_NETWORK_API "2023-05-01"
#define AZURE_IMDS_TOKEN_API "2018-02-01"
/* At most this many public IP lookups per VM (a NIC has a few IP configurations). */
#define AZURE_MAX_PUBLIC_IPS 8

typedef struct Azure {
        char *arm;  /* resource manager endpoint, no trailing slash */
        char *aad;  /* Entra ID authority host, no trailing slash */
        char *imds;
        char *subscription;
        char *resource_group;
        char *tenant;
        char *client_id;
        char *client_secret; /* secret */
        char *identity_id;   /* user-assigned managed identity (client id) */
        char *ca_file;
        bool managed_identity;
        CnProviderToken token;
} Azure;

typedef struct Lookup {
        CnProviderAuth auth;
        char *vm_path;            /* /subscriptions/.../virtualMachines/<name> */
        CnProviderInstance *instance;
        char *hostname;           /* osProfile.computerName, the last address */
        char **public_ips;        /* ids still to fetch */
        size_t next_ip;
} Lookup;

static void azure_done(CnProvider *p) {
        Azure *a = cn_provider_data(p);

        cn_provider_token_forget(&a->token);
        if (a->client_secret)
                explicit_bzero(a->client_secret, strlen(a->client_secret));
        free(a->client_secret);
        free(a->arm);
        free(a->aad);
        free(a->imds);
        free(a->subscription);
        free(a->resource_group);
        free(a->tenant);
        free(a->client_id);
        free(a->identity_id);
        free(a->ca_file);
}

static bool truthy(const char *v) {
        return v && (strcasecmp(v, "true") == 0 || streq(v, "1") || strcasecmp(v, "yes") == 0);
}

static int azure_init(CnProvider *p, json_object *cfg, char **ret_error) {
        Azure *a = cn_provider_data(p);
        const char *arm = cn_provider_setting(p, cfg, "resourceManagerEndpoint", "AZURE_RESOURCE_MANAGER_ENDPOINT");
        const char *aad = cn_provider_setting(p, cfg, "activeDirectoryEndpoint", "AZURE_AUTHORITY_HOST");
        const char *imds = cn_provider_setting(p, cfg, "metadata-endpoint", NULL);
        const char *sub = cn_provider_setting(p, cfg, "subscriptionId", "AZURE_SUBSCRIPTION_ID");
        const char *rg = cn_provider_setting(p, cfg, "resourceGroup", NULL);
        const char *tenant = cn_provider_setting(p, cfg, "tenantId", "AZURE_TENANT_ID");
        const char *client = cn_provider_setting(p, cfg, "aadClientId", "AZURE_CLIENT_ID");
        const char *secret = cn_provider_setting(p, cfg, "aadClientSecret", "AZURE_CLIENT_SECRET");
        const char *mi = cn_provider_setting(p, cfg, "useManagedIdentityExtension", NULL);
        const char *identity = cn_provider_setting(p, cfg, "userAssignedIdentityID", NULL);
        const char *ca = cn_provider_setting(p, cfg, "ca-file", NULL);

        if (isempty(sub)) {
                azure_done(p);
                return cn_provider_config_error(ret_error, EINVAL, "no subscriptionId in [Global] of the cloud config");
        }
        a->managed_identity = truthy(mi) || isempty(secret);
        if (!a->managed_identity && (isempty(tenant) || isempty(client)))
                return cn_provider_config_error(ret_error, EINVAL,
                                                "a client secret needs tenantId and aadClientId in [Global]");
        if (!(a->arm = cn_provider_endpoint_dup(isempty(arm) ? AZURE_DEFAULT_ARM : arm)) ||
            !(a->aad = cn_provider_endpoint_dup(isempty(aad) ? AZURE_DEFAULT_AAD : aad)) ||
            !(a->imds = cn_provider_endpoint_dup(isempty(imds) ? AZURE_DEFAULT_IMDS : imds)) ||
            !(a->subscription = strdup(sub)) ||
            (!isempty(rg) && !(a->resource_group = strdup(rg))) || (!isempty(tenant) && !(a->tenant = strdup(tenant))) ||
            (!isempty(client) && !(a->client_id = strdup(client))) ||
            (!a->managed_identity && !(a->client_secret = strdup(secret))) ||
            (!isempty(identity) && !(a->identity_id = strdup(identity))) || (!isempty(ca) && !(a->ca_file = strdup(ca)))) {
                azure_done(p);
                return -ENOMEM;
        }
        return 0;
}

static const char *azure_error_message(json_object *body) {
        return cn_json_string(body, "error", "message", NULL) ?: cn_json_string(body, "error_description", NULL);
}

/* ---- tokens ---- */

static void on_token(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Azure *a = cn_provider_data(cn_provider_call_provider(call));
        CnProviderAuth *auth = ASSERT_PTR(userdata);

        if (reply->error < 0) {
                const char *what = reply->message;

                if (reply->status == 400 || reply->status == 401)
                        what = a->managed_identity ? "the managed identity endpoint refused the token request"
                                                   : "the client secret was rejected by the token endpoint";
                cn_provider_auth_fail(call, auth, reply->status == 400 || reply->status == 404 ? -EACCES : reply->error,
                                      reply->retry_after, what);
                return;
        }
        cn_provider_oauth_token_reply(call, auth, &a->token, reply->body);
}

static int fetch_token(CnProviderCall *call, CnProviderAuth *auth) {
        Azure *a = cn_provider_data(cn_provider_call_provider(call));
        _cleanup_free_ char *url = NULL, *form = NULL, *resource = NULL, *id = NULL, *secret = NULL, *tenant = NULL;
        static const char *const imds_headers[] = { "Metadata: true", NULL };
        CnProviderHttpOptions opts = {
                .error_parser = azure_error_message,
                .operation = "authenticate",
        };
        int r;

        if (a->managed_identity) {
                _cleanup_free_ char *rs = NULL;

                if (asprintf(&rs, "%s/", a->arm) < 0 || !(resource = cn_http_escape(rs)))
                        return -ENOMEM;
                if (a->identity_id && !(id = cn_http_escape(a->identity_id)))
                        return -ENOMEM;
                opts.headers = imds_headers;
                if (asprintf(&url, "%s/metadata/identity/oauth2/token?api-version=" AZURE_IMDS_TOKEN_API "&resource=%s%s%s",
                             a->imds, resource, id ? "&client_id=" : "", strempty(id)) < 0)
                        return -ENOMEM;
                return cn_provider_call_http(call, "GET", url, &opts, on_token, auth);
        }
        {
                _cleanup_free_ char *scope = NULL;

                if (asprintf(&scope, "%s/.default", a->arm) < 0 || !(resource = cn_http_escape(scope)))
                        return -ENOMEM;
        }
        if (!(id = cn_http_escape(a->client_id)) || !(secret = cn_http_escape(a->client_secret)) ||
            !(tenant = cn_http_escape(a->tenant)))
                return -ENOMEM;
        r = asprintf(&form, "grant_type=client_credentials&client_id=%s&client_secret=%s&scope=%s", id, secret, resource);
        explicit_bzero(secret, strlen(secret));
        if (r < 0)
                return -ENOMEM;
        if (asprintf(&url, "%s/%s/oauth2/v2.0/token", a->aad, tenant) < 0) {
                explicit_bzero(form, strlen(form));
                return -ENOMEM;
        }
        opts.form = form;
        opts.ca_file = a->ca_file;
        r = cn_provider_call_http(call, "POST", url, &opts, on_token, auth);
        explicit_bzero(form, strlen(form));
        return r;
}

/* ---- lookups ---- */

/* Segments of a resource path: names without '/', '?', '#', '%' or spaces. */
static bool segment_ok(const char *s, size_t n) {
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (strchr("/?#% \t\r\n\"\\", s[i]) || (unsigned char) s[i] < 0x20)
                        return false;
        return true;
}

/* "azure:///subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/virtualMachines/N"
 * (path compared case-insensitively where ARM does) -> the path from "/subscriptions". */
static int vm_path_from_provider_id(const char *provider_id, bool lower_group, char **ret) {
        const char *rest = cn_startswith(provider_id, AZURE_PROVIDER_ID_PREFIX);
        _cleanup_strv_free_ char **parts = NULL;
        int r;

        if (!rest || rest[0] != '/' || strstr(rest, "//"))
                return -EINVAL;
        r = strv_split(rest, "/", &parts);
        if (r < 0)
                return r;
        /* Scale set VMs (virtualMachineScaleSets/<set>/virtualMachines/<n>) have another path:
         * not handled here. */
        if (strv_length(parts) != 8 || strcasecmp(parts[0], "subscriptions") != 0 ||
            strcasecmp(parts[2], "resourceGroups") != 0 || strcasecmp(parts[4], "providers") != 0 ||
            strcasecmp(parts[5], "Microsoft.Compute") != 0 || strcasecmp(parts[6], "virtualMachines") != 0)
                return -EINVAL;
        for (size_t i = 1; i < 8; i += 2)
                if (!segment_ok(parts[i], strlen(parts[i])))
                        return -EINVAL;
        if (lower_group)
                for (char *c = parts[3]; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
        if (asprintf(ret, "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", parts[1],
                     parts[3], parts[7]) < 0)
                return -ENOMEM;
        return 0;
}

static void lookup_free(void *p) {
        Lookup *l = p;

        if (!l)
                return;
        free(l->vm_path);
        free(l->hostname);
        cn_provider_instance_free(l->instance);
        strv_free(l->public_ips);
        free(l);
}

static void finish(CnProviderCall *call, int error, usec_t retry_after, const char *message) {
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = error, .retry_after = retry_after, .message = message };

        if (res.error >= 0 && l->hostname) {
                int r = cn_node_address_list_add(&l->instance->addresses, CN_NODE_ADDRESS_HOSTNAME, l->hostname);

                if (r < 0)
                        res = (CnProviderResult) { .error = r == -EINVAL ? -EBADMSG : r,
                                                   .message = "unexpected computer name from Azure Resource Manager" };
        }

        cn_provider_call_finish_instance(call, &res, error < 0 ? NULL : TAKE_PTR(l->instance));
}

static CnProviderHttpOptions arm_options(Azure *a) {
        return (CnProviderHttpOptions) {
                .bearer_token = a->token.value,
                .ca_file = a->ca_file,
                .error_parser = azure_error_message,
                .operation = "instance_metadata",
        };
}

/* An ARM resource id from a response, checked before it becomes part of a URL. */
static bool resource_id_ok(const char *id) {
        if (isempty(id) || id[0] != '/' || strlen(id) > 1024)
                return false;
        for (const char *c = id; *c; c++)
                if (strchr("?#% \t\r\n\"\\", *c) || (unsigned char) *c < 0x20 || strstr(c, "/..") == c)
                        return false;
        return true;
}

static int get_resource(CnProviderCall *call, const char *id, const char *api, CnProviderHttpCallback cb) {
        Azure *a = cn_provider_data(cn_provider_call_provider(call));
        CnProviderHttpOptions o = arm_options(a);
        _cleanup_free_ char *url = NULL;

        if (asprintf(&url, "%s%s?api-version=%s", a->arm, id, api) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "GET", url, &o, cb, NULL);
}

static void next_public_ip(CnProviderCall *call);

static void on_public_ip(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Lookup *l = cn_provider_call_get_state(call);
        const char *ip;
        int r;

        /* A public IP deleted meanwhile is no address, not a failure. */
        if (reply->error < 0 && reply->error != -ENOENT) {
                finish(call, reply->error, reply->retry_after, reply->message);
                return;
        }
        ip = reply->error < 0 ? NULL : cn_json_string(reply->body, "properties", "ipAddress", NULL);
        if (!isempty(ip)) {
                r = cn_node_address_list_add(&l->instance->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, ip);
                if (r < 0) {
                        finish(call, r == -EINVAL ? -EBADMSG : r, 0, "unexpected public IP address from Azure");
                        return;
                }
        }
        next_public_ip(call);
}

static void next_public_ip(CnProviderCall *call) {
        Lookup *l = cn_provider_call_get_state(call);
        int r;

        if (!l->public_ips || !l->public_ips[l->next_ip]) {
                finish(call, 0, 0, NULL);
                return;
        }
        r = get_resource(call, l->public_ips[l->next_ip++], AZURE_NETWORK_API, on_public_ip);
        if (r < 0)
                finish(call, r, 0, "failed to request a public IP address");
}

static void on_nic(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Lookup *l = cn_provider_call_get_state(call);
        json_object *configs;
        int r = 0;

        if (reply->error < 0) {
                finish(call, reply->error == -ENOENT ? -EAGAIN : reply->error, reply->retry_after, reply->message);
                return;
        }
        configs = cn_json_get(reply->body, "properties", "ipConfigurations", NULL);
        for (size_t k = 0; configs && json_object_is_type(configs, json_type_array) && k < json_object_array_length(configs);
             k++) {
                json_object *c = json_object_array_get_idx(configs, k);
                const char *ip = cn_json_string(c, "properties", "privateIPAddress", NULL);
                const char *pip = cn_json_string(c, "properties", "publicIPAddress", "id", NULL);

                if (!isempty(ip) && (r = cn_node_address_list_add(&l->instance->addresses, CN_NODE_ADDRESS_INTERNAL_IP, ip)) < 0)
                        break;
                if (!isempty(pip)) {
                        if (!resource_id_ok(pip) || strv_length(l->public_ips) >= AZURE_MAX_PUBLIC_IPS) {
                                r = -EBADMSG;
                                break;
                        }
                        if ((r = strv_extend(&l->public_ips, pip)) < 0)
                                break;
                }
        }
        if (r < 0) {
                finish(call, r == -EINVAL ? -EBADMSG : r, 0, "unexpected network interface from Azure");
                return;
        }
        next_public_ip(call);
}

/* The power state of the instance view: "PowerState/running", ".../deallocated", ... */
static const char *power_state(json_object *vm) {
        json_object *statuses = cn_json_get(vm, "properties", "instanceView", "statuses", NULL);

        for (size_t k = 0; statuses && json_object_is_type(statuses, json_type_array) &&
                           k < json_object_array_length(statuses);
             k++) {
                const char *code = cn_json_string(json_object_array_get_idx(statuses, k), "code", NULL);

                if (code && cn_startswith(code, "PowerState/"))
                        return code + STRLEN("PowerState/");
        }
        return NULL;
}

static int parse_vm(json_object *vm, CnProviderInstance **ret, const char **ret_nic, const char **ret_hostname) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        _cleanup_free_ char *pid = NULL, *path = NULL;
        const char *id = cn_json_string(vm, "id", NULL), *name = cn_json_string(vm, "name", NULL), *v;
        const char *location = cn_json_string(vm, "location", NULL), *state = power_state(vm), *nic = NULL;
        json_object *zones = cn_json_get(vm, "zones", NULL), *nics;
        int64_t fd = -1;
        int r;

        if (!i)
                return -ENOMEM;
        if (isempty(id) || isempty(name) || isempty(location) || !segment_ok(location, strlen(location)))
                return -EBADMSG;
        if (asprintf(&pid, AZURE_PROVIDER_ID_PREFIX "%s", id) < 0)
                return -ENOMEM;
        r = vm_path_from_provider_id(pid, true, &path);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG;
        if (asprintf(&i->provider_id, AZURE_PROVIDER_ID_PREFIX "%s", path) < 0 || !(i->name = strdup(name)) ||
            !(i->region = strdup(location)))
                return -ENOMEM;
        for (char *c = i->region; *c; c++)
                *c = (char) tolower((unsigned char) *c);
        v = cn_json_string(vm, "properties", "vmId", NULL);
        if (!(i->instance_id = strdup(isempty(v) ? name : v)))
                return -ENOMEM;
        v = cn_json_string(vm, "properties", "hardwareProfile", "vmSize", NULL);
        if (!isempty(v) && !(i->instance_type = strdup(v)))
                return -ENOMEM;
        /* A zonal VM is in "<location>-<zone>", any other in its fault domain, as
         * cloud-provider-azure labels them. */
        if (zones && json_object_is_type(zones, json_type_array) && json_object_array_length(zones) > 0) {
                v = json_object_get_string(json_object_array_get_idx(zones, 0));
                if (isempty(v) || !segment_ok(v, strlen(v)))
                        return -EBADMSG;
                if (asprintf(&i->zone, "%s-%s", i->region, v) < 0)
                        return -ENOMEM;
        } else if (cn_json_get_int64(vm, &fd, "properties", "instanceView", "platformFaultDomain", NULL) >= 0 && fd >= 0) {
                if (asprintf(&i->zone, "%" PRIi64, fd) < 0)
                        return -ENOMEM;
        }
        i->shutdown = state && (streq(state, "stopped") || streq(state, "deallocated") || streq(state, "deallocating"));
        nics = cn_json_get(vm, "properties", "networkProfile", "networkInterfaces", NULL);
        for (size_t k = 0; nics && json_object_is_type(nics, json_type_array) && k < json_object_array_length(nics); k++) {
                json_object *n = json_object_array_get_idx(nics, k);
                bool primary = false;

                (void) cn_json_get_bool(n, &primary, "properties", "primary", NULL);
                if (!nic || primary)
                        nic = cn_json_string(n, "id", NULL);
                if (primary)
                        break;
        }
        if (nic && !resource_id_ok(nic))
                return -EBADMSG;
        v = cn_json_string(vm, "properties", "osProfile", "computerName", NULL);
        *ret_hostname = isempty(v) ? name : v;
        *ret_nic = nic;
        *ret = TAKE_PTR(i);
        return 0;
}

static void on_vm(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Azure *a = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        const char *nic = NULL, *hostname = NULL;
        int r;

        if (cn_provider_reauthorize(call, &l->auth, &a->token, fetch_token, reply))
                return;
        if (reply->error < 0) {
                finish(call, reply->error, reply->retry_after, reply->message);
                return;
        }
        r = parse_vm(reply->body, &l->instance, &nic, &hostname);
        if (r >= 0 && !(l->hostname = strdup(hostname)))
                r = -ENOMEM;
        if (r < 0) {
                finish(call, r, 0, "unexpected virtual machine object from Azure Resource Manager");
                return;
        }
        if (!nic) {
                finish(call, 0, 0, NULL);
                return;
        }
        r = get_resource(call, nic, AZURE_NETWORK_API, on_nic);
        if (r < 0)
                finish(call, r, 0, "failed to request the network interface");
}

static int get_vm(CnProviderCall *call) {
        Azure *a = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = arm_options(a);
        _cleanup_free_ char *url = NULL;

        if (asprintf(&url, "%s%s?api-version=" AZURE_COMPUTE_API "&$expand=instanceView", a->arm, l->vm_path) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "GET", url, &o, on_vm, NULL);
}

static int azure_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Azure *a = cn_provider_data(p);
        Lookup *l;
        int r;

        l = calloc(1, sizeof(Lookup));
        if (!l)
                return -ENOMEM;
        l->auth = (CnProviderAuth) { .next = get_vm, .fail = cn_provider_call_fail_instance };
        cn_provider_call_set_state(call, l, lookup_free);
        if (!isempty(node->provider_id)) {
                r = vm_path_from_provider_id(node->provider_id, false, &l->vm_path);
                if (r < 0)
                        return r;
        } else {
                /* cloud-provider-azure: the VM named as the Node, in the configured group. */
                if (!a->resource_group || !segment_ok(node->name, strlen(node->name)) ||
                    !segment_ok(a->resource_group, strlen(a->resource_group)))
                        return -EINVAL;
                if (asprintf(&l->vm_path, "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/"
                             "virtualMachines/%s", a->subscription, a->resource_group, node->name) < 0)
                        return -ENOMEM;
        }
        return cn_provider_authorize(call, &l->auth, &a->token, fetch_token);
}

const CnProviderOps cn_provider_azure_ops = {
        .name = "azure",
        .size = sizeof(Azure),
        .init = azure_init,
        .done = azure_done,
        .instance_get = azure_instance_get,
};
