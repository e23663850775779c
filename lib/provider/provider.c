/* SPDX-License-Identifier: Apache-2.0 */
/* The provider-independent half of provider.h: the provider table, the InstancesV2 adapters and
 * call lifetime and cancellation. The cloud API requests are in provider-http.c. */
#include <stdarg.h>

#include "cloud-config.h"
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "metadata.h"
#include "provider-internal.h"
#include "string-util.h"

extern const CnProviderOps cn_provider_aws_ops;
extern const CnProviderOps cn_provider_azure_ops;
extern const CnProviderOps cn_provider_digitalocean_ops;
extern const CnProviderOps cn_provider_gcp_ops;
extern const CnProviderOps cn_provider_hetzner_ops;
extern const CnProviderOps cn_provider_openstack_ops;
extern const CnProviderOps cn_provider_proxmox_ops;

const CnProviderOps *const cn_provider_table[] = {
        &cn_provider_aws_ops,
        &cn_provider_azure_ops,
        &cn_provider_digitalocean_ops,
        &cn_provider_gcp_ops,
        &cn_provider_hetzner_ops,
        &cn_provider_openstack_ops,
        &cn_provider_proxmox_ops,
        NULL,
};

CnProviderErrorClass cn_provider_error_class(int error) {
        switch (error) {
        case 0:
                return CN_PROVIDER_OK;
        case -ENOENT:
                return CN_PROVIDER_NOT_FOUND;
        case -EACCES:
        case -EPERM:
        case -EINVAL:
        case -EOPNOTSUPP:
        case -EKEYREJECTED:
        case -EBADE:
        case -CN_PROVIDER_EOWNED:
                return CN_PROVIDER_TERMINAL;
        default:
                return CN_PROVIDER_RETRYABLE;
        }
}

const char *cn_provider_error_class_to_string(CnProviderErrorClass c) {
        static const char *const table[] = {
                [CN_PROVIDER_OK] = "ok",
                [CN_PROVIDER_NOT_FOUND] = "not-found",
                [CN_PROVIDER_TERMINAL] = "terminal",
                [CN_PROVIDER_RETRYABLE] = "retryable",
        };
        return c >= 0 && c < (int) ELEMENTSOF(table) ? table[c] : NULL;
}

CnProviderInstance *cn_provider_instance_new(void) {
        return calloc(1, sizeof(CnProviderInstance));
}

CnProviderInstance *cn_provider_instance_free(CnProviderInstance *i) {
        if (!i)
                return NULL;
        free(i->instance_id);
        free(i->provider_id);
        free(i->name);
        free(i->instance_type);
        free(i->region);
        free(i->zone);
        cn_node_address_list_done(&i->addresses);
        strv_free(i->extra_labels);
        free(i);
        return NULL;
}

