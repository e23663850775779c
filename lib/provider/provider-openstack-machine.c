/* SPDX-License-Identifier: Apache-2.0 */
/* OpenStack machine lifecycle on Nova: a machine's server is named after the CloudnodeMachine and
 * carries its UID in the server metadata (CN_PROVIDER_MACHINE_UID_LABEL). Nova has no metadata
 * filter for non-admin users, so servers are found by listing the exact name
 * (GET /servers/detail?name=^name$) and keeping those whose metadata carries the UID. Created with
 * POST /servers (base64 user_data), deleted with DELETE /servers/{id} until the list no longer
 * shows them. Tokens come from provider-openstack.c. See the machine lifecycle in provider.h. */
#include <errno.h>
#include <stdint.h>

#include "hash-util.h"
#include "json-util.h"
#include "log.h"
#include "provider-openstack.h"
#include "string-util.h"

/* Nova's limits: metadata keys and values of at most 255 characters, keys of
 * [a-zA-Z0-9-_:. /] (nova/api/validation/parameter_types.py), 128 items by the default quota, and
 * user_data of at most 65535 bytes once base64 encoded. */
#define NOVA_METADATA_MAX_LENGTH 255
#define NOVA_METADATA_MAX_ITEMS 128
#define NOVA_USER_DATA_MAX 65535

typedef struct MachineCall {
        CnOpenStackAuth auth;
        char *name;
        char *uid;
        char *new_uid;      /* migrate_uid */
        char *server_id;    /* migrate_uid */
        json_object *body;  /* create: the POST /servers body */
        json_object *found; /* migrate_uid: the server being rewritten */
        CnProviderUidIsLive uid_is_live; /* migrate_uid */
        void *uid_is_live_userdata;
} MachineCall;

static void machine_call_free(void *p) {
        MachineCall *m = p;

        if (!m)
                return;
        free(m->name);
        free(m->uid);
        free(m->new_uid);
        free(m->server_id);
        json_object_put(m->body);
        json_object_put(m->found);
        free(m);
}

static void machine_call_freep(MachineCall **m) {
        machine_call_free(*m);
}

int cn_provider_openstack_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec) {
        json_object *s = NULL;

        /* Nothing to default: Nova chooses the zone, and "auto" networking is decided at create. */
        if (json_object_deep_copy(spec, &s, NULL) < 0)
                return -ENOMEM;
        *ret_spec = s;
        return 0;
}

static bool is_uuid(const char *s) {
        /* 8-4-4-4-12 hex digits, each dash optional: the CRD's pattern, and what Nova takes. */
        static const size_t groups[] = { 8, 4, 4, 4, 12 };

        for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
                if (g > 0 && *s == '-')
                        s++;
                for (size_t i = 0; i < groups[g]; i++, s++)
                        if (!*s || !strchr("0123456789abcdefABCDEF", *s))
                                return false;
        }
        return *s == 0;
}

static bool nova_metadata_key_ok(const char *k) {
        size_t n = strlen(k);

        if (n == 0 || n > NOVA_METADATA_MAX_LENGTH)
                return false;
        for (; *k; k++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:. /", *k))
                        return false;
        return true;
}

static int invalid(char **ret_reason, const char *fmt, ...) _printf_(2, 3);
static int invalid(char **ret_reason, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_reason, fmt, ap) < 0)
                *ret_reason = NULL;
        va_end(ap);
        return -EINVAL;
}

static int optional_string(json_object *spec, const char *key, char **ret_reason) {
        json_object *v = json_object_object_get(spec, key);

        if (v && (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
                  json_object_get_string_len(v) > NOVA_METADATA_MAX_LENGTH))
                return invalid(ret_reason, "spec.openstack.%s must be a non-empty string of at most %d characters",
                               key, NOVA_METADATA_MAX_LENGTH);
        return 0;
}

