/* SPDX-License-Identifier: Apache-2.0 */
/* Proxmox VE machine lifecycle, as the Cluster API Proxmox provider (CAPMOX) drives the API: a
 * machine is a full clone of a template VM (spec.proxmoxve: sourceNode, templateID, target,
 * storage, pool, numCores, memoryMiB, tags, isoStorage), its bootstrap data a NoCloud seed (an ISO
 * 9660 image, volume cidata: user-data, meta-data, network-config) uploaded to isoStorage and
 * attached as ide2 cdrom, then started.
 *
 * A create is one call that runs to the end: GET /cluster/nextid, POST .../qemu/{template}/clone
 * (another VMID when the one we were given was taken meanwhile), the clone task awaited
 * (GET .../tasks/{upid}/status), the seed uploaded (POST .../storage/{storage}/upload) unless it is
 * there already, POST .../config (cores, memory, ide2), POST .../status/start, and last the tag
 * cloudnode-machine-<UID> (PUT .../config). The clone carries the machine's UID in its description
 * from the start, so that a create cut short anywhere (a crash, an error) is found by the next one
 * and resumed, never cloned twice; only a VM with the tag is complete, and only a complete VM is what
 * machine_get reports. Cleanup stops the VM, deletes the seed, DELETEs the VM with purge and
 * destroy-unreferenced-disks, each after checking that the VM carries this machine's UID, and ends
 * once neither VM nor seed is left. The failure domains are the cluster's online nodes (GET
 * /nodes); a Machine's failure domain becomes spec.proxmoxve.target. After clusterctl move,
 * migrate_uid gives the VM named by providerID the new UID (PUT .../config: tag and description). */
#include <errno.h>
#include <inttypes.h>

#include "hash-util.h"
#include "iso-writer.h"
#include "json-util.h"
#include "log.h"
#include "provider-proxmox.h"
#include "string-util.h"

#define PVE_TAG_PREFIX "cloudnode-machine-"
#define PVE_UID_MARK CN_PROVIDER_MACHINE_UID_LABEL ": "
#define PVE_SEED_PREFIX "cloudnode-"
/* A task's status is asked at once, then after a delay that starts short (a configuration or a
 * start ends within a second) and doubles up to a cap (a clone may take minutes). */
#define PVE_TASK_POLL_FIRST (100 * USEC_PER_MSEC)
#define PVE_TASK_POLL_CAP (2 * USEC_PER_SEC)
/* A full clone copies the template's disks: minutes on slow storage. */
#define PVE_TASK_TIMEOUT (20 * USEC_PER_MINUTE)
#define PVE_NEXTID_TRIES 5
#define PVE_MAX_VMS 100000
#define PVE_MAX_CANDIDATES 16
#define PVE_UPID_MAX 256

typedef enum Op {
        OP_GET,
        OP_CREATE,
        OP_CLEANUP,
} Op;

typedef struct PveMachine PveMachine;
typedef void (*Step)(CnProviderCall *call);

struct PveMachine {
        CnProviderAuth auth;
        Op op;
        char *uid;
        char *name;
        char *tag;
        char *seed;     /* the seed's file name */
        /* the spec */
        char *source_node;
        char *target;
        char *storage;
        char *pool;
        char *iso_storage;
        int64_t template_id;
        int64_t cores;
        int64_t memory;
        bool full;
        json_object *tags; /* the spec's tags, an array of strings */
        char *userdata;
        /* the request in flight */
        const char *method;
        char *path;
        char *form;
        char *body;
        size_t body_size;
        char *content_type;
        const char *operation;
        CnProviderHttpCallback cb;
        /* the VM */
        int64_t vmid;
        char *node;
        json_object *config;
        json_object *status;
        json_object *candidates; /* VMs named as the machine without its tag: maybe cut short */
        size_t scan;
        unsigned n_ours;
        unsigned nextid_tries;
        /* the task awaited */
        char *task_node;
        char *upid;
        usec_t task_deadline, task_poll;
        Step after_task;
        char *region; /* failure_domains: the one asked for */
        char *new_uid; /* migrate_uid */
        CnProviderUidIsLive uid_is_live;
        void *uid_is_live_userdata;
        char *message;
};

static void pve_machine_free(void *p) {
        PveMachine *m = p;

        if (!m)
                return;
        free(m->uid);
        free(m->name);
        free(m->tag);
        free(m->seed);
        free(m->source_node);
        free(m->target);
        free(m->storage);
        free(m->pool);
        free(m->iso_storage);
        json_object_put(m->tags);
        if (m->userdata)
                explicit_bzero(m->userdata, strlen(m->userdata));
        free(m->userdata);
        free(m->path);
        free(m->form);
        if (m->body)
                explicit_bzero(m->body, m->body_size);
        free(m->body);
        free(m->content_type);
        free(m->node);
        json_object_put(m->config);
        json_object_put(m->status);
        json_object_put(m->candidates);
        free(m->task_node);
        free(m->upid);
        free(m->region);
        free(m->new_uid);
        free(m->message);
        free(m);
}

static bool str_is(const char *a, const char *b) {
        return a && streq(a, b);
}

static void pve_machine_freep(PveMachine **m) {
        pve_machine_free(*m);
}

/* ---- spec ---- */

static bool is_pve_id(const char *s) {
        /* node, storage and pool names: PVE's pve-node / pve-storage-id / pve-poolid formats */
        return !isempty(s) && strlen(s) <= 63 &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == strlen(s) &&
               s[0] != '.' && s[0] != '-';
}

static bool is_pve_tag(const char *s) {
        /* PVE's pve-tag format: [a-z0-9_][a-z0-9_\-+.]* (case-insensitive) */
        return !isempty(s) && strlen(s) <= 128 && s[0] != '-' && s[0] != '+' && s[0] != '.' &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+.") == strlen(s);
}

/* The reason goes to the CloudnodeMachine's status; the spec is refused either way. */
#define invalid(ret_reason, ...) ((void) cn_set_message(ret_reason, __VA_ARGS__), -EINVAL)

int cn_provider_proxmox_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec) {
        _cleanup_json_ json_object *s = NULL;
        int r = 0;

        if (json_object_deep_copy(spec, &s, NULL) < 0)
                return -ENOMEM;
        /* A full clone does not depend on the template, which may then change or go. */
        if (s && json_object_is_type(s, json_type_object) && !json_object_object_get(s, "full"))
                r = cn_json_set(s, json_object_new_boolean(true), "full", NULL);
        if (r >= 0 && s && json_object_is_type(s, json_type_object) && !json_object_object_get(s, "isoStorage"))
                r = cn_json_set_string(s, "local", "isoStorage", NULL);
        if (r < 0)
                return r;
        *ret_spec = TAKE_PTR(s);
        return 0;
}

static int check_int(json_object *spec, const char *key, int64_t min, int64_t max, bool required, char **ret_reason) {
        json_object *v = json_object_object_get(spec, key);
        int64_t n;

        if (!v)
                return required ? invalid(ret_reason, "spec.proxmoxve.%s is required", key) : 0;
        if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < min || n > max)
                return invalid(ret_reason, "spec.proxmoxve.%s must be an integer from %" PRId64 " to %" PRId64, key,
                               min, max);
        return 0;
}

