/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: its command line (initializer-main.c). */
#pragma once

#include "kube-daemon.h"
#include "macro.h"
#include "time-util.h"

#define CN_INITIALIZER_PORT_DEFAULT 10267U

typedef enum Controller {
        CONTROLLER_CLOUD_NODE = 1 << 0,
        CONTROLLER_CLOUD_NODE_LIFECYCLE = 1 << 1,
} Controller;

typedef struct Config {
        char *kubeconfig;
        char *node_name;         /* node mode when set */
        char *config_path;       /* node config (node mode) */
        char *root;              /* prefix of local paths (tests) */
        char *cloud_provider;
        char *cloud_config;
        char *cloud_credentials_dir; /* cluster mode: a mounted Secret (initializer-credentials.h) */
        unsigned controllers;    /* Controller bits */
        CnKubeDaemonOptions daemon; /* the flags shared with cloudnode-controller */
        char *leader_elect_namespace;
        char *leader_elect_name;
        unsigned concurrent_node_syncs;
        usec_t node_status_update_frequency;
        usec_t node_monitor_period;      /* lifecycle controller */
        usec_t node_startup_grace_period; /* lifecycle: no deletion of younger Nodes */
} Config;

void config_done(Config *c);
/* "cloud-node,-cloud-node-lifecycle", "*": the bits of the controllers to run. */
int config_parse_controllers(const char *s, unsigned *ret);
