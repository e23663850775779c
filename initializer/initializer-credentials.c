/* SPDX-License-Identifier: Apache-2.0 */
/* Cloud credentials from a mounted Secret. See initializer-credentials.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "hash-util.h"
#include "initializer-credentials.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "yaml-util.h"

#define CREDENTIAL_FILE_MAX (64U * 1024U)

/* The Cloud Credential Operator's Secret keys (and cloudnode's own) and the settings they are. */
static const struct {
        const char *file;
        const char *setting;
} settings[] = {
        { "token", "token" },
        { "password", "password" },
        { "application-credential-secret", "application-credential-secret" },
        { "token-id", "token-id" },         /* Proxmox VE: USER@REALM!TOKENID, with token-secret */
        { "token-secret", "token-secret" },
        { "aws_access_key_id", "access-key-id" },
        { "aws_secret_access_key", "secret-access-key" },
        { "aws_session_token", "session-token" },
        { "azure_client_id", "aadClientId" },
        { "azure_client_secret", "aadClientSecret" },
        { "azure_tenant_id", "tenantId" },
        { "azure_subscription_id", "subscriptionId" },
        { "azure_resourcegroup", "resourceGroup" },
};

static int set_global(json_object *cfg, const char *key, const char *value) {
        return cn_json_set_string(cfg, value, "Global", key, NULL);
}

/* clouds.yaml as the Cloud Credential Operator writes it for OpenStack: the cloud "openstack",
 * its auth (keys with underscores where cloud.conf has dashes) and region_name. */
static int load_clouds_yaml(const char *text, size_t size, json_object *cfg, char **ret_error) {
        _cleanup_json_ json_object *doc = NULL;
        json_object *cloud, *auth;
        int r;

        r = cn_yaml_parse(text, size, CREDENTIAL_FILE_MAX, &doc, NULL);
        if (r < 0) {
                (void) cn_set_message(ret_error, "clouds.yaml is not valid YAML");
                return -EINVAL;
        }
        cloud = cn_json_get(doc, "clouds", "openstack", NULL);
        auth = cn_json_get(cloud, "auth", NULL);
        if (!auth || !json_object_is_type(auth, json_type_object)) {
                (void) cn_set_message(ret_error, "clouds.yaml has no clouds.openstack.auth");
                return -EINVAL;
        }
        json_object_object_foreach(auth, k, v) {
                _cleanup_free_ char *key = strdup(k);

                if (!key)
                        return -ENOMEM;
                if (!json_object_is_type(v, json_type_string))
                        continue;
                for (char *p = key; *p; p++)
                        if (*p == '_')
                                *p = '-';
                r = set_global(cfg, key, json_object_get_string(v));
                if (r < 0)
                        return r;
        }
        if (cn_json_string(cloud, "region_name", NULL)) {
                r = set_global(cfg, "region", cn_json_string(cloud, "region_name", NULL));
                if (r < 0)
                        return r;
        }
        return 0;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int credentials_load(const char *dir, json_object *cfg, char ret_hash[static CN_SHA256_HEX_SIZE], char **ret_error) {
        DIR *d = opendir(dir);
        _cleanup_free_ char *all = NULL;
        char **names = NULL;
        size_t n_names = 0, all_size = 0;
        FILE *hashed = NULL;
        struct dirent *de;
        int r = 0;

        if (!d)
                return -errno;
        /* Sorted, so that the hash does not depend on the directory's order. */
        while ((de = readdir(d))) {
                char **grown;

                if (de->d_name[0] == '.')
                        continue;
                grown = reallocarray(names, n_names + 1, sizeof(char *));
                if (!grown) {
                        r = -ENOMEM;
                        goto finish;
                }
                names = grown;
                names[n_names] = strdup(de->d_name);
                if (!names[n_names]) {
                        r = -ENOMEM;
                        goto finish;
                }
                n_names++;
        }
        if (n_names > 0)
                qsort(names, n_names, sizeof(char *), compare_names);

        hashed = open_memstream(&all, &all_size);
        if (!hashed) {
                r = -ENOMEM;
                goto finish;
        }
        for (size_t i = 0; i < n_names; i++) {
                _cleanup_free_ char *path = NULL, *text = NULL;
                size_t size = 0, len;

                if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
                        r = -ENOMEM;
                        goto finish;
                }
                r = cn_read_file(NULL, path, CREDENTIAL_FILE_MAX, &text, &size);
                if (r == -EISDIR)
                        continue;
                if (r < 0) {
                        (void) cn_set_message(ret_error, "cannot read %s: %s", path, strerror(-r));
                        goto finish;
                }
                fprintf(hashed, "%s%c%zu%c", names[i], 0, size, 0);
                fwrite(text, 1, size, hashed);

                if (streq(names[i], "clouds.yaml"))
                        r = load_clouds_yaml(text, size, cfg, ret_error);
                else if (streq(names[i], "service_account.json"))
                        r = set_global(cfg, "credentials-file", path);
                else {
                        r = 0;
                        for (size_t j = 0; j < ELEMENTSOF(settings); j++)
                                if (streq(names[i], settings[j].file)) {
                                        /* A value, not a file: without the newline an editor adds. */
                                        len = strlen(text);
                                        while (len > 0 && strchr(" \t\r\n", text[len - 1]))
                                                text[--len] = 0;
                                        r = set_global(cfg, settings[j].setting, text);
                                        break;
                                }
                }
                explicit_bzero(text, size);
                if (r < 0)
                        goto finish;
        }
        if (fflush(hashed) != 0 || ferror(hashed)) {
                r = -ENOMEM;
                goto finish;
        }
        r = cn_sha256_hex(all, all_size, ret_hash);
finish:
        closedir(d);
        if (hashed)
                fclose(hashed);
        if (all)
                explicit_bzero(all, all_size);
        for (size_t i = 0; i < n_names; i++)
                free(names[i]);
        free(names);
        return r;
}
