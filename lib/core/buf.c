/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded growable buffer. See buf.h. */
#include <stdint.h>

#include "buf.h"

void cn_buf_init(CnBuf *b, size_t max) {
        assert(b);
        *b = (CnBuf){ .max = max };
}

void cn_buf_done(CnBuf *b) {
        assert(b);
        free(b->data);
        b->data = NULL;
        b->len = b->alloc = 0;
}

void cn_buf_reset(CnBuf *b) {
        assert(b);
        b->len = 0;
        if (b->data)
                b->data[0] = 0;
}

/* Makes room for extra more bytes plus the terminating NUL. */
static int buf_reserve(CnBuf *b, size_t extra) {
        size_t need, n;
        char *p;

        if (extra > b->max || b->len > b->max - extra)
                return -E2BIG;
        need = b->len + extra + 1;
        if (need <= b->alloc)
                return 0;
        n = MAX(b->alloc, (size_t) 64);
        while (n < need)
                n = n > SIZE_MAX / 2 ? need : n * 2;
        /* Never allocate much beyond what the cap allows. */
        if (b->max < SIZE_MAX)
                n = MIN(n, b->max + 1);
        p = realloc(b->data, n);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->alloc = n;
        return 0;
}

int cn_buf_reserve(CnBuf *b, size_t extra) {
        assert(b);
        return buf_reserve(b, extra);
}

int cn_buf_add(CnBuf *b, const void *data, size_t len) {
        int r;

        assert(b);
        assert(data || len == 0);
        r = buf_reserve(b, len);
        if (r < 0)
                return r;
        if (len > 0)
                memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = 0;
        return 0;
}

int cn_buf_add_str(CnBuf *b, const char *s) {
        assert(s);
        return cn_buf_add(b, s, strlen(s));
}

int cn_buf_add_char(CnBuf *b, char c) {
        return cn_buf_add(b, &c, 1);
}

int cn_buf_vprintf(CnBuf *b, const char *fmt, va_list ap) {
        /* Printed once where it fits in the room left (what the buffer is mostly used for: lines
         * of a request, of metrics, added to a buffer grown already), twice otherwise. */
        size_t room = b && b->data ? b->alloc - b->len : 0;
        va_list aq;
        int n, r;

        assert(b);
        va_copy(aq, ap);
        n = vsnprintf(room > 0 ? b->data + b->len : NULL, room, fmt, aq);
        va_end(aq);
        if (n >= 0 && (size_t) n < room && (size_t) n <= b->max - b->len) {
                b->len += (size_t) n;
                return 0;
        }
        /* What did not fit leaves the buffer as it was. */
        if (room > 0)
                b->data[b->len] = 0;
        if (n < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t) n);
        if (r < 0)
                return r;
        (void) vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
        b->len += (size_t) n;
        return 0;
}

int cn_buf_printf(CnBuf *b, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = cn_buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

void cn_buf_consume(CnBuf *b, size_t n) {
        assert(b);
        if (n >= b->len) {
                cn_buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
        b->data[b->len] = 0;
}

void cn_buf_truncate(CnBuf *b, size_t len) {
        assert(b);
        if (len >= b->len)
                return;
        b->len = len;
        b->data[len] = 0;
}

const char *cn_buf_str(const CnBuf *b) {
        assert(b);
        return b->data ?: "";
}

int cn_buf_steal(CnBuf *b, char **ret, size_t *ret_len) {
        char *p;

        assert(b);
        assert(ret);
        p = b->data ? b->data : strdup("");
        if (!p)
                return -ENOMEM;
        if (ret_len)
                *ret_len = b->len;
        *ret = p;
        b->data = NULL;
        b->len = b->alloc = 0;
        return 0;
}