int cn_provider_proxmox_validate(CnProvider *p, json_object *spec, char **ret_reason) {
        static const char *const names[] = { "sourceNode", "target", "storage", "pool", "isoStorage" };
        json_object *tags, *full;
        int r;

        if (!spec || !json_object_is_type(spec, json_type_object))
                return invalid(ret_reason, "spec.proxmoxve is missing");
        if (!json_object_object_get(spec, "sourceNode"))
                return invalid(ret_reason, "spec.proxmoxve.sourceNode is required");
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                json_object *v = json_object_object_get(spec, names[i]);

                if (v && (!json_object_is_type(v, json_type_string) || !is_pve_id(json_object_get_string(v))))
                        return invalid(ret_reason, "spec.proxmoxve.%s must be a Proxmox VE name (1-63 of A-Z a-z 0-9 "
                                       "- _ .)", names[i]);
        }
        r = check_int(spec, "templateID", 100, 999999999, true, ret_reason);
        if (r >= 0)
                r = check_int(spec, "numCores", 1, 512, false, ret_reason);
        if (r >= 0)
                r = check_int(spec, "memoryMiB", 16, 8 * 1024 * 1024, false, ret_reason);
        if (r < 0)
                return r;
        full = json_object_object_get(spec, "full");
        if (full && !json_object_is_type(full, json_type_boolean))
                return invalid(ret_reason, "spec.proxmoxve.full must be true or false");
        tags = json_object_object_get(spec, "tags");
        if (tags) {
                if (!json_object_is_type(tags, json_type_array) || json_object_array_length(tags) > 32)
                        return invalid(ret_reason, "spec.proxmoxve.tags must be a list of at most 32 tags");
                for (size_t i = 0; i < json_object_array_length(tags); i++) {
                        json_object *t = json_object_array_get_idx(tags, i);

                        if (!json_object_is_type(t, json_type_string) || !is_pve_tag(json_object_get_string(t)))
                                return invalid(ret_reason, "spec.proxmoxve.tags[%zu] is not a Proxmox VE tag "
                                               "([a-z0-9_][a-z0-9_+.-]*)", i);
                        if (cn_startswith(json_object_get_string(t), PVE_TAG_PREFIX))
                                return invalid(ret_reason, "spec.proxmoxve.tags must not start with " PVE_TAG_PREFIX);
                }
        }
        return 0;
}

int cn_provider_proxmox_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels) {
        const char *node = cn_json_string(spec, "target", NULL) ?: cn_json_string(spec, "sourceNode", NULL);
        int64_t template = 0;
        char **l = calloc(5, sizeof(char *));

        if (!l)
                return -ENOMEM;
        (void) cn_json_get_int64(spec, &template, "templateID", NULL);
        l[0] = strdup("template");
        if (asprintf(&l[1], "%" PRId64, template) < 0)
                l[1] = NULL;
        l[2] = strdup("zone");
        l[3] = strdup(strempty(node));
        if (!l[0] || !l[1] || !l[2] || !l[3]) {
                strv_free(l);
                return -ENOMEM;
        }
        *ret_labels = l;
        return 0;
}

/* ---- requests ---- */

static void finish(CnProviderCall *call, int error, usec_t retry_after, const char *message, json_object *view) {
        PveMachine *m = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = error, .retry_after = retry_after };

        if (message) {
                /* PVE's messages end in a newline */
                free(m->message);
                m->message = strdup(message);
                if (m->message)
                        for (size_t n = strlen(m->message); n > 0 && strchr(" \t\r\n", m->message[n - 1]); n--)
                                m->message[n - 1] = 0;
                res.message = m->message ?: message;
        }
        if (m->op == OP_CLEANUP)
                cn_provider_call_finish_cleanup(call, &res, false);
        else
                cn_provider_call_finish_machine(call, &res, view);
}

static void fail_auth(CnProviderCall *call, const CnProviderResult *res) {
        finish(call, res->error, res->retry_after, res->message, NULL);
}

static void fail_reply(CnProviderCall *call, const CnProviderHttpReply *reply) {
        finish(call, reply->error, reply->retry_after, cn_provider_proxmox_reply_message(cn_provider_call_provider(call),
                                                                                          reply),
               NULL);
}

static void on_reply(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (cn_provider_proxmox_reauthorize(call, &m->auth, reply))
                return;
        m->cb(call, reply, userdata);
}

static int send_request(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        CnProviderHttpOptions opts = {
                .operation = m->operation,
                .form = m->form,
                .raw_body = m->body,
                .raw_body_size = m->body_size,
                .content_type = m->content_type,
        };

        return cn_provider_proxmox_request(call, m->method, m->path, &opts, on_reply, NULL);
}

/* Issues method path (owned, NULL: out of memory) with the form (owned, may be NULL). */
static int request(CnProviderCall *call, const char *method, char *path, char *form, const char *operation,
                   CnProviderHttpCallback cb) {
        PveMachine *m = cn_provider_call_get_state(call);

        free(m->path);
        free(m->form);
        m->path = path;
        m->form = form;
        if (!path)
                return -ENOMEM;
        m->method = method;
        m->operation = operation;
        m->cb = cb;
        return cn_provider_proxmox_authorize(call, &m->auth);
}

static void check(CnProviderCall *call, int r) {
        if (r < 0)
                finish(call, r, 0, r == -ENOMEM ? "out of memory" : "cannot build the Proxmox VE API request", NULL);
}

static char *vm_path(PveMachine *m, const char *tail) {
        _cleanup_free_ char *node = cn_http_escape(m->node);
        char *p = NULL;

        if (!node || asprintf(&p, "/nodes/%s/qemu/%" PRId64 "%s", node, m->vmid, tail) < 0)
                return NULL;
        return p;
}

static char *form_pair(const char *key, const char *value) {
        _cleanup_free_ char *v = cn_http_escape(value);

        return v ? cn_strjoin(key, "=", v, NULL) : NULL;
}

/* Appends "&key=value" (escaped) to *form. */
static int form_add(char **form, const char *key, const char *value) {
        _cleanup_free_ char *pair = form_pair(key, value);
        char *n;

        if (!pair)
                return -ENOMEM;
        n = *form ? cn_strjoin(*form, "&", pair, NULL) : strdup(pair);
        if (!n)
                return -ENOMEM;
        free(*form);
        *form = n;
        return 0;
}

/* ---- tasks ---- */

static bool upid_ok(const char *s) {
        return cn_startswith(s, "UPID:") && strlen(s) < PVE_UPID_MAX &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:@._!-") == strlen(s);
}

static void on_task_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void poll_task(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        _cleanup_free_ char *node = cn_http_escape(m->task_node);
        char *path = NULL;

        if (!node || asprintf(&path, "/nodes/%s/tasks/%s/status", node, m->upid) < 0)
                path = NULL;
        check(call, request(call, "GET", path, NULL, "task_status", on_task_status));
}

