/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: AWS EC2 (provider-aws.c: settings and InstancesV2 lookups,
 * provider-aws-credentials.c: the credential chain, provider-aws-sigv4.c: request signing).
 * The parsers and the signer are exposed for the unit tests. */
#pragma once

#include "provider-internal.h"

#define CN_PROVIDER_AWS_ID_PREFIX "aws://"

typedef struct AwsCredentials {
        char *access_key_id;
        char *secret_access_key;
        char *session_token; /* NULL for long-term keys */
        usec_t expires;      /* CLOCK_REALTIME; 0 when they do not expire */
} AwsCredentials;

void cn_aws_credentials_done(AwsCredentials *c);

/* Signature Version 4 of one request (AWS General Reference, "Create a signed AWS API
 * request"). path is the absolute path, query the query string as sent (its parameters are
 * sorted and re-encoded for the canonical request), content_type NULL for a request without
 * one, now a CLOCK_REALTIME time. Returns the values of the X-Amz-Date and Authorization
 * headers. */
typedef struct AwsSignInput {
        const char *method;
        const char *host; /* as sent in Host: with the port when it is not the scheme's default */
        const char *path;
        const char *query;
        const char *content_type;
        const char *payload;
        size_t payload_size;
        const char *region;
        const char *service;
        usec_t now;
} AwsSignInput;

int cn_aws_sign(const AwsSignInput *in, const AwsCredentials *creds, char **ret_amz_date, char **ret_authorization);

/* The host part of an http(s) URL as the HTTP client sends it in Host:, and the path (at least "/"). */
int cn_aws_url_host_path(const char *url, char **ret_host, char **ret_path);

/* "aws:///us-east-1a/i-0123", "aws:////i-0123" or "i-0123" -> the instance id and, when the
 * providerID names one, the zone (NULL otherwise). -EINVAL for anything else. */
int cn_provider_aws_parse_provider_id(const char *provider_id, char **ret_instance_id, char **ret_zone);

/* One "item" of a DescribeInstances instancesSet (as cn_xml_parse() reads it). ipv4, ipv6:
 * which address families are Node addresses (NodeIPFamilies). -ENOENT for a terminated
 * instance. */
int cn_provider_aws_parse_instance(json_object *instance, bool ipv4, bool ipv6, CnProviderInstance **ret);

/* The credential chain (provider-aws-credentials.c): the cloud config, the environment, the
 * shared credentials file, the instance role of the instance metadata service. */
typedef struct AwsCredentialChain {
        AwsCredentials creds;   /* current credentials; empty until known */
        bool from_imds;         /* refreshed from the instance role when near expiry */
        char *imds_endpoint;    /* base URL of the instance metadata service */
        char *imds_token;       /* IMDSv2 session token */
        usec_t imds_token_expires;
} AwsCredentialChain;

/* Reads the static sources; -ENOENT when none has credentials (the instance role may still).
 * A message naming a broken source (never a secret) goes to *ret_error. */
int cn_aws_credentials_load(CnProvider *p, json_object *cfg, AwsCredentialChain *chain, char **ret_error);
void cn_aws_credential_chain_done(AwsCredentialChain *chain);
/* Whether the chain has credentials good for at least the refresh margin. */
bool cn_aws_credentials_fresh(const AwsCredentialChain *chain, usec_t now);
/* Drops credentials that came from the instance role (an answer said they are no longer valid). */
void cn_aws_credentials_forget(AwsCredentialChain *chain);
/* Fetches the instance role's credentials into rf->chain on the call, then runs
 * rf->done(call, error, retry_after, message) (unless the call is freed first). rf belongs to the
 * caller and must live as long as the call (the call's state). */
typedef void (*AwsCredentialsDone)(CnProviderCall *call, int error, usec_t retry_after, const char *message);
typedef struct AwsRefresh {
        AwsCredentialChain *chain;
        AwsCredentialsDone done;
} AwsRefresh;
int cn_aws_credentials_refresh(CnProviderCall *call, AwsRefresh *rf);
/* The instance role's JSON document (iam/security-credentials/ROLE) into creds. */
int cn_aws_parse_role_credentials(json_object *doc, AwsCredentials *ret);
