/* SPDX-License-Identifier: Apache-2.0 */
/* Write expectations: the cache is "older than my own write" until it shows the write's
 * resourceVersion (or, without one, until it moves off the version the write was based on); a
 * write that changed nothing leaves nothing to wait for; a timeout ends the wait; expectations by
 * key are dropped once met. */
#include "kube-expectation.h"
#include "tap.h"

static json_object *obj(const char *rv) {
        json_object *o = json_object_new_object(), *md = json_object_new_object();

        json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
        json_object_object_add(o, "metadata", md);
        return o;
}

int main(void) {
        json_object *v10 = obj("10"), *v11 = obj("11"), *v12 = obj("12"), *v13 = obj("13");
        CnWriteExpectations *set = NULL;
        CnWriteExpectation e = {}, *k;

        TAP_OK(!cn_write_expectation_pending(&e, v10, 0), "no write: nothing pending");

        TAP_OK(cn_write_expectation_begin(&e, v10) == 0, "write based on 10");
        TAP_OK(cn_write_expectation_pending(&e, v10, 0), "before the answer, the cache at 10 is stale");
        TAP_OK(cn_write_expectation_written(&e, v12), "the write made 12: wait for its event");
        TAP_OK(cn_write_expectation_pending(&e, v11, 0), "the cache at 11 is older than our write");
        TAP_OK(!cn_write_expectation_pending(&e, v12, 0), "the cache at 12 shows it");
        TAP_OK(!e.set, "a met expectation is cleared");

        TAP_OK(cn_write_expectation_begin(&e, v10) == 0 && cn_write_expectation_written(&e, v12) &&
               cn_write_expectation_begin(&e, v12) == 0 && cn_write_expectation_written(&e, v13),
               "a second write while the first is unseen");
        TAP_OK(cn_write_expectation_pending(&e, v12, 0), "waits for the newest write");
        TAP_OK(!cn_write_expectation_pending(&e, v13, 0), "until the cache has it");

        TAP_OK(cn_write_expectation_begin(&e, v10) == 0 && !cn_write_expectation_written(&e, v10),
               "a write that changed nothing (same resourceVersion) leaves nothing to wait for");
        TAP_OK(!cn_write_expectation_pending(&e, v10, 0), "so the cache at 10 is current");

        TAP_OK(cn_write_expectation_written(&e, v12), "a write without a known base");
        TAP_OK(!cn_write_expectation_pending(&e, NULL, 0), "an object gone from the cache is not waited for");

        TAP_OK(cn_write_expectation_begin(&e, NULL) == 0 && cn_write_expectation_written(&e, v12),
               "a create (no object before)");
        TAP_OK(cn_write_expectation_pending(&e, NULL, 0), "the cache without the object is stale");
        TAP_OK(cn_write_expectation_pending(&e, v11, 0), "an older version is stale");
        e.since -= 2 * USEC_PER_SEC;
        TAP_OK(!cn_write_expectation_pending(&e, NULL, USEC_PER_SEC), "the wait ends at the timeout");

        TAP_OK(cn_write_expectation_begin_at(&e, "10") == 0, "based on a resourceVersion string");
        TAP_OK(cn_write_expectation_pending(&e, v10, 0) && !cn_write_expectation_pending(&e, v11, 0),
               "without the write's answer, any other version is newer");

        TAP_OK(cn_write_expectations_new(&set) == 0, "a set by key");
        k = cn_write_expectations_get(set, "cm/ns/a", true);
        TAP_OK(k && cn_write_expectation_begin(k, v10) == 0 && cn_write_expectation_written(k, v11), "expect a");
        TAP_OK(cn_write_expectations_pending(set, "cm/ns/a", v10, 0), "a is pending");
        TAP_OK(!cn_write_expectations_pending(set, "cm/ns/b", v10, 0), "b has no expectation");
        TAP_OK(!cn_write_expectations_pending(set, "cm/ns/a", v11, 0), "a is met");
        TAP_OK(!cn_write_expectations_get(set, "cm/ns/a", false), "and dropped");
        cn_write_expectations_free(set);

        json_object_put(v10);
        json_object_put(v11);
        json_object_put(v12);
        json_object_put(v13);
        return tap_done();
}
