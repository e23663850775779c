/* SPDX-License-Identifier: Apache-2.0 */
/* The object filter the watch and List fuzz targets parse through (lib/core/json-filter.h): it
 * keeps, narrows and drops members, in arrays too, and selects array elements by a member's
 * value. */
#pragma once

#include "json-filter.h"

static const CnJsonFilter fuzz_names[] = { { "name" }, { "resourceVersion" }, { "skip", .drop = true }, {} };
static const CnJsonFilter fuzz_metadata[] = { { "managedFields", .drop = true }, { CN_JSON_FILTER_ANY }, {} };
static const char *const fuzz_types[] = { "Ready", "x", NULL };
static const CnJsonFilter fuzz_filter[] = {
        { "metadata", fuzz_metadata }, { "spec" }, { "status", fuzz_names },
        { "conditions", fuzz_names, .select_key = "name", .select_values = fuzz_types }, {}
};
