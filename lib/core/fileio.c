/* SPDX-License-Identifier: Apache-2.0 */
/* File reading with a cap and the atomic writer. See fileio.h. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "fileio.h"
#include "hash-util.h"
#include "log.h"
#include "string-util.h"

int cn_path_prefix_root(const char *root, const char *path, char **ret) {
        char *p;

        assert(path);
        assert(ret);
        if (isempty(path))
                return -EINVAL;
        if (isempty(root) || streq(root, "/"))
                p = strdup(path);
        else {
                size_t l = strlen(root);
                while (l > 1 && root[l - 1] == '/')
                        l--;
                if (asprintf(&p, "%.*s%s%s", (int) l, root, path[0] == '/' ? "" : "/", path) < 0)
                        p = NULL;
        }
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static int read_fd_capped(int fd, size_t max_size, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, alloc = 0;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max_size)
                return -EFBIG;
        /* The size may change under us; read until EOF but never beyond the cap. */
        for (;;) {
                ssize_t k;

                if (n + 1 >= alloc) {
                        size_t na = alloc == 0 ? (size_t) st.st_size + 1 : alloc * 2;
                        char *p;
                        na = MIN(MAX(na, (size_t) 64), max_size + 2);
                        if (na <= alloc)
                                return -EFBIG;
                        p = realloc(buf, na);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        alloc = na;
                }
                k = read(fd, buf + n, alloc - n - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max_size)
                        return -EFBIG;
        }
        buf[n] = 0;
        if (ret_size)
                *ret_size = n;
        *ret = TAKE_PTR(buf);
        return 0;
}

int cn_read_file(const char *root, const char *path, size_t max_size, char **ret, size_t *ret_size) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        assert(ret);
        r = cn_path_prefix_root(root, path, &p);
        if (r < 0)
                return r;
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_fd_capped(fd, max_size, ret, ret_size);
}

