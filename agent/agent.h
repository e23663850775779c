/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-agent internals: the Manager that owns the event loop (agent-manager.c), the output step
 * (agent-outputs.c) and the hand-off (agent-handoff.c). */
#pragma once

#include <systemd/sd-event.h>

#include "http.h"
#include "metadata.h"
#include "node-config.h"

/* Exit codes (also in --help and cloudnode-agent(8)). */
enum {
        AGENT_EXIT_SUCCESS = 0,
        AGENT_EXIT_FAILURE = 1,     /* metadata could not be fetched (network, deadline, HTTP errors) */
        AGENT_EXIT_USAGE = 2,       /* bad command line or node config */
        AGENT_EXIT_PLATFORM = 3,    /* platform not detected, or not supported */
        AGENT_EXIT_METADATA = 4,    /* metadata malformed, oversized or unsafe: rejected */
        AGENT_EXIT_OUTPUT = 5,      /* an output file could not be rendered or written */
};

typedef struct AgentArgs {
        const char *config;
        const char *root;
        const char *platform;
        bool once;
        bool dry_run;
        bool afterburn_compat;
        bool print_metadata;         /* `metadata`: print instead of writing the files */
        const char *format;          /* of `metadata`: "env" or "json" */
} AgentArgs;

typedef struct Manager {
        sd_event *event;
        CnHttp *http;
        CnMetadataFetch *fetch;
        CnNodeConfig *config;
        const AgentArgs *args;
        CnInstanceMetadata *metadata;
        int result;                  /* exit code */
        bool reloading;              /* a SIGHUP pass is running */
        bool static_pod;             /* the last pass rendered the bootstrap static pod */
        void (*on_metadata)(struct Manager *m);
        void *handoff;               /* daemon mode state (agent-handoff.c) */
} Manager;

/* agent-manager.c: manager_new() allocates only; manager_setup() loads the node config (-EINVAL
 * when it is invalid) and builds the loop, signals and HTTP client; manager_run() does the pass
 * (and the daemon's wait) and returns the exit code. Failures are logged where they happen. */
int manager_new(const AgentArgs *args, Manager **ret);
int manager_setup(Manager *m);
int manager_run(Manager *m);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Renders every output for the role, then writes those whose content changed. Nothing is written
 * when any rendering fails. The bootstrap static pod is rendered only on bootstrap/control-plane
 * nodes of a platform the cluster-mode initializer has a provider for (m->static_pod says so).
 * Returns the number of files changed, or negative errno (logged). */
int agent_write_outputs(Manager *m, unsigned *ret_written);

/* Daemon mode on bootstrap/control-plane: wait for the in-cluster initializer, then remove the
 * static pod (agent-handoff.c). */
int agent_handoff_start(Manager *m);
void agent_handoff_free(Manager *m);

/* Maps a metadata error to the exit code. */
int agent_exit_code_for(int r);
