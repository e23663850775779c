/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 against known vectors, strict base64, randomness. */
#include "hash-util.h"
#include "tap.h"

int main(void) {
        char hex[CN_SHA256_HEX_SIZE];
        _cleanup_free_ char *enc = NULL;
        _cleanup_free_ void *dec = NULL, *dec2 = NULL, *junk = NULL;
        size_t n = 0;
        uint64_t a = 0, b = 0;

        TAP_EQ_INT(cn_sha256_hex("abc", 3, hex), 0, "sha256 ok");
        TAP_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256(abc) NIST vector");
        TAP_EQ_INT(cn_sha256_hex("", 0, hex), 0, "sha256 empty");
        TAP_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256(\"\")");

        TAP_EQ_INT(cn_base64_encode("hello!?", 7, &enc), 0, "encode");
        TAP_EQ_STR(enc, "aGVsbG8hPw==", "base64 with padding");
        TAP_EQ_INT(cn_base64_decode("aGVs\nbG8h\r\nPw==\n", 16, &dec, &n), 0, "decode with line breaks");
        TAP_OK(n == 7 && memcmp(dec, "hello!?", 7) == 0, "decoded content and size exclude padding");
        TAP_EQ_INT(cn_base64_decode("", 0, &dec2, &n), 0, "empty decodes");
        TAP_EQ_INT(n, 0, "empty decodes to nothing");
        TAP_EQ_INT(cn_base64_decode("aGV*bG8h", 8, &junk, &n), -EINVAL, "invalid character rejected");
        TAP_EQ_INT(cn_base64_decode("aGVsbG8", 7, &junk, &n), -EINVAL, "bad length rejected");
        TAP_EQ_INT(cn_base64_decode("aG==bG8h", 8, &junk, &n), -EINVAL, "padding in the middle rejected");
        TAP_OK(!junk, "output untouched on failure");

        TAP_OK(cn_random_u64(&a) == 0 && cn_random_u64(&b) == 0 && a != b, "random values differ");
        return tap_done();
}
