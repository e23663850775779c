/* SPDX-License-Identifier: Apache-2.0 */
/* Write expectations: after a write, an informer cache still holds the object as it was until the
 * write's watch event arrives. Acting on that older copy would repeat the write (or a cloud call
 * decided from it), so a controller remembers what its write was based on and what it produced,
 * and skips the object while the cache is older than its own write. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "macro.h"
#include "time-util.h"

typedef struct CnWriteExpectation {
        bool set;
        char *based_on;    /* resourceVersion the write was computed from ("": no object); NULL: unknown */
        uint64_t written;  /* highest resourceVersion the writes returned; 0: unknown */
        usec_t since;      /* CLOCK_MONOTONIC, when the expectation began */
} CnWriteExpectation;

/* A write computed from `live` (NULL: the object did not exist) is being sent. The first write
 * of a series sets the base; later ones keep it. */
int cn_write_expectation_begin(CnWriteExpectation *e, json_object *live);
/* The same with the resourceVersion the write was based on ("": no object). */
int cn_write_expectation_begin_at(CnWriteExpectation *e, const char *resource_version);
/* The write returned `object`. Returns true when its watch event is to be waited for; false when
 * there is nothing to wait for (no resourceVersion, or the server found nothing to change, so no
 * event will come), and the expectation is cleared. */
bool cn_write_expectation_written(CnWriteExpectation *e, json_object *object);
/* Whether `cached` (NULL: not in the cache) predates our write. timeout (0: none) bounds the wait
 * for an event that never comes. Clears the expectation once it is met or timed out. */
bool cn_write_expectation_pending(CnWriteExpectation *e, json_object *cached, usec_t timeout);
void cn_write_expectation_clear(CnWriteExpectation *e);

/* Expectations by object key, for a controller that writes many objects in one pass. */
typedef struct CnWriteExpectations CnWriteExpectations;

int cn_write_expectations_new(CnWriteExpectations **ret);
CnWriteExpectations *cn_write_expectations_free(CnWriteExpectations *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnWriteExpectations *, cn_write_expectations_free);
/* The expectation of key; with create a cleared one when there is none (NULL only on OOM). */
CnWriteExpectation *cn_write_expectations_get(CnWriteExpectations *s, const char *key, bool create);
/* cn_write_expectation_pending() of key's expectation; false when there is none. A met one is
 * dropped. */
bool cn_write_expectations_pending(CnWriteExpectations *s, const char *key, json_object *cached, usec_t timeout);
