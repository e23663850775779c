/* SPDX-License-Identifier: Apache-2.0 */
/* Hashing, base64 and randomness through OpenSSL. See hash-util.h. */
#include <limits.h>
#include <openssl/rand.h>

#include "hash-util.h"
#include "log.h"

int cn_sha256_hex(const void *data, size_t size, char ret[static CN_SHA256_HEX_SIZE]) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        assert(data || size == 0);
        ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(ctx, data, size) != 1 ||
            EVP_DigestFinal_ex(ctx, md, &n) != 1 || n != 32)
                return log_debug_errno(EIO, "SHA-256 computation failed in OpenSSL.");
        for (unsigned i = 0; i < n; i++)
                (void) snprintf(ret + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int cn_base64_encode(const void *data, size_t size, char **ret) {
        char *s;

        assert(data || size == 0);
        assert(ret);
        if (size > (size_t) INT_MAX / 4 * 3 - 3)
                return -E2BIG;
        s = malloc((size + 2) / 3 * 4 + 1);
        if (!s)
                return -ENOMEM;
        (void) EVP_EncodeBlock((unsigned char *) s, data, (int) size);
        *ret = s;
        return 0;
}

int cn_base64_decode(const char *s, size_t len, void **ret, size_t *ret_size) {
        _cleanup_free_ char *clean = NULL;
        _cleanup_free_ unsigned char *out = NULL;
        size_t n = 0, pad = 0;
        int k;

        assert(s || len == 0);
        assert(ret);
        if (len > (size_t) INT_MAX)
                return -E2BIG;
        clean = malloc(len + 1);
        if (!clean)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                if (strchr(" \t\r\n", s[i]) && s[i])
                        continue;
                clean[n++] = s[i];
        }
        clean[n] = 0;
        if (n % 4 != 0)
                return -EINVAL;
        /* EVP_DecodeBlock() does not reject '=' in the middle; count trailing padding ourselves. */
        while (pad < 2 && pad < n && clean[n - 1 - pad] == '=')
                pad++;
        if (memchr(clean, '=', n - pad))
                return -EINVAL;
        out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        if (n > 0) {
                k = EVP_DecodeBlock(out, (unsigned char *) clean, (int) n);
                if (k < 0 || (size_t) k < pad)
                        return -EINVAL;
                n = (size_t) k - pad;
        }
        out[n] = 0;
        if (ret_size)
                *ret_size = n;
        *ret = TAKE_PTR(out);
        return 0;
}

int cn_random_bytes(void *p, size_t n) {
        assert(p || n == 0);
        if (n > INT_MAX)
                return -E2BIG;
        if (RAND_bytes(p, (int) n) != 1)
                return log_debug_errno(EIO, "OpenSSL RAND_bytes() failed.");
        return 0;
}

int cn_random_u64(uint64_t *ret) {
        uint64_t v;
        int r;

        assert(ret);
        r = cn_random_bytes(&v, sizeof(v));
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}
