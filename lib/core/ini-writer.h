/* SPDX-License-Identifier: Apache-2.0 */
/* INI writer for cloud.conf as the Kubernetes cloud providers read it (gcfg syntax):
 *   [Section]  [Section "subsection"]  key = value
 * Names are validated as gcfg defines them: a key is a letter then letters, digits and '-'; a
 * section name also allows '.'; a subsection is any text without control characters. A value
 * with a newline, CR or NUL or another control character except tab is refused; a value that a
 * gcfg reader would not return verbatim unquoted (leading/trailing blanks, ';', '#', '"', '\',
 * empty) is double-quoted with \" \\ \t escapes. So no value can start a section or a key.
 *
 * Errors are sticky: after the first failure later calls do nothing and cn_ini_finish() returns
 * that error, so callers write a sequence of calls and check once. */
#pragma once

#include <stdint.h>

#include "macro.h"

typedef struct CnIni CnIni;

int cn_ini_new(CnIni **ret);
CnIni *cn_ini_free(CnIni *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(CnIni *, cn_ini_free);
#define _cleanup_ini_ _cleanup_(cn_ini_freep)

/* Starts a section; subsection may be NULL. */
int cn_ini_section(CnIni *w, const char *name, const char *subsection);
int cn_ini_set(CnIni *w, const char *key, const char *value);
int cn_ini_set_bool(CnIni *w, const char *key, bool value);
int cn_ini_set_int(CnIni *w, const char *key, int64_t value);
/* Writes a JSON object of sections: {"Global": {"key": "v", "n": 1, "list": ["a", "b"]},
 * "VirtualCenter": {"10.0.0.1": {"user": "u"}}}. Scalars become keys, arrays repeated keys,
 * and an object member becomes a subsection [Section "member"]. */
int cn_ini_add_json(CnIni *w, json_object *sections);
/* The text; the writer can be freed afterwards. */
int cn_ini_finish(CnIni *w, char **ret, size_t *ret_size);
