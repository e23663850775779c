/* SPDX-License-Identifier: Apache-2.0 */
/* Hetzner Cloud machine lifecycle: servers found by the label cloudnode.io/machine-uid (GET
 * /servers?label_selector=), created with POST /servers (labels, user_data), deleted with
 * DELETE /servers/{id} until the list no longer shows them. See the machine lifecycle in provider.h. */
#include <errno.h>

#include "json-util.h"
#include "log.h"
#include "provider-hetzner.h"
#include "string-util.h"
#include <inttypes.h>
#include <stdlib.h>

static int spec_string(json_object *spec, const char *key, const char **ret) {
        const char *v = cn_json_string(spec, key, NULL);

        if (isempty(v))
                return -ENOENT;
        *ret = v;
        return 0;
}

int cn_provider_hetzner_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec) {
        _cleanup_json_ json_object *s = NULL;
        int r;

        r = json_object_deep_copy(spec, &s, NULL);
        if (r < 0)
                return -ENOMEM;
        /* The defaults hcloud's own tools use when none is given. */
        if (!cn_json_string(s, "location", NULL)) {
                r = cn_json_set_string(s, "fsn1", "location", NULL);
                if (r < 0)
                        return r;
        }
        *ret_spec = TAKE_PTR(s);
        return 0;
}

int cn_provider_hetzner_validate(CnProvider *p, json_object *spec, char **ret_reason) {
        static const char *const required[] = { "serverType", "image", "location" };
        json_object *labels = json_object_object_get(spec, "labels");
        const char *v;

        if (!spec || !json_object_is_type(spec, json_type_object)) {
                *ret_reason = strdup("spec.hetzner is missing");
                return -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (spec_string(spec, required[i], &v) < 0) {
                        (void) cn_set_message(ret_reason, "spec.hetzner.%s is required", required[i]);
                        return -EINVAL;
                }
        if (labels) {
                if (!json_object_is_type(labels, json_type_object)) {
                        *ret_reason = strdup("spec.hetzner.labels must be a map of strings");
                        return -EINVAL;
                }
                json_object_object_foreach(labels, k, lv) {
                        if (!json_object_is_type(lv, json_type_string)) {
                                (void) cn_set_message(ret_reason, "spec.hetzner.labels.%s must be a string", k);
                                return -EINVAL;
                        }
                        if (streq(k, CN_PROVIDER_MACHINE_UID_LABEL) || streq(k, CN_PROVIDER_CONTROL_PLANE_LABEL)) {
                                (void) cn_set_message(ret_reason, "spec.hetzner.labels must not set %s", k);
                                return -EINVAL;
                        }
                }
        }
        return 0;
}

int cn_provider_hetzner_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels) {
        const char *size = cn_json_string(spec, "serverType", NULL), *loc = cn_json_string(spec, "location", NULL);
        char **l = calloc(5, sizeof(char *));

        if (!l)
                return -ENOMEM;
        l[0] = strdup("size");
        l[1] = strdup(strempty(size));
        l[2] = strdup("location");
        l[3] = strdup(strempty(loc));
        if (!l[0] || !l[1] || !l[2] || !l[3]) {
                strv_free(l);
                return -ENOMEM;
        }
        *ret_labels = l;
        return 0;
}

int cn_provider_hetzner_machine_view(json_object *server, json_object **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        const char *status = cn_json_string(server, "status", NULL);
        int r;

        r = cn_provider_hetzner_parse_server(server, NULL, &i);
        if (r < 0)
                return r;
        return cn_provider_machine_view(i, status, status && streq(status, "running"), ret);
}

typedef struct MachineArgs {
        const CnProviderMachine *machine;
        const char *userdata_text;
        const char *new_uid;
        const char *operation;
        CnProviderHttpCallback cb;
} MachineArgs;

