/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching a platform's documents on the event loop: every key of the source at once through the
 * shared HTTP client, each with its own timeout and bounded retries with jittered exponential
 * backoff, the whole under one deadline; or, for config-drive and file platforms, reading files.
 * The result always reaches the caller from the event loop, never from inside cn_metadata_fetch(). */
#include <sys/stat.h>

#include "backoff.h"
#include "fileio.h"
#include "http.h"
#include "log.h"
#include "metadata-source.h"
#include "node-config.h"
#include "platform-detect.h"
#include "string-util.h"
#include "time-util.h"

#define RETRY_BASE_USEC (100 * USEC_PER_MSEC)
#define RETRY_CAP_USEC (2 * USEC_PER_SEC)
/* Requests in flight at once. Metadata services are small servers (some queue only a handful of
 * connections before dropping SYNs, which costs a 1 s retransmit); a few parallel requests already
 * hide the round trips. */
#define MAX_PARALLEL 4

typedef struct Slot {
        CnMetadataFetch *fetch;
        const CnMetadataKey *key; /* NULL: the session-token request */
        CnHttpRequest *req;
        sd_event_source *retry;
        CnBackoff backoff;
        unsigned attempts;
        bool done;
} Slot;

struct CnMetadataFetch {
        sd_event *event;
        CnHttp *http;
        const CnMetadataSource *source;
        char *base_url;
        char *token;
        usec_t timeout;
        unsigned retries;
        bool require_token;
        Slot token_slot;
        Slot *slots;
        size_t n_slots, n_pending, n_started;
        CnMetadataDocs docs;
        CnInstanceMetadata *result;
        int error;
        char *error_message;
        sd_event_source *deadline, *defer;
        CnMetadataCallback callback;
        void *userdata;
};

static void slot_stop(Slot *s) {
        if (s->req) {
                cn_http_request_cancel(s->req);
                s->req = cn_http_request_unref(s->req);
        }
        s->retry = sd_event_source_disable_unref(s->retry);
}

static void fetch_stop(CnMetadataFetch *f) {
        slot_stop(&f->token_slot);
        for (size_t i = 0; i < f->n_slots; i++)
                slot_stop(&f->slots[i]);
        f->deadline = sd_event_source_disable_unref(f->deadline);
}

CnMetadataFetch *cn_metadata_fetch_free(CnMetadataFetch *f) {
        if (!f)
                return NULL;
        fetch_stop(f);
        f->defer = sd_event_source_disable_unref(f->defer);
        free(f->slots);
        cn_metadata_docs_done(&f->docs);
        cn_instance_metadata_free(f->result);
        free(f->base_url);
        free(f->token);
        free(f->error_message);
        sd_event_unref(f->event);
        free(f);
        return NULL;
}

const char *cn_metadata_fetch_error(CnMetadataFetch *f) {
        return f ? f->error_message : NULL;
}

static int on_defer(sd_event_source *s, void *userdata) {
        CnMetadataFetch *f = ASSERT_PTR(userdata);
        CnInstanceMetadata *m = TAKE_PTR(f->result);
        int error = f->error;

        f->defer = sd_event_source_disable_unref(f->defer);
        /* Last thing done with f: the callback may free it. */
        f->callback(error < 0 ? error : 0, error < 0 ? NULL : m, f->userdata);
        if (error < 0)
                cn_instance_metadata_free(m);
        return 0;
}

/* Ends the fetch with r (and message, printf-style) or with the parsed result when r >= 0. The
 * callback runs from a defer source so that it never runs inside cn_metadata_fetch() or inside an
 * HTTP completion that still touches its request. */
