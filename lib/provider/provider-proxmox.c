/* SPDX-License-Identifier: Apache-2.0 */
/* Proxmox VE (API https://pve.proxmox.com/pve-docs/api-viewer/, under /api2/json): the InstancesV2
 * calls for the QEMU VMs of one cluster, the region, as proxmox-cloud-controller-manager answers
 * them: providerID "proxmox://<region>/<vmid>", zone the PVE node the VM runs on, instance type
 * "<cpus>VCPU-<GiB>GB" from the VM's status, Hostname the VM's name, addresses from the QEMU guest
 * agent (network-get-interfaces) or, when the agent does not answer, from the cloud-init
 * ipconfigN of the VM's config. A stopped VM is shut down; a VM that does not exist is gone.
 *
 * cloudnode-agent on a Proxmox VM knows only the cloud-init drive and SMBIOS, not the vmid, and
 * writes "proxmox://<SMBIOS UUID>"; such a providerID is resolved too, through the `smbios1: uuid=`
 * of the VM configs (one config read per VM of the cluster, until the match), and the VM found
 * keeps that providerID.
 *
 * Settings, from cloud.conf [Global]: url (https://HOST:8006[/api2/json]), region (the cluster's
 * name, required), token-id (USER@REALM!TOKENID) with token-secret or token-secret-file, or
 * username (USER@REALM) with password or password-file (a ticket, renewed after an hour, well
 * before its two hours run out, and once more when the API refuses it); ca-file (the cluster's
 * CA, pve-root-ca.pem) or fingerprint (SHA-256 of the node's certificate, as `pvenode cert info`
 * prints it) for self-signed clusters. Without either, the system's trust store applies. */
#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>

#include "json-util.h"
#include "log.h"
#include "provider-proxmox.h"
#include "string-util.h"

#define PVE_PROVIDER_ID_PREFIX "proxmox://"
/* pveproxy's tickets last two hours; renewed after one, as the web UI and proxmoxer do long before. */
#define PVE_TICKET_RENEW (3600 * USEC_PER_SEC)
#define PVE_MAX_VMS 100000
#define PVE_MAX_IPCONFIG 32
/* Tickets are a few hundred bytes. */
#define PVE_TICKET_MAX 4096
#define PVE_COOKIE_MAX (PVE_TICKET_MAX + 32)
#define PVE_UNTRUSTED "the Proxmox VE API's certificate is not trusted: check ca-file or fingerprint"

typedef struct Proxmox {
        char *endpoint; /* .../api2/json */
        char *region;
        char *token_header; /* "Authorization: PVEAPIToken=ID=SECRET" (secret) */
        char *username;
        char *password;     /* secret */
        char *ca_file;
        bool pinned;
        uint8_t fingerprint[CN_HTTP_SHA256_SIZE];
        CnProviderToken ticket; /* PVEAuthCookie */
        char *csrf_header;      /* "CSRFPreventionToken: ..." of the ticket, for writes */
        json_object *uuids;     /* SMBIOS UUID -> vmid found last time */
} Proxmox;

static void erase(char **s) {
        if (*s)
                explicit_bzero(*s, strlen(*s));
        free(*s);
        *s = NULL;
}

static void pve_done(CnProvider *p) {
        Proxmox *o = cn_provider_data(p);

        free(o->endpoint);
        free(o->region);
        erase(&o->token_header);
        free(o->username);
        erase(&o->password);
        free(o->ca_file);
        cn_provider_token_forget(&o->ticket);
        erase(&o->csrf_header);
        json_object_put(o->uuids);
}

int cn_provider_proxmox_parse_fingerprint(const char *s, uint8_t ret[static CN_HTTP_SHA256_SIZE]) {
        uint8_t out[CN_HTTP_SHA256_SIZE];
        size_t n = 0;

        for (const char *c = s; *c;) {
                int hi, lo;

                if (*c == ':' && n > 0) {
                        c++;
                        continue;
                }
                if (n == CN_HTTP_SHA256_SIZE || !isxdigit((unsigned char) c[0]) || !isxdigit((unsigned char) c[1]))
                        return -EINVAL;
                hi = isdigit((unsigned char) c[0]) ? c[0] - '0' : tolower((unsigned char) c[0]) - 'a' + 10;
                lo = isdigit((unsigned char) c[1]) ? c[1] - '0' : tolower((unsigned char) c[1]) - 'a' + 10;
                out[n++] = (uint8_t) (hi << 4 | lo);
                c += 2;
        }
        if (n != CN_HTTP_SHA256_SIZE)
                return -EINVAL;
        memcpy(ret, out, sizeof(out));
        return 0;
}

