/* SPDX-License-Identifier: Apache-2.0 */
/* `cloudnode-controller run`: one sd-event loop that watches the operand's objects, the images
 * ConfigMap, the cloud config source and the control-plane Nodes through informers, and after any
 * change (and only then) computes the desired state and writes what differs. Leader-elected;
 * status on a ClusterOperator when the cluster has that API, else on the CloudnodeOperator. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "time-util.h"

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
        bool leader_elect;
        usec_t lease_duration;
        usec_t renew_deadline;
        usec_t retry_period;
        const char *bind_address;
        int port; /* < 0: no health server */
        const char *machine_provider;     /* NULL: no Cluster API machines */
        const char *machine_cloud_config;
        double kube_api_qps;
        unsigned kube_api_burst;
} ControllerOptions;

typedef struct Manager Manager;

int manager_new(const ControllerOptions *o, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_start(Manager *m);
/* Runs the loop until SIGTERM/SIGINT or lost leadership. */
int manager_run(Manager *m);
