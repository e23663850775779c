/* SPDX-License-Identifier: Apache-2.0 */
/* Atomic writer and capped reader, in a private temp dir used as --root. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <sys/file.h>

#include "fileio.h"
#include "tap.h"

static char root[] = "/tmp/cn-test-fileio-XXXXXX";

static int count_entries(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void rm_rf(const char *p) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
        (void) system(cmd);
}

/* Readers must only ever see a whole old or a whole new file, while a writer replaces it. */
static void test_no_partial_file(void) {
        const size_t size = 256 * 1024;
        _cleanup_free_ char *a = malloc(size), *b = malloc(size), *path = NULL;
        bool whole = true;
        int reads = 0, status, before;
        pid_t pid;

        memset(a, 'a', size);
        memset(b, 'b', size);
        TAP_EQ_INT(cn_write_file_atomic(root, "/race", a, size, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), 1,
                   "initial write");
        before = count_entries(root);
        pid = fork();
        if (pid == 0) {
                int ret = 0;

                for (int i = 0; i < 200 && ret == 0; i++)
                        if (cn_write_file_atomic(root, "/race", i % 2 ? a : b, size, 0644, CN_UID_INVALID,
                                                 CN_GID_INVALID, CN_WRITE_NO_SYNC) < 0)
                                ret = 1;
                /* _exit() skips the cleanup handlers: free here, so the child leaks nothing either. */
                free(a);
                free(b);
                _exit(ret);
        }
        (void) cn_path_prefix_root(root, "/race", &path);
        while (waitpid(pid, &status, WNOHANG) == 0) {
                _cleanup_free_ char *d = NULL;
                size_t n = 0;
                if (cn_read_file(NULL, path, size * 2, &d, &n) < 0) {
                        whole = false;
                        break;
                }
                reads++;
                if (n != size || (memcmp(d, a, size) != 0 && memcmp(d, b, size) != 0))
                        whole = false;
        }
        TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer process succeeded");
        TAP_OK(whole, "%d concurrent reads saw only complete old or new content", reads);
        TAP_EQ_INT(count_entries(root), before, "no temp files left after many replacements");
        TAP_EQ_INT(cn_remove_file(root, "/race"), 1, "remove existing file");
        TAP_EQ_INT(cn_remove_file(root, "/race"), 0, "remove missing file is not an error");
}

/* A writer killed before its rename leaves ".#name.<hex>" behind; the next write of that file
 * removes it, but never the temporary file of a writer still at work (it holds an flock). */