/* A secret given inline or as the first line of a file. */
static int secret_setting(CnProvider *p, json_object *cfg, const char *key, const char *file_key, char **ret,
                          char **ret_error) {
        const char *v = cn_provider_setting(p, cfg, key, NULL), *file = cn_provider_setting(p, cfg, file_key, NULL);
        int r;

        if (!isempty(v))
                return (*ret = strdup(v)) ? 0 : -ENOMEM;
        if (isempty(file))
                return cn_provider_config_error(ret_error, EINVAL, "no Proxmox VE %s: set %s or %s in [Global] of the "
                                                "cloud config", key, key, file_key);
        r = cn_provider_read_secret_file(file, ret);
        if (r < 0)
                return cn_provider_config_error(ret_error, r, "cannot read the Proxmox VE %s from %s: %s", key, file,
                                                strerror(-r));
        return 0;
}

static int pve_init_settings(CnProvider *p, json_object *cfg, char **ret_error) {
        Proxmox *o = cn_provider_data(p);
        const char *url = cn_provider_setting(p, cfg, "url", NULL), *region = cn_provider_setting(p, cfg, "region", NULL);
        const char *token_id = cn_provider_setting(p, cfg, "token-id", NULL);
        const char *user = cn_provider_setting(p, cfg, "username", NULL);
        const char *ca = cn_provider_setting(p, cfg, "ca-file", NULL), *fp = cn_provider_setting(p, cfg, "fingerprint", NULL);
        _cleanup_free_ char *base = NULL, *secret = NULL;
        int r;

        if (isempty(url) || !cn_startswith(url, "https://"))
                return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE url must be set to an https:// URL "
                                                "(https://HOST:8006/api2/json)");
        if (isempty(region) || strchr(region, '/'))
                return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE region (the cluster's name, the "
                                                "first part of proxmox://REGION/VMID) must be set, without '/'");
        if (!isempty(ca) && !isempty(fp))
                return cn_provider_config_error(ret_error, EINVAL, "set either ca-file or fingerprint for the Proxmox "
                                                "VE API, not both");
        if (!isempty(fp) && cn_provider_proxmox_parse_fingerprint(fp, o->fingerprint) < 0)
                return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE fingerprint must be a SHA-256 "
                                                "digest in hex (AA:BB:...), 32 bytes");
        o->pinned = !isempty(fp);
        base = cn_provider_endpoint_dup(url);
        if (!base || !(o->region = strdup(region)) || (!isempty(ca) && !(o->ca_file = strdup(ca))))
                return -ENOMEM;
        o->endpoint = cn_endswith(base, "/api2/json") ? TAKE_PTR(base) : cn_strjoin(base, "/api2/json", NULL);
        if (!o->endpoint)
                return -ENOMEM;
        if (!isempty(token_id) == !isempty(user))
                return cn_provider_config_error(ret_error, EINVAL, "set either token-id (with token-secret) or username "
                                                "(with password) for the Proxmox VE API");
        if (!isempty(token_id)) {
                if (!strchr(token_id, '@') || !strchr(token_id, '!') || strpbrk(token_id, " =\r\n"))
                        return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE token-id must read "
                                                        "USER@REALM!TOKENID");
                r = secret_setting(p, cfg, "token-secret", "token-secret-file", &secret, ret_error);
                if (r < 0)
                        return r;
                if (strpbrk(secret, "\r\n") ||
                    asprintf(&o->token_header, "Authorization: PVEAPIToken=%s=%s", token_id, secret) < 0) {
                        explicit_bzero(secret, strlen(secret));
                        return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE token-secret is not one line");
                }
                explicit_bzero(secret, strlen(secret));
                return 0;
        }
        if (!strchr(user, '@'))
                return cn_provider_config_error(ret_error, EINVAL, "the Proxmox VE username must read USER@REALM");
        if (!(o->username = strdup(user)))
                return -ENOMEM;
        return secret_setting(p, cfg, "password", "password-file", &o->password, ret_error);
}

static int pve_init(CnProvider *p, json_object *cfg, char **ret_error) {
        int r = pve_init_settings(p, cfg, ret_error);

        if (r < 0)
                pve_done(p);
        return r;
}

/* PVE's error text (with a trailing newline), or the first parameter error. */
static const char *pve_error_message(json_object *body) {
        json_object *errors = cn_json_get(body, "errors", NULL);
        const char *m = cn_json_string(body, "message", NULL);

        if (!isempty(m))
                return m;
        if (errors && json_object_is_type(errors, json_type_object)) {
                json_object_object_foreach(errors, key, value) {
                        (void) key;
                        if (json_object_is_type(value, json_type_string))
                                return json_object_get_string(value);
                }
        }
        return NULL;
}

