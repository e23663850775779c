/* SPDX-License-Identifier: Apache-2.0 */
/* For the unit tests of HTTP servers: one request to 127.0.0.1:port through lib/core/http.h,
 * run to completion on the client's loop. */
#pragma once

#include "http.h"

static inline long get(CnHttp *h, uint16_t port, const char *method, const char *path, char **ret_body,
                char **ret_content_type) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *r = NULL;
        _cleanup_free_ char *u = NULL;
        const char *ct;

        if (asprintf(&u, "http://127.0.0.1:%u%s", port, path) < 0 || cn_http_request_new(h, method, u, &r) < 0)
                return -1;
        cn_http_request_set_no_proxy(r);
        cn_http_request_set_timeout(r, 5 * USEC_PER_SEC);
        if (cn_http_request_run(r) < 0)
                return -1;
        if (ret_body)
                *ret_body = strdup(cn_http_request_get_body(r, NULL));
        ct = cn_http_request_get_header(r, "Content-Type");
        if (ret_content_type)
                *ret_content_type = ct ? strdup(ct) : NULL;
        return cn_http_request_get_status(r);
}

