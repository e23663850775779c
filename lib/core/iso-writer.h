/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal ISO 9660 image writer for small flat images, such as the NoCloud seed of cloud-init
 * (volume "cidata" holding user-data, meta-data and network-config). One root directory, no
 * subdirectories; every file is recorded twice: with an ECMA-119 level 1 name (8.3, upper case) in
 * the primary volume descriptor's tree and with its own name in a Joliet tree (UCS-2), which Linux's
 * isofs, libblkid and cloud-init's NoCloud reader use when present. */
#pragma once

#include <stddef.h>
#include <time.h>

typedef struct CnIsoFile {
        const char *name; /* 1-64 characters of [a-z0-9._-], not starting with '.' */
        const void *data;
        size_t size;
} CnIsoFile;

/* Images are built in memory; a seed is a few KiB. */
#define CN_ISO_MAX_SIZE (16U * 1024U * 1024U)
#define CN_ISO_MAX_FILES 16

/* The image of files (any order, names distinct, also once mapped to 8.3) with volume_id (1-16
 * characters of [A-Za-z0-9_-]), every time stamp mtime. -EINVAL for a name or volume id out of those
 * bounds, -ENOTUNIQ for two names that map to one 8.3 name, -E2BIG beyond CN_ISO_MAX_SIZE or
 * CN_ISO_MAX_FILES. */
int cn_iso_image(const char *volume_id, const CnIsoFile *files, size_t n_files, time_t mtime, void **ret,
                 size_t *ret_size);
