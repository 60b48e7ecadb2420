/* test_kube.c: the pure parts of the kube room: label selectors as CAPV's allowedNamespaces
 * uses them, object names that may stand in a path, and the client's configuration checks
 * (the requests themselves are tested against a real API server in test/e2e/kube_e2e.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bodybuf.h"
#include "capv.h"
#include "kube.h"

static int match(const char *sel, const char *labels)
{
    char e[128];
    hj *s = sel ? hj_parse(sel, strlen(sel), e, sizeof(e)) : NULL;
    hj *l = labels ? hj_parse(labels, strlen(labels), e, sizeof(e)) : NULL;
    int rc = hv_label_selector_match(s, l);
    hj_free(s);
    hj_free(l);
    return rc;
}

static void test_selector(void **state)
{
    (void)state;
    assert_int_equal(match("{}", NULL), 1); /* empty selector: every namespace */
    assert_int_equal(match("{\"matchLabels\":{}}", "{\"a\":\"b\"}"), 1);
    assert_int_equal(match("{\"matchLabels\":{\"capv\":\"ok\"}}", "{\"capv\":\"ok\"}"), 1);
    assert_int_equal(match("{\"matchLabels\":{\"capv\":\"ok\"}}", "{\"capv\":\"no\"}"), 0);
    assert_int_equal(match("{\"matchLabels\":{\"capv\":\"ok\"}}", NULL), 0);
    const char *in = "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"In\","
                     "\"values\":[\"a\",\"b\"]}]}";
    assert_int_equal(match(in, "{\"team\":\"b\"}"), 1);
    assert_int_equal(match(in, "{\"team\":\"c\"}"), 0);
    assert_int_equal(match(in, "{}"), 0);
    const char *notin = "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\","
                        "\"values\":[\"a\"]}]}";
    assert_int_equal(match(notin, "{}"), 1);
    assert_int_equal(match(notin, "{\"team\":\"a\"}"), 0);
    assert_int_equal(
        match("{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"Exists\"}]}", "{\"x\":\"\"}"),
        1);
    assert_int_equal(match("{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"DoesNotExist\"}]}",
                           "{\"x\":\"1\"}"),
                     0);
    /* both parts must hold */
    assert_int_equal(match("{\"matchLabels\":{\"a\":\"1\"},\"matchExpressions\":[{\"key\":\"b\","
                           "\"operator\":\"Exists\"}]}",
                           "{\"a\":\"1\"}"),
                     0);
    /* malformed */
    assert_int_equal(match("{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"Near\"}]}", "{}"),
                     -1);
    assert_int_equal(match("{\"matchLabels\":{\"a\":1}}", "{}"), -1);
    assert_int_equal(match("[]", "{}"), -1);
    /* what Go's LabelSelectorAsSelector refuses fails closed, even where the labels would
     * have matched the expression read leniently */
    const char *bad[] = {
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\"}]}",
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\",\"values\":[]}]}",
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"In\",\"values\":[]}]}",
        "{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"Exists\",\"values\":[\"a\"]}]}",
        "{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"DoesNotExist\","
        "\"values\":[\"a\"]}]}",
        "{\"matchExpressions\":[{\"key\":\"bad key\",\"operator\":\"DoesNotExist\"}]}",
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\",\"values\":[\"a b\"]}]}",
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\",\"values\":\"a\"}]}",
        "{\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"NotIn\",\"values\":[1]}]}",
        "{\"matchExpressions\":[\"team\"]}",
        "{\"matchLabels\":{\"-a\":\"1\"}}",
        "{\"matchLabels\":{\"a\":\"-1\"}}",
        "{\"matchLabels\":{\"Example.com/a\":\"1\"}}",
        "{\"matchLabels\":{\"a/b/c\":\"1\"}}",
        "{\"matchLabels\":{\"a\":"
        "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("selector %zu: %s\n", i, bad[i]);
        assert_int_equal(match(bad[i], "{}"), -1);
    }
    /* and what Go accepts still matches */
    assert_int_equal(match("{\"matchLabels\":{\"example.com/team\":\"a_b.c-1\",\"x\":\"\"}}",
                           "{\"example.com/team\":\"a_b.c-1\",\"x\":\"\"}"),
                     1);
    assert_int_equal(match("{\"matchExpressions\":[{\"key\":\"k8s.io/x\",\"operator\":\"Exists\","
                           "\"values\":[]}]}",
                           "{\"k8s.io/x\":\"1\"}"),
                     1);
}

