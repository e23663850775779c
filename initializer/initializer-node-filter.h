/* SPDX-License-Identifier: Apache-2.0 */
/* The members of a Node the initializer reads: the Node informer's transform, and the filter of
 * the Nodes our PATCHes return. */
#pragma once

#include <stdbool.h>

#include "json-filter.h"

extern const CnJsonFilter initializer_node_filter[];
/* Less of it: the Node the initializing PATCH returns, in cluster mode. */
extern const CnJsonFilter initializer_node_patched_filter[];

/* Whether the filter keeps the label key, so that the record shows a value someone set. */
bool initializer_node_label_kept(const char *key);
