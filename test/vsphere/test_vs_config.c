/* test_vs_config.c: hv_vsphere_new's validation (never contacting a server) and serves():
 * which machine's `server` names which configured vCenter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vsphere_backend.h"

static struct hv_vsphere_server server(const char *name, const char *url)
{
    struct hv_vsphere_server s = {
        .name = name,
        .url = url,
        .username = "user",
        .password_file = "/nonexistent/password",
        .thumbprint = "33:36:14:39:75:F2:EC:51:2A:92:23:75:A1:30:BD:3D:3E:E9:97:50",
    };
    return s;
}

static void refused(const struct hv_vsphere_server *s, size_t n, const char *why)
{
    char err[256] = "";
    struct hv_backend *b = hv_vsphere_new(s, n, err, sizeof(err));
    if (b) {
        b->ops->free(b);
        fail_msg("accepted a config that should fail with '%s'", why);
    }
    if (!strstr(err, why))
        fail_msg("error '%s' lacks '%s'", err, why);
}

static void test_validation(void **state)
{
    (void)state;
    struct hv_vsphere_server s = server("vc", "https://vc.example.com/sdk");
    refused(&s, 0, "no vSphere server");
    s.url = "http://vc.example.com/sdk";
    refused(&s, 1, "https://");
    s.url = "https:///sdk";
    refused(&s, 1, "needs a host");
    s.url = "https://user:pw@vc.example.com/sdk";
    refused(&s, 1, "needs a host");
    s.url = "https://vc.example.com/sdk";
    s.thumbprint = "12:34";
    refused(&s, 1, "thumbprint");
    s.thumbprint = NULL;
    s.password_file = NULL;
    refused(&s, 1, "password file");
    struct hv_vsphere_server two[2] = {server("VC", "https://a.example.com/sdk"),
                                       server("vc", "https://b.example.com/sdk")};
    refused(two, 2, "configured twice");
}

static bool serves(struct hv_backend *b, const char *server_name)
{
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.server, sizeof(ref.server), "%s", server_name);
    return b->ops->serves(b, &ref);
}

static void test_serves(void **state)
{
    (void)state;
    char err[256];
    struct hv_vsphere_server one = server("prod", "https://VC1.example.com:8443/sdk");
    struct hv_backend *b = hv_vsphere_new(&one, 1, err, sizeof(err));
    assert_non_null(b);
    assert_string_equal(b->ops->name, "vsphere");
    assert_true(serves(b, ""));                /* the only server */
    assert_true(serves(b, "prod"));            /* by name */
    assert_true(serves(b, "PROD"));            /* case-insensitive */
    assert_true(serves(b, "vc1.example.com")); /* bare host of the url */
    assert_true(serves(b, "vc1.example.com:8443"));
    assert_true(serves(b, "https://vc1.example.com:8443/sdk"));
    assert_false(serves(b, "vc2.example.com"));
    assert_false(serves(b, "vc1.example"));
    b->ops->free(b);

    struct hv_vsphere_server two[2] = {server("", "https://a.example.com/sdk"),
                                       server("b", "https://[::1]:443/sdk")};
    b = hv_vsphere_new(two, 2, err, sizeof(err));
    assert_non_null(b);
    assert_false(serves(b, ""));             /* ambiguous */
    assert_true(serves(b, "a.example.com")); /* unnamed: named after its host */
    assert_true(serves(b, "::1"));
    assert_true(serves(b, "b"));
    b->ops->free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_serves),
    };
    return cmocka_run_group_tests_name("vsphere-config", tests, NULL, NULL);
}
