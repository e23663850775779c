/* SPDX-License-Identifier: Apache-2.0 */
/* machine-controller's MachineDeployment decisions: the template hash, the MachineSet of a
 * template, and the rolling update's steps under maxSurge and maxUnavailable. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "mc-machinedeployment.h"
#include "mc-machineset.h"
#include "string-util.h"
#include "tap.h"

static json_object *parse(const char *s) {
        json_object *o = NULL;

        assert(cn_json_parse(s, strlen(s), CN_JSON_MAX_SIZE, &o, NULL) == 0);
        return o;
}

#define MD(replicas, surge, unavail) \
        "{\"metadata\":{\"name\":\"md\",\"uid\":\"u-md\"},\"spec\":{\"replicas\":" replicas "," \
        "\"selector\":{\"matchLabels\":{\"foo\":\"bar\"}},\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":" \
        "{\"maxSurge\":" surge ",\"maxUnavailable\":" unavail "}},\"template\":{\"metadata\":{\"labels\":{\"foo\":\"bar\"}}," \
        "\"spec\":{\"providerSpec\":{\"value\":{\"cloudProvider\":\"hetzner\"}}}}}}"

static void test_validate(void) {
        static const struct {
                const char *spec;
                bool ok;
                const char *name;
        } cases[] = {
                { "{}", true, "nothing set" },
                { "{\"strategy\":{\"type\":\"RollingUpdate\"},\"minReadySeconds\":30,\"revisionHistoryLimit\":0}", true,
                  "RollingUpdate, minReadySeconds, revisionHistoryLimit 0" },
                { "{\"strategy\":{\"type\":\"Recreate\"}}", false, "Recreate: machine-controller has none" },
                { "{\"minReadySeconds\":-1}", false, "a negative minReadySeconds" },
                { "{\"minReadySeconds\":\"10\"}", false, "minReadySeconds as a string" },
                { "{\"revisionHistoryLimit\":-2}", false, "a negative revisionHistoryLimit" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text = NULL, *reason = NULL;
                _cleanup_json_ json_object *md = NULL;

                assert(asprintf(&text, "{\"spec\":%s}", cases[i].spec) > 0);
                md = parse(text);
                TAP_EQ_INT(mc_deployment_validate(md, &reason), cases[i].ok ? 0 : -EINVAL, cases[i].name);
                TAP_OK(cases[i].ok == !reason, "%s: a reason exactly when refused", cases[i].name);
        }
        {
                _cleanup_json_ json_object *md = parse("{\"spec\":{\"strategy\":{\"type\":\"Recreate\"}}}");
                _cleanup_free_ char *reason = NULL;

                (void) mc_deployment_validate(md, &reason);
                TAP_OK(reason && strstr(reason, "RollingUpdate"), "the reason names the one strategy there is");
        }
}

static void test_cleanup(void) {
        _cleanup_json_ json_object *dflt = parse("{\"spec\":{}}"), *two = parse("{\"spec\":{\"revisionHistoryLimit\":2}}");
        _cleanup_json_ json_object *none = parse("{\"spec\":{\"revisionHistoryLimit\":0}}");
        /* creation order: a (oldest), b, c, then the current set */
        McSetView v[4] = {
                { .name = "b", .revision = 2, .observed = true, .created = 200 },
                { .name = "a", .revision = 1, .observed = true, .created = 100 },
                { .name = "cur", .current = true, .replicas = 3, .status_replicas = 3, .observed = true, .created = 400 },
                { .name = "c", .revision = 3, .observed = true, .created = 300 },
        };
        bool del[4];

        TAP_EQ_INT(mc_deployment_history_limit(dflt), 1, "revisionHistoryLimit defaults to 1 (machine-controller's)");
        mc_deployment_cleanup(dflt, true, v, 4, del);
        TAP_OK(del[1] && del[0] && !del[3] && !del[2], "limit 1: the two oldest old sets go, the newest old one stays");
        mc_deployment_cleanup(two, true, v, 4, del);
        TAP_OK(del[1] && !del[0] && !del[3] && !del[2], "limit 2: the oldest goes");
        mc_deployment_cleanup(none, true, v, 4, del);
        TAP_OK(del[0] && del[1] && del[3] && !del[2], "limit 0: every old set, never the current one");
        mc_deployment_cleanup(none, false, v, 4, del);
        TAP_OK(!del[0] && !del[1] && !del[3], "nothing while the rollout is not complete");
        v[1].status_replicas = 1;
        v[0].observed = false;
        mc_deployment_cleanup(dflt, true, v, 4, del);
        TAP_OK(!del[1] && !del[0] && !del[3], "a set that still has Machines, or whose change is not observed, stays");
}

