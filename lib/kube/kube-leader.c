/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election on a Lease (see kube-leader.h), after client-go's leaderelection package:
 * every attempt reads the Lease and, when it is ours, free, or expired by our own clock, writes it
 * back with its resourceVersion, so a concurrent writer makes one of the two fail with Conflict. */
#include <limits.h>

#include "hash-util.h"
#include "json-util.h"
#include "kube-leader.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"

/* client-go's JitterFactor for candidates: a retry waits retry_period * (1 + rand * 1.2). */
#define LEADER_JITTER 1.2

struct CnKubeLeader {
        CnKubeClient *client;
        char *namespace, *name, *identity;
        usec_t lease_duration, renew_deadline, retry_period;
        CnKubeLeaderCallbacks cb;
        void *userdata;

        sd_event_source *timer;
        sd_event_source *deadline_timer; /* leading: renew deadline since the last renewal */
        CnKubeRequest *req;
        bool running, leading, releasing;

        /* What we last saw on the server, and when it last changed by our clock. */
        json_object *lease;
        char *observed_holder;
        char *observed_renew_time;
        usec_t observed_mono;
        usec_t last_renew_mono; /* last successful write while leading */

        CnKubeLeaderDoneFn done;
        void *done_userdata;
};

static usec_t now_mono(CnKubeLeader *l) {
        usec_t t;

        if (sd_event_now(cn_kube_client_get_event(l->client), CLOCK_MONOTONIC, &t) < 0)
                t = cn_now(CLOCK_MONOTONIC);
        return t;
}

static int default_identity(char **ret) {
        char host[HOST_NAME_MAX + 1] = "";
        uint8_t b[16];
        int k;

        k = cn_random_bytes(b, sizeof(b));
        if (k < 0)
                return k;
        b[6] = (b[6] & 0x0F) | 0x40; /* version 4 */
        b[8] = (b[8] & 0x3F) | 0x80;
        (void) gethostname(host, sizeof(host) - 1);
        if (asprintf(ret,
                     "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     host[0] ? host : "unknown", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
                     b[11], b[12], b[13], b[14], b[15]) < 0)
                return -ENOMEM;
        return 0;
}

int cn_kube_leader_new(CnKubeClient *c, const CnKubeLeaderOptions *o, const CnKubeLeaderCallbacks *cb,
                       void *userdata, CnKubeLeader **ret) {
        CnKubeLeader *l;
        int k;

        assert(c);
        assert(o);
        assert(ret);

        if (isempty(o->namespace) || isempty(o->name))
                return log_debug_errno(EINVAL, "Leader election needs a Lease namespace and name.");

        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->client = c;
        l->lease_duration = o->lease_duration_usec ?: CN_KUBE_LEADER_DEFAULT_LEASE_USEC;
        l->renew_deadline = o->renew_deadline_usec ?: CN_KUBE_LEADER_DEFAULT_RENEW_DEADLINE_USEC;
        l->retry_period = o->retry_period_usec ?: CN_KUBE_LEADER_DEFAULT_RETRY_PERIOD_USEC;
        if (cb)
                l->cb = *cb;
        l->userdata = userdata;

        /* client-go's validation: lease > renew deadline > jitter * retry period. */
        if (l->lease_duration <= l->renew_deadline ||
            (double) l->renew_deadline <= LEADER_JITTER * (double) l->retry_period ||
            l->lease_duration < USEC_PER_SEC) {
                cn_kube_leader_free(l);
                return log_debug_errno(EINVAL,
                                       "Leader election durations must satisfy lease > renew deadline > 1.2 * retry period, lease >= 1s.");
        }

        l->namespace = strdup(o->namespace);
        l->name = strdup(o->name);
        if (o->identity)
                l->identity = strdup(o->identity);
        else if ((k = default_identity(&l->identity)) < 0) {
                cn_kube_leader_free(l);
                return k;
        }
        if (!l->namespace || !l->name || !l->identity) {
                cn_kube_leader_free(l);
                return -ENOMEM;
        }
        *ret = l;
        return 0;
}