int cn_provider_openstack_validate(CnProvider *p, json_object *spec, char **ret_reason) {
        static const char *const required[] = { "flavor", "image" };
        static const char *const optional[] = { "network", "availabilityZone", "keyName" };
        json_object *groups, *meta;
        const char *network;
        int r;

        if (!spec || !json_object_is_type(spec, json_type_object))
                return invalid(ret_reason, "spec.openstack is missing");
        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (isempty(cn_json_string(spec, required[i], NULL)))
                        return invalid(ret_reason, "spec.openstack.%s is required", required[i]);
        for (size_t i = 0; i < ELEMENTSOF(optional); i++) {
                r = optional_string(spec, optional[i], ret_reason);
                if (r < 0)
                        return r;
        }
        network = cn_json_string(spec, "network", NULL);
        if (network && !is_uuid(network))
                /* A name would need Neutron to resolve; Nova's networks take the id. */
                return invalid(ret_reason, "spec.openstack.network must be a network id (UUID)");

        groups = json_object_object_get(spec, "securityGroups");
        if (groups) {
                if (!json_object_is_type(groups, json_type_array))
                        return invalid(ret_reason, "spec.openstack.securityGroups must be a list of names");
                for (size_t i = 0; i < json_object_array_length(groups); i++) {
                        json_object *g = json_object_array_get_idx(groups, i);

                        if (!json_object_is_type(g, json_type_string) || json_object_get_string_len(g) == 0 ||
                            json_object_get_string_len(g) > NOVA_METADATA_MAX_LENGTH)
                                return invalid(ret_reason, "spec.openstack.securityGroups[%zu] must be a non-empty name", i);
                }
        }
        meta = json_object_object_get(spec, "metadata");
        if (meta) {
                if (!json_object_is_type(meta, json_type_object))
                        return invalid(ret_reason, "spec.openstack.metadata must be a map of strings");
                /* One item more is the machine's UID. */
                if (json_object_object_length(meta) + 1 > NOVA_METADATA_MAX_ITEMS)
                        return invalid(ret_reason, "spec.openstack.metadata has more than %d items",
                                       NOVA_METADATA_MAX_ITEMS - 1);
                json_object_object_foreach(meta, k, v) {
                        if (!nova_metadata_key_ok(k))
                                return invalid(ret_reason,
                                               "spec.openstack.metadata key \"%s\" is not a Nova metadata key "
                                               "(1-255 of a-z A-Z 0-9 - _ : . / and space)", k);
                        if (!json_object_is_type(v, json_type_string) ||
                            json_object_get_string_len(v) > NOVA_METADATA_MAX_LENGTH)
                                return invalid(ret_reason, "spec.openstack.metadata.%s must be a string of at most %d "
                                               "characters", k, NOVA_METADATA_MAX_LENGTH);
                        if (streq(k, CN_PROVIDER_MACHINE_UID_LABEL))
                                return invalid(ret_reason,
                                               "spec.openstack.metadata must not set " CN_PROVIDER_MACHINE_UID_LABEL);
                }
        }
        return 0;
}

int cn_provider_openstack_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels) {
        const char *values[] = { "size", cn_json_string(spec, "flavor", NULL), "zone",
                                 cn_json_string(spec, "availabilityZone", NULL) };
        char **l = calloc(ELEMENTSOF(values) + 1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(values); i++)
                if (!(l[i] = strdup(strempty(values[i])))) {
                        strv_free(l);
                        return -ENOMEM;
                }
        *ret_labels = l;
        return 0;
}

int cn_provider_openstack_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config) {
        /* Where the workload cluster's cloud-controller-manager finds the cloud and project; no
         * user and no secret: it gets its own credentials (as Hetzner's leaves out the token),
         * copying the management cluster's onto every node would widen where they can leak. */
        static const char *const keys[] = {
                "auth-url", "region", "project-id", "project-name", "project-domain-id", "project-domain-name",
                "domain-id", "domain-name",
        };
        json_object *settings = cn_provider_openstack_settings(p);
        _cleanup_json_ json_object *cfg = json_object_new_object();
        int r = 0;

        if (!cfg)
                return -ENOMEM;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++) {
                const char *v = cn_json_string(settings, "Global", keys[i], NULL);

                if (v)
                        r = cn_json_set_string(cfg, v, "Global", keys[i], NULL);
        }
        if (r < 0)
                return r;
        *ret_cloud_config = TAKE_PTR(cfg);
        return 0;
}

