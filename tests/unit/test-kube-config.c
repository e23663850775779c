/* SPDX-License-Identifier: Apache-2.0 */
/* Kubeconfig and in-cluster loading: good files, every kind of missing piece, refused options,
 * token file rotation, client certificate expiry and key mismatch. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/ec.h>
#include <openssl/pem.h>

#include "kube-config.h"
#include "tap.h"

static char dir[] = "/tmp/cn-test-kube-config-XXXXXX";

static char *path_in_dir(const char *name) {
        char *p;

        assert(asprintf(&p, "%s/%s", dir, name) >= 0);
        return p;
}

static void write_file(const char *name, const char *content) {
        _cleanup_free_ char *p = path_in_dir(name), *tmp = NULL;
        FILE *f;

        /* Written through rename like a rotating token projection, so the inode changes. */
        assert(asprintf(&tmp, "%s.tmp", p) >= 0);
        f = fopen(tmp, "we");
        assert(f);
        fputs(content, f);
        assert(fclose(f) == 0);
        assert(rename(tmp, p) == 0);
}

static int load_str(const char *content, const char *context, CnKubeConfig **ret, char **msg) {
        _cleanup_free_ char *p = path_in_dir("kubeconfig");

        write_file("kubeconfig", content);
        free(*msg);
        *msg = NULL;
        return cn_kube_config_load(p, context, ret, msg);
}

static const char *ca_b64(void);

/* A kubeconfig in JSON form with placeholders: CLUSTER and USER are spliced in. */
static char *kubeconfig(const char *current_context, const char *cluster_body, const char *user_body) {
        char *s;

        assert(asprintf(&s,
                        "{\"apiVersion\":\"v1\",\"kind\":\"Config\",%s%s%s"
                        "\"contexts\":[{\"name\":\"other\",\"context\":{\"cluster\":\"c2\",\"user\":\"u2\"}},"
                        "{\"name\":\"main\",\"context\":{\"cluster\":\"c1\",\"user\":\"u1\",\"namespace\":\"kube-system\"}},"
                        "{\"name\":\"nouser\",\"context\":{\"cluster\":\"c1\",\"user\":\"missing\"}},"
                        "{\"name\":\"nocluster\",\"context\":{\"cluster\":\"missing\",\"user\":\"u1\"}}],"
                        "\"clusters\":[{\"name\":\"c1\",\"cluster\":{%s}}],"
                        "\"users\":[{\"name\":\"u1\",\"user\":{%s}}]}",
                        current_context ? "\"current-context\":\"" : "", current_context ?: "",
                        current_context ? "\"," : "", cluster_body, user_body) >= 0);
        return s;
}

/* --- certificates made on the fly --- */

static EVP_PKEY *make_key(void) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        assert(k);
        return k;
}

static char *pem_cert(EVP_PKEY *key, long not_before_offset, long not_after_offset, const char *cn) {
        _cleanup_(X509_freep) X509 *x = X509_new();
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        X509_NAME *name;
        char *data, *s;
        long n;

        assert(x && b);
        X509_set_version(x, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), not_before_offset);
        X509_gmtime_adj(X509_getm_notAfter(x), not_after_offset);
        X509_set_pubkey(x, key);
        name = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1, 0);
        X509_set_issuer_name(x, name);
        assert(X509_sign(x, key, EVP_sha256()) > 0);
        assert(PEM_write_bio_X509(b, x) == 1);
        n = BIO_get_mem_data(b, &data);
        s = strndup(data, (size_t) n);
        assert(s);
        return s;
}

static char *pem_key(EVP_PKEY *key) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        char *data, *s;
        long n;

        assert(PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) == 1);
        n = BIO_get_mem_data(b, &data);
        s = strndup(data, (size_t) n);
        assert(s);
        return s;
}

static char *b64(const char *s) {
        size_t n = strlen(s);
        char *out = malloc(4 * ((n + 2) / 3) + 1);

        assert(out);
        EVP_EncodeBlock((unsigned char *) out, (const unsigned char *) s, (int) n);
        return out;
}

static char *ca_pem_data, *ca_b64_data;
static const char *ca_b64(void) {
        return ca_b64_data;
}

#define CLUSTER_OK(buf) (snprintf(buf, sizeof(buf), "\"server\":\"https://127.0.0.1:6443/\",\"certificate-authority-data\":\"%s\"", ca_b64()), buf)

