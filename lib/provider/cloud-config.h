/* SPDX-License-Identifier: Apache-2.0 */
/* Reader of cloud.conf, the INI file cloud-controller-managers take as --cloud-config
 * ("[Global]\nauth-url = https://...\n"), into the same shape the node config's cloudConfig has
 * (section -> key -> string), so that a provider reads its settings one way whatever their
 * source. gcfg syntax as used upstream: '#' and ';' comments, "key = value", double-quoted
 * values with \" \\ \n \t escapes, repeated sections merge, a repeated key keeps the last value.
 * A subsection header `[ServiceOverride "1"]` names the section `ServiceOverride "1"`. */
#pragma once

#include "macro.h"

#define CN_CLOUD_CONFIG_MAX_SIZE (1024U * 1024U)

/* -EBADMSG for a syntax error, with "line N: what" in *ret_error (optional, caller frees). */
int cn_cloud_config_parse(const char *text, size_t size, json_object **ret, char **ret_error);
/* Reads and parses a file (at most CN_CLOUD_CONFIG_MAX_SIZE). */
int cn_cloud_config_load(const char *path, json_object **ret, char **ret_error);
/* Value of [section] key, or NULL. Borrowed. Section names compare case-insensitively, as gcfg. */
const char *cn_cloud_config_get(json_object *cfg, const char *section, const char *key);
