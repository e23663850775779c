/* SPDX-License-Identifier: Apache-2.0 */
/* String and string-vector helpers used all over cloudnode: prefix/suffix tests, number parsing
 * that rejects trailing garbage, NULL-terminated string vectors (strv), shell quoting. */
#pragma once

#include <stdint.h>

#include "macro.h"

/* Returns the rest of s after prefix, or NULL when s does not start with it. */
char *cn_startswith(const char *s, const char *prefix) _pure_;
/* Returns a pointer to the suffix within s, or NULL. */
char *cn_endswith(const char *s, const char *suffix) _pure_;
/* Removes leading and trailing whitespace in place; returns s advanced past the leading part. */
char *cn_strstrip(char *s);
/* Concatenates all arguments up to a NULL into newly allocated memory. */
char *cn_strjoin(const char *a, ...) _sentinel_;

/* asprintf() into *ret, except that *ret is NULL when memory ran out (asprintf leaves it
 * undefined), so a caller that only reports the message never reads a wild pointer. Returns 0 or
 * -ENOMEM. */
int cn_set_message(char **ret, const char *fmt, ...) _printf_(2, 3);
/* Case-insensitive ASCII equality. */
bool cn_streq_ascii_ci(const char *a, const char *b) _pure_;

/* Whether s contains a byte < 0x20 or 0x7f (tab included unless allow_tab). */
bool cn_string_has_cc(const char *s, bool allow_tab) _pure_;
/* Replaces every control character of s (as cn_string_has_cc() sees them, tab included) with a
 * space, in place; returns s. */
char *cn_string_cc_to_space(char *s);
/* Strict UTF-8 validation (no overlongs, no surrogates). */
bool cn_utf8_is_valid(const char *s, size_t len) _pure_;

/* Decimal parsing of the whole string; -EINVAL for garbage or empty, -ERANGE on overflow. */
int cn_safe_atoi64(const char *s, int64_t *ret);
/* Whether s is a UUID in its 8-4-4-4-12 hex form (any case). */
bool cn_is_uuid(const char *s) _pure_;
int cn_safe_atou64(const char *s, uint64_t *ret);
int cn_safe_atoi(const char *s, int *ret);
int cn_safe_atou(const char *s, unsigned *ret);
/* Shortest "%g" form that reads back as exactly d (no "inf"/"nan" handling). Returns buf. */
#define CN_DOUBLE_MAX 32
char *cn_format_double(char buf[static CN_DOUBLE_MAX], double d);

/* "true/yes/on/1" and "false/no/off/0" (case-insensitive), as Kubernetes flags accept. */
int cn_parse_boolean(const char *s);

/* Double-quotes s with \ before " \ ` $, which a POSIX shell and systemd's EnvironmentFile= both
 * read back as the original value. Refuses newline and other control characters with -EINVAL. */
int cn_shell_quote(const char *s, char **ret);

/* NULL-terminated string vectors; strv_free() lives in macro.h. */
size_t strv_length(char *const *l) _pure_;
bool strv_contains(char *const *l, const char *s) _pure_;
/* Appends a copy of value. */
int strv_extend(char ***l, const char *value);
/* Appends value and takes ownership of it (also on failure: it is freed). */
int strv_push(char ***l, char *value);
int strv_copy(char *const *l, char ***ret);
/* Splits s at any of the separator characters; empty fields are dropped. */
int strv_split(const char *s, const char *separators, char ***ret);
/* Joins with separator (NULL means " "). */
int strv_join(char *const *l, const char *separator, char **ret);
#define STRV_FOREACH(s, l) for (char **s = (l); s && *s; s++)
