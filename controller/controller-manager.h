/* SPDX-License-Identifier: Apache-2.0 */
/* `cloudnode-controller run`: one sd-event loop. With the operand (the default) it watches the
 * operand's objects, the images ConfigMap, the cloud config source and the control-plane Nodes
 * through informers, and after any change (and only then) computes the desired state and writes
 * what differs, with status on a ClusterOperator when the cluster has that API, else on the
 * CloudnodeOperator. With --operand=false (a Cluster API management cluster, the Deckhouse module)
 * it runs the Cluster API controllers only. Leader-elected either way. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kube-daemon.h"
#include "macro.h"
#include "time-util.h"

#define CN_CONTROLLER_PORT_DEFAULT 10260U

typedef struct ControllerOptions {
        const char *kubeconfig;
        const char *namespace;
        const char *cloud_config_namespace; /* source of cloud-conf */
        const char *cloud_config_name;
        const char *cloud_config_key;
        const char *images_configmap;
        const char *cloud_provider;       /* NULL: from the CloudnodeOperator or Infrastructure */
        const char *http_proxy;
        const char *https_proxy;
        const char *no_proxy;
        const char *release_version;      /* $RELEASE_VERSION; NULL: the operand reports no version */
        CnKubeDaemonOptions daemon;       /* the flags shared with cloudnode-initializer */
        const char *machine_provider;     /* NULL: no Cluster API machines */
        const char *machine_cloud_config;
        bool no_operand;                  /* --operand=false: the machine controllers only */
        const char *mc_namespace;         /* NULL: no machine-controller Machines (cluster.k8s.io) */
        const char *mc_user_data_secret;
        usec_t mc_skip_eviction_after;
} ControllerOptions;

typedef struct Manager Manager;

/* Allocation only; manager_setup() builds the loop, signals, client, informers' sources and the
 * health server (logging what fails); manager_run() runs the loop. */
int manager_new(const ControllerOptions *o, Manager **ret);
int manager_setup(Manager *m);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Runs the loop until SIGTERM/SIGINT or lost leadership. */
int manager_run(Manager *m);
