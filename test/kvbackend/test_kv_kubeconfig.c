/* test_kv_kubeconfig.c: the kubeconfig reader of CAPK's infraClusterSecretRef Secret
 * (backends/kubevirt/kv_kubeconfig.c): the current context's cluster and user, tokens and
 * client certificates, what is refused (plugins, file paths, insecure-skip-tls-verify), and
 * malformed or hostile YAML (not YAML, deep nesting, alias bombs, oversized, NUL bytes). No
 * message may carry a credential. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_internal.h"

/* "-----BEGIN CERTIFICATE-----\nCA\n" and friends, base64 */
#define CA_B64   "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg=="
#define CERT_B64 "Q0VSVA=="         /* "CERT" */
#define KEY_B64  "c2VjcmV0LWtleQ==" /* "secret-key" */

static const char *const good = "apiVersion: v1\n"
                                "kind: Config\n"
                                "current-context: infra\n"
                                "clusters:\n"
                                "- name: other\n"
                                "  cluster: {server: 'https://wrong:1'}\n"
                                "- name: c1\n"
                                "  cluster:\n"
                                "    server: https://10.0.0.1:6443/\n"
                                "    certificate-authority-data: " CA_B64 "\n"
                                "contexts:\n"
                                "- name: infra\n"
                                "  context:\n"
                                "    cluster: c1\n"
                                "    user: u1\n"
                                "    namespace: capk-vms\n"
                                "users:\n"
                                "- name: u1\n"
                                "  user:\n"
                                "    token: sekret-token-123\n";

static int parse(const char *text, struct kv_kubeconfig *kc, char *why, size_t whylen)
{
    why[0] = '\0';
    return kv_kubeconfig_parse(text, strlen(text), kc, why, whylen);
}

static void test_token(void **state)
{
    (void)state;
    struct kv_kubeconfig kc;
    char why[200];
    assert_int_equal(parse(good, &kc, why, sizeof(why)), 0);
    assert_string_equal(kc.server, "https://10.0.0.1:6443");
    assert_string_equal(kc.ns, "capk-vms");
    assert_non_null(kc.ca);
    assert_int_equal(kc.ca_len, strlen("-----BEGIN CERTIFICATE-----\nCA\n"));
    assert_memory_equal(kc.ca, "-----BEGIN CERTIFICATE-----\nCA\n", kc.ca_len);
    assert_string_equal(kc.token, "sekret-token-123");
    assert_null(kc.cert);
    assert_null(kc.key);
    kv_kubeconfig_free(&kc);
    assert_null(kc.token);
}

static void test_client_cert(void **state)
{
    (void)state;
    const char *y = "current-context: x\n"
                    "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                    "users:\n"
                    "- name: u\n"
                    "  user:\n"
                    "    client-certificate-data: " CERT_B64 "\n"
                    "    client-key-data: " KEY_B64 "\n";
    struct kv_kubeconfig kc;
    char why[200];
    assert_int_equal(parse(y, &kc, why, sizeof(why)), 0);
    assert_string_equal(kc.server, "https://h");
    assert_string_equal(kc.ns, "");
    assert_null(kc.ca); /* the system's CAs */
    assert_null(kc.token);
    assert_int_equal(kc.cert_len, 4);
    assert_memory_equal(kc.cert, "CERT", 4);
    assert_int_equal(kc.key_len, 10);
    assert_memory_equal(kc.key, "secret-key", 10);
    kv_kubeconfig_free(&kc);
}

/* each: the kubeconfig with one change, and the message (exactly) */
static void refused(const char *y, const char *want)
{
    struct kv_kubeconfig kc;
    char why[300];
    memset(&kc, 0x5a, sizeof(kc));
    assert_int_equal(parse(y, &kc, why, sizeof(why)), -1);
    assert_string_equal(why, want);
    assert_null(kc.token); /* nothing kept after a refusal */
    assert_null(kc.ca);
    assert_null(strstr(why, "sekret"));
    assert_null(strstr(why, KEY_B64));
}