int cn_provider_proxmox_classify(long status, json_object *body, int error) {
        const char *m = pve_error_message(body);

        if (status == 500 && m) {
                /* A VM that does not exist is not a server error. */
                if (strstr(m, "does not exist") && strstr(m, "Configuration file"))
                        return -ENOENT;
                /* A VM locked by a backup, clone or migration; a storage busy: try again later. */
                if (cn_startswith(m, "VM is locked") || strstr(m, "got timeout") || strstr(m, "is locked"))
                        return -EBUSY;
        }
        if (status == 501)
                return -ENOTSUP; /* the URL is not the PVE API's */
        /* 595/596: pveproxy cannot reach the node that holds the VM; other 5xx: retryable. */
        return error;
}

typedef enum Stage {
        STAGE_RESOURCES,
        STAGE_SCAN, /* config of each VM, for proxmox://<uuid> */
        STAGE_STATUS,
        STAGE_CONFIG,
        STAGE_AGENT,
} Stage;

typedef struct Lookup {
        CnProviderAuth auth;
        Stage stage;
        char *path; /* of the request in flight, again after a new ticket */
        bool by_uuid;
        bool other_region; /* the providerID names another cluster: refused, never "gone" */
        int64_t hint;       /* the vmid that had the SMBIOS UUID last time, 0 if none */
        char *uuid;
        char *name;
        int64_t vmid;
        char *node;
        char *provider_id; /* the one to answer with */
        json_object *vms;  /* /cluster/resources?type=vm */
        size_t scan;
        json_object *status;
        json_object *config;
        char *message; /* of the error answer, trailing whitespace removed */
} Lookup;

static void lookup_free(void *p) {
        Lookup *l = p;

        free(l->path);
        free(l->uuid);
        free(l->name);
        free(l->node);
        free(l->provider_id);
        json_object_put(l->vms);
        json_object_put(l->status);
        json_object_put(l->config);
        free(l->message);
        free(l);
}

static void finish(CnProviderCall *call, int error, usec_t retry_after, const char *message,
                   CnProviderInstance *instance) {
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = error, .retry_after = retry_after };

        if (message) {
                free(l->message);
                l->message = strdup(message);
                if (l->message)
                        for (size_t n = strlen(l->message); n > 0 && isspace((unsigned char) l->message[n - 1]); n--)
                                l->message[n - 1] = 0;
                res.message = l->message ?: message;
        }
        cn_provider_call_finish_instance(call, &res, instance);
}

static void fail_instance(CnProviderCall *call, const CnProviderResult *res) {
        finish(call, res->error, res->retry_after, res->message, NULL);
}

