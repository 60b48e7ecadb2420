/* vs_tls.h: vSphere certificate thumbprints and the OpenSSL hook that pins them.
 *
 * A vs_tls_pin is plain data owned by its server; the hook only borrows it during a
 * handshake. The check runs inside the handshake, so a mismatch ends the connection
 * before any HTTP request (and so any credential) is sent.
 */
#ifndef HV_VS_TLS_H
#define HV_VS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <curl/curl.h>

struct vs_tls_pin {
    unsigned char digest[32];
    size_t len;         /* 20 (SHA-1), 32 (SHA-256), 0 = no pin */
    bool require_chain; /* a CA bundle is configured too: the chain must verify as well */
};

/* Parse "AA:BB:..." / "aabb..." (SHA-1 or SHA-256, colons, spaces optional, any case).
 * Returns 0, or -1 when it is neither 40 nor 64 hex digits. */
int vs_thumbprint_parse(const char *text, struct vs_tls_pin *pin);
/* Lower-case hex without separators (out: at least 65 bytes). */
void vs_thumbprint_hex(const struct vs_tls_pin *pin, char *out, size_t outlen);

/* Whether this process's libcurl can enforce a pin: its TLS backend must be OpenSSL (the
 * hook works on an SSL_CTX) and it must accept CURLOPT_SSL_CTX_FUNCTION. Returns 0, or -1
 * with the reason in err: the caller refuses to start rather than send a password to a
 * server it cannot check. */
int vs_tls_pin_enforceable(char *err, size_t errlen);
/* Install the hook and its pin on an easy handle; -1 when libcurl refuses either. */
int vs_tls_pin_install(CURL *h, const struct vs_tls_pin *pin);
/* CURLOPT_SSL_CTX_FUNCTION: install the verify callback; userptr is the vs_tls_pin. */
CURLcode vs_tls_ctx_hook(CURL *curl, void *ssl_ctx, void *userptr);
/* Per-thread flag: set when the last handshake on this thread failed the pin. */
void vs_tls_mismatch_reset(void);
bool vs_tls_mismatch(void);

#endif