static void finish(CnMetadataFetch *f, int r, const char *fmt, ...) _printf_(3, 4);
static void finish(CnMetadataFetch *f, int r, const char *fmt, ...) {
        va_list ap;

        if (f->defer)
                return;
        fetch_stop(f);
        f->error = r < 0 ? r : 0;
        if (r < 0 && fmt) {
                free(f->error_message);
                va_start(ap, fmt);
                if (vasprintf(&f->error_message, fmt, ap) < 0)
                        f->error_message = NULL;
                va_end(ap);
        }
        if (r >= 0) {
                const char *field = NULL;
                _cleanup_instance_metadata_ CnInstanceMetadata *m = cn_instance_metadata_new(f->source->platform);

                if (!m)
                        r = -ENOMEM;
                else
                        r = f->source->parse(&f->docs, m);
                if (r >= 0)
                        r = cn_instance_metadata_validate(m, &field);
                if (r < 0) {
                        f->error = r;
                        free(f->error_message);
                        f->error_message = NULL;
                        if (field)
                                (void) cn_set_message(&f->error_message,
                                                "%s metadata rejected: missing or unsafe value for '%s'",
                                                f->source->platform, field);
                        else if (f->docs.error)
                                (void) cn_set_message(&f->error_message, "%s metadata rejected: %s",
                                                f->source->platform, f->docs.error);
                        else
                                (void) cn_set_message(&f->error_message, "%s metadata is malformed: %s",
                                                f->source->platform, strerror(-r));
                } else
                        f->result = TAKE_PTR(m);
        }
        if (sd_event_add_defer(f->event, &f->defer, on_defer, f) < 0) {
                /* Cannot defer (out of memory): report right away rather than never. */
                on_defer(NULL, f);
                return;
        }
        (void) sd_event_source_set_description(f->defer, "metadata-result");
}

static int slot_start(Slot *s);

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        Slot *s = ASSERT_PTR(userdata);
        int r;

        s->retry = sd_event_source_disable_unref(s->retry);
        r = slot_start(s);
        if (r < 0)
                finish(s->fetch, r, "Failed to start metadata request: %s", strerror(-r));
        return 0;
}

static const char *slot_path(const Slot *s) {
        return s->key ? s->key->path : s->fetch->source->token_path;
}

/* A transient failure: try again after a backoff, or give up when the attempts are used up. */
static void slot_retry(Slot *s, int error, long status) {
        CnMetadataFetch *f = s->fetch;
        usec_t delay;
        int r;

        if (s->attempts > f->retries) {
                if (error < 0)
                        finish(f, error, "GET %s/%s failed after %u attempts: %s", f->base_url, slot_path(s),
                               s->attempts, strerror(-error));
                else
                        finish(f, -EIO, "GET %s/%s failed after %u attempts: HTTP %ld", f->base_url,
                               slot_path(s), s->attempts, status);
                return;
        }
        delay = cn_backoff_next(&s->backoff, 0);
        log_debug("Metadata %s: %s, retrying in %" PRIu64 " ms.", slot_path(s),
                  error < 0 ? strerror(-error) : "server error", delay / USEC_PER_MSEC);
        r = sd_event_add_time_relative(f->event, &s->retry, CLOCK_MONOTONIC, delay, 0, on_retry, s);
        if (r < 0) {
                finish(f, r, "Failed to schedule a retry: %s", strerror(-r));
                return;
        }
        (void) sd_event_source_set_description(s->retry, "metadata-retry");
}

static int start_keys(CnMetadataFetch *f);

static void slot_done(Slot *s) {
        CnMetadataFetch *f = s->fetch;

        s->done = true;
        s->req = cn_http_request_unref(s->req);
        if (!s->key) {
                int r = start_keys(f);
                if (r < 0)
                        finish(f, r, "Failed to start metadata requests: %s", strerror(-r));
                return;
        }
        assert(f->n_pending > 0);
        if (--f->n_pending == 0) {
                finish(f, 0, NULL);
                return;
        }
        if (f->n_started < f->n_slots) {
                int r = slot_start(&f->slots[f->n_started++]);
                if (r < 0)
                        finish(f, r, "Failed to start a metadata request: %s", strerror(-r));
        }
}