static void test_good(void) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *msg = NULL, *k = NULL;
        char cl[4096];
        int r;

        k = kubeconfig("main", CLUSTER_OK(cl), "\"token\":\"s3cr3t-token\"");
        r = load_str(k, NULL, &c, &msg);
        TAP_EQ_INT(r, 0, "valid kubeconfig loads");
        if (r < 0) {
                printf("# %s\n", msg);
                return;
        }
        TAP_EQ_STR(c->server, "https://127.0.0.1:6443", "server without trailing slash");
        TAP_EQ_STR(c->context, "main", "current-context is used");
        TAP_EQ_STR(c->cluster, "c1", "cluster of the context");
        TAP_EQ_STR(c->user, "u1", "user of the context");
        TAP_EQ_STR(c->namespace, "kube-system", "namespace of the context");
        TAP_EQ_STR(c->ca_pem, ca_pem_data, "certificate-authority-data is decoded");
        TAP_OK(!c->ca_file, "no CA file when data is given");
        TAP_EQ_INT(cn_kube_config_check_ca(c, NULL), 0, "decoded CA parses");
        {
                const char *t = NULL;
                TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "inline token");
                TAP_EQ_STR(t, "s3cr3t-token", "inline token value");
        }
        TAP_EQ_INT(cn_kube_config_check_client_cert(c, 0, NULL, NULL), 0, "no client cert: nothing to check");
}

static void expect_error(const char *what, const char *content, const char *context, int want, const char *needle) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *msg = NULL;
        int r;

        r = load_str(content, context, &c, &msg);
        TAP_EQ_INT(r, want, what);
        printf("# message: %s\n", strna(msg));
        TAP_OK(msg && strstr(msg, needle), "%s: message names \"%s\"", what, needle);
        TAP_OK(!c, "%s: nothing returned", what);
        TAP_OK(!msg || !strstr(msg, "s3cr3t"), "%s: message does not leak the token", what);
}

/* YAML errors say where; the value, which may be the credential, never shows. */
static void expect_value_hidden(const char *what, const char *content, const char *needle, const char *value) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *msg = NULL;

        TAP_EQ_INT(load_str(content, NULL, &c, &msg), -EINVAL, what);
        printf("# message: %s\n", strna(msg));
        TAP_OK(msg && strstr(msg, needle), "%s: message names \"%s\"", what, needle);
        TAP_OK(msg && !strstr(msg, value), "%s: message does not show the value", what);
}

static void expect_kubeconfig_error(const char *what, const char *cluster_body, const char *user_body,
                                    const char *current, const char *context, int want, const char *needle) {
        _cleanup_free_ char *k = kubeconfig(current, cluster_body, user_body);
        expect_error(what, k, context, want, needle);
}