/* The delay before the next look at a task; each is twice the one before, up to the cap. */
static usec_t next_poll(PveMachine *m) {
        usec_t d = m->task_poll ?: PVE_TASK_POLL_FIRST;

        m->task_poll = MIN(d * 2, PVE_TASK_POLL_CAP);
        return d;
}

/* Awaits the task whose UPID a reply's data is, then runs next. */
static void await_task(CnProviderCall *call, const CnProviderHttpReply *reply, const char *node, Step next) {
        PveMachine *m = cn_provider_call_get_state(call);
        const char *upid = cn_json_string(reply->body, "data", NULL);

        if (!upid_ok(upid))
                return finish(call, -EBADMSG, 0, "the Proxmox VE API answered no usable task id (UPID)", NULL);
        free(m->upid);
        free(m->task_node);
        m->upid = strdup(upid);
        m->task_node = strdup(node);
        if (!m->upid || !m->task_node)
                return check(call, -ENOMEM);
        m->after_task = next;
        m->task_deadline = cn_now(CLOCK_MONOTONIC) + PVE_TASK_TIMEOUT;
        m->task_poll = PVE_TASK_POLL_FIRST;
        poll_task(call);
}

static void on_task_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);
        const char *status = cn_json_string(data, "status", NULL), *exit = cn_json_string(data, "exitstatus", NULL);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (str_is(status, "running")) {
                if (cn_now(CLOCK_MONOTONIC) > m->task_deadline)
                        return finish(call, -ETIMEDOUT, 0, "a Proxmox VE task did not end in time", NULL);
                return check(call, cn_provider_call_after(call, next_poll(m), poll_task));
        }
        if (!str_is(status, "stopped") || !exit)
                return finish(call, -EBADMSG, 0, "malformed task status from the Proxmox VE API", NULL);
        if (!streq(exit, "OK"))
                /* The task's own error: what was asked did not happen, and may next time. */
                return finish(call, -EIO, 0, exit, NULL);
        m->after_task(call);
}

/* ---- the machine's VMs ---- */

static bool has_tag(json_object *vm, const char *tag) {
        const char *tags = cn_json_string(vm, "tags", NULL);
        size_t n = strlen(tag);

        /* "a;b;c" (the API also takes "," and " " on input) */
        for (const char *t = tags; t && *t; t += strcspn(t, ";, "), t += strspn(t, ";, "))
                if (strncmp(t, tag, n) == 0 && strchr(";, ", t[n]))
                        return true;
        return false;
}

static bool description_has_uid(json_object *config, const char *uid) {
        const char *d = cn_json_string(config, "description", NULL);
        size_t n = strlen(PVE_UID_MARK), u = strlen(uid);

        for (const char *l = d; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, PVE_UID_MARK, n) == 0 && strncmp(l + n, uid, u) == 0 && strchr("\r\n", l[n + u]))
                        return true;
        return false;
}

static int select_vm(PveMachine *m, json_object *vm) {
        const char *node = cn_json_string(vm, "node", NULL);

        if (!is_pve_id(node) || cn_json_get_int64(vm, &m->vmid, "vmid", NULL) < 0 || m->vmid < 100)
                return -EBADMSG;
        free(m->node);
        m->node = strdup(node);
        return m->node ? 0 : -ENOMEM;
}

static void describe(CnProviderCall *call);
static void create_clone(CnProviderCall *call);
static void create_resume(CnProviderCall *call);
static void cleanup_vm(CnProviderCall *call);
static void cleanup_seed(CnProviderCall *call);
static void scan_next(CnProviderCall *call);

static void on_resources(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL), *tagged = NULL;
        size_t n_tagged = 0;
        int r;

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_array) || json_object_array_length(data) > PVE_MAX_VMS)
                return finish(call, -EBADMSG, 0, "malformed VM list from the Proxmox VE API", NULL);
        json_object_put(m->candidates);
        m->candidates = json_object_new_array();
        if (!m->candidates)
                return check(call, -ENOMEM);
        m->scan = 0;
        m->n_ours = 0;
        for (size_t i = 0; i < json_object_array_length(data); i++) {
                json_object *vm = json_object_array_get_idx(data, i);
                int64_t template = 0;

                (void) cn_json_get_int64(vm, &template, "template", NULL);
                if (!cn_json_string_is(vm, "type", "qemu") || template != 0)
                        continue;
                if (has_tag(vm, m->tag)) {
                        n_tagged++;
                        tagged = vm;
                } else if (m->op != OP_GET && cn_json_string_is(vm, "name", m->name)) {
                        if (json_object_array_length(m->candidates) >= PVE_MAX_CANDIDATES)
                                return finish(call, -CN_PROVIDER_EMULTIPLE, 0, "too many VMs have this machine's name",
                                              NULL);
                        if (json_object_array_add(m->candidates, json_object_get(vm)) < 0)
                                return check(call, -ENOMEM);
                }
        }
        if (n_tagged > 1)
                return finish(call, -CN_PROVIDER_EMULTIPLE, 0, "several VMs carry this machine's tag", NULL);
        if (m->op == OP_CLEANUP) {
                if (tagged) {
                        r = select_vm(m, tagged);
                        if (r < 0)
                                return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
                        return cleanup_vm(call);
                }
                return scan_next(call);
        }
        if (tagged) {
                r = select_vm(m, tagged);
                if (r < 0)
                        return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
                return describe(call);
        }
        if (m->op == OP_GET)
                return finish(call, -ENOENT, 0, "no VM carries this machine's tag", NULL);
        scan_next(call);
}

static void on_candidate_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *config = cn_json_get(reply->body, "data", NULL);

        /* gone meanwhile: not ours to resume */
        if (reply->error == -ENOENT)
                return scan_next(call);
        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!config || !json_object_is_type(config, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM configuration from the Proxmox VE API", NULL);
        if (!description_has_uid(config, m->uid))
                return scan_next(call);
        /* A VM cut short in its create: this machine's. */
        if (++m->n_ours > 1)
                return finish(call, -CN_PROVIDER_EMULTIPLE, 0, "several VMs carry this machine's UID", NULL);
        json_object_put(m->config);
        m->config = json_object_get(config);
        if (m->op == OP_CLEANUP)
                return cleanup_vm(call);
        /* keep scanning: a second one would make it ambiguous */
        scan_next(call);
}

/* The VMs named as the machine, one config read each: which carries its UID in the description. */
static void scan_next(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *vm;
        int r;

        if (m->scan >= json_object_array_length(m->candidates)) {
                if (m->op == OP_CLEANUP)
                        return cleanup_seed(call);
                return m->n_ours == 1 ? create_resume(call) : create_clone(call);
        }
        vm = json_object_array_get_idx(m->candidates, m->scan++);
        if (m->n_ours == 1) {
                /* the one found stays the VM: check the others against a copy of its place */
                int64_t vmid = m->vmid;
                _cleanup_free_ char *node = TAKE_PTR(m->node);
                char *path;

                r = select_vm(m, vm);
                path = r >= 0 ? vm_path(m, "/config") : NULL;
                free(m->node);
                m->node = TAKE_PTR(node);
                m->vmid = vmid;
                if (r < 0)
                        return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
                return check(call, request(call, "GET", path, NULL, "machine_lookup", on_candidate_config));
        }
        r = select_vm(m, vm);
        if (r < 0)
                return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
        check(call, request(call, "GET", vm_path(m, "/config"), NULL, "machine_lookup", on_candidate_config));
}

