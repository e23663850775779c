/* SPDX-License-Identifier: Apache-2.0 */
/* INI writer: gcfg-compatible output, quoting of special values, refusal of values and names that
 * could change the file's structure, sticky errors. */
#include "ini-writer.h"
#include "json-util.h"
#include "tap.h"

static void check_value(const char *value, const char *expected_line) {
        _cleanup_ini_ CnIni *w = NULL;
        _cleanup_free_ char *out = NULL, *exp = NULL;

        (void) cn_ini_new(&w);
        (void) cn_ini_section(w, "Global", NULL);
        (void) cn_ini_set(w, "v", value);
        exp = malloc(strlen(expected_line) + 32);
        sprintf(exp, "[Global]\nv = %s\n", expected_line);
        TAP_OK(cn_ini_finish(w, &out, NULL) == 0 && streq(out, exp), "value written as: %s", expected_line);
}

static void check_refused_value(const char *value, const char *what) {
        _cleanup_ini_ CnIni *w = NULL;
        _cleanup_free_ char *out = NULL;

        (void) cn_ini_new(&w);
        (void) cn_ini_section(w, "Global", NULL);
        TAP_EQ_INT(cn_ini_set(w, "v", value), -EINVAL, what);
        TAP_OK(cn_ini_finish(w, &out, NULL) == -EINVAL && !out, "error is sticky and nothing is output (%s)", what);
}

int main(void) {
        _cleanup_ini_ CnIni *w = NULL, *j = NULL, *bad = NULL, *k = NULL;
        _cleanup_free_ char *out = NULL, *jout = NULL, *bout = NULL;
        _cleanup_json_ json_object *cfg = NULL, *nested = NULL;
        const char *json;

        TAP_EQ_INT(cn_ini_new(&w), 0, "new");
        TAP_EQ_INT(cn_ini_section(w, "Global", NULL), 0, "section");
        TAP_EQ_INT(cn_ini_set(w, "auth-url", "https://keystone.example:5000/v3"), 0, "set");
        TAP_EQ_INT(cn_ini_set_bool(w, "use-octavia", true), 0, "set bool");
        TAP_EQ_INT(cn_ini_set_int(w, "node-volume-attach-limit", 256), 0, "set int");
        TAP_EQ_INT(cn_ini_section(w, "VirtualCenter", "10.0.0.1"), 0, "subsection");
        TAP_EQ_INT(cn_ini_set(w, "datacenters", "dc1"), 0, "set in subsection");
        TAP_EQ_INT(cn_ini_finish(w, &out, NULL), 0, "finish");
        TAP_EQ_STR(out,
                   "[Global]\n"
                   "auth-url = https://keystone.example:5000/v3\n"
                   "use-octavia = true\n"
                   "node-volume-attach-limit = 256\n"
                   "\n"
                   "[VirtualCenter \"10.0.0.1\"]\n"
                   "datacenters = dc1\n",
                   "gcfg layout");

        check_value("plain", "plain");
        check_value("", "\"\"");
        check_value("p@ss;word", "\"p@ss;word\"");
        check_value("#notacomment", "\"#notacomment\"");
        check_value(" padded ", "\" padded \"");
        check_value("back\\slash", "\"back\\\\slash\"");
        check_value("say \"hi\"", "\"say \\\"hi\\\"\"");
        check_value("tab\there", "\"tab\\there\"");
        check_value("a=b [x]", "a=b [x]");
        check_refused_value("x\n[Global]\nauth-url = https://evil", "newline refused");
        check_refused_value("x\rkey = v", "carriage return refused");
        check_refused_value("bell\a", "other control character refused");
        check_refused_value("\xff\xfe", "invalid UTF-8 refused");

        TAP_EQ_INT(cn_ini_new(&k), 0, "new");
        TAP_EQ_INT(cn_ini_set(k, "key", "v"), -EINVAL, "key before any section refused");
        cn_ini_free(TAKE_PTR(k));
        TAP_EQ_INT(cn_ini_new(&k), 0, "new");
        TAP_EQ_INT(cn_ini_section(k, "Glo]bal", NULL), -EINVAL, "']' in section name refused");
        cn_ini_free(TAKE_PTR(k));
        TAP_EQ_INT(cn_ini_new(&k), 0, "new");
        TAP_EQ_INT(cn_ini_section(k, "G", "sub\n[x]"), -EINVAL, "newline in subsection refused");
        cn_ini_free(TAKE_PTR(k));
        TAP_EQ_INT(cn_ini_new(&k), 0, "new");
        (void) cn_ini_section(k, "G", NULL);
        TAP_EQ_INT(cn_ini_set(k, "a = b", "v"), -EINVAL, "key with '=' refused");
        TAP_EQ_INT(cn_ini_set(k, "ok", "v"), -EINVAL, "later calls return the first error");

        TAP_EQ_INT(cn_ini_new(&j), 0, "new");
        json = "{\"Global\":{\"region\":\"RegionOne\",\"ca-file\":\"/etc/ssl/ca.pem\",\"insecure\":false,"
               "\"retries\":3,\"ratio\":0.25,\"unset\":null,\"zone\":[\"a\",\"b\"]},"
               "\"VirtualCenter\":{\"10.0.0.1\":{\"user\":\"u\",\"password\":\"p#1\"}},"
               "\"LoadBalancer\":{}}";
        TAP_EQ_INT(cn_json_parse(json, strlen(json), CN_JSON_MAX_SIZE, &cfg, NULL), 0, "parse config");
        TAP_EQ_INT(cn_ini_add_json(j, cfg), 0, "add JSON sections");
        TAP_EQ_INT(cn_ini_finish(j, &jout, NULL), 0, "finish");
        TAP_EQ_STR(jout,
                   "[Global]\n"
                   "region = RegionOne\n"
                   "ca-file = /etc/ssl/ca.pem\n"
                   "insecure = false\n"
                   "retries = 3\n"
                   "ratio = 0.25\n"
                   "zone = a\n"
                   "zone = b\n"
                   "\n"
                   "[VirtualCenter \"10.0.0.1\"]\n"
                   "user = u\n"
                   "password = \"p#1\"\n"
                   "\n"
                   "[LoadBalancer]\n",
                   "JSON sections: scalars, lists as repeated keys, null omitted, objects as subsections");

        TAP_EQ_INT(cn_ini_new(&bad), 0, "new");
        json = "{\"Global\":{\"a\":{\"b\":{\"c\":1}}}}";
        TAP_EQ_INT(cn_json_parse(json, strlen(json), CN_JSON_MAX_SIZE, &nested, NULL), 0, "parse nested");
        TAP_EQ_INT(cn_ini_add_json(bad, nested), -EINVAL, "nesting below a subsection refused");
        TAP_OK(cn_ini_finish(bad, &bout, NULL) == -EINVAL && !bout, "no partial output");
        return tap_done();
}
