/* SPDX-License-Identifier: Apache-2.0 */
/* Kubeconfig and in-cluster service account loading (see kube-config.h). */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "fileio.h"
#include "hash-util.h"
#include "json-util.h"
#include "kube-config.h"
#include "log.h"
#include "string-util.h"
#include "yaml-util.h"

/* Tokens and PEM files are small; anything bigger is not what we expect to read. */
#define KUBE_CONFIG_FILE_MAX (4U * 1024U * 1024U)
#define KUBE_TOKEN_FILE_MAX (64U * 1024U)

static int fail(char **reterr_message, int r, const char *format, ...) _printf_(3, 4);
static int fail(char **reterr_message, int r, const char *format, ...) {
        va_list ap;

        assert(r < 0);
        if (reterr_message) {
                char *m = NULL;

                va_start(ap, format);
                if (vasprintf(&m, format, ap) < 0)
                        m = NULL;
                va_end(ap);
                free(*reterr_message);
                *reterr_message = m;
        }
        return r;
}

static void erase_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

CnKubeConfig *cn_kube_config_free(CnKubeConfig *c) {
        if (!c)
                return NULL;
        free(c->server);
        free(c->context);
        free(c->cluster);
        free(c->user);
        free(c->namespace);
        free(c->ca_file);
        free(c->ca_pem);
        free(c->client_cert_file);
        free(c->client_cert_pem);
        free(c->client_key_file);
        erase_free(c->client_key_pem);
        erase_free(c->token);
        free(c->token_file);
        erase_free(c->token_file_data);
        free(c);
        return NULL;
}

/* A key that is present but not a string is a structural error, not an absent value. */
static int get_optional_string(json_object *o, const char *key, const char *what, const char *origin,
                               const char **ret, char **reterr_message) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return fail(reterr_message, -EINVAL, "%s: %s: \"%s\" is not a string", origin, what, key);
        *ret = json_object_get_string(v);
        if (isempty(*ret))
                *ret = NULL;
        return 0;
}

/* kubeconfig lists are [{name: N, KEY: {...}}]. */
static int find_named(json_object *root, const char *list, const char *key, const char *name, const char *origin,
                      json_object **ret, char **reterr_message) {
        json_object *array;
        size_t n;

        if (!json_object_object_get_ex(root, list, &array) || json_object_is_type(array, json_type_null))
                return fail(reterr_message, -ENOENT, "%s: no \"%s\" list, so %s \"%s\" does not exist", origin,
                            list, key, name);
        if (!json_object_is_type(array, json_type_array))
                return fail(reterr_message, -EINVAL, "%s: \"%s\" is not a list", origin, list);

        n = json_object_array_length(array);
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(array, i), *v;
                const char *nm = cn_json_string(e, "name", NULL);

                if (!nm || !streq(nm, name))
                        continue;
                if (!json_object_object_get_ex(e, key, &v) || !json_object_is_type(v, json_type_object))
                        return fail(reterr_message, -EINVAL, "%s: %s \"%s\" has no \"%s\" map", origin, key,
                                    name, key);
                *ret = v;
                return 0;
        }
        return fail(reterr_message, -ENOENT, "%s: %s \"%s\" not found in \"%s\"", origin, key, name, list);
}

static int resolve_path(const char *base_dir, const char *p, char **ret) {
        char *s;

        if (p[0] == '/' || isempty(base_dir))
                s = strdup(p);
        else if (asprintf(&s, "%s/%s", base_dir, p) < 0)
                s = NULL;
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int decode_base64(const char *in, char **ret) {
        _cleanup_free_ void *out = NULL;
        size_t len;
        int r;

        r = cn_base64_decode(in, strlen(in), &out, &len);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || len == 0)
                return -EBADMSG;
        if (strlen(out) != len) /* PEM is text; embedded NULs mean garbage */
                return -EBADMSG;
        *ret = TAKE_PTR(out);
        return 0;
}

