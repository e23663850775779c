/* SPDX-License-Identifier: Apache-2.0 */
/* String helpers. See string-util.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "string-util.h"

char *cn_startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);

        if (strncmp(s, prefix, l) != 0)
                return NULL;
        return (char *) s + l;
}

char *cn_endswith(const char *s, const char *suffix) {
        size_t sl = strlen(s), xl = strlen(suffix);

        if (xl > sl || memcmp(s + sl - xl, suffix, xl) != 0)
                return NULL;
        return (char *) s + sl - xl;
}

char *cn_strstrip(char *s) {
        char *e;

        s += strspn(s, " \t\r\n");
        e = s + strlen(s);
        while (e > s && strchr(" \t\r\n", e[-1]))
                e--;
        *e = 0;
        return s;
}

int cn_set_message(char **ret, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        *ret = r < 0 ? NULL : m;
        return r < 0 ? -ENOMEM : 0;
}

char *cn_strjoin(const char *a, ...) {
        va_list ap;
        size_t l = 0;
        char *r, *p;

        va_start(ap, a);
        for (const char *s = a; s; s = va_arg(ap, const char *)) {
                size_t n = strlen(s);
                if (n > SIZE_MAX - 1 - l) {
                        va_end(ap);
                        return NULL;
                }
                l += n;
        }
        va_end(ap);

        r = malloc(l + 1);
        if (!r)
                return NULL;
        p = r;
        va_start(ap, a);
        for (const char *s = a; s; s = va_arg(ap, const char *))
                p = stpcpy(p, s);
        va_end(ap);
        return r;
}

bool cn_streq_ascii_ci(const char *a, const char *b) {
        return strcasecmp(a, b) == 0;
}

bool cn_string_has_cc(const char *s, bool allow_tab) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '\t' && allow_tab)
                        continue;
                if (*p < 0x20 || *p == 0x7f)
                        return true;
        }
        return false;
}

char *cn_string_cc_to_space(char *s) {
        for (unsigned char *p = (unsigned char *) s; p && *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        *p = ' ';
        return s;
}

bool cn_utf8_is_valid(const char *str, size_t len) {
        const unsigned char *s = (const unsigned char *) str;
        size_t i = 0;

        while (i < len) {
                unsigned c = s[i], n;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 1;
                        cp = c & 0x1f;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 2;
                        cp = c & 0x0f;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 3;
                        cp = c & 0x07;
                } else
                        return false;
                if (len - i <= n)
                        return false;
                for (unsigned k = 1; k <= n; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3f);
                }
                if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
                    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += n + 1;
        }
        return true;
}

/* strtoull()/strtoll() accept leading blanks and a sign and ignore trailing garbage; we do not. */
static int parse_integer(const char *s, bool is_signed, int64_t *ret_signed, uint64_t *ret_unsigned) {
        char *end;

        assert(s);
        if (!isdigit((unsigned char) s[is_signed && s[0] == '-' ? 1 : 0]))
                return -EINVAL;
        errno = 0;
        if (is_signed) {
                long long v = strtoll(s, &end, 10);
                if (ret_signed)
                        *ret_signed = v;
        } else {
                unsigned long long v = strtoull(s, &end, 10);
                if (ret_unsigned)
                        *ret_unsigned = v;
        }
        if (errno == ERANGE)
                return -ERANGE;
        return *end ? -EINVAL : 0;
}

int cn_safe_atou64(const char *s, uint64_t *ret) {
        uint64_t v;
        int r = parse_integer(s, false, NULL, &v);
        if (r < 0)
                return r;
        if (ret)
                *ret = v;
        return 0;
}

int cn_safe_atoi64(const char *s, int64_t *ret) {
        int64_t v;
        int r = parse_integer(s, true, &v, NULL);
        if (r < 0)
                return r;
        if (ret)
                *ret = v;
        return 0;
}