static void on_response(CnHttpRequest *req, int error, void *userdata) {
        Slot *s = ASSERT_PTR(userdata);
        CnMetadataFetch *f = s->fetch;
        long status = error < 0 ? 0 : cn_http_request_get_status(req);
        const char *body;
        size_t size;
        int r;

        if (error == -EFBIG) {
                finish(f, -EFBIG, "GET %s/%s: response larger than the %u byte limit", f->base_url,
                       slot_path(s),
                       s->key && (s->key->flags & CN_METADATA_KEY_DOCUMENT) ? CN_METADATA_DOCUMENT_SIZE_MAX
                                                                            : CN_METADATA_SIZE_MAX);
                return;
        }
        if (error < 0 || status == 429 || status >= 500) {
                slot_retry(s, error, status);
                return;
        }
        if (!s->key) {
                /* IMDSv2 is off (or a proxy strips PUT): go on without a token, as IMDSv1 clients do. */
                if (status == 403 || status == 404 || status == 405) {
                        if (f->require_token) {
                                finish(f, -EACCES, "PUT %s/%s: HTTP %ld and IMDSv2 is required", f->base_url,
                                       slot_path(s), status);
                                return;
                        }
                        log_debug("No IMDSv2 session token (HTTP %ld), using IMDSv1.", status);
                        slot_done(s);
                        return;
                }
                if (status != 200) {
                        finish(f, -EIO, "PUT %s/%s: HTTP %ld", f->base_url, slot_path(s), status);
                        return;
                }
                r = cn_http_request_steal_body(req, &f->token, &size);
                if (r < 0) {
                        finish(f, r, "Out of memory");
                        return;
                }
                slot_done(s);
                return;
        }
        if (status == 404 && (s->key->flags & CN_METADATA_KEY_OPTIONAL)) {
                slot_done(s);
                return;
        }
        if (status != 200) {
                finish(f, status == 404 ? -ENOENT : -EIO, "GET %s/%s: HTTP %ld", f->base_url, s->key->path, status);
                return;
        }
        body = cn_http_request_get_body(req, &size);
        r = cn_metadata_docs_put(&f->docs, s->key->path, body ?: "", body ? size : 0);
        if (r < 0) {
                finish(f, r, "Out of memory");
                return;
        }
        slot_done(s);
}