/* ---- the view of a complete VM ---- */

static void finish_view(CnProviderCall *call, json_object *agent_result) {
        CnProvider *p = cn_provider_call_provider(call);
        PveMachine *m = cn_provider_call_get_state(call);
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;
        const char *state = cn_json_string(m->status, "status", NULL);
        json_object *view = NULL;
        bool ready;
        int r;

        r = cn_provider_proxmox_parse_vm(cn_provider_proxmox_region(p), m->node, m->vmid, NULL, m->status, m->config,
                                         agent_result, &i);
        if (r < 0)
                return finish(call, r == -ENOMEM ? r : -EBADMSG, 0, "unexpected VM data from the Proxmox VE API", NULL);
        /* Running, and its addresses known where the guest agent is to say them. */
        ready = str_is(state, "running") && (!cn_provider_proxmox_agent_enabled(m->config) || agent_result);
        r = cn_provider_machine_view(i, state, ready, &view);
        if (r < 0)
                return check(call, r);
        finish(call, 0, 0, NULL, view);
}

static void on_agent(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        /* no agent answering yet (the VM boots): running, not ready */
        if (reply->error < 0 && reply->status == 500)
                return finish_view(call, NULL);
        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!cn_json_get(reply->body, "data", "result", NULL))
                return finish(call, -EBADMSG, 0, "malformed guest agent answer from the Proxmox VE API", NULL);
        finish_view(call, cn_json_get(reply->body, "data", "result", NULL));
}

static void on_view_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM status from the Proxmox VE API", NULL);
        json_object_put(m->status);
        m->status = json_object_get(data);
        if (!cn_json_string_is(data, "status", "running") || !cn_provider_proxmox_agent_enabled(m->config))
                return finish_view(call, NULL);
        check(call, request(call, "GET", vm_path(m, "/agent/network-get-interfaces"), NULL, "machine_get", on_agent));
}

static void on_view_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM configuration from the Proxmox VE API", NULL);
        json_object_put(m->config);
        m->config = json_object_get(data);
        check(call, request(call, "GET", vm_path(m, "/status/current"), NULL, "machine_get", on_view_status));
}

static void describe(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "GET", vm_path(m, "/config"), NULL, "machine_get", on_view_config));
}

/* ---- create ---- */

static void on_nextid(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void create_clone(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (++m->nextid_tries > PVE_NEXTID_TRIES)
                return finish(call, -EBUSY, 0, "every free VM id was taken before the clone could use it", NULL);
        check(call, request(call, "GET", strdup("/cluster/nextid"), NULL, "machine_create", on_nextid));
}

static void on_cloned(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void on_nextid(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        const char *id = cn_json_string(reply->body, "data", NULL);
        _cleanup_free_ char *form = NULL, *description = NULL, *source = cn_http_escape(m->source_node);
        char *path = NULL, num[32];
        int64_t vmid;
        int r;

        if (reply->error < 0)
                return fail_reply(call, reply);
        /* a string on PVE; an integer is taken too */
        if (!id || cn_safe_atoi64(id, &vmid) < 0 || vmid < 100 || vmid > 999999999)
                return finish(call, -EBADMSG, 0, "the Proxmox VE API answered no usable VM id", NULL);
        m->vmid = vmid;
        (void) snprintf(num, sizeof(num), "%" PRId64, vmid);
        if (asprintf(&description, PVE_UID_MARK "%s\nCluster API machine %s, created by cloudnode\n", m->uid,
                     m->name) < 0)
                return check(call, -ENOMEM);
        r = form_add(&form, "newid", num);
        if (r >= 0)
                r = form_add(&form, "name", m->name);
        if (r >= 0)
                r = form_add(&form, "description", description);
        if (r >= 0)
                r = form_add(&form, "full", m->full ? "1" : "0");
        if (r >= 0)
                r = form_add(&form, "target", m->target);
        if (r >= 0 && m->storage && m->full)
                r = form_add(&form, "storage", m->storage);
        if (r >= 0 && m->pool)
                r = form_add(&form, "pool", m->pool);
        if (r < 0)
                return check(call, r);
        if (!source || asprintf(&path, "/nodes/%s/qemu/%" PRId64 "/clone", source, m->template_id) < 0)
                path = NULL;
        check(call, request(call, "POST", path, TAKE_PTR(form), "machine_create", on_cloned));
}

static void clone_done(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        free(m->node);
        m->node = strdup(m->target);
        if (!m->node)
                return check(call, -ENOMEM);
        create_resume(call);
}

static void on_cloned(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        const char *msg = reply->message;

        /* Another client took the id between nextid and the clone: ask for the next one. */
        if (reply->error < 0 && reply->status == 500 && msg && strstr(msg, "already exists"))
                return create_clone(call);
        if (reply->error == -ENOENT)
                /* the template's config is missing: the spec names no VM of the cluster */
                return finish(call, -EINVAL, 0, "spec.proxmoxve.templateID names no VM on spec.proxmoxve.sourceNode",
                              NULL);
        if (reply->error < 0)
                return fail_reply(call, reply);
        await_task(call, reply, m->source_node, clone_done);
}

static void on_resume_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
static void upload_seed(CnProviderCall *call);

/* From the clone on, every step again from the VM's state: its config first. */
static void create_resume(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "GET", vm_path(m, "/config"), NULL, "machine_create", on_resume_config));
}

static void on_resume_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);
        const char *lock = cn_json_string(data, "lock", NULL);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM configuration from the Proxmox VE API", NULL);
        if (!description_has_uid(data, m->uid))
                /* not what it was a moment ago: never touch another's VM */
                return finish(call, -EAGAIN, 0, "the VM being created no longer carries this machine's UID", NULL);
        json_object_put(m->config);
        m->config = json_object_get(data);
        /* still being cloned (by an earlier run whose task goes on) */
        if (lock && streq(lock, "clone")) {
                if (cn_now(CLOCK_MONOTONIC) > m->task_deadline && m->task_deadline > 0)
                        return finish(call, -ETIMEDOUT, 0, "the VM's clone did not end in time", NULL);
                if (m->task_deadline == 0) {
                        m->task_deadline = cn_now(CLOCK_MONOTONIC) + PVE_TASK_TIMEOUT;
                        m->task_poll = PVE_TASK_POLL_FIRST;
                }
                return check(call, cn_provider_call_after(call, next_poll(m), create_resume));
        }
        if (lock)
                return finish(call, -EBUSY, 0, "the VM being created is locked", NULL);
        upload_seed(call);
}

