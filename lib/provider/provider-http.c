/* SPDX-License-Identifier: Apache-2.0 */
/* One JSON request of a provider call to a cloud API: headers and body out, the reply decoded
 * into a classified error (with the server's Retry-After, or Hetzner's RateLimit-Reset), the
 * request counted for the provider's metric. */
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "provider-internal.h"
#include "string-util.h"

static int status_to_errno(long status) {
        if (status >= 200 && status < 300)
                return 0;
        switch (status) {
        case 400:
        case 422:
                return -EINVAL;
        case 401:
        case 403:
                return -EACCES;
        case 404:
                return -ENOENT;
        case 409:
                return -EEXIST;
        default:
                return -EAGAIN; /* 429, 5xx and the unexpected: try again later */
        }
}

static int header_ull(CnHttpRequest *req, const char *name, unsigned long long *ret) {
        const char *v = cn_http_request_get_header(req, name);
        char *end;

        if (!v)
                return -ENOENT;
        errno = 0;
        *ret = strtoull(v, &end, 10);
        if (errno != 0 || *end || end == v)
                return -EINVAL;
        return 0;
}

/* Hetzner and DigitalOcean announce their rate-limit windows as RateLimit-Reset (UNIX seconds)
 * instead of Retry-After. Where the bucket refills evenly until the reset (refills_evenly), one
 * request's worth comes back every (reset - now) / (limit - remaining). */
static usec_t reply_retry_after(CnHttpRequest *req, bool refills_evenly) {
        unsigned long long t, limit, remaining;
        usec_t d = 0, now, left;

        if (cn_http_request_get_retry_after(req, &d) >= 0)
                return d;
        if (header_ull(req, "RateLimit-Reset", &t) < 0)
                return 0;
        /* Whole seconds: a reset that has just passed may still be this second on the server's
         * clock, so it means one second, not "no hint". */
        now = cn_now(CLOCK_REALTIME);
        left = t * USEC_PER_SEC > now ? t * USEC_PER_SEC - now : USEC_PER_SEC;
        if (refills_evenly && header_ull(req, "RateLimit-Limit", &limit) >= 0 &&
            header_ull(req, "RateLimit-Remaining", &remaining) >= 0 && limit > remaining)
                left = MAX(left / (limit - remaining), USEC_PER_SEC);
        return left;
}

static void count_request(CnProviderCall *c, int error) {
        if (!c->provider->counter || !c->operation)
                return;
        c->provider->counter(c->provider->ops->name, c->operation,
                             cn_provider_error_class_to_string(cn_provider_error_class(error)),
                             c->provider->counter_userdata);
}

static void on_http_done(CnHttpRequest *req, int error, void *userdata) {
        CnProviderCall *c = ASSERT_PTR(userdata);
        _cleanup_json_ json_object *body = NULL;
        _cleanup_free_ char *message_buf = NULL;
        CnProviderHttpReply reply = {};
        const char *data;
        size_t size = 0;

        c->http_pending = false;
        if (c->finished)
                return;
        reply.status = error < 0 ? 0 : cn_http_request_get_status(req);
        reply.error = error < 0 ? error : status_to_errno(reply.status);
        data = cn_http_request_get_body(req, &size);
        if (error >= 0 && size > 0) {
                int r = (c->body_parser ?: cn_json_parse)(data, size, PROVIDER_MAX_RESPONSE, &body, NULL);
                if (r < 0 && reply.error == 0)
                        reply.error = -EBADMSG;
        }
        if (error >= 0 && reply.error < 0 && reply.error != -EBADMSG && c->error_classifier)
                reply.error = c->error_classifier(reply.status, body, reply.error);
        if (reply.error < 0 && reply.error != -EBADMSG) {
                if (body && c->error_parser)
                        reply.message = c->error_parser(body);
                if (!reply.message) {
                        if (error < 0) {
                                if (asprintf(&message_buf, "request failed: %s", strerror(-error)) >= 0)
                                        reply.message = message_buf;
                        } else if (asprintf(&message_buf, "HTTP status %ld", reply.status) >= 0)
                                reply.message = message_buf;
                }
        } else if (reply.error == -EBADMSG)
                reply.message = "malformed response from the cloud API";
        if (reply.error == -EAGAIN)
                reply.retry_after = reply_retry_after(req, c->provider->ops->ratelimit_refills_evenly);
        reply.body = reply.error == 0 ? body : NULL;
        reply.error_body = reply.error < 0 ? body : NULL;
        reply.subject_token = cn_http_request_get_header(req, "X-Subject-Token");
        count_request(c, reply.error);
        log_debug("%s %s -> %ld (%s)", cn_http_request_get_method(req), cn_http_request_get_url(req), reply.status,
                  reply.error < 0 ? strerror(-reply.error) : "ok");

        /* Keep the call (and the request that holds this reply) alive across the callback: it
         * may start the next request on the same call, or finish it. */
        c->n_ref++;
        c->http_cb(c, &reply, c->http_userdata);
        cn_provider_call_unref(c);
}

