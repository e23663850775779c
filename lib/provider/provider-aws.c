/* SPDX-License-Identifier: Apache-2.0 */
/* AWS EC2 (the Query API, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/): the
 * InstancesV2 calls through DescribeInstances by instance id, or by the private-dns-name filter
 * for a Node without a providerID, as cloud-provider-aws does; providerIDs
 * "aws:///<zone>/<instance-id>" as cloud-provider-aws and cloudnode-agent write them. Requests are
 * signed with Signature Version 4 (provider-aws-sigv4.c) with the credentials of
 * provider-aws-credentials.c.
 *
 * Settings, from cloud.conf as cloud-provider-aws reads it: [Global] Zone, Region, NodeIPFamilies
 * (ipv4 and/or ipv6), and [ServiceOverride "N"] Service = ec2 with Region, URL, SigningRegion,
 * SigningName for AWS-compatible clouds; cloudnode's own [Global] ca-file and the credentials
 * keys. Without a configured region, the zone of the providerID names it, else AWS_REGION. */
#include <strings.h>

#include "cloud-config.h"
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "metadata-source.h"
#include "provider-aws.h"
#include "string-util.h"
#include "xml-util.h"

#define AWS_EC2_API_VERSION "2016-11-15"
/* EC2 sends no Retry-After with RequestLimitExceeded; cloud-provider-aws backs off from 1 s. */
#define AWS_THROTTLE_DELAY (1 * USEC_PER_SEC)
/* Pages of one lookup by name; the filter matches one instance, a name matching more is refused. */
#define AWS_MAX_PAGES 16

typedef struct AwsEndpoint {
        char *region;
        char *url;
        char *signing_region;
        char *signing_name;
} AwsEndpoint;

typedef struct Aws {
        char *region;
        char *ca_file;
        bool ipv4, ipv6;
        AwsEndpoint *overrides;
        size_t n_overrides;
        AwsCredentialChain chain;
} Aws;

static void endpoint_done(AwsEndpoint *e) {
        free(e->region);
        free(e->url);
        free(e->signing_region);
        free(e->signing_name);
}

static void aws_done(CnProvider *p) {
        Aws *a = cn_provider_data(p);

        free(a->region);
        free(a->ca_file);
        for (size_t i = 0; i < a->n_overrides; i++)
                endpoint_done(&a->overrides[i]);
        free(a->overrides);
        cn_aws_credential_chain_done(&a->chain);
}

static int dup_setting(json_object *section, const char *key, char **ret) {
        json_object *v;

        *ret = NULL;
        json_object_object_foreach(section, k, val)
                if (strcasecmp(k, key) == 0 && json_object_is_type(val, json_type_string)) {
                        v = val;
                        if (json_object_get_string_len(v) == 0)
                                return 0;
                        *ret = strdup(json_object_get_string(v));
                        return *ret ? 0 : -ENOMEM;
                }
        return 0;
}

/* [ServiceOverride "N"] sections with Service = ec2. */
static int load_overrides(Aws *a, json_object *cfg, char **ret_error) {
        if (!cfg)
                return 0;
        json_object_object_foreach(cfg, name, section) {
                _cleanup_free_ char *service = NULL;
                AwsEndpoint e = {};
                AwsEndpoint *n;

                if (strncasecmp(name, "ServiceOverride", STRLEN("ServiceOverride")) != 0 ||
                    !json_object_is_type(section, json_type_object))
                        continue;
                if (dup_setting(section, "Service", &service) < 0)
                        return -ENOMEM;
                if (!service || strcasecmp(service, "ec2") != 0)
                        continue;
                if (dup_setting(section, "Region", &e.region) < 0 || dup_setting(section, "URL", &e.url) < 0 ||
                    dup_setting(section, "SigningRegion", &e.signing_region) < 0 ||
                    dup_setting(section, "SigningName", &e.signing_name) < 0) {
                        endpoint_done(&e);
                        return -ENOMEM;
                }
                if (!e.url || !e.region || (!cn_startswith(e.url, "https://") && !cn_startswith(e.url, "http://"))) {
                        endpoint_done(&e);
                        return cn_provider_config_error(ret_error, EINVAL, "[%s] of the cloud config needs Region "
                                                        "and an http(s) URL", name);
                }
                n = reallocarray(a->overrides, a->n_overrides + 1, sizeof(AwsEndpoint));
                if (!n) {
                        endpoint_done(&e);
                        return -ENOMEM;
                }
                a->overrides = n;
                a->overrides[a->n_overrides++] = e;
        }
        return 0;
}

