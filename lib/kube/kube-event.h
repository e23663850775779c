/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes Events (core/v1 Event) as client-go's record.EventRecorder writes them: source
 * component/host, reportingController/reportingInstance, firstTimestamp/lastTimestamp, count.
 * Repeats of the same event (same involved object, type, reason and message) within the
 * aggregation window are not created again: the existing Event is PATCHed with count+1 and a new
 * lastTimestamp. Events of cluster-scoped objects (Nodes) go to namespace "default", as client-go
 * does. Recording is fire-and-forget: failures are logged at debug level and never block the
 * caller; messages must not contain secrets. */
#pragma once

#include <stdarg.h>
#include <stdint.h>

#include <json-c/json.h>

#include "kube-client.h"
#include "macro.h"

#define CN_KUBE_EVENT_DEFAULT_WINDOW_USEC (600ULL * 1000000ULL)
#define CN_KUBE_EVENT_MAX_MESSAGE 1024

typedef struct CnKubeEventRecorder CnKubeEventRecorder;

typedef enum CnKubeEventType {
        CN_KUBE_EVENT_NORMAL,
        CN_KUBE_EVENT_WARNING,
        _CN_KUBE_EVENT_TYPE_MAX,
} CnKubeEventType;

/* The involved object. kind and apiVersion are needed because objects from lists carry neither;
 * the others may be NULL (namespace for cluster-scoped, uid/resourceVersion/fieldPath optional). */
typedef struct CnKubeObjectRef {
        const char *kind;
        const char *api_version;
        const char *namespace;
        const char *name;
        const char *uid;
        const char *resource_version;
        const char *field_path;
        char _api_version_buf[256]; /* private: "group/version" built by cn_kube_object_ref_from_json() */
} CnKubeObjectRef;

/* Fill a reference from an object (borrowed pointers into it): namespace, name, uid,
 * resourceVersion, and kind/apiVersion from the object if present, else from r. */
int cn_kube_object_ref_from_json(json_object *object, const CnKubeResource *r, CnKubeObjectRef *ret);

typedef struct CnKubeEventRecorderOptions {
        const char *component;  /* source.component and reportingController, e.g. "cloud-node-controller" (required) */
        const char *host;       /* source.host (node name), optional */
        const char *instance;   /* reportingInstance; NULL: component + "-" + hostname */
        uint64_t window_usec;   /* aggregation window; 0: CN_KUBE_EVENT_DEFAULT_WINDOW_USEC */
} CnKubeEventRecorderOptions;

int cn_kube_event_recorder_new(CnKubeClient *c, const CnKubeEventRecorderOptions *o,
                               CnKubeEventRecorder **ret);
CnKubeEventRecorder *cn_kube_event_recorder_free(CnKubeEventRecorder *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeEventRecorder *, cn_kube_event_recorder_free);
#define _cleanup_kube_event_recorder_ _cleanup_(cn_kube_event_recorder_freep)

/* Record an event. reason: UpperCamelCase ("Synced", "FailedToCreateInstance"); action optional
 * ("Initialize"). The message is truncated to CN_KUBE_EVENT_MAX_MESSAGE bytes. Returns 0 once the
 * write is queued, -EINVAL for a missing reason/name/kind. */
int cn_kube_event_record(CnKubeEventRecorder *r, const CnKubeObjectRef *object, CnKubeEventType type,
                         const char *reason, const char *action, const char *format, ...) _printf_(6, 7);
int cn_kube_event_recordv(CnKubeEventRecorder *r, const CnKubeObjectRef *object, CnKubeEventType type,
                          const char *reason, const char *action, const char *format, va_list ap)
        _printf_(6, 0);

/* Number of event writes (create or patch) queued and not yet finished; for tests and clean
 * shutdown. */
unsigned cn_kube_event_recorder_pending(CnKubeEventRecorder *r);
