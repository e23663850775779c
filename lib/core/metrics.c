/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus registry and text exposition. See metrics.h. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>

#include "metrics.h"
#include "string-util.h"

typedef enum MetricKind {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
} MetricKind;

typedef struct Series {
        char **values;
        double value; /* counter, gauge */
        double sum;
        uint64_t count;
        uint64_t *buckets; /* per bucket, not cumulative */
} Series;

struct CnMetric {
        CnMetrics *registry;
        MetricKind kind;
        char *name; /* as exposed, with _total for counters */
        char *help;
        char **labels;
        size_t n_labels;
        double *bounds;
        size_t n_bounds;
        Series *series;
        size_t n_series;
};

struct CnMetrics {
        pthread_mutex_t lock;
        CnMetric **metrics;
        size_t n_metrics;
};

int cn_metrics_new(CnMetrics **ret) {
        CnMetrics *m;

        assert(ret);
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        *ret = m;
        return 0;
}

static void series_done(Series *s) {
        strv_free(s->values);
        free(s->buckets);
}

static CnMetric *metric_free(CnMetric *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_series; i++)
                series_done(&c->series[i]);
        free(c->series);
        free(c->name);
        free(c->help);
        strv_free(c->labels);
        free(c->bounds);
        free(c);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(CnMetric *, metric_free);

CnMetrics *cn_metrics_free(CnMetrics *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_metrics; i++)
                metric_free(m->metrics[i]);
        free(m->metrics);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

static bool valid_metric_name(const char *s) {
        if (isempty(s) || isdigit((unsigned char) s[0]))
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && *c != '_' && *c != ':')
                        return false;
        return true;
}

static bool valid_label_name(const char *s, MetricKind kind) {
        if (isempty(s) || isdigit((unsigned char) s[0]) || cn_startswith(s, "__"))
                return false;
        if (kind == METRIC_HISTOGRAM && streq(s, "le"))
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && *c != '_')
                        return false;
        return true;
}

/* Appends a series for the given label values (or none); caller holds the lock. */
static int series_add(CnMetric *c, const char *const *values, Series **ret) {
        _cleanup_strv_free_ char **v = NULL;
        Series *n, *s;
        int r;

        if (c->n_series >= CN_METRICS_MAX_SERIES)
                return -E2BIG;
        r = strv_copy((char *const *) values, &v);
        if (r < 0)
                return r;
        n = reallocarray(c->series, c->n_series + 1, sizeof(Series));
        if (!n)
                return -ENOMEM;
        c->series = n;
        s = &c->series[c->n_series];
        *s = (Series){};
        if (c->kind == METRIC_HISTOGRAM) {
                s->buckets = calloc(c->n_bounds + 1, sizeof(uint64_t));
                if (!s->buckets)
                        return -ENOMEM;
        }
        s->values = TAKE_PTR(v);
        c->n_series++;
        *ret = s;
        return 0;
}

static int metric_register(CnMetrics *m, MetricKind kind, const char *name, const char *help,
                           const char *const *label_names, const double *bounds, size_t n_bounds, CnMetric **ret) {
        _cleanup_(metric_freep) CnMetric *c = NULL;
        CnMetric **n;
        Series *s;
        int r = 0;

        assert(m);
        if (!valid_metric_name(name) || isempty(help) || !cn_utf8_is_valid(help, strlen(help)))
                return -EINVAL;
        for (const char *const *l = label_names; l && *l; l++) {
                if (!valid_label_name(*l, kind))
                        return -EINVAL;
                for (const char *const *o = label_names; o < l; o++)
                        if (streq(*o, *l))
                                return -EINVAL;
        }
        for (size_t i = 0; i < n_bounds; i++)
                if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
                        return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->registry = m;
        c->kind = kind;
        if (kind == METRIC_COUNTER && !cn_endswith(name, "_total"))
                c->name = cn_strjoin(name, "_total", NULL);
        else
                c->name = strdup(name);
        c->help = strdup(help);
        if (!c->name || !c->help)
                return -ENOMEM;
        r = strv_copy((char *const *) label_names, &c->labels);
        if (r < 0)
                return r;
        c->n_labels = strv_length(c->labels);
        if (n_bounds > 0) {
                c->bounds = malloc(n_bounds * sizeof(double));
                if (!c->bounds)
                        return -ENOMEM;
                memcpy(c->bounds, bounds, n_bounds * sizeof(double));
                c->n_bounds = n_bounds;
        }
        /* A metric without labels is exposed from the start, with zero. */
        if (c->n_labels == 0) {
                r = series_add(c, NULL, &s);
                if (r < 0)
                        return r;
        }

        pthread_mutex_lock(&m->lock);
        for (size_t i = 0; i < m->n_metrics; i++)
                if (streq(m->metrics[i]->name, c->name))
                        r = -EEXIST;
        if (r >= 0) {
                n = reallocarray(m->metrics, m->n_metrics + 1, sizeof(CnMetric *));
                if (!n)
                        r = -ENOMEM;
                else {
                        m->metrics = n;
                        m->metrics[m->n_metrics++] = c;
                }
        }
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return r;
        if (ret)
                *ret = c;
        TAKE_PTR(c);
        return 0;
}

