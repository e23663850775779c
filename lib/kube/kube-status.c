/* SPDX-License-Identifier: Apache-2.0 */
/* API errors: the HTTP status plus the metav1.Status in the body become one negative errno (the
 * table in kube-client.h) and the server's reason and message. The status code decides; the
 * reason only refines where one code means several things (409 AlreadyExists vs Conflict). */
#include "kube-client.h"

static int errno_from_code(long code, const char *reason) {
        switch (code) {
        case 400:
        case 422:
                return -CN_KUBE_EBADREQUEST;
        case 401:
                return -CN_KUBE_EUNAUTHORIZED;
        case 403:
                return -CN_KUBE_EFORBIDDEN;
        case 404:
                return -CN_KUBE_ENOTFOUND;
        case 405:
                return -CN_KUBE_ENOTALLOWED;
        case 406:
        case 415:
                return -CN_KUBE_EUNSUPPORTEDMEDIA;
        case 409:
                return reason && streq(reason, "AlreadyExists") ? -CN_KUBE_EALREADYEXISTS : -CN_KUBE_ECONFLICT;
        case 410:
                return -CN_KUBE_EGONE;
        case 413:
                return -CN_KUBE_ETOOLARGE;
        case 429:
                return -CN_KUBE_ETOOMANYREQUESTS;
        case 502:
        case 503:
                return -CN_KUBE_EUNAVAILABLE;
        case 504:
                return -CN_KUBE_ETIMEOUT;
        default:
                if (reason && streq(reason, "Timeout"))
                        return -CN_KUBE_ETIMEOUT;
                if (code >= 500)
                        return -CN_KUBE_EINTERNAL;
                return -CN_KUBE_EPROTO;
        }
}

static const char *status_string(json_object *status, const char *key) {
        json_object *v;

        if (!status || !json_object_object_get_ex(status, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

int cn_kube_status_object_to_errno(long http_status, json_object *status, const char **ret_reason,
                                   const char **ret_message) {
        const char *reason = NULL, *message = NULL;
        json_object *v;

        if (status && json_object_is_type(status, json_type_object)) {
                reason = status_string(status, "reason");
                message = status_string(status, "message");
                /* Watch ERROR events carry no HTTP status of their own. */
                if (http_status <= 0 && json_object_object_get_ex(status, "code", &v) &&
                    json_object_is_type(v, json_type_int))
                        http_status = (long) json_object_get_int64(v);
        }
        if (ret_reason)
                *ret_reason = reason;
        if (ret_message)
                *ret_message = message;
        return errno_from_code(http_status, reason);
}

int cn_kube_status_to_errno(long http_status, const char *body, size_t size, char **ret_reason,
                            char **ret_message) {
        _cleanup_json_ json_object *status = NULL;
        const char *reason = NULL, *message = NULL;
        _cleanup_free_ char *generic = NULL;
        int r;

        if (body && size > 0 && size < INT32_MAX) {
                json_tokener *tok = json_tokener_new();

                if (!tok)
                        return -ENOMEM;
                status = json_tokener_parse_ex(tok, body, (int) size);
                if (json_tokener_get_error(tok) != json_tokener_success) {
                        json_object_put(status);
                        status = NULL;
                }
                json_tokener_free(tok);
        }

        r = cn_kube_status_object_to_errno(http_status, status, &reason, &message);
        if (!message) {
                if (asprintf(&generic, "HTTP status %ld", http_status) < 0)
                        return -ENOMEM;
                message = generic;
        }
        if (ret_reason) {
                *ret_reason = NULL;
                if (reason && !(*ret_reason = strdup(reason)))
                        return -ENOMEM;
        }
        if (ret_message && !(*ret_message = strdup(message))) {
                if (ret_reason) {
                        free(*ret_reason);
                        *ret_reason = NULL;
                }
                return -ENOMEM;
        }
        return r;
}