static int aws_init(CnProvider *p, json_object *cfg, char **ret_error) {
        Aws *a = cn_provider_data(p);
        const char *region = cn_cloud_config_get(cfg, "Global", "Region");
        const char *zone = cn_cloud_config_get(cfg, "Global", "Zone");
        const char *families = cn_cloud_config_get(cfg, "Global", "NodeIPFamilies");
        const char *ca = cn_cloud_config_get(cfg, "Global", "ca-file");
        int r = 0;

        if (!isempty(region))
                a->region = strdup(region);
        else if (!isempty(zone))
                (void) cn_aws_region_from_zone(zone, &a->region);
        if ((!isempty(region) || !isempty(zone)) && !a->region) {
                aws_done(p);
                return isempty(region) ? cn_provider_config_error(ret_error, EINVAL, "no region in the Zone %s of "
                                                                  "the cloud config", zone)
                                       : -ENOMEM;
        }
        a->ipv4 = true;
        if (!isempty(families)) {
                _cleanup_strv_free_ char **l = NULL;

                if (strv_split(families, ", ", &l) < 0) {
                        aws_done(p);
                        return -ENOMEM;
                }
                a->ipv4 = strv_contains(l, "ipv4");
                a->ipv6 = strv_contains(l, "ipv6");
                if (!a->ipv4 && !a->ipv6) {
                        aws_done(p);
                        return cn_provider_config_error(ret_error, EINVAL, "NodeIPFamilies of the cloud config "
                                                        "names neither ipv4 nor ipv6");
                }
        }
        if (!isempty(ca) && !(a->ca_file = strdup(ca))) {
                aws_done(p);
                return -ENOMEM;
        }
        r = load_overrides(a, cfg, ret_error);
        if (r >= 0)
                r = cn_aws_credentials_load(p, cfg, &a->chain, ret_error);
        if (r < 0) {
                aws_done(p);
                return r;
        }
        return 0;
}

int cn_provider_aws_parse_provider_id(const char *provider_id, char **ret_instance_id, char **ret_zone) {
        const char *s = cn_startswith(provider_id, CN_PROVIDER_AWS_ID_PREFIX), *id, *slash;
        _cleanup_free_ char *zone = NULL;

        if (s) {
                /* "aws:///zone/id" or "aws:////id": an empty host, then an optional zone. */
                if (*s != '/')
                        return -EINVAL;
                s++;
                slash = strrchr(s, '/');
                if (!slash)
                        return -EINVAL;
                id = slash + 1;
                if (slash > s) {
                        if (memchr(s, '/', slash - s))
                                return -EINVAL;
                        zone = strndup(s, slash - s);
                        if (!zone)
                                return -ENOMEM;
                }
        } else
                id = provider_id;
        if (!cn_startswith(id, "i-") || strlen(id) < 3 || strlen(id) > 64 ||
            strspn(id + 2, "0123456789abcdef") != strlen(id + 2))
                return -EINVAL;
        *ret_instance_id = strdup(id);
        if (!*ret_instance_id)
                return -ENOMEM;
        *ret_zone = TAKE_PTR(zone);
        return 0;
}

/* An empty EC2 list is an empty element: "" instead of []. */
static json_object *list(json_object *o, const char *key) {
        json_object *v = cn_json_get(o, key, NULL);

        return v && json_object_is_type(v, json_type_array) ? v : NULL;
}

static size_t list_length(json_object *l) {
        return l ? json_object_array_length(l) : 0;
}

/* Network interfaces in use, by device index, as cloud-provider-aws orders them. */
static int add_interface_addresses(CnProviderInstance *i, json_object *ifaces, bool v6) {
        size_t n = list_length(ifaces);
        int r;

        for (int64_t index = 0, next; n > 0; index = next) {
                next = INT64_MAX;
                for (size_t k = 0; k < n; k++) {
                        json_object *iface = json_object_array_get_idx(ifaces, k), *ips;
                        const char *status = cn_json_string(iface, "status", NULL);
                        const char *is = cn_json_string(iface, "attachment", "deviceIndex", NULL);
                        int64_t d;

                        if (!is || cn_safe_atoi64(is, &d) < 0)
                                return -EBADMSG;
                        if (d > index && d < next)
                                next = d;
                        if (d != index || (status && !streq(status, "in-use")))
                                continue;
                        ips = list(iface, v6 ? "ipv6AddressesSet" : "privateIpAddressesSet");
                        for (size_t j = 0; j < list_length(ips); j++) {
                                json_object *e = json_object_array_get_idx(ips, j);

                                r = cn_provider_instance_add_address(
                                                i, CN_NODE_ADDRESS_INTERNAL_IP,
                                                cn_json_string(e, v6 ? "ipv6Address" : "privateIpAddress", NULL));
                                if (r < 0)
                                        return r;
                        }
                }
                if (next == INT64_MAX)
                        break;
        }
        return 0;
}