static void on_reply(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
static int login(CnProviderCall *call, CnProviderAuth *auth);

/* cookie: room for the ticket's header (secret), erased by the caller. Writes with a ticket carry
 * its CSRF token too, as pveproxy requires. */
static void http_options(Proxmox *o, const char *method, CnProviderHttpOptions *opts, const char *headers[static 3],
                         char cookie[static PVE_COOKIE_MAX]) {
        size_t n = 0;

        if (o->token_header)
                headers[n++] = o->token_header;
        else if (o->ticket.value &&
                 snprintf(cookie, PVE_COOKIE_MAX, "Cookie: PVEAuthCookie=%s", o->ticket.value) < PVE_COOKIE_MAX) {
                headers[n++] = cookie;
                if (!streq(method, "GET") && o->csrf_header)
                        headers[n++] = o->csrf_header;
        }
        headers[n] = NULL;
        *opts = (CnProviderHttpOptions) {
                .ca_file = o->ca_file,
                .pinned_sha256 = o->pinned ? o->fingerprint : NULL,
                .headers = headers,
                .error_parser = pve_error_message,
                .error_classifier = cn_provider_proxmox_classify,
                .operation = "instance_metadata",
        };
}

static int send_request(CnProviderCall *call) {
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderHttpOptions opts = { .operation = "instance_metadata" };

        /* another region's VM is answered from the VM list, so that the call ends on the loop as
         * every call does */
        return cn_provider_proxmox_request(call, "GET", l->other_region ? "/version" : l->path, &opts, on_reply, NULL);
}

static int request(CnProviderCall *call, Stage stage, char *path) {
        Lookup *l = cn_provider_call_get_state(call);

        if (!path)
                return -ENOMEM;
        free(l->path);
        l->path = path;
        l->stage = stage;
        return cn_provider_proxmox_authorize(call, &l->auth);
}

static void on_login(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));
        CnProviderAuth *auth = ASSERT_PTR(userdata);
        const char *ticket = cn_json_string(reply->body, "data", "ticket", NULL);
        const char *csrf = cn_json_string(reply->body, "data", "CSRFPreventionToken", NULL);
        int r;

        if (reply->error < 0)
                return cn_provider_auth_fail(call, auth, reply->error, reply->retry_after,
                                             reply->status == 401      ? "the Proxmox VE API refused the username or password"
                                             : reply->error == -EBADE ? PVE_UNTRUSTED
                                                                      : reply->message);
        if (isempty(ticket) || strlen(ticket) >= PVE_TICKET_MAX || strpbrk(ticket, " ;\t\r\n") ||
            (csrf && (strlen(csrf) >= PVE_TICKET_MAX || strpbrk(csrf, "\r\n"))))
                return cn_provider_auth_fail(call, auth, -EBADMSG, 0, "no usable ticket in the Proxmox VE login answer");
        r = cn_provider_token_set(&o->ticket, ticket, cn_now(CLOCK_REALTIME) + PVE_TICKET_RENEW);
        if (r < 0)
                return cn_provider_auth_fail(call, auth, r, 0, "out of memory");
        erase(&o->csrf_header);
        if (csrf && !(o->csrf_header = cn_strjoin("CSRFPreventionToken: ", csrf, NULL)))
                return cn_provider_auth_fail(call, auth, -ENOMEM, 0, "out of memory");
        r = auth->next(call);
        if (r < 0)
                cn_provider_auth_fail(call, auth, r, 0, "failed to start the Proxmox VE API request");
}

static int login(CnProviderCall *call, CnProviderAuth *auth) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));
        _cleanup_free_ char *url = cn_strjoin(o->endpoint, "/access/ticket", NULL), *u = cn_http_escape(o->username),
                            *pw = cn_http_escape(o->password), *form = NULL;
        char cookie[PVE_COOKIE_MAX] = "";
        CnProviderHttpOptions opts;
        const char *headers[3];
        int r;

        if (!url || !u || !pw || asprintf(&form, "username=%s&password=%s", u, pw) < 0) {
                if (pw)
                        explicit_bzero(pw, strlen(pw));
                return -ENOMEM;
        }
        explicit_bzero(pw, strlen(pw));
        http_options(o, "POST", &opts, headers, cookie);
        explicit_bzero(cookie, sizeof(cookie));
        opts.headers = NULL; /* no old ticket */
        opts.form = form;
        opts.operation = "login";
        r = cn_provider_call_http(call, "POST", url, &opts, on_login, auth);
        explicit_bzero(form, strlen(form));
        return r;
}

const char *cn_provider_proxmox_region(CnProvider *p) {
        return ((Proxmox *) cn_provider_data(p))->region;
}

int cn_provider_proxmox_request(CnProviderCall *call, const char *method, const char *path,
                                CnProviderHttpOptions *opts, CnProviderHttpCallback cb, void *userdata) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));
        _cleanup_free_ char *url = cn_strjoin(o->endpoint, path, NULL);
        char cookie[PVE_COOKIE_MAX] = "";
        CnProviderHttpOptions base;
        const char *headers[3];
        int r;

        if (!url)
                return -ENOMEM;
        http_options(o, method, &base, headers, cookie);
        base.operation = opts->operation;
        base.form = opts->form;
        base.raw_body = opts->raw_body;
        base.raw_body_size = opts->raw_body_size;
        base.content_type = opts->content_type;
        r = cn_provider_call_http(call, method, url, &base, cb, userdata);
        explicit_bzero(cookie, sizeof(cookie));
        return r;
}

int cn_provider_proxmox_authorize(CnProviderCall *call, CnProviderAuth *auth) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));

        if (o->token_header)
                return auth->next(call);
        return cn_provider_authorize(call, auth, &o->ticket, login);
}

bool cn_provider_proxmox_reauthorize(CnProviderCall *call, CnProviderAuth *auth, const CnProviderHttpReply *reply) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));

        return !o->token_header && cn_provider_reauthorize(call, auth, &o->ticket, login, reply);
}

const char *cn_provider_proxmox_reply_message(CnProvider *p, const CnProviderHttpReply *reply) {
        Proxmox *o = cn_provider_data(p);

        if (reply->status == 401)
                return o->token_header ? "the Proxmox VE API refused the API token" : "the Proxmox VE API refused the ticket";
        if (reply->error == -EBADE)
                return PVE_UNTRUSTED;
        return reply->message;
}

