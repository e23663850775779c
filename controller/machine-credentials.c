/* SPDX-License-Identifier: Apache-2.0 */
/* Providers built from credentials Secrets. See machine-credentials.h. */
#include <errno.h>
#include <string.h>

#include "cloud-config.h"
#include "hash-util.h"
#include "json-util.h"
#include "log.h"
#include "machine-credentials.h"
#include "string-util.h"
#include "time-util.h"

/* A credential is a token or a small INI file; nothing bigger belongs in such a Secret. */
#define SECRET_VALUE_MAX (64U * 1024U)
#define LISTENERS_MAX 4

typedef struct Entry Entry;

struct Entry {
        CnCredentials *owner;
        Entry *next;
        char *namespace, *name, *key;
        char *resource_version;
        CnProvider *provider;    /* NULL while unusable */
        char *reason;            /* why not usable */
        int error;
        usec_t fetched;          /* CLOCK_MONOTONIC of the last answer */
        bool refused;            /* a refusal of this resourceVersion's credential has forced a
                                  * read already (cn_credentials_recheck()) */
        usec_t used;             /* CLOCK_MONOTONIC of the last lookup */
        CnKubeRequest *request;
};

struct CnCredentials {
        CnKubeClient *client;
        CnHttp *http;
        char *provider_name;
        CnProvider *default_provider;
        CnProviderRequestCounter counter;
        void *counter_userdata;
        CnKubeEventRecorder *recorder;
        Entry *entries;
        size_t n_entries;
        struct {
                CnCredentialsNotify fn;
                void *userdata;
        } listeners[LISTENERS_MAX];
        size_t n_listeners;
};

static int reason(char **ret_reason, int error, const char *fmt, ...) _printf_(3, 4);
static int reason(char **ret_reason, int error, const char *fmt, ...) {
        va_list ap;

        if (ret_reason) {
                free(*ret_reason);
                *ret_reason = NULL;
                va_start(ap, fmt);
                if (vasprintf(ret_reason, fmt, ap) < 0)
                        *ret_reason = NULL;
                va_end(ap);
        }
        return -abs(error);
}

/* The decoded value of one data key, NUL-terminated, or NULL with a reason. */
static int secret_value(json_object *secret, const char *key, char **ret, char **ret_reason) {
        const char *b64 = cn_json_string(secret, "data", key, NULL);
        _cleanup_free_ char *data = NULL;
        void *raw = NULL;
        size_t size = 0;
        int r;

        if (!b64)
                return reason(ret_reason, ENOENT, "the Secret has no key %s", key);
        r = cn_base64_decode(b64, strlen(b64), &raw, &size);
        if (r < 0)
                return reason(ret_reason, EINVAL, "the Secret's key %s is not base64", key);
        if (size > SECRET_VALUE_MAX || memchr(raw, 0, size)) {
                explicit_bzero(raw, size);
                free(raw);
                return reason(ret_reason, EINVAL, "the Secret's key %s is too big or binary", key);
        }
        data = strndup(raw, size);
        explicit_bzero(raw, size);
        free(raw);
        if (!data)
                return -ENOMEM;
        /* Tokens pasted from a file often carry its newline. */
        for (size_t l = strlen(data); l > 0 && strchr(" \t\r\n", data[l - 1]); l--)
                data[l - 1] = 0;
        *ret = TAKE_PTR(data);
        return 0;
}

static void erase(char *s) {
        if (s)
                explicit_bzero(s, strlen(s));
        free(s);
}

static bool has(json_object *cfg, const char *key) {
        return !isempty(cn_cloud_config_get(cfg, "Global", key));
}