int cn_provider_call_http(CnProviderCall *c, const char *method, const char *url, const CnProviderHttpOptions *o,
                          CnProviderHttpCallback cb, void *userdata) {
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *req = NULL;
        int r;

        assert(c);
        assert(url);
        assert(cb);
        r = cn_http_request_new(c->provider->http, method, url, &req);
        if (r < 0)
                return r;
        cn_http_request_set_timeout(req, PROVIDER_REQUEST_TIMEOUT);
        cn_http_request_set_max_response(req, PROVIDER_MAX_RESPONSE);
        r = cn_http_request_add_header(req, "Accept", "application/json");
        if (r < 0)
                return r;
        if (o && o->bearer_token && (r = cn_http_request_set_bearer_token(req, o->bearer_token)) < 0)
                return r;
        if (o && o->auth_token && (r = cn_http_request_add_header(req, "X-Auth-Token", o->auth_token)) < 0)
                return r;
        if (o && o->ca_file && (r = cn_http_request_set_ca_file(req, o->ca_file)) < 0)
                return r;
        if (o && o->pinned_sha256 && (r = cn_http_request_set_pinned_sha256(req, o->pinned_sha256)) < 0)
                return r;
        for (const char *const *h = o ? o->headers : NULL; h && *h; h++) {
                _cleanup_free_ char *name = NULL;
                const char *colon = strchr(*h, ':');

                if (!colon)
                        return -EINVAL;
                name = strndup(*h, colon - *h);
                if (!name)
                        return -ENOMEM;
                r = cn_http_request_add_header(req, name, colon + 1 + strspn(colon + 1, " "));
                if (r < 0)
                        return r;
        }
        if (o && o->body) {
                const char *text = json_object_to_json_string_ext(o->body, JSON_C_TO_STRING_PLAIN);

                r = cn_http_request_set_body(req, text, strlen(text), "application/json");
                if (r < 0)
                        return r;
        } else if (o && o->form) {
                r = cn_http_request_set_body(req, o->form, strlen(o->form),
                                             "application/x-www-form-urlencoded; charset=utf-8");
                if (r < 0)
                        return r;
        } else if (o && o->raw_body) {
                r = cn_http_request_set_body(req, o->raw_body, o->raw_body_size, o->content_type);
                if (r < 0)
                        return r;
        }
        c->http_cb = cb;
        c->http_userdata = userdata;
        c->error_parser = o ? o->error_parser : NULL;
        c->error_classifier = o ? o->error_classifier : NULL;
        c->body_parser = o ? o->body_parser : NULL;
        c->operation = o ? o->operation : NULL;
        r = cn_http_request_submit(req, on_http_done, c);
        if (r < 0)
                return r;
        if (c->req) {
                cn_http_request_cancel(c->req);
                cn_http_request_unref(c->req);
        }
        c->req = TAKE_PTR(req);
        c->http_pending = true;
        return 0;
}