CnKubeLeader *cn_kube_leader_free(CnKubeLeader *l) {
        if (!l)
                return NULL;
        l->timer = sd_event_source_disable_unref(l->timer);
        l->deadline_timer = sd_event_source_disable_unref(l->deadline_timer);
        l->req = cn_kube_request_free(l->req);
        json_object_put(l->lease);
        free(l->observed_holder);
        free(l->observed_renew_time);
        free(l->namespace);
        free(l->name);
        free(l->identity);
        free(l);
        return NULL;
}

bool cn_kube_leader_is_leader(CnKubeLeader *l) {
        assert(l);
        return l->leading;
}

const char *cn_kube_leader_get_identity(CnKubeLeader *l) {
        assert(l);
        return l->identity;
}

const char *cn_kube_leader_get_observed_leader(CnKubeLeader *l) {
        assert(l);
        return l->observed_holder;
}

int cn_kube_leader_check(CnKubeLeader *l, uint64_t tolerance_usec) {
        assert(l);
        if (!l->leading)
                return 0;
        if (now_mono(l) > l->last_renew_mono + l->lease_duration + tolerance_usec)
                return -ETIMEDOUT;
        return 0;
}

static void set_leading(CnKubeLeader *l, bool leading) {
        if (!leading)
                l->deadline_timer = sd_event_source_disable_unref(l->deadline_timer);
        if (l->leading == leading)
                return;
        l->leading = leading;
        log_debug("Lease %s/%s: %s leading as %s.", l->namespace, l->name, leading ? "started" : "stopped",
                  l->identity);
        if (leading && l->cb.started_leading)
                l->cb.started_leading(l, l->userdata);
        else if (!leading && l->cb.stopped_leading)
                l->cb.stopped_leading(l, l->userdata);
}

/* Remember the record; a change of holder or renewTime restarts our expiry clock. */
static void observe(CnKubeLeader *l, json_object *lease) {
        const char *holder = cn_json_string(lease, "spec", "holderIdentity", NULL);
        const char *renew = cn_json_string(lease, "spec", "renewTime", NULL);
        bool holder_changed;

        if (isempty(holder))
                holder = NULL;
        holder_changed = !streq(strempty(holder), strempty(l->observed_holder));
        if (holder_changed || !streq(strempty(renew), strempty(l->observed_renew_time)) || !l->lease) {
                l->observed_mono = now_mono(l);
                free(l->observed_renew_time);
                l->observed_renew_time = renew ? strdup(renew) : NULL;
        }
        json_object_put(l->lease);
        l->lease = json_object_get(lease);

        if (holder_changed) {
                free(l->observed_holder);
                l->observed_holder = holder ? strdup(holder) : NULL;
                if (l->cb.new_leader)
                        l->cb.new_leader(l, l->observed_holder, l->userdata);
        }
}

static int schedule(CnKubeLeader *l, usec_t delay);
static void attempt(CnKubeLeader *l);

static usec_t next_delay(CnKubeLeader *l) {
        uint64_t rnd = 0;

        if (l->leading)
                return l->retry_period;
        (void) cn_random_u64(&rnd);
        return l->retry_period + (usec_t) ((double) l->retry_period * LEADER_JITTER * (double) (rnd % 1000) / 1000.0);
}

/* After a failed attempt: a leader that could not renew within the deadline steps down. */
static void attempt_failed(CnKubeLeader *l) {
        if (l->leading && now_mono(l) >= l->last_renew_mono + l->renew_deadline)
                set_leading(l, false);
        (void) schedule(l, next_delay(l));
}

