/* SPDX-License-Identifier: Apache-2.0 */
/* json-c helpers: parsing with a size cap, a depth cap and an error text; typed getters by key
 * path; setting by key path; serializing to a string the caller owns. Key paths are given as
 * separate arguments ending in NULL, because Kubernetes keys contain dots and slashes
 * ("topology.kubernetes.io/zone"). */
#pragma once

#include <stdint.h>

#include "macro.h"

/* Kubernetes objects nest deeper than json-c's default of 32 (CRD schemas). */
#define CN_JSON_MAX_DEPTH 128
/* Default cap of a single document read from a peer or a file. */
#define CN_JSON_MAX_SIZE (16U * 1024U * 1024U)

/* Parses exactly one JSON value from data[0..size) (trailing whitespace allowed), strictly as
 * RFC 8259 says, into the tree json-c's tokener would build (json-parse.c). -EFBIG when
 * size > max_size, -EBADMSG for malformed or truncated input, with a message in *ret_error
 * (optional, caller frees) such as "unexpected end of data at offset 17". A document that is just
 * JSON null succeeds with *ret == NULL, as json-c represents null. */
int cn_json_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error);
/* A parser of the cn_json_parse() shape (cn_yaml_parse() has it too). */
typedef int (*CnTreeParser)(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error);
/* Reads root+path (at most max_size bytes) and parses it; a read error is described in *ret_error. */
int cn_parse_file_with(CnTreeParser parse, const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error);
int cn_json_parse_file(const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error);

/* Shrinks the hash table of every object in the tree to its members, and every array to its
 * elements: json-c gives each object a table of 16 entries (704 bytes on x86-64), most of a
 * small object's memory. For trees kept long (an informer's cache); they stay usable and grow
 * again when members are added. */
void cn_json_compact(json_object *o);

/* Looks up o.k1.k2... (object keys only). NULL if any step is missing or not an object. Borrowed. */
json_object *cn_json_get(json_object *o, ...) _sentinel_;
json_object *cn_json_getv(json_object *o, va_list ap);

/* Typed getters. 0 on success, -ENOENT when missing or null, -EINVAL when of another type. The
 * string is borrowed from the tree. */
int cn_json_get_string(json_object *o, const char **ret, ...) _sentinel_;
int cn_json_get_int64(json_object *o, int64_t *ret, ...) _sentinel_;
int cn_json_get_bool(json_object *o, bool *ret, ...) _sentinel_;
int cn_json_get_double(json_object *o, double *ret, ...) _sentinel_;
int cn_json_get_object(json_object *o, json_object **ret, ...) _sentinel_;
int cn_json_get_array(json_object *o, json_object **ret, ...) _sentinel_;
/* The string at path, or NULL when missing or not a string. Borrowed. */
const char *cn_json_string(json_object *o, ...) _sentinel_;
/* Whether o's string member key equals value, a missing member and NULL counting as "". */
bool cn_json_string_is(json_object *o, const char *key, const char *value);
/* The first object in array whose string member key equals value (Kubernetes lists with a merge
 * key, e.g. conditions by "type"), or NULL; array may be NULL or not an array. Borrowed. */
json_object *cn_json_array_find(json_object *array, const char *key, const char *value);

/* Sets o.k1.k2...kn = value, creating intermediate objects. Takes the reference to value (also on
 * failure). -EINVAL when an intermediate exists and is not an object. */
int cn_json_set(json_object *o, json_object *value, ...) _sentinel_;
/* Convenience: new string value (NULL value sets JSON null). */
int cn_json_set_string(json_object *o, const char *value, ...) _sentinel_;

typedef enum CnJsonFormat {
        CN_JSON_COMPACT = 0,
        CN_JSON_PRETTY = 1 << 0, /* two-space indent, for humans */
        CN_JSON_NEWLINE = 1 << 1, /* append "\n" */
} CnJsonFormat;

/* Serializes (slashes not escaped) into newly allocated memory. */
int cn_json_to_string(json_object *o, CnJsonFormat format, char **ret);

/* A deep equality check that treats int 1 and double 1.0 as different, like json-c. */
bool cn_json_equal(json_object *a, json_object *b);