static int check_config(json_object *cfg, const char *provider, char **ret_reason) {
        json_object_object_foreach(cfg, section, settings) {
                json_object_object_foreach(settings, k, v) {
                        (void) v;
                        if (cn_endswith(k, "-file"))
                                return reason(ret_reason, EPERM,
                                              "[%s] %s: settings naming files are not accepted from a Secret",
                                              section, k);
                }
        }
        if (streq(provider, "hetzner") && !has(cfg, "token"))
                return reason(ret_reason, EINVAL, "the Secret has no Hetzner token");
        if (streq(provider, "openstack")) {
                bool password = has(cfg, "password") && (has(cfg, "username") || has(cfg, "user-id"));
                bool appcred = has(cfg, "application-credential-secret") &&
                               (has(cfg, "application-credential-id") || has(cfg, "application-credential-name"));

                if (!has(cfg, "auth-url"))
                        return reason(ret_reason, EINVAL, "the Secret has no OpenStack auth-url");
                if (!password && !appcred)
                        return reason(ret_reason, EINVAL,
                                      "the Secret has neither username and password nor an application credential");
        }
        return 0;
}

int cn_credentials_config_from_secret(json_object *secret, const char *key, const char *provider,
                                      json_object **ret_config, char **ret_reason) {
        _cleanup_json_ json_object *cfg = NULL;
        json_object *data = cn_json_get(secret, "data", NULL);
        int r;

        if (!data || !json_object_is_type(data, json_type_object))
                return reason(ret_reason, EINVAL, "the Secret has no data");
        if (!key && json_object_object_get(data, "cloud.conf"))
                key = "cloud.conf";
        if (key) {
                _cleanup_free_ char *err = NULL;
                char *text = NULL;

                r = secret_value(secret, key, &text, ret_reason);
                if (r < 0)
                        return r;
                r = cn_cloud_config_parse(text, strlen(text), &cfg, &err);
                erase(text);
                if (r < 0)
                        /* The parser's reason names a line, never its content. */
                        return reason(ret_reason, r, "the Secret's key %s is not a valid cloud.conf: %s", key,
                                      err ?: strerror(-r));
        } else {
                cfg = json_object_new_object();
                if (!cfg)
                        return -ENOMEM;
                json_object_object_foreach(data, k, v) {
                        char *text = NULL;

                        (void) v;
                        r = secret_value(secret, k, &text, ret_reason);
                        if (r < 0)
                                return r;
                        r = cn_json_set(cfg, json_object_new_string(text), "Global", k, NULL);
                        erase(text);
                        if (r < 0)
                                return r;
                }
        }
        r = check_config(cfg, provider, ret_reason);
        if (r < 0)
                return r;
        *ret_config = TAKE_PTR(cfg);
        return 0;
}

/* ---- the cache ---- */

static Entry *entry_free(Entry *e) {
        if (!e)
                return NULL;
        cn_kube_request_free(e->request);
        cn_provider_free(e->provider);
        free(e->namespace);
        free(e->name);
        free(e->key);
        free(e->resource_version);
        free(e->reason);
        free(e);
        return NULL;
}

static void notify(CnCredentials *c) {
        for (size_t i = 0; i < c->n_listeners; i++)
                c->listeners[i].fn(c->listeners[i].userdata);
}

static void entry_fail(Entry *e, int error, char *why) {
        /* Calls in flight and machines that use it hold their own references. */
        e->provider = cn_provider_free(e->provider);
        free(e->reason);
        e->reason = why;
        e->error = error;
        free(e->resource_version);
        e->resource_version = NULL;
}

bool cn_credentials_secret_movable(json_object *secret) {
        json_object *owners = cn_json_get(secret, "metadata", "ownerReferences", NULL);

        return cn_json_get(secret, "metadata", "labels", "clusterctl.cluster.x-k8s.io/move", NULL) ||
               (owners && json_object_is_type(owners, json_type_array) && json_object_array_length(owners) > 0);
}

/* Once per resourceVersion read: the Secret works, but clusterctl move would leave it behind and
 * the moved objects would wait for credentials in the target cluster. */
static void warn_not_movable(CnCredentials *c, Entry *e, json_object *secret) {
        CnKubeObjectRef ref;

        if (cn_credentials_secret_movable(secret))
                return;
        log_warning("Credentials Secret %s/%s has neither the clusterctl.cluster.x-k8s.io/move label nor an owner: "
                    "clusterctl move would leave it behind", e->namespace, e->name);
        if (c->recorder && cn_kube_object_ref_from_json(secret, &cn_kube_resource_secrets, &ref) >= 0)
                (void) cn_kube_event_record(c->recorder, &ref, CN_KUBE_EVENT_WARNING, "NotMovable", NULL,
                                            "neither the clusterctl.cluster.x-k8s.io/move label nor an owner: "
                                            "clusterctl move would leave this credentials Secret behind");
}