static int lease_body(CnKubeLeader *l, json_object *base, bool release, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        char now[CN_FORMAT_TIMESTAMP_MAX];
        const char *holder = cn_json_string(base, "spec", "holderIdentity", NULL);
        int64_t transitions = 0;
        bool ours = holder && streq(holder, l->identity);
        int k;

        k = cn_format_rfc3339(cn_now(CLOCK_REALTIME), true, now, sizeof(now));
        if (k < 0)
                return k;

        if (base) {
                /* A copy: base is the observed record, possibly borrowed from a result. */
                if (json_object_deep_copy(base, &o, NULL) < 0)
                        return -ENOMEM;
                (void) cn_json_get_int64(base, &transitions, "spec", "leaseTransitions", NULL);
        } else {
                o = json_object_new_object();
                if (!o)
                        return -ENOMEM;
                if ((k = cn_json_set_string(o, "coordination.k8s.io/v1", "apiVersion", NULL)) < 0 ||
                    (k = cn_json_set_string(o, "Lease", "kind", NULL)) < 0 ||
                    (k = cn_json_set_string(o, l->name, "metadata", "name", NULL)) < 0 ||
                    (k = cn_json_set_string(o, l->namespace, "metadata", "namespace", NULL)) < 0)
                        return k;
        }

        if (release) {
                /* client-go's release: nobody holds it, and it expires at once. */
                if ((k = cn_json_set(o, NULL, "spec", "holderIdentity", NULL)) < 0 ||
                    (k = cn_json_set(o, json_object_new_int(1), "spec", "leaseDurationSeconds", NULL)) < 0 ||
                    (k = cn_json_set_string(o, now, "spec", "renewTime", NULL)) < 0 ||
                    (k = cn_json_set_string(o, now, "spec", "acquireTime", NULL)) < 0)
                        return k;
        } else {
                int secs = (int) ((l->lease_duration + USEC_PER_SEC - 1) / USEC_PER_SEC);

                if ((k = cn_json_set_string(o, l->identity, "spec", "holderIdentity", NULL)) < 0 ||
                    (k = cn_json_set(o, json_object_new_int(secs), "spec", "leaseDurationSeconds", NULL)) < 0 ||
                    (k = cn_json_set_string(o, now, "spec", "renewTime", NULL)) < 0)
                        return k;
                /* As client-go: every change of holder, from nobody included, is a transition. */
                if (!ours) {
                        if ((k = cn_json_set_string(o, now, "spec", "acquireTime", NULL)) < 0 ||
                            (k = cn_json_set(o, json_object_new_int64(base ? transitions + 1 : transitions),
                                             "spec", "leaseTransitions", NULL)) < 0)
                                return k;
                }
        }
        *ret = TAKE_PTR(o);
        return 0;
}

/* A renewal that hangs (retries inside the client, a stalled connection) must not keep us leading
 * past the deadline: another candidate may take the Lease once it has expired. */
static int on_renew_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);

        l->deadline_timer = sd_event_source_disable_unref(l->deadline_timer);
        log_debug("Lease %s/%s: not renewed within the renew deadline, giving up leadership.", l->namespace,
                  l->name);
        l->req = cn_kube_request_free(l->req);
        set_leading(l, false);
        (void) schedule(l, next_delay(l));
        return 0;
}

static void arm_renew_deadline(CnKubeLeader *l) {
        int k;

        l->deadline_timer = sd_event_source_disable_unref(l->deadline_timer);
        k = sd_event_add_time_relative(cn_kube_client_get_event(l->client), &l->deadline_timer, CLOCK_MONOTONIC,
                                       l->renew_deadline, 0, on_renew_deadline, l);
        if (k < 0) {
                log_debug_errno(k, "Failed to arm the renew deadline timer: %m");
                return;
        }
        (void) sd_event_source_set_description(l->deadline_timer, "kube-leader-renew-deadline");
}

static void on_written(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);

        l->req = cn_kube_request_free(l->req);
        if (result->error < 0) {
                log_debug_errno(result->error, "Lease %s/%s: write failed: %s", l->namespace, l->name,
                                strna(result->message));
                attempt_failed(l);
                return;
        }
        observe(l, result->object);
        l->last_renew_mono = now_mono(l);
        set_leading(l, true);
        arm_renew_deadline(l);
        (void) schedule(l, next_delay(l));
}

