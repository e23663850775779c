/* SPDX-License-Identifier: Apache-2.0 */
/* Write expectations. See kube-expectation.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "kube-client.h"
#include "kube-expectation.h"
#include "string-util.h"

static const char *rv_string(json_object *o) {
        return o ? strempty(cn_json_string(o, "metadata", "resourceVersion", NULL)) : "";
}

void cn_write_expectation_clear(CnWriteExpectation *e) {
        free(e->based_on);
        *e = (CnWriteExpectation) {};
}

int cn_write_expectation_begin_at(CnWriteExpectation *e, const char *resource_version) {
        if (e->set)
                return 0;
        e->based_on = strdup(strempty(resource_version));
        if (!e->based_on)
                return -ENOMEM;
        e->set = true;
        e->since = cn_now(CLOCK_MONOTONIC);
        return 0;
}

int cn_write_expectation_begin(CnWriteExpectation *e, json_object *live) {
        return cn_write_expectation_begin_at(e, rv_string(live));
}

bool cn_write_expectation_written(CnWriteExpectation *e, json_object *object) {
        uint64_t rv = cn_kube_object_resource_version(object);

        if (rv == 0 || (e->based_on && streq(e->based_on, rv_string(object)))) {
                cn_write_expectation_clear(e);
                return false;
        }
        if (!e->set) {
                e->set = true;
                e->since = cn_now(CLOCK_MONOTONIC);
        }
        e->written = MAX(e->written, rv);
        return true;
}

bool cn_write_expectation_pending(CnWriteExpectation *e, json_object *cached, usec_t timeout) {
        uint64_t rv = cn_kube_object_resource_version(cached);
        bool pending;

        if (!e->set)
                return false;
        if (timeout > 0 && cn_now(CLOCK_MONOTONIC) > e->since + timeout)
                pending = false; /* the event never came (a dropped watch re-lists anyway) */
        else if (e->written > 0 && rv > 0)
                pending = rv < e->written;
        else
                pending = e->based_on && streq(e->based_on, rv_string(cached));
        if (!pending)
                cn_write_expectation_clear(e);
        return pending;
}

typedef struct Entry Entry;
struct Entry {
        Entry *next;
        char *key;
        CnWriteExpectation e;
};

struct CnWriteExpectations {
        Entry *entries;
};

int cn_write_expectations_new(CnWriteExpectations **ret) {
        *ret = calloc(1, sizeof(CnWriteExpectations));
        return *ret ? 0 : -ENOMEM;
}

static void entry_free(Entry *x) {
        cn_write_expectation_clear(&x->e);
        free(x->key);
        free(x);
}

CnWriteExpectations *cn_write_expectations_free(CnWriteExpectations *s) {
        if (!s)
                return NULL;
        while (s->entries) {
                Entry *x = s->entries;

                s->entries = x->next;
                entry_free(x);
        }
        free(s);
        return NULL;
}

CnWriteExpectation *cn_write_expectations_get(CnWriteExpectations *s, const char *key, bool create) {
        Entry *x;

        for (x = s->entries; x; x = x->next)
                if (streq(x->key, key))
                        return &x->e;
        if (!create)
                return NULL;
        x = calloc(1, sizeof(Entry));
        if (!x)
                return NULL;
        x->key = strdup(key);
        if (!x->key) {
                free(x);
                return NULL;
        }
        x->next = s->entries;
        s->entries = x;
        return &x->e;
}

bool cn_write_expectations_pending(CnWriteExpectations *s, const char *key, json_object *cached, usec_t timeout) {
        for (Entry **p = &s->entries; *p; p = &(*p)->next) {
                Entry *x = *p;

                if (!streq(x->key, key))
                        continue;
                if (cn_write_expectation_pending(&x->e, cached, timeout))
                        return true;
                *p = x->next;
                entry_free(x);
                return false;
        }
        return false;
}
