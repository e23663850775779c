/* SPDX-License-Identifier: Apache-2.0 */
/* ISO 9660 writer: a NoCloud seed judged by isoinfo (genisoimage) and libblkid — volume id, the Joliet names
 * and the 8.3 names, every file's bytes read back — and the refusals of names, ids and sizes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "iso-writer.h"
#include "tap.h"

/* The output of a shell command (no input of the test's that is not a fixed literal or the temp
 * path). */
static int run(const char *cmd, char **ret) {
        _cleanup_buf_ CnBuf b = CN_BUF_INIT(1024 * 1024);
        char chunk[4096];
        FILE *f = popen(cmd, "r");
        size_t n;
        size_t len;

        if (!f)
                return -errno;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                if (cn_buf_add(&b, chunk, n) < 0)
                        break;
        if (pclose(f) != 0)
                return -EIO;
        return cn_buf_steal(&b, ret, &len);
}

static void check_extract(const char *path, const char *opt, const char *name, const char *want) {
        _cleanup_free_ char *cmd = NULL, *out = NULL;

        TAP_OK(asprintf(&cmd, "isoinfo %s -i %s -x '%s'", opt, path, name) > 0 && run(cmd, &out) == 0 &&
                       streq(out, want),
               "isoinfo %s reads back %s", opt, name);
}

int main(void) {
        static const char user_data[] = "#cloud-config\nhostname: m1\n";
        static const char meta_data[] = "{\"instance-id\":\"u1\",\"local-hostname\":\"m1\"}";
        static const char network[] = "{\"version\":2}";
        char big[5000];
        CnIsoFile files[] = {
                { "user-data", user_data, strlen(user_data) },
                { "meta-data", meta_data, strlen(meta_data) },
                { "network-config", network, strlen(network) },
                { "big.bin", big, sizeof(big) },
        };
        _cleanup_free_ void *img = NULL;
        _cleanup_free_ char *out = NULL, *cmd = NULL;
        char path[] = "/tmp/test-iso-writer-XXXXXX";
        size_t size = 0;
        void *p = NULL;
        int fd;

        if (access("/usr/bin/isoinfo", X_OK) < 0)
                tap_skip_all("isoinfo (genisoimage) is not installed");
        memset(big, 'x', sizeof(big));
        big[sizeof(big) - 1] = 'y';
        TAP_EQ_INT(cn_iso_image("cidata", files, ELEMENTSOF(files), 1700000000, &img, &size), 0, "image built");
        TAP_OK(size % 2048 == 0 && size >= 26 * 2048, "whole sectors, files after the descriptors (%zu bytes)", size);
        fd = mkstemp(path);
        TAP_OK(fd >= 0 && write(fd, img, size) == (ssize_t) size, "written to %s", path);
        if (fd >= 0)
                close(fd);

        TAP_OK(asprintf(&cmd, "isoinfo -d -i %s", path) > 0 && run(cmd, &out) == 0, "isoinfo -d reads it");
        TAP_OK(out && strstr(out, "Volume id: cidata\n"), "volume id cidata");
        TAP_OK(out && strstr(out, "Joliet with UCS level 3 found"), "Joliet tree found");
        TAP_OK(out && strstr(out, "Logical block size is: 2048"), "2048-byte blocks");
        free(TAKE_PTR(out));
        free(TAKE_PTR(cmd));
        /* cloud-init finds its NoCloud seed by the label libblkid reports (LABEL=cidata). */
        if (access("/sbin/blkid", X_OK) == 0 || access("/usr/sbin/blkid", X_OK) == 0)
                TAP_OK(asprintf(&cmd, "PATH=$PATH:/sbin:/usr/sbin blkid -p -o export %s", path) > 0 &&
                               run(cmd, &out) == 0 && strstr(out, "\nLABEL=cidata\n") &&
                               strstr(out, "\nTYPE=iso9660\n"),
                       "libblkid: TYPE=iso9660, LABEL=cidata");
        free(TAKE_PTR(out));
        free(TAKE_PTR(cmd));
        TAP_OK(asprintf(&cmd, "isoinfo -J -f -i %s | sort", path) > 0 && run(cmd, &out) == 0 &&
                       streq(out, "/big.bin\n/meta-data\n/network-config\n/user-data\n"),
               "Joliet: the names as given: %s", strna(out));
        free(TAKE_PTR(out));
        free(TAKE_PTR(cmd));
        TAP_OK(asprintf(&cmd, "isoinfo -f -i %s | sort", path) > 0 && run(cmd, &out) == 0 &&
                       streq(out, "/BIG.BIN;1\n/META_DAT.;1\n/NETWORK_.;1\n/USER_DAT.;1\n"),
               "ISO 9660 level 1: 8.3 names: %s", strna(out));
        check_extract(path, "-J", "/user-data", user_data);
        check_extract(path, "-J", "/meta-data", meta_data);
        check_extract(path, "-J", "/network-config", network);
        check_extract(path, "", "/USER_DAT.;1", user_data);
        free(TAKE_PTR(out));
        free(TAKE_PTR(cmd));
        TAP_OK(asprintf(&cmd, "isoinfo -J -i %s -x /big.bin", path) > 0 && run(cmd, &out) == 0 &&
                       strlen(out) == sizeof(big) && out[0] == 'x' && out[sizeof(big) - 1] == 'y',
               "a file of three sectors reads back whole");
        (void) unlink(path);

        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { "User-Data", "x", 1 } }, 1, 0, &p, &size), -EINVAL,
                   "an upper-case name is refused");
        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { "../x", "x", 1 } }, 1, 0, &p, &size), -EINVAL,
                   "a path is refused");
        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { ".hidden", "x", 1 } }, 1, 0, &p, &size), -EINVAL,
                   "a name starting with a dot is refused");
        TAP_EQ_INT(cn_iso_image("cid ata", files, 1, 0, &p, &size), -EINVAL, "a volume id with a space is refused");
        TAP_EQ_INT(cn_iso_image("abcdefghijklmnopq", files, 1, 0, &p, &size), -EINVAL,
                   "a volume id beyond 16 characters is refused");
        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { "user-data-1", "x", 1 }, { "user-data-2", "y", 1 } }, 2, 0,
                                &p, &size),
                   -ENOTUNIQ, "two names with one 8.3 name are refused");
        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { "a", "x", 1 }, { "a", "y", 1 } }, 2, 0, &p, &size),
                   -EINVAL, "a name given twice is refused");
        TAP_EQ_INT(cn_iso_image("cidata", (CnIsoFile[]) { { "a", big, CN_ISO_MAX_SIZE + 1 } }, 1, 0, &p, &size),
                   -E2BIG, "a file beyond the image's cap is refused");
        TAP_OK(p == NULL, "and nothing is returned on refusal");
        return tap_done();
}
