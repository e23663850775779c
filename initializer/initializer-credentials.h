/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster mode's cloud credentials from a Secret mounted as files (--cloud-credentials-dir): the
 * Secret OpenShift's Cloud Credential Operator writes for a CredentialsRequest, with its keys as
 * that operator names them per cloud, or the keys of cloudnode's own `cloud-credentials` Secret.
 * They become [Global] settings of the cloud config, over what cloud.conf says, so that no
 * credential has to be in the cloud-conf ConfigMap or the environment. */
#pragma once

#include <json-c/json.h>

/* Reads the files of dir into settings of cfg's [Global] (created when missing). The keys:
 *   token                                     token (hetzner, digitalocean)
 *   aws_access_key_id, aws_secret_access_key, access-key-id, secret-access-key, session-token (aws)
 *   aws_session_token
 *   azure_client_id, azure_client_secret,     aadClientId, aadClientSecret, tenantId, subscriptionId,
 *   azure_tenant_id, azure_subscription_id,   resourceGroup (azure)
 *   azure_resourcegroup
 *   service_account.json                      credentials-file: the path of the file (gcp)
 *   clouds.yaml                               the "openstack" cloud's auth and region_name (openstack)
 *   password, application-credential-secret   as named (openstack, cloudnode's own Secret)
 *   token-id, token-secret                    as named (proxmox: an API token)
 * Other files and dot files (the kubelet's ..data) are ignored. ret_hash: SHA-256 over the names and
 * contents read, to tell a rotation from a touch. -ENOENT when dir does not exist; a file that
 * cannot be read or parsed is an error with the reason in *ret_error (never a value). */
int credentials_load(const char *dir, json_object *cfg, char ret_hash[static 65], char **ret_error);