/* The NoCloud seed: meta-data and network-config as JSON (a YAML subset, which cloud-init reads). */
int cn_provider_proxmox_seed(const char *uid, const char *name, const char *userdata, void **ret, size_t *ret_size) {
        _cleanup_json_ json_object *meta = json_object_new_object(), *net = json_object_new_object();
        _cleanup_free_ char *meta_text = NULL, *net_text = NULL;
        int r;

        if (!meta || !net)
                return -ENOMEM;
        r = cn_json_set_string(meta, uid, "instance-id", NULL);
        if (r >= 0)
                r = cn_json_set_string(meta, name, "local-hostname", NULL);
        /* DHCP on every Ethernet interface, as the template's cloud-init default would do */
        if (r >= 0)
                r = cn_json_set(net, json_object_new_int(2), "version", NULL);
        if (r >= 0)
                r = cn_json_set_string(net, "e*", "ethernets", "all", "match", "name", NULL);
        if (r >= 0)
                r = cn_json_set(net, json_object_new_boolean(true), "ethernets", "all", "dhcp4", NULL);
        if (r >= 0)
                r = cn_json_to_string(meta, CN_JSON_NEWLINE, &meta_text);
        if (r >= 0)
                r = cn_json_to_string(net, CN_JSON_NEWLINE, &net_text);
        if (r < 0)
                return r;
        return cn_iso_image("cidata", (CnIsoFile[]) {
                                { "user-data", userdata, strlen(userdata) },
                                { "meta-data", meta_text, strlen(meta_text) },
                                { "network-config", net_text, strlen(net_text) },
                        }, 3, time(NULL), ret, ret_size);
}

static void configure(CnProviderCall *call);
static void on_uploaded(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* The multipart/form-data body of an upload: content=iso and the file. */
static int multipart(PveMachine *m, const void *iso, size_t size) {
        uint8_t rnd[16];
        char boundary[64], *p;
        _cleanup_free_ char *head = NULL, *tail = NULL;
        size_t n;
        int r;

        r = cn_random_bytes(rnd, sizeof(rnd));
        if (r < 0)
                return r;
        n = (size_t) snprintf(boundary, sizeof(boundary), "cloudnode-");
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += (size_t) snprintf(boundary + n, sizeof(boundary) - n, "%02x", rnd[i]);
        if (memmem(iso, size, boundary, n))
                return -EAGAIN; /* 128 random bits in the data: never, but never wrong either */
        if (asprintf(&head, "--%s\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--%s\r\n"
                     "Content-Disposition: form-data; name=\"filename\"; filename=\"%s\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n", boundary, boundary, m->seed) < 0 ||
            asprintf(&tail, "\r\n--%s--\r\n", boundary) < 0 ||
            asprintf(&m->content_type, "multipart/form-data; boundary=%s", boundary) < 0)
                return -ENOMEM;
        m->body_size = strlen(head) + size + strlen(tail);
        m->body = p = malloc(m->body_size);
        if (!p)
                return -ENOMEM;
        memcpy(p, head, strlen(head));
        memcpy(p + strlen(head), iso, size);
        memcpy(p + strlen(head) + size, tail, strlen(tail));
        return 0;
}

static char *storage_path(const char *node, const char *storage, const char *tail) {
        _cleanup_free_ char *n = cn_http_escape(node), *s = cn_http_escape(storage);

        return n && s ? cn_strjoin("/nodes/", n, "/storage/", s, tail, NULL) : NULL;
}

static bool storage_has_seed(PveMachine *m, json_object *content) {
        _cleanup_free_ char *volid = cn_strjoin(m->iso_storage, ":iso/", m->seed, NULL);

        for (size_t i = 0; volid && content && json_object_is_type(content, json_type_array) &&
                           i < json_object_array_length(content);
             i++)
                if (cn_json_string_is(json_object_array_get_idx(content, i), "volid", volid))
                        return true;
        return false;
}

static void on_seed_listed(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *content = cn_json_get(reply->body, "data", NULL);
        _cleanup_free_ void *iso = NULL;
        size_t size = 0;
        int r;

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!content || !json_object_is_type(content, json_type_array))
                return finish(call, -EBADMSG, 0, "malformed storage content list from the Proxmox VE API", NULL);
        if (storage_has_seed(m, content))
                return configure(call);
        r = cn_provider_proxmox_seed(m->uid, m->name, m->userdata, &iso, &size);
        if (r < 0)
                return finish(call, r == -ENOMEM ? r : -EINVAL, 0, "the bootstrap data does not fit a NoCloud seed image",
                              NULL);
        /* kept in the state until the upload is answered: a new ticket sends it again */
        r = multipart(m, iso, size);
        explicit_bzero(iso, size);
        if (r < 0)
                return check(call, r);
        check(call, request(call, "POST", storage_path(m->node, m->iso_storage, "/upload"), NULL, "machine_create",
                            on_uploaded));
}

static void upload_seed(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "GET", storage_path(m->node, m->iso_storage, "/content?content=iso"), NULL,
                            "machine_create", on_seed_listed));
}

static void on_uploaded(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (reply->error < 0)
                return fail_reply(call, reply);
        /* the seed holds the bootstrap data: not kept longer than needed */
        explicit_bzero(m->body, m->body_size);
        free(m->body);
        free(m->content_type);
        m->body = m->content_type = NULL;
        m->body_size = 0;
        await_task(call, reply, m->node, configure);
}

static void start_vm(CnProviderCall *call);
static void on_configured(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void configure(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        _cleanup_free_ char *form = NULL, *cdrom = NULL;
        char num[32];
        int r = 0;

        cdrom = cn_strjoin(m->iso_storage, ":iso/", m->seed, ",media=cdrom", NULL);
        if (!cdrom)
                return check(call, -ENOMEM);
        r = form_add(&form, "ide2", cdrom);
        if (r >= 0 && m->cores > 0) {
                (void) snprintf(num, sizeof(num), "%" PRId64, m->cores);
                r = form_add(&form, "cores", num);
        }
        if (r >= 0 && m->memory > 0) {
                (void) snprintf(num, sizeof(num), "%" PRId64, m->memory);
                r = form_add(&form, "memory", num);
        }
        if (r < 0)
                return check(call, r);
        check(call, request(call, "POST", vm_path(m, "/config"), TAKE_PTR(form), "machine_create", on_configured));
}

static void on_configured(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (reply->error < 0)
                return fail_reply(call, reply);
        /* POST config is a task when something had to be done, else null */
        if (!cn_json_get(reply->body, "data", NULL) || json_object_is_type(cn_json_get(reply->body, "data", NULL),
                                                                            json_type_null))
                return start_vm(call);
        await_task(call, reply, m->node, start_vm);
}

static void on_start_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void start_vm(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "GET", vm_path(m, "/status/current"), NULL, "machine_create", on_start_status));
}