static int mkdir_p_internal(const char *p, mode_t mode) {
        _cleanup_free_ char *copy = NULL;
        struct stat st;

        if (stat(p, &st) >= 0)
                return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (errno != ENOENT)
                return -errno;
        copy = strdup(p);
        if (!copy)
                return -ENOMEM;
        char *parent = dirname(copy);
        if (!streq(parent, p) && !streq(parent, "/") && !streq(parent, ".")) {
                int r = mkdir_p_internal(parent, mode);
                if (r < 0)
                        return r;
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int cn_mkdir_p(const char *root, const char *path, mode_t mode) {
        _cleanup_free_ char *p = NULL;
        int r;

        r = cn_path_prefix_root(root, path, &p);
        if (r < 0)
                return r;
        return mkdir_p_internal(p, mode);
}

/* Opens the directory that holds root+path and returns the file's name in it. */
static int open_parent(const char *root, const char *path, bool mkdir_parents, int *ret_fd, char **ret_base) {
        _cleanup_free_ char *p = NULL, *a = NULL, *b = NULL, *base = NULL;
        const char *dir;
        int r, fd;

        r = cn_path_prefix_root(root, path, &p);
        if (r < 0)
                return r;
        a = strdup(p);
        b = strdup(p);
        if (!a || !b)
                return -ENOMEM;
        dir = dirname(a);
        base = strdup(basename(b));
        if (!base)
                return -ENOMEM;
        if (streq(base, "/") || streq(base, ".") || streq(base, ".."))
                return -EISDIR;
        if (mkdir_parents) {
                r = mkdir_p_internal(dir, 0755);
                if (r < 0)
                        return log_debug_errno(r, "Failed to create directory %s: %m", dir);
        }
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        *ret_base = TAKE_PTR(base);
        return 0;
}

/* Compares the existing file (not following a symlink) with the new content. Returns 1 when
 * identical, 0 otherwise; fixes mode and owner in place when only those differ. */
static int existing_is_identical(int dir_fd, const char *base, const void *data, size_t size, mode_t mode,
                                 uid_t uid, gid_t gid) {
        _cleanup_free_ char *old = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t old_size;
        struct stat st;
        int r;

        fd = openat(dir_fd, base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return 0;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t) st.st_size != size)
                return 0;
        r = read_fd_capped(fd, size, &old, &old_size);
        if (r < 0 || old_size != size || memcmp(old, data, size) != 0)
                return 0;
        if ((st.st_mode & 07777) != (mode & 07777) && fchmod(fd, mode & 07777) < 0)
                return 0;
        if ((uid != CN_UID_INVALID && st.st_uid != uid) || (gid != CN_GID_INVALID && st.st_gid != gid))
                if (fchown(fd, uid, gid) < 0)
                        return 0;
        return 1;
}

static int write_all(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

/* Our temporary names: ".#<base>.<16 hex digits>". */
static bool is_temp_of(const char *name, const char *base) {
        size_t n = strlen(base);

        if (!cn_startswith(name, ".#") || strncmp(name + 2, base, n) != 0 || name[2 + n] != '.')
                return false;
        name += 3 + n;
        if (strlen(name) != 16)
                return false;
        for (; *name; name++)
                if (!isxdigit((unsigned char) *name))
                        return false;
        return true;
}

/* A writer killed between creating its temporary file and the rename leaves the file behind. Every
 * live writer holds an flock on its temporary file, so one that can be locked is stale. */
static void remove_stale_temps(int dir_fd, const char *base) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d)
                return;
        TAKE_FD(fd);
        while ((de = readdir(d))) {
                _cleanup_close_ int tfd = -EBADF;

                if (!is_temp_of(de->d_name, base))
                        continue;
                tfd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
                if (tfd < 0 || flock(tfd, LOCK_EX | LOCK_NB) < 0)
                        continue;
                (void) unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
}

int cn_write_file_atomic(const char *root, const char *path, const void *data, size_t size, mode_t mode,
                         uid_t uid, gid_t gid, CnWriteFlags flags) {
        _cleanup_free_ char *base = NULL, *tmp = NULL;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        uint64_t rnd;
        int r;

        assert(data || size == 0);
        r = open_parent(root, path, flags & CN_WRITE_MKDIR, &dir_fd, &base);
        if (r < 0)
                return r;

        remove_stale_temps(dir_fd, base);
        if (existing_is_identical(dir_fd, base, data, size, mode, uid, gid) > 0)
                return 0;

        r = cn_random_u64(&rnd);
        if (r < 0)
                return r;
        /* A hidden name, so that directory watchers (kubelet's static pod dir) ignore it. */
        if (asprintf(&tmp, ".#%s.%016llx", base, (unsigned long long) rnd) < 0)
                return -ENOMEM;
        /* Created with 0600: content must not be readable by others before fchmod() decides. */
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        /* Marks the file as in use until we are done with it (see remove_stale_temps()). */
        (void) flock(fd, LOCK_EX | LOCK_NB);

        r = write_all(fd, data, size);
        if (r >= 0 && (uid != CN_UID_INVALID || gid != CN_GID_INVALID) && fchown(fd, uid, gid) < 0)
                r = -errno;
        /* After fchown(), which may clear setuid bits. */
        if (r >= 0 && fchmod(fd, mode & 07777) < 0)
                r = -errno;
        if (r >= 0 && !(flags & CN_WRITE_NO_SYNC) && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, base) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }
        if (!(flags & CN_WRITE_NO_SYNC) && fsync(dir_fd) < 0)
                return -errno;
        return 1;
}

int cn_remove_file(const char *root, const char *path) {
        _cleanup_free_ char *base = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        int r;

        r = open_parent(root, path, false, &dir_fd, &base);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (unlinkat(dir_fd, base, 0) < 0)
                return errno == ENOENT ? 0 : -errno;
        (void) fsync(dir_fd);
        return 1;
}