static void test_errors(void) {
        _cleanup_free_ char *withca = NULL, *insecure = NULL, *both = NULL;
        char cl[4096];

        withca = strdup(CLUSTER_OK(cl));
        assert(asprintf(&insecure, "%s,\"insecure-skip-tls-verify\":true", withca) >= 0);
        assert(asprintf(&both, "%s,\"certificate-authority\":\"/etc/hostname\"", withca) >= 0);

        expect_kubeconfig_error("no current-context", withca, "\"token\":\"s3cr3t\"", NULL, NULL, -ENOENT,
                                "current-context");
        expect_kubeconfig_error("unknown context", withca, "\"token\":\"s3cr3t\"", NULL, "nope", -ENOENT,
                                "context \"nope\"");
        expect_kubeconfig_error("context names a missing user", withca, "\"token\":\"s3cr3t\"", NULL, "nouser",
                                -ENOENT, "user \"missing\"");
        expect_kubeconfig_error("context names a missing cluster", withca, "\"token\":\"s3cr3t\"", NULL,
                                "nocluster", -ENOENT, "cluster \"missing\"");
        expect_kubeconfig_error("cluster without CA", "\"server\":\"https://127.0.0.1:6443\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -EINVAL, "certificate-authority");
        expect_kubeconfig_error("insecure-skip-tls-verify refused", insecure, "\"token\":\"s3cr3t\"", "main", NULL,
                                -EPERM, "insecure-skip-tls-verify");
        expect_kubeconfig_error("plain http server with a password refused",
                                "\"server\":\"http://u:s3cr3t@127.0.0.1:8080\",\"certificate-authority-data\":\"AAAA\"",
                                "\"token\":\"x\"", "main", NULL, -EINVAL, "https");
        expect_kubeconfig_error("plain http server refused",
                                "\"server\":\"http://127.0.0.1:8080\",\"certificate-authority-data\":\"AAAA\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -EINVAL, "https");
        expect_kubeconfig_error("CA file and data both set", both, "\"token\":\"s3cr3t\"", "main", NULL, -EINVAL,
                                "both");
        expect_kubeconfig_error("undecodable certificate-authority-data",
                                "\"server\":\"https://h\",\"certificate-authority-data\":\"!!notbase64!!\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -EBADMSG, "base64");
        expect_kubeconfig_error("exec plugin refused", withca, "\"token\":\"s3cr3t\",\"exec\":{\"command\":\"x\"}",
                                "main", NULL, -EOPNOTSUPP, "exec");
        expect_kubeconfig_error("certificate without key", withca, "\"client-certificate\":\"/etc/hostname\"",
                                "main", NULL, -EINVAL, "without a client key");
        expect_kubeconfig_error("certificate file with inline key", withca,
                                "\"client-certificate\":\"/etc/hostname\",\"client-key-data\":\"QUFB\"", "main", NULL,
                                -EOPNOTSUPP, "mixes");
        expect_kubeconfig_error("unreadable tokenFile", withca, "\"tokenFile\":\"does-not-exist\"", "main", NULL,
                                -ENOENT, "does-not-exist");
        expect_kubeconfig_error("cluster without server", "\"certificate-authority-data\":\"AAAA\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -EINVAL, "no server");
        expect_kubeconfig_error("missing CA file",
                                "\"server\":\"https://h\",\"certificate-authority\":\"missing-ca.crt\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -ENOENT, "missing-ca.crt");
        expect_kubeconfig_error("server of wrong type", "\"server\":42,\"certificate-authority-data\":\"AAAA\"",
                                "\"token\":\"s3cr3t\"", "main", NULL, -EINVAL, "server");

        expect_error("invalid YAML", "{\"clusters\": [", NULL, -EINVAL, "kubeconfig");
        expect_error("truncated document", "{\"current-context\":\"main\",\"contexts\":[{\"name\"", NULL, -EINVAL,
                     "kubeconfig");
        expect_error("top level not a map", "[1,2]", NULL, -EINVAL, "not a kubeconfig");

        {
                _cleanup_kube_config_ CnKubeConfig *c = NULL;
                _cleanup_free_ char *msg = NULL, *p = path_in_dir("no-such-kubeconfig");
                TAP_EQ_INT(cn_kube_config_load(p, NULL, &c, &msg), -ENOENT, "missing kubeconfig file");
                TAP_OK(msg && strstr(msg, "no-such-kubeconfig"), "message names the missing file");
        }
}

static void test_yaml(void) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *msg = NULL, *y = NULL, *dup = NULL, *insecure = NULL;
        int r;

        /* The shape kubeadm writes to admin.conf. */
        assert(asprintf(&y,
                        "apiVersion: v1\n"
                        "kind: Config\n"
                        "clusters:\n"
                        "- cluster:\n"
                        "    certificate-authority-data: %s\n"
                        "    server: https://api.example.test:6443\n"
                        "  name: kubernetes\n"
                        "contexts:\n"
                        "- context:\n"
                        "    cluster: kubernetes\n"
                        "    user: kubernetes-admin\n"
                        "  name: kubernetes-admin@kubernetes\n"
                        "current-context: kubernetes-admin@kubernetes\n"
                        "preferences: {}\n"
                        "users:\n"
                        "- name: kubernetes-admin\n"
                        "  user:\n"
                        "    token: \"s3cr3t-yaml\"\n",
                        ca_b64()) >= 0);
        r = load_str(y, NULL, &c, &msg);
        TAP_EQ_INT(r, 0, "YAML kubeconfig loads");
        if (r < 0)
                printf("# %s\n", msg);
        TAP_EQ_STR(c ? c->server : NULL, "https://api.example.test:6443", "server from YAML");
        TAP_EQ_STR(c ? c->ca_pem : NULL, ca_pem_data, "CA data from YAML");
        TAP_EQ_STR(c ? c->token : NULL, "s3cr3t-yaml", "token from YAML");

        assert(asprintf(&dup, "%s" "current-context: other\n", y) >= 0);
        expect_error("duplicate key in YAML", dup, NULL, -EINVAL, "not valid YAML");

        assert(asprintf(&insecure,
                        "clusters:\n- name: c\n  cluster:\n    server: https://h\n    certificate-authority-data: %s\n"
                        "    insecure-skip-tls-verify: true\n"
                        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                        "users:\n- name: u\n  user: {token: s3cr3t}\ncurrent-context: x\n",
                        ca_b64()) >= 0);
        expect_error("insecure-skip-tls-verify: true (YAML boolean) refused", insecure, NULL, -EPERM,
                     "insecure-skip-tls-verify");
        expect_error("invalid YAML indentation", "clusters:\n- name: c\n   cluster: [\n", NULL, -EINVAL,
                     "not valid YAML");
        expect_error("empty file", "", NULL, -ENODATA, "is empty");

        /* A malformed credentials file must not put the credential in the journal: where, not what. */
        expect_error("token with a wrong explicit tag", "users:\n- name: u\n  user: {token: !!int s3cr3t}\n", NULL,
                     -EINVAL, "line 3 column");
        expect_error("token with an unknown tag", "users:\n- name: u\n  user: {token: !<s3cr3t> x}\n", NULL,
                     -EINVAL, "line 3 column");
        expect_error("token as an unknown collection tag", "users:\n- name: u\n  user: !s3cr3t {token: x}\n",
                     NULL, -EINVAL, "line 3 column");
        {
                /* 400 digits: beyond a double, so no number at all. */
                char digits[401];
                _cleanup_free_ char *doc = NULL;

                for (size_t i = 0; i < 400; i++)
                        digits[i] = "9876543210"[i % 10];
                digits[400] = 0;
                assert(asprintf(&doc, "users:\n- name: u\n  user: {token: %s}\n", digits) >= 0);
                expect_value_hidden("token that is a number out of range", doc, "line 3 column", digits + 380);
        }
        expect_value_hidden("token that is a float out of range", "users:\n- name: u\n  user: {token: 31337e99999}\n",
                            "line 3 column", "31337e99999");
}

static void test_relative_paths_and_token_rotation(void) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        _cleanup_free_ char *msg = NULL, *k = NULL, *ca = path_in_dir("ca.crt"), *tf = path_in_dir("token");
        const char *t = NULL;
        int r;

        write_file("ca.crt", ca_pem_data);
        write_file("token", "first-token\n");
        k = kubeconfig("main", "\"server\":\"https://[::1]:6443\",\"certificate-authority\":\"ca.crt\"",
                       "\"tokenFile\":\"token\"");
        r = load_str(k, NULL, &c, &msg);
        TAP_EQ_INT(r, 0, "relative CA and tokenFile load");
        if (r < 0) {
                printf("# %s\n", msg);
                return;
        }
        TAP_EQ_STR(c->ca_file, ca, "relative CA path resolved against the kubeconfig's directory");
        TAP_EQ_STR(c->token_file, tf, "relative tokenFile resolved");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "token from file");
        TAP_EQ_STR(t, "first-token", "token file content without the newline");

        write_file("token", "second-token");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "rotated token file");
        TAP_EQ_STR(t, "second-token", "rotated token is re-read");

        assert(unlink(tf) == 0);
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "vanished token file");
        TAP_EQ_STR(t, "second-token", "vanished token file keeps the last good token");

        write_file("token", "  \n");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "empty token file");
        TAP_EQ_STR(t, "second-token", "empty token file keeps the last good token");

        write_file("token", "third-token");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "token file back");
        TAP_EQ_STR(t, "third-token", "new token after the gap");
}

