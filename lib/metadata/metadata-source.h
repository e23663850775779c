/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interface between the fetch machinery (metadata-fetch.c) and the platform sources
 * (metadata-<platform>.c). A source names the documents it needs; the fetcher collects them (in
 * parallel over HTTP, or from files on a config drive) into a CnMetadataDocs set; the source's
 * parse function turns that set into a CnInstanceMetadata. Parsers never do I/O, so the unit tests
 * run them on captured documents. */
#pragma once

#include "metadata.h"

typedef struct CnMetadataDoc {
        char *path;
        char *data; /* NUL-terminated */
        size_t size;
} CnMetadataDoc;

typedef struct CnMetadataDocs {
        CnMetadataDoc *docs;
        size_t n;
        char *error; /* what was wrong with a document, for the user; set by the getters */
} CnMetadataDocs;

void cn_metadata_docs_done(CnMetadataDocs *d);
/* Records the first error description (printf-style); returns -EBADMSG. */
int cn_metadata_docs_error(CnMetadataDocs *d, const char *fmt, ...) _printf_(2, 3);
int cn_metadata_docs_put(CnMetadataDocs *d, const char *path, const char *data, size_t size);
/* NULL when absent. */
const char *cn_metadata_docs_get(CnMetadataDocs *d, const char *path, size_t *ret_size);
/* The document's text with surrounding whitespace removed; *ret NULL when absent or empty. */
int cn_metadata_docs_get_text(CnMetadataDocs *d, const char *path, char **ret);
/* A YAML (or JSON) document as a json-c tree, through the strict YAML loader; *ret NULL when absent. */
int cn_metadata_docs_get_yaml(CnMetadataDocs *d, const char *path, json_object **ret);
/* A JSON document; *ret NULL when absent; -EBADMSG when not JSON. */
int cn_metadata_docs_get_json(CnMetadataDocs *d, const char *path, json_object **ret);

enum {
        CN_METADATA_KEY_OPTIONAL = 1 << 0, /* 404 / missing file: absent, not an error */
        CN_METADATA_KEY_DOCUMENT = 1 << 1, /* a whole document: the larger size cap */
};

typedef struct CnMetadataKey {
        const char *path; /* relative to the endpoint or drive root */
        unsigned flags;
        /* A local file only: the name of the systemd credential (LoadCredential=) read in its place
         * when the service has one, for a file the unprivileged service cannot read itself. */
        const char *credential;
} CnMetadataKey;

/* Reads each listed path relative to dir (a config drive, or a test's fixture directory), or the
 * key's credential from $CREDENTIALS_DIRECTORY when there. A missing optional file is absent; a
 * file over its cap is -EFBIG. Failures other than -ENOMEM are described in d->error, naming the
 * file. */
int cn_metadata_docs_read_dir(CnMetadataDocs *d, int dir_fd, const char *dir, const CnMetadataKey *keys);

typedef struct CnMetadataSource {
        const char *platform;
        const char *endpoint;          /* standard base URL, NULL: not served over HTTP */
        const char *const *headers;    /* extra request headers ("Name: value"), NULL-terminated */
        const CnMetadataKey *keys;     /* over HTTP, all fetched in parallel; {} terminated */
        /* A session token fetched with PUT before the keys (AWS IMDSv2); on 403/404/405 the keys are
         * fetched without it (IMDSv1) unless the options require the token. */
        const char *token_path;
        const char *const *token_request_headers;
        const char *token_header;      /* request header carrying the token on every key */
        const char *drive;             /* default config drive mount point, NULL: none */
        const CnMetadataKey *drive_keys;
        const CnMetadataKey *host_keys; /* local files read next to a drive, relative to the root */
        const char *file;              /* platform "file": default path of its one local document */
        int (*parse)(CnMetadataDocs *d, CnInstanceMetadata *m);
} CnMetadataSource;

const CnMetadataSource *cn_metadata_source_find(const char *platform);

extern const CnMetadataSource cn_metadata_source_aws;
/* "us-east-1a" -> "us-east-1" (*ret stays NULL when zone has no letter suffix); local zones
 * ("us-west-2-lax-1a") keep their parent region's prefix only through the identity document,
 * which the metadata parser prefers. */
int cn_aws_region_from_zone(const char *zone, char **ret);
extern const CnMetadataSource cn_metadata_source_openstack;
extern const CnMetadataSource cn_metadata_source_gcp;
extern const CnMetadataSource cn_metadata_source_azure;
extern const CnMetadataSource cn_metadata_source_digitalocean;
extern const CnMetadataSource cn_metadata_source_hetzner;
extern const CnMetadataSource cn_metadata_source_proxmoxve;
extern const CnMetadataSource cn_metadata_source_file;

/* Runs the source's parser and validates the result. */
int cn_metadata_parse(const CnMetadataSource *s, CnMetadataDocs *d, CnInstanceMetadata **ret);

/* Helpers for parsers. */
/* Copies a string member (NULL or absent leaves *dst alone; an empty string is absent). */
int cn_metadata_json_string(json_object *o, const char *key, char **dst);
/* Appends s to *l when it is an address of the family (prefix length "/64" stripped), skipping
 * duplicates; anything else is ignored: a value that is not an address is no node address.
 * Returns 1 when s is an address (added, or already listed), 0 when it is not. */
int cn_metadata_add_address(char ***l, const char *s, int family);
int cn_metadata_add_label(char ***l, const char *key, const char *value);
/* The last "/"-separated component ("projects/1/zones/us-central1-a" -> "us-central1-a"). */
const char *cn_metadata_basename(const char *s);
