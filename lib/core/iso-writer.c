/* SPDX-License-Identifier: Apache-2.0 */
/* ISO 9660 (ECMA-119) with Joliet: see iso-writer.h. Layout, in 2048-byte sectors: 0-15 system area,
 * 16 primary volume descriptor, 17 Joliet supplementary volume descriptor, 18 terminator, 19-22 the
 * path tables (L and M of each tree; one entry: the root), then the two root directories, then the
 * files, each starting on a sector. Both trees point at the same file extents. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iso-writer.h"
#include "macro.h"

#define SECTOR 2048U
#define FIRST_DIR_SECTOR 23U
#define NAME_MAX_LEN 64 /* Joliet's limit */
#define VOLUME_ID_MAX 16

typedef struct Entry {
        const CnIsoFile *file;
        char short_name[13]; /* "NNNNNNNN.EEE" */
        uint32_t extent;
} Entry;

static void put_le16(uint8_t *p, uint16_t v) {
        p[0] = v & 0xff;
        p[1] = v >> 8;
}

static void put_be16(uint8_t *p, uint16_t v) {
        p[0] = v >> 8;
        p[1] = v & 0xff;
}

static void put_le32(uint8_t *p, uint32_t v) {
        for (unsigned i = 0; i < 4; i++)
                p[i] = (v >> (8 * i)) & 0xff;
}

static void put_be32(uint8_t *p, uint32_t v) {
        for (unsigned i = 0; i < 4; i++)
                p[3 - i] = (v >> (8 * i)) & 0xff;
}

static void put_both16(uint8_t *p, uint16_t v) {
        put_le16(p, v);
        put_be16(p + 2, v);
}

static void put_both32(uint8_t *p, uint32_t v) {
        put_le32(p, v);
        put_be32(p + 4, v);
}