static void test_names(void **state)
{
    (void)state;
    assert_true(hv_kube_name_ok("team-a"));
    assert_true(hv_kube_name_ok("vc.example.com"));
    assert_false(hv_kube_name_ok(""));
    assert_false(hv_kube_name_ok(NULL));
    assert_false(hv_kube_name_ok("Team"));
    assert_false(hv_kube_name_ok("a/b"));
    assert_false(hv_kube_name_ok("../x"));
    assert_false(hv_kube_name_ok("-a"));
    assert_false(hv_kube_name_ok("a b"));
}

static void test_client_config(void **state)
{
    (void)state;
    char err[256] = "";
    unsetenv("KUBERNETES_SERVICE_HOST");
    struct hv_kube_cfg none = {0};
    assert_null(hv_kube_new(&none, err, sizeof(err)));
    assert_string_equal(err, "no kubernetes.server and no KUBERNETES_SERVICE_HOST (not in a pod)");
    struct hv_kube_cfg http = {.server = "http://k:6443"};
    assert_null(hv_kube_new(&http, err, sizeof(err)));
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    struct hv_kube *k = hv_kube_new(&none, err, sizeof(err));
    assert_non_null(k);
    assert_int_equal(hv_kube_timeout(k), 5000);
    /* no token file here: the request fails before any connection, without a token */
    hj *out = (hj *)1;
    assert_int_equal(hv_kube_get(k, "/api/v1/namespaces/x", 100, &out, err, sizeof(err)), -1);
    assert_null(out);
    assert_non_null(strstr(err, "cannot read the token file"));
    hv_kube_free(k);
    unsetenv("KUBERNETES_SERVICE_HOST");
}

/* A cluster key that is not namespace/name, or names that cannot stand in a path, are refused
 * before any request. */
static void test_capv_bad_keys(void **state)
{
    (void)state;
    struct hv_kube_cfg c = {.server = "https://127.0.0.1:1", .token_file = "/nonexistent"};
    char err[256], user[64], pass[64], why[256];
    struct hv_kube *k = hv_kube_new(&c, err, sizeof(err));
    assert_non_null(k);
    assert_int_equal(hv_capv_credentials(k, "capv-system", "nocluster", 100, user, sizeof(user),
                                         pass, sizeof(pass), why, sizeof(why)),
                     HV_CAPV_ERR);
    assert_string_equal(why, "cluster key is not namespace/name");
    assert_int_equal(hv_capv_credentials(k, "capv-system", "ns/../../x", 100, user, sizeof(user),
                                         pass, sizeof(pass), why, sizeof(why)),
                     HV_CAPV_ERR);
    assert_string_equal(why, "cluster namespace or name is not a valid object name");
    hv_kube_free(k);
}

/* The body collector the client reads Secrets with: many small pieces arrive whole in order
 * whether growth copies and wipes (.wipe, for Secrets) or reallocates; past the cap the transfer
 * stops (0) with too_big set and what came before kept. */
static void test_bodybuf(void **state)
{
    (void)state;
    for (int wipe = 0; wipe <= 1; wipe++) {
        struct hv_bodybuf b = {.max = 600, .wipe = wipe};
        char piece[7];
        for (int i = 0; i < 100; i++) {
            snprintf(piece, sizeof(piece), "%05d,", i);
            assert_int_equal(hv_bodybuf_write(piece, 1, 6, &b), 6);
        }
        assert_int_equal(b.len, 600);
        assert_int_equal(strlen(b.p), 600);
        assert_memory_equal(b.p, "00000,00001,", 12);
        assert_memory_equal(b.p + 594, "00099,", 6);
        assert_false(b.too_big);
        assert_int_equal(hv_bodybuf_write("x", 1, 1, &b), 0);
        assert_true(b.too_big);
        assert_int_equal(b.len, 600);
        free(b.p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selector),      cmocka_unit_test(test_names),
        cmocka_unit_test(test_client_config), cmocka_unit_test(test_capv_bad_keys),
        cmocka_unit_test(test_bodybuf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
