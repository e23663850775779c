/* SPDX-License-Identifier: Apache-2.0 */
/* Plain-HTTP server for /healthz, /readyz and /metrics, on the daemon's sd-event loop with no
 * threads: HTTP/1.1 with keep-alive, request heads up to 8 KB, no request bodies, 10 s timeouts,
 * 64 connections (16 from one address). Only GET and HEAD are served (405 otherwise); unknown
 * paths get 404. Handlers are registered by exact path; a query string is not part of it. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "buf.h"
#include "time-util.h"

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
/* How long a connection may wait for a request's head or for its answer to be taken (10 s). */
void cn_httpd_set_timeout(CnHttpd *d, usec_t timeout);

int cn_httpd_add_handler(CnHttpd *d, const char *path, CnHttpdHandler handler, void *userdata);
/* Serves the registry at /metrics. */
int cn_httpd_add_metrics(CnHttpd *d, CnMetrics *m);
