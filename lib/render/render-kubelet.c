/* SPDX-License-Identifier: Apache-2.0 */
/* Kubelet drop-in (see render-kubelet.h). */
#include <ctype.h>

#include "buf.h"
#include "labels.h"
#include "render-kubelet.h"
#include "string-util.h"

int cn_unit_quote_environment(const char *name, const char *value, char **ret) {
        _cleanup_buf_ CnBuf b = CN_BUF_INIT(8192);
        const char *parts[] = { name, "=", value };
        size_t n;
        int r;

        if (cn_string_has_cc(name, false) || cn_string_has_cc(value, false) || strpbrk(name, "=\"\\% "))
                return -EINVAL;
        r = cn_buf_add_char(&b, '"');
        for (size_t i = 0; i < ELEMENTSOF(parts) && r >= 0; i++)
                for (const char *c = parts[i]; *c && r >= 0; c++) {
                        if (*c == '"' || *c == '\\')
                                r = cn_buf_add_char(&b, '\\');
                        else if (*c == '%')
                                r = cn_buf_add_char(&b, '%');
                        if (r >= 0)
                                r = cn_buf_add_char(&b, *c);
                }
        if (r >= 0)
                r = cn_buf_add_char(&b, '"');
        if (r < 0)
                return r;
        return cn_buf_steal(&b, ret, &n);
}

int cn_render_kubelet_dropin(const CnRenderParams *p, char **ret, size_t *ret_size) {
        _cleanup_buf_ CnBuf b = CN_BUF_INIT(16 * 1024);
        _cleanup_free_ char *provider = NULL, *node = NULL;
        const CnInstanceMetadata *m = p->metadata;
        _cleanup_free_ char *lower = NULL;
        const char *node_name = p->node_name;
        int r;

        /* Without a configured name the kubelet would use the host name in lower case; so do we. */
        if (!node_name && m && m->hostname) {
                lower = strdup(m->hostname);
                if (!lower)
                        return -ENOMEM;
                for (char *c = lower; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
                node_name = lower;
        }
        /* A name the API server would refuse would only make the kubelet fail later, far from the
         * cause: refuse it here, with the previous files left in place. */
        if (node_name && !cn_node_name_is_valid(node_name))
                return -EBADMSG;

        if (m && m->provider_id && (r = cn_unit_quote_environment("KUBELET_PROVIDERID", m->provider_id, &provider)) < 0)
                return r;
        if (node_name && (r = cn_unit_quote_environment("KUBELET_NODE_NAME", node_name, &node)) < 0)
                return r;
        if ((r = cn_buf_add_str(&b, "# Written by cloudnode-agent from the instance metadata.\n[Service]\n")) < 0 ||
            (provider && (r = cn_buf_printf(&b, "Environment=%s\n", provider)) < 0) ||
            (node && (r = cn_buf_printf(&b, "Environment=%s\n", node)) < 0))
                return r;
        return cn_buf_steal(&b, ret, ret_size);
}
