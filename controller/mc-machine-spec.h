/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's providerSpec (cluster.k8s.io/v1alpha1 Machine spec.providerSpec.value:
 * cloudProvider, cloudProviderSpec, operatingSystem, operatingSystemSpec, sshPublicKeys) turned
 * into what cloudnode's providers take: the provider name, its machine spec (the field names of
 * lib/provider/provider-<cloud>-machine.c) and its cloud config (the credentials, as cloud.conf's
 * [Global] keys). Free of I/O so that every mapping and refusal is unit-tested: the values of
 * secretKeyRef and configMapKeyRef come through a lookup the caller answers from what it read.
 *
 * A ConfigVar is machine-controller's: a plain string, {"value": ...}, or {"secretKeyRef" |
 * "configMapKeyRef": {namespace, name, key}}; an empty value falls back to the environment
 * variable machine-controller documents for the field (HZ_TOKEN, OS_AUTH_URL, OS_USER_NAME, ...).
 * Unlike machine-controller, a reference must name the Machine's own namespace: a Machine's author
 * must not read other namespaces' Secrets through the controller. Values are never put into
 * reasons. */
#pragma once

#include <json-c/json.h>

#include "macro.h"

#define MC_MACHINE_FINALIZER "machine-delete-finalizer"
#define MC_MACHINE_NODE_FINALIZER "machine-node-delete-finalizer"
#define MC_ANNOTATION_INITIALIZERS "machine-controller.kubermatic.io/initializers"
#define MC_ANNOTATION_SKIP_EVICTION "kubermatic.io/skip-eviction"
#define MC_ANNOTATION_USER_DATA_SECRET "cloudnode.io/user-data-secret"
#define MC_ANNOTATION_AUTOSCALER "cluster.k8s.io/machine"

typedef enum McRefKind {
        MC_REF_SECRET,
        MC_REF_CONFIGMAP,
} McRefKind;

typedef struct McRef {
        McRefKind kind;
        const char *namespace, *name, *key;
} McRef;

/* Answers one reference: 0 with the value in *ret (borrowed until the next call), -EAGAIN when
 * the object has not been read yet (the caller reads it and tries again), -ENOENT when the object
 * or the key does not exist. */
typedef int (*McLookup)(const McRef *ref, const char **ret, void *userdata);
/* Environment variables (getenv in the controller; a table in the unit tests). */
typedef const char *(*McGetenv)(const char *name, void *userdata);

typedef struct McMachineSpec {
        char *provider;          /* "hetzner" or "openstack" */
        char *operating_system;
        json_object *spec;       /* the provider's machine spec */
        json_object *cloud_config; /* {"Global": {...}}: credentials and endpoints; never logged */
        McRef pending;           /* with -EAGAIN: the reference to read (borrowed from the input) */
} McMachineSpec;

void mc_machine_spec_done(McMachineSpec *s);

/* Translates spec.providerSpec.value of a Machine of namespace ns. 0 on success; -EAGAIN when a
 * reference must be read first (ret->pending names it); -EINVAL (or -ENOTSUP for a valid
 * machine-controller setting cloudnode cannot honour, or an operating system the cloud does not
 * offer) with a one-line reason for status.errorMessage in *ret_reason; -ENOENT when a referenced
 * object or key does not exist (not terminal: it may be created), with a reason. */
int mc_machine_spec_translate(json_object *provider_spec_value, const char *ns, McLookup lookup, McGetenv getenv_fn,
                              void *userdata, McMachineSpec *ret, char **ret_reason);

/* Whether machine-controller offers the operating system on that cloud. */
bool mc_operating_system_supported(const char *provider, const char *os) _pure_;

/* The labels of machine_controller_machines_total, as machine-controller's metrics name them:
 * kubelet_version (spec.versions.kubelet), provider, os, then its providers' MachineMetricsLabels:
 * size (Hetzner serverType, OpenStack flavor), location (Hetzner), image and region (OpenStack).
 * A label a Machine's provider does not have is "", which Prometheus reads as absent. */
#define MC_METRIC_LABELS_N 7
extern const char *const mc_metric_label_names[MC_METRIC_LABELS_N + 1];
/* The values for machine (borrowed from it), in mc_metric_label_names' order and NULL-terminated
 * as CN_LABELS(); a ConfigVar behind
 * a secretKeyRef or configMapKeyRef counts as "": a metric reads no Secret. -EINVAL for a Machine
 * without a providerSpec.value.cloudProvider (machine-controller leaves it out too). */
int mc_machine_metric_labels(json_object *machine, const char *ret[static MC_METRIC_LABELS_N + 1]);
