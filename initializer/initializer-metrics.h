/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: its metrics, and the /healthz, /readyz and /metrics they feed
 * (initializer-metrics.c). */
#pragma once

#include <stdint.h>

typedef struct CnMetrics CnMetrics;
typedef struct CnMetric CnMetric;
typedef struct Manager Manager;

typedef struct Metrics {
        CnMetrics *registry;
        CnMetric *nodes_initialized;
        CnMetric *init_latency;
        CnMetric *cloud_requests;
        CnMetric *leader;
        CnMetric *address_updates;
        CnMetric *init_failures;
        CnMetric *nodes_deleted;
        CnMetric *watch_restarts;
        CnMetric *tracked_nodes;
        uint64_t watch_restarts_seen; /* the Node informer's count already exported */
} Metrics;

/* metrics (initializer-metrics.c) */
int metrics_setup(Manager *m);
int metrics_serve(Manager *m);