static void on_secret(CnKubeClient *client, const CnKubeResult *result, void *userdata) {
        Entry *e = ASSERT_PTR(userdata);
        CnCredentials *c = e->owner;
        const char *rv = cn_json_string(result->object, "metadata", "resourceVersion", NULL);
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_free_ char *why = NULL;
        CnProvider *p = NULL;
        int r;

        e->request = cn_kube_request_free(e->request);
        e->fetched = cn_now(CLOCK_MONOTONIC);
        if (result->error < 0) {
                log_info("Credentials Secret %s/%s not readable: %s", e->namespace, e->name, strna(result->message));
                (void) reason(&why, result->error, "the credentials Secret %s cannot be read: %s", e->name,
                              result->error == -ENOENT ? "not found" : strna(result->message));
                entry_fail(e, result->error, TAKE_PTR(why));
                notify(c);
                return;
        }
        if (e->provider && rv && e->resource_version && streq(rv, e->resource_version)) {
                notify(c);
                return; /* unchanged */
        }
        r = cn_credentials_config_from_secret(result->object, e->key, c->provider_name, &cfg, &why);
        if (r >= 0) {
                _cleanup_free_ char *err = NULL;

                r = cn_provider_new_without_environment(c->provider_name, c->http, cfg, &p, &err);
                if (r < 0)
                        (void) reason(&why, r, "the credentials Secret %s: %s", e->name, err ?: strerror(-r));
        } else {
                char *prefixed = NULL;

                if (asprintf(&prefixed, "the credentials Secret %s: %s", e->name, strna(why)) >= 0) {
                        free(why);
                        why = prefixed;
                }
        }
        if (r < 0) {
                log_warning("Credentials Secret %s/%s unusable: %s", e->namespace, e->name, strna(why));
                entry_fail(e, r, TAKE_PTR(why));
                notify(c);
                return;
        }
        log_info("Credentials Secret %s/%s (resourceVersion %s): provider ready", e->namespace, e->name, strna(rv));
        warn_not_movable(c, e, result->object);
        if (c->counter)
                cn_provider_set_request_counter(p, c->counter, c->counter_userdata);
        cn_provider_free(e->provider);
        e->provider = p;
        free(e->reason);
        e->reason = NULL;
        e->error = 0;
        e->refused = false;
        free(e->resource_version);
        e->resource_version = rv ? strdup(rv) : NULL;
        notify(c);
}

/* Makes room for one more entry: drops those unused for CN_CREDENTIALS_IDLE, and when still full
 * the least recently used; never one whose read is in flight (its answer refers to it). */
static int make_room(CnCredentials *c, usec_t now) {
        Entry **lru = NULL;

        for (Entry **p = &c->entries; *p;) {
                Entry *e = *p;

                if (!e->request && e->used + CN_CREDENTIALS_IDLE < now) {
                        *p = e->next;
                        entry_free(e);
                        c->n_entries--;
                        continue;
                }
                if (!e->request && (!lru || e->used < (*lru)->used))
                        lru = p;
                p = &e->next;
        }
        if (c->n_entries < CN_CREDENTIALS_MAX)
                return 0;
        if (!lru)
                return -ENOBUFS;
        {
                Entry *e = *lru;

                *lru = e->next;
                entry_free(e);
                c->n_entries--;
        }
        return 0;
}

static Entry *entry_get(CnCredentials *c, const char *ns, const char *name, const char *key) {
        usec_t now = cn_now(CLOCK_MONOTONIC);
        Entry *e;

        for (e = c->entries; e; e = e->next)
                if (streq(e->namespace, ns) && streq(e->name, name) && streq(strempty(e->key), strempty(key))) {
                        e->used = now;
                        return e;
                }
        if (make_room(c, now) < 0)
                return NULL;
        e = calloc(1, sizeof(Entry));
        if (!e)
                return NULL;
        e->owner = c;
        e->namespace = strdup(ns);
        e->name = strdup(name);
        if (!e->namespace || !e->name || (key && !(e->key = strdup(key))))
                return entry_free(e);
        e->used = now;
        e->next = c->entries;
        c->entries = e;
        c->n_entries++;
        return e;
}