static void tag_vm(CnProviderCall *call);
static void on_started(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void on_start_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (cn_json_string_is(cn_json_get(reply->body, "data", NULL), "status", "running"))
                return tag_vm(call);
        check(call, request(call, "POST", vm_path(m, "/status/start"), NULL, "machine_create", on_started));
}

static void on_started(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (reply->error < 0)
                return fail_reply(call, reply);
        await_task(call, reply, m->node, tag_vm);
}

static void on_tagged(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        if (reply->error < 0)
                return fail_reply(call, reply);
        describe(call);
}

/* Last: the tag says the create is complete. The template's tags, the spec's, and ours. */
static void tag_vm(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        _cleanup_free_ char *tags = strdup(m->tag), *form = NULL;
        const char *have = cn_json_string(m->config, "tags", NULL);

        for (size_t i = 0; tags && i < json_object_array_length(m->tags); i++) {
                const char *t = json_object_get_string(json_object_array_get_idx(m->tags, i));
                char *n;

                if (has_tag(m->config, t))
                        continue; /* the template's already */
                n = cn_strjoin(tags, ";", t, NULL);

                free(tags);
                tags = n;
        }
        if (tags && !isempty(have)) {
                char *n = cn_strjoin(have, ";", tags, NULL);

                free(tags);
                tags = n;
        }
        if (!tags || form_add(&form, "tags", tags) < 0)
                return check(call, -ENOMEM);
        check(call, request(call, "PUT", vm_path(m, "/config"), TAKE_PTR(form), "machine_create", on_tagged));
}

/* ---- cleanup ---- */

static void on_cleanup_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* The VM selected (tagged, or cut short in its create): read afresh before each step. */
static void cleanup_vm(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "GET", vm_path(m, "/config"), NULL, "machine_cleanup", on_cleanup_config));
}

static void on_cleanup_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

static void on_cleanup_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);

        if (reply->error == -ENOENT)
                return finish(call, 0, 0, NULL, NULL); /* gone meanwhile; the next pass looks again */
        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM configuration from the Proxmox VE API", NULL);
        /* Ownership: this machine's tag or its UID in the description, now, or nothing is done. */
        if (!has_tag(data, m->tag) && !description_has_uid(data, m->uid))
                return finish(call, -CN_PROVIDER_EOWNED, 0, "the VM no longer carries this machine's UID", NULL);
        json_object_put(m->config);
        m->config = json_object_get(data);
        if (cn_json_string(data, "lock", NULL))
                /* a clone, backup or migration in progress: after it */
                return finish(call, 0, 0, NULL, NULL);
        check(call, request(call, "GET", vm_path(m, "/status/current"), NULL, "machine_cleanup", on_cleanup_status));
}

static void on_stopped_or_seed_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
static void delete_seed_of_vm(CnProviderCall *call);

static void on_cleanup_status(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!cn_json_string(data, "status", NULL))
                return finish(call, -EBADMSG, 0, "malformed VM status from the Proxmox VE API", NULL);
        if (cn_json_string_is(data, "status", "stopped"))
                return delete_seed_of_vm(call);
        /* a hard stop: the machine is being deleted, its disks with it */
        check(call, request(call, "POST", vm_path(m, "/status/stop"), NULL, "machine_cleanup",
                            on_stopped_or_seed_deleted));
}

static void destroy_vm(CnProviderCall *call);

static void on_stopped_or_seed_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        bool stopping = streq(m->method, "POST");

        /* a seed that is gone already is what was asked */
        if (!stopping && reply->error < 0 && (reply->error == -ENOENT || reply->status == 500))
                return destroy_vm(call);
        if (reply->error < 0)
                return fail_reply(call, reply);
        await_task(call, reply, m->node, stopping ? cleanup_vm : destroy_vm);
}

/* The storage of a seed volume "STORAGE:iso/cloudnode-UID.iso" as ide2 names it (options after ','),
 * any machine UID: the VM's seed stays named after the UID it was created with, also once the
 * machine moved to another. NULL for any other volume. */
static char *seed_storage(const char *ide2, char **ret_volid) {
        size_t n = ide2 ? strcspn(ide2, ",") : 0;
        _cleanup_free_ char *volid = ide2 ? strndup(ide2, n) : NULL;
        const char *colon = volid ? strchr(volid, ':') : NULL, *name;
        char *storage;

        if (!colon || !(name = cn_startswith(colon + 1, "iso/" PVE_SEED_PREFIX)) || !cn_endswith(name, ".iso") ||
            !is_pve_tag(name) || !(storage = strndup(volid, colon - volid)))
                return NULL;
        if (!is_pve_id(storage)) {
                free(storage);
                return NULL;
        }
        *ret_volid = TAKE_PTR(volid);
        return storage;
}

/* Deletes the seed attached as ide2, when it is a cloudnode seed (never another file). */
static void delete_seed_of_vm(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        _cleanup_free_ char *volid = NULL, *esc = NULL, *tail = NULL, *storage = NULL;

        storage = seed_storage(cn_json_string(m->config, "ide2", NULL), &volid);
        if (!storage)
                return destroy_vm(call);
        esc = cn_http_escape(volid);
        tail = esc ? cn_strjoin("/content/", esc, NULL) : NULL;
        if (!tail)
                return check(call, -ENOMEM);
        check(call, request(call, "DELETE", storage_path(m->node, storage, tail), NULL, "machine_cleanup",
                            on_stopped_or_seed_deleted));
}

static void on_destroyed(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
static void destroyed(CnProviderCall *call);

static void destroy_vm(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);

        check(call, request(call, "DELETE", vm_path(m, "?purge=1&destroy-unreferenced-disks=1"), NULL, "machine_delete",
                            on_destroyed));
}

static void on_destroyed(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);

        if (reply->error == -ENOENT)
                return destroyed(call);
        if (reply->error < 0)
                return fail_reply(call, reply);
        await_task(call, reply, m->node, destroyed);
}

static void destroyed(CnProviderCall *call) {
        /* The list is asked again: another VM of the machine, or the seed, may be left. */
        finish(call, 0, 0, NULL, NULL);
}

static void on_seed_content(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);

/* No VM left: the seed of a create cut short between upload and configure may be. */
static void cleanup_seed(CnProviderCall *call) {
        PveMachine *m = cn_provider_call_get_state(call);
        CnProviderResult res = {};

        if (!is_pve_id(m->target) || !is_pve_id(m->iso_storage))
                /* no spec to say where: the VMs are what there was to delete */
                return cn_provider_call_finish_cleanup(call, &res, true);

        check(call, request(call, "GET", storage_path(m->target, m->iso_storage, "/content?content=iso"), NULL,
                            "machine_cleanup", on_seed_content));
}

