/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (spec/config hash annotations), base64 (kubeconfig *-data fields, user data) and
 * randomness (jitter, tokens), all through OpenSSL. */
#pragma once

#include "macro.h"

#define CN_SHA256_HEX_SIZE 65 /* 64 hex digits and a NUL */

int cn_sha256_hex(const void *data, size_t size, char ret[static CN_SHA256_HEX_SIZE]);

int cn_base64_encode(const void *data, size_t size, char **ret);
/* Standard alphabet with padding; whitespace (line breaks of PEM-style input) is ignored;
 * anything else that is not base64 gives -EINVAL. The result is NUL-terminated as a convenience
 * (ret_size does not count the NUL). */
int cn_base64_decode(const char *s, size_t len, void **ret, size_t *ret_size);

/* Cryptographically strong random bytes (OpenSSL RAND_bytes). */
int cn_random_bytes(void *p, size_t n);
int cn_random_u64(uint64_t *ret);