int cn_metrics_counter(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                       CnMetric **ret) {
        return metric_register(m, METRIC_COUNTER, name, help, label_names, NULL, 0, ret);
}

int cn_metrics_gauge(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                     CnMetric **ret) {
        return metric_register(m, METRIC_GAUGE, name, help, label_names, NULL, 0, ret);
}

int cn_metrics_histogram(CnMetrics *m, const char *name, const char *help, const char *const *label_names,
                         const double *buckets, size_t n_buckets, CnMetric **ret) {
        return metric_register(m, METRIC_HISTOGRAM, name, help, label_names, buckets, n_buckets, ret);
}

/* Finds or creates the series; caller holds the lock. */
static int series_get(CnMetric *c, const char *const *values, Series **ret) {
        size_t n = 0;

        for (const char *const *v = values; v && *v; v++) {
                if (!cn_utf8_is_valid(*v, strlen(*v)))
                        return -EINVAL;
                n++;
        }
        if (n != c->n_labels)
                return -EINVAL;
        for (size_t i = 0; i < c->n_series; i++) {
                bool match = true;
                for (size_t k = 0; k < n && match; k++)
                        match = streq(c->series[i].values[k], values[k]);
                if (match) {
                        *ret = &c->series[i];
                        return 0;
                }
        }
        return series_add(c, values, ret);
}

typedef enum MetricOp {
        OP_ADD,
        OP_SET,
        OP_OBSERVE,
} MetricOp;

static int metric_update(CnMetric *c, const char *const *values, MetricOp op, double v) {
        CnMetrics *m;
        Series *s;
        int r;

        assert(c);
        m = c->registry;
        if (isnan(v) ||
            (op == OP_ADD && (c->kind == METRIC_HISTOGRAM || (c->kind == METRIC_COUNTER && v < 0))) ||
            (op == OP_SET && c->kind != METRIC_GAUGE) || (op == OP_OBSERVE && c->kind != METRIC_HISTOGRAM))
                return -EINVAL;
        pthread_mutex_lock(&m->lock);
        r = series_get(c, values, &s);
        if (r >= 0) {
                if (op == OP_ADD)
                        s->value += v;
                else if (op == OP_SET)
                        s->value = v;
                else {
                        size_t i = 0;
                        while (i < c->n_bounds && v > c->bounds[i])
                                i++;
                        s->buckets[i]++;
                        s->sum += v;
                        s->count++;
                }
        }
        pthread_mutex_unlock(&m->lock);
        return r;
}

int cn_metric_add(CnMetric *c, const char *const *label_values, double v) {
        return metric_update(c, label_values, OP_ADD, v);
}

int cn_metric_inc(CnMetric *c, const char *const *label_values) {
        return metric_update(c, label_values, OP_ADD, 1);
}

int cn_metric_set(CnMetric *g, const char *const *label_values, double v) {
        return metric_update(g, label_values, OP_SET, v);
}

int cn_metric_observe(CnMetric *h, const char *const *label_values, double v) {
        return metric_update(h, label_values, OP_OBSERVE, v);
}

int cn_metric_clear(CnMetric *g) {
        if (!g || g->kind == METRIC_HISTOGRAM)
                return -EINVAL;
        pthread_mutex_lock(&g->registry->lock);
        for (size_t i = 0; i < g->n_series; i++)
                series_done(&g->series[i]);
        free(g->series);
        g->series = NULL;
        g->n_series = 0;
        pthread_mutex_unlock(&g->registry->lock);
        return 0;
}

int cn_metric_add_total(CnMetric *c, const char *const *label_values, uint64_t total, uint64_t *seen) {
        uint64_t base;
        int r;

        assert(seen);
        base = total < *seen ? 0 : *seen;
        if (total == base) {
                *seen = total;
                return 0;
        }
        r = cn_metric_add(c, label_values, (double) (total - base));
        if (r < 0)
                return r;
        *seen = total;
        return 0;
}

static int format_value(CnBuf *out, double v) {
        char num[CN_DOUBLE_MAX];

        if (isinf(v))
                return cn_buf_add_str(out, v > 0 ? "+Inf" : "-Inf");
        if (isnan(v))
                return cn_buf_add_str(out, "NaN");
        return cn_buf_add_str(out, cn_format_double(num, v));
}