static int strdup_or_null(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int add_all(CnNodeAddressList *l, CnNodeAddressType t, char *const *ips) {
        for (char *const *i = ips; i && *i; i++) {
                int r = cn_node_address_list_add(l, t, *i);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cn_provider_instance_from_metadata(const CnInstanceMetadata *m, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        int r;

        assert(m);
        assert(ret);
        if (!i)
                return -ENOMEM;
        if (strdup_or_null(m->instance_id, &i->instance_id) < 0 || strdup_or_null(m->provider_id, &i->provider_id) < 0 ||
            strdup_or_null(m->hostname, &i->name) < 0 || strdup_or_null(m->instance_type, &i->instance_type) < 0 ||
            strdup_or_null(m->region, &i->region) < 0 || strdup_or_null(m->zone, &i->zone) < 0)
                return -ENOMEM;
        if ((r = add_all(&i->addresses, CN_NODE_ADDRESS_INTERNAL_IP, m->ipv4_private)) < 0 ||
            (r = add_all(&i->addresses, CN_NODE_ADDRESS_INTERNAL_IP, m->ipv6)) < 0 ||
            (r = add_all(&i->addresses, CN_NODE_ADDRESS_EXTERNAL_IP, m->ipv4_public)) < 0)
                return r;
        if (!isempty(m->hostname) && (r = cn_node_address_list_add(&i->addresses, CN_NODE_ADDRESS_HOSTNAME, m->hostname)) < 0)
                return r;
        if (m->extra_labels && strv_copy(m->extra_labels, &i->extra_labels) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(i);
        return 0;
}

int cn_provider_instance_copy(const CnProviderInstance *i, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *c = cn_provider_instance_new();
        int r;

        assert(i);
        assert(ret);
        if (!c)
                return -ENOMEM;
        if (strdup_or_null(i->instance_id, &c->instance_id) < 0 || strdup_or_null(i->provider_id, &c->provider_id) < 0 ||
            strdup_or_null(i->name, &c->name) < 0 || strdup_or_null(i->instance_type, &c->instance_type) < 0 ||
            strdup_or_null(i->region, &c->region) < 0 || strdup_or_null(i->zone, &c->zone) < 0)
                return -ENOMEM;
        for (size_t k = 0; k < i->addresses.n; k++) {
                r = cn_node_address_list_add(&c->addresses, i->addresses.items[k].type, i->addresses.items[k].address);
                if (r < 0)
                        return r;
        }
        if (i->extra_labels && strv_copy(i->extra_labels, &c->extra_labels) < 0)
                return -ENOMEM;
        c->shutdown = i->shutdown;
        *ret = TAKE_PTR(c);
        return 0;
}

const CnProviderOps *cn_provider_find(const char *name) {
        if (!name)
                return NULL;
        for (const CnProviderOps *const *o = cn_provider_table; *o; o++)
                if (streq((*o)->name, name))
                        return *o;
        return NULL;
}

char *cn_provider_names(void) {
        _cleanup_strv_free_ char **l = NULL;
        char *s = NULL;

        for (const CnProviderOps *const *o = cn_provider_table; *o; o++)
                if (strv_extend(&l, (*o)->name) < 0)
                        return NULL;
        return strv_join(l, ", ", &s) < 0 ? NULL : s;
}

#define PROVIDER_SECRET_MAX 4096U

const char *cn_provider_setting(CnProvider *p, json_object *cfg, const char *key, const char *env) {
        const char *v = cn_cloud_config_get(cfg, "Global", key);

        return !isempty(v) ? v : (env && cn_provider_uses_environment(p) ? getenv(env) : NULL);
}

int cn_provider_read_secret_file(const char *path, char **ret) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        _cleanup_free_ char *line = NULL;
        size_t n = 0;
        ssize_t l;

        if (!f)
                return -errno;
        l = getline(&line, &n, f);
        if (l < 0)
                return -ENODATA;
        if ((size_t) l > PROVIDER_SECRET_MAX)
                return -E2BIG;
        while (l > 0 && strchr(" \t\r\n", line[l - 1]))
                line[--l] = 0;
        if (l == 0)
                return -ENODATA;
        *ret = TAKE_PTR(line);
        return 0;
}

int cn_provider_token_setting(CnProvider *p, json_object *cfg, const char *env, const char *what, char **ret_token,
                              char **ret_error) {
        const char *token = cn_provider_setting(p, cfg, "token", env);
        const char *token_file = cn_provider_setting(p, cfg, "token-file", NULL);
        int r;

        if (!isempty(token))
                return (*ret_token = strdup(token)) ? 0 : -ENOMEM;
        if (isempty(token_file))
                return cn_provider_config_error(ret_error, EINVAL, "no %s API token: set token or token-file in "
                                                "[Global] of the cloud config, or %s", what, env);
        r = cn_provider_read_secret_file(token_file, ret_token);
        if (r < 0)
                return cn_provider_config_error(ret_error, r, "cannot read the %s API token from %s: %s", what,
                                                token_file, strerror(-r));
        return 0;
}

int cn_provider_instance_add_address(CnProviderInstance *i, CnNodeAddressType t, const char *address) {
        int r;

        if (isempty(address))
                return 0;
        r = cn_node_address_list_add(&i->addresses, t, address);
        return r == -EINVAL ? -EBADMSG : r;
}

char *cn_provider_endpoint_dup(const char *url) {
        char *e = strdup(url);

        for (size_t l = e ? strlen(e) : 0; l > 0 && e[l - 1] == '/'; l--)
                e[l - 1] = 0;
        return e;
}

int cn_provider_config_error(char **ret_error, int error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -abs(error);
}

/* Providers not freed yet (the programs run one event loop: no lock). */
static unsigned n_live;

static int provider_new(const char *name, CnHttp *http, json_object *cloud_config, bool environment,
                        CnProvider **ret, char **ret_error) {
        _cleanup_(cn_provider_freep) CnProvider *p = NULL;
        const CnProviderOps *ops = cn_provider_find(name);
        int r;

        assert(http);
        assert(ret);
        if (!ops)
                return -EPROTONOSUPPORT;
        p = calloc(1, sizeof(CnProvider));
        if (!p)
                return -ENOMEM;
        p->n_ref = 1;
        n_live++;
        p->ops = ops;
        p->http = http;
        p->no_environment = !environment;
        if (ops->size > 0) {
                p->data = calloc(1, ops->size);
                if (!p->data)
                        return -ENOMEM;
        }
        if (ops->init) {
                r = ops->init(p, cloud_config, ret_error);
                if (r < 0) {
                        p->ops = NULL; /* init cleans up after itself */
                        return r;
                }
        }
        *ret = TAKE_PTR(p);
        return 0;
}

int cn_provider_new(const char *name, CnHttp *http, json_object *cloud_config, CnProvider **ret, char **ret_error) {
        return provider_new(name, http, cloud_config, true, ret, ret_error);
}

int cn_provider_new_without_environment(const char *name, CnHttp *http, json_object *cloud_config, CnProvider **ret,
                                        char **ret_error) {
        return provider_new(name, http, cloud_config, false, ret, ret_error);
}

bool cn_provider_uses_environment(const CnProvider *p) {
        return !p->no_environment;
}

CnProvider *cn_provider_ref(CnProvider *p) {
        if (p)
                p->n_ref++;
        return p;
}

CnProvider *cn_provider_free(CnProvider *p) {
        if (!p || --p->n_ref > 0)
                return NULL;
        if (p->ops && p->ops->done)
                p->ops->done(p);
        free(p->data);
        free(p);
        n_live--;
        return NULL;
}

unsigned cn_provider_live_count(void) {
        return n_live;
}

const char *cn_provider_name(const CnProvider *p) {
        return p && p->ops ? p->ops->name : NULL;
}

void cn_provider_set_request_counter(CnProvider *p, CnProviderRequestCounter fn, void *userdata) {
        p->counter = fn;
        p->counter_userdata = userdata;
}

void *cn_provider_data(CnProvider *p) {
        return p->data;
}

CnHttp *cn_provider_http(CnProvider *p) {
        return p->http;
}

CnProviderCall *cn_provider_call_unref(CnProviderCall *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        sd_event_source_disable_unref(c->timer);
        if (c->req) {
                cn_http_request_cancel(c->req);
                cn_http_request_unref(c->req);
        }
        if (c->free_state)
                c->free_state(c->state);
        cn_provider_free(c->provider);
        free(c);
        return NULL;
}

CnProviderCall *cn_provider_call_free(CnProviderCall *c) {
        bool in_flight;

        if (!c)
                return NULL;
        /* The caller lets go: whatever is still in flight must not call back. A cancelled request
         * never completes, so its completion cannot drop the in-flight reference: do it here. */
        in_flight = !c->finished && (c->http_pending || c->timer);
        c->finished = true;
        if (c->req)
                cn_http_request_cancel(c->req);
        c->timer = sd_event_source_disable_unref(c->timer);
        if (in_flight) {
                c->http_pending = false;
                cn_provider_call_unref(c);
        }
        return cn_provider_call_unref(c);
}

static int on_call_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnProviderCall *c = ASSERT_PTR(userdata);

        c->timer = sd_event_source_disable_unref(c->timer);
        /* As across an HTTP completion: the callback may finish the call. */
        c->n_ref++;
        c->timer_cb(c);
        cn_provider_call_unref(c);
        return 0;
}

int cn_provider_call_after(CnProviderCall *c, usec_t delay, void (*next)(CnProviderCall *c)) {
        int r;

        assert(c);
        assert(next);
        assert(!c->timer && !c->http_pending);
        r = sd_event_add_time_relative(cn_http_get_event(c->provider->http), &c->timer, CLOCK_MONOTONIC, delay, 0,
                                       on_call_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->timer, "provider-call-wait");
        c->timer_cb = next;
        return 0;
}

void cn_provider_call_set_state(CnProviderCall *c, void *state, void (*free_state)(void *)) {
        if (c->free_state)
                c->free_state(c->state);
        c->state = state;
        c->free_state = free_state;
}

void *cn_provider_call_get_state(CnProviderCall *c) {
        return c->state;
}

CnProvider *cn_provider_call_provider(CnProviderCall *c) {
        return c->provider;
}

static int call_new(CnProvider *p, CallMode mode, void *userdata, CnProviderCall **ret_call) {
        CnProviderCall *c = calloc(1, sizeof(CnProviderCall));

        if (!c)
                return -ENOMEM;
        c->n_ref = 1; /* in flight */
        c->provider = cn_provider_ref(p);
        c->mode = mode;
        c->userdata = userdata;
        *ret_call = c;
        return 0;
}

void cn_provider_call_finish_instance(CnProviderCall *c, const CnProviderResult *res, CnProviderInstance *instance) {
        CnProviderResult r = *res;

        assert(c);
        if (c->finished) {
                cn_provider_instance_free(instance);
                return;
        }
        c->finished = true;
        switch (c->mode) {
        case CALL_METADATA:
                c->instance_cb(c->provider, &r, r.error < 0 ? NULL : instance, c->userdata);
                if (r.error < 0)
                        cn_provider_instance_free(instance);
                break;
        case CALL_EXISTS:
                /* InstanceExists: "not found" is the answer false, not a failure. */
                if (r.error == -ENOENT)
                        r = (CnProviderResult) {};
                c->bool_cb(c->provider, &r, r.error == 0 && instance, c->userdata);
                cn_provider_instance_free(instance);
                break;
        case CALL_SHUTDOWN:
                c->bool_cb(c->provider, &r, r.error == 0 && instance && instance->shutdown, c->userdata);
                cn_provider_instance_free(instance);
                break;
        case CALL_MACHINE:
        case CALL_CLEANUP:
                /* Machine calls finish through their own functions below. */
                assert(false);
                break;
        }
        cn_provider_call_unref(c);
}

void cn_provider_call_fail_instance(CnProviderCall *c, const CnProviderResult *res) {
        cn_provider_call_finish_instance(c, res, NULL);
}

int cn_provider_migration_check(const char *expected, CnProviderUidIsLive is_live, void *userdata,
                                const char *current, const char *new_uid) {
        if (current && new_uid && streq(current, new_uid))
                return 1;
        if (isempty(current))
                return -CN_PROVIDER_EOWNED;
        if (!isempty(expected))
                return streq(current, expected) ? 0 : -CN_PROVIDER_EOWNED;
        /* Nothing recorded (the object was recreated without its status): the UID must be one
         * whose object is gone, or a newcomer could take any machine's instance by naming it. */
        return !is_live || is_live(current, userdata) ? -CN_PROVIDER_EOWNED : 0;
}

int cn_provider_machine_view(const CnProviderInstance *i, const char *state, bool ready, json_object **ret) {
        _cleanup_json_ json_object *v = json_object_new_object();
        int r;

        if (!v)
                return -ENOMEM;
        r = cn_json_set_string(v, i->instance_id, "id", NULL);
        if (r >= 0)
                r = cn_json_set_string(v, i->provider_id, "providerID", NULL);
        if (r >= 0)
                r = cn_json_set_string(v, strempty(state), "state", NULL);
        if (r >= 0)
                r = cn_json_set(v, json_object_new_boolean(ready), "ready", NULL);
        if (r >= 0)
                r = cn_json_set(v, cn_node_address_list_to_json(&i->addresses), "addresses", NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        return 0;
}

/* Machine lifecycle calls (implemented per provider in provider-<cloud>-machine.c) share the
 * instance calls' ownership rules: one in-flight reference, one for the caller's handle. */
int cn_provider_start_machine_call(CnProvider *p, CnProviderMachineCallback mcb, CnProviderCleanupCallback ccb,
                                   void *userdata, CnProviderCallStart start, void *arg, CnProviderCall **ret) {
        CnProviderCall *c;
        int r;

        assert(p);
        assert(!!mcb != !!ccb);
        r = call_new(p, mcb ? CALL_MACHINE : CALL_CLEANUP, userdata, &c);
        if (r < 0)
                return r;
        c->machine_cb = mcb;
        c->cleanup_cb = ccb;
        if (ret) {
                c->n_ref++;
                *ret = c;
        }
        r = start(c, arg);
        if (r < 0) {
                c->finished = true;
                if (ret) {
                        *ret = NULL;
                        cn_provider_call_unref(c);
                }
                cn_provider_call_unref(c);
                return r;
        }
        return 0;
}

void cn_provider_call_finish_machine(CnProviderCall *c, const CnProviderResult *res, json_object *instance) {
        assert(c);
        assert(c->mode == CALL_MACHINE);
        if (!c->finished) {
                c->finished = true;
                c->machine_cb(c->provider, res, res->error < 0 ? NULL : instance, c->userdata);
        }
        json_object_put(instance);
        cn_provider_call_unref(c);
}

void cn_provider_call_finish_cleanup(CnProviderCall *c, const CnProviderResult *res, bool done) {
        assert(c);
        assert(c->mode == CALL_CLEANUP);
        if (!c->finished) {
                c->finished = true;
                c->cleanup_cb(c->provider, res, res->error >= 0 && done, c->userdata);
        }
        cn_provider_call_unref(c);
}

void cn_provider_on_deleted(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        CnProviderResult res = { .error = reply->error, .retry_after = reply->retry_after, .message = reply->message };

        /* Gone already is what we wanted; either way the list is asked again next time. */
        if (res.error == -ENOENT)
                res = (CnProviderResult) {};
        cn_provider_call_finish_cleanup(call, &res, false);
}

static int start_instance_call(CnProvider *p, CallMode mode, const CnProviderNodeRef *node,
                               CnProviderInstanceCallback icb, CnProviderBoolCallback bcb, void *userdata,
                               CnProviderCall **ret) {
        CnProviderCall *c;
        int r;

        assert(p);
        assert(node);
        if (!p->ops->instance_get)
                return -EOPNOTSUPP;
        if (isempty(node->name) && isempty(node->provider_id))
                return -EINVAL;
        r = call_new(p, mode, userdata, &c);
        if (r < 0)
                return r;
        c->instance_cb = icb;
        c->bool_cb = bcb;
        if (ret) {
                c->n_ref++;
                *ret = c;
        }
        r = p->ops->instance_get(p, c, node);
        if (r < 0) {
                /* Nothing was started: the caller gets the error, not a callback. */
                c->finished = true;
                if (ret) {
                        *ret = NULL;
                        cn_provider_call_unref(c);
                }
                cn_provider_call_unref(c);
                return r;
        }
        return 0;
}

int cn_provider_instance_metadata(CnProvider *p, const CnProviderNodeRef *node, CnProviderInstanceCallback cb,
                                  void *userdata, CnProviderCall **ret) {
        return start_instance_call(p, CALL_METADATA, node, cb, NULL, userdata, ret);
}

int cn_provider_instance_exists(CnProvider *p, const CnProviderNodeRef *node, CnProviderBoolCallback cb,
                                void *userdata, CnProviderCall **ret) {
        return start_instance_call(p, CALL_EXISTS, node, NULL, cb, userdata, ret);
}

int cn_provider_instance_shutdown(CnProvider *p, const CnProviderNodeRef *node, CnProviderBoolCallback cb,
                                  void *userdata, CnProviderCall **ret) {
        return start_instance_call(p, CALL_SHUTDOWN, node, NULL, cb, userdata, ret);
}

/* The machine lifecycle: an operation a provider leaves out of its ops answers -EOPNOTSUPP. */
int cn_provider_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec) {
        return p->ops->add_defaults ? p->ops->add_defaults(p, spec, ret_spec) : -EOPNOTSUPP;
}

int cn_provider_validate(CnProvider *p, json_object *spec, char **ret_reason) {
        return p->ops->validate ? p->ops->validate(p, spec, ret_reason) : -EOPNOTSUPP;
}

int cn_provider_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb, void *userdata,
                            CnProviderCall **ret) {
        return p->ops->machine_get ? p->ops->machine_get(p, m, cb, userdata, ret) : -EOPNOTSUPP;
}

int cn_provider_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                               CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        return p->ops->machine_create ? p->ops->machine_create(p, m, userdata_text, cb, userdata, ret) : -EOPNOTSUPP;
}

