/* SPDX-License-Identifier: Apache-2.0 */
/* Once-per-episode lines about what the controller waits for. See controller-waiting.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller-waiting.h"
#include "log.h"
#include "string-util.h"

void cn_waiting_say(CnWaiting *w, int level, const char *fmt, ...) {
        _cleanup_free_ char *line = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&line, fmt, ap);
        va_end(ap);
        if (r < 0) {
                log_oom();
                return;
        }
        if (w->said && streq(w->said, line))
                return;
        cn_log_full(level, 0, NULL, "%s", line);
        free(w->said);
        w->said = TAKE_PTR(line);
}

void cn_waiting_over(CnWaiting *w, const char *found_line) {
        if (!w->said)
                return;
        if (found_line)
                log_info("%s", found_line);
        free(w->said);
        w->said = NULL;
}

void cn_waiting_done(CnWaiting *w) {
        free(w->said);
        w->said = NULL;
}

/* What installs an API group, for the line that says it is missing. */
static const char *install_hint(const char *group) {
        static const struct {
                const char *group, *hint;
        } table[] = {
                { "operator.cloudnode.io",
                  "apply the CloudnodeOperator CRD: kubectl apply -k manifests/crds/operator (part of manifests/base)" },
                { "infrastructure.cluster.x-k8s.io",
                  "install cloudnode's Cluster API provider: clusterctl init --infrastructure cloudnode "
                  "(infrastructure-components.yaml), or kubectl apply -k manifests/crds/capi" },
                { "cluster.x-k8s.io", "install Cluster API's core provider: clusterctl init" },
                { "config.openshift.io", "an OpenShift cluster serves it; elsewhere use manifests/base" },
                { "admissionregistration.k8s.io", "Kubernetes serves it from 1.30 on" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(group, table[i].group))
                        return table[i].hint;
        return "install its CRD";
}

static void on_served(CnKubeInformer *i, bool served, void *userdata) {
        const CnKubeResource *r = cn_kube_informer_get_resource(i);
        const char *group = strempty(r->group);

        if (served)
                log_info("%s%s%s %s is served now, going on", r->resource, isempty(group) ? "" : ".", group,
                         r->version);
        else
                log_notice("Waiting for %s%s%s %s, which the API server does not serve: %s", r->resource,
                           isempty(group) ? "" : ".", group, r->version, install_hint(group));
}

int cn_waiting_watch_api(CnKubeInformer *i) {
        return cn_kube_informer_add_handlers(i, &(CnKubeInformerHandlers) { .served = on_served }, NULL, NULL);
}