static void on_read(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);
        _cleanup_json_ json_object *body = NULL;
        const char *holder;
        int64_t secs = 0;
        usec_t duration;
        int k;

        l->req = cn_kube_request_free(l->req);
        if (result->error == -CN_KUBE_ENOTFOUND) {
                k = lease_body(l, NULL, false, &body);
                if (k >= 0)
                        k = cn_kube_create(l->client, &cn_kube_resource_leases, l->namespace, body, on_written, l,
                                           &l->req);
                if (k < 0)
                        attempt_failed(l);
                return;
        }
        if (result->error < 0) {
                log_debug_errno(result->error, "Lease %s/%s: read failed: %s", l->namespace, l->name,
                                strna(result->message));
                attempt_failed(l);
                return;
        }

        observe(l, result->object);
        holder = l->observed_holder;
        (void) cn_json_get_int64(result->object, &secs, "spec", "leaseDurationSeconds", NULL);
        duration = secs > 0 ? (usec_t) secs * USEC_PER_SEC : l->lease_duration;

        if (holder && !streq(holder, l->identity) && now_mono(l) < l->observed_mono + duration) {
                /* Someone else holds a live lease. */
                set_leading(l, false);
                (void) schedule(l, next_delay(l));
                return;
        }

        k = lease_body(l, result->object, false, &body);
        if (k >= 0)
                k = cn_kube_update(l->client, &cn_kube_resource_leases, l->namespace, l->name, NULL, body, on_written,
                                   l, &l->req);
        if (k < 0)
                attempt_failed(l);
}

static void attempt(CnKubeLeader *l) {
        int k;

        if (l->req || !l->running)
                return;
        k = cn_kube_get(l->client, &cn_kube_resource_leases, l->namespace, l->name, NULL, on_read, l, &l->req);
        if (k < 0)
                attempt_failed(l);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);

        l->timer = sd_event_source_disable_unref(l->timer);
        attempt(l);
        return 0;
}

static int schedule(CnKubeLeader *l, usec_t delay) {
        int k;

        if (!l->running)
                return 0;
        l->timer = sd_event_source_disable_unref(l->timer);
        k = sd_event_add_time_relative(cn_kube_client_get_event(l->client), &l->timer, CLOCK_MONOTONIC, delay, 0,
                                       on_timer, l);
        if (k < 0)
                return log_error_errno(k, "Failed to arm the leader election timer: %m");
        (void) sd_event_source_set_description(l->timer, "kube-leader-retry");
        return 0;
}

int cn_kube_leader_start(CnKubeLeader *l) {
        assert(l);
        if (l->running || l->releasing)
                return 0;
        l->running = true;
        return schedule(l, 0);
}

static void release_done(CnKubeLeader *l, int error) {
        CnKubeLeaderDoneFn done = l->done;

        l->releasing = false;
        l->done = NULL;
        set_leading(l, false);
        if (done)
                done(l, error, l->done_userdata);
}

static void on_released(CnKubeClient *c, const CnKubeResult *result, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);

        l->req = cn_kube_request_free(l->req);
        if (result->error < 0)
                log_debug_errno(result->error, "Lease %s/%s: release failed: %s", l->namespace, l->name,
                                strna(result->message));
        else
                observe(l, result->object);
        release_done(l, result->error);
}

static int on_release_now(sd_event_source *s, void *userdata) {
        CnKubeLeader *l = ASSERT_PTR(userdata);

        l->timer = sd_event_source_disable_unref(l->timer);
        release_done(l, 0);
        return 0;
}

int cn_kube_leader_release(CnKubeLeader *l, CnKubeLeaderDoneFn done, void *userdata) {
        _cleanup_json_ json_object *body = NULL;
        int k;

        assert(l);
        if (l->releasing)
                return -EALREADY;

        l->running = false;
        l->timer = sd_event_source_disable_unref(l->timer);
        l->deadline_timer = sd_event_source_disable_unref(l->deadline_timer);
        l->req = cn_kube_request_free(l->req);
        l->releasing = true;
        l->done = done;
        l->done_userdata = userdata;

        if (!l->leading || !l->lease) {
                /* Nothing to give back; still report from the loop, as promised. */
                k = sd_event_add_defer(cn_kube_client_get_event(l->client), &l->timer, on_release_now, l);
                if (k < 0) {
                        l->releasing = false;
                        return k;
                }
                return 0;
        }

        k = lease_body(l, l->lease, true, &body);
        if (k >= 0)
                k = cn_kube_update(l->client, &cn_kube_resource_leases, l->namespace, l->name, NULL, body, on_released,
                                   l, &l->req);
        if (k < 0) {
                l->releasing = false;
                return k;
        }
        return 0;
}