static int add_header_line(CnHttpRequest *req, const char *line) {
        _cleanup_free_ char *name = strdup(line);
        char *colon;

        if (!name)
                return -ENOMEM;
        colon = strchr(name, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        return cn_http_request_add_header(req, name, colon + 1 + strspn(colon + 1, " "));
}

static int slot_start(Slot *s) {
        CnMetadataFetch *f = s->fetch;
        _cleanup_(cn_http_request_unrefp) CnHttpRequest *req = NULL;
        _cleanup_free_ char *url = NULL;
        int r;

        if (asprintf(&url, "%s/%s", f->base_url, slot_path(s)) < 0)
                return -ENOMEM;
        r = cn_http_request_new(f->http, s->key ? "GET" : "PUT", url, &req);
        if (r < 0)
                return r;
        cn_http_request_set_no_proxy(req);
        cn_http_request_set_timeout(req, f->timeout);
        cn_http_request_set_connect_timeout(req, f->timeout);
        cn_http_request_set_max_response(req, !s->key ? 4096
                                              : (s->key->flags & CN_METADATA_KEY_DOCUMENT) ? CN_METADATA_DOCUMENT_SIZE_MAX
                                                                                          : CN_METADATA_SIZE_MAX);
        for (const char *const *h = f->source->headers; h && *h; h++)
                if ((r = add_header_line(req, *h)) < 0)
                        return r;
        if (!s->key)
                for (const char *const *h = f->source->token_request_headers; h && *h; h++) {
                        if ((r = add_header_line(req, *h)) < 0)
                                return r;
                }
        else if (f->token && (r = cn_http_request_add_header(req, f->source->token_header, f->token)) < 0)
                return r;
        s->attempts++;
        r = cn_http_request_submit(req, on_response, s);
        if (r < 0)
                return r;
        /* A retry replaces the finished request of the previous attempt. */
        cn_http_request_unref(s->req);
        s->req = TAKE_PTR(req);
        return 0;
}

static int start_keys(CnMetadataFetch *f) {
        size_t n = 0;
        int r;

        for (const CnMetadataKey *k = f->source->keys; k->path; k++)
                n++;
        f->slots = calloc(n, sizeof(Slot));
        if (!f->slots)
                return -ENOMEM;
        f->n_slots = f->n_pending = n;
        for (size_t i = 0; i < n; i++) {
                f->slots[i] = (Slot) { .fetch = f, .key = &f->source->keys[i] };
                cn_backoff_init(&f->slots[i].backoff, RETRY_BASE_USEC, RETRY_CAP_USEC);
        }
        while (f->n_started < MIN(n, (size_t) MAX_PARALLEL))
                if ((r = slot_start(&f->slots[f->n_started++])) < 0)
                        return r;
        return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        CnMetadataFetch *f = ASSERT_PTR(userdata);

        finish(f, -ETIMEDOUT, "%s metadata not complete within the deadline", f->source->platform);
        return 0;
}

/* Local sources: a config drive's files, the local document of platform "file", and files of the
 * host itself (DMI) that a source wants next to them. */
static int read_local(CnMetadataFetch *f, const char *root, const char *dir, const CnMetadataKey *keys) {
        _cleanup_free_ char *path = NULL, *root_dir = NULL;
        int r;

        r = cn_path_prefix_root(root, dir, &path);
        if (r < 0)
                return r;
        r = cn_metadata_docs_read_dir(&f->docs, -EBADF, path, keys);
        if (r >= 0 && f->source->host_keys) {
                r = cn_path_prefix_root(root, "/", &root_dir);
                if (r >= 0)
                        r = cn_metadata_docs_read_dir(&f->docs, -EBADF, root_dir, f->source->host_keys);
        }
        if (r < 0 && f->docs.error)
                finish(f, r, "Failed to read %s metadata: %s", f->source->platform, f->docs.error);
        else if (r < 0)
                finish(f, r, "Failed to read %s metadata from %s: %s", f->source->platform, dir, strerror(-r));
        else
                finish(f, 0, NULL);
        return 0;
}

static bool drive_present(const char *root, const char *dir, const CnMetadataKey *keys) {
        _cleanup_free_ char *path = NULL, *first = NULL;
        struct stat st;

        if (cn_path_prefix_root(root, dir, &path) < 0)
                return false;
        /* The first key is the drive's defining document. */
        if (asprintf(&first, "%s/%s", path, keys[0].path) < 0)
                return false;
        return stat(first, &st) == 0;
}

int cn_metadata_fetch(sd_event *e, CnHttp *http, const CnMetadataOptions *o, CnMetadataCallback cb,
                      void *userdata, CnMetadataFetch **ret) {
        _cleanup_(cn_metadata_fetch_freep) CnMetadataFetch *f = NULL;
        _cleanup_free_ char *unsupported = NULL;
        const char *platform = NULL;
        usec_t deadline;
        int r;

        assert(e && o && cb && ret);
        r = cn_platform_detect(o->root, o->platform, NULL, &platform, NULL, &unsupported);
        if (r == -EPROTONOSUPPORT)
                return log_debug_errno(r, "Platform '%s' is not supported.", strna(unsupported));
        if (r < 0)
                return r;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->event = sd_event_ref(e);
        f->http = http;
        f->callback = cb;
        f->userdata = userdata;
        f->source = cn_metadata_source_find(platform);
        if (!f->source)
                return -EPROTONOSUPPORT;
        f->timeout = o->timeout_usec ?: CN_METADATA_TIMEOUT_USEC_DEFAULT;
        f->retries = o->retries == (unsigned) -1 ? CN_METADATA_RETRIES_DEFAULT : o->retries;
        f->require_token = o->aws_require_imdsv2;
        deadline = o->deadline_usec ?: CN_METADATA_DEADLINE_USEC_DEFAULT;

        if (f->source->drive_keys) {
                const char *dir = o->config_drive ?: f->source->drive;

                /* A configured drive is authoritative; the default mount point is used when mounted,
                 * and a source without HTTP keys has nowhere else to look. */
                if (o->config_drive || !f->source->keys || drive_present(o->root, dir, f->source->drive_keys)) {
                        r = read_local(f, o->root, dir, f->source->drive_keys);
                        if (r < 0)
                                return r;
                        *ret = TAKE_PTR(f);
                        return 0;
                }
        }
        if (f->source->file) {
                _cleanup_free_ char *dir = NULL;
                const char *path = o->file ?: f->source->file, *slash = strrchr(path, '/');
                CnMetadataKey keys[] = { { slash ? slash + 1 : path, CN_METADATA_KEY_DOCUMENT }, {} };

                /* The file source's parser takes the one document it is given, whatever its name. */
                dir = slash ? strndup(path, slash == path ? 1 : (size_t) (slash - path)) : strdup(".");
                if (!dir)
                        return -ENOMEM;
                r = read_local(f, o->root, dir, keys);
                if (r < 0)
                        return r;
                *ret = TAKE_PTR(f);
                return 0;
        }
        if (!http)
                return -EINVAL;
        f->base_url = strdup(o->endpoint ?: f->source->endpoint);
        if (!f->base_url)
                return -ENOMEM;
        /* "http://host/" and "http://host" name the same base. */
        while (strlen(f->base_url) > 8 && f->base_url[strlen(f->base_url) - 1] == '/')
                f->base_url[strlen(f->base_url) - 1] = 0;

        r = sd_event_add_time_relative(e, &f->deadline, CLOCK_MONOTONIC, deadline, 0, on_deadline, f);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(f->deadline, "metadata-deadline");
        if (f->source->token_path) {
                f->token_slot = (Slot) { .fetch = f };
                cn_backoff_init(&f->token_slot.backoff, RETRY_BASE_USEC, RETRY_CAP_USEC);
                r = slot_start(&f->token_slot);
        } else
                r = start_keys(f);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(f);
        return 0;
}

typedef struct SyncState {
        int r;
        CnInstanceMetadata *m;
        char *error;
        CnMetadataFetch *fetch;
        sd_event *event;
} SyncState;

static void on_sync_done(int r, CnInstanceMetadata *m, void *userdata) {
        SyncState *st = ASSERT_PTR(userdata);

        st->r = r;
        st->m = m;
        if (r < 0 && cn_metadata_fetch_error(st->fetch))
                st->error = strdup(cn_metadata_fetch_error(st->fetch));
        (void) sd_event_exit(st->event, 0);
}

int cn_metadata_fetch_sync(const CnMetadataOptions *o, CnInstanceMetadata **ret, char **ret_error) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(cn_http_freep) CnHttp *http = NULL;
        _cleanup_(cn_metadata_fetch_freep) CnMetadataFetch *f = NULL;
        SyncState st = {};
        int r;

        r = sd_event_new(&e);
        if (r < 0)
                return r;
        r = cn_http_new(e, &http);
        if (r < 0)
                return r;
        st.event = e;
        r = cn_metadata_fetch(e, http, o, on_sync_done, &st, &f);
        if (r < 0)
                return r;
        st.fetch = f;
        r = sd_event_loop(e);
        if (r < 0)
                return r;
        if (st.r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(st.error);
                free(st.error);
                return st.r;
        }
        *ret = st.m;
        return 0;
}

void cn_metadata_options_from_node_config(CnMetadataOptions *o, const CnNodeConfig *cfg, const char *root) {
        *o = (CnMetadataOptions) CN_METADATA_OPTIONS_INIT;
        o->root = root;
        if (!cfg)
                return;
        o->platform = cfg->platform;
        o->endpoint = cfg->metadata_endpoint;
        o->config_drive = cfg->metadata_config_drive;
        o->file = cfg->metadata_file;
        o->timeout_usec = cfg->metadata_timeout_usec;
        o->retries = cfg->metadata_retries;
        o->deadline_usec = cfg->metadata_deadline_usec;
        o->aws_require_imdsv2 = cfg->metadata_require_imdsv2;
}
