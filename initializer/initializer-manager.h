/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: the Manager (initializer-manager.c). One Manager owns the event loop and
 * every long-lived object: the Kubernetes client, the Node informer, the Event recorder, the leader
 * election (cluster mode), the health server, the Node work queue, and the state of the mode's
 * instance source (initializer-source.h). */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "backoff.h"
#include "initializer-config.h"
#include "initializer-metrics.h"
#include "initializer-node-filter.h"
#include "initializer-source.h"
#include "json-filter.h"
#include "kube-daemon.h"
#include "kube-expectation.h"
#include "macro.h"

typedef struct CnHttp CnHttp;
typedef struct CnHttpd CnHttpd;
typedef struct CnKubeClient CnKubeClient;
typedef struct CnKubeInformer CnKubeInformer;
typedef struct CnKubeEventRecorder CnKubeEventRecorder;
typedef struct CnKubeLeader CnKubeLeader;
typedef struct CnKubeRequest CnKubeRequest;
typedef struct CnMetrics CnMetrics;
typedef struct CnMetric CnMetric;
typedef struct CnNetlink CnNetlink;
typedef struct CnProvider CnProvider;
typedef struct CnProviderCall CnProviderCall;
typedef struct CnProviderInstance CnProviderInstance;
typedef struct CnInstanceMetadata CnInstanceMetadata;
typedef struct CnMetadataFetch CnMetadataFetch;
typedef struct CnNodeConfig CnNodeConfig;
typedef struct CnWorkQueue CnWorkQueue;
typedef struct CnWorkItem CnWorkItem;
typedef struct Manager Manager;

struct Manager {
        Config *config;
        const InstanceSource *source; /* of the mode */
        CnKubeDaemonEndpoints endpoints;
        sd_event *event;
        CnHttp *http;
        CnHttpd *httpd;
        CnKubeClient *kube;
        CnKubeInformer *nodes;
        uint64_t nodes_handlers;
        CnKubeEventRecorder *events;
        CnKubeLeader *leader;
        bool leading;
        bool controllers_started;
        bool shutting_down;
        Metrics metrics;

        /* node mode */
        CnNodeConfig *node_config;
        CnNetlink *netlink;
        CnMetadataFetch *metadata_fetch;
        CnProviderInstance *local_instance;
        CnBackoff metadata_backoff;
        sd_event_source *metadata_retry;
        int metadata_error;
        bool notified_ready;
        bool addresses_deferred; /* a change came while the cache predated our address write */

        /* cluster mode */
        CnProvider *provider;
        sd_event_source *credentials_watch;
        char credentials_hash[65]; /* of the credentials the provider was built with */
        sd_event_source *reconcile_timer;
        sd_event_source *lifecycle_timer;

        /* work queue, of NodeStates */
        CnWorkQueue *queue;

        /* node name -> our last status.addresses write, until the cache shows it */
        CnWriteExpectations *address_writes;
};

/* Allocation only; manager_setup() builds the loop, signals and every object the mode needs
 * (logging what fails); manager_run() runs the loop. */
int manager_new(Config *c, Manager **ret);
int manager_setup(Manager *m);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);
int manager_run(Manager *m);
/* Writes to the Node that the mode allows for; fails the process if the controllers cannot run. */
void manager_start_controllers(Manager *m);
