/* SPDX-License-Identifier: Apache-2.0 */
/* YAML through libyaml, as json-c trees. The loader is strict where a lenient one would let
 * hostile or mistaken input through: duplicate keys, aliases (and so alias bombs), unknown tags,
 * non-scalar keys, documents over a size cap and nesting deeper than a depth cap are errors with
 * a line:column message. Plain scalars resolve as in YAML 1.2's core schema (null, true/false,
 * integers, floats); quoted scalars are always strings.
 *
 * The emitter writes json-c trees as block-style YAML. A string is written plain only when no
 * YAML 1.1 or 1.2 reader could take it for anything but that string; otherwise it is double
 * quoted with escapes, so a hostile value can never change the structure of the document. */
#pragma once

#include "macro.h"

#define CN_YAML_MAX_SIZE (4U * 1024U * 1024U)
#define CN_YAML_MAX_DEPTH 64U
#define CN_YAML_MAX_NODES 1000000U

/* Exactly one document (an empty input is -ENODATA). -EFBIG over max_size, -EBADMSG for syntax or
 * any of the rejections above; *ret_error (optional, caller frees) says what and where. */
int cn_yaml_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error);
/* All documents of a stream ("---" separated), as a JSON array; empty documents are skipped. */
int cn_yaml_parse_multi(const char *data, size_t size, size_t max_size, json_object **ret_array,
                        char **ret_error);
int cn_yaml_parse_file(const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error);

/* One document. The output ends with a newline. */
int cn_yaml_emit(json_object *o, char **ret, size_t *ret_size);
/* Each element of the array as its own document, separated by "---". */
int cn_yaml_emit_multi(json_object *array, char **ret, size_t *ret_size);
