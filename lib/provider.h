/* SPDX-License-Identifier: Apache-2.0 */
/* Cloud providers: one interface joining Kubernetes' InstancesV2 calls (instance metadata by
 * providerID or node name, exists, shutdown), used by cloudnode-initializer in cluster mode, with
 * the machine-controller lifecycle (add_defaults, validate, get, create, cleanup, metrics labels,
 * migrate_uid, cloud config), used by cloudnode-controller for Cluster API machines.
 *
 * Every call that talks to the cloud is asynchronous on the caller's sd-event loop (HTTP through
 * lib/http.h, never blocking the loop); it completes through a callback exactly once unless the
 * returned CnProviderCall is freed first, which cancels it.
 *
 * Errors are classified (cn_provider_error_class()):
 *   -ENOENT                            not found (the instance does not exist)
 *   -EACCES, -EPERM, -EINVAL, -ENOTSUP terminal: needs a human (bad credentials, invalid spec)
 *   anything else                      retryable (429, 5xx, timeouts, quota); the result carries
 *                                      the server's Retry-After when it gave one
 * Credentials never appear in messages, logs or metrics. */
#pragma once

#include <systemd/sd-event.h>

#include "macro.h"
#include "node-addresses.h"
#include "time-util.h"

typedef struct CnHttp CnHttp;
typedef struct CnInstanceMetadata CnInstanceMetadata;
typedef struct CnProvider CnProvider;
typedef struct CnProviderCall CnProviderCall;

typedef enum CnProviderErrorClass {
        CN_PROVIDER_OK,
        CN_PROVIDER_NOT_FOUND,
        CN_PROVIDER_TERMINAL,
        CN_PROVIDER_RETRYABLE,
} CnProviderErrorClass;

CnProviderErrorClass cn_provider_error_class(int error) _const_;
/* "ok", "not-found", "terminal", "retryable": the result label of the cloud request metric. */
const char *cn_provider_error_class_to_string(CnProviderErrorClass c) _const_;

/* What InstancesV2.InstanceMetadata returns, plus the shutdown state. */
typedef struct CnProviderInstance {
        char *instance_id;
        char *provider_id;
        char *name;
        char *instance_type;
        char *region;
        char *zone;
        CnNodeAddressList addresses;
        char **extra_labels; /* strv "key=value"; lib/labels.h decides what may be applied */
        bool shutdown;       /* stopped, but still exists */
} CnProviderInstance;

CnProviderInstance *cn_provider_instance_new(void);
CnProviderInstance *cn_provider_instance_free(CnProviderInstance *i);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnProviderInstance *, cn_provider_instance_free);
int cn_provider_instance_copy(const CnProviderInstance *i, CnProviderInstance **ret);
/* Node mode: the same view built from the local metadata service. InternalIP: ipv4_private and
 * ipv6; ExternalIP: ipv4_public; Hostname: hostname. */
int cn_provider_instance_from_metadata(const CnInstanceMetadata *m, CnProviderInstance **ret);

/* How a Node is looked up: by providerID when it has one, else by name. */
typedef struct CnProviderNodeRef {
        const char *name;
        const char *provider_id;
} CnProviderNodeRef;

typedef struct CnProviderResult {
        int error;           /* 0 or negative errno, classified as above */
        usec_t retry_after;  /* server's minimum delay before a retry, 0 if none */
        const char *message; /* for Events and logs; secret-free; NULL on success */
} CnProviderResult;

/* instance is owned by the callee (NULL on error). */
typedef void (*CnProviderInstanceCallback)(CnProvider *p, const CnProviderResult *res, CnProviderInstance *instance,
                                           void *userdata);
/* exists/shutdown answers: value is valid when res->error == 0. */
typedef void (*CnProviderBoolCallback)(CnProvider *p, const CnProviderResult *res, bool value, void *userdata);

