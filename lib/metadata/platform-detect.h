/* SPDX-License-Identifier: Apache-2.0 */
/* Which platform this machine runs on, in the order the project pins: an explicit choice (the
 * --platform flag, then the node config's platform:), then the kernel command line's
 * ignition.platform.id= (Ignition/Afterburn ids), then DMI (/sys/class/dmi/id/). Every file is
 * read under root, so tests run it against a directory tree. */
#pragma once

#include "macro.h"

typedef enum CnPlatformSource {
        CN_PLATFORM_FROM_FLAG,
        CN_PLATFORM_FROM_CONFIG,
        CN_PLATFORM_FROM_CMDLINE,
        CN_PLATFORM_FROM_DMI,
} CnPlatformSource;

const char *cn_platform_source_to_string(CnPlatformSource s);

/* flag and config may be NULL. *ret is a static string (one of cn_metadata_platforms). Returns
 * -EPROTONOSUPPORT when the chosen id is not one we support (*ret_unsupported, when non-NULL,
 * then gets a malloc'd copy of it), -ENXIO when nothing identifies the platform. */
int cn_platform_detect(const char *root, const char *flag, const char *config, const char **ret,
                       CnPlatformSource *ret_source, char **ret_unsupported);

/* The value of ignition.platform.id= on a kernel command line (last one wins), or NULL. */
int cn_platform_from_cmdline(const char *cmdline, char **ret);
/* From DMI strings (any may be NULL); NULL when none matches. */
const char *cn_platform_from_dmi(const char *sys_vendor, const char *product_name, const char *bios_vendor,
                                 const char *chassis_asset_tag);