static void test_client_cert(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = make_key(), *other = make_key();
        _cleanup_free_ char *good = pem_cert(key, -3600, 3600 * 24, "system:node:n1"),
                            *expired = pem_cert(key, -7200, -3600, "system:node:old"), *kpem = pem_key(key),
                            *opem = pem_key(other), *k = NULL, *msg = NULL, *u = NULL;
        _cleanup_free_ char *gb = b64(good), *kb = b64(kpem);
        _cleanup_kube_config_ CnKubeConfig *c = NULL;
        char cl[4096];
        uint64_t now = (uint64_t) time(NULL) * 1000000ULL, not_after = 0;
        int r;

        assert(asprintf(&u, "\"client-certificate-data\":\"%s\",\"client-key-data\":\"%s\"", gb, kb) >= 0);
        k = kubeconfig("main", CLUSTER_OK(cl), u);
        r = load_str(k, NULL, &c, &msg);
        TAP_EQ_INT(r, 0, "client certificate data loads");
        if (r < 0)
                return;
        TAP_EQ_INT(cn_kube_config_check_client_cert(c, now, &not_after, &msg), 0, "valid certificate and key");
        TAP_OK(not_after > now + 3600ULL * 1000000ULL * 23 && not_after <= now + 3600ULL * 1000000ULL * 25,
               "expiry reported");

        free(c->client_cert_pem);
        c->client_cert_pem = strdup(expired);
        r = cn_kube_config_check_client_cert(c, now, NULL, &msg);
        TAP_EQ_INT(r, -EKEYEXPIRED, "expired certificate detected");
        printf("# message: %s\n", strna(msg));
        TAP_OK(msg && strstr(msg, "expired at") && strstr(msg, "system:node:old"),
               "expiry message names the subject and date");

        free(c->client_cert_pem);
        c->client_cert_pem = strdup(good);
        free(c->client_key_pem);
        c->client_key_pem = strdup(opem);
        r = cn_kube_config_check_client_cert(c, now, NULL, &msg);
        TAP_EQ_INT(r, -EKEYREJECTED, "key of another certificate detected");
        printf("# message: %s\n", strna(msg));
        TAP_OK(msg && strstr(msg, "does not belong") && !strstr(msg, "PRIVATE KEY"),
               "mismatch message is clear and carries no key material");

        free(c->client_key_pem);
        c->client_key_pem = strdup("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n");
        TAP_EQ_INT(cn_kube_config_check_client_cert(c, now, NULL, &msg), -EBADMSG, "garbage key detected");
}