static void on_seed_content(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *content = cn_json_get(reply->body, "data", NULL);
        _cleanup_free_ char *volid = NULL, *esc = NULL, *tail = NULL;
        CnProviderResult res = {};

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!content || !json_object_is_type(content, json_type_array))
                return finish(call, -EBADMSG, 0, "malformed storage content list from the Proxmox VE API", NULL);
        if (!storage_has_seed(m, content))
                return cn_provider_call_finish_cleanup(call, &res, true);
        free(m->node);
        m->node = strdup(m->target);
        volid = cn_strjoin(m->iso_storage, ":iso/", m->seed, NULL);
        esc = volid ? cn_http_escape(volid) : NULL;
        tail = esc ? cn_strjoin("/content/", esc, NULL) : NULL;
        if (!m->node || !tail)
                return check(call, -ENOMEM);
        check(call, request(call, "DELETE", storage_path(m->node, m->iso_storage, tail), NULL, "machine_cleanup",
                            on_destroyed));
}

/* ---- entry points ---- */

typedef struct StartArgs {
        const CnProviderMachine *machine;
        const char *userdata;
        Op op;
} StartArgs;

static int spec_string(json_object *spec, const char *key, char **ret) {
        const char *v = cn_json_string(spec, key, NULL);

        if (!v)
                return 0;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

static int start(CnProviderCall *call, void *arg) {
        StartArgs *a = arg;
        const CnProviderMachine *mc = a->machine;
        _cleanup_(pve_machine_freep) PveMachine *m = calloc(1, sizeof(PveMachine));
        json_object *spec = mc->spec;
        _cleanup_free_ char *reason = NULL;
        int r;

        if (!m)
                return -ENOMEM;
        /* the UID goes into a tag and a file name: PVE's tag characters only */
        if (isempty(mc->uid) || isempty(mc->name) || !is_pve_tag(mc->uid) || strlen(mc->uid) > 64)
                return -EINVAL;
        /* a create needs the whole spec; a lookup none, a cleanup where the seed may be left */
        if (a->op == OP_CREATE && cn_provider_proxmox_validate(cn_provider_call_provider(call), spec, &reason) < 0)
                return -EINVAL;
        m->op = a->op;
        m->auth = (CnProviderAuth) { .next = send_request, .fail = fail_auth };
        m->uid = strdup(mc->uid);
        m->name = strdup(mc->name);
        m->tag = cn_strjoin(PVE_TAG_PREFIX, mc->uid, NULL);
        m->seed = cn_strjoin(PVE_SEED_PREFIX, mc->uid, ".iso", NULL);
        if (!m->uid || !m->name || !m->tag || !m->seed)
                return -ENOMEM;
        r = spec_string(spec, "sourceNode", &m->source_node);
        if (r >= 0)
                r = spec_string(spec, "target", &m->target);
        if (r >= 0 && !m->target && m->source_node)
                r = (m->target = strdup(m->source_node)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = spec_string(spec, "storage", &m->storage);
        if (r >= 0)
                r = spec_string(spec, "pool", &m->pool);
        if (r >= 0)
                r = spec_string(spec, "isoStorage", &m->iso_storage);
        if (r >= 0 && !m->iso_storage)
                r = (m->iso_storage = strdup("local")) ? 0 : -ENOMEM;
        if (r < 0)
                return r;
        (void) cn_json_get_int64(spec, &m->template_id, "templateID", NULL);
        (void) cn_json_get_int64(spec, &m->cores, "numCores", NULL);
        (void) cn_json_get_int64(spec, &m->memory, "memoryMiB", NULL);
        m->full = true;
        (void) cn_json_get_bool(spec, &m->full, "full", NULL);
        m->tags = json_object_get(json_object_object_get(spec, "tags"));
        if (a->userdata && !(m->userdata = strdup(a->userdata)))
                return -ENOMEM;
        cn_provider_call_set_state(call, TAKE_PTR(m), pve_machine_free);
        return request(call, "GET", strdup("/cluster/resources?type=vm"), NULL,
                       a->op == OP_GET ? "machine_get" : a->op == OP_CREATE ? "machine_create" : "machine_cleanup_list",
                       on_resources);
}

int cn_provider_proxmox_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb,
                                    void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .op = OP_GET };

        return cn_provider_start_machine_call(p, cb, NULL, userdata, start, &a, ret);
}

int cn_provider_proxmox_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                                       CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .userdata = strempty(userdata_text), .op = OP_CREATE };

        return cn_provider_start_machine_call(p, cb, NULL, userdata, start, &a, ret);
}

int cn_provider_proxmox_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                        void *userdata, CnProviderCall **ret) {
        StartArgs a = { .machine = m, .op = OP_CLEANUP };

        return cn_provider_start_machine_call(p, NULL, cb, userdata, start, &a, ret);
}

/* ---- failure domains: the cluster's online nodes ---- */

int cn_provider_proxmox_failure_domains_parse(json_object *nodes, const char *region, json_object **ret) {
        _cleanup_json_ json_object *list = json_object_new_array();

        if (!list)
                return -ENOMEM;
        if (!nodes || !json_object_is_type(nodes, json_type_array) || json_object_array_length(nodes) > PVE_MAX_VMS)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(nodes); i++) {
                json_object *n = json_object_array_get_idx(nodes, i);
                const char *name = cn_json_string(n, "node", NULL);
                int r;

                if (!is_pve_id(name))
                        return -EBADMSG;
                /* a node that is offline (or whose state the cluster does not know) takes no VM */
                if (!cn_json_string_is(n, "status", "online"))
                        continue;
                r = cn_provider_failure_domain_add(list, name, (const char *const[]) { "region", region, NULL });
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

static void on_nodes(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        const char *region = cn_provider_proxmox_region(cn_provider_call_provider(call));
        json_object *list = NULL;
        int r;

        if (reply->error < 0)
                return fail_reply(call, reply);
        /* the region is the cluster: another one's nodes are not ours to name */
        if (m->region && !streq(m->region, region))
                return finish(call, -EINVAL, 0, "spec.region names another Proxmox VE cluster than the cloud config's "
                              "region", NULL);
        r = cn_provider_proxmox_failure_domains_parse(cn_json_get(reply->body, "data", NULL), region, &list);
        if (r < 0)
                return finish(call, r == -ENOMEM ? r : -EBADMSG, 0, "malformed node list from the Proxmox VE API", NULL);
        if (json_object_array_length(list) == 0) {
                json_object_put(list);
                return finish(call, -EAGAIN, 0, "no node of the Proxmox VE cluster is online", NULL);
        }
        finish(call, 0, 0, NULL, list);
}

static int start_nodes(CnProviderCall *call, void *arg) {
        const char *region = arg;
        _cleanup_(pve_machine_freep) PveMachine *m = calloc(1, sizeof(PveMachine));

        if (!m)
                return -ENOMEM;
        m->op = OP_GET;
        m->auth = (CnProviderAuth) { .next = send_request, .fail = fail_auth };
        if (region && !(m->region = strdup(region)))
                return -ENOMEM;
        cn_provider_call_set_state(call, TAKE_PTR(m), pve_machine_free);
        return request(call, "GET", strdup("/nodes"), NULL, "failure_domains", on_nodes);
}

int cn_provider_proxmox_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb,
                                        void *userdata, CnProviderCall **ret) {
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_nodes,
                                              (void *) (isempty(region) ? NULL : region), ret);
}