/* One "FOO" / "FOO-data" pair: at most one may be set; the file must be readable. */
static int load_file_or_data(json_object *o, const char *file_key, const char *data_key, const char *what,
                             const char *base_dir, const char *origin, char **ret_file, char **ret_pem,
                             char **reterr_message) {
        const char *file, *data;
        int r;

        r = get_optional_string(o, file_key, what, origin, &file, reterr_message);
        if (r < 0)
                return r;
        r = get_optional_string(o, data_key, what, origin, &data, reterr_message);
        if (r < 0)
                return r;
        if (file && data)
                return fail(reterr_message, -EINVAL, "%s: %s sets both %s and %s", origin, what, file_key, data_key);

        if (data) {
                r = decode_base64(data, ret_pem);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return fail(reterr_message, r, "%s: %s: %s is not valid base64", origin, what, data_key);
        } else if (file) {
                r = resolve_path(base_dir, file, ret_file);
                if (r < 0)
                        return r;
                if (access(*ret_file, R_OK) < 0)
                        return fail(reterr_message, -errno, "%s: %s: %s file %s is not readable: %s", origin, what,
                                    file_key, *ret_file, strerror(errno));
        }
        return 0;
}

static int load_cluster(CnKubeConfig *c, json_object *cluster, const char *base_dir, const char *origin,
                        char **reterr_message) {
        _cleanup_free_ char *what = NULL;
        const char *server;
        bool insecure;
        size_t l;
        int r;

        if (asprintf(&what, "cluster \"%s\"", c->cluster) < 0)
                return -ENOMEM;

        r = cn_json_get_bool(cluster, &insecure, "insecure-skip-tls-verify", NULL);
        if (r == -ENOENT)
                insecure = false;
        else if (r < 0)
                return fail(reterr_message, -EINVAL, "%s: %s: insecure-skip-tls-verify is not a boolean", origin,
                            what);
        if (insecure)
                return fail(reterr_message, -EPERM,
                            "%s: %s sets insecure-skip-tls-verify, refusing: TLS verification cannot be disabled",
                            origin, what);

        r = get_optional_string(cluster, "server", what, origin, &server, reterr_message);
        if (r < 0)
                return r;
        if (!server)
                return fail(reterr_message, -EINVAL, "%s: %s has no server", origin, what);
        if (strncasecmp(server, "https://", STRLEN("https://")) != 0 || !server[STRLEN("https://")])
                /* Not echoed: a URL may carry a password, or control characters. */
                return fail(reterr_message, -EINVAL, "%s: %s: server is not an https:// URL", origin, what);
        if (cn_string_has_cc(server, false))
                return fail(reterr_message, -EINVAL, "%s: %s: server contains control characters", origin, what);
        c->server = strdup(server);
        if (!c->server)
                return -ENOMEM;
        l = strlen(c->server);
        while (l > 0 && c->server[l - 1] == '/')
                c->server[--l] = 0;

        r = load_file_or_data(cluster, "certificate-authority", "certificate-authority-data", what, base_dir,
                              origin, &c->ca_file, &c->ca_pem, reterr_message);
        if (r < 0)
                return r;
        if (!c->ca_file && !c->ca_pem)
                return fail(reterr_message, -EINVAL,
                            "%s: %s has no certificate-authority or certificate-authority-data (CA to verify the server)",
                            origin, what);
        return 0;
}