int cn_provider_aws_parse_instance(json_object *instance, bool ipv4, bool ipv6, CnProviderInstance **ret) {
        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = cn_provider_instance_new();
        const char *id = cn_json_string(instance, "instanceId", NULL);
        const char *zone = cn_json_string(instance, "placement", "availabilityZone", NULL);
        const char *state = cn_json_string(instance, "instanceState", "name", NULL);
        const char *private_dns = cn_json_string(instance, "privateDnsName", NULL);
        const char *public_dns = cn_json_string(instance, "dnsName", NULL);
        const char *type = cn_json_string(instance, "instanceType", NULL);
        json_object *ifaces = list(instance, "networkInterfaceSet");
        int r = 0;

        assert(ret);
        if (!i)
                return -ENOMEM;
        if (!id || !state || isempty(zone) || strchr(zone, '/') || cn_startswith(id, "i-") == NULL || strchr(id, '/'))
                return -EBADMSG;
        if (streq(state, "terminated"))
                return -ENOENT;
        i->shutdown = streq(state, "stopped");
        if (!(i->instance_id = strdup(id)) || asprintf(&i->provider_id, CN_PROVIDER_AWS_ID_PREFIX "/%s/%s", zone, id) < 0 ||
            !(i->zone = strdup(zone)) || (type && !(i->instance_type = strdup(type))) ||
            (private_dns && *private_dns && !(i->name = strdup(private_dns))))
                return -ENOMEM;
        r = cn_aws_region_from_zone(zone, &i->region);
        if (r < 0)
                return r;
        if (ipv4 && ifaces)
                r = add_interface_addresses(i, ifaces, false);
        else if (ipv4)
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_INTERNAL_IP,
                                                     cn_json_string(instance, "privateIpAddress", NULL));
        if (r >= 0 && ipv6)
                r = add_interface_addresses(i, ifaces, true);
        if (r >= 0 && ipv4)
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_EXTERNAL_IP,
                                                     cn_json_string(instance, "ipAddress", NULL));
        if (r >= 0)
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_INTERNAL_DNS, private_dns);
        if (r >= 0)
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_HOSTNAME, private_dns);
        if (r >= 0)
                r = cn_provider_instance_add_address(i, CN_NODE_ADDRESS_EXTERNAL_DNS, public_dns);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}

typedef struct Lookup {
        AwsRefresh refresh;
        char *instance_id;
        char *name;
        char *region;
        char *next_token;
        CnProviderInstance *found;
        unsigned pages;
        bool renewed; /* instance role credentials were fetched again after a refusal */
} Lookup;

static void lookup_free(void *p) {
        Lookup *l = p;

        free(l->instance_id);
        free(l->name);
        free(l->region);
        free(l->next_token);
        cn_provider_instance_free(l->found);
        free(l);
}

static void finish(CnProviderCall *call, int error, usec_t retry_after, const char *message) {
        Lookup *l = cn_provider_call_get_state(call);
        CnProviderResult res = { .error = error, .retry_after = retry_after, .message = message };

        cn_provider_call_finish_instance(call, &res, error < 0 ? NULL : TAKE_PTR(l->found));
}

static const char *aws_error_code(json_object *body) {
        return cn_json_string(body, "Response", "Errors", "Error", "Code", NULL);
}

static const char *aws_error_message(json_object *body) {
        return cn_json_string(body, "Response", "Errors", "Error", "Message", NULL);
}

/* EC2's error codes (API reference, "Error codes") to the classes of provider.h. */
static int classify(const char *code, int http_error) {
        static const char *const retry[] = { "RequestLimitExceeded", "Throttling", "InternalError", "Unavailable",
                                             "ServiceUnavailable", "InsufficientInstanceCapacity", NULL };
        static const char *const auth[] = { "AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId",
                                            "SignatureDoesNotMatch", "ExpiredToken", "RequestExpired",
                                            "OptInRequired", "Blocked", "MissingAuthenticationToken", NULL };

        if (!code)
                return http_error;
        if (cn_startswith(code, "InvalidInstanceID.NotFound"))
                return -ENOENT;
        if (strv_contains((char **) retry, code))
                return -EAGAIN;
        if (strv_contains((char **) auth, code))
                return -EACCES;
        return http_error == -EAGAIN ? -EAGAIN : -EINVAL;
}

static int describe(CnProviderCall *call);

