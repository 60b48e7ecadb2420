/* base64.c: the standard padded base64 alphabet, strict on decode (no whitespace, padding
 * required), because CAPI patches travel as Go []byte in JSON. */
#include "base64.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *hv_b64_encode(const void *data, size_t len)
{
    const unsigned char *in = data;
    size_t olen = 4 * ((len + 2) / 3);
    char *out = malloc(olen + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t k = 0; k < len; k += 3) {
        uint32_t v = (uint32_t)in[k] << 16;
        if (k + 1 < len)
            v |= (uint32_t)in[k + 1] << 8;
        if (k + 2 < len)
            v |= in[k + 2];
        *o++ = alphabet[(v >> 18) & 63];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = k + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *o++ = k + 2 < len ? alphabet[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int sextet(char c)
{
    const char *p = c ? strchr(alphabet, c) : NULL;
    return p ? (int)(p - alphabet) : -1;
}

char *hv_b64_decode(const char *text, size_t len, size_t *len_out)
{
    if (len % 4)
        return NULL;
    char *out = malloc(len / 4 * 3 + 1);
    size_t o = 0;
    if (!out)
        return NULL;
    for (size_t k = 0; k < len; k += 4) {
        int pad = (text[k + 3] == '=') + (text[k + 2] == '=' && text[k + 3] == '=');
        if (pad && k + 4 != len)
            goto bad;
        int a = sextet(text[k]), b = sextet(text[k + 1]);
        int c = pad >= 2 ? 0 : sextet(text[k + 2]), d = pad >= 1 ? 0 : sextet(text[k + 3]);
        if (a < 0 || b < 0 || c < 0 || d < 0)
            goto bad;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8);
        if (pad < 1)
            out[o++] = (char)v;
    }
    out[o] = '\0';
    *len_out = o;
    return out;
bad:
    free(out);
    return NULL;
}
