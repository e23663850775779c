/* SPDX-License-Identifier: Apache-2.0 */
/* XML answers (the EC2 Query API) read into json-c trees with expat, so that a provider reads an
 * XML answer with the same helpers as a JSON one. The mapping is the one of the AWS Query
 * protocol: an element with text only is a string (surrounding whitespace removed; an empty
 * element ""), an element with
 * children is an object keyed by their local names, and an element whose children are "item" or
 * "member" elements is an array of them. Namespaces and attributes are dropped. */
#pragma once

#include "macro.h"

/* Deepest element nesting accepted. */
#define CN_XML_MAX_DEPTH 32

/* Same contract as cn_json_parse(): -EFBIG beyond max_size, -EBADMSG for malformed XML, a
 * document type declaration (no entity expansion is ever done), mixed content or nesting beyond
 * CN_XML_MAX_DEPTH, with a short reason in *ret_error (optional, caller frees). The root element
 * is the tree's only key. */
int cn_xml_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error);