/* "ip=10.0.0.5/24,gw=10.0.0.1,ip6=2001:db8::5/64": the static addresses (not dhcp, auto). */
static int add_ipconfig(CnProviderInstance *i, const char *v) {
        _cleanup_strv_free_ char **parts = NULL;
        int r;

        r = strv_split(v, ",", &parts);
        if (r < 0)
                return r;
        STRV_FOREACH(p, parts) {
                const char *a = cn_startswith(*p, "ip=") ?: cn_startswith(*p, "ip6=");
                _cleanup_free_ char *ip = NULL;

                if (!a || streq(a, "dhcp") || streq(a, "auto"))
                        continue;
                ip = strndup(a, strcspn(a, "/"));
                if (!ip)
                        return -ENOMEM;
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_INTERNAL_IP, ip);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* InternalIP: private IPv4 (RFC 1918, shared 100.64/10) and IPv6 unique local; ExternalIP: other
 * global addresses. Loopback and link-local addresses are no Node address. */
static int classify_ip(const char *ip, CnNodeAddressType *ret) {
        struct in6_addr a6;
        struct in_addr a4;

        if (inet_pton(AF_INET, ip, &a4) == 1) {
                uint32_t a = ntohl(a4.s_addr);

                if ((a >> 24) == 127 || (a >> 16) == 0xa9fe || a == 0)
                        return 0;
                *ret = (a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a >> 22) == (100 << 2 | 1)
                        ? CN_NODE_ADDRESS_INTERNAL_IP
                        : CN_NODE_ADDRESS_EXTERNAL_IP;
                return 1;
        }
        if (inet_pton(AF_INET6, ip, &a6) == 1) {
                if (IN6_IS_ADDR_LOOPBACK(&a6) || IN6_IS_ADDR_LINKLOCAL(&a6) || IN6_IS_ADDR_UNSPECIFIED(&a6))
                        return 0;
                *ret = (a6.s6_addr[0] & 0xfe) == 0xfc ? CN_NODE_ADDRESS_INTERNAL_IP : CN_NODE_ADDRESS_EXTERNAL_IP;
                return 1;
        }
        return -EBADMSG;
}

static int add_agent_addresses(CnProviderInstance *i, json_object *result) {
        size_t n = json_object_is_type(result, json_type_array) ? json_object_array_length(result) : 0;

        if (!result || !json_object_is_type(result, json_type_array))
                return -EBADMSG;
        for (size_t k = 0; k < n; k++) {
                json_object *iface = json_object_array_get_idx(result, k), *ips = cn_json_get(iface, "ip-addresses", NULL);

                if (cn_json_string_is(iface, "name", "lo") || !ips || !json_object_is_type(ips, json_type_array))
                        continue;
                for (size_t j = 0; j < json_object_array_length(ips); j++) {
                        const char *ip = cn_json_string(json_object_array_get_idx(ips, j), "ip-address", NULL);
                        CnNodeAddressType t;
                        int r;

                        if (!ip)
                                continue;
                        r = classify_ip(ip, &t);
                        if (r < 0)
                                return r;
                        if (r > 0 && (r = cn_provider_instance_add_address(i, t, ip)) < 0)
                                return r;
                }
        }
        return 0;
}

int cn_provider_proxmox_parse_vm(const char *region, const char *node, int64_t vmid, const char *provider_id,
                                 json_object *status, json_object *config, json_object *agent_result,
                                 CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        const char *name = cn_json_string(config, "name", NULL) ?: cn_json_string(status, "name", NULL);
        const char *state = cn_json_string(status, "status", NULL);
        int64_t cpus = 0, maxmem = 0;
        int r;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (!state || isempty(node) || vmid <= 0)
                return -EBADMSG;
        (void) cn_json_get_int64(status, &cpus, "cpus", NULL);
        (void) cn_json_get_int64(status, &maxmem, "maxmem", NULL);
        if (asprintf(&i->instance_id, "%" PRId64, vmid) < 0 || !(i->region = strdup(region)) ||
            !(i->zone = strdup(node)) || (name && !(i->name = strdup(name))))
                return -ENOMEM;
        i->provider_id = provider_id ? strdup(provider_id) : NULL;
        if (!provider_id && asprintf(&i->provider_id, PVE_PROVIDER_ID_PREFIX "%s/%" PRId64, region, vmid) < 0)
                i->provider_id = NULL;
        if (!i->provider_id)
                return -ENOMEM;
        if (cpus > 0 && maxmem > 0 &&
            asprintf(&i->instance_type, "%" PRId64 "VCPU-%" PRId64 "GB", cpus, maxmem / (1024 * 1024 * 1024)) < 0)
                return -ENOMEM;
        i->shutdown = !streq(state, "running");
        if (name && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_HOSTNAME, name)) < 0)
                return r == -EINVAL ? -EBADMSG : r;
        if (agent_result && (r = add_agent_addresses(i, agent_result)) < 0)
                return r;
        for (unsigned k = 0; !agent_result && k < PVE_MAX_IPCONFIG; k++) {
                char key[16];
                const char *v;

                (void) snprintf(key, sizeof(key), "ipconfig%u", k);
                v = cn_json_string(config, key, NULL);
                if (v && (r = add_ipconfig(i, v)) < 0)
                        return r;
        }
        *ret = TAKE_PTR(i);
        return 0;
}

