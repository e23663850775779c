/* SPDX-License-Identifier: Apache-2.0 */
/* Cloud credentials of Cluster API objects: spec.credentials.secretRef names a Secret in the
 * object's namespace, from which a provider of its own is built; objects without one use the
 * controller's provider (--machine-cloud-config). Shared by the machine and cluster reconcilers.
 *
 * The Secret is read with GET only (the controller may neither list nor watch Secrets): at most
 * once per CN_CREDENTIALS_TTL per Secret while objects use it, answered from the cache in the
 * meantime; a new resourceVersion builds a new provider, and the replaced one is freed once the
 * calls and users holding a reference to it let go. The cache holds at most CN_CREDENTIALS_MAX
 * Secrets: one unused for CN_CREDENTIALS_IDLE, or else the least recently used, makes room. Values
 * are never logged. */
#pragma once

#include <json-c/json.h>

#include "http.h"
#include "kube-event.h"
#include "kube-client.h"
#include "provider.h"

/* How old a Secret read may be: for calls on existing instances, and before irreversible ones
 * (creates) and for unusable Secrets, so that a rotated credential is used from then on. */
#define CN_CREDENTIALS_TTL (30 * USEC_PER_SEC)
#define CN_CREDENTIALS_FRESH (5 * USEC_PER_SEC)
#define CN_CREDENTIALS_MAX 1024U
#define CN_CREDENTIALS_IDLE (10 * USEC_PER_MINUTE)

/* Secret layouts (data keys):
 *   secretRef.key set        that key holds a cloud.conf (INI, as --machine-cloud-config);
 *   a "cloud.conf" key       the same;
 *   otherwise                each key is a setting of [Global]: hetzner "token" (and
 *                            "endpoint", "network"); openstack "auth-url", "username"/"user-id",
 *                            "password" or "application-credential-id"/"-name"/"-secret",
 *                            "project-id"/"project-name", "region", domains as in cloud.conf.
 * Settings naming files of the controller (*-file) are refused: a Secret must not make the
 * controller read its own files. The credential itself must be in the Secret (hetzner: token;
 * openstack: auth-url and a password or application credential), never taken from the
 * controller's environment. On error a one-line reason (no value) goes to *ret_reason. */
int cn_credentials_config_from_secret(json_object *secret, const char *key, const char *provider,
                                      json_object **ret_config, char **ret_reason);

typedef struct CnCredentials CnCredentials;

/* Called when a Secret read finished (look again). */
typedef void (*CnCredentialsNotify)(void *userdata);

/* default_provider is borrowed; counter is installed on every provider built from a Secret. */
int cn_credentials_new(CnKubeClient *client, CnHttp *http, const char *provider_name, CnProvider *default_provider,
                       CnProviderRequestCounter counter, void *counter_userdata, CnCredentials **ret);
CnCredentials *cn_credentials_free(CnCredentials *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnCredentials *, cn_credentials_free);

/* Where the Warning Event about a Secret that clusterctl move would leave behind goes (optional). */
void cn_credentials_set_recorder(CnCredentials *c, CnKubeEventRecorder *recorder);

/* Whether clusterctl move carries the Secret with its cluster: it carries the
 * clusterctl.cluster.x-k8s.io/move label, or an owner (clusterctl moves what its owner chain
 * links to a Cluster). Nothing else links a Secret of another name than Cluster API's own. */
bool cn_credentials_secret_movable(json_object *secret);

int cn_credentials_add_listener(CnCredentials *c, CnCredentialsNotify fn, void *userdata);

/* The provider for an object of namespace ns with spec.credentials.secretRef = secret_ref (NULL:
 * the default). 1: *ret is usable now (borrowed: valid until the next call into c; take a
 * reference with cn_provider_ref() to keep it). 0: the Secret is being
 * read; the listeners are told when to ask again. A read older than max_age is repeated (the
 * cached provider still answers meanwhile, unless max_age is CN_CREDENTIALS_FRESH). Negative: the Secret is missing or unusable,
 * with a reason for a condition in *ret_reason (optional, caller frees). */
int cn_credentials_provider(CnCredentials *c, const char *ns, json_object *secret_ref, usec_t max_age,
                            CnProvider **ret, char **ret_reason);

/* The cloud refused p's credentials: the Secret is read again on next use and true is returned
 * (try again: it may have been rotated), unless that read was made for an earlier refusal of the
 * same resourceVersion less than CN_CREDENTIALS_FRESH ago; a p that a newer read of its Secret
 * replaced is tried again too. False means the refusal stands. */
bool cn_credentials_recheck(CnCredentials *c, CnProvider *p);

/* How many Secrets the cache holds (for metrics and tests). */
size_t cn_credentials_size(const CnCredentials *c);