static char *with(const char *find, const char *repl)
{
    const char *at = strstr(good, find);
    assert_non_null(at);
    size_t n = strlen(good) - strlen(find) + strlen(repl) + 1;
    char *s = malloc(n);
    assert_non_null(s);
    snprintf(s, n, "%.*s%s%s", (int)(at - good), good, repl, at + strlen(find));
    return s;
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *find, *repl, *want;
    } t[] = {
        {"    token: sekret-token-123\n",
         "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1\n",
         "kubeconfig: user \"u1\": exec credential plugins are not supported (give a token or a "
         "client certificate)"},
        {"    token: sekret-token-123\n", "    auth-provider: {name: oidc}\n",
         "kubeconfig: user \"u1\": auth-provider plugins are not supported (give a token or a "
         "client certificate)"},
        {"    token: sekret-token-123\n", "    tokenFile: /var/run/token\n",
         "kubeconfig: user \"u1\": tokenFile is a file path; give token"},
        {"    token: sekret-token-123\n", "    username: a\n    password: sekret\n",
         "kubeconfig: user \"u1\": basic authentication (username/password) is not supported"},
        {"    token: sekret-token-123\n", "    client-certificate-data: " CERT_B64 "\n",
         "kubeconfig: user \"u1\": client-certificate-data and client-key-data go together"},
        {"    token: sekret-token-123\n", "    client-key-data: '%%%'\n",
         "kubeconfig: user \"u1\": client-certificate-data or client-key-data is not base64"},
        {"    token: sekret-token-123\n", "    token: [sekret]\n",
         "kubeconfig: user \"u1\": token is not one line"},
        {"    token: sekret-token-123\n", "    {}\n",
         "kubeconfig: user \"u1\" has no token and no client certificate"},
        {"    certificate-authority-data: " CA_B64 "\n", "    insecure-skip-tls-verify: true\n",
         "kubeconfig: cluster \"c1\": insecure-skip-tls-verify is not accepted (the connection "
         "carries credentials: give certificate-authority-data)"},
        {"    certificate-authority-data: " CA_B64 "\n", "    certificate-authority: /ca.crt\n",
         "kubeconfig: cluster \"c1\": certificate-authority is a file path; give "
         "certificate-authority-data"},
        {"    certificate-authority-data: " CA_B64 "\n", "    certificate-authority-data: x!y\n",
         "kubeconfig: cluster \"c1\": certificate-authority-data is not base64"},
        {"https://10.0.0.1:6443/", "http://10.0.0.1:6443",
         "kubeconfig: cluster \"c1\": server is not https://HOST[:PORT]"},
        {"current-context: infra\n", "", "kubeconfig: no current-context"},
        {"current-context: infra\n", "current-context: nope\n",
         "kubeconfig: current-context \"nope\" is not in contexts"},
        {"    cluster: c1\n", "    cluster: c9\n", "kubeconfig: cluster \"c9\" is not in clusters"},
        {"    user: u1\n", "    user: u9\n", "kubeconfig: user \"u9\" is not in users"},
        {"    namespace: capk-vms\n", "    namespace: Not_A_Name\n",
         "kubeconfig: context \"infra\": namespace is not a name"},
    };
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        char *y = with(t[k].find, t[k].repl);
        refused(y, t[k].want);
        free(y);
    }
    /* false is what insecure-skip-tls-verify would be anyway */
    char *y = with("    certificate-authority-data: " CA_B64 "\n",
                   "    insecure-skip-tls-verify: false\n");
    struct kv_kubeconfig kc;
    char why[200];
    assert_int_equal(parse(y, &kc, why, sizeof(why)), 0);
    kv_kubeconfig_free(&kc);
    free(y);
}

static void test_hostile(void **state)
{
    (void)state;
    char why[200];
    struct kv_kubeconfig kc;
    refused("a: [1, 2\n", "kubeconfig: not YAML (line 2)");
    refused("- a\n- b\n", "kubeconfig: not a YAML mapping");
    refused("just a string\n", "kubeconfig: not a YAML mapping");
    refused("", "kubeconfig: not a YAML mapping");
    /* the billion laughs: refused at the first alias, nothing expanded */
    refused("a: &a [x, x, x, x, x, x, x, x, x]\n"
            "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            "current-context: *c\n",
            "kubeconfig: YAML aliases are not accepted");
    /* an alias where a value is looked up */
    char *y = with("current-context: infra\n", "current-context: &x infra\nother: *x\n");
    refused(y, "kubeconfig: YAML aliases are not accepted");
    free(y);
    /* deep nesting, flow and block */
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    assert_non_null(deep);
    memcpy(deep, "a: ", 3);
    memset(deep + 3, '[', n);
    memset(deep + 3 + n, ']', n);
    deep[3 + 2 * n] = '\0';
    refused(deep, "kubeconfig: nested deeper than 32");
    free(deep);
    char block[4096] = "";
    for (int d = 0; d < 40; d++) {
        size_t l = strlen(block);
        snprintf(block + l, sizeof(block) - l, "%*sk%d:\n", 2 * d, "", d);
    }
    refused(block, "kubeconfig: nested deeper than 32");
    /* many nodes */
    size_t big = 30000;
    char *wide = malloc(big * 4 + 16);
    assert_non_null(wide);
    char *p = wide;
    p += sprintf(p, "a: [");
    for (size_t k = 0; k < big; k++)
        p += sprintf(p, "1,");
    sprintf(p, "1]");
    refused(wide, "kubeconfig: more than 20000 YAML nodes");
    free(wide);
    /* over the size of a Secret */
    size_t over = KV_KUBECONFIG_MAX + 1;
    char *huge = malloc(over);
    assert_non_null(huge);
    memset(huge, ' ', over);
    assert_int_equal(kv_kubeconfig_parse(huge, over, &kc, why, sizeof(why)), -1);
    assert_string_equal(why, "kubeconfig: larger than 1048576 bytes");
    free(huge);
    /* a NUL inside */
    assert_int_equal(kv_kubeconfig_parse("a: b\0c", 6, &kc, why, sizeof(why)), -1);
    assert_string_equal(why, "kubeconfig: contains a NUL byte");
    /* a second document is not read; keys that repeat: the last wins (as Go's decoder) */
    size_t gl = strlen(good);
    char *two = malloc(gl + 64);
    assert_non_null(two);
    snprintf(two, gl + 64, "%s---\ncurrent-context: nope\n", good);
    assert_int_equal(parse(two, &kc, why, sizeof(why)), 0);
    assert_string_equal(kc.server, "https://10.0.0.1:6443");
    kv_kubeconfig_free(&kc);
    free(two);
}

static void test_b64(void **state)
{
    (void)state;
    size_t n = 0;
    char *d = kv_b64_decode("aGVs\nbG8=", 9, &n);
    assert_non_null(d);
    assert_int_equal(n, 5);
    assert_string_equal(d, "hello");
    free(d);
    assert_null(kv_b64_decode("aGVs=bG8", 8, &n)); /* data after padding */
    assert_null(kv_b64_decode("a", 1, &n));
    assert_null(kv_b64_decode("a===", 4, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),    cmocka_unit_test(test_client_cert),
        cmocka_unit_test(test_refusals), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_b64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