int cn_provider_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                void *userdata, CnProviderCall **ret) {
        return p->ops->machine_cleanup ? p->ops->machine_cleanup(p, m, cb, userdata, ret) : -EOPNOTSUPP;
}

int cn_provider_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels) {
        return p->ops->metrics_labels ? p->ops->metrics_labels(p, spec, ret_labels) : -EOPNOTSUPP;
}

int cn_provider_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                            CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret) {
        return p->ops->migrate_uid ? p->ops->migrate_uid(p, m, new_uid, cb, userdata, ret) : -EOPNOTSUPP;
}

int cn_provider_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config) {
        return p->ops->cloud_config ? p->ops->cloud_config(p, spec, ret_cloud_config) : -EOPNOTSUPP;
}

int cn_provider_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb, void *userdata,
                                CnProviderCall **ret) {
        return p->ops->failure_domains ? p->ops->failure_domains(p, region, cb, userdata, ret) : -EOPNOTSUPP;
}

int cn_provider_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderMachineCallback cb,
                                     void *userdata, CnProviderCall **ret, char **ret_reason) {
        return p->ops->load_balancer_ensure ? p->ops->load_balancer_ensure(p, lb, cb, userdata, ret, ret_reason)
                                            : -EOPNOTSUPP;
}

int cn_provider_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderCleanupCallback cb,
                                      void *userdata, CnProviderCall **ret) {
        return p->ops->load_balancer_cleanup ? p->ops->load_balancer_cleanup(p, lb, cb, userdata, ret) : -EOPNOTSUPP;
}

const char *cn_provider_failure_domain_field(const CnProvider *p) {
        return p->ops->failure_domain_field;
}

int cn_provider_failure_domain_add(json_object *list, const char *name, const char *const *attributes) {
        _cleanup_json_ json_object *fd = json_object_new_object();
        int r;

        if (!fd)
                return -ENOMEM;
        r = cn_json_set_string(fd, name, "name", NULL);
        if (r >= 0)
                r = cn_json_set(fd, json_object_new_boolean(true), "controlPlane", NULL);
        if (r >= 0)
                r = cn_json_set(fd, json_object_new_object(), "attributes", NULL);
        for (const char *const *a = attributes; r >= 0 && a && a[0]; a += 2)
                if (!isempty(a[1]))
                        r = cn_json_set_string(fd, a[1], "attributes", a[0], NULL);
        if (r < 0)
                return r;
        return json_object_array_add(list, TAKE_PTR(fd)) < 0 ? -ENOMEM : 0;
}