int cn_credentials_provider(CnCredentials *c, const char *ns, json_object *secret_ref, usec_t max_age,
                            CnProvider **ret, char **ret_reason) {
        const char *name = cn_json_string(secret_ref, "name", NULL), *key = cn_json_string(secret_ref, "key", NULL);
        bool fresh;
        Entry *e;
        int r;

        if (!secret_ref) {
                *ret = c->default_provider;
                return 1;
        }
        if (isempty(name))
                return reason(ret_reason, EINVAL, "spec.credentials.secretRef.name is empty");
        e = entry_get(c, ns, name, isempty(key) ? NULL : key);
        if (!e)
                return reason(ret_reason, ENOBUFS, "the controller holds %u credentials Secrets being read already",
                              CN_CREDENTIALS_MAX);
        if (!e->provider)
                max_age = MIN(max_age, CN_CREDENTIALS_FRESH);
        fresh = e->fetched > 0 && cn_now(CLOCK_MONOTONIC) < e->fetched + max_age;
        if (!fresh && !e->request) {
                r = cn_kube_get(c->client, &cn_kube_resource_secrets, ns, name, NULL, on_secret, e, &e->request);
                if (r < 0)
                        return reason(ret_reason, r, "cannot read the credentials Secret %s: %s", name,
                                      strerror(-r));
        }
        if (e->provider && (fresh || max_age > CN_CREDENTIALS_FRESH)) {
                /* A refresh in flight holds up only what must not use an old credential. */
                *ret = e->provider;
                return 1;
        }
        if (e->request)
                return 0;
        return reason(ret_reason, e->error ?: -EINVAL, "%s", strna(e->reason));
}

bool cn_credentials_recheck(CnCredentials *c, CnProvider *p) {
        for (Entry *e = c->entries; e; e = e->next)
                if (e->provider == p) {
                        /* A recent read is trusted only once the refusal has made us read it
                         * again: the Secret and the cloud's credential may both have been rotated
                         * just after that read. One read per resourceVersion refused, then one per
                         * CN_CREDENTIALS_FRESH. */
                        if (e->refused && cn_now(CLOCK_MONOTONIC) < e->fetched + CN_CREDENTIALS_FRESH)
                                return false;
                        e->refused = true;
                        e->fetched = 0;
                        return true;
                }
        /* p is no Secret's provider any more: a newer read replaced it (or found the Secret
         * unusable) while the call was under way. Try again with what the Secret gives now. The
         * controller's own provider has no Secret to read again. */
        return p && p != c->default_provider;
}

size_t cn_credentials_size(const CnCredentials *c) {
        return c ? c->n_entries : 0;
}

void cn_credentials_set_recorder(CnCredentials *c, CnKubeEventRecorder *recorder) {
        c->recorder = recorder;
}

int cn_credentials_add_listener(CnCredentials *c, CnCredentialsNotify fn, void *userdata) {
        if (c->n_listeners >= LISTENERS_MAX)
                return -ENOSPC;
        c->listeners[c->n_listeners].fn = fn;
        c->listeners[c->n_listeners].userdata = userdata;
        c->n_listeners++;
        return 0;
}

int cn_credentials_new(CnKubeClient *client, CnHttp *http, const char *provider_name, CnProvider *default_provider,
                       CnProviderRequestCounter counter, void *counter_userdata, CnCredentials **ret) {
        CnCredentials *c = calloc(1, sizeof(CnCredentials));

        if (!c)
                return -ENOMEM;
        c->client = client;
        c->http = http;
        c->default_provider = default_provider;
        c->counter = counter;
        c->counter_userdata = counter_userdata;
        c->provider_name = strdup(provider_name);
        if (!c->provider_name) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

CnCredentials *cn_credentials_free(CnCredentials *c) {
        if (!c)
                return NULL;
        while (c->entries) {
                Entry *e = c->entries;

                c->entries = e->next;
                entry_free(e);
        }
        free(c->provider_name);
        free(c);
        return NULL;
}
