/* SPDX-License-Identifier: Apache-2.0 */
/* The env file /run/metadata/cloudnode: KEY="value" lines with the keys cloudnode-agent(8) lists
 * (CLOUDNODE_PLATFORM ... CLOUDNODE_IPV6; absent values omitted). Values are double-quoted with
 * \ before " \ ` $, which both a POSIX shell's `.`/source and systemd's EnvironmentFile= read back
 * as the original value; address lists are comma-separated, primary first. With afterburn_compat
 * the names Afterburn writes for the platform (AFTERBURN_AWS_INSTANCE_ID, ...) follow. */
#pragma once

#include "metadata.h"

int cn_render_env(const CnInstanceMetadata *m, bool afterburn_compat, char **ret, size_t *ret_size);
