/* test_vs_tls.c: thumbprint normalisation (SHA-1 / SHA-256, colons, spaces, case) and
 * refusal of anything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vs_tls.h"

static void expect(const char *text, size_t len, const char *hex)
{
    struct vs_tls_pin pin;
    char out[72];
    if (vs_thumbprint_parse(text, &pin) != 0)
        fail_msg("refused '%s'", text);
    assert_int_equal(pin.len, len);
    vs_thumbprint_hex(&pin, out, sizeof(out));
    assert_string_equal(out, hex);
}

static void test_normalisation(void **state)
{
    (void)state;
    const char *sha1 = "3336143975f2ec512a922375a130bd3d3ee99750";
    expect("33:36:14:39:75:F2:EC:51:2A:92:23:75:A1:30:BD:3D:3E:E9:97:50", 20, sha1);
    expect("3336143975F2EC512A922375A130BD3D3EE99750", 20, sha1);
    expect("33 36 14 39 75 f2 ec 51 2a 92 23 75 a1 30 bd 3d 3e e9 97 50", 20, sha1);
    expect(sha1, 20, sha1);
    const char *sha256 = "f2393d6c29fbcbc3dbd12cffc45e8c38aefb0040eb8a926aadcbc03fe13c33c0";
    expect("F2:39:3D:6C:29:FB:CB:C3:DB:D1:2C:FF:C4:5E:8C:38:AE:FB:00:40:EB:8A:92:6A:AD:CB:C0:"
           "3F:E1:3C:33:C0",
           32, sha256);
    expect(sha256, 32, sha256);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "33:36:14",
        "3336143975f2ec512a922375a130bd3d3ee9975",                           /* 39 digits */
        "3336143975f2ec512a922375a130bd3d3ee997500",                         /* 41 digits */
        "3336143975f2ec512a922375a130bd3d3ee9975g",                          /* not hex */
        "f2393d6c29fbcbc3dbd12cffc45e8c38aefb0040eb8a926aadcbc03fe13c33c",   /* 63 */
        "f2393d6c29fbcbc3dbd12cffc45e8c38aefb0040eb8a926aadcbc03fe13c33c0a", /* 65 */
        "sha256:f2393d6c29fbcbc3dbd12cffc45e8c38aefb0040eb8a926aadcbc03fe13c33c0",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vs_tls_pin pin;
        if (vs_thumbprint_parse(bad[i], &pin) == 0)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(pin.len, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalisation),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("vsphere-tls", tests, NULL, NULL);
}
