/* SPDX-License-Identifier: Apache-2.0 */
/* The Cluster API infrastructure machine contract decisions of cloudnode-controller. */
#include <errno.h>
#include <string.h>

#include "json-util.h"
#include "machine-reconcile.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

#define OWNED "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"name\":\"m1\"}]"
#define FIN "\"finalizers\":[\"" CN_MACHINE_FINALIZER "\"]"

int main(void) {
        _cleanup_json_ json_object *bare = parse("{\"metadata\":{\"name\":\"x\"}}");
        _cleanup_json_ json_object *fin = parse("{\"metadata\":{\"name\":\"x\"," FIN "}}");
        _cleanup_json_ json_object *owned = parse("{\"metadata\":{\"name\":\"x\"," FIN "," OWNED "}}");
        _cleanup_json_ json_object *created = parse("{\"metadata\":{\"name\":\"x\"," FIN "," OWNED "},"
                                                    "\"status\":{\"instanceID\":\"42\"}}");
        _cleanup_json_ json_object *ready = parse("{\"metadata\":{\"name\":\"x\",\"uid\":\"u1\"," FIN "," OWNED "},"
                                                  "\"spec\":{\"providerID\":\"hcloud://42\"},"
                                                  "\"status\":{\"instanceID\":\"42\",\"ready\":true,"
                                                  "\"instanceLabelUID\":\"u1\","
                                                  "\"initialization\":{\"provisioned\":true}}}");
        _cleanup_json_ json_object *failed = parse("{\"metadata\":{\"name\":\"x\"," FIN "," OWNED "},"
                                                   "\"status\":{\"failureReason\":\"InvalidConfiguration\"}}");
        _cleanup_json_ json_object *deleting = parse("{\"metadata\":{\"name\":\"x\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\","
                                                     FIN "}}");
        _cleanup_json_ json_object *deleted = parse("{\"metadata\":{\"name\":\"x\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}");
        _cleanup_json_ json_object *paused_anno = parse("{\"metadata\":{\"name\":\"x\",\"annotations\":{\"cluster.x-k8s.io/paused\":\"\"}}}");
        _cleanup_json_ json_object *machine = parse("{\"spec\":{\"bootstrap\":{}}}");
        _cleanup_json_ json_object *machine_data = parse("{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"b\"}}}");
        _cleanup_json_ json_object *cluster = parse("{\"spec\":{},\"status\":{}}");
        _cleanup_json_ json_object *cluster_ready = parse("{\"spec\":{},\"status\":{\"initialization\":{\"infrastructureProvisioned\":true}}}");
        _cleanup_json_ json_object *cluster_ready_v1 = parse("{\"spec\":{},\"status\":{\"infrastructureReady\":true}}");
        _cleanup_json_ json_object *cluster_paused = parse("{\"spec\":{\"paused\":true},\"status\":{\"infrastructureReady\":true}}");
        _cleanup_json_ json_object *none = parse("[]"), *one = parse("[{}]"), *two = parse("[{},{}]");
        _cleanup_json_ json_object *patch = NULL, *addrs = parse("[{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"}]");

        TAP_EQ_INT(cn_machine_next_step(owned, machine_data, cluster_paused, false), CN_MACHINE_PAUSED, "paused Cluster");
        TAP_EQ_INT(cn_machine_next_step(paused_anno, machine_data, cluster_ready, false), CN_MACHINE_PAUSED,
                   "paused annotation");
        TAP_EQ_INT(cn_machine_next_step(bare, NULL, NULL, false), CN_MACHINE_ADD_FINALIZER, "finalizer first");
        TAP_EQ_INT(cn_machine_next_step(fin, NULL, NULL, false), CN_MACHINE_WAIT_OWNER, "waits for the owner Machine");
        TAP_EQ_INT(cn_machine_next_step(owned, machine_data, NULL, false), CN_MACHINE_WAIT_INFRA, "waits for the Cluster");
        TAP_EQ_INT(cn_machine_next_step(owned, machine_data, cluster, false), CN_MACHINE_WAIT_INFRA,
                   "waits for the Cluster's infrastructure");
        TAP_EQ_INT(cn_machine_next_step(owned, machine, cluster_ready, false), CN_MACHINE_WAIT_BOOTSTRAP,
                   "waits for bootstrap data");
        TAP_EQ_INT(cn_machine_next_step(owned, machine_data, cluster_ready, false), CN_MACHINE_LOOKUP_OR_CREATE,
                   "creates once everything is there (v1beta2 Cluster)");
        TAP_EQ_INT(cn_machine_next_step(owned, machine_data, cluster_ready_v1, false), CN_MACHINE_LOOKUP_OR_CREATE,
                   "v1beta1 infrastructureReady is understood too");
        TAP_EQ_INT(cn_machine_next_step(created, machine, cluster_ready, false), CN_MACHINE_POLL,
                   "recorded instance is polled, bootstrap data no longer needed");
        TAP_EQ_INT(cn_machine_next_step(ready, machine_data, cluster_ready, false), CN_MACHINE_READY, "ready is final");
        TAP_EQ_INT(cn_machine_next_step(failed, machine_data, cluster_ready, false), CN_MACHINE_FAILED,
                   "terminal failure is not retried");
        TAP_EQ_INT(cn_machine_next_step(deleting, NULL, NULL, false), CN_MACHINE_CLEANUP,
                   "deletion proceeds without Machine and Cluster");
        TAP_EQ_INT(cn_machine_next_step(deleting, NULL, NULL, true), CN_MACHINE_REMOVE_FINALIZER,
                   "finalizer removed once the cloud confirms");
        TAP_EQ_INT(cn_machine_next_step(deleted, NULL, NULL, false), CN_MACHINE_GONE, "without our finalizer: nothing");

        TAP_EQ_STR(cn_machine_owner_name(owned), "m1", "owner Machine name");
        TAP_OK(!cn_machine_owner_name(fin), "no owner");
        TAP_EQ_INT(cn_machine_match(none), CN_MACHINE_MATCH_NONE, "no instance: create");
        TAP_EQ_INT(cn_machine_match(one), CN_MACHINE_MATCH_ONE, "one instance: adopt");
        TAP_EQ_INT(cn_machine_match(two), CN_MACHINE_MATCH_MANY, "several: refuse");

        TAP_EQ_INT(cn_machine_status_patch(NULL, "2026-11-24T10:00:00Z", "42", "running", addrs, true, "Provisioned", NULL,
                                           &patch),
                   0, "status patch");
        TAP_OK(cn_json_get(patch, "status", "ready", NULL) && json_object_get_boolean(cn_json_get(patch, "status", "ready", NULL)),
               "v1beta1 status.ready");
        TAP_OK(json_object_get_boolean(cn_json_get(patch, "status", "initialization", "provisioned", NULL)),
               "v1beta2 status.initialization.provisioned");
        TAP_EQ_STR(cn_json_string(patch, "status", "instanceID", NULL), "42", "instance id recorded");
        TAP_OK(cn_json_equal(cn_json_get(patch, "status", "addresses", NULL), addrs), "addresses");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(cn_json_get(patch, "status", "conditions", NULL), 0), "reason",
                                  NULL), "Provisioned", "Ready condition reason");
        TAP_EQ_STR(cn_json_string(json_object_array_get_idx(cn_json_get(patch, "status", "conditions", NULL), 0),
                                  "lastTransitionTime", NULL),
                   "2026-11-24T10:00:00Z", "a new Ready condition has its transition time");
        {
                _cleanup_json_ json_object *live = parse(
                        "[{\"type\":\"Paused\",\"status\":\"False\",\"reason\":\"NotPaused\",\"message\":\"\","
                        "\"lastTransitionTime\":\"2026-11-24T09:00:00Z\"},"
                        "{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"InstanceProvisioning\","
                        "\"message\":\"\",\"lastTransitionTime\":\"2026-11-24T09:30:00Z\"}]");
                _cleanup_json_ json_object *same = NULL, *flipped = NULL;
                json_object *c;

                TAP_EQ_INT(cn_machine_status_patch(live, "2026-11-24T10:00:00Z", NULL, NULL, NULL, false, "WaitingForBootstrapData",
                                                   NULL, &same),
                           0, "status patch over live conditions");
                c = cn_json_get(same, "status", "conditions", NULL);
                TAP_EQ_INT(c ? (int) json_object_array_length(c) : -1, 2, "the other conditions are kept");
                for (size_t i = 0; c && i < json_object_array_length(c); i++)
                        if (streq(strempty(cn_json_string(json_object_array_get_idx(c, i), "type", NULL)), "Ready")) {
                                TAP_EQ_STR(cn_json_string(json_object_array_get_idx(c, i), "lastTransitionTime", NULL),
                                           "2026-11-24T09:30:00Z", "a new reason with the same status keeps the time");
                                TAP_EQ_STR(cn_json_string(json_object_array_get_idx(c, i), "reason", NULL),
                                           "WaitingForBootstrapData", "the reason is the new one");
                        }
                TAP_EQ_INT(cn_machine_status_patch(live, "2026-11-24T10:00:00Z", "42", "running", addrs, true,
                                                   "InstanceRunning", NULL, &flipped),
                           0, "status patch to Ready");
                c = cn_json_get(flipped, "status", "conditions", NULL);
                for (size_t i = 0; c && i < json_object_array_length(c); i++)
                        if (streq(strempty(cn_json_string(json_object_array_get_idx(c, i), "type", NULL)), "Ready"))
                                TAP_EQ_STR(cn_json_string(json_object_array_get_idx(c, i), "lastTransitionTime", NULL),
                                           "2026-11-24T10:00:00Z", "a changed status takes the time now");
        }

        {
                _cleanup_json_ json_object *live = parse(
                        "{\"metadata\":{\"name\":\"x\"},\"status\":{\"ready\":true,\"instanceID\":\"42\","
                        "\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.2\"}]}}");
                _cleanup_json_ json_object *same = parse(
                        "{\"status\":{\"ready\":true,\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"203.0.113.2\"}]}}");
                _cleanup_json_ json_object *flip = parse("{\"status\":{\"ready\":false}}");
                _cleanup_json_ json_object *shorter = parse("{\"status\":{\"addresses\":[]}}");
                _cleanup_json_ json_object *added = parse("{\"spec\":{\"providerID\":\"hcloud://42\"}}");
                _cleanup_json_ json_object *del_absent = parse("{\"status\":{\"failureReason\":null}}");
                _cleanup_json_ json_object *del_present = parse("{\"status\":{\"instanceID\":null}}");

                TAP_OK(!cn_capi_patch_changes(live, same), "a patch of values already there changes nothing");
                TAP_OK(cn_capi_patch_changes(live, flip), "a changed value is a change");
                TAP_OK(cn_capi_patch_changes(live, shorter), "a list is replaced as a whole");
                TAP_OK(cn_capi_patch_changes(live, added), "a new member is a change");
                TAP_OK(!cn_capi_patch_changes(live, del_absent), "deleting an absent member changes nothing");
                TAP_OK(cn_capi_patch_changes(live, del_present), "deleting a present member is a change");
        }
        {
                _cleanup_json_ json_object *asks = parse("{\"spec\":{\"failureDomain\":\"nbg1\"}}");
                _cleanup_json_ json_object *lists = parse(
                        "{\"status\":{\"failureDomains\":[{\"name\":\"fsn1\"},{\"name\":\"nbg1\",\"controlPlane\":true}]}}");
                _cleanup_json_ json_object *other = parse("{\"status\":{\"failureDomains\":[{\"name\":\"fsn1\"}]}}");
                _cleanup_json_ json_object *spec = parse("{\"serverType\":\"cx22\",\"location\":\"fsn1\"}");
                _cleanup_json_ json_object *placed = NULL;
                const char *fd = "unset";

                TAP_EQ_INT(cn_machine_failure_domain(machine_data, lists, &fd), 0, "a Machine without a failure domain");
                TAP_OK(!fd, "asks for no placement");
                TAP_EQ_INT(cn_machine_failure_domain(asks, lists, &fd), 0, "a failure domain the Cluster lists");
                TAP_EQ_STR(fd, "nbg1", "is the placement");
                TAP_EQ_INT(cn_machine_failure_domain(asks, other, &fd), -ENOENT, "one the Cluster does not list is refused");
                TAP_EQ_INT(cn_machine_failure_domain(asks, cluster_ready, &fd), -ENOENT,
                           "and so is any when the Cluster lists none");
                TAP_EQ_INT(cn_machine_place(spec, "location", "nbg1", &placed), 0, "placed");
                TAP_EQ_STR(cn_json_string(placed, "location", NULL), "nbg1", "the failure domain wins over the template's");
                TAP_EQ_STR(cn_json_string(placed, "serverType", NULL), "cx22", "the rest of the spec is kept");
                TAP_EQ_STR(cn_json_string(spec, "location", NULL), "fsn1", "on a copy: the cached spec is untouched");
        }
        return tap_done();
}
