/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded growable buffer (after curl's dynbuf): every buffer has a hard cap, so nothing a peer
 * sends can make us allocate without limit. The data is always NUL-terminated, so a buffer of
 * text can be used as a C string; binary data may contain NULs, use cn_buf_len() then. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "macro.h"

typedef struct CnBuf {
        char *data;
        size_t len;
        size_t alloc;
        size_t max; /* hard cap on len, in bytes */
} CnBuf;

#define CN_BUF_INIT(cap) ((CnBuf){ .max = (cap) })

void cn_buf_init(CnBuf *b, size_t max);
/* Frees the memory; the buffer can be used again afterwards (same cap). */
void cn_buf_done(CnBuf *b);
#define _cleanup_buf_ _cleanup_(cn_buf_done)
/* Forgets the content but keeps the allocation. */
void cn_buf_reset(CnBuf *b);

/* Room for extra more bytes without another allocation (a body whose length is known). -E2BIG
 * beyond the cap, -ENOMEM. */
int cn_buf_reserve(CnBuf *b, size_t extra);

/* Append. -E2BIG when the result would exceed the cap (the buffer is left unchanged), -ENOMEM. */
int cn_buf_add(CnBuf *b, const void *data, size_t len);
int cn_buf_add_str(CnBuf *b, const char *s);
int cn_buf_add_char(CnBuf *b, char c);
int cn_buf_printf(CnBuf *b, const char *fmt, ...) _printf_(2, 3);
int cn_buf_vprintf(CnBuf *b, const char *fmt, va_list ap) _printf_(2, 0);

/* Drops the first n bytes (stream parsers consume what they handled). */
void cn_buf_consume(CnBuf *b, size_t n);
/* Shortens the content to len bytes (len <= current length). */
void cn_buf_truncate(CnBuf *b, size_t len);

/* Never NULL: "" for an empty buffer. */
const char *cn_buf_str(const CnBuf *b);
static inline size_t cn_buf_len(const CnBuf *b) {
        return b->len;
}
/* Hands the NUL-terminated memory to the caller (never NULL on success) and resets the buffer. */
int cn_buf_steal(CnBuf *b, char **ret, size_t *ret_len);
