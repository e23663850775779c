/* SPDX-License-Identifier: Apache-2.0 */
/* YAML loader (libyaml events to json-c) and emitter (json-c to libyaml events). See yaml-util.h. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>

#include "buf.h"
#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"
#include "yaml-util.h"

#define YAML_TAG_PREFIX "tag:yaml.org,2002:"
/* Emitted documents are bounded too: a runaway tree must not eat all memory. */
#define CN_YAML_MAX_OUTPUT (64U * 1024U * 1024U)
#define CN_YAML_EMIT_MAX_DEPTH 256U

typedef struct YamlLoader {
        yaml_parser_t parser;
        unsigned depth;
        size_t nodes;
        char *error;
} YamlLoader;

static int loader_error(YamlLoader *l, const yaml_mark_t *mark, const char *fmt, ...) _printf_(3, 4);
static int loader_error(YamlLoader *l, const yaml_mark_t *mark, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        if (l->error)
                return -EBADMSG;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (asprintf(&l->error, "line %zu column %zu: %s", mark->line + 1, mark->column + 1, strna(msg)) < 0)
                l->error = NULL;
        return -EBADMSG;
}

static int loader_next(YamlLoader *l, yaml_event_t *ev) {
        if (yaml_parser_parse(&l->parser, ev))
                return 0;
        if (l->parser.error == YAML_MEMORY_ERROR)
                return -ENOMEM;
        return loader_error(l, &l->parser.problem_mark, "%s%s%s", strna(l->parser.problem),
                            l->parser.context ? " " : "", strempty(l->parser.context));
}

static bool in_list(const char *s, const char *const *l) {
        for (; *l; l++)
                if (streq(s, *l))
                        return true;
        return false;
}

static const char *const yaml_nulls[] = { "", "~", "null", "Null", "NULL", NULL };
static const char *const yaml_trues[] = { "true", "True", "TRUE", NULL };
static const char *const yaml_falses[] = { "false", "False", "FALSE", NULL };
static const char *const yaml_infs[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                                         "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN", NULL };

/* YAML 1.2 core schema integer: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+ */
static bool resolve_int(const char *s, json_object **ret) {
        const char *p = s;
        int base = 10;
        char *end;

        if (cn_startswith(s, "0o"))
                base = 8, p = s + 2;
        else if (cn_startswith(s, "0x"))
                base = 16, p = s + 2;
        else if (*p == '-' || *p == '+')
                p++;
        if (!*p)
                return false;
        for (const char *c = p; *c; c++)
                if (base == 16 ? !isxdigit((unsigned char) *c) : (*c < '0' || *c > (base == 8 ? '7' : '9')))
                        return false;
        errno = 0;
        long long v = strtoll(base == 10 ? s : p, &end, base);
        if (errno == ERANGE || *end) {
                /* Too big for int64: like other YAML readers, keep it as a float, if it is one. */
                double d = strtod(s, NULL);
                *ret = isfinite(d) ? json_object_new_double(d) : NULL;
        } else
                *ret = json_object_new_int64(v);
        return true;
}

/* YAML 1.2 core schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_float(const char *s) {
        const char *p = s;
        bool digits = false;

        if (*p == '-' || *p == '+')
                p++;
        while (isdigit((unsigned char) *p))
                p++, digits = true;
        if (*p == '.') {
                p++;
                while (isdigit((unsigned char) *p))
                        p++, digits = true;
        }
        if (!digits)
                return false;
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '-' || *p == '+')
                        p++;
                if (!isdigit((unsigned char) *p))
                        return false;
                while (isdigit((unsigned char) *p))
                        p++;
        }
        return *p == 0;
}

/* Resolves a scalar to a JSON value; *ret NULL means JSON null. */
static int resolve_scalar(YamlLoader *l, const yaml_event_t *ev, json_object **ret) {
        const char *v = (const char *) ev->data.scalar.value;
        const char *tag = (const char *) ev->data.scalar.tag;
        size_t len = ev->data.scalar.length;
        bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        const char *t = NULL;
        json_object *o = NULL;

        if (strlen(v) != len)
                return loader_error(l, &ev->start_mark, "NUL character in scalar");
        if (tag && !streq(tag, "!")) {
                t = cn_startswith(tag, YAML_TAG_PREFIX);
                if (!t || !in_list(t, (const char *const[]){ "str", "int", "float", "bool", "null", "binary",
                                                             NULL }))
                        return loader_error(l, &ev->start_mark, "unsupported tag");
        }
        /* Quoted scalars and the non-specific "!" tag are strings. */
        if ((!t && !plain) || (tag && streq(tag, "!")) || (t && (streq(t, "str") || streq(t, "binary")))) {
                o = json_object_new_string_len(v, (int) len);
                if (!o)
                        return -ENOMEM;
                *ret = o;
                return 0;
        }
        if ((!t || streq(t, "null")) && in_list(v, yaml_nulls)) {
                *ret = NULL;
                return 0;
        }
        if (!t || streq(t, "bool")) {
                if (in_list(v, yaml_trues))
                        o = json_object_new_boolean(1);
                else if (in_list(v, yaml_falses))
                        o = json_object_new_boolean(0);
                if (o) {
                        *ret = o;
                        return 0;
                }
        }
        if ((!t || streq(t, "int")) && resolve_int(v, &o)) {
                if (!o)
                        return loader_error(l, &ev->start_mark, "number out of range");
                *ret = o;
                return 0;
        }
        if (!t || streq(t, "float")) {
                if (in_list(v, yaml_infs))
                        return loader_error(l, &ev->start_mark, "infinity or NaN cannot be represented in JSON");
                if (is_float(v)) {
                        double d = strtod(v, NULL);
                        /* JSON has no infinity; a reader of our output would not get this value back. */
                        if (!isfinite(d))
                                return loader_error(l, &ev->start_mark, "number out of range");
                        o = json_object_new_double(d);
                        if (!o)
                                return -ENOMEM;
                        *ret = o;
                        return 0;
                }
        }
        if (t)
                return loader_error(l, &ev->start_mark, "value is not a valid !!%s", t);
        o = json_object_new_string_len(v, (int) len);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}