int cn_provider_openstack_machine_view(json_object *server, json_object **ret, const char **ret_message) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        const char *status = cn_json_string(server, "status", NULL);
        int r;

        if (status && streq(status, "ERROR")) {
                int64_t code = 0;

                /* The fault says whether a retry may succeed: Nova's 5xx faults (no valid host, a
                 * hypervisor failure) may, anything else (an image or flavor the host refused) not. */
                (void) cn_json_get_int64(server, &code, "fault", "code", NULL);
                if (ret_message)
                        *ret_message = cn_json_string(server, "fault", "message", NULL) ?: "the server is in ERROR";
                return code >= 500 || code == 0 ? -EAGAIN : -EINVAL;
        }
        r = cn_provider_openstack_parse_server(server, NULL, &i);
        if (r < 0)
                return r;
        /* The create response names no status: the server is being built. */
        return cn_provider_machine_view(i, status ?: "BUILD", status && streq(status, "ACTIVE"), ret);
}

static bool server_gone(json_object *server) {
        const char *status = cn_json_string(server, "status", NULL);

        /* Soft-deleted servers are reclaimed by Nova itself; they are not ours to delete again. */
        return status && (streq(status, "DELETED") || streq(status, "SOFT_DELETED"));
}

size_t cn_provider_openstack_match_uid(json_object *servers, const char *uid, json_object **ret) {
        size_t n = servers && json_object_is_type(servers, json_type_array) ? json_object_array_length(servers) : 0;
        size_t matched = 0;

        if (ret)
                *ret = NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(servers, i);
                const char *v = cn_json_string(s, "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL);

                if (!v || !streq(v, uid) || server_gone(s))
                        continue;
                if (matched++ == 0 && ret)
                        *ret = s;
        }
        return matched;
}

/* The spec's string fields and Nova's names for them. */
static const struct {
        const char *spec, *nova;
} spec_to_nova[] = {
        { "flavor", "flavorRef" },
        { "image", "imageRef" },
        { "availabilityZone", "availability_zone" },
        { "keyName", "key_name" },
};

static int copy_string(json_object *body, json_object *spec, const char *from, const char *to) {
        const char *v = cn_json_string(spec, from, NULL);

        return v ? cn_json_set_string(body, v, "server", to, NULL) : 0;
}

int cn_provider_openstack_server_body(const CnProviderMachine *m, const char *userdata_text, json_object **ret) {
        _cleanup_json_ json_object *body = json_object_new_object(), *meta = NULL, *groups = NULL, *nets = NULL;
        json_object *spec = m->spec, *v;
        const char *network = cn_json_string(spec, "network", NULL);
        int r;

        if (!body)
                return -ENOMEM;
        if (isempty(m->name) || isempty(m->uid))
                return -EINVAL;
        r = cn_json_set_string(body, m->name, "server", "name", NULL);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(spec_to_nova); i++)
                r = copy_string(body, spec, spec_to_nova[i].spec, spec_to_nova[i].nova);
        if (r < 0)
                return r;

        /* Since microversion 2.37 networks are required: "auto" lets Nova pick or allocate one. */
        if (network) {
                nets = json_object_new_array();
                if (!nets || json_object_array_add(nets, json_object_new_object()) < 0)
                        return -ENOMEM;
                r = cn_json_set_string(json_object_array_get_idx(nets, 0), network, "uuid", NULL);
        } else
                r = (nets = json_object_new_string("auto")) ? 0 : -ENOMEM;
        if (r >= 0)
                r = cn_json_set(body, TAKE_PTR(nets), "server", "networks", NULL);
        if (r < 0)
                return r;

        v = json_object_object_get(spec, "securityGroups");
        if (v && json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0) {
                groups = json_object_new_array();
                if (!groups)
                        return -ENOMEM;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *g = json_object_new_object();

                        if (!g || json_object_array_add(groups, g) < 0) {
                                json_object_put(g);
                                return -ENOMEM;
                        }
                        r = cn_json_set_string(g, json_object_get_string(json_object_array_get_idx(v, i)), "name", NULL);
                        if (r < 0)
                                return r;
                }
                r = cn_json_set(body, TAKE_PTR(groups), "server", "security_groups", NULL);
                if (r < 0)
                        return r;
        }

        /* The spec's metadata is shared with the CR: the server gets its own copy plus the UID. */
        v = json_object_object_get(spec, "metadata");
        if (v) {
                if (json_object_deep_copy(v, &meta, NULL) < 0)
                        return -ENOMEM;
        } else if (!(meta = json_object_new_object()))
                return -ENOMEM;
        r = cn_json_set_string(meta, m->uid, CN_PROVIDER_MACHINE_UID_LABEL, NULL);
        if (r >= 0)
                r = cn_json_set(body, TAKE_PTR(meta), "server", "metadata", NULL);
        if (r < 0)
                return r;

        if (userdata_text) {
                _cleanup_free_ char *b64 = NULL;

                r = cn_base64_encode(userdata_text, strlen(userdata_text), &b64);
                if (r < 0)
                        return r;
                if (strlen(b64) > NOVA_USER_DATA_MAX)
                        return -E2BIG;
                r = cn_json_set_string(body, b64, "server", "user_data", NULL);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(body);
        return 0;
}

