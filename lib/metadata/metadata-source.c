/* SPDX-License-Identifier: Apache-2.0 */
/* Document sets and parser helpers shared by the platform sources (see metadata-source.h). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "log.h"
#include "json-util.h"
#include "metadata-source.h"
#include "string-util.h"
#include "yaml-util.h"

void cn_metadata_docs_done(CnMetadataDocs *d) {
        for (size_t i = 0; i < d->n; i++) {
                free(d->docs[i].path);
                free(d->docs[i].data);
        }
        free(d->docs);
        free(d->error);
        *d = (CnMetadataDocs) {};
}

int cn_metadata_docs_error(CnMetadataDocs *d, const char *fmt, ...) {
        va_list ap;

        if (!d->error) {
                va_start(ap, fmt);
                if (vasprintf(&d->error, fmt, ap) < 0)
                        d->error = NULL;
                va_end(ap);
        }
        return -EBADMSG;
}

int cn_metadata_docs_put(CnMetadataDocs *d, const char *path, const char *data, size_t size) {
        CnMetadataDoc *n;
        _cleanup_free_ char *p = strdup(path), *copy = malloc(size + 1);

        if (!p || !copy)
                return -ENOMEM;
        memcpy(copy, data, size);
        copy[size] = 0;
        n = reallocarray(d->docs, d->n + 1, sizeof(CnMetadataDoc));
        if (!n)
                return -ENOMEM;
        d->docs = n;
        d->docs[d->n++] = (CnMetadataDoc) { .path = TAKE_PTR(p), .data = TAKE_PTR(copy), .size = size };
        return 0;
}

const char *cn_metadata_docs_get(CnMetadataDocs *d, const char *path, size_t *ret_size) {
        for (size_t i = 0; i < d->n; i++)
                if (streq(d->docs[i].path, path)) {
                        if (ret_size)
                                *ret_size = d->docs[i].size;
                        return d->docs[i].data;
                }
        return NULL;
}

int cn_metadata_docs_get_text(CnMetadataDocs *d, const char *path, char **ret) {
        size_t size;
        const char *s = cn_metadata_docs_get(d, path, &size), *e;
        char *t;

        *ret = NULL;
        if (!s)
                return 0;
        /* An embedded NUL would silently cut the value short. */
        if (strlen(s) != size)
                return cn_metadata_docs_error(d, "%s: contains a NUL byte", path);
        while (*s && strchr(" \t\r\n", *s))
                s++;
        e = s + strlen(s);
        while (e > s && strchr(" \t\r\n", e[-1]))
                e--;
        if (e == s)
                return 0;
        t = strndup(s, e - s);
        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

/* A document parsed into a json-c tree; *ret NULL when absent (or, for YAML, empty). */
static int docs_get_tree(CnMetadataDocs *d, const char *path, CnTreeParser parse, const char *format,
                         json_object **ret) {
        _cleanup_free_ char *error = NULL;
        size_t size;
        const char *s = cn_metadata_docs_get(d, path, &size);
        int r;

        *ret = NULL;
        if (!s)
                return 0;
        r = parse(s, size, CN_METADATA_DOCUMENT_SIZE_MAX, ret, &error);
        if (r == -ENODATA)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return cn_metadata_docs_error(d, "%s: not valid %s: %s", path, format, strna(error));
        return 0;
}

int cn_metadata_docs_get_json(CnMetadataDocs *d, const char *path, json_object **ret) {
        return docs_get_tree(d, path, cn_json_parse, "JSON", ret);
}

int cn_metadata_docs_get_yaml(CnMetadataDocs *d, const char *path, json_object **ret) {
        return docs_get_tree(d, path, cn_yaml_parse, "YAML", ret);
}

/* Records why reading dir/name failed (the first failure only: it is what the user is told) and
 * returns r. credential: the systemd credential that would have stood in for the file. */
static int read_error(CnMetadataDocs *d, int r, const char *dir, const char *name, const char *what,
                      const char *credential) {
        const char *sep = !name ? "" : cn_endswith(dir, "/") ? "" : "/";

        if (!d->error)
                (void) cn_set_message(&d->error, "%s%s%s: %s%s%s", dir, sep, strempty(name), what,
                                      credential ? "; the service has no credential " : "", strempty(credential));
        return log_debug_errno(r, "Failed to read %s%s%s: %s", dir, sep, strempty(name), what);
}

/* Opens name below dir_fd and stores its content as the document k->path. 0 when stored, -ENOENT
 * when the file is not there (for the caller to judge), other errors described in d->error. */
static int read_one(CnMetadataDocs *d, int dir_fd, const char *dir, const char *name, const CnMetadataKey *k,
                    const char *credential) {
        size_t cap = k->flags & CN_METADATA_KEY_DOCUMENT ? CN_METADATA_DOCUMENT_SIZE_MAX : CN_METADATA_SIZE_MAX;
        /* A drive is whatever its label claims: a FIFO must not block the open, and a symbolic
         * link must not make a file of the host a metadata document. */
        _cleanup_close_ int f = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        struct stat st;

        if (f < 0) {
                if (errno == ENOENT)
                        return -ENOENT;
                if (errno == ELOOP)
                        return read_error(d, -EBADMSG, dir, name, "is a symbolic link", NULL);
                return read_error(d, -errno, dir, name, strerror(errno), credential);
        }
        if (fstat(f, &st) < 0)
                return read_error(d, -errno, dir, name, strerror(errno), NULL);
        if (!S_ISREG(st.st_mode))
                return read_error(d, -EBADMSG, dir, name, "not a regular file", NULL);
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        /* Read one byte past the cap to tell "exactly at the cap" from "over it". */
        for (;;) {
                ssize_t l = read(f, buf + n, cap + 1 - n);
                if (l < 0)
                        return read_error(d, -errno, dir, name, strerror(errno), credential);
                if (l == 0)
                        break;
                n += l;
                if (n > cap) {
                        char what[64];

                        (void) snprintf(what, sizeof(what), "larger than %zu bytes", cap);
                        return read_error(d, -EFBIG, dir, name, what, NULL);
                }
        }
        return cn_metadata_docs_put(d, k->path, buf, n);
}