/* ---- migrate_uid: the VM named by providerID takes the machine's new UID ---- */

/* The UID a VM carries: its tag's, else (cut short in its create) its description's. */
static char *vm_uid(json_object *config) {
        const char *tags = cn_json_string(config, "tags", NULL), *d = cn_json_string(config, "description", NULL);

        for (const char *t = tags; t && *t; t += strcspn(t, ";, "), t += strspn(t, ";, "))
                if (cn_startswith(t, PVE_TAG_PREFIX))
                        return strndup(t + strlen(PVE_TAG_PREFIX), strcspn(t, ";, ") - strlen(PVE_TAG_PREFIX));
        for (const char *l = d; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (cn_startswith(l, PVE_UID_MARK))
                        return strndup(l + strlen(PVE_UID_MARK), strcspn(l + strlen(PVE_UID_MARK), "\r\n"));
        return NULL;
}

/* tags without any machine tag, plus tag; description with its UID line for uid. */
static int relabel_form(json_object *config, const char *tag, const char *uid, char **ret_form) {
        const char *tags = cn_json_string(config, "tags", NULL), *d = cn_json_string(config, "description", NULL);
        _cleanup_free_ char *out_tags = strdup(tag), *out_d = NULL, *form = NULL;
        int r;

        if (!out_tags || asprintf(&out_d, PVE_UID_MARK "%s\n", uid) < 0)
                return -ENOMEM;
        for (const char *t = tags; t && *t; t += strcspn(t, ";, "), t += strspn(t, ";, ")) {
                _cleanup_free_ char *one = strndup(t, strcspn(t, ";, "));
                char *n;

                if (!one)
                        return -ENOMEM;
                if (cn_startswith(one, PVE_TAG_PREFIX))
                        continue;
                n = cn_strjoin(out_tags, ";", one, NULL);
                if (!n)
                        return -ENOMEM;
                free(out_tags);
                out_tags = n;
        }
        for (const char *l = d; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                _cleanup_free_ char *line = strndup(l, strcspn(l, "\n"));
                char *n;

                if (!line)
                        return -ENOMEM;
                if (cn_startswith(line, PVE_UID_MARK))
                        continue;
                n = cn_strjoin(out_d, line, "\n", NULL);
                if (!n)
                        return -ENOMEM;
                free(out_d);
                out_d = n;
        }
        r = form_add(&form, "tags", out_tags);
        if (r >= 0)
                r = form_add(&form, "description", out_d);
        if (r < 0)
                return r;
        *ret_form = TAKE_PTR(form);
        return 0;
}

static void on_relabeled(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        if (reply->error < 0)
                return fail_reply(call, reply);
        describe(call);
}

static void on_migrate_config(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);
        _cleanup_free_ char *current = NULL, *form = NULL;
        int r;

        if (reply->error == -ENOENT)
                return finish(call, -ENOENT, 0, "no VM with the providerID's VMID", NULL);
        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_object))
                return finish(call, -EBADMSG, 0, "malformed VM configuration from the Proxmox VE API", NULL);
        current = vm_uid(data);
        r = cn_provider_migration_check(m->uid, m->uid_is_live, m->uid_is_live_userdata, current, m->new_uid);
        if (r > 0)
                return describe(call); /* an earlier pass relabeled it and did not get to say so */
        if (r < 0)
                /* not the VM this machine was: adopting it could take another machine's */
                return finish(call, -CN_PROVIDER_EOWNED, 0, "the VM named by providerID belongs to another machine",
                              NULL);
        r = relabel_form(data, m->tag, m->new_uid, &form);
        if (r < 0)
                return check(call, r);
        check(call, request(call, "PUT", vm_path(m, "/config"), TAKE_PTR(form), "machine_migrate_uid", on_relabeled));
}

static void on_migrate_resources(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        PveMachine *m = cn_provider_call_get_state(call);
        json_object *data = cn_json_get(reply->body, "data", NULL);
        int r;

        if (reply->error < 0)
                return fail_reply(call, reply);
        if (!data || !json_object_is_type(data, json_type_array) || json_object_array_length(data) > PVE_MAX_VMS)
                return finish(call, -EBADMSG, 0, "malformed VM list from the Proxmox VE API", NULL);
        for (size_t i = 0; i < json_object_array_length(data); i++) {
                json_object *vm = json_object_array_get_idx(data, i);
                int64_t vmid;

                if (!cn_json_string_is(vm, "type", "qemu") || cn_json_get_int64(vm, &vmid, "vmid", NULL) < 0 ||
                    vmid != m->vmid)
                        continue;
                r = select_vm(m, vm);
                if (r < 0)
                        return finish(call, r, 0, "malformed VM list from the Proxmox VE API", NULL);
                return check(call, request(call, "GET", vm_path(m, "/config"), NULL, "machine_migrate_get",
                                           on_migrate_config));
        }
        finish(call, -ENOENT, 0, "no VM with the providerID's VMID", NULL);
}

typedef struct MigrateArgs {
        const CnProviderMachine *machine;
        const char *new_uid;
        int64_t vmid;
} MigrateArgs;

static int start_migrate(CnProviderCall *call, void *arg) {
        MigrateArgs *a = arg;
        _cleanup_(pve_machine_freep) PveMachine *m = calloc(1, sizeof(PveMachine));

        if (!m)
                return -ENOMEM;
        m->op = OP_GET;
        m->auth = (CnProviderAuth) { .next = send_request, .fail = fail_auth };
        m->vmid = a->vmid;
        m->uid_is_live = a->machine->uid_is_live;
        m->uid_is_live_userdata = a->machine->uid_is_live_userdata;
        m->new_uid = strdup(a->new_uid);
        m->tag = cn_strjoin(PVE_TAG_PREFIX, a->new_uid, NULL);
        if (!m->new_uid || !m->tag || (!isempty(a->machine->uid) && !(m->uid = strdup(a->machine->uid))))
                return -ENOMEM;
        cn_provider_call_set_state(call, TAKE_PTR(m), pve_machine_free);
        return request(call, "GET", strdup("/cluster/resources?type=vm"), NULL, "machine_migrate_get",
                       on_migrate_resources);
}

int cn_provider_proxmox_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                                    CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        const char *region = cn_provider_proxmox_region(p), *s = cn_startswith(strempty(m->provider_id), "proxmox://");
        MigrateArgs a = { .machine = m, .new_uid = new_uid };
        size_t n = strlen(region);

        if (isempty(new_uid) || !is_pve_tag(new_uid) || strlen(new_uid) > 64)
                return -EINVAL;
        /* proxmox://REGION/VMID of this cluster; a bare VMID (status.instanceID) too */
        if (s && (strncmp(s, region, n) != 0 || s[n] != '/'))
                return -EINVAL;
        if (cn_safe_atoi64(s ? s + n + 1 : strempty(m->provider_id), &a.vmid) < 0 || a.vmid < 100)
                return -EINVAL;
        return cn_provider_start_machine_call(p, cb, NULL, userdata, start_migrate, &a, ret);
}