static bool name_ok(const char *n) {
        size_t len = n ? strlen(n) : 0;

        if (len == 0 || len > NAME_MAX_LEN || n[0] == '.')
                return false;
        return strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

static bool volume_id_ok(const char *v) {
        size_t len = v ? strlen(v) : 0;

        return len > 0 && len <= VOLUME_ID_MAX &&
               strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == len;
}

/* Level 1: at most 8 d-characters, a dot, at most 3 (the last dot separates the extension). */
static void short_name(const char *name, char out[static 13]) {
        const char *dot = strrchr(name, '.');
        size_t base = dot ? (size_t) (dot - name) : strlen(name), n = 0;

        for (size_t i = 0; i < base && n < 8; i++)
                out[n++] = name[i] >= 'a' && name[i] <= 'z' ? (char) (name[i] - 'a' + 'A') :
                           name[i] >= '0' && name[i] <= '9' ? name[i] : '_';
        out[n++] = '.';
        for (size_t i = 0; dot && dot[1 + i] && i < 3; i++) {
                char c = dot[1 + i];

                out[n++] = c >= 'a' && c <= 'z' ? (char) (c - 'a' + 'A') : c >= '0' && c <= '9' ? c : '_';
        }
        out[n] = 0;
}

/* The 7-byte date of a directory record (GMT). */
static void dir_date(uint8_t *p, const struct tm *t) {
        p[0] = (uint8_t) t->tm_year;
        p[1] = (uint8_t) (t->tm_mon + 1);
        p[2] = (uint8_t) t->tm_mday;
        p[3] = (uint8_t) t->tm_hour;
        p[4] = (uint8_t) t->tm_min;
        p[5] = (uint8_t) t->tm_sec;
        p[6] = 0;
}

/* The 17-byte date of a volume descriptor; NULL: "not specified". */
static void vd_date(uint8_t *p, const struct tm *t) {
        char s[64];

        if (!t) {
                memset(p, '0', 16);
                p[16] = 0;
                return;
        }
        (void) snprintf(s, sizeof(s), "%04d%02d%02d%02d%02d%02d00", t->tm_year + 1900, t->tm_mon + 1, t->tm_mday,
                        t->tm_hour, t->tm_min, t->tm_sec);
        memcpy(p, s, 16);
        p[16] = 0;
}

/* The identifier of a record as stored: ASCII or UCS-2 big endian. */
static size_t identifier(const char *name, bool joliet, uint8_t *out) {
        size_t n = 0;

        for (const char *c = name; *c; c++) {
                if (joliet)
                        out[n++] = 0;
                out[n++] = (uint8_t) *c;
        }
        return n;
}

/* One directory record at p (NULL: only its length); returns its length. id of length 1 with a
 * byte 0 or 1 is "." or "..". */
static size_t dir_record(uint8_t *p, const uint8_t *id, size_t id_len, uint32_t extent, uint32_t size, bool dir,
                         const struct tm *t) {
        size_t len = 33 + id_len + (id_len % 2 == 0);

        if (!p)
                return len;
        memset(p, 0, len);
        p[0] = (uint8_t) len;
        put_both32(p + 2, extent);
        put_both32(p + 10, size);
        dir_date(p + 18, t);
        p[25] = dir ? 0x02 : 0;
        put_both16(p + 28, 1);
        p[32] = (uint8_t) id_len;
        memcpy(p + 33, id, id_len);
        return len;
}

/* The root directory of one tree at out (NULL: only its size, whole sectors). Records never
 * cross a sector boundary. */
static uint32_t root_dir(uint8_t *out, Entry *const *entries, size_t n, bool joliet, uint32_t self,
                         uint32_t self_size, const struct tm *t) {
        size_t off = 0;

        for (size_t i = 0; i < n + 2; i++) {
                uint8_t id[2 * NAME_MAX_LEN];
                size_t id_len, len;

                if (i < 2) {
                        id[0] = (uint8_t) i;
                        id_len = 1;
                } else {
                        const char *name = joliet ? entries[i - 2]->file->name : entries[i - 2]->short_name;

                        /* Joliet names go without a version, as genisoimage writes them. */
                        id_len = identifier(name, joliet, id);
                        if (!joliet)
                                id_len += identifier(";1", joliet, id + id_len);
                }
                len = dir_record(NULL, id, id_len, 0, 0, false, t);
                if (off / SECTOR != (off + len - 1) / SECTOR)
                        off = (off / SECTOR + 1) * SECTOR;
                if (out) {
                        if (i < 2)
                                (void) dir_record(out + off, id, id_len, self, self_size, true, t);
                        else
                                (void) dir_record(out + off, id, id_len, entries[i - 2]->extent,
                                                  (uint32_t) entries[i - 2]->file->size, false, t);
                }
                off += len;
        }
        return (uint32_t) ((off + SECTOR - 1) / SECTOR * SECTOR);
}

/* L (little endian) or M (big endian) path table of a tree with only its root. */
static void path_table(uint8_t *p, uint32_t root, bool big_endian) {
        p[0] = 1; /* length of the identifier */
        if (big_endian) {
                put_be32(p + 2, root);
                put_be16(p + 6, 1);
        } else {
                put_le32(p + 2, root);
                put_le16(p + 6, 1);
        }
        p[8] = 0;
}

#define PATH_TABLE_SIZE 10U

static void pad_field(uint8_t *p, size_t size, const char *s, bool joliet) {
        size_t n = 0;

        for (size_t i = 0; i < size; i++)
                p[i] = joliet && i % 2 == 0 ? 0 : ' ';
        for (const char *c = s; *c && n + (joliet ? 2 : 1) <= size; c++) {
                if (joliet)
                        p[n++] = 0;
                p[n++] = (uint8_t) *c;
        }
}

static void volume_descriptor(uint8_t *p, bool joliet, const char *volume_id, uint32_t total, uint32_t l_path,
                              uint32_t m_path, uint32_t root, uint32_t root_size, const struct tm *t) {
        uint8_t dot = 0;

        p[0] = joliet ? 2 : 1;
        memcpy(p + 1, "CD001", 5);
        p[6] = 1;
        pad_field(p + 8, 32, "LINUX", joliet);
        pad_field(p + 40, 32, volume_id, joliet);
        put_both32(p + 80, total);
        if (joliet)
                memcpy(p + 88, "%/E", 3); /* UCS-2 level 3 */
        put_both16(p + 120, 1);
        put_both16(p + 124, 1);
        put_both16(p + 128, SECTOR);
        put_both32(p + 132, PATH_TABLE_SIZE);
        put_le32(p + 140, l_path);
        put_be32(p + 148, m_path);
        (void) dir_record(p + 156, &dot, 1, root, root_size, true, t);
        pad_field(p + 190, 128, "", joliet);
        pad_field(p + 318, 128, "", joliet);
        pad_field(p + 446, 128, "", joliet);
        pad_field(p + 574, 128, "CLOUDNODE", joliet);
        pad_field(p + 702, 37, "", joliet);
        pad_field(p + 739, 37, "", joliet);
        pad_field(p + 776, 37, "", joliet);
        vd_date(p + 813, t);
        vd_date(p + 830, t);
        vd_date(p + 847, NULL);
        vd_date(p + 864, NULL);
        p[881] = 1;
}

static int compare_short(const void *a, const void *b) {
        return strcmp((*(Entry *const *) a)->short_name, (*(Entry *const *) b)->short_name);
}

static int compare_long(const void *a, const void *b) {
        return strcmp((*(Entry *const *) a)->file->name, (*(Entry *const *) b)->file->name);
}

int cn_iso_image(const char *volume_id, const CnIsoFile *files, size_t n_files, time_t mtime, void **ret,
                 size_t *ret_size) {
        Entry entries[CN_ISO_MAX_FILES] = {};
        Entry *by_short[CN_ISO_MAX_FILES], *by_long[CN_ISO_MAX_FILES];
        uint32_t pvd_root = FIRST_DIR_SECTOR, pvd_size, j_root, j_size, next;
        uint64_t total;
        struct tm t;
        uint8_t *img;

        if (!ret || !ret_size || !volume_id_ok(volume_id) || (n_files > 0 && !files))
                return -EINVAL;
        if (n_files > CN_ISO_MAX_FILES)
                return -E2BIG;
        if (!gmtime_r(&mtime, &t) || t.tm_year < 0 || t.tm_year > 255)
                return -EINVAL;
        for (size_t i = 0; i < n_files; i++) {
                if (!name_ok(files[i].name) || (files[i].size > 0 && !files[i].data))
                        return -EINVAL;
                if (files[i].size > CN_ISO_MAX_SIZE)
                        return -E2BIG;
                entries[i].file = &files[i];
                short_name(files[i].name, entries[i].short_name);
                by_short[i] = by_long[i] = &entries[i];
        }
        qsort(by_short, n_files, sizeof(Entry *), compare_short);
        qsort(by_long, n_files, sizeof(Entry *), compare_long);
        for (size_t i = 1; i < n_files; i++) {
                if (streq(by_long[i - 1]->file->name, by_long[i]->file->name))
                        return -EINVAL;
                if (streq(by_short[i - 1]->short_name, by_short[i]->short_name))
                        return -ENOTUNIQ;
        }

        pvd_size = root_dir(NULL, by_short, n_files, false, 0, 0, &t);
        j_root = pvd_root + pvd_size / SECTOR;
        j_size = root_dir(NULL, by_long, n_files, true, 0, 0, &t);
        next = j_root + j_size / SECTOR;
        total = next;
        for (size_t i = 0; i < n_files; i++) {
                entries[i].extent = (uint32_t) total;
                total += (entries[i].file->size + SECTOR - 1) / SECTOR;
                if (total * SECTOR > CN_ISO_MAX_SIZE)
                        return -E2BIG;
        }

        img = calloc(total, SECTOR);
        if (!img)
                return -ENOMEM;
        volume_descriptor(img + 16 * SECTOR, false, volume_id, (uint32_t) total, 19, 20, pvd_root, pvd_size, &t);
        volume_descriptor(img + 17 * SECTOR, true, volume_id, (uint32_t) total, 21, 22, j_root, j_size, &t);
        img[18 * SECTOR] = 255;
        memcpy(img + 18 * SECTOR + 1, "CD001", 5);
        img[18 * SECTOR + 6] = 1;
        path_table(img + 19 * SECTOR, pvd_root, false);
        path_table(img + 20 * SECTOR, pvd_root, true);
        path_table(img + 21 * SECTOR, j_root, false);
        path_table(img + 22 * SECTOR, j_root, true);
        (void) root_dir(img + pvd_root * SECTOR, by_short, n_files, false, pvd_root, pvd_size, &t);
        (void) root_dir(img + j_root * SECTOR, by_long, n_files, true, j_root, j_size, &t);
        for (size_t i = 0; i < n_files; i++)
                if (entries[i].file->size > 0)
                        memcpy(img + (size_t) entries[i].extent * SECTOR, entries[i].file->data, entries[i].file->size);
        *ret = img;
        *ret_size = (size_t) total * SECTOR;
        return 0;
}
