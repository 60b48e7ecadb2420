/* bodybuf.h: an HTTP answer body collected by libcurl's write callback, NUL-terminated and
 * capped (a larger answer stops the transfer with too_big set). One home for the downstream
 * extension client (compose) and the Kubernetes API client (kube). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct hv_bodybuf {
    char *p;      /* the body so far, NUL-terminated; NULL while empty; the caller frees it */
    size_t len;   /* its length */
    size_t max;   /* the cap: a body that would grow past it stops the transfer */
    bool too_big; /* the transfer stopped at the cap */
    bool wipe;    /* the body may hold a secret: growth copies it to a new block and wipes the
                   * old one instead of realloc, which would leave the old block unwiped */
};

/* CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA a struct hv_bodybuf *. Out of memory, or past
 * the cap, it returns 0, which makes libcurl end the transfer with a write error. */
size_t hv_bodybuf_write(char *data, size_t size, size_t nmemb, void *user);