static void on_credentials(CnProviderCall *call, int error, usec_t retry_after, const char *message) {
        int r;

        if (error < 0)
                return finish(call, error, retry_after, message);
        r = describe(call);
        if (r < 0)
                finish(call, r, 0, "cannot build the DescribeInstances request");
}

static void on_describe(CnProviderCall *call, const CnProviderHttpReply *reply, void *userdata) {
        Aws *a = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        json_object *resp = cn_json_get(reply->body, "DescribeInstancesResponse", NULL), *reservations;
        const char *token;
        int r;

        (void) userdata;
        if (reply->error < 0) {
                const char *code = aws_error_code(reply->error_body);
                int error = reply->error == -EBADMSG ? -EBADMSG : classify(code, reply->error);
                usec_t delay = reply->retry_after;

                if (error == -EACCES && a->chain.from_imds && !l->renewed) {
                        /* Role credentials rotate; the ones we hold may be gone before they expire. */
                        l->renewed = true;
                        cn_aws_credentials_forget(&a->chain);
                        r = cn_aws_credentials_refresh(call, &l->refresh);
                        if (r < 0)
                                finish(call, r, 0, "cannot ask the instance metadata service");
                        return;
                }
                if (code && streq(code, "RequestLimitExceeded") && delay < AWS_THROTTLE_DELAY)
                        delay = AWS_THROTTLE_DELAY;
                if (error == -ENOENT)
                        return finish(call, error, 0, "no such EC2 instance");
                return finish(call, error, delay, reply->error == -EBADMSG ? "malformed answer from the EC2 API"
                                                  : aws_error_message(reply->error_body) ?: reply->message);
        }
        if (!resp)
                return finish(call, -EBADMSG, 0, "malformed answer from the EC2 API: no DescribeInstancesResponse");
        reservations = list(resp, "reservationSet");
        for (size_t k = 0; k < list_length(reservations); k++) {
                json_object *instances = list(json_object_array_get_idx(reservations, k), "instancesSet");

                for (size_t j = 0; j < list_length(instances); j++) {
                        _cleanup_(cn_provider_instance_freep) CnProviderInstance *i = NULL;

                        r = cn_provider_aws_parse_instance(json_object_array_get_idx(instances, j), a->ipv4, a->ipv6, &i);
                        if (r == -ENOENT)
                                continue;
                        if (r < 0)
                                return finish(call, r == -ENOMEM ? r : -EBADMSG, 0,
                                              "unexpected instance object from the EC2 API");
                        if (l->found)
                                return finish(call, -CN_PROVIDER_EMULTIPLE, 0,
                                              "several EC2 instances have that private DNS name");
                        l->found = TAKE_PTR(i);
                }
        }
        token = cn_json_string(resp, "nextToken", NULL);
        if (!isempty(token) && l->pages < AWS_MAX_PAGES) {
                free(l->next_token);
                l->next_token = strdup(token);
                if (!l->next_token)
                        return finish(call, -ENOMEM, 0, "out of memory");
                r = describe(call);
                if (r < 0)
                        finish(call, r, 0, "cannot build the DescribeInstances request");
                return;
        }
        if (!l->found)
                return finish(call, -ENOENT, 0, l->instance_id ? "no such EC2 instance"
                                                               : "no EC2 instance with that private DNS name");
        finish(call, 0, 0, NULL);
}

static const AwsEndpoint *find_override(Aws *a, const char *region) {
        for (size_t i = 0; i < a->n_overrides; i++)
                if (streq(a->overrides[i].region, region))
                        return &a->overrides[i];
        return NULL;
}

static int form_add(char **form, const char *name, const char *value) {
        _cleanup_free_ char *v = cn_http_escape(value);
        char *n;

        if (!v || asprintf(&n, "%s&%s=%s", *form, name, v) < 0)
                return -ENOMEM;
        free(*form);
        *form = n;
        return 0;
}

