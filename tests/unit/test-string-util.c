/* SPDX-License-Identifier: Apache-2.0 */
/* String helpers: prefixes, strict number parsing, shell quoting, strv. */
#include "string-util.h"
#include "tap.h"

int main(void) {
        _cleanup_strv_free_ char **l = NULL, **c = NULL;
        _cleanup_free_ char *j = NULL, *q1 = NULL, *q2 = NULL, *cat = NULL;
        char ws[] = "  \tpadded value \n";
        int64_t i64;
        uint64_t u64;
        unsigned u;
        int i;

        TAP_EQ_STR(cn_startswith("aws:///zone/i-1", "aws://"), "/zone/i-1", "startswith returns the rest");
        TAP_OK(!cn_startswith("gce://", "aws://"), "startswith NULL on mismatch");
        TAP_EQ_STR(cn_endswith("kubelet.conf", ".conf"), ".conf", "endswith points at the suffix");
        TAP_OK(!cn_endswith("a", "long"), "endswith with a longer suffix");
        TAP_EQ_STR(cn_strstrip(ws), "padded value", "strstrip removes both ends");
        {
                char *msg = (char *) "unset";
                TAP_OK(cn_set_message(&msg, "%s at offset %d", "trailing data", 7) == 0 &&
                               streq(msg, "trailing data at offset 7"),
                       "set_message formats into a new string");
                free(msg);
        }
        cat = cn_strjoin("a", "/", "b", NULL);
        TAP_EQ_STR(cat, "a/b", "strjoin concatenates");

        TAP_OK(cn_safe_atoi64("-42", &i64) == 0 && i64 == -42, "atoi64 negative");
        TAP_EQ_INT(cn_safe_atoi64("42x", &i64), -EINVAL, "trailing garbage rejected");
        TAP_OK(cn_is_uuid("4C4C4544-0042-3510-8052-b4c04f4e3732"), "a UUID, any case");
        TAP_OK(!cn_is_uuid("4c4c4544004235108052b4c04f4e3732") && !cn_is_uuid("4c4c4544-0042-3510-8052-b4c04f4e373") &&
                       !cn_is_uuid("4c4c4544-0042-3510-8052-b4c04f4e373g") && !cn_is_uuid("Not Settable") &&
                       !cn_is_uuid(NULL),
               "no dashes, too short, not hex, DMI's placeholder, NULL: not UUIDs");
        TAP_EQ_INT(cn_safe_atoi64("", &i64), -EINVAL, "empty rejected");
        TAP_EQ_INT(cn_safe_atoi64(" 1", &i64), -EINVAL, "leading space rejected");
        TAP_EQ_INT(cn_safe_atou64("-1", &u64), -EINVAL, "sign rejected for unsigned");
        TAP_EQ_INT(cn_safe_atou64("18446744073709551616", &u64), -ERANGE, "u64 overflow");
        TAP_EQ_INT(cn_safe_atoi("2147483648", &i), -ERANGE, "int overflow");
        TAP_OK(cn_safe_atou("4294967295", &u) == 0 && u == 4294967295U, "u32 max");
        TAP_EQ_INT(cn_parse_boolean("True"), 1, "boolean true");
        TAP_EQ_INT(cn_parse_boolean("off"), 0, "boolean off");
        TAP_EQ_INT(cn_parse_boolean("maybe"), -EINVAL, "boolean garbage");

        TAP_OK(cn_string_has_cc("a\nb", true), "newline is a control character");
        TAP_OK(!cn_string_has_cc("a\tb", true), "tab allowed when asked");
        TAP_OK(cn_utf8_is_valid("z\xc3\xa9\xe2\x82\xac", 6), "valid UTF-8");
        TAP_OK(!cn_utf8_is_valid("\xc0\xaf", 2), "overlong UTF-8 rejected");
        TAP_OK(!cn_utf8_is_valid("\xed\xa0\x80", 3), "surrogate rejected");
        TAP_OK(!cn_utf8_is_valid("\xe2\x82", 2), "truncated sequence rejected");

        TAP_EQ_INT(cn_shell_quote("it's $HOME \"x\" `id` \\", &q1), 0, "shell quote");
        TAP_EQ_STR(q1, "\"it's \\$HOME \\\"x\\\" \\`id\\` \\\\\"", "shell quote escapes \" \\ ` $");
        TAP_EQ_INT(cn_shell_quote("a\nKEY=evil", &q2), -EINVAL, "newline refused by shell quote");

        TAP_EQ_INT(strv_split(" a,b,,c ", ", ", &l), 0, "split");
        TAP_EQ_INT(strv_length(l), 3, "split drops empty fields");
        TAP_OK(strv_contains(l, "b") && !strv_contains(l, "d"), "contains");
        TAP_EQ_INT(strv_extend(&l, "d"), 0, "extend");
        TAP_EQ_INT(strv_copy(l, &c), 0, "copy");
        TAP_EQ_INT(strv_join(c, "|", &j), 0, "join");
        TAP_EQ_STR(j, "a|b|c|d", "joined content");
        return tap_done();
}
