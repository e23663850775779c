/* SPDX-License-Identifier: Apache-2.0 */
/* A small Prometheus registry: counters, gauges and histograms with labels, rendered in the text
 * exposition format 0.0.4 (HELP/TYPE lines, counters with the _total suffix, histograms as
 * cumulative _bucket{le=...} plus _sum and _count). Label values are escaped; metric and label
 * names are validated when registered. The number of label combinations per metric is capped so
 * that a peer cannot make it grow without limit. Updates are thread-safe. */
#pragma once

#include "buf.h"

typedef struct CnMetrics CnMetrics;
typedef struct CnMetric CnMetric;

#define CN_METRICS_MAX_SERIES 1024U
#define CN_LABELS(...) ((const char *const[]){ __VA_ARGS__, NULL })

int cn_metrics_new(CnMetrics **ret);
CnMetrics *cn_metrics_free(CnMetrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnMetrics *, cn_metrics_free);

/* label_names: NULL-terminated (CN_LABELS("method", "code")) or NULL. The returned metric is owned
 * by the registry. A counter's name is given without "_total". -EINVAL for invalid names,
 * -EEXIST when the name is taken. */
int cn_metrics_counter(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                       CnMetric **ret);
int cn_metrics_gauge(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                     CnMetric **ret);
/* buckets: strictly increasing upper bounds; +Inf is implied. */
int cn_metrics_histogram(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                         const double *buckets, size_t n_buckets, CnMetric **ret);

/* label_values: as many as the metric has label names (NULL for none). -EINVAL on a count
 * mismatch, a negative counter increment or an operation of the wrong kind; -E2BIG when a new
 * label combination exceeds CN_METRICS_MAX_SERIES. */
int cn_metric_add(CnMetric *c, const char *const *label_values, double v);
int cn_metric_inc(CnMetric *c, const char *const *label_values);
int cn_metric_set(CnMetric *g, const char *const *label_values, double v);
int cn_metric_observe(CnMetric *h, const char *const *label_values, double v);
/* Drops every series of gauge g: for a gauge recomputed as a whole, whose label combinations
 * come and go (counts by a machine's size), so that a gone one is not exposed with its last value.
 * Also of a counter that a compatible exporter recomputes as a whole (machine-controller's
 * machine_controller_machines_total, a count it types as a counter); never of a histogram. */
int cn_metric_clear(CnMetric *g);
/* Counts of things by their label values, for a metric recomputed as a whole from a cache (machines
 * by size): add each thing's values, then publish, which replaces every series of the gauge or
 * counter by the counts. The values are copied. */
typedef struct CnMetricCount {
        char **values;
        size_t count;
} CnMetricCount;
typedef struct CnMetricCounts {
        CnMetricCount *items;
        size_t n;
} CnMetricCounts;
int cn_metric_counts_add(CnMetricCounts *c, const char *const *label_values);
int cn_metric_counts_publish(const CnMetricCounts *c, CnMetric *m);
void cn_metric_counts_done(CnMetricCounts *c);

/* For counts kept elsewhere (a client's requests, an informer's watch restarts): adds to counter c
 * what total grew since *seen, and remembers total in *seen. A total below *seen (its source was
 * replaced) starts over from 0. */
int cn_metric_add_total(CnMetric *c, const char *const *label_values, uint64_t total, uint64_t *seen);

/* Appends the exposition text of every metric, in registration order. */
int cn_metrics_format(CnMetrics *m, CnBuf *out);
#define CN_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