int cn_safe_atoi(const char *s, int *ret) {
        int64_t v;
        int r;

        r = cn_safe_atoi64(s, &v);
        if (r < 0)
                return r;
        if (v < INT32_MIN || v > INT32_MAX)
                return -ERANGE;
        if (ret)
                *ret = (int) v;
        return 0;
}

int cn_safe_atou(const char *s, unsigned *ret) {
        uint64_t v;
        int r;

        r = cn_safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        if (ret)
                *ret = (unsigned) v;
        return 0;
}

char *cn_format_double(char buf[static CN_DOUBLE_MAX], double d) {
        for (int prec = 15; prec <= 17; prec++) {
                (void) snprintf(buf, CN_DOUBLE_MAX, "%.*g", prec, d);
                if (strtod(buf, NULL) == d)
                        break;
        }
        return buf;
}

int cn_parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "true", "yes", "on", "y", "t" };
        static const char *const no[] = { "0", "false", "no", "off", "n", "f" };

        assert(s);
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        return -EINVAL;
}

int cn_shell_quote(const char *s, char **ret) {
        size_t n = 2;
        char *r, *p;

        assert(s);
        assert(ret);
        if (cn_string_has_cc(s, false))
                return -EINVAL;
        for (const char *c = s; *c; c++)
                n += strchr("\"\\`$", *c) ? 2 : 1;
        r = malloc(n + 1);
        if (!r)
                return -ENOMEM;
        p = r;
        *p++ = '"';
        for (const char *c = s; *c; c++) {
                if (strchr("\"\\`$", *c))
                        *p++ = '\\';
                *p++ = *c;
        }
        *p++ = '"';
        *p = 0;
        *ret = r;
        return 0;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        for (; l && *l; l++)
                n++;
        return n;
}

bool strv_contains(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

int strv_push(char ***l, char *value) {
        size_t n;
        char **c;

        assert(l);
        if (!value)
                return -EINVAL;
        n = strv_length(*l);
        c = reallocarray(*l, n + 2, sizeof(char *));
        if (!c) {
                free(value);
                return -ENOMEM;
        }
        c[n] = value;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        char *v;

        assert(value);
        v = strdup(value);
        if (!v)
                return -ENOMEM;
        return strv_push(l, v);
}

int strv_copy(char *const *l, char ***ret) {
        _cleanup_strv_free_ char **c = NULL;
        int r;

        assert(ret);
        c = calloc(1, sizeof(char *));
        if (!c)
                return -ENOMEM;
        for (; l && *l; l++) {
                r = strv_extend(&c, *l);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int strv_split(const char *s, const char *separators, char ***ret) {
        _cleanup_strv_free_ char **c = NULL;
        int r;

        assert(s);
        assert(separators);
        assert(ret);
        c = calloc(1, sizeof(char *));
        if (!c)
                return -ENOMEM;
        while (*s) {
                size_t n;

                s += strspn(s, separators);
                n = strcspn(s, separators);
                if (n == 0)
                        break;
                r = strv_push(&c, strndup(s, n));
                if (r < 0)
                        return r;
                s += n;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int strv_join(char *const *l, const char *separator, char **ret) {
        size_t n = 0, sl;
        char *r, *p;

        assert(ret);
        separator = separator ?: " ";
        sl = strlen(separator);
        for (char *const *i = l; i && *i; i++)
                n += strlen(*i) + (i == l ? 0 : sl);
        r = malloc(n + 1);
        if (!r)
                return -ENOMEM;
        p = r;
        *p = 0;
        for (char *const *i = l; i && *i; i++) {
                if (i != l)
                        p = stpcpy(p, separator);
                p = stpcpy(p, *i);
        }
        *ret = r;
        return 0;
}

bool cn_is_uuid(const char *s) {
        if (!s || strlen(s) != 36)
                return false;
        for (size_t k = 0; k < 36; k++)
                if ((k == 8 || k == 13 || k == 18 || k == 23) ? s[k] != '-' : !isxdigit((unsigned char) s[k]))
                        return false;
        return true;
}