/* ---- calls ---- */

static void fail_machine(CnProviderCall *call, const CnProviderResult *res) {
        cn_provider_call_finish_machine(call, res, NULL);
}

static void fail_cleanup(CnProviderCall *call, const CnProviderResult *res) {
        cn_provider_call_finish_cleanup(call, res, false);
}

static CnProviderResult reply_result(const CnProviderHttpReply *reply) {
        return (CnProviderResult) { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
}

static int list_servers(CnProviderCall *call, const char *operation, CnProviderHttpCallback cb) {
        CnProvider *p = cn_provider_call_provider(call);
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = operation };
        _cleanup_free_ char *url = NULL;
        int r;

        (void) cn_provider_openstack_nova(p, &o);
        r = cn_provider_openstack_list_url(p, m->name, &url);
        if (r < 0)
                return r;
        return cn_provider_call_http(call, "GET", url, &o, cb, NULL);
}

/* The server of this machine from a list reply: 0 with *ret set, or the error to report. */
static int list_reply_match(const CnProviderHttpReply *reply, const char *uid, CnProviderResult *res,
                            json_object **ret) {
        size_t n;

        *res = reply_result(reply);
        if (res->error < 0)
                return res->error;
        n = cn_provider_openstack_match_uid(cn_json_get(reply->body, "servers", NULL), uid, ret);
        if (n == 0)
                *res = (CnProviderResult) { .error = -ENOENT, .message = "no server carries this machine's UID" };
        else if (n > 1)
                *res = (CnProviderResult) { .error = -CN_PROVIDER_EMULTIPLE,
                                            .message = "several servers carry this machine's UID" };
        return res->error;
}

static void finish_with_view(CnProviderCall *call, CnProviderResult *res, json_object *server) {
        json_object *view = NULL;
        const char *fault = NULL;
        int r;

        if (res->error >= 0) {
                r = cn_provider_openstack_machine_view(server, &view, &fault);
                if (r < 0)
                        *res = (CnProviderResult) {
                                .error = r,
                                .message = fault ?: "unexpected server object from the Nova API",
                        };
        }
        cn_provider_call_finish_machine(call, res, view);
}

static void on_get_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderResult res;
        json_object *server = NULL;

        if (cn_provider_openstack_reauthorize(call, &m->auth, reply))
                return;
        (void) list_reply_match(reply, m->uid, &res, &server);
        finish_with_view(call, &res, server);
}

static int get_next(CnProviderCall *call) {
        return list_servers(call, "machine_get", on_get_list);
}

typedef struct StartArgs {
        const CnProviderMachine *machine;
        const char *userdata_text;
        const char *new_uid;
        const char *server_id; /* migrate_uid */
        bool create;
        CnOpenStackAuth auth;
} StartArgs;

