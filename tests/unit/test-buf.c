/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded buffer: the cap holds, content stays NUL-terminated, steal/consume hand over data. */
#include <string.h>

#include "buf.h"
#include "tap.h"

int main(void) {
        _cleanup_buf_ CnBuf b = CN_BUF_INIT(10);
        _cleanup_free_ char *s = NULL;
        size_t n = 99;

        TAP_EQ_STR(cn_buf_str(&b), "", "empty buffer reads as empty string");
        TAP_EQ_INT(cn_buf_add_str(&b, "hello"), 0, "append within the cap");
        TAP_EQ_INT(cn_buf_printf(&b, "%d%s", 42, "!"), 0, "printf within the cap");
        TAP_EQ_STR(cn_buf_str(&b), "hello42!", "content is concatenated and NUL-terminated");
        TAP_EQ_INT(cn_buf_add_str(&b, "abc"), -E2BIG, "append beyond the cap fails with -E2BIG");
        TAP_EQ_STR(cn_buf_str(&b), "hello42!", "failed append leaves the buffer unchanged");
        TAP_EQ_INT(cn_buf_printf(&b, "%s", "xyz"), -E2BIG, "printf beyond the cap fails");
        TAP_EQ_INT(cn_buf_add(&b, "ab", 2), 0, "append exactly up to the cap");
        TAP_EQ_INT(cn_buf_len(&b), 10, "length equals the cap");
        TAP_EQ_INT(cn_buf_add_char(&b, 'x'), -E2BIG, "one byte over the cap fails");
        TAP_OK(b.alloc <= 11, "allocation never exceeds cap + NUL (%zu)", b.alloc);

        cn_buf_consume(&b, 5);
        TAP_EQ_STR(cn_buf_str(&b), "42!ab", "consume drops the front");
        cn_buf_truncate(&b, 2);
        TAP_EQ_STR(cn_buf_str(&b), "42", "truncate shortens");
        TAP_EQ_INT(cn_buf_add(&b, "\0z", 2), 0, "binary data with NUL is accepted");
        TAP_EQ_INT(cn_buf_len(&b), 4, "length counts the embedded NUL");

        TAP_EQ_INT(cn_buf_steal(&b, &s, &n), 0, "steal succeeds");
        TAP_OK(memcmp(s, "42\0z", 5) == 0 && n == 4, "stolen data and size");
        TAP_EQ_INT(cn_buf_len(&b), 0, "buffer is empty after steal");
        TAP_EQ_INT(cn_buf_add_str(&b, "again"), 0, "buffer is usable after steal with the same cap");
        cn_buf_done(&b);
        TAP_EQ_STR(cn_buf_str(&b), "", "done frees and empties");

        /* printf into the room an earlier growth left, into none, and past a cap inside it. */
        CnBuf room = CN_BUF_INIT(100);
        TAP_EQ_INT(cn_buf_reserve(&room, 64), 0, "room reserved");
        TAP_EQ_INT(cn_buf_printf(&room, "%s=%d", "a", 1), 0, "printf into the room");
        TAP_EQ_INT(cn_buf_printf(&room, "%060d", 7), 0, "printf longer than the room left: grown");
        TAP_EQ_INT(cn_buf_len(&room), 63, "both printed whole");
        TAP_OK(strncmp(cn_buf_str(&room), "a=1000", 6) == 0 && cn_buf_str(&room)[62] == '7',
               "in order, NUL-terminated");
        cn_buf_truncate(&room, 3);
        TAP_OK(room.alloc - room.len > 50, "room left after truncating (%zu)", room.alloc - room.len);
        TAP_EQ_INT(cn_buf_printf(&room, "%0100d", 1), -E2BIG, "printf past the cap, though part of it fits the room");
        TAP_EQ_STR(cn_buf_str(&room), "a=1", "leaves the buffer as it was");
        cn_buf_done(&room);
        TAP_EQ_INT(cn_buf_printf(&room, "%s", ""), 0, "printf of nothing into no allocation");
        TAP_EQ_STR(cn_buf_str(&room), "", "reads as empty");
        cn_buf_done(&room);

        CnBuf big = CN_BUF_INIT(1 << 20);
        int r = 0;
        for (int i = 0; i < 100000 && r == 0; i++)
                r = cn_buf_add_str(&big, "0123456789abcdef");
        TAP_EQ_INT(r, -E2BIG, "a long stream of appends stops at the cap");
        TAP_EQ_INT(cn_buf_len(&big), 1 << 20, "exactly cap bytes kept");
        cn_buf_done(&big);
        return tap_done();
}
