/* SPDX-License-Identifier: Apache-2.0 */
/* Instance metadata: one struct filled by every platform source (lib/metadata-<platform>.c), fetched
 * asynchronously on an sd-event loop through the shared HTTP client (lib/core/http.h), or read from a
 * config drive / local file. Used by cloudnode-agent and by cloudnode-initializer's node mode.
 *
 * Fetch policy (all overridable through CnMetadataOptions, defaults in brackets):
 *   per-request timeout [2 s], retries per request [5] with exponential backoff (100 ms doubling,
 *   capped at 2 s, with jitter), overall deadline [30 s], response size cap [64 KiB per document,
 *   1 MiB for whole documents such as OpenStack's meta_data.json]. A 404 on an optional key means
 *   the key is absent; a 404 on a required key is -ENOENT. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "macro.h"

typedef struct CnHttp CnHttp;
typedef struct CnNodeConfig CnNodeConfig;

typedef struct CnInstanceMetadata {
        char *platform;      /* "aws", "openstack", ... (Ignition/Afterburn ids) */
        char *instance_id;
        char *provider_id;   /* in the form the platform's cloud-controller-manager uses */
        char *instance_type;
        char *region;
        char *zone;
        char *hostname;
        char **ipv4_private; /* strv, ordered: first is the primary address */
        char **ipv4_public;
        char **ipv6;
        char **extra_labels; /* strv of "key=value" (Kubernetes label syntax, validated) */
} CnInstanceMetadata;

/* The provider-specific label keys a platform's metadata may carry in extra_labels. */
#define CN_LABEL_HCLOUD_NETWORK_ZONE "hcloud.cloudnode.io/network-zone"
#define CN_LABEL_AWS_ZONE_ID "topology.k8s.aws/zone-id"

CnInstanceMetadata *cn_instance_metadata_new(const char *platform);
void cn_instance_metadata_free(CnInstanceMetadata *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnInstanceMetadata *, cn_instance_metadata_free);
#define _cleanup_instance_metadata_ _cleanup_(cn_instance_metadata_freep)

/* Checks every field for what no output format can carry safely (control characters, non-UTF-8,
 * over-long values, malformed addresses). Returns 0 or -EBADMSG with the offending field's name in
 * *ret_field (static string). Sources call it before handing a result back. */
int cn_instance_metadata_validate(const CnInstanceMetadata *m, const char **ret_field);

/* The metadata as a JSON object with the same keys as the env file minus the CLOUDNODE_ prefix,
 * in camelCase: platform, instanceID, providerID, instanceType, region, zone, hostname,
 * ipv4Private[], ipv4Public[], ipv6[], labels{}. */
int cn_instance_metadata_to_json(const CnInstanceMetadata *m, json_object **ret);

#define CN_METADATA_TIMEOUT_USEC_DEFAULT (2 * 1000 * 1000ULL)
#define CN_METADATA_RETRIES_DEFAULT 5U
#define CN_METADATA_DEADLINE_USEC_DEFAULT (30 * 1000 * 1000ULL)
#define CN_METADATA_SIZE_MAX (64U * 1024U)
#define CN_METADATA_DOCUMENT_SIZE_MAX (1024U * 1024U)

typedef struct CnMetadataOptions {
        const char *platform;     /* NULL: detect (config, kernel command line, DMI) */
        const char *endpoint;     /* base URL override ("http://127.0.0.1:8080"), NULL: the standard one */
        const char *config_drive; /* mounted config drive (OpenStack config-2, ProxmoxVE cidata) */
        const char *file;         /* platform "file": path of the YAML/JSON document */
        const char *root;         /* prefix of every local path read (detection, drive, file); NULL = "/" */
        uint64_t timeout_usec;    /* per request; 0 = default */
        unsigned retries;         /* per request; (unsigned) -1 = default, 0 = no retry */
        uint64_t deadline_usec;   /* whole fetch; 0 = default */
        bool aws_require_imdsv2;  /* fail instead of falling back to IMDSv1 */
} CnMetadataOptions;

#define CN_METADATA_OPTIONS_INIT { .retries = (unsigned) -1 }

/* Fills *o from the node config; strings point into cfg (which must outlive o). */
void cn_metadata_options_from_node_config(CnMetadataOptions *o, const CnNodeConfig *cfg, const char *root);

typedef struct CnMetadataFetch CnMetadataFetch;

/* Called once, on the event loop. On success r >= 0 and m is owned by the callee; on failure r is a
 * negative errno (-ETIMEDOUT deadline, -ENOENT required key missing, -EBADMSG malformed or
 * hostile document, -EFBIG response over the cap, -EPROTONOSUPPORT unknown platform,
 * -ENXIO platform not detected) and m is NULL. */
typedef void (*CnMetadataCallback)(int r, CnInstanceMetadata *m, void *userdata);

/* Starts a fetch. The platform is resolved first (see platform-detect.h). The returned handle
 * cancels the fetch when freed before the callback ran; it may be freed inside the callback. */
int cn_metadata_fetch(sd_event *e, CnHttp *http, const CnMetadataOptions *o, CnMetadataCallback cb,
                      void *userdata, CnMetadataFetch **ret);
CnMetadataFetch *cn_metadata_fetch_free(CnMetadataFetch *f);
/* A one-line description of why the fetch failed (for the log), or NULL. Valid in the callback. */
const char *cn_metadata_fetch_error(CnMetadataFetch *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnMetadataFetch *, cn_metadata_fetch_free);

/* Blocking convenience: its own event loop and HTTP client; returns when the fetch is done.
 * ret_error (optional) receives the failure description, malloc'd. */
int cn_metadata_fetch_sync(const CnMetadataOptions *o, CnInstanceMetadata **ret, char **ret_error);

/* Platform ids this build can read, NULL-terminated. */
extern const char *const cn_metadata_platforms[];
bool cn_metadata_platform_supported(const char *platform);
