/* SPDX-License-Identifier: Apache-2.0 */
/* Reading files with a size cap, and the atomic writer every output file goes through: a temp
 * file in the same directory, write, fsync, fchmod/fchown, rename over the target, fsync the
 * directory. When the target already has identical content nothing is written (kubelet restarts
 * a static pod on every change of its manifest), so the writer reports whether it changed.
 * Every path may be prefixed with a root directory (--root in tests); root NULL or "/" means none.
 * The root is a convenience for tests, not a security boundary. */
#pragma once

#include <sys/types.h>

#include "macro.h"

/* Joins root and path ("/etc/x" under "/tmp/r" is "/tmp/r/etc/x"). */
int cn_path_prefix_root(const char *root, const char *path, char **ret);

/* Reads a regular file of at most max_size bytes (-EFBIG if larger). The data is NUL-terminated
 * for convenience; ret_size (optional) excludes the NUL. */
int cn_read_file(const char *root, const char *path, size_t max_size, char **ret, size_t *ret_size);

/* Like mkdir -p for the directory path itself, each new component with mode. */
int cn_mkdir_p(const char *root, const char *path, mode_t mode);

typedef enum CnWriteFlags {
        CN_WRITE_MKDIR = 1 << 0, /* create missing parent directories (0755) */
        CN_WRITE_NO_SYNC = 1 << 1, /* skip the fsyncs: only for files that do not survive a reboot */
} CnWriteFlags;

#define CN_UID_INVALID ((uid_t) -1)
#define CN_GID_INVALID ((gid_t) -1)

/* Atomically replaces root+path with data. mode is applied exactly (not masked by umask);
 * uid/gid CN_UID_INVALID/CN_GID_INVALID keep the writer's. Returns 1 if the file was
 * written, 0 if it already had this content (a differing mode or owner is corrected in place
 * then, without rewriting). A symlink at path is replaced, never followed. On failure the old
 * file is untouched and no temp file is left behind. */
int cn_write_file_atomic(const char *root, const char *path, const void *data, size_t size, mode_t mode,
                         uid_t uid, gid_t gid, CnWriteFlags flags);

/* Removes root+path; 1 if removed, 0 if it did not exist. The directory is fsynced. */
int cn_remove_file(const char *root, const char *path);