static int check_collection_tag(YamlLoader *l, const yaml_event_t *ev, const char *tag, const char *kind) {
        const char *t;

        if (!tag || streq(tag, "!"))
                return 0;
        t = cn_startswith(tag, YAML_TAG_PREFIX);
        if (!t || !streq(t, kind))
                return loader_error(l, &ev->start_mark, "unsupported tag on a %s", kind);
        return 0;
}

static int load_node(YamlLoader *l, yaml_event_t *ev, json_object **ret);

static int load_sequence(YamlLoader *l, const yaml_event_t *start, json_object **ret) {
        _cleanup_json_ json_object *a = NULL;
        int r;

        r = check_collection_tag(l, start, (const char *) start->data.sequence_start.tag, "seq");
        if (r < 0)
                return r;
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        for (;;) {
                _cleanup_yaml_event_ yaml_event_t ev = {};
                json_object *item = NULL;

                r = loader_next(l, &ev);
                if (r < 0)
                        return r;
                if (ev.type == YAML_SEQUENCE_END_EVENT)
                        break;
                r = load_node(l, &ev, &item);
                if (r < 0)
                        return r;
                if (json_object_array_add(a, item) < 0) {
                        json_object_put(item);
                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(a);
        return 0;
}

static int load_mapping(YamlLoader *l, const yaml_event_t *start, json_object **ret) {
        _cleanup_json_ json_object *m = NULL;
        int r;

        r = check_collection_tag(l, start, (const char *) start->data.mapping_start.tag, "map");
        if (r < 0)
                return r;
        m = json_object_new_object();
        if (!m)
                return -ENOMEM;
        for (;;) {
                _cleanup_yaml_event_ yaml_event_t kev = {}, vev = {};
                _cleanup_json_ json_object *value = NULL;
                const char *key;

                r = loader_next(l, &kev);
                if (r < 0)
                        return r;
                if (kev.type == YAML_MAPPING_END_EVENT)
                        break;
                if (kev.type == YAML_ALIAS_EVENT)
                        return loader_error(l, &kev.start_mark, "aliases are not allowed");
                if (kev.type != YAML_SCALAR_EVENT)
                        return loader_error(l, &kev.start_mark, "mapping keys must be scalars");
                key = (const char *) kev.data.scalar.value;
                if (strlen(key) != kev.data.scalar.length)
                        return loader_error(l, &kev.start_mark, "NUL character in key");
                if (streq(key, "<<") && kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
                        return loader_error(l, &kev.start_mark, "merge keys are not allowed");
                if (json_object_object_get_ex(m, key, NULL))
                        return loader_error(l, &kev.start_mark, "duplicate key '%s'", key);
                l->nodes++;

                r = loader_next(l, &vev);
                if (r < 0)
                        return r;
                r = load_node(l, &vev, &value);
                if (r < 0)
                        return r;
                if (json_object_object_add(m, key, TAKE_PTR(value)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

static int load_node(YamlLoader *l, yaml_event_t *ev, json_object **ret) {
        int r;

        if (++l->nodes > CN_YAML_MAX_NODES)
                return loader_error(l, &ev->start_mark, "more than %u nodes", CN_YAML_MAX_NODES);
        switch (ev->type) {
        case YAML_SCALAR_EVENT:
                return resolve_scalar(l, ev, ret);
        case YAML_ALIAS_EVENT:
                return loader_error(l, &ev->start_mark, "aliases are not allowed");
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
                if (++l->depth > CN_YAML_MAX_DEPTH)
                        return loader_error(l, &ev->start_mark, "nesting deeper than %u levels",
                                            CN_YAML_MAX_DEPTH);
                r = ev->type == YAML_SEQUENCE_START_EVENT ? load_sequence(l, ev, ret) : load_mapping(l, ev, ret);
                l->depth--;
                return r;
        default:
                return loader_error(l, &ev->start_mark, "unexpected YAML event");
        }
}

/* Loads every document into array (skipping empty ones); with single, more than one document is
 * an error. */
static int load_stream(const char *data, size_t size, size_t max_size, bool single, json_object **ret,
                       char **ret_error) {
        _cleanup_json_ json_object *docs = NULL;
        YamlLoader l = {};
        unsigned n_docs = 0;
        int r;

        assert(data || size == 0);
        if (size > max_size) {
                if (ret_error)
                        (void) cn_set_message(ret_error, "document of %zu bytes exceeds the limit of %zu bytes", size,
                                        max_size);
                return -EFBIG;
        }
        docs = json_object_new_array();
        if (!docs || !yaml_parser_initialize(&l.parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&l.parser, (const unsigned char *) (data ?: ""), size);

        for (bool done = false; !done;) {
                _cleanup_yaml_event_ yaml_event_t ev = {};

                r = loader_next(&l, &ev);
                if (r < 0)
                        goto finish;
                switch (ev.type) {
                case YAML_STREAM_START_EVENT:
                case YAML_DOCUMENT_END_EVENT:
                        break;
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT:
                        if (single && ++n_docs > 1) {
                                r = loader_error(&l, &ev.start_mark, "more than one document");
                                goto finish;
                        }
                        break;
                default: {
                        json_object *o = NULL;
                        r = load_node(&l, &ev, &o);
                        if (r < 0)
                                goto finish;
                        if (o && json_object_array_add(docs, o) < 0) {
                                json_object_put(o);
                                r = -ENOMEM;
                                goto finish;
                        }
                }
                }
        }
        r = 0;
finish:
        yaml_parser_delete(&l.parser);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(l.error);
                free(l.error);
                return r;
        }
        if (single) {
                if (json_object_array_length(docs) == 0) {
                        if (ret_error)
                                (void) cn_set_message(ret_error, "empty document");
                        return -ENODATA;
                }
                *ret = json_object_get(json_object_array_get_idx(docs, 0));
        } else
                *ret = TAKE_PTR(docs);
        return 0;
}

int cn_yaml_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error) {
        assert(ret);
        return load_stream(data, size, max_size, true, ret, ret_error);
}

int cn_yaml_parse_multi(const char *data, size_t size, size_t max_size, json_object **ret_array,
                        char **ret_error) {
        assert(ret_array);
        return load_stream(data, size, max_size, false, ret_array, ret_error);
}

int cn_yaml_parse_file(const char *root, const char *path, size_t max_size, json_object **ret,
                       char **ret_error) {
        return cn_parse_file_with(cn_yaml_parse, root, path, max_size, ret, ret_error);
}

/* Emitter */

static int emit_write(void *userdata, unsigned char *buffer, size_t size) {
        return cn_buf_add(userdata, buffer, size) >= 0;
}

/* Whether a string may be written unquoted: only when no YAML 1.1 reader (sigs.k8s.io/yaml,
 * through go-yaml) or 1.2 reader resolves it to anything else. Deliberately conservative: a
 * letter, '_' or '/' first, then letters, digits and "_./-", and none of 1.1's bool/null words. */
static bool yaml_plain_safe(const char *s) {
        static const char *const words[] = { "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                                             "true", "True", "TRUE", "false", "False", "FALSE", "on", "On",
                                             "ON", "off", "Off", "OFF", "null", "Null", "NULL", NULL };

        if (!isalpha((unsigned char) s[0]) && s[0] != '_' && s[0] != '/')
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("_./-", *c))
                        return false;
        return !in_list(s, words);
}

static int emit_event(yaml_emitter_t *e, yaml_event_t *ev) {
        if (!yaml_emitter_emit(e, ev))
                return log_debug_errno(e->error == YAML_MEMORY_ERROR ? ENOMEM : EINVAL,
                                       "YAML emitter failed: %s", strna(e->problem));
        return 0;
}

static int emit_scalar(yaml_emitter_t *e, const char *v, size_t len, bool is_string) {
        yaml_event_t ev;
        yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;

        if (is_string && (strlen(v) != len || !yaml_plain_safe(v)))
                style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *) v, (int) len, 1, 1, style))
                return -ENOMEM;
        return emit_event(e, &ev);
}

static int emit_node(yaml_emitter_t *e, json_object *o, unsigned depth) {
        yaml_event_t ev;
        char num[64];
        int r;

        if (depth > CN_YAML_EMIT_MAX_DEPTH)
                return -ELOOP;
        switch (json_object_get_type(o)) {
        case json_type_null:
                return emit_scalar(e, "null", 4, false);
        case json_type_boolean:
                return json_object_get_boolean(o) ? emit_scalar(e, "true", 4, false)
                                                  : emit_scalar(e, "false", 5, false);
        case json_type_int:
                (void) snprintf(num, sizeof(num), "%" PRId64, json_object_get_int64(o));
                return emit_scalar(e, num, strlen(num), false);
        case json_type_double: {
                double d = json_object_get_double(o);
                if (isnan(d))
                        return emit_scalar(e, ".nan", 4, false);
                if (isinf(d))
                        return d > 0 ? emit_scalar(e, ".inf", 4, false) : emit_scalar(e, "-.inf", 5, false);
                (void) cn_format_double(num, d);
                /* Keep it a float for the reader: "1" would come back as an integer. */
                if (!strpbrk(num, ".eE"))
                        (void) strcat(num, ".0");
                return emit_scalar(e, num, strlen(num), false);
        }
        case json_type_string:
                return emit_scalar(e, json_object_get_string(o), (size_t) json_object_get_string_len(o), true);
        case json_type_array:
                if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE))
                        return -ENOMEM;
                r = emit_event(e, &ev);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        r = emit_node(e, json_object_array_get_idx(o, i), depth + 1);
                        if (r < 0)
                                return r;
                }
                if (!yaml_sequence_end_event_initialize(&ev))
                        return -ENOMEM;
                return emit_event(e, &ev);
        case json_type_object:
                if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE))
                        return -ENOMEM;
                r = emit_event(e, &ev);
                if (r < 0)
                        return r;
                json_object_object_foreach(o, k, v) {
                        r = emit_scalar(e, k, strlen(k), true);
                        if (r < 0)
                                return r;
                        r = emit_node(e, v, depth + 1);
                        if (r < 0)
                                return r;
                }
                if (!yaml_mapping_end_event_initialize(&ev))
                        return -ENOMEM;
                return emit_event(e, &ev);
        }
        return -EINVAL;
}