static void test_stale_temps(void) {
        char dir[] = "/tmp/cn-test-stale-XXXXXX", stale[256], live[256], other[256], path[300];
        int live_fd;

        if (!mkdtemp(dir))
                return;
        snprintf(stale, sizeof stale, "%s/.#env.0123456789abcdef", dir);
        snprintf(live, sizeof live, "%s/.#env.fedcba9876543210", dir);
        snprintf(other, sizeof other, "%s/.#envx.0123456789abcdef", dir);
        for (const char *f = stale; f; f = f == stale ? other : NULL)
                close(open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
        live_fd = open(live, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        TAP_OK(live_fd >= 0 && flock(live_fd, LOCK_EX) == 0, "a live writer's temporary file is locked");
        TAP_EQ_INT(cn_write_file_atomic(dir, "/env", "A=1\n", 4, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), 1,
                   "write after a killed writer");
        TAP_OK(access(stale, F_OK) < 0 && errno == ENOENT, "the killed writer's temporary file is removed");
        TAP_OK(access(live, F_OK) == 0, "a live writer's temporary file is left alone");
        TAP_OK(access(other, F_OK) == 0, "another file's temporary file is left alone");
        close(live_fd);
        unlink(live);
        unlink(other);
        snprintf(path, sizeof path, "%s/env", dir);
        unlink(path);
        rmdir(dir);
}

int main(void) {
        _cleanup_free_ char *data = NULL, *p = NULL, *dir = NULL, *big = NULL;
        size_t n = 0;
        struct stat st;

        if (!mkdtemp(root))
                return 1;
        umask(022);

        TAP_EQ_INT(cn_path_prefix_root("/tmp/r/", "/etc/x", &p), 0, "prefix root");
        TAP_EQ_STR(p, "/tmp/r/etc/x", "root and path joined with one slash");
        free(p);
        TAP_EQ_INT(cn_path_prefix_root("/", "/etc/x", &p), 0, "root / means none");
        TAP_EQ_STR(p, "/etc/x", "path unchanged under /");
        free(p);
        p = NULL;

        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/cloud.conf", "secret\n", 7, 0600, CN_UID_INVALID,
                                        CN_GID_INVALID, 0),
                   -ENOENT, "missing parent directory without CN_WRITE_MKDIR fails");
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/cloud.conf", "secret\n", 7, 0600, CN_UID_INVALID,
                                        CN_GID_INVALID, CN_WRITE_MKDIR),
                   1, "first write reports a change");
        (void) cn_path_prefix_root(root, "/etc/kubernetes/cloud.conf", &p);
        TAP_OK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600, "mode 0600 applied exactly");
        TAP_EQ_INT(cn_read_file(root, "/etc/kubernetes/cloud.conf", 100, &data, &n), 0, "read back");
        TAP_OK(n == 7 && streq(data, "secret\n"), "content read back");

        ino_t ino = st.st_ino;
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/cloud.conf", "secret\n", 7, 0600, CN_UID_INVALID,
                                        CN_GID_INVALID, 0),
                   0, "identical content is not rewritten");
        TAP_OK(stat(p, &st) == 0 && st.st_ino == ino, "file not replaced when identical (same inode)");
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/cloud.conf", "secret\n", 7, 0640, CN_UID_INVALID,
                                        CN_GID_INVALID, 0),
                   0, "identical content with another mode reports no change");
        TAP_OK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_ino == ino, "mode corrected in place");
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/cloud.conf", "other\n", 6, 0600, 1, 1, 0), 1,
                   "changed content is written");
        TAP_OK(stat(p, &st) == 0 && st.st_ino != ino && st.st_uid == 1 && st.st_gid == 1 &&
                       (st.st_mode & 07777) == 0600,
               "replaced by rename, owner and mode applied");
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/empty", "", 0, 0644, CN_UID_INVALID, CN_GID_INVALID,
                                        0),
                   1, "empty file written");
        TAP_EQ_INT(cn_write_file_atomic(root, "/etc/kubernetes/empty", "", 0, 0644, CN_UID_INVALID, CN_GID_INVALID,
                                        0),
                   0, "empty file identical");

        /* A symlink at the target is replaced, not followed. */
        free(p);
        (void) cn_path_prefix_root(root, "/victim", &p);
        TAP_EQ_INT(cn_write_file_atomic(root, "/victim", "keep", 4, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), 1,
                   "victim written");
        free(dir);
        (void) cn_path_prefix_root(root, "/link", &dir);
        TAP_OK(symlink(p, dir) == 0, "symlink created");
        TAP_EQ_INT(cn_write_file_atomic(root, "/link", "new", 3, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), 1,
                   "write through a symlink path");
        free(data);
        data = NULL;
        TAP_OK(cn_read_file(root, "/victim", 100, &data, NULL) == 0 && streq(data, "keep"),
               "symlink target untouched");
        TAP_OK(lstat(dir, &st) == 0 && S_ISREG(st.st_mode), "symlink replaced by a regular file");

        /* A failing rename (target is a directory) leaves nothing behind. */
        TAP_EQ_INT(cn_mkdir_p(root, "/adir/sub", 0755), 0, "mkdir -p");
        int before = count_entries(root);
        TAP_EQ_INT(cn_write_file_atomic(root, "/adir", "x", 1, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), -EISDIR,
                   "cannot replace a directory");
        TAP_EQ_INT(count_entries(root), before, "no temp file left after a failed write");

        big = malloc(4097);
        memset(big, 'x', 4097);
        TAP_EQ_INT(cn_write_file_atomic(root, "/big", big, 4097, 0644, CN_UID_INVALID, CN_GID_INVALID, 0), 1,
                   "big file");
        free(data);
        data = NULL;
        TAP_EQ_INT(cn_read_file(root, "/big", 4096, &data, &n), -EFBIG, "read over the cap fails with -EFBIG");
        TAP_OK(!data, "no output on failure");
        TAP_EQ_INT(cn_read_file(root, "/big", 4097, &data, &n), 0, "read at exactly the cap");
        TAP_EQ_INT(n, 4097, "size");
        free(data);
        data = NULL;
        TAP_EQ_INT(cn_read_file(root, "/adir", 4096, &data, &n), -EISDIR, "reading a directory fails");
        TAP_EQ_INT(cn_read_file(root, "/missing", 4096, &data, &n), -ENOENT, "missing file");

        test_no_partial_file();
        rm_rf(root);
        test_stale_temps();
        return tap_done();
}