static int start(CnProviderCall *call, void *arg) {
        StartArgs *a = arg;
        _cleanup_(machine_call_freep) MachineCall *m = calloc(1, sizeof(MachineCall));
        int r;

        if (!m)
                return -ENOMEM;
        m->auth = a->auth;
        m->name = strdup(strempty(a->machine->name));
        m->uid = strdup(strempty(a->machine->uid));
        m->uid_is_live = a->machine->uid_is_live;
        m->uid_is_live_userdata = a->machine->uid_is_live_userdata;
        if (!m->name || !m->uid || (a->new_uid && !(m->new_uid = strdup(a->new_uid))) ||
            (a->server_id && !(m->server_id = strdup(a->server_id))))
                return -ENOMEM;
        /* Built before any request, so that a spec Nova cannot take fails at once. */
        if (a->create) {
                r = cn_provider_openstack_server_body(a->machine, a->userdata_text, &m->body);
                if (r < 0)
                        return r;
        }
        cn_provider_call_set_state(call, TAKE_PTR(m), machine_call_free);
        return cn_provider_openstack_authorize(call, cn_provider_call_get_state(call));
}

/* Every call: the machine's name and UID find its servers. */
static int start_call(CnProvider *p, StartArgs *a, CnProviderMachineCallback mcb, CnProviderCleanupCallback ccb,
                      void *userdata, CnProviderCall **ret) {
        if (isempty(a->machine->uid) || isempty(a->machine->name))
                return -EINVAL;
        return cn_provider_start_machine_call(p, mcb, ccb, userdata, start, a, ret);
}

int cn_provider_openstack_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                      void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .auth = { .next = get_next, .fail = fail_machine } };

        return start_call(p, &a, cb, NULL, userdata, ret);
}

/* Create and migrate_uid: the server is the one found before (migrate_uid) or the reply's. */
static void on_server_reply(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderResult res = reply_result(reply);

        /* A 401 means Nova did not act on the request: sending it again cannot duplicate. */
        if (cn_provider_openstack_reauthorize(call, &m->auth, reply))
                return;
        finish_with_view(call, &res, m->found ?: cn_json_get(reply->body, "server", NULL));
}

static int create_next(CnProviderCall *call) {
        CnProvider *p = cn_provider_call_provider(call);
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "machine_create", .body = m->body };
        _cleanup_free_ char *url = NULL;
        const char *compute = cn_provider_openstack_nova(p, &o);

        if (asprintf(&url, "%s/servers", compute) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "POST", url, &o, on_server_reply, NULL);
}

int cn_provider_openstack_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                         CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .userdata_text = userdata_text, .create = true,
                        .auth = { .next = create_next, .fail = fail_machine } };

        return start_call(p, &a, cb, NULL, userdata, ret);
}

static void on_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderResult res = reply_result(reply);
        bool sole = (uintptr_t) userdata != 0;

        if (cn_provider_openstack_reauthorize(call, &m->auth, reply))
                return;
        /* 404: gone already, which is what was asked. Done only when it was the machine's only
         * server; otherwise (and after a 204) the list is asked again. */
        if (res.error == -ENOENT) {
                cn_provider_call_finish_cleanup(call, &(CnProviderResult) {}, sole);
                return;
        }
        cn_provider_call_finish_cleanup(call, &res, false);
}

static void on_cleanup_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProvider *p = cn_provider_call_provider(call);
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderResult res = reply_result(reply);
        json_object *servers = cn_json_get(reply->body, "servers", NULL);
        CnProviderHttpOptions o = { .operation = "machine_delete" };
        size_t n;
        int r;

        if (cn_provider_openstack_reauthorize(call, &m->auth, reply))
                return;
        if (res.error < 0) {
                cn_provider_call_finish_cleanup(call, &res, false);
                return;
        }
        n = cn_provider_openstack_match_uid(servers, m->uid, NULL);
        for (size_t i = 0; n > 0 && i < json_object_array_length(servers); i++) {
                json_object *s = json_object_array_get_idx(servers, i);
                const char *uid = cn_json_string(s, "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL);
                const char *task = cn_json_string(s, "OS-EXT-STS:task_state", NULL), *id = cn_json_string(s, "id", NULL);
                _cleanup_free_ char *url = NULL, *esc = NULL;
                const char *compute;

                if (!uid || !streq(uid, m->uid) || server_gone(s) || !id)
                        continue;
                /* Nova is deleting it already: a second DELETE would only be refused or repeated. */
                if (task && streq(task, "deleting"))
                        continue;
                compute = cn_provider_openstack_nova(p, &o);
                esc = cn_http_escape(id);
                r = esc && asprintf(&url, "%s/servers/%s", compute, esc) >= 0 ? 0 : -ENOMEM;
                if (r >= 0)
                        r = cn_provider_call_http(call, "DELETE", url, &o, on_deleted, (void *) (uintptr_t) (n == 1));
                if (r < 0) {
                        res = (CnProviderResult) { .error = r, .message = "could not issue the delete request" };
                        cn_provider_call_finish_cleanup(call, &res, false);
                }
                return;
        }
        /* Nothing left, or only servers Nova is deleting already. */
        cn_provider_call_finish_cleanup(call, &res, n == 0);
}

