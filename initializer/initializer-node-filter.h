/* SPDX-License-Identifier: Apache-2.0 */
/* The members of a Node the initializer reads: the Node informer's transform, and the filter of
 * the Nodes our PATCHes return. */
#pragma once

#include "json-filter.h"

extern const CnJsonFilter initializer_node_filter[];
