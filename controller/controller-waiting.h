/* SPDX-License-Identifier: Apache-2.0 */
/* What `cloudnode-controller run` waits for, said at the default verbosity once per episode: when
 * a thing goes missing (a CRD or API not served, a ConfigMap absent, no cloud provider), one line
 * that names it and what to apply; nothing more while it stays missing, however often the
 * controller retries; again only after it was found and then lost again. */
#pragma once

#include "kube-informer.h"
#include "macro.h"

typedef struct CnWaiting {
        char *said; /* the line of the current episode, NULL when nothing is missing */
} CnWaiting;

/* Logs the line at level unless this episode already said exactly it. */
void cn_waiting_say(CnWaiting *w, int level, const char *fmt, ...) _printf_(3, 4);
/* The episode is over (the thing was found): logs found_line (if any) when something was said. */
void cn_waiting_over(CnWaiting *w, const char *found_line);
void cn_waiting_done(CnWaiting *w);

/* Says, for this informer's resource, when the API server stops or starts serving it, and what
 * installs it (the manifest, kustomization or clusterctl step). */
int cn_waiting_watch_api(CnKubeInformer *i);
