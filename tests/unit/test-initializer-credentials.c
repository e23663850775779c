/* SPDX-License-Identifier: Apache-2.0 */
/* The cloud credentials of a mounted Secret as settings: the Cloud Credential Operator's keys of
 * each cloud, cloudnode's own, the kubelet's ..data layout, the hash that tells a rotation, and
 * a clouds.yaml that cannot be used. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud-config.h"
#include "hash-util.h"
#include "initializer-credentials.h"
#include "json-util.h"
#include "macro.h"
#include "tap.h"

static char *secret_dir(const char *const *kv) {
        char tmpl[] = "/tmp/cn-credentials-XXXXXX", *dir, *data = NULL, *p = NULL;

        dir = mkdtemp(tmpl);
        if (!dir || asprintf(&data, "%s/..2026_11_24", dir) < 0 || mkdir(data, 0700) < 0)
                abort();
        for (; kv[0]; kv += 2) {
                FILE *f;

                free(p);
                if (asprintf(&p, "%s/%s", data, kv[0]) < 0 || !(f = fopen(p, "we")))
                        abort();
                fputs(kv[1], f);
                fclose(f);
                free(p);
                /* each key a link through ..data, as the kubelet lays a Secret out */
                if (asprintf(&p, "%s/%s", dir, kv[0]) < 0)
                        abort();
                {
                        char *target = NULL;

                        if (asprintf(&target, "..data/%s", kv[0]) < 0 || symlink(target, p) < 0)
                                abort();
                        free(target);
                }
        }
        free(p);
        if (asprintf(&p, "%s/..data", dir) < 0 || symlink("..2026_11_24", p) < 0)
                abort();
        free(p);
        free(data);
        return strdup(dir);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

/* The test's directories go away with it. */
static void remove_tree(const char *dir) {
        (void) nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

static json_object *load(const char *const *kv, char hash[static CN_SHA256_HEX_SIZE], int *ret_r, char **ret_dir) {
        json_object *cfg = json_object_new_object();
        _cleanup_free_ char *error = NULL;
        char *dir = secret_dir(kv);

        *ret_r = credentials_load(dir, cfg, hash, &error);
        if (ret_dir)
                *ret_dir = dir; /* the caller removes it */
        else {
                remove_tree(dir);
                free(dir);
        }
        return cfg;
}

static const char *g(json_object *cfg, const char *key) {
        return cn_cloud_config_get(cfg, "Global", key);
}

int main(void) {
        char h1[CN_SHA256_HEX_SIZE], h2[CN_SHA256_HEX_SIZE];
        _cleanup_free_ char *dir = NULL, *error = NULL, *want = NULL;
        json_object *cfg;
        int r;

        cfg = load((const char *const[]) { "token", "hc-token\n", NULL }, h1, &r, NULL);
        TAP_EQ_INT(r, 0, "hetzner/digitalocean Secret read");
        TAP_EQ_STR(g(cfg, "token"), "hc-token", "token, without its newline");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "token-id", "cloudnode@pve!ccm\n", "token-secret",
                                           "0b3c5e8a-7f1d-4c2e-9a6b-1d2e3f4a5b6c\n", NULL },
                   h2, &r, NULL);
        TAP_EQ_INT(r, 0, "Proxmox VE Secret read");
        TAP_OK(streq(g(cfg, "token-id"), "cloudnode@pve!ccm") &&
                       streq(g(cfg, "token-secret"), "0b3c5e8a-7f1d-4c2e-9a6b-1d2e3f4a5b6c"),
               "token-id and token-secret, without their newlines");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "aws_access_key_id", "AKIAEXAMPLE", "aws_secret_access_key", "s3cr3t",
                                           NULL }, h2, &r, NULL);
        TAP_EQ_INT(r, 0, "AWS Secret read");
        TAP_OK(streq(g(cfg, "access-key-id"), "AKIAEXAMPLE") && streq(g(cfg, "secret-access-key"), "s3cr3t"),
               "aws_access_key_id/aws_secret_access_key become access-key-id/secret-access-key");
        TAP_OK(!streq(h1, h2), "other credentials, another hash");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "azure_client_id", "cid", "azure_client_secret", "csec", "azure_tenant_id",
                                           "tid", "azure_subscription_id", "sid", "azure_region", "westeurope", NULL },
                   h1, &r, NULL);
        TAP_EQ_INT(r, 0, "Azure Secret read");
        TAP_OK(streq(g(cfg, "aadClientId"), "cid") && streq(g(cfg, "aadClientSecret"), "csec") &&
               streq(g(cfg, "tenantId"), "tid") && streq(g(cfg, "subscriptionId"), "sid"),
               "azure_* become aadClientId, aadClientSecret, tenantId, subscriptionId");
        TAP_OK(!g(cfg, "azure_region"), "keys the providers do not read are left out");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "service_account.json", "{\"type\":\"service_account\"}", NULL }, h1, &r,
                   &dir);
        TAP_EQ_INT(r, 0, "GCP Secret read");
        TAP_OK(asprintf(&want, "%s/service_account.json", dir) >= 0 && streq(g(cfg, "credentials-file"), want),
               "service_account.json becomes credentials-file, its path");
        json_object_put(cfg);
        remove_tree(dir);

        cfg = load((const char *const[]) { "clouds.yaml",
                                           "clouds:\n  openstack:\n    auth:\n      auth_url: https://k.test/v3\n"
                                           "      application_credential_id: acid\n"
                                           "      application_credential_secret: acsec\n"
                                           "    region_name: RegionOne\n", NULL }, h1, &r, NULL);
        TAP_EQ_INT(r, 0, "OpenStack Secret read");
        TAP_OK(streq(g(cfg, "auth-url"), "https://k.test/v3") && streq(g(cfg, "application-credential-id"), "acid") &&
               streq(g(cfg, "application-credential-secret"), "acsec") && streq(g(cfg, "region"), "RegionOne"),
               "clouds.yaml's openstack auth and region_name become auth-url, application-credential-*, region");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "token", "same", NULL }, h1, &r, NULL);
        json_object_put(cfg);
        cfg = load((const char *const[]) { "token", "same", NULL }, h2, &r, NULL);
        TAP_EQ_STR(h1, h2, "the same content, the same hash (a touch is no rotation)");
        json_object_put(cfg);

        cfg = load((const char *const[]) { "clouds.yaml", "clouds: [not, a, map]\n", NULL }, h1, &r, NULL);
        TAP_EQ_INT(r, -EINVAL, "a clouds.yaml without clouds.openstack.auth is refused");
        json_object_put(cfg);

        cfg = json_object_new_object();
        TAP_EQ_INT(credentials_load("/nonexistent/credentials", cfg, h1, &error), -ENOENT, "a missing directory");
        json_object_put(cfg);
        return tap_done();
}