/* ---- machine lifecycle (Cluster API infra machines; implemented with the controller's machine
 * issue). A machine is described by its provider spec (JSON) and the Machine's UID, from which
 * the tag/label/name that makes creates idempotent is derived. ---- */
typedef struct CnProviderMachine {
        const char *name;
        const char *namespace;
        const char *uid;
        json_object *spec;       /* provider spec, borrowed */
        const char *provider_id; /* once known */
        /* migrate_uid without uid: whether a UID an instance carries is a live object's, whose
         * instance must not be taken (NULL: every UID is) */
        bool (*uid_is_live)(const char *uid, void *userdata); /* CnProviderUidIsLive */
        void *uid_is_live_userdata;
} CnProviderMachine;

/* instance: JSON view of the cloud's instance (NULL when none); owned by the callee. */
typedef void (*CnProviderMachineCallback)(CnProvider *p, const CnProviderResult *res, json_object *instance,
                                          void *userdata);
/* cleanup: done = true when the instance is gone, false to be called again later. */
typedef void (*CnProviderCleanupCallback)(CnProvider *p, const CnProviderResult *res, bool done, void *userdata);

typedef struct CnProviderOps {
        const char *name;            /* "hetzner", "openstack" (the platform ids) */
        size_t size;                 /* of the provider's private state, after CnProvider */
        /* Reads the cloud config (section -> key -> value object, see cloud-config.h). On error a
         * one-line reason for the user goes to *ret_error (cn_provider_config_error()). */
        int (*init)(CnProvider *p, json_object *cloud_config, char **ret_error);
        void (*done)(CnProvider *p);

        /* InstancesV2: looks the instance up and ends with cn_provider_call_finish_instance(); the
         * three public InstancesV2 calls are answered from this one lookup. */
        int (*instance_get)(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node);

        /* Machine lifecycle; NULL means "not implemented" (-EOPNOTSUPP). */
        int (*add_defaults)(CnProvider *p, json_object *spec, json_object **ret_spec);
        int (*validate)(CnProvider *p, json_object *spec, char **ret_reason);
        int (*machine_get)(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb, void *userdata,
                           CnProviderCall **ret);
        int (*machine_create)(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                              CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
        int (*machine_cleanup)(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                               void *userdata, CnProviderCall **ret);
        int (*metrics_labels)(CnProvider *p, json_object *spec, char ***ret_labels);
        int (*migrate_uid)(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                           CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
        int (*cloud_config)(CnProvider *p, json_object *spec, json_object **ret_cloud_config);
        /* The cloud's failure domains (Hetzner locations, OpenStack availability zones) as the
         * Cluster API v1beta2 list [{"name", "controlPlane", "attributes": {...}}]; region (may be
         * NULL) narrows them where the cloud has a wider scope than one region. */
        int (*failure_domains)(CnProvider *p, const char *region, CnProviderMachineCallback cb, void *userdata,
                               CnProviderCall **ret);
} CnProviderOps;

/* Providers this build knows, NULL-terminated. */
extern const CnProviderOps *const cn_provider_table[];
const CnProviderOps *cn_provider_find(const char *name);

/* cloud_config may be NULL (every setting from the environment or defaults). Credentials may
 * also come from the environment as the upstream cloud-controller-managers read them
 * (HCLOUD_TOKEN, HCLOUD_ENDPOINT; OS_* for OpenStack). -EPROTONOSUPPORT for an unknown name,
 * -EINVAL for a bad config, with the reason in *ret_error (optional, caller frees; never
 * contains a secret). */
int cn_provider_new(const char *name, CnHttp *http, json_object *cloud_config, CnProvider **ret, char **ret_error);
/* As cn_provider_new(), but every setting comes from cloud_config, none from the environment: the
 * credentials of a tenant's Secret are complete or refused, never completed with the process's
 * own (which would send them to the tenant's endpoint). */
int cn_provider_new_without_environment(const char *name, CnHttp *http, json_object *cloud_config, CnProvider **ret,
                                        char **ret_error);
/* For the providers' init: whether settings missing from the cloud config may come from the
 * environment. */
bool cn_provider_uses_environment(const CnProvider *p);
/* Providers are reference counted: cn_provider_new() returns one reference, cn_provider_free()
 * drops one, and every call holds one until it is freed, so that a provider dropped by its owner
 * (a rotated credential) lives exactly as long as its calls. */
CnProvider *cn_provider_ref(CnProvider *p);
CnProvider *cn_provider_free(CnProvider *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnProvider *, cn_provider_free);
/* How many providers exist (for metrics and tests). */
unsigned cn_provider_live_count(void);
const char *cn_provider_name(const CnProvider *p);
/* Called once per cloud API request with its provider, operation and result class (the labels
 * of a cloud request counter). */
typedef void (*CnProviderRequestCounter)(const char *provider, const char *operation, const char *result,
                                         void *userdata);
void cn_provider_set_request_counter(CnProvider *p, CnProviderRequestCounter fn, void *userdata);

/* InstancesV2: InstanceMetadata, InstanceExists (a not-found answer is "false", not an error),
 * InstanceShutdown. */
int cn_provider_instance_metadata(CnProvider *p, const CnProviderNodeRef *node, CnProviderInstanceCallback cb,
                                  void *userdata, CnProviderCall **ret);
int cn_provider_instance_exists(CnProvider *p, const CnProviderNodeRef *node, CnProviderBoolCallback cb,
                                void *userdata, CnProviderCall **ret);
int cn_provider_instance_shutdown(CnProvider *p, const CnProviderNodeRef *node, CnProviderBoolCallback cb,
                                  void *userdata, CnProviderCall **ret);

/* Machine lifecycle: -EOPNOTSUPP until a provider implements them. */
int cn_provider_add_defaults(CnProvider *p, json_object *spec, json_object **ret_spec);
int cn_provider_validate(CnProvider *p, json_object *spec, char **ret_reason);
int cn_provider_machine_get(CnProvider *p, const CnProviderMachine *m, CnProviderMachineCallback cb, void *userdata,
                            CnProviderCall **ret);
int cn_provider_machine_create(CnProvider *p, const CnProviderMachine *m, const char *userdata_text,
                               CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
int cn_provider_machine_cleanup(CnProvider *p, const CnProviderMachine *m, CnProviderCleanupCallback cb,
                                void *userdata, CnProviderCall **ret);
int cn_provider_metrics_labels(CnProvider *p, json_object *spec, char ***ret_labels);
int cn_provider_migrate_uid(CnProvider *p, const CnProviderMachine *m, const char *new_uid,
                            CnProviderMachineCallback cb, void *userdata, CnProviderCall **ret);
int cn_provider_cloud_config(CnProvider *p, json_object *spec, json_object **ret_cloud_config);
/* The callback's instance argument is the failure domain list (see CnProviderOps). */
int cn_provider_failure_domains(CnProvider *p, const char *region, CnProviderMachineCallback cb, void *userdata,
                                CnProviderCall **ret);

/* Cancels the call (its callback will not run). */
CnProviderCall *cn_provider_call_free(CnProviderCall *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnProviderCall *, cn_provider_call_free);

/* ---- for provider implementations ---- */

/* Sets *ret_error (when non-NULL) to the formatted reason and returns -abs(error). */
int cn_provider_config_error(char **ret_error, int error, const char *fmt, ...) _printf_(3, 4);

/* Private state of the provider (ops->size bytes, zeroed). */
void *cn_provider_data(CnProvider *p);
CnHttp *cn_provider_http(CnProvider *p);

/* One JSON request to the cloud API, decoded: 2xx -> body parsed (NULL when empty); 404 ->
 * -ENOENT; 401/403 -> -EACCES; 400/422 -> -EINVAL; 409 -> -EEXIST; 429 and 5xx -> -EAGAIN with
 * Retry-After; transport errors as lib/http.h reports them. `message` is the API's error text,
 * extracted by the provider's error parser. */
typedef struct CnProviderHttpReply {
        int error;
        long status;
        json_object *body;
        usec_t retry_after;
        const char *message;
        const char *subject_token; /* X-Subject-Token (Keystone) */
} CnProviderHttpReply;

typedef void (*CnProviderHttpCallback)(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata);
/* Pulls a human-readable message out of an error body (may return NULL). Borrowed from body. */
typedef const char *(*CnProviderErrorParser)(json_object *body);

typedef struct CnProviderHttpOptions {
        const char *bearer_token;       /* Authorization: Bearer */
        const char *auth_token;         /* X-Auth-Token (OpenStack) */
        const char *ca_file;
        const char *const *headers;     /* NULL-terminated "Name: value" list */
        json_object *body;              /* sent as application/json */
        CnProviderErrorParser error_parser;
        const char *operation;          /* metric label */
} CnProviderHttpOptions;

/* A provider keeps per-call state (copied lookup keys, the stage of a multi-request lookup) on
 * the call; it is freed with the call. */
void cn_provider_call_set_state(CnProviderCall *c, void *state, void (*free_state)(void *));
void *cn_provider_call_get_state(CnProviderCall *c);
CnProvider *cn_provider_call_provider(CnProviderCall *c);
/* Issues a request on the call; replaces any previous one. The callback runs on the loop. */
int cn_provider_call_http(CnProviderCall *c, const char *method, const char *url, const CnProviderHttpOptions *o,
                          CnProviderHttpCallback cb, void *userdata);
/* Finishes an instance lookup: answers the caller (once) and releases the call's in-flight
 * reference. Takes ownership of instance. */
void cn_provider_call_finish_instance(CnProviderCall *c, const CnProviderResult *res, CnProviderInstance *instance);

/* Machine lifecycle calls (lib/provider-*-machine.c): creates the call (exactly one of mcb/ccb),
 * runs start(call, arg) to issue its first request, and finishes it with one of the two functions
 * below. A negative return from start unwinds and is returned (no callback). The instance passed
 * to finish_machine is consumed (the callback borrows it). */
typedef int (*CnProviderCallStart)(CnProviderCall *c, void *arg);
int cn_provider_start_machine_call(CnProvider *p, CnProviderMachineCallback mcb, CnProviderCleanupCallback ccb,
                                   void *userdata, CnProviderCallStart start, void *arg, CnProviderCall **ret);
void cn_provider_call_finish_machine(CnProviderCall *c, const CnProviderResult *res, json_object *instance);
void cn_provider_call_finish_cleanup(CnProviderCall *c, const CnProviderResult *res, bool done);

/* Appends the failure domain {"name", "controlPlane": true, "attributes"} to list; attributes are
 * key, value pairs up to a NULL key (empty or NULL values left out). */
int cn_provider_failure_domain_add(json_object *list, const char *name, const char *const *attributes);

/* URL-escapes one query value or path segment. */
char *cn_provider_escape(const char *s);

/* ---- response parsers of the providers, exposed for the unit tests ---- */

/* Hetzner Cloud "server" object. network: name or ID of the private network whose IP is the
 * InternalIP (NULL: every private network IP). */
int cn_provider_hetzner_parse_server(json_object *server, const char *network, CnProviderInstance **ret);
/* OpenStack Nova "server" object (microversion 2.47+ for flavor.original_name). region: the
 * configured region, for the region label and the providerID. */
int cn_provider_openstack_parse_server(json_object *server, const char *region, CnProviderInstance **ret);
/* Keystone v3 token response: the endpoint URL of a service type, preferring the interface
 * ("public") and region given. Borrowed. */
const char *cn_provider_openstack_find_endpoint(json_object *token_body, const char *type, const char *interface,
                                                const char *region);