static int load_user(CnKubeConfig *c, json_object *user, const char *base_dir, const char *origin,
                     char **reterr_message) {
        static const char *const unsupported[] = { "exec", "auth-provider", "username", "password" };
        _cleanup_free_ char *what = NULL;
        const char *token, *token_file;
        int r;

        if (asprintf(&what, "user \"%s\"", c->user) < 0)
                return -ENOMEM;

        for (size_t i = 0; i < ELEMENTSOF(unsupported); i++) {
                json_object *v;

                if (json_object_object_get_ex(user, unsupported[i], &v) && !json_object_is_type(v, json_type_null))
                        return fail(reterr_message, -EOPNOTSUPP,
                                    "%s: %s uses \"%s\", which is not supported (use a client certificate, token or tokenFile)",
                                    origin, what, unsupported[i]);
        }

        r = load_file_or_data(user, "client-certificate", "client-certificate-data", what, base_dir, origin,
                              &c->client_cert_file, &c->client_cert_pem, reterr_message);
        if (r < 0)
                return r;
        r = load_file_or_data(user, "client-key", "client-key-data", what, base_dir, origin, &c->client_key_file,
                              &c->client_key_pem, reterr_message);
        if (r < 0)
                return r;
        if ((c->client_cert_file || c->client_cert_pem) != (c->client_key_file || c->client_key_pem))
                return fail(reterr_message, -EINVAL, "%s: %s has a client %s without a client %s", origin, what,
                            c->client_key_file || c->client_key_pem ? "key" : "certificate",
                            c->client_key_file || c->client_key_pem ? "certificate" : "key");

        /* lib/http takes the pair from files or from memory, not one of each. */
        if ((c->client_cert_file && c->client_key_pem) || (c->client_cert_pem && c->client_key_file))
                return fail(reterr_message, -EOPNOTSUPP,
                            "%s: %s mixes a client certificate/key file with inline data; use files or *-data for both",
                            origin, what);

        r = get_optional_string(user, "token", what, origin, &token, reterr_message);
        if (r < 0)
                return r;
        r = get_optional_string(user, "tokenFile", what, origin, &token_file, reterr_message);
        if (r < 0)
                return r;
        if (token) {
                if (cn_string_has_cc(token, false))
                        return fail(reterr_message, -EINVAL, "%s: %s: token contains control characters", origin,
                                    what);
                c->token = strdup(token);
                if (!c->token)
                        return -ENOMEM;
        }
        if (token_file) {
                const char *t;

                r = resolve_path(base_dir, token_file, &c->token_file);
                if (r < 0)
                        return r;
                r = cn_kube_config_get_token(c, &t);
                if (r < 0 && !c->token)
                        return fail(reterr_message, r, "%s: %s: tokenFile %s cannot be read: %s", origin, what,
                                    c->token_file, strerror(-r));
        }
        return 0;
}

static int get_context_field(json_object *ctx, const char *key, bool required, const char *context,
                             const char *origin, const char **ret, char **reterr_message) {
        int r;

        r = get_optional_string(ctx, key, "context", origin, ret, reterr_message);
        if (r < 0)
                return r;
        if (!*ret && required)
                return fail(reterr_message, -EINVAL, "%s: context \"%s\" names no %s", origin, context, key);
        return 0;
}

int cn_kube_config_from_json(json_object *root, const char *base_dir, const char *origin, const char *context,
                             CnKubeConfig **ret, char **reterr_message) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        json_object *ctx, *cluster, *user;
        const char *cluster_name, *user_name, *ns;
        int r;

        assert(ret);
        origin = origin ?: "kubeconfig";

        if (!root || !json_object_is_type(root, json_type_object))
                return fail(reterr_message, -EINVAL, "%s: not a kubeconfig (top level is not a map)", origin);

        if (isempty(context)) {
                r = get_optional_string(root, "current-context", "top level", origin, &context, reterr_message);
                if (r < 0)
                        return r;
                if (!context)
                        return fail(reterr_message, -ENOENT,
                                    "%s: no current-context is set and no context was given", origin);
        }

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->context = strdup(context);
        if (!c->context)
                return -ENOMEM;

        r = find_named(root, "contexts", "context", context, origin, &ctx, reterr_message);
        if (r < 0)
                return r;

        r = get_context_field(ctx, "cluster", true, context, origin, &cluster_name, reterr_message);
        if (r < 0)
                return r;
        r = get_context_field(ctx, "user", true, context, origin, &user_name, reterr_message);
        if (r < 0)
                return r;
        r = get_context_field(ctx, "namespace", false, context, origin, &ns, reterr_message);
        if (r < 0)
                return r;

        c->cluster = strdup(cluster_name);
        c->user = strdup(user_name);
        if (!c->cluster || !c->user)
                return -ENOMEM;
        if (ns) {
                c->namespace = strdup(ns);
                if (!c->namespace)
                        return -ENOMEM;
        }

        r = find_named(root, "clusters", "cluster", cluster_name, origin, &cluster, reterr_message);
        if (r < 0)
                return r;
        r = load_cluster(c, cluster, base_dir, origin, reterr_message);
        if (r < 0)
                return r;

        r = find_named(root, "users", "user", user_name, origin, &user, reterr_message);
        if (r < 0)
                return r;
        r = load_user(c, user, base_dir, origin, reterr_message);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

