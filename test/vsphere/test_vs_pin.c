/* test_vs_pin.c: a thumbprint pin is enforced or the backend refuses to start, never skipped.
 * Built twice: against Debian's OpenSSL libcurl (the pin is accepted) and against its GnuTLS
 * libcurl (libcurl3-gnutls), whose TLS backend has no SSL_CTX callback: there a configured
 * pin must stop hv_vsphere_new with a clear reason, while a server without a pin still starts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <curl/curl.h>

#include "vs_tls.h"
#include "vsphere_backend.h"

static struct hv_vsphere_server server(const char *thumbprint)
{
    struct hv_vsphere_server s = {
        .name = "vc",
        .url = "https://vc.example.com/sdk",
        .username = "user",
        .password_file = "/nonexistent/password",
        .thumbprint = thumbprint,
    };
    return s;
}

static void test_pin(void **state)
{
    (void)state;
    const char *ssl = curl_version_info(CURLVERSION_NOW)->ssl_version;
    print_message("libcurl TLS backend: %s\n", ssl);
    struct hv_vsphere_server s =
        server("33:36:14:39:75:F2:EC:51:2A:92:23:75:A1:30:BD:3D:3E:E9:97:50");
    char err[512] = "";
    struct hv_backend *b = hv_vsphere_new(&s, 1, err, sizeof(err));
#ifdef HV_EXPECT_PIN_REFUSED
    assert_true(strncmp(ssl, "OpenSSL", 7) != 0); /* really the other libcurl */
    assert_null(b);
    print_message("refused: %s\n", err);
    assert_non_null(strstr(err, "vSphere server vc: thumbprint pinning needs libcurl built "
                                "with OpenSSL"));
    assert_non_null(strstr(err, "refusing to start"));
    char why[256];
    assert_int_equal(vs_tls_pin_enforceable(why, sizeof(why)), -1);
#else
    assert_true(strncmp(ssl, "OpenSSL", 7) == 0);
    assert_non_null(b);
    b->ops->free(b);
    char why[256] = "";
    assert_int_equal(vs_tls_pin_enforceable(why, sizeof(why)), 0);
#endif
    /* Without a pin (chain and name checked by libcurl's own backend) both start. */
    s = server(NULL);
    b = hv_vsphere_new(&s, 1, err, sizeof(err));
    assert_non_null(b);
    b->ops->free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pin)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