static int emit_documents(json_object *const *docs, size_t n, char **ret, size_t *ret_size) {
        _cleanup_buf_ CnBuf out = CN_BUF_INIT(CN_YAML_MAX_OUTPUT);
        yaml_emitter_t e;
        yaml_event_t ev;
        int r;

        assert(ret);
        if (!yaml_emitter_initialize(&e))
                return -ENOMEM;
        yaml_emitter_set_output(&e, emit_write, &out);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);
        yaml_emitter_set_indent(&e, 2);

        if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING)) {
                r = -ENOMEM;
                goto finish;
        }
        r = emit_event(&e, &ev);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, i == 0)) {
                        r = -ENOMEM;
                        break;
                }
                r = emit_event(&e, &ev);
                if (r >= 0)
                        r = emit_node(&e, docs[i], 0);
                if (r >= 0) {
                        if (!yaml_document_end_event_initialize(&ev, 1))
                                r = -ENOMEM;
                        else
                                r = emit_event(&e, &ev);
                }
        }
        if (r >= 0) {
                if (!yaml_stream_end_event_initialize(&ev))
                        r = -ENOMEM;
                else
                        r = emit_event(&e, &ev);
        }
        if (r >= 0 && !yaml_emitter_flush(&e))
                r = -E2BIG;
finish:
        /* A write handler failure (the cap) shows up as a writer error. */
        if (r < 0 && e.error == YAML_WRITER_ERROR)
                r = -E2BIG;
        yaml_emitter_delete(&e);
        if (r < 0)
                return r;
        return cn_buf_steal(&out, ret, ret_size);
}

int cn_yaml_emit(json_object *o, char **ret, size_t *ret_size) {
        return emit_documents(&o, 1, ret, ret_size);
}

int cn_yaml_emit_multi(json_object *array, char **ret, size_t *ret_size) {
        _cleanup_free_ json_object **docs = NULL;
        size_t n;

        if (!json_object_is_type(array, json_type_array))
                return -EINVAL;
        n = json_object_array_length(array);
        docs = calloc(MAX(n, (size_t) 1), sizeof(json_object *));
        if (!docs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                docs[i] = json_object_array_get_idx(array, i);
        return emit_documents(docs, n, ret, ret_size);
}