static int kube_config_parse_file(const char *path, json_object **ret, char **reterr_message) {
        _cleanup_free_ char *err = NULL;
        int r;

        r = cn_yaml_parse_file(NULL, path, KUBE_CONFIG_FILE_MAX, ret, &err);
        if (r == -ENOMEM)
                return r;
        if (r == -EBADMSG)
                return fail(reterr_message, -EINVAL, "kubeconfig %s is not valid YAML: %s", path, strna(err));
        if (r == -ENODATA)
                return fail(reterr_message, r, "kubeconfig %s is empty", path);
        if (r < 0)
                return fail(reterr_message, r, "kubeconfig %s cannot be read: %s", path, strerror(-r));
        return 0;
}

int cn_kube_config_load(const char *path, const char *context, CnKubeConfig **ret, char **reterr_message) {
        _cleanup_json_ json_object *root = NULL;
        _cleanup_free_ char *dir = NULL;
        char *slash;
        int r;

        assert(path);
        assert(ret);

        r = kube_config_parse_file(path, &root, reterr_message);
        if (r < 0)
                return r;

        dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash)
                *(slash == dir ? slash + 1 : slash) = 0;
        else {
                free(dir);
                dir = NULL;
        }

        return cn_kube_config_from_json(root, dir, path, context, ret, reterr_message);
}

