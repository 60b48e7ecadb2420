/* vs_tls.c: thumbprint parsing and the OpenSSL verify callback that compares the server's
 * leaf certificate digest (SHA-1 or SHA-256, as CAPV's VSphereMachine.spec.thumbprint) during
 * the handshake. libcurl creates one SSL_CTX per connection and calls vs_tls_ctx_hook on it;
 * the pin pointer is borrowed from the server, which outlives every connection.
 */
#include "vs_tls.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static _Thread_local bool tls_mismatch;
static int pin_index = -1;
static pthread_once_t pin_once = PTHREAD_ONCE_INIT;

static void pin_index_init(void)
{
    pin_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

int vs_thumbprint_parse(const char *text, struct vs_tls_pin *pin)
{
    memset(pin, 0, sizeof(*pin));
    size_t nibbles = 0;
    for (const char *p = text; *p; p++) {
        if (*p == ':' || *p == ' ')
            continue;
        if (!isxdigit((unsigned char)*p) || nibbles >= 64)
            return -1;
        int v = isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10;
        pin->digest[nibbles / 2] =
            (unsigned char)(pin->digest[nibbles / 2] | v << (nibbles % 2 ? 0 : 4));
        nibbles++;
    }
    if (nibbles != 40 && nibbles != 64) {
        memset(pin, 0, sizeof(*pin));
        return -1;
    }
    pin->len = nibbles / 2;
    return 0;
}

void vs_thumbprint_hex(const struct vs_tls_pin *pin, char *out, size_t outlen)
{
    if (!outlen)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < pin->len && 2 * i + 2 < outlen; i++)
        snprintf(out + 2 * i, 3, "%02x", pin->digest[i]);
}

static int verify_cb(int preverify_ok, X509_STORE_CTX *xs)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
    SSL_CTX *ctx = ssl ? SSL_get_SSL_CTX(ssl) : NULL;
    const struct vs_tls_pin *pin = ctx ? SSL_CTX_get_ex_data(ctx, pin_index) : NULL;
    if (!pin || !pin->len)
        return preverify_ok;
    /* Always the leaf (the certificate being verified), whatever depth is reported. */
    X509 *leaf = X509_STORE_CTX_get0_cert(xs);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    const EVP_MD *kind = pin->len == 20 ? EVP_sha1() : EVP_sha256();
    bool match = leaf && X509_digest(leaf, kind, md, &mdlen) == 1 && mdlen == pin->len &&
                 CRYPTO_memcmp(md, pin->digest, pin->len) == 0;
    if (!match) {
        tls_mismatch = true;
        X509_STORE_CTX_set_error(xs, X509_V_ERR_CERT_REJECTED);
        return 0;
    }
    if (pin->require_chain)
        return preverify_ok;
    /* The pin replaces chain and name checks (as govc/CAPV thumbprints do). */
    X509_STORE_CTX_set_error(xs, X509_V_OK);
    return 1;
}

CURLcode vs_tls_ctx_hook(CURL *curl, void *ssl_ctx, void *userptr)
{
    (void)curl;
    pthread_once(&pin_once, pin_index_init);
    if (pin_index < 0 || !SSL_CTX_set_ex_data(ssl_ctx, pin_index, userptr))
        return CURLE_SSL_CERTPROBLEM;
    SSL_CTX_set_verify(ssl_ctx, SSL_VERIFY_PEER, verify_cb);
    return CURLE_OK;
}

int vs_tls_pin_install(CURL *h, const struct vs_tls_pin *pin)
{
    if (curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, vs_tls_ctx_hook) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, (void *)pin) != CURLE_OK)
        return -1;
    return 0;
}

int vs_tls_pin_enforceable(char *err, size_t errlen)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    const char *ssl = v && v->ssl_version ? v->ssl_version : "no TLS";
    if (strncmp(ssl, "OpenSSL/", 8) != 0) {
        snprintf(err, errlen,
                 "thumbprint pinning needs libcurl built with OpenSSL; this one uses %s, so the "
                 "pin cannot be enforced",
                 ssl);
        return -1;
    }
    CURL *h = curl_easy_init();
    static const struct vs_tls_pin probe;
    int rc = h ? vs_tls_pin_install(h, &probe) : -1;
    if (h)
        curl_easy_cleanup(h);
    if (rc < 0) {
        snprintf(err, errlen,
                 "thumbprint pinning needs CURLOPT_SSL_CTX_FUNCTION, which this libcurl (%s) "
                 "refuses, so the pin cannot be enforced",
                 ssl);
        return -1;
    }
    return 0;
}

void vs_tls_mismatch_reset(void)
{
    tls_mismatch = false;
}

bool vs_tls_mismatch(void)
{
    return tls_mismatch;
}