bool cn_provider_proxmox_agent_enabled(json_object *config) {
        const char *a = cn_json_string(config, "agent", NULL);

        if (!a) {
                int64_t v;

                return cn_json_get_int64(config, &v, "agent", NULL) >= 0 && v == 1;
        }
        return cn_startswith(a, "1") || strstr(a, "enabled=1");
}

static bool smbios_uuid_is(json_object *config, const char *uuid) {
        const char *s = cn_json_string(config, "smbios1", NULL), *u;

        /* "uuid=...,manufacturer=..." in any order */
        u = s ? (cn_startswith(s, "uuid=") ?: strstr(s, ",uuid=")) : NULL;
        if (u && *u == ',')
                u += strlen(",uuid=");
        return u && strncasecmp(u, uuid, strlen(uuid)) == 0 && strchr(",", u[strlen(uuid)]);
}

static char *vm_path(const Lookup *l, const char *tail) {
        _cleanup_free_ char *node = cn_http_escape(l->node);
        char *p = NULL;

        if (!node || asprintf(&p, "/nodes/%s/qemu/%" PRId64 "%s", node, l->vmid, tail) < 0)
                return NULL;
        return p;
}

static int select_vm(Lookup *l, json_object *vm) {
        const char *node = cn_json_string(vm, "node", NULL);

        if (isempty(node) || cn_json_get_int64(vm, &l->vmid, "vmid", NULL) < 0)
                return -EBADMSG;
        free(l->node);
        l->node = strdup(node);
        return l->node ? 0 : -ENOMEM;
}

static bool is_vm(json_object *vm) {
        int64_t template = 0;

        (void) cn_json_get_int64(vm, &template, "template", NULL);
        return cn_json_string_is(vm, "type", "qemu") && template == 0;
}

static bool vm_has_id(json_object *vm, int64_t vmid) {
        int64_t v;

        return cn_json_get_int64(vm, &v, "vmid", NULL) >= 0 && v == vmid;
}

/* The next VM config to read for a proxmox://<uuid>, or -ENOENT when all were read: first the VM
 * that had the UUID last time (so that a lookup costs one config read while VMs stay where they
 * are), then every other one. */
static int scan_next(CnProviderCall *call) {
        Lookup *l = cn_provider_call_get_state(call);
        size_t n = json_object_array_length(l->vms);

        for (; l->scan <= n; l->scan++) {
                /* index 0 is the hint, i the list's entry i - 1 */
                json_object *vm = NULL;
                int r;

                if (l->scan == 0) {
                        for (size_t k = 0; l->hint > 0 && k < n && !vm; k++)
                                if (vm_has_id(json_object_array_get_idx(l->vms, k), l->hint))
                                        vm = json_object_array_get_idx(l->vms, k);
                } else {
                        vm = json_object_array_get_idx(l->vms, l->scan - 1);
                        if (l->hint > 0 && vm_has_id(vm, l->hint))
                                continue;
                }
                if (!vm || !is_vm(vm))
                        continue;
                r = select_vm(l, vm);
                if (r < 0)
                        return r;
                l->scan++;
                return request(call, STAGE_SCAN, vm_path(l, "/config"));
        }
        return -ENOENT;
}

#define PVE_MAX_UUIDS 20000

static void remember_uuid(Proxmox *o, const char *uuid, int64_t vmid) {
        json_object *v = json_object_new_int64(vmid);

        if (!o->uuids || json_object_object_length(o->uuids) >= PVE_MAX_UUIDS) {
                json_object_put(o->uuids);
                o->uuids = json_object_new_object();
        }
        if (!o->uuids || !v) {
                json_object_put(v); /* only a hint: nothing is lost without it */
                return;
        }
        (void) json_object_object_add(o->uuids, uuid, v);
}