static int list_url(CnProvider *p, const char *uid, char **ret_url, CnProviderHttpOptions *o) {
        _cleanup_free_ char *sel = NULL, *esc = NULL;
        const char *endpoint;
        int r;

        r = cn_provider_hetzner_request_options(p, &endpoint, o);
        if (r < 0)
                return r;
        if (isempty(uid))
                return -EINVAL;
        if (asprintf(&sel, CN_PROVIDER_MACHINE_UID_LABEL "=%s", uid) < 0)
                return -ENOMEM;
        esc = cn_http_escape(sel);
        if (!esc || asprintf(ret_url, "%s/servers?label_selector=%s", endpoint, esc) < 0)
                return -ENOMEM;
        return 0;
}

static void on_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        json_object *servers = cn_json_get(reply->body, "servers", NULL), *view = NULL;

        if (res.error >= 0) {
                size_t n = servers && json_object_is_type(servers, json_type_array) ? json_object_array_length(servers) : 0;

                if (n == 0)
                        res = (CnProviderResult) { .error = -ENOENT, .message = "no server carries this machine's UID" };
                else if (n > 1)
                        res = (CnProviderResult) { .error = -CN_PROVIDER_EMULTIPLE,
                                                   .message = "several servers carry this machine's UID" };
                else if (cn_provider_hetzner_machine_view(json_object_array_get_idx(servers, 0), &view) < 0)
                        res = (CnProviderResult) { .error = -EBADMSG,
                                                   .message = "unexpected server object from the Hetzner API" };
        }
        cn_provider_call_finish_machine(call, &res, view);
}

static int start_get(CnProviderCall *c, void *arg) {
        MachineArgs *a = arg;
        CnProviderHttpOptions o = { .operation = a->operation };
        _cleanup_free_ char *url = NULL;
        int r;

        r = list_url(cn_provider_call_provider(c), a->machine->uid, &url, &o);
        if (r < 0)
                return r;
        return cn_provider_call_http(c, "GET", url, &o, a->cb, NULL);
}

int cn_provider_hetzner_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                    void *userdata, CnProviderCall **ret) {
        MachineArgs a = { .machine = m, .operation = "machine_get", .cb = on_list };

        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_get, &a, ret);
}

static void on_created(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        json_object *view = NULL;

        if (res.error >= 0 && cn_provider_hetzner_machine_view(cn_json_get(reply->body, "server", NULL), &view) < 0)
                res = (CnProviderResult) { .error = -EBADMSG, .message = "unexpected server object from the Hetzner API" };
        cn_provider_call_finish_machine(call, &res, view);
}

static int copy_member(json_object *dst, json_object *spec, const char *from, const char *to) {
        json_object *v = json_object_object_get(spec, from);

        return v ? cn_json_set(dst, json_object_get(v), to, NULL) : 0;
}

static int start_create(CnProviderCall *c, void *arg) {
        MachineArgs *a = arg;
        json_object *spec = a->machine->spec, *labels;
        _cleanup_json_ json_object *body = json_object_new_object();
        CnProviderHttpOptions o = { .operation = "machine_create" };
        _cleanup_free_ char *url = NULL;
        const char *endpoint;
        int r;

        if (!body)
                return -ENOMEM;
        r = cn_provider_hetzner_request_options(cn_provider_call_provider(c), &endpoint, &o);
        if (r < 0)
                return r;
        r = cn_json_set_string(body, a->machine->name, "name", NULL);
        if (r >= 0)
                r = copy_member(body, spec, "serverType", "server_type");
        if (r >= 0)
                r = copy_member(body, spec, "image", "image");
        if (r >= 0)
                r = copy_member(body, spec, "location", "location");
        if (r >= 0)
                r = copy_member(body, spec, "placementGroup", "placement_group");
        if (r >= 0)
                r = copy_member(body, spec, "networks", "networks");
        if (r >= 0)
                r = copy_member(body, spec, "sshKeys", "ssh_keys");
        if (r >= 0)
                r = copy_member(body, spec, "labels", "labels");
        if (r < 0)
                return r;
        labels = json_object_object_get(body, "labels");
        if (!labels) {
                r = cn_json_set(body, json_object_new_object(), "labels", NULL);
                if (r < 0)
                        return r;
        } else {
                /* The spec's labels are shared with the CR; give the server its own copy. */
                json_object *copy = NULL;

                if (json_object_deep_copy(labels, &copy, NULL) < 0)
                        return -ENOMEM;
                r = cn_json_set(body, copy, "labels", NULL);
                if (r < 0)
                        return r;
        }
        r = cn_json_set_string(body, a->machine->uid, "labels", CN_PROVIDER_MACHINE_UID_LABEL, NULL);
        if (r >= 0 && !isempty(a->machine->control_plane_of))
                /* The cluster's load balancer targets the servers with this label. */
                r = cn_json_set_string(body, a->machine->control_plane_of, "labels", CN_PROVIDER_CONTROL_PLANE_LABEL,
                                       NULL);
        if (r < 0)
                return r;
        if (a->userdata_text) {
                r = cn_json_set_string(body, a->userdata_text, "user_data", NULL);
                if (r < 0)
                        return r;
        }
        o.body = body;
        if (asprintf(&url, "%s/servers", endpoint) < 0)
                return -ENOMEM;
        return cn_provider_call_http(c, "POST", url, &o, on_created, NULL);
}