static void test_in_cluster(void) {
        _cleanup_kube_config_ CnKubeConfig *c = NULL, *c2 = NULL, *c3 = NULL;
        _cleanup_free_ char *msg = NULL, *sa = path_in_dir("sa");
        const char *t = NULL;
        int r;

        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        TAP_EQ_INT(cn_kube_config_load_in_cluster(sa, &c, &msg), -ENXIO, "in-cluster without environment");
        TAP_OK(msg && strstr(msg, "KUBERNETES_SERVICE_HOST"), "message names the variable");

        assert(mkdir(sa, 0755) == 0);
        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        r = cn_kube_config_load_in_cluster(sa, &c, &msg);
        TAP_EQ_INT(r, -ENOENT, "in-cluster without CA");
        TAP_OK(msg && strstr(msg, "ca.crt"), "message names ca.crt");

        write_file("sa/ca.crt", ca_pem_data);
        r = cn_kube_config_load_in_cluster(sa, &c, &msg);
        TAP_EQ_INT(r, -ENOENT, "in-cluster without token");
        TAP_OK(msg && strstr(msg, "token"), "message names the token");

        write_file("sa/token", "sa-token-1");
        write_file("sa/namespace", "cloudnode-system\n");
        r = cn_kube_config_load_in_cluster(sa, &c, &msg);
        TAP_EQ_INT(r, 0, "in-cluster config loads");
        if (r < 0)
                return;
        TAP_EQ_STR(c->server, "https://10.96.0.1:443", "server from the environment");
        TAP_EQ_STR(c->namespace, "cloudnode-system", "namespace from the service account");
        TAP_OK(c->in_cluster, "marked in-cluster");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "service account token");
        TAP_EQ_STR(t, "sa-token-1", "service account token value");
        write_file("sa/token", "sa-token-2");
        TAP_EQ_INT(cn_kube_config_get_token(c, &t), 0, "rotated service account token");
        TAP_EQ_STR(t, "sa-token-2", "rotated service account token is re-read");

        setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
        TAP_EQ_INT(cn_kube_config_load_in_cluster(sa, &c2, NULL), 0, "IPv6 service host");
        TAP_EQ_STR(c2 ? c2->server : NULL, "https://[fd00::1]:443", "IPv6 host is bracketed");

        setenv("CLOUDNODE_SERVICEACCOUNT_DIR", sa, 1);
        TAP_EQ_INT(cn_kube_config_load_default(NULL, NULL, &c3, NULL), 0, "default: in-cluster when in a pod");
        TAP_OK(c3 && c3->in_cluster, "default picked the in-cluster config");
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        unsetenv("KUBECONFIG");
        TAP_EQ_INT(cn_kube_config_load_default(NULL, NULL, &c3, &msg), -ENOENT, "default: nothing configured");
        TAP_OK(msg && strstr(msg, "--kubeconfig"), "message says what to configure");
}

int main(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *cakey = NULL;

        assert(mkdtemp(dir));
        cakey = make_key();
        ca_pem_data = pem_cert(cakey, -60, 3600, "test-ca");
        ca_b64_data = b64(ca_pem_data);

        test_good();
        test_errors();
        test_yaml();
        test_relative_paths_and_token_rotation();
        test_client_cert();
        test_in_cluster();

        free(ca_pem_data);
        free(ca_b64_data);
        {
                _cleanup_free_ char *cmd = NULL;
                assert(asprintf(&cmd, "rm -rf '%s'", dir) >= 0);
                (void) system(cmd);
        }
        return tap_done();
}