static void on_resources(CnProviderCall *call, json_object *data) {
        Lookup *l = cn_provider_call_get_state(call);
        json_object *found = NULL;
        size_t n;
        int r;

        if (!data || !json_object_is_type(data, json_type_array) || json_object_array_length(data) > PVE_MAX_VMS)
                return finish(call, -EBADMSG, 0, "malformed VM list from the Proxmox VE API", NULL);
        n = json_object_array_length(data);
        if (l->by_uuid) {
                l->vms = json_object_get(data);
                r = scan_next(call);
                if (r < 0)
                        finish(call, r, 0, r == -ENOENT ? "no VM of the cluster has that SMBIOS UUID"
                                                        : "cannot build the Proxmox VE API request", NULL);
                return;
        }
        for (size_t k = 0; k < n; k++) {
                json_object *vm = json_object_array_get_idx(data, k);
                int64_t vmid;

                if (!is_vm(vm))
                        continue;
                if (l->name ? !cn_json_string_is(vm, "name", l->name)
                            : cn_json_get_int64(vm, &vmid, "vmid", NULL) < 0 || vmid != l->vmid)
                        continue;
                if (found)
                        return finish(call, -CN_PROVIDER_EMULTIPLE, 0, "several VMs of the cluster have that name", NULL);
                found = vm;
        }
        if (!found)
                return finish(call, -ENOENT, 0, l->name ? "no VM with that name" : "no VM with that id", NULL);
        r = select_vm(l, found);
        if (r < 0)
                return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
        r = request(call, STAGE_STATUS, vm_path(l, "/status/current"));
        if (r < 0)
                finish(call, r, 0, "cannot build the Proxmox VE API request", NULL);
}

static void finish_vm(CnProviderCall *call, json_object *agent_result) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderInstance *i = NULL;
        int r;

        r = cn_provider_proxmox_parse_vm(o->region, l->node, l->vmid, l->provider_id, l->status, l->config,
                                         agent_result, &i);
        if (r < 0)
                return finish(call, r == -ENOMEM ? r : -EBADMSG, 0, "unexpected VM data from the Proxmox VE API", NULL);
        finish(call, 0, 0, NULL, i);
}

static void on_reply(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Proxmox *o = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);
        int r;

        (void) userdata;
        if (cn_provider_proxmox_reauthorize(call, &l->auth, reply))
                return;
        /* Not "gone": a Node of another cluster must not be deleted because this one lacks it. */
        if (l->other_region && reply->error == 0)
                return finish(call, -EINVAL, 0, "the providerID names another Proxmox VE cluster (region) than the "
                              "cloud config's", NULL);
        if (reply->error < 0 && l->stage == STAGE_AGENT && reply->status == 500)
                /* No agent configured, not running, not answering: the config's cloud-init addresses. */
                return finish_vm(call, NULL);
        if (reply->error < 0 && l->stage == STAGE_SCAN && reply->error == -ENOENT) {
                /* deleted while we scanned */
                r = scan_next(call);
                if (r < 0)
                        finish(call, r, 0, r == -ENOENT ? "no VM of the cluster has that SMBIOS UUID" : NULL, NULL);
                return;
        }
        if (reply->error < 0)
                return finish(call, reply->error, reply->retry_after,
                              reply->error == -ENOENT && reply->status != 401 ? "no such VM"
                                                                               : cn_provider_proxmox_reply_message(
                                                                                         cn_provider_call_provider(call), reply),
                              NULL);
        if (!data && l->stage != STAGE_AGENT)
                return finish(call, -EBADMSG, 0, "malformed answer from the Proxmox VE API", NULL);
        switch (l->stage) {
        case STAGE_RESOURCES:
                return on_resources(call, data);
        case STAGE_SCAN:
                if (!smbios_uuid_is(data, l->uuid)) {
                        r = scan_next(call);
                        if (r < 0)
                                finish(call, r, 0, r == -ENOENT ? "no VM of the cluster has that SMBIOS UUID"
                                                                : "cannot build the Proxmox VE API request", NULL);
                        return;
                }
                l->config = json_object_get(data);
                remember_uuid(o, l->uuid, l->vmid);
                r = request(call, STAGE_STATUS, vm_path(l, "/status/current"));
                break;
        case STAGE_STATUS:
                l->status = json_object_get(data);
                if (l->config && !cn_json_string_is(data, "status", "running"))
                        return finish_vm(call, NULL);
                r = l->config ? request(call, STAGE_AGENT, vm_path(l, "/agent/network-get-interfaces"))
                              : request(call, STAGE_CONFIG, vm_path(l, "/config"));
                break;
        case STAGE_CONFIG:
                l->config = json_object_get(data);
                if (!cn_json_string_is(l->status, "status", "running") || !cn_provider_proxmox_agent_enabled(l->config))
                        return finish_vm(call, NULL);
                r = request(call, STAGE_AGENT, vm_path(l, "/agent/network-get-interfaces"));
                break;
        case STAGE_AGENT:
                return finish_vm(call, cn_json_get(data, "result", NULL));
        default:
                r = -EINVAL;
        }
        if (r < 0)
                finish(call, r, 0, "cannot build the Proxmox VE API request", NULL);
}

