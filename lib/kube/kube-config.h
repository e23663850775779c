/* SPDX-License-Identifier: Apache-2.0 */
/* Where and how to reach the Kubernetes API: a kubeconfig file (YAML, as kubectl reads it) or the
 * in-cluster service account. The result names the server, the CA to verify it with and the client
 * credentials (client certificate/key, bearer token, or a token file that is re-read when it
 * changes, as projected service-account tokens rotate).
 *
 * Errors are negative errno; functions that can fail for reasons a human must fix also return one
 * clear message through "reterr_message" (optional, caller frees) that names what is missing or
 * wrong (context, user, cluster, CA, file). Secrets (token, key material) never appear in those
 * messages. TLS verification cannot be turned off: insecure-skip-tls-verify: true is refused. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "macro.h"

/* The in-cluster service account directory (token, ca.crt, namespace). */
#define CN_KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct CnKubeConfig {
        /* Base URL without a trailing slash, e.g. "https://10.0.0.1:6443". Always https. */
        char *server;
        /* Names from the kubeconfig that were selected; NULL for the in-cluster config. */
        char *context;
        char *cluster;
        char *user;
        /* Namespace of the context (or the service account's), NULL when none is set. */
        char *namespace;

        /* CA bundle to verify the server: a file, or PEM data (from certificate-authority-data).
         * Exactly one is set: a cluster without a CA is refused rather than trusting the system
         * store, since cluster API servers use their own CA. */
        char *ca_file;
        char *ca_pem;

        /* Client certificate and key: files or PEM data; a certificate always comes with a key. */
        char *client_cert_file;
        char *client_cert_pem;
        char *client_key_file;
        char *client_key_pem; /* secret */

        /* Bearer token: inline, or a file re-read when it changes (see cn_kube_config_get_token). */
        char *token; /* secret */
        char *token_file;

        bool in_cluster;

        /* Private: token file cache. */
        char *token_file_data;
        struct {
                dev_t dev;
                ino_t ino;
                int64_t mtime_nsec;
                off_t size;
        } token_file_stat;
} CnKubeConfig;

CnKubeConfig *cn_kube_config_free(CnKubeConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnKubeConfig *, cn_kube_config_free);
#define _cleanup_kube_config_ _cleanup_(cn_kube_config_freep)

/* Load a kubeconfig file (YAML). context: the context to use, NULL for current-context. Relative
 * file paths in the kubeconfig are resolved against the file's directory, as kubectl does.
 * Errors: -ENOENT (file, or a named context/cluster/user does not exist, or no context selected),
 * -EINVAL (invalid YAML or structure; missing server or CA; non-https server; both file and data
 * for one item; certificate without key), -EPERM (insecure-skip-tls-verify: true), -EOPNOTSUPP
 * (exec/auth-provider/basic-auth users; a client certificate/key pair mixing a file and inline
 * data), -EBADMSG (undecodable base64 *-data), -ENODATA (empty
 * file). Referenced CA/cert/key/token files are checked to be
 * readable. */
int cn_kube_config_load(const char *path, const char *context, CnKubeConfig **ret, char **reterr_message);

/* Same, from an already parsed tree (the YAML loader's output). base_dir: for relative paths
 * (NULL: current directory). origin: file name used in messages (may be NULL). */
int cn_kube_config_from_json(json_object *root, const char *base_dir, const char *origin, const char *context,
                             CnKubeConfig **ret, char **reterr_message);

/* In-cluster config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (IPv6 hosts
 * bracketed), token file sa_dir/token (re-read on rotation), CA sa_dir/ca.crt, namespace from
 * sa_dir/namespace when present. sa_dir NULL means CN_KUBE_SERVICEACCOUNT_DIR.
 * Errors: -ENXIO when the environment variables are not set (not running in a pod), -ENOENT when a
 * file is missing. */
int cn_kube_config_load_in_cluster(const char *sa_dir, CnKubeConfig **ret, char **reterr_message);

/* What the daemons do with --kubeconfig: the given file when path is non-empty; otherwise the
 * in-cluster config when KUBERNETES_SERVICE_HOST is set (sa_dir from env CLOUDNODE_SERVICEACCOUNT_DIR
 * if set, for tests); otherwise $KUBECONFIG (first entry); otherwise -ENOENT with a message. */
int cn_kube_config_load_default(const char *path, const char *context, CnKubeConfig **ret,
                                char **reterr_message);

/* The bearer token to send, or NULL (*ret_token = NULL, returns 0) when the config has none. A
 * token file is stat()ed on each call and re-read when its inode, size or mtime changed; the
 * returned pointer stays valid until the next call or cn_kube_config_free(). A token file that
 * vanished or became empty keeps the last good token and returns it (rotation writes a new file
 * then renames it; a transient error must not drop authentication). -ENOENT/-EIO only when no
 * token was ever read. */
int cn_kube_config_get_token(CnKubeConfig *c, const char **ret_token);

/* Check the client certificate and key with OpenSSL: both parse, the key belongs to the
 * certificate, and the certificate is valid at now_usec (CLOCK_REALTIME µs). ret_not_after_usec
 * (optional): expiry time. Returns 0 when there is no client certificate. Errors:
 * -EKEYEXPIRED (expired, or not yet valid), -EKEYREJECTED (key does not match certificate),
 * -EBADMSG (unparsable PEM), -ENOENT (file). The message names the file (never key material) and
 * the certificate's subject and notAfter date. */
int cn_kube_config_check_client_cert(const CnKubeConfig *c, uint64_t now_usec, uint64_t *ret_not_after_usec,
                                     char **reterr_message);

/* Check that the CA (file or data) holds at least one parsable certificate. -EBADMSG otherwise. */
int cn_kube_config_check_ca(const CnKubeConfig *c, char **reterr_message);