/* The directory of the service's credentials (systemd's LoadCredential=, SetCredential=), NULL
 * outside such a service. */
static const char *credentials_dir(void) {
        const char *e = secure_getenv("CREDENTIALS_DIRECTORY");

        return e && e[0] == '/' ? e : NULL;
}

int cn_metadata_docs_read_dir(CnMetadataDocs *d, int dir_fd, const char *dir, const CnMetadataKey *keys) {
        _cleanup_close_ int fd = -EBADF, creds_fd = -EBADF;
        const char *creds = credentials_dir();
        int r;

        if (dir_fd < 0) {
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return read_error(d, -errno, dir, NULL, strerror(errno), NULL);
                dir_fd = fd;
        }
        for (const CnMetadataKey *k = keys; k->path; k++) {
                /* A file that the service may not read itself comes as its credential when the
                 * service manager could read it. */
                if (k->credential && creds) {
                        if (creds_fd < 0)
                                creds_fd = open(creds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        r = creds_fd >= 0 ? read_one(d, creds_fd, creds, k->credential, k, NULL) : -ENOENT;
                        if (r >= 0)
                                continue;
                        if (r != -ENOENT)
                                return r;
                }
                r = read_one(d, dir_fd, dir, k->path, k, k->credential);
                if (r == -ENOENT && !(k->flags & CN_METADATA_KEY_OPTIONAL))
                        return read_error(d, r, dir, k->path, strerror(ENOENT), NULL);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        return 0;
}

int cn_metadata_json_string(json_object *o, const char *key, char **dst) {
        json_object *v;
        char *s;

        if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array))
                return log_debug_errno(EBADMSG, "Metadata key '%s' is not a scalar.", key);
        if (json_object_is_type(v, json_type_string) && json_object_get_string_len(v) == 0)
                return 0;
        s = strdup(json_object_get_string(v));
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

static int strv_append(char ***l, const char *s) {
        size_t n = 0;
        char **nl, *c;

        for (char **i = *l; i && *i; i++) {
                if (streq(*i, s))
                        return 1;
                n++;
        }
        c = strdup(s);
        if (!c)
                return -ENOMEM;
        nl = reallocarray(*l, n + 2, sizeof(char *));
        if (!nl) {
                free(c);
                return -ENOMEM;
        }
        nl[n] = c;
        nl[n + 1] = NULL;
        *l = nl;
        return 1;
}

int cn_metadata_add_address(char ***l, const char *s, int family) {
        unsigned char buf[sizeof(struct in6_addr)];
        char text[INET6_ADDRSTRLEN];
        _cleanup_free_ char *a = NULL;
        char *slash;

        if (isempty(s))
                return 0;
        a = strdup(s);
        if (!a)
                return -ENOMEM;
        slash = strchr(a, '/');
        if (slash)
                *slash = 0;
        if (inet_pton(family, a, buf) != 1) {
                log_debug("Ignoring '%s': not an IPv%c address.", a, family == AF_INET ? '4' : '6');
                return 0;
        }
        /* The canonical text form, so equal addresses compare equal ("0a01::1" is "a01::1"). */
        if (!inet_ntop(family, buf, text, sizeof(text)))
                return -errno;
        return strv_append(l, text);
}

int cn_metadata_add_label(char ***l, const char *key, const char *value) {
        _cleanup_free_ char *kv = NULL;

        if (isempty(value))
                return 0;
        if (asprintf(&kv, "%s=%s", key, value) < 0)
                return -ENOMEM;
        return strv_append(l, kv);
}

const char *cn_metadata_basename(const char *s) {
        const char *slash = s ? strrchr(s, '/') : NULL;

        return slash ? slash + 1 : s;
}

static const CnMetadataSource *const sources[] = {
        &cn_metadata_source_aws,   &cn_metadata_source_openstack,    &cn_metadata_source_gcp,
        &cn_metadata_source_azure, &cn_metadata_source_digitalocean, &cn_metadata_source_hetzner,
        &cn_metadata_source_proxmoxve, &cn_metadata_source_file,
};

const CnMetadataSource *cn_metadata_source_find(const char *platform) {
        for (size_t i = 0; platform && i < ELEMENTSOF(sources); i++)
                if (streq(sources[i]->platform, platform))
                        return sources[i];
        return NULL;
}

int cn_metadata_parse(const CnMetadataSource *s, CnMetadataDocs *d, CnInstanceMetadata **ret) {
        _cleanup_instance_metadata_ CnInstanceMetadata *m = cn_instance_metadata_new(s->platform);
        const char *field = NULL;
        int r;

        if (!m)
                return -ENOMEM;
        r = s->parse(d, m);
        if (r < 0)
                return r;
        r = cn_instance_metadata_validate(m, &field);
        if (r < 0)
                return log_debug_errno(r, "%s metadata rejected: unsafe or missing value for '%s'.", s->platform,
                                       field);
        *ret = TAKE_PTR(m);
        return 0;
}