static int pve_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Proxmox *o = cn_provider_data(p);
        Lookup *l = calloc(1, sizeof(Lookup));

        if (!l)
                return -ENOMEM;
        l->auth = (CnProviderAuth) { .next = send_request, .fail = fail_instance };
        cn_provider_call_set_state(call, l, lookup_free);
        if (!isempty(node->provider_id)) {
                const char *s = cn_startswith(node->provider_id, PVE_PROVIDER_ID_PREFIX), *slash;

                if (!s)
                        return -EINVAL;
                slash = strrchr(s, '/');
                if (!slash && cn_is_uuid(s)) {
                        /* cloudnode-agent's form: the SMBIOS UUID */
                        l->by_uuid = true;
                        if (!(l->uuid = strdup(s)) || !(l->provider_id = strdup(node->provider_id)))
                                return -ENOMEM;
                        for (char *c = l->uuid; *c; c++)
                                *c = (char) tolower((unsigned char) *c);
                        (void) cn_json_get_int64(o->uuids, &l->hint, l->uuid, NULL);
                } else {
                        _cleanup_free_ char *region = slash ? strndup(s, slash - s) : NULL;

                        if (!slash || !region || cn_safe_atoi64(slash + 1, &l->vmid) < 0 || l->vmid < 100)
                                return slash && !region ? -ENOMEM : -EINVAL;
                        /* another cluster's VM is none of ours */
                        l->other_region = !streq(region, o->region);
                }
        } else if (!(l->name = strdup(node->name)))
                return -ENOMEM;
        return request(call, STAGE_RESOURCES, strdup("/cluster/resources?type=vm"));
}

/* Where the workload cluster's cloudnode finds the Proxmox VE cluster and how it checks its
 * certificate: url, region and a pinned fingerprint, never a token or password (it gets its own,
 * as Hetzner's leaves out the token). A ca-file is a path on the management side, left out. */
static int pve_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config) {
        Proxmox *o = cn_provider_data(p);
        _cleanup_json_ json_object *cfg = json_object_new_object();
        char fp[CN_HTTP_SHA256_SIZE * 3];
        int r;

        if (!cfg)
                return -ENOMEM;
        r = cn_json_set_string(cfg, o->endpoint, "Global", "url", NULL);
        if (r >= 0)
                r = cn_json_set_string(cfg, o->region, "Global", "region", NULL);
        if (r >= 0 && o->pinned) {
                for (size_t i = 0; i < CN_HTTP_SHA256_SIZE; i++)
                        snprintf(fp + 3 * i, 4, "%02X%s", o->fingerprint[i], i + 1 < CN_HTTP_SHA256_SIZE ? ":" : "");
                r = cn_json_set_string(cfg, fp, "Global", "fingerprint", NULL);
        }
        if (r < 0)
                return r;
        *ret_cloud_config = TAKE_PTR(cfg);
        return 0;
}

const CnProviderOps cn_provider_proxmox_ops = {
        .name = "proxmoxve",
        .size = sizeof(Proxmox),
        .init = pve_init,
        .done = pve_done,
        .instance_get = pve_instance_get,
        .add_defaults = cn_provider_proxmox_add_defaults,
        .validate = cn_provider_proxmox_validate,
        .machine_get = cn_provider_proxmox_machine_get,
        .machine_create = cn_provider_proxmox_machine_create,
        .machine_cleanup = cn_provider_proxmox_machine_cleanup,
        .metrics_labels = cn_provider_proxmox_metrics_labels,
        .failure_domains = cn_provider_proxmox_failure_domains,
        .migrate_uid = cn_provider_proxmox_migrate_uid,
        .cloud_config = pve_cloud_config,
        .failure_domain_field = "target",
};