int main(void) {
        _cleanup_json_ json_object *md = parse(MD("3", "1", "0")), *md2 = parse(MD("3", "1", "0")), *set = NULL;
        _cleanup_json_ json_object *pct = parse(MD("4", "\"25%\"", "\"25%\"")), *zero = parse(MD("2", "0", "0"));
        _cleanup_json_ json_object *bad = parse(MD("2", "\"x%\"", "0"));
        char h1[11], h2[11];
        int64_t plan[2];

        TAP_EQ_INT(mc_template_hash(md, h1), 0, "hash");
        TAP_EQ_INT(strlen(h1), 10, "ten hex digits");
        json_object_object_add(cn_json_get(md2, "spec", "template", "metadata", "labels", NULL), "tier",
                               json_object_new_string("w"));
        TAP_EQ_INT(mc_template_hash(md2, h2), 0, "hash of another template");
        TAP_OK(!streq(h1, h2), "differs when the template does");

        TAP_EQ_INT(mc_deployment_new_set(md, h1, 3, &set), 0, "the template's MachineSet");
        TAP_OK(cn_startswith(cn_json_string(set, "metadata", "name", NULL), "md-"), "named <deployment>-<hash>");
        TAP_EQ_STR(cn_json_string(set, "spec", "selector", "matchLabels", MC_LABEL_TEMPLATE_HASH, NULL), h1,
                   "its selector carries the hash");
        TAP_EQ_INT(mc_selector_matches(cn_json_get(set, "spec", "selector", NULL),
                                       cn_json_get(set, "spec", "template", "metadata", "labels", NULL)), 1,
                   "and its template's labels match it");
        TAP_EQ_STR(cn_json_string(set, "metadata", "annotations", MC_ANNOTATION_REVISION, NULL), "3", "revision");
        TAP_OK(mc_owned_by(set, "MachineDeployment", "u-md"), "owned by the deployment");
        TAP_OK(!cn_json_get(set, "spec", "minReadySeconds", NULL), "no minReadySeconds when the deployment has none");
        {
                _cleanup_json_ json_object *slow = parse(MD("3", "1", "0")), *set2 = NULL;
                int64_t v = -1;

                json_object_object_add(cn_json_get(slow, "spec", NULL), "minReadySeconds", json_object_new_int(30));
                TAP_EQ_INT(mc_deployment_new_set(slow, h1, 1, &set2), 0, "a set of a deployment with minReadySeconds");
                TAP_EQ_INT(mc_min_ready_seconds(set2, &v), 0, "its minReadySeconds");
                TAP_EQ_INT(v, 30, "is the deployment's");
        }

        /* replicas 3, surge 1, unavailable 0: old 3 (3 available), new 0 */
        {
                McSetView v[2] = { { .name = "old", .replicas = 3, .available = 3 },
                                   { .name = "new", .current = true, .replicas = 0 } };

                TAP_EQ_INT(mc_deployment_plan(md, v, 2, plan), 0, "plan");
                TAP_OK(plan[0] == 3 && plan[1] == 1, "surge 1: the new set grows by one, the old one stays");
                v[1].replicas = 1;
                TAP_EQ_INT(mc_deployment_plan(md, v, 2, plan), 0, "plan");
                TAP_OK(plan[0] == 3 && plan[1] == 1, "nothing more until the new Machine is available");
                v[1].available = 1;
                TAP_EQ_INT(mc_deployment_plan(md, v, 2, plan), 0, "plan");
                TAP_OK(plan[0] == 2 && plan[1] == 1, "then the old set shrinks by one");
                v[0].replicas = 2, v[0].available = 2;
                TAP_EQ_INT(mc_deployment_plan(md, v, 2, plan), 0, "plan");
                TAP_OK(plan[0] == 2 && plan[1] == 2, "and the new one grows again");
        }
        {
                McSetView v[2] = { { .name = "old", .replicas = 4, .available = 4 },
                                   { .name = "new", .current = true, .replicas = 0 } };

                TAP_EQ_INT(mc_deployment_plan(pct, v, 2, plan), 0, "percentages");
                TAP_OK(plan[1] == 1 && plan[0] == 3, "25%% of 4: one more and one less at once");
        }
        {
                McSetView v[2] = { { .name = "old", .replicas = 2, .available = 0 },
                                   { .name = "new", .current = true, .replicas = 0 } };

                TAP_EQ_INT(mc_deployment_plan(zero, v, 2, plan), 0, "surge 0 and unavailable 0");
                TAP_OK(plan[0] == 0, "unavailable old Machines go at once");
        }
        {
                McSetView v[1] = { { .name = "new", .current = true, .replicas = 0 } };

                TAP_EQ_INT(mc_deployment_plan(bad, v, 1, plan), -EINVAL, "a bad percentage is refused");
                v[0].current = false;
                TAP_EQ_INT(mc_deployment_plan(md, v, 1, plan), -ENOENT, "no set of the template: -ENOENT");
        }
        test_validate();
        test_cleanup();
        return tap_done();
}
