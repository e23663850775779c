/* SPDX-License-Identifier: Apache-2.0 */
/* XML to json-c with expat; see xml-util.h. */
#include <expat.h>

#include "json-util.h"
#include "log.h"
#include "xml-util.h"

typedef struct Frame {
        char *name;
        json_object *container; /* object or array once a child ended, else NULL */
        char *text;
        size_t text_len;
        bool has_children;
} Frame;

typedef struct XmlParse {
        XML_Parser parser;
        Frame stack[CN_XML_MAX_DEPTH + 1]; /* [0]: the document */
        unsigned depth;
        const char *error;
} XmlParse;

static void frame_done(Frame *f) {
        free(f->name);
        json_object_put(f->container);
        free(f->text);
        *f = (Frame) {};
}

static void stop(XmlParse *x, const char *why) {
        if (!x->error)
                x->error = why;
        XML_StopParser(x->parser, XML_FALSE);
}

static bool all_space(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r\n", s[i]))
                        return false;
        return true;
}

static const char *local_name(const char *name) {
        const char *colon = strrchr(name, ':');

        return colon ? colon + 1 : name;
}

static bool is_list_item(const char *name) {
        return streq(name, "item") || streq(name, "member");
}

static void on_start(void *userdata, const XML_Char *name, const XML_Char **attrs) {
        XmlParse *x = userdata;
        Frame *parent = &x->stack[x->depth];

        (void) attrs;
        if (x->depth >= CN_XML_MAX_DEPTH)
                return stop(x, "elements nested too deeply");
        if (parent->text && !all_space(parent->text, parent->text_len))
                return stop(x, "text mixed with elements");
        parent->has_children = true;
        x->depth++;
        x->stack[x->depth] = (Frame) { .name = strdup(local_name(name)) };
        if (!x->stack[x->depth].name)
                stop(x, "out of memory");
}

static void on_text(void *userdata, const XML_Char *s, int len) {
        XmlParse *x = userdata;
        Frame *f = &x->stack[x->depth];
        char *t;

        if (x->depth == 0 || len <= 0)
                return;
        if (f->has_children) {
                if (!all_space(s, len))
                        stop(x, "text mixed with elements");
                return;
        }
        /* The whole document is bounded by max_size, so is the text of one element. */
        t = realloc(f->text, f->text_len + len + 1);
        if (!t)
                return stop(x, "out of memory");
        memcpy(t + f->text_len, s, len);
        f->text_len += len;
        t[f->text_len] = 0;
        f->text = t;
}

static void on_end(void *userdata, const XML_Char *name) {
        XmlParse *x = userdata;
        Frame *f = &x->stack[x->depth], *parent = &x->stack[x->depth - 1];
        json_object *value;

        (void) name;
        if (f->has_children)
                value = f->container ? TAKE_PTR(f->container) : json_object_new_object();
        else {
                /* Pretty-printed documents pad values with the indentation. */
                const char *t = f->text ?: "";
                size_t n = f->text_len;

                while (n > 0 && strchr(" \t\r\n", *t))
                        t++, n--;
                while (n > 0 && strchr(" \t\r\n", t[n - 1]))
                        n--;
                value = json_object_new_string_len(t, (int) n);
        }
        if (!value)
                return stop(x, "out of memory");
        if (!parent->container) {
                parent->container = is_list_item(f->name) && x->depth > 1 ? json_object_new_array()
                                                                            : json_object_new_object();
                if (!parent->container) {
                        json_object_put(value);
                        return stop(x, "out of memory");
                }
        }
        if (json_object_is_type(parent->container, json_type_array)) {
                if (!is_list_item(f->name)) {
                        json_object_put(value);
                        return stop(x, "a list mixes items with other elements");
                }
                if (json_object_array_add(parent->container, value) < 0) {
                        json_object_put(value);
                        return stop(x, "out of memory");
                }
        } else if (json_object_object_add(parent->container, f->name, value) < 0)
                return stop(x, "out of memory");
        frame_done(f);
        x->depth--;
}

static void on_doctype(void *userdata, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
                       int has_internal_subset) {
        (void) name, (void) sysid, (void) pubid, (void) has_internal_subset;
        /* No answer of a cloud API has one; refusing it rules out every entity expansion. */
        stop(userdata, "document type declarations are not accepted");
}

int cn_xml_parse(const char *data, size_t size, size_t max_size, json_object **ret, char **ret_error) {
        XmlParse x = {};
        json_object *root = NULL;
        int r = 0;

        assert(data || size == 0);
        assert(ret);
        if (size > max_size || size > INT_MAX)
                return -EFBIG;
        x.parser = XML_ParserCreate(NULL);
        if (!x.parser)
                return -ENOMEM;
        XML_SetUserData(x.parser, &x);
        XML_SetElementHandler(x.parser, on_start, on_end);
        XML_SetCharacterDataHandler(x.parser, on_text);
        XML_SetStartDoctypeDeclHandler(x.parser, on_doctype);
        if (XML_Parse(x.parser, data, (int) size, XML_TRUE) != XML_STATUS_OK || x.error) {
                if (!x.error)
                        x.error = XML_ErrorString(XML_GetErrorCode(x.parser));
                r = streq(x.error, "out of memory") ? -ENOMEM : -EBADMSG;
                log_debug("Malformed XML (line %lu): %s", (unsigned long) XML_GetCurrentLineNumber(x.parser), x.error);
                if (ret_error && r == -EBADMSG && asprintf(ret_error, "malformed XML: %s", x.error) < 0)
                        *ret_error = NULL;
        } else
                root = TAKE_PTR(x.stack[0].container);
        for (unsigned i = 0; i <= x.depth; i++)
                frame_done(&x.stack[i]);
        XML_ParserFree(x.parser);
        if (r < 0)
                return r;
        if (!root)
                return -EBADMSG;
        *ret = root;
        return 0;
}
