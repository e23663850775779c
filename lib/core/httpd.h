/* SPDX-License-Identifier: Apache-2.0 */
/* Plain-HTTP server for /healthz, /readyz and /metrics: libmicrohttpd in epoll mode, its epoll fd
 * an sd-event I/O source and its timeout an sd-event timer, so it runs on the daemon's loop with
 * no threads. Only GET and HEAD are served; unknown paths get 404. Handlers are registered by
 * exact path. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "buf.h"

typedef struct CnHttpd CnHttpd;
typedef struct CnMetrics CnMetrics;

/* Fills body and returns an HTTP status (200, 503...); a negative errno gives 500.
 * *content_type defaults to "text/plain; charset=utf-8". */
typedef int (*CnHttpdHandler)(CnHttpd *d, const char *path, CnBuf *body, const char **content_type,
                              void *userdata);

/* address: numeric IPv4/IPv6 ("127.0.0.1", "0.0.0.0", "::"); port 0 picks a free one. */
int cn_httpd_new(sd_event *event, const char *address, uint16_t port, CnHttpd **ret);
CnHttpd *cn_httpd_free(CnHttpd *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnHttpd *, cn_httpd_free);
uint16_t cn_httpd_get_port(CnHttpd *d);

int cn_httpd_add_handler(CnHttpd *d, const char *path, CnHttpdHandler handler, void *userdata);
/* Serves the registry at /metrics. */
int cn_httpd_add_metrics(CnHttpd *d, CnMetrics *m);
