/* SPDX-License-Identifier: Apache-2.0 */
/* Cleanup helpers and small macros shared by every cloudnode module. Ownership is visible in the
 * declaration: a variable declared _cleanup_free_ is freed when it leaves scope unless TAKE_PTR()
 * hands it on. */
#pragma once

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmnl/libmnl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <yaml.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _pure_ __attribute__((pure))
#define _const_ __attribute__((const))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _sentinel_ __attribute__((sentinel))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) MIN(MAX((x), (lo)), (hi))
#define STRLEN(s) (sizeof(s) - 1)
#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#define isempty(s) (!(s) || !(s)[0])
#define strempty(s) ((s) ?: "")
#define strna(s) ((s) ?: "n/a")
#define yes_no(b) ((b) ? "yes" : "no")
#define true_false(b) ((b) ? "true" : "false")

#define ASSERT_PTR(p)                                                                                  \
        ({                                                                                             \
                typeof(p) _p_ = (p);                                                                   \
                assert(_p_);                                                                           \
                _p_;                                                                                   \
        })

/* Return the pointer and forget it, so a _cleanup_ handler does not free it. */
#define TAKE_PTR(p)                                                                                    \
        ({                                                                                             \
                typeof(p) *_pp_ = &(p);                                                                \
                typeof(p) _v_ = *_pp_;                                                                 \
                *_pp_ = NULL;                                                                          \
                _v_;                                                                                   \
        })
#define TAKE_FD(fd)                                                                                    \
        ({                                                                                             \
                int *_fdp_ = &(fd);                                                                    \
                int _fd_ = *_fdp_;                                                                     \
                *_fdp_ = -EBADF;                                                                       \
                _fd_;                                                                                  \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                        \
        static inline void func##p(type *p) {                                                          \
                if (*p)                                                                                \
                        func(*p);                                                                      \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        (void) safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* NULL-terminated string vectors. */
static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Library handles. */
static inline void json_object_putp(json_object **p) {
        if (*p)
                (void) json_object_put(*p);
}
#define _cleanup_json_ _cleanup_(json_object_putp)
static inline void yaml_parser_deletep(yaml_parser_t **p) {
        if (*p)
                yaml_parser_delete(*p);
}
static inline void yaml_event_deletep(yaml_event_t *e) {
        yaml_event_delete(e);
}
#define _cleanup_yaml_event_ _cleanup_(yaml_event_deletep)
DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free_all);
DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct mnl_socket *, mnl_socket_close);