int cn_provider_hetzner_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                       CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        MachineArgs a = { .machine = m, .userdata_text = userdata_text };

        if (isempty(m->uid) || isempty(m->name))
                return -EINVAL;
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_create, &a, ret);
}

static void on_cleanup_list(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        json_object *servers = cn_json_get(reply->body, "servers", NULL);
        CnProvider *p = cn_provider_call_provider(call);
        CnProviderHttpOptions o = { .operation = "machine_delete" };
        _cleanup_free_ char *url = NULL;
        const char *endpoint;
        int r;

        if (res.error < 0) {
                cn_provider_call_finish_cleanup(call, &res, false);
                return;
        }
        for (size_t i = 0; servers && json_object_is_type(servers, json_type_array) &&
                           i < json_object_array_length(servers);
             i++) {
                json_object *s = json_object_array_get_idx(servers, i);
                const char *status = cn_json_string(s, "status", NULL);
                int64_t id;

                if (status && streq(status, "deleting"))
                        continue;
                if (cn_json_get_int64(s, &id, "id", NULL) < 0)
                        continue;
                r = cn_provider_hetzner_request_options(p, &endpoint, &o);
                if (r >= 0 && asprintf(&url, "%s/servers/%" PRIi64, endpoint, id) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = cn_provider_call_http(call, "DELETE", url, &o, cn_provider_on_deleted, NULL);
                if (r < 0) {
                        res = (CnProviderResult) { .error = r, .message = "could not issue the delete request" };
                        cn_provider_call_finish_cleanup(call, &res, false);
                }
                return;
        }
        /* Nothing left, or only servers the cloud is already deleting. */
        cn_provider_call_finish_cleanup(call, &res,
                                        !servers || !json_object_is_type(servers, json_type_array) ||
                                                json_object_array_length(servers) == 0);
}

int cn_provider_hetzner_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                        void *userdata, CnProviderCall **ret) {
        MachineArgs a = { .machine = m, .operation = "machine_cleanup_list", .cb = on_cleanup_list };

        return cn_provider_start_machine_call(p, NULL, cb, userdata, start_get, &a, ret);
}

/* ---- failure domains: the locations ---- */