static int read_sa_file(const char *dir, const char *name, bool required, char **ret, char **reterr_message) {
        _cleanup_free_ char *p = NULL, *data = NULL;
        int r;

        if (asprintf(&p, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        r = cn_read_file(NULL, p, KUBE_TOKEN_FILE_MAX, &data, NULL);
        if (r == -ENOENT && !required) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return fail(reterr_message, r, "in-cluster config: cannot read service account %s %s: %s", name, p,
                            strerror(-r));
        *ret = TAKE_PTR(data);
        return 0;
}

static char *strip_inplace(char *s) {
        size_t l;

        s += strspn(s, " \t\r\n");
        l = strlen(s);
        while (l > 0 && strchr(" \t\r\n", s[l - 1]))
                s[--l] = 0;
        return s;
}

int cn_kube_config_load_in_cluster(const char *sa_dir, CnKubeConfig **ret, char **reterr_message) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *ns = NULL, *ca = NULL;
        const char *host, *port, *t;
        int r;

        assert(ret);
        sa_dir = sa_dir ?: CN_KUBE_SERVICEACCOUNT_DIR;

        host = getenv("KUBERNETES_SERVICE_HOST");
        port = getenv("KUBERNETES_SERVICE_PORT");
        if (isempty(host) || isempty(port))
                return fail(reterr_message, -ENXIO,
                            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod?)");
        if (cn_string_has_cc(host, false) || cn_string_has_cc(port, false) || strchr(host, '/') || strchr(port, '/'))
                return fail(reterr_message, -EINVAL, "in-cluster config: invalid KUBERNETES_SERVICE_HOST/PORT");

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->in_cluster = true;
        if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0)
                return -ENOMEM;

        if (asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0 || asprintf(&c->token_file, "%s/token", sa_dir) < 0)
                return -ENOMEM;
        if (access(c->ca_file, R_OK) < 0)
                return fail(reterr_message, -errno, "in-cluster config: CA %s is not readable: %s", c->ca_file,
                            strerror(errno));
        r = cn_kube_config_get_token(c, &t);
        if (r < 0)
                return fail(reterr_message, r, "in-cluster config: token %s cannot be read: %s", c->token_file,
                            strerror(-r));

        r = read_sa_file(sa_dir, "namespace", false, &ns, reterr_message);
        if (r < 0)
                return r;
        if (ns && !isempty(strip_inplace(ns))) {
                c->namespace = strdup(strip_inplace(ns));
                if (!c->namespace)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(c);
        return 0;
}

int cn_kube_config_load_default(const char *path, const char *context, CnKubeConfig **ret,
                                char **reterr_message) {
        _cleanup_free_ char *first = NULL;
        const char *e;

        if (!isempty(path))
                return cn_kube_config_load(path, context, ret, reterr_message);

        if (!isempty(getenv("KUBERNETES_SERVICE_HOST")))
                return cn_kube_config_load_in_cluster(getenv("CLOUDNODE_SERVICEACCOUNT_DIR"), ret, reterr_message);

        e = getenv("KUBECONFIG");
        if (!isempty(e)) {
                first = strndup(e, strcspn(e, ":"));
                if (!first)
                        return -ENOMEM;
                if (!isempty(first))
                        return cn_kube_config_load(first, context, ret, reterr_message);
        }

        return fail(reterr_message, -ENOENT,
                    "no kubeconfig: --kubeconfig not given, not running in a pod, $KUBECONFIG not set");
}

int cn_kube_config_get_token(CnKubeConfig *c, const char **ret_token) {
        _cleanup_free_ char *data = NULL;
        struct stat st;
        int r;

        assert(c);
        assert(ret_token);

        if (c->token) {
                *ret_token = c->token;
                return 0;
        }
        if (!c->token_file) {
                *ret_token = NULL;
                return 0;
        }

        /* Keep the last good token on transient errors: rotation replaces the file. A change between
         * stat() and the read is caught by the next call, which sees a different stat. */
        if (stat(c->token_file, &st) < 0) {
                r = -errno;
                goto keep;
        }
        if (c->token_file_data && st.st_dev == c->token_file_stat.dev && st.st_ino == c->token_file_stat.ino &&
            st.st_size == c->token_file_stat.size &&
            (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == c->token_file_stat.mtime_nsec) {
                *ret_token = c->token_file_data;
                return 0;
        }

        r = cn_read_file(NULL, c->token_file, KUBE_TOKEN_FILE_MAX, &data, NULL);
        if (r < 0)
                goto keep;
        {
                char *t = strip_inplace(data);

                if (isempty(t) || cn_string_has_cc(t, false)) {
                        r = -EBADMSG;
                        goto keep;
                }
                memmove(data, t, strlen(t) + 1);
        }

        erase_free(c->token_file_data);
        c->token_file_data = TAKE_PTR(data);
        c->token_file_stat.dev = st.st_dev;
        c->token_file_stat.ino = st.st_ino;
        c->token_file_stat.size = st.st_size;
        c->token_file_stat.mtime_nsec = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        log_debug("Read bearer token from %s.", c->token_file);
        *ret_token = c->token_file_data;
        return 0;

keep:
        if (data)
                explicit_bzero(data, strlen(data));
        if (c->token_file_data) {
                log_debug_errno(r, "Failed to re-read token file %s, keeping the previous token: %m", c->token_file);
                *ret_token = c->token_file_data;
                return 0;
        }
        return r;
}

static BIO *open_pem(const char *file, const char *pem) {
        if (pem)
                return BIO_new_mem_buf(pem, -1);
        return BIO_new_file(file, "r");
}

static int asn1_time_to_usec(const ASN1_TIME *t, uint64_t *ret) {
        struct tm tm = {};
        time_t s;

        if (ASN1_TIME_to_tm(t, &tm) != 1)
                return -EINVAL;
        s = timegm(&tm);
        if (s < 0)
                return -ERANGE;
        *ret = (uint64_t) s * 1000000ULL;
        return 0;
}

static void format_utc(uint64_t usec, char *buf, size_t size) {
        time_t s = (time_t) (usec / 1000000ULL);
        struct tm tm;

        if (!gmtime_r(&s, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "@%llu", (unsigned long long) (usec / 1000000ULL));
}

int cn_kube_config_check_client_cert(const CnKubeConfig *c, uint64_t now_usec, uint64_t *ret_not_after_usec,
                                     char **reterr_message) {
        _cleanup_(BIO_free_allp) BIO *cb = NULL, *kb = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        const char *cert_name, *key_name;
        char subject[256] = "?", when[64];
        uint64_t not_before, not_after;

        assert(c);

        if (!c->client_cert_file && !c->client_cert_pem)
                return 0;

        cert_name = c->client_cert_file ?: "client-certificate-data";
        key_name = c->client_key_file ?: "client-key-data";

        cb = open_pem(c->client_cert_file, c->client_cert_pem);
        if (!cb)
                return fail(reterr_message, c->client_cert_pem ? -ENOMEM : -ENOENT,
                            "client certificate %s cannot be opened", cert_name);
        cert = PEM_read_bio_X509(cb, NULL, NULL, NULL);
        if (!cert) {
                ERR_clear_error();
                return fail(reterr_message, -EBADMSG, "client certificate %s is not a PEM certificate", cert_name);
        }
        X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof(subject));

        kb = open_pem(c->client_key_file, c->client_key_pem);
        if (!kb)
                return fail(reterr_message, c->client_key_pem ? -ENOMEM : -ENOENT, "client key %s cannot be opened",
                            key_name);
        key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
        if (!key) {
                ERR_clear_error();
                return fail(reterr_message, -EBADMSG, "client key %s is not a PEM private key", key_name);
        }
        if (X509_check_private_key(cert, key) != 1) {
                ERR_clear_error();
                return fail(reterr_message, -EKEYREJECTED,
                            "client key %s does not belong to client certificate %s (subject %s)", key_name,
                            cert_name, subject);
        }

        if (asn1_time_to_usec(X509_get0_notBefore(cert), &not_before) < 0 ||
            asn1_time_to_usec(X509_get0_notAfter(cert), &not_after) < 0)
                return fail(reterr_message, -EBADMSG, "client certificate %s has unreadable validity dates",
                            cert_name);
        if (now_usec >= not_after) {
                format_utc(not_after, when, sizeof(when));
                return fail(reterr_message, -EKEYEXPIRED, "client certificate %s (subject %s) expired at %s",
                            cert_name, subject, when);
        }
        if (now_usec < not_before) {
                format_utc(not_before, when, sizeof(when));
                return fail(reterr_message, -EKEYEXPIRED,
                            "client certificate %s (subject %s) is not valid before %s (clock wrong?)", cert_name,
                            subject, when);
        }

        if (ret_not_after_usec)
                *ret_not_after_usec = not_after;
        return 0;
}

int cn_kube_config_check_ca(const CnKubeConfig *c, char **reterr_message) {
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        const char *name;

        assert(c);

        name = c->ca_file ?: "certificate-authority-data";
        if (!c->ca_file && !c->ca_pem)
                return fail(reterr_message, -EINVAL, "no CA configured");
        b = open_pem(c->ca_file, c->ca_pem);
        if (!b)
                return fail(reterr_message, c->ca_pem ? -ENOMEM : -ENOENT, "CA %s cannot be opened", name);
        cert = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (!cert) {
                ERR_clear_error();
                return fail(reterr_message, -EBADMSG, "CA %s holds no PEM certificate", name);
        }
        return 0;
}