static int describe(CnProviderCall *call) {
        Aws *a = cn_provider_data(cn_provider_call_provider(call));
        Lookup *l = cn_provider_call_get_state(call);
        const AwsEndpoint *o = find_override(a, l->region);
        _cleanup_free_ char *form = strdup("Action=DescribeInstances&Version=" AWS_EC2_API_VERSION);
        _cleanup_free_ char *url = NULL, *host = NULL, *path = NULL, *amz_date = NULL, *auth = NULL;
        _cleanup_free_ char *h_date = NULL, *h_auth = NULL, *h_token = NULL;
        const char *headers[4] = {};
        AwsSignInput in = {
                .method = "POST",
                .content_type = "application/x-www-form-urlencoded; charset=utf-8",
                .region = o && o->signing_region ? o->signing_region : l->region,
                .service = o && o->signing_name ? o->signing_name : "ec2",
                .now = cn_now(CLOCK_REALTIME),
        };
        CnProviderHttpOptions opts = {
                .ca_file = a->ca_file,
                .headers = headers,
                .body_parser = cn_xml_parse,
                .error_parser = aws_error_message,
                .operation = "instance_metadata",
        };
        int r;

        if (!form)
                return -ENOMEM;
        if (l->instance_id)
                r = form_add(&form, "InstanceId.1", l->instance_id);
        else {
                /* As cloud-provider-aws: every state but terminated, so a name freed by a
                 * terminated instance finds its successor. */
                static const char *const states[] = { "pending", "running", "shutting-down", "stopping", "stopped" };

                r = form_add(&form, "Filter.1.Name", "private-dns-name");
                if (r >= 0)
                        r = form_add(&form, "Filter.1.Value.1", l->name);
                if (r >= 0)
                        r = form_add(&form, "Filter.2.Name", "instance-state-name");
                for (size_t k = 0; r >= 0 && k < ELEMENTSOF(states); k++) {
                        char key[32];

                        (void) snprintf(key, sizeof(key), "Filter.2.Value.%zu", k + 1);
                        r = form_add(&form, key, states[k]);
                }
        }
        if (r >= 0 && l->next_token)
                r = form_add(&form, "NextToken", l->next_token);
        if (r < 0)
                return r;
        l->pages++;

        if (o)
                url = strdup(o->url);
        else if (asprintf(&url, "https://ec2.%s.amazonaws.com%s/", l->region,
                          cn_startswith(l->region, "cn-") ? ".cn" : "") < 0)
                url = NULL;
        if (!url)
                return -ENOMEM;
        r = cn_aws_url_host_path(url, &host, &path);
        if (r < 0)
                return r;
        in.host = host;
        in.path = path;
        in.payload = form;
        in.payload_size = strlen(form);
        r = cn_aws_sign(&in, &a->chain.creds, &amz_date, &auth);
        if (r < 0)
                return r;
        if (asprintf(&h_date, "X-Amz-Date: %s", amz_date) < 0 || asprintf(&h_auth, "Authorization: %s", auth) < 0)
                return -ENOMEM;
        headers[0] = h_date;
        headers[1] = h_auth;
        if (a->chain.creds.session_token) {
                if (asprintf(&h_token, "X-Amz-Security-Token: %s", a->chain.creds.session_token) < 0)
                        return -ENOMEM;
                headers[2] = h_token;
        }
        opts.form = form;
        r = cn_provider_call_http(call, "POST", url, &opts, on_describe, NULL);
        if (h_token)
                explicit_bzero(h_token, strlen(h_token));
        return r;
}

static int aws_instance_get(CnProvider *p, CnProviderCall *call, const CnProviderNodeRef *node) {
        Aws *a = cn_provider_data(p);
        Lookup *l = calloc(1, sizeof(Lookup));
        _cleanup_free_ char *zone = NULL;
        const char *env_region;
        int r;

        if (!l)
                return -ENOMEM;
        cn_provider_call_set_state(call, l, lookup_free);
        l->refresh = (AwsRefresh) { .chain = &a->chain, .done = on_credentials };
        if (!isempty(node->provider_id)) {
                r = cn_provider_aws_parse_provider_id(node->provider_id, &l->instance_id, &zone);
                if (r < 0)
                        return r;
        } else if (!(l->name = strdup(node->name)))
                return -ENOMEM;
        env_region = cn_provider_uses_environment(p) ? getenv("AWS_REGION") ?: getenv("AWS_DEFAULT_REGION") : NULL;
        if (a->region)
                l->region = strdup(a->region);
        else if (zone)
                (void) cn_aws_region_from_zone(zone, &l->region);
        else if (!isempty(env_region))
                l->region = strdup(env_region);
        else if (a->n_overrides == 1)
                l->region = strdup(a->overrides[0].region);
        if (!l->region) {
                log_debug("No AWS region for %s: set Region or Zone in the cloud config.",
                          node->provider_id ?: node->name);
                return -EINVAL;
        }
        if (!cn_aws_credentials_fresh(&a->chain, cn_now(CLOCK_REALTIME)))
                return cn_aws_credentials_refresh(call, &l->refresh);
        return describe(call);
}

const CnProviderOps cn_provider_aws_ops = {
        .name = "aws",
        .size = sizeof(Aws),
        .init = aws_init,
        .done = aws_done,
        .instance_get = aws_instance_get,
};
