/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet drop-in 20-cloudnode.conf: Environment= lines for KUBELET_PROVIDERID and
 * KUBELET_NODE_NAME, which a kubelet unit passes on as --provider-id / --hostname-override.
 * Values are quoted for systemd's unit file syntax (C-style escapes inside double quotes, "%"
 * doubled so no specifier expands); control characters are refused. */
#pragma once

#include "render-params.h"

int cn_render_kubelet_dropin(const CnRenderParams *p, char **ret, size_t *ret_size);
/* "NAME=value" as one quoted word of an Environment= line: "\"NAME=va\\\"lue\"". */
int cn_unit_quote_environment(const char *name, const char *value, char **ret);
