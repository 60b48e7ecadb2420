#include "bodybuf.h"

#include <stdlib.h>
#include <string.h>

size_t hv_bodybuf_write(char *data, size_t size, size_t nmemb, void *user)
{
    struct hv_bodybuf *b = user;
    size_t n = size * nmemb;
    if (b->len + n > b->max) {
        b->too_big = true;
        return 0;
    }
    char *np;
    if (b->wipe) {
        np = malloc(b->len + n + 1);
        if (!np)
            return 0;
        if (b->p) {
            memcpy(np, b->p, b->len);
            explicit_bzero(b->p, b->len);
            free(b->p);
        }
    } else {
        np = realloc(b->p, b->len + n + 1);
        if (!np)
            return 0;
    }
    b->p = np;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}
