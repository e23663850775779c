/* SPDX-License-Identifier: Apache-2.0 */
/* Cloud providers: one interface joining Kubernetes' InstancesV2 calls (instance metadata by
 * providerID or node name, exists, shutdown), used by cloudnode-initializer in cluster mode, with
 * the machine-controller lifecycle (add_defaults, validate, get, create, cleanup, metrics labels,
 * migrate_uid, cloud config), used by cloudnode-controller for Cluster API machines.
 *
 * Every call that talks to the cloud is asynchronous on the caller's sd-event loop (HTTP through
 * lib/core/http.h, never blocking the loop); it completes through a callback exactly once unless the
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
        char **extra_labels; /* strv "key=value"; lib/kube/labels.h decides what may be applied */
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

/* Several instances carry one machine's UID: refused, a human decides. */
#define CN_PROVIDER_EMULTIPLE ENOTUNIQ
/* The instance a migration names belongs to another machine: refused for good. */
#define CN_PROVIDER_EOWNED EADDRINUSE

typedef bool (*CnProviderUidIsLive)(const char *uid, void *userdata);

/* Whether migrate_uid may relabel an instance that carries the UID current (NULL: no label) to
 * new_uid: 1 when it carries new_uid already, 0 when it may, -CN_PROVIDER_EOWNED when it is
 * another machine's: any UID but expected when that is set, else a UID is_live() knows, or no
 * label at all (an instance no machine created). */
int cn_provider_migration_check(const char *expected, CnProviderUidIsLive is_live, void *userdata,
                                const char *current, const char *new_uid);

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

/* ---- machine lifecycle (Cluster API infrastructure machines, for cloudnode-controller). A
 * machine is described by its provider spec (JSON) and the Machine's UID, from which
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
        /* A control-plane machine: the UID of its Cluster, which its instance carries as
         * CN_PROVIDER_CONTROL_PLANE_LABEL so that the cluster's load balancer finds it (NULL: not
         * a control-plane machine) */
        const char *control_plane_of;
} CnProviderMachine;

#define CN_PROVIDER_CONTROL_PLANE_LABEL "cloudnode.io/control-plane-of"
#define CN_PROVIDER_CLUSTER_UID_LABEL "cloudnode.io/cluster-uid"

/* A Cluster API cluster's control-plane load balancer, owned by the CloudnodeCluster: found by
 * CN_PROVIDER_CLUSTER_UID_LABEL = uid (never by name), its targets are the instances that carry
 * CN_PROVIDER_CONTROL_PLANE_LABEL = targets_of. */
typedef struct CnProviderLoadBalancer {
        const char *name;       /* the CloudnodeCluster's */
        const char *namespace;
        const char *uid;        /* the CloudnodeCluster's */
        /* the UID it carried before the object was recreated under uid (clusterctl move; NULL:
         * none): ensure relabels the load balancer carrying it rather than make a second one */
        const char *previous_uid;
        const char *targets_of; /* the Cluster's UID */
        const char *region;     /* spec.region, may be NULL */
        json_object *spec;      /* spec.controlPlaneLoadBalancer, borrowed */
        /* providerIDs of the control-plane machines' instances, oldest first (NULL: none); a
         * provider whose load balancer selects its targets itself (Hetzner) ignores them */
        const char *const *members;
} CnProviderLoadBalancer;

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
        /* The member of the machine spec that places an instance in one of those failure domains
         * (a Machine's spec.failureDomain is written there); NULL: the provider cannot place. */
        const char *failure_domain_field;
        /* The API's RateLimit-Reset is when its bucket is full again and the bucket refills
         * evenly until then (Hetzner: 3600 an hour, one a second), so after a 429 the next
         * request may go after (reset - now) / (limit - remaining), not at the reset. Without
         * it, RateLimit-Reset is when the next request may go (DigitalOcean: when the oldest
         * request of the window expires). */
        bool ratelimit_refills_evenly;
        /* Finds or creates the control-plane load balancer and answers {"id", "host", "port"}
         * once it has a public address; NULL: the provider has none (-EOPNOTSUPP). A spec it
         * cannot build is -EINVAL at once, with the reason in *ret_reason. */
        int (*load_balancer_ensure)(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderMachineCallback cb,
                                    void *userdata, CnProviderCall **ret, char **ret_reason);
        /* Deletes the load balancers carrying lb->uid; done when none is left. */
        int (*load_balancer_cleanup)(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderCleanupCallback cb,
                                     void *userdata, CnProviderCall **ret);
} CnProviderOps;

/* Providers this build knows, NULL-terminated. */
extern const CnProviderOps *const cn_provider_table[];
const CnProviderOps *cn_provider_find(const char *name);
/* "hetzner, openstack, ...": the names of the table, for messages. NULL on OOM. */
char *cn_provider_names(void);

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

/* Machine lifecycle: -EOPNOTSUPP for an operation the provider does not implement. */
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

/* The control-plane load balancer (see CnProviderOps). */
int cn_provider_load_balancer_ensure(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderMachineCallback cb,
                                     void *userdata, CnProviderCall **ret, char **ret_reason);
int cn_provider_load_balancer_cleanup(CnProvider *p, const CnProviderLoadBalancer *lb, CnProviderCleanupCallback cb,
                                      void *userdata, CnProviderCall **ret);

/* CnProviderOps.failure_domain_field, or NULL. */
const char *cn_provider_failure_domain_field(const CnProvider *p);

/* Cancels the call (its callback will not run). */
CnProviderCall *cn_provider_call_free(CnProviderCall *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnProviderCall *, cn_provider_call_free);