/* escape_quote: label values escape '"' too; HELP text only '\' and newline. */
static int add_escaped(CnBuf *out, const char *s, bool escape_quote) {
        int r = 0;

        for (const char *c = s; r >= 0 && *c; c++) {
                if (*c == '\\')
                        r = cn_buf_add_str(out, "\\\\");
                else if (*c == '\n')
                        r = cn_buf_add_str(out, "\\n");
                else if (*c == '"' && escape_quote)
                        r = cn_buf_add_str(out, "\\\"");
                else
                        r = cn_buf_add_char(out, *c);
        }
        return r;
}

/* name{l1="v1",...,le="x"} value */
static int format_sample(CnBuf *out, const CnMetric *c, const char *suffix, const Series *s, const char *le,
                         double v) {
        bool any = c->n_labels > 0 || le;
        int r;

        r = cn_buf_printf(out, "%s%s%s", c->name, suffix, any ? "{" : "");
        for (size_t i = 0; r >= 0 && i < c->n_labels; i++) {
                r = cn_buf_printf(out, "%s%s=\"", i > 0 ? "," : "", c->labels[i]);
                if (r >= 0)
                        r = add_escaped(out, s->values[i], true);
                if (r >= 0)
                        r = cn_buf_add_char(out, '"');
        }
        if (r >= 0 && le)
                r = cn_buf_printf(out, "%sle=\"%s\"", c->n_labels > 0 ? "," : "", le);
        if (r >= 0 && any)
                r = cn_buf_add_char(out, '}');
        if (r >= 0)
                r = cn_buf_add_char(out, ' ');
        if (r >= 0)
                r = format_value(out, v);
        if (r >= 0)
                r = cn_buf_add_char(out, '\n');
        return r;
}

static int format_metric(CnBuf *out, const CnMetric *c) {
        static const char *const types[] = {
                [METRIC_COUNTER] = "counter",
                [METRIC_GAUGE] = "gauge",
                [METRIC_HISTOGRAM] = "histogram",
        };
        char le[CN_DOUBLE_MAX];
        int r;

        r = cn_buf_printf(out, "# HELP %s ", c->name);
        if (r >= 0)
                r = add_escaped(out, c->help, false);
        if (r >= 0)
                r = cn_buf_printf(out, "\n# TYPE %s %s\n", c->name, types[c->kind]);
        for (size_t i = 0; r >= 0 && i < c->n_series; i++) {
                const Series *s = &c->series[i];
                uint64_t cumulative = 0;

                if (c->kind != METRIC_HISTOGRAM) {
                        r = format_sample(out, c, "", s, NULL, s->value);
                        continue;
                }
                for (size_t b = 0; r >= 0 && b <= c->n_bounds; b++) {
                        cumulative += s->buckets[b];
                        r = format_sample(out, c, "_bucket", s,
                                          b < c->n_bounds ? cn_format_double(le, c->bounds[b]) : "+Inf",
                                          (double) cumulative);
                }
                if (r >= 0)
                        r = format_sample(out, c, "_sum", s, NULL, s->sum);
                if (r >= 0)
                        r = format_sample(out, c, "_count", s, NULL, (double) s->count);
        }
        return r;
}

int cn_metrics_format(CnMetrics *m, CnBuf *out) {
        int r = 0;

        assert(m);
        assert(out);
        pthread_mutex_lock(&m->lock);
        for (size_t i = 0; r >= 0 && i < m->n_metrics; i++)
                r = format_metric(out, m->metrics[i]);
        pthread_mutex_unlock(&m->lock);
        return r;
}

static bool values_same(char *const *a, const char *const *b) {
        for (; *a && *b; a++, b++)
                if (!streq(*a, *b))
                        return false;
        return !*a && !*b;
}

int cn_metric_counts_add(CnMetricCounts *c, const char *const *label_values) {
        CnMetricCount *n;
        char **copy = NULL;

        assert(c);
        for (size_t i = 0; i < c->n; i++)
                if (values_same(c->items[i].values, label_values)) {
                        c->items[i].count++;
                        return 0;
                }
        if (strv_copy((char *const *) label_values, &copy) < 0)
                return -ENOMEM;
        n = reallocarray(c->items, c->n + 1, sizeof(CnMetricCount));
        if (!n) {
                strv_free(copy);
                return -ENOMEM;
        }
        c->items = n;
        c->items[c->n++] = (CnMetricCount) { .values = copy, .count = 1 };
        return 0;
}

int cn_metric_counts_publish(const CnMetricCounts *c, CnMetric *m) {
        int r = cn_metric_clear(m);

        for (size_t i = 0; r >= 0 && i < c->n; i++)
                r = m->kind == METRIC_GAUGE ?
                            cn_metric_set(m, (const char *const *) c->items[i].values, (double) c->items[i].count) :
                            cn_metric_add(m, (const char *const *) c->items[i].values, (double) c->items[i].count);
        return r;
}

void cn_metric_counts_done(CnMetricCounts *c) {
        for (size_t i = 0; i < c->n; i++)
                strv_free(c->items[i].values);
        free(c->items);
        *c = (CnMetricCounts) {};
}