int cn_provider_hetzner_failure_domains_parse(json_object *locations, const char *region, json_object **ret) {
        _cleanup_json_ json_object *list = json_object_new_array();
        size_t n;

        if (!list)
                return -ENOMEM;
        if (!locations || !json_object_is_type(locations, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(locations);
        for (size_t i = 0; i < n; i++) {
                json_object *loc = json_object_array_get_idx(locations, i);
                const char *name = cn_json_string(loc, "name", NULL), *zone = cn_json_string(loc, "network_zone", NULL);
                int r;

                if (isempty(name))
                        return -EBADMSG;
                /* Hetzner has no regions; a network zone (eu-central) groups locations, so a
                 * region names either a network zone or one location. */
                if (!isempty(region) && !streq(name, region) && !(zone && streq(zone, region)))
                        continue;
                r = cn_provider_failure_domain_add(list, name, (const char *const[]) {
                        "networkZone", zone, "country", cn_json_string(loc, "country", NULL),
                        "city", cn_json_string(loc, "city", NULL), NULL });
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

typedef struct FailureDomainsArgs {
        const char *region;
} FailureDomainsArgs;

static void on_locations(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        const char *region = cn_provider_call_get_state(call);
        json_object *list = NULL;

        if (res.error >= 0) {
                res.error = cn_provider_hetzner_failure_domains_parse(cn_json_get(reply->body, "locations", NULL),
                                                                       region, &list);
                if (res.error < 0)
                        res.message = "unexpected location list from the Hetzner API";
                else if (json_object_array_length(list) == 0) {
                        json_object_put(TAKE_PTR(list));
                        res = (CnProviderResult) { .error = -EINVAL,
                                                   .message = "no Hetzner location matches the cluster's region" };
                }
        }
        cn_provider_call_finish_machine(call, &res, list);
}

static int start_locations(CnProviderCall *c, void *arg) {
        FailureDomainsArgs *a = arg;
        CnProviderHttpOptions o = { .operation = "failure_domains" };
        _cleanup_free_ char *url = NULL;
        const char *endpoint;
        int r;

        r = cn_provider_hetzner_request_options(cn_provider_call_provider(c), &endpoint, &o);
        if (r < 0)
                return r;
        if (a->region) {
                char *copy = strdup(a->region);

                if (!copy)
                        return -ENOMEM;
                cn_provider_call_set_state(c, copy, free);
        }
        /* Hetzner has a handful of locations; one page of the maximum size holds them all. */
        if (asprintf(&url, "%s/locations?per_page=50", endpoint) < 0)
                return -ENOMEM;
        return cn_provider_call_http(c, "GET", url, &o, on_locations, NULL);
}

int cn_provider_hetzner_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb,
                                        void *userdata, CnProviderCall **ret) {
        FailureDomainsArgs a = { .region = isempty(region) ? NULL : region };

        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_locations, &a, ret);
}

/* ---- migrate_uid: relabel a server to a new machine UID ---- */

typedef struct Migration {
        char *old_uid; /* NULL: a UID of no live object */
        char *new_uid;
        CnProviderUidIsLive uid_is_live;
        void *uid_is_live_userdata;
} Migration;

static void migration_free(void *p) {
        Migration *m = p;

        if (!m)
                return;
        free(m->old_uid);
        free(m->new_uid);
        free(m);
}

/* The server id of a providerID "hcloud://42" or of a bare instance id "42". */
int cn_provider_hetzner_server_id(const char *provider_id, int64_t *ret) {
        const char *id = provider_id;
        char *end;
        long long v;

        if (isempty(id))
                return -EINVAL;
        if (strneq(id, CN_PROVIDER_HETZNER_ID_PREFIX, STRLEN(CN_PROVIDER_HETZNER_ID_PREFIX)))
                id += STRLEN(CN_PROVIDER_HETZNER_ID_PREFIX);
        if (isempty(id) || strspn(id, "0123456789") != strlen(id))
                return -EINVAL;
        errno = 0;
        v = strtoll(id, &end, 10);
        if (errno != 0 || *end || v <= 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static void on_migrate_get(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };
        Migration *mg = cn_provider_call_get_state(call);
        json_object *server = cn_json_get(reply->body, "server", NULL), *labels;
        _cleanup_json_ json_object *body = json_object_new_object();
        CnProviderHttpOptions o = { .operation = "machine_migrate_uid" };
        _cleanup_free_ char *url = NULL;
        const char *endpoint, *current;
        int64_t id;
        int r;

        if (res.error < 0) {
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        if (!body || !server || cn_json_get_int64(server, &id, "id", NULL) < 0) {
                res = (CnProviderResult) { .error = -EBADMSG, .message = "unexpected server object from the Hetzner API" };
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        current = cn_json_string(server, "labels", CN_PROVIDER_MACHINE_UID_LABEL, NULL);
        if (cn_provider_migration_check(mg->old_uid, mg->uid_is_live, mg->uid_is_live_userdata, current,
                                        mg->new_uid) < 0) {
                /* Not the server this machine was: adopting it could take another machine's. */
                res = (CnProviderResult) { .error = -CN_PROVIDER_EOWNED,
                                           .message = "the server named by providerID belongs to another machine" };
                cn_provider_call_finish_machine(call, &res, NULL);
                return;
        }
        /* PUT replaces all labels: keep the server's others. */
        labels = cn_json_get(server, "labels", NULL);
        r = cn_json_set(body, labels && json_object_is_type(labels, json_type_object) ? json_object_get(labels)
                                                                                       : json_object_new_object(),
                        "labels", NULL);
        if (r >= 0)
                r = cn_json_set_string(body, mg->new_uid, "labels", CN_PROVIDER_MACHINE_UID_LABEL, NULL);
        if (r >= 0)
                r = cn_provider_hetzner_request_options(cn_provider_call_provider(call), &endpoint, &o);
        if (r >= 0 && asprintf(&url, "%s/servers/%" PRIi64, endpoint, id) < 0)
                r = -ENOMEM;
        o.body = body;
        if (r >= 0)
                r = cn_provider_call_http(call, "PUT", url, &o, on_created, NULL);
        if (r < 0) {
                res = (CnProviderResult) { .error = r, .message = "could not issue the relabel request" };
                cn_provider_call_finish_machine(call, &res, NULL);
        }
}

static int start_migrate(CnProviderCall *c, void *arg) {
        MachineArgs *a = arg;
        CnProviderHttpOptions o = { .operation = "machine_migrate_get" };
        _cleanup_free_ char *url = NULL;
        Migration *mg;
        const char *endpoint;
        int64_t id;
        int r;

        r = cn_provider_hetzner_server_id(a->machine->provider_id, &id);
        if (r < 0)
                return r;
        r = cn_provider_hetzner_request_options(cn_provider_call_provider(c), &endpoint, &o);
        if (r < 0)
                return r;
        mg = calloc(1, sizeof(Migration));
        if (!mg)
                return -ENOMEM;
        cn_provider_call_set_state(c, mg, migration_free);
        mg->uid_is_live = a->machine->uid_is_live;
        mg->uid_is_live_userdata = a->machine->uid_is_live_userdata;
        mg->new_uid = strdup(a->new_uid);
        if (!mg->new_uid || (!isempty(a->machine->uid) && !(mg->old_uid = strdup(a->machine->uid))))
                return -ENOMEM;
        if (asprintf(&url, "%s/servers/%" PRIi64, endpoint, id) < 0)
                return -ENOMEM;
        return cn_provider_call_http(c, "GET", url, &o, on_migrate_get, NULL);
}

int cn_provider_hetzner_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                    CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        MachineArgs a = { .machine = m, .new_uid = new_uid };

        if (isempty(new_uid))
                return -EINVAL;
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_migrate, &a, ret);
}

/* ---- cloud config for the workload cluster ---- */

int cn_provider_hetzner_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config) {
        _cleanup_json_ json_object *cfg = json_object_new_object();
        CnProviderHttpOptions o = {};
        json_object *networks = json_object_object_get(spec, "networks");
        const char *endpoint;
        int r;

        if (!cfg)
                return -ENOMEM;
        r = cn_provider_hetzner_request_options(p, &endpoint, &o);
        if (r < 0)
                return r;
        /* No token: the workload cluster's cloud-controller-manager gets its own credentials;
         * copying the management cluster's onto every node would widen where it can leak. */
        r = cn_json_set_string(cfg, endpoint, "Global", "endpoint", NULL);
        if (r >= 0 && networks && json_object_is_type(networks, json_type_array) &&
            json_object_array_length(networks) > 0) {
                json_object *n = json_object_array_get_idx(networks, 0);

                /* The first private network carries the InternalIP, as hcloud's HCLOUD_NETWORK. */
                if (json_object_is_type(n, json_type_string) || json_object_is_type(n, json_type_int))
                        r = cn_json_set_string(cfg, json_object_get_string(n), "Global", "network", NULL);
        }
        if (r < 0)
                return r;
        *ret_cloud_config = TAKE_PTR(cfg);
        return 0;
}
