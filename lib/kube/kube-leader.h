/* SPDX-License-Identifier: Apache-2.0 */
/* Leader election on a coordination.k8s.io/v1 Lease, with client-go's leaderelection semantics:
 * a candidate tries to acquire every retry period; it takes the Lease when it is free (no
 * holderIdentity) or when the holder has not renewed for leaseDurationSeconds (measured on the
 * local monotonic clock from when this candidate last saw the record change, never by comparing
 * clocks across machines); the leader renews every retry period and gives up leadership when it
 * has not managed to renew within the renew deadline. Writes use the Lease's resourceVersion, so
 * two candidates never both win. On shutdown the leader releases by clearing holderIdentity (and
 * setting leaseDurationSeconds to 1) so a successor does not wait out the lease.
 *
 * Defaults: lease 137 s, renew deadline 107 s, retry 26 s: the values the cloud-controller
 * deployments of OpenShift use (tolerate a 60 s API server outage); all configurable. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kube-client.h"
#include "macro.h"

#define CN_KUBE_LEADER_DEFAULT_LEASE_USEC (137ULL * 1000000ULL)
#define CN_KUBE_LEADER_DEFAULT_RENEW_DEADLINE_USEC (107ULL * 1000000ULL)
#define CN_KUBE_LEADER_DEFAULT_RETRY_PERIOD_USEC (26ULL * 1000000ULL)

typedef struct CnKubeLeader CnKubeLeader;

typedef struct CnKubeLeaderOptions {
        const char *namespace;  /* Lease namespace (required) */
        const char *name;       /* Lease name (required) */
        const char *identity;   /* NULL: "<hostname>_<random uuid>" like client-go */
        uint64_t lease_duration_usec;  /* 0: default; whole seconds are written to the Lease */
        uint64_t renew_deadline_usec;  /* 0: default; must be < lease duration */
        uint64_t retry_period_usec;    /* 0: default; must be < renew deadline */
} CnKubeLeaderOptions;

typedef struct CnKubeLeaderCallbacks {
        void (*started_leading)(CnKubeLeader *l, void *userdata);
        /* Lost the lease (renew deadline passed, someone else took it) or released it. A
         * controller typically stops its work, or exits to be restarted, like client-go users. */
        void (*stopped_leading)(CnKubeLeader *l, void *userdata);
        /* The observed holder changed (NULL: nobody holds it). Includes ourselves. */
        void (*new_leader)(CnKubeLeader *l, const char *identity, void *userdata);
} CnKubeLeaderCallbacks;

/* Validates the options (-EINVAL with a debug log if the durations are not ordered). Not started. */
int cn_kube_leader_new(CnKubeClient *c, const CnKubeLeaderOptions *o, const CnKubeLeaderCallbacks *cb,
                       void *userdata, CnKubeLeader **ret);
/* Stops timers and requests; does not release (use cn_kube_leader_release() first). */
CnKubeLeader *cn_kube_leader_free(CnKubeLeader *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeLeader *, cn_kube_leader_free);
#define _cleanup_kube_leader_ _cleanup_(cn_kube_leader_freep)

/* Begin trying to acquire (first attempt immediately). */
int cn_kube_leader_start(CnKubeLeader *l);

/* Shutdown: stop campaigning; if leading, clear holderIdentity on the Lease. done (optional) runs
 * when that is finished (error 0 or negative errno; also 0 at once when not leading); callers
 * typically exit the loop from it. stopped_leading is called before done when we were leading. */
typedef void (*CnKubeLeaderDoneFn)(CnKubeLeader *l, int error, void *userdata);
int cn_kube_leader_release(CnKubeLeader *l, CnKubeLeaderDoneFn done, void *userdata);

bool cn_kube_leader_is_leader(CnKubeLeader *l);
const char *cn_kube_leader_get_identity(CnKubeLeader *l);
/* Holder identity as last observed on the Lease, NULL if unknown or free. */
const char *cn_kube_leader_get_observed_leader(CnKubeLeader *l);

/* For /healthz (client-go's HealthzAdaptor): 0 when not leading, or leading and the last
 * successful renewal is younger than lease duration + tolerance_usec; -ETIMEDOUT otherwise
 * (leader stuck: restart the process). */
int cn_kube_leader_check(CnKubeLeader *l, uint64_t tolerance_usec);
