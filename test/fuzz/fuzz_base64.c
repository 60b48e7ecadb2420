/* fuzz_base64.c: libFuzzer target for base64 (hv_b64_decode of untrusted text, hv_b64_encode).
 *
 * Decoding the input either fails or gives bytes that encode and decode back to themselves;
 * encoding the input always decodes back to the input, and is canonical (length 4*ceil(n/3),
 * standard alphabet, padding only at the end).
 */
#include "base64.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_base64: invariant broken: %s\n", what);
    abort();
}

static void round_trip(const void *bytes, size_t n)
{
    char *enc = hv_b64_encode(bytes, n);
    if (!enc)
        fail("encode");
    size_t el = strlen(enc);
    if (el != (n + 2) / 3 * 4)
        fail("encoded length");
    for (size_t i = 0; i < el; i++) {
        char ch = enc[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '+' || ch == '/' || (ch == '=' && i + 2 >= el);
        if (!ok)
            fail("encoded alphabet");
    }
    size_t dl = 0;
    char *dec = hv_b64_decode(enc, el, &dl);
    if (!dec || dl != n || memcmp(dec, bytes, n))
        fail("decode(encode(x)) != x");
    free(dec);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t dl = 0;
    char *dec = hv_b64_decode((const char *)data, size, &dl);
    if (dec) {
        if (dl > size)
            fail("decoded longer than the text");
        round_trip(dec, dl);
        free(dec);
    }
    round_trip(data, size);
    return 0;
}