static int cleanup_next(CnProviderCall *call) {
        return list_servers(call, "machine_cleanup_list", on_cleanup_list);
}

int cn_provider_openstack_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                          void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .auth = { .next = cleanup_next, .fail = fail_cleanup } };

        return start_call(p, &a, NULL, cb, userdata, ret);
}

static void on_migrate_get(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProvider *p = cn_provider_call_provider(call);
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "machine_migrate_uid" };
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *url = NULL, *esc = NULL;
        CnProviderResult res = reply_result(reply);
        json_object *server = cn_json_get(reply->body, "server", NULL);
        const char *current;
        int r;

        if (cn_provider_openstack_reauthorize(call, &m->auth, reply))
                return;
        if (res.error < 0) {
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        current = cn_json_string(server, "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL);
        r = cn_provider_migration_check(m->uid, m->uid_is_live, m->uid_is_live_userdata, current, m->new_uid);
        if (r > 0) {
                /* Rewritten by an earlier pass that did not get to report it. */
                finish_with_view(call, &res, server);
                return;
        }
        if (r < 0) {
                /* Not the server this machine was: adopting it could take another machine's. */
                res = (CnProviderResult) { .error = -CN_PROVIDER_EOWNED,
                                           .message = "the server named by providerID belongs to another machine" };
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        m->found = json_object_get(server);
        /* POST /servers/{id}/metadata merges the given items: the key holds a '/', which Nova's
         * router would not take in the path of PUT /servers/{id}/metadata/{key}. */
        body = json_object_new_object();
        esc = cn_http_escape(m->server_id);
        if (!body || !esc || cn_json_set_string(body, m->new_uid, "metadata", CN_PROVIDER_MACHINE_UID_LABEL, NULL) < 0 ||
            asprintf(&url, "%s/servers/%s/metadata", cn_provider_openstack_nova(p, &o), esc) < 0)
                r = -ENOMEM;
        else {
                o.body = body;
                r = cn_provider_call_http(call, "POST", url, &o, on_server_reply, NULL);
        }
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = "could not issue the metadata request" };
                cn_provider_call_finish_machine(call, &res, NULL);
        }
}

static int migrate_next(CnProviderCall *call) {
        CnProvider *p = cn_provider_call_provider(call);
        MachineCall *m = cn_provider_call_get_state(call);
        CnProviderHttpOptions o = { .operation = "machine_migrate_get" };
        _cleanup_free_ char *url = NULL, *esc = cn_http_escape(m->server_id);
        const char *compute = cn_provider_openstack_nova(p, &o);

        if (!esc || asprintf(&url, "%s/servers/%s", compute, esc) < 0)
                return -ENOMEM;
        return cn_provider_call_http(call, "GET", url, &o, on_migrate_get, NULL);
}

int cn_provider_openstack_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                      CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .new_uid = new_uid, .auth = { .next = migrate_next, .fail = fail_machine } };
        const char *id = cn_provider_openstack_server_id(m->provider_id, true);

        if (isempty(new_uid) || strlen(new_uid) > NOVA_METADATA_MAX_LENGTH || !id)
                return -EINVAL;
        a.server_id = id;
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start, &a, ret);
}
