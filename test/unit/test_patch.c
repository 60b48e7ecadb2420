/* test_patch.c: cmocka tests for src/hooks/jsonpatch.c (RFC 6902) and src/base64.c, and the round
 * trip CAPI performs with hvupdater's patches: apply to a copy of current, copy back only the
 * spec, compare with desired. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "json.h"
#include "jsonpatch.h"
#include "plan.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

/* Apply patch (JSON text) to doc (JSON text); expect success and the given result text. */
static void apply_ok(const char *doc_text, const char *patch_text, const char *want)
{
    char err[256] = "";
    hj *doc = tu_json(doc_text), *patch = tu_json(patch_text);
    if (hv_jsonpatch_apply(&doc, patch, err, sizeof(err)) != 0)
        fail_msg("patch %s on %s failed: %s", patch_text, doc_text, err);
    tu_assert_dump(doc, want);
    hj_free(doc);
    hj_free(patch);
}

/* Expect failure with exactly the given message. */
static void apply_fails(const char *doc_text, const char *patch_text, const char *want_err)
{
    char err[256] = "";
    hj *doc = tu_json(doc_text), *patch = tu_json(patch_text);
    if (hv_jsonpatch_apply(&doc, patch, err, sizeof(err)) == 0)
        fail_msg("patch %s on %s succeeded", patch_text, doc_text);
    assert_string_equal(err, want_err);
    hj_free(doc);
    hj_free(patch);
}

/* ---- operations ------------------------------------------------------------------------- */

static void test_add(void **state)
{
    apply_ok("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2}]", "{\"a\":1,\"b\":2}");
    /* add on an existing member replaces it, keeping its place */
    apply_ok("{\"a\":1,\"b\":2}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":[3]}]",
             "{\"a\":[3],\"b\":2}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/0\",\"value\":0}]",
             "{\"l\":[0,1,2]}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/1\",\"value\":9}]",
             "{\"l\":[1,9,2]}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/2\",\"value\":3}]",
             "{\"l\":[1,2,3]}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":3}]",
             "{\"l\":[1,2,3]}");
    apply_ok("{\"l\":[]}", "[{\"op\":\"add\",\"path\":\"/l/0\",\"value\":{}}]", "{\"l\":[{}]}");
    apply_ok("{\"a\":{}}", "[{\"op\":\"add\",\"path\":\"/a/x~1y\",\"value\":null}]",
             "{\"a\":{\"x/y\":null}}");
    /* numbers are copied verbatim */
    apply_ok("{\"m\":4096}", "[{\"op\":\"add\",\"path\":\"/m\",\"value\":8192.0}]",
             "{\"m\":8192.0}");
    /* whole document */
    apply_ok("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":[true]}]", "[true]");
}

static void test_add_failures(void **state)
{
    apply_fails("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/x/y\",\"value\":1}]",
                "operation 0 (add /x/y) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/3\",\"value\":1}]",
                "operation 0 (add /l/3) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/01\",\"value\":1}]",
                "operation 0 (add /l/01) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/l/x\",\"value\":1}]",
                "operation 0 (add /l/x) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1}]",
                "operation 0 (add /a/b) cannot be applied");
    /* add without value */
    apply_fails("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/b\"}]",
                "operation 0 (add /b) cannot be applied");
}

static void test_remove(void **state)
{
    apply_ok("{\"a\":1,\"b\":2}", "[{\"op\":\"remove\",\"path\":\"/a\"}]", "{\"b\":2}");
    apply_ok("{\"l\":[1,2,3]}", "[{\"op\":\"remove\",\"path\":\"/l/1\"}]", "{\"l\":[1,3]}");
    apply_ok("{\"l\":[1,2,3]}", "[{\"op\":\"remove\",\"path\":\"/l/2\"}]", "{\"l\":[1,2]}");
    apply_ok("{\"a\":{\"b\":{\"c\":1}}}", "[{\"op\":\"remove\",\"path\":\"/a/b/c\"}]",
             "{\"a\":{\"b\":{}}}");
    apply_fails("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]",
                "operation 0 (remove /b) cannot be applied");
    apply_fails("{\"l\":[1]}", "[{\"op\":\"remove\",\"path\":\"/l/1\"}]",
                "operation 0 (remove /l/1) cannot be applied");
    apply_fails("{\"l\":[1]}", "[{\"op\":\"remove\",\"path\":\"/l/-\"}]",
                "operation 0 (remove /l/-) cannot be applied");
    apply_fails("{\"l\":[]}", "[{\"op\":\"remove\",\"path\":\"/l/0\"}]",
                "operation 0 (remove /l/0) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]",
                "operation 0 (remove ) cannot be applied");
}

static void test_replace(void **state)
{
    apply_ok("{\"a\":1,\"b\":2}", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":\"x\"}]",
             "{\"a\":\"x\",\"b\":2}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"replace\",\"path\":\"/l/1\",\"value\":5}]",
             "{\"l\":[1,5]}");
    apply_ok("{\"spec\":{\"template\":{\"spec\":{\"memoryMiB\":4096}}}}",
             "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/memoryMiB\",\"value\":8192}]",
             "{\"spec\":{\"template\":{\"spec\":{\"memoryMiB\":8192}}}}");
    apply_ok("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]", "{\"b\":2}");
    /* replace of a missing member, a bad index, the end marker */
    apply_fails("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":2}]",
                "operation 0 (replace /b) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"replace\",\"path\":\"/l/2\",\"value\":2}]",
                "operation 0 (replace /l/2) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"replace\",\"path\":\"/l/-\",\"value\":2}]",
                "operation 0 (replace /l/-) cannot be applied");
    apply_fails("{\"l\":[1,2]}", "[{\"op\":\"replace\",\"path\":\"/l/-1\",\"value\":2}]",
                "operation 0 (replace /l/-1) cannot be applied");
    apply_fails("{\"a\":{}}", "[{\"op\":\"replace\",\"path\":\"/a/b/c\",\"value\":2}]",
                "operation 0 (replace /a/b/c) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\"}]",
                "operation 0 (replace /a) cannot be applied");
}

static void test_move(void **state)
{
    apply_ok("{\"a\":1,\"b\":{}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b/c\"}]",
             "{\"b\":{\"c\":1}}");
    apply_ok("{\"l\":[1,2,3]}", "[{\"op\":\"move\",\"from\":\"/l/0\",\"path\":\"/l/-\"}]",
             "{\"l\":[2,3,1]}");
    apply_ok("{\"l\":[1,2,3]}", "[{\"op\":\"move\",\"from\":\"/l/2\",\"path\":\"/l/0\"}]",
             "{\"l\":[3,1,2]}");
    apply_ok("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]", "{\"a\":1}");
    /* "/ab" is not inside "/a" */
    apply_ok("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/ab\"}]", "{\"ab\":1}");
    apply_fails("{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/c\"}]",
                "operation 0 (move /a/c) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/x\",\"path\":\"/b\"}]",
                "operation 0 (move /b) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"move\",\"path\":\"/b\"}]",
                "operation 0 (move /b) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"a\",\"path\":\"/b\"}]",
                "operation 0 (move /b) cannot be applied");
}

static void test_copy(void **state)
{
    apply_ok("{\"a\":{\"x\":[1]}}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]",
             "{\"a\":{\"x\":[1]},\"b\":{\"x\":[1]}}");
    apply_ok("{\"a\":{\"x\":1}}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/a/y\"}]",
             "{\"a\":{\"x\":1,\"y\":{\"x\":1}}}");
    apply_ok("{\"l\":[1,2]}", "[{\"op\":\"copy\",\"from\":\"/l/1\",\"path\":\"/l/0\"}]",
             "{\"l\":[2,1,2]}");
    /* the copy is independent of its source */
    apply_ok("{\"a\":{\"x\":1}}",
             "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"},"
             "{\"op\":\"replace\",\"path\":\"/a/x\",\"value\":2}]",
             "{\"a\":{\"x\":2},\"b\":{\"x\":1}}");
    apply_fails("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/missing\",\"path\":\"/b\"}]",
                "operation 0 (copy /b) cannot be applied");
    apply_fails("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/no/such\"}]",
                "operation 0 (copy /no/such) cannot be applied");
}

static void test_test_op(void **state)
{
    apply_ok("{\"m\":4096,\"o\":{\"a\":[1,\"x\"]}}",
             "[{\"op\":\"test\",\"path\":\"/m\",\"value\":4096},"
             "{\"op\":\"test\",\"path\":\"/o\",\"value\":{\"a\":[1,\"x\"]}}]",
             "{\"m\":4096,\"o\":{\"a\":[1,\"x\"]}}");
    apply_fails("{\"m\":4096}", "[{\"op\":\"test\",\"path\":\"/m\",\"value\":4097}]",
                "operation 0 (test /m) cannot be applied");
    /* Kubernetes number semantics: 4096 is not 4096.0 */
    apply_fails("{\"m\":4096}", "[{\"op\":\"test\",\"path\":\"/m\",\"value\":4096.0}]",
                "operation 0 (test /m) cannot be applied");
    apply_fails("{\"m\":4096}", "[{\"op\":\"test\",\"path\":\"/n\",\"value\":null}]",
                "operation 0 (test /n) cannot be applied");
    apply_fails("{\"m\":4096}", "[{\"op\":\"test\",\"path\":\"/m\"}]",
                "operation 0 (test /m) cannot be applied");
}

static void test_sequence_and_errors(void **state)
{
    /* operations run in order; the index of the failing one is reported */
    apply_ok("{}",
             "[{\"op\":\"add\",\"path\":\"/a\",\"value\":{}},"
             "{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1},"
             "{\"op\":\"replace\",\"path\":\"/a/b\",\"value\":2}]",
             "{\"a\":{\"b\":2}}");
    apply_fails("{}",
                "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1},"
                "{\"op\":\"test\",\"path\":\"/a\",\"value\":1},"
                "{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]",
                "operation 2 (test /a) cannot be applied");
    apply_fails("{}", "{\"op\":\"add\"}", "JSON patch is not an array");
    apply_fails("{}", "[{\"path\":\"/a\",\"value\":1}]", "operation 0: missing op or bad path");
    apply_fails("{}", "[{\"op\":\"add\",\"value\":1}]", "operation 0: missing op or bad path");
    apply_fails("{}", "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
                "operation 0: missing op or bad path");
    apply_fails("{}", "[{\"op\":\"add\",\"path\":\"/a~9\",\"value\":1}]",
                "operation 0: missing op or bad path");
    apply_fails("{}", "[{\"op\":\"frobnicate\",\"path\":\"/a\",\"value\":1}]",
                "operation 0 (frobnicate /a) cannot be applied");
    apply_ok("{\"a\":1}", "[]", "{\"a\":1}");

    char err[64] = "";
    hj *doc = tu_json("{}");
    assert_int_equal(hv_jsonpatch_apply(&doc, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, "JSON patch is not an array");
    hj_free(doc);
}

static void test_add_op_builder(void **state)
{
    hj *ops = hj_new_array();
    hj *v = tu_json("8192.0");
    hv_jsonpatch_add_op(ops, "replace", "/spec/memoryMiB", v);
    hv_jsonpatch_add_op(ops, "remove", "/spec/x~1y", NULL);
    /* the value was copied: changing or freeing ours does not touch the op */
    hj_free(v);
    tu_assert_dump(ops, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192.0},"
                        "{\"op\":\"remove\",\"path\":\"/spec/x~1y\"}]");
    hj *doc = tu_json("{\"spec\":{\"memoryMiB\":4096,\"x/y\":1}}");
    char err[128] = "";
    assert_int_equal(hv_jsonpatch_apply(&doc, ops, err, sizeof(err)), 0);
    tu_assert_dump(doc, "{\"spec\":{\"memoryMiB\":8192.0}}");
    hj_free(doc);
    hj_free(ops);
}

/* ---- base64 ----------------------------------------------------------------------------- */

static void test_b64_vectors(void **state)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t k = 0; k < 7; k++) {
        char *e = hv_b64_encode(plain[k], strlen(plain[k]));
        assert_non_null(e);
        assert_string_equal(e, enc[k]);
        free(e);
        size_t n = 99;
        char *d = hv_b64_decode(enc[k], strlen(enc[k]), &n);
        assert_non_null(d);
        assert_int_equal(n, strlen(plain[k]));
        assert_memory_equal(d, plain[k], n);
        assert_int_equal(d[n], '\0');
        free(d);
    }
    /* the characters at the top of the alphabet */
    static const unsigned char top[] = {0xfb, 0xff, 0xbf};
    char *e = hv_b64_encode(top, sizeof(top));
    assert_string_equal(e, "+/+/");
    free(e);
}

static void test_b64_roundtrip_all_bytes(void **state)
{
    unsigned char data[300];
    for (size_t k = 0; k < sizeof(data); k++)
        data[k] = (unsigned char)(k * 7 + 3);
    for (size_t len = 0; len <= sizeof(data); len += 1 + len / 8) {
        char *e = hv_b64_encode(data, len);
        assert_non_null(e);
        assert_int_equal(strlen(e), 4 * ((len + 2) / 3));
        size_t n = 0;
        char *d = hv_b64_decode(e, strlen(e), &n);
        assert_non_null(d);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(d, data, len);
        free(d);
        free(e);
    }
}

static void test_b64_rejects_bad_input(void **state)
{
    static const char *const bad[] = {
        "Zg",       /* no padding */
        "Zg=",      /* short padding */
        "Zm9v!A==", /* not in the alphabet */
        "Zm9 ",     /* whitespace */
        "Zm9\n",    /* newline */
        "Zm9v\n",   /* trailing newline */
        "Zg==Zg==", /* padding in the middle */
        "Z===",     /* too much padding */
        "====",     /* only padding */
        "Zg=A",     /* data after padding */
        "=Zg=",     /* padding first */
        "Zm9-",     /* URL alphabet */
        "Zm9_",     /* URL alphabet */
        "Zm9vY",    /* length not a multiple of 4 */
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        size_t n = 12345;
        char *d = hv_b64_decode(bad[k], strlen(bad[k]), &n);
        if (d) {
            free(d);
            fail_msg("accepted bad base64 \"%s\"", bad[k]);
        }
    }
    /* only the given length counts: a valid text cut short is not base64 */
    size_t n0;
    assert_null(hv_b64_decode("Zm9vYmFy", 6, &n0));
    assert_null(hv_b64_decode("Zg==", 3, &n0));
    char *part = hv_b64_decode("Zm9vYmFy", 4, &n0);
    assert_non_null(part);
    assert_int_equal(n0, 3);
    assert_memory_equal(part, "foo", 3);
    free(part);
    /* a NUL inside the given length */
    size_t n;
    assert_null(hv_b64_decode("Zm\0v", 4, &n));
    /* high bytes */
    assert_null(hv_b64_decode("Zm\xc3\xa9", 4, &n));
}

/* ---- the CAPI round trip over every fixture --------------------------------------------- */

static bool is_set_fixture(const hj *req)
{
    return hj_get(hj_get(req, "current"), "infrastructureMachineTemplate") != NULL;
}

/* What CAPI keeps of a patched object: current with only spec (templates:
 * spec.template.spec) taken from the patched copy. */
static hj *capi_copy_back(const hj *current, const hj *patched, bool tmpl)
{
    hj *out = hj_clone(current);
    if (!tmpl) {
        hj_obj_set_take(out, "spec", hj_clone(hj_get(patched, "spec")));
    } else {
        hj *t = hj_get(hj_get(out, "spec"), "template");
        assert_non_null(t);
        hj_obj_set_take(t, "spec", hj_clone(hj_ptr(patched, "/spec/template/spec")));
    }
    return out;
}

struct rt_counts {
    size_t fixtures, patched, fully_covered, declined, failures;
};

static void roundtrip_one(const char *name, const hj *req, const struct hv_profiles *ps,
                          const struct hv_settings *s, struct rt_counts *cnt)
{
    bool set = is_set_fixture(req);
    const char *infra = set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    const char *mach = set ? "machineSet" : "machine";
    const char *boot = set ? "bootstrapConfigTemplate" : "bootstrapConfig";
    const hj *cur = hj_get(req, "current"), *des = hj_get(req, "desired");
    struct hv_plan_input in = {
        .profiles = ps,
        .settings = s,
        .machine_set = set,
        .cur_machine = hj_get(cur, mach),
        .des_machine = hj_get(des, mach),
        .cur_infra = hj_get(cur, infra),
        .des_infra = hj_get(des, infra),
        .cur_boot = hj_get(cur, boot),
        .des_boot = hj_get(des, boot),
        .hooks = NULL,
    };
    assert_non_null(in.cur_infra);
    assert_non_null(in.des_infra);
    struct hv_coverage c;
    hv_plan_coverage(&in, &c);
    cnt->fixtures++;
    if (c.declined || c.failure) {
        if (c.infra_patch)
            fail_msg("%s: a declined/failed answer carries a patch", name);
        cnt->declined += c.declined;
        cnt->failures += c.failure;
        hv_coverage_free(&c);
        return;
    }
    hj *patched = hj_clone(in.cur_infra);
    char err[256] = "";
    if (c.infra_patch) {
        cnt->patched++;
        assert_int_equal(c.infra_patch->type, HJ_ARRAY);
        assert_true(c.infra_patch->n > 0);
        /* what goes on the wire: base64 of the JSON text, decoded again by CAPI */
        size_t tlen, dlen;
        char *text = hj_dump(c.infra_patch, &tlen);
        char *b64 = hv_b64_encode(text, tlen);
        char *dec = hv_b64_decode(b64, strlen(b64), &dlen);
        assert_non_null(dec);
        hj *wire = hj_parse(dec, dlen, err, sizeof(err));
        assert_non_null(wire);
        assert_true(hj_equal(wire, c.infra_patch));
        if (hv_jsonpatch_apply(&patched, wire, err, sizeof(err)) != 0)
            fail_msg("%s: the patch does not apply: %s", name, err);
        hj_free(wire);
        free(dec);
        free(b64);
        free(text);
    }
    hj *result = capi_copy_back(in.cur_infra, patched, set);

    /* Expected: current with exactly the covered fields set to their desired values. */
    const struct hv_profile *p = hv_profile_find(ps, hj_get_str(in.des_infra, "apiVersion"),
                                                 hj_get_str(in.des_infra, "kind"));
    assert_non_null(p);
    hj *expected = hj_clone(in.cur_infra);
    size_t covered = 0;
    for (size_t k = 0; k < c.n_fields; k++) {
        const struct hv_field_result *r = &c.fields[k];
        char path[300];
        snprintf(path, sizeof(path), "%s%s", hv_profile_spec_root(p), p->field[r->f].path);
        if (r->cls == HV_CLASS_NO) {
            /* not covered: stays as in current */
            assert_true(hj_equal(hj_ptr(result, path), hj_ptr(in.cur_infra, path)));
            continue;
        }
        covered++;
        const hj *want = hj_ptr(in.des_infra, path);
        assert_non_null(want);
        if (!hj_equal(hj_ptr(result, path), want))
            fail_msg("%s: covered field %s does not equal desired", name, path);
        char *wt = hj_dump(want, NULL), *gt = hj_dump(hj_ptr(result, path), NULL);
        assert_string_equal(gt, wt); /* byte for byte: 8192.0 stays 8192.0 */
        free(wt);
        free(gt);
        char parent[300];
        snprintf(parent, sizeof(parent), "%s", path);
        *strrchr(parent, '/') = '\0';
        hj_obj_set_take(hj_ptr(expected, parent), strrchr(path, '/') + 1, hj_clone(want));
    }
    assert_int_equal(covered, c.infra_patch ? c.infra_patch->n : 0);
    if (!hj_equal(result, expected)) {
        char *rt = hj_dump(result, NULL), *et = hj_dump(expected, NULL);
        fail_msg("%s: something besides the covered fields changed:\n got  %s\n want %s", name, rt,
                 et);
    }
    /* When nothing is left uncovered, CAPI's comparison of the infra spec must now succeed. */
    const char *spec = set ? "/spec/template/spec" : "/spec";
    bool infra_uncovered = false;
    for (size_t k = 0; k < c.n_uncovered; k++)
        infra_uncovered |= strncmp(c.uncovered[k].where, infra, strlen(infra)) == 0;
    if (!infra_uncovered) {
        assert_true(hj_equal(hj_ptr(result, spec), hj_ptr(in.des_infra, spec)));
        if (c.n_uncovered_all == 0)
            cnt->fully_covered++;
    } else {
        assert_false(hj_equal(hj_get(result, "spec"), hj_get(in.des_infra, "spec")));
    }
    hj_free(expected);
    hj_free(result);
    hj_free(patched);
    hv_coverage_free(&c);
}

static void roundtrip_all(enum hv_power_cycle pc, enum hv_on_uncoverable unc, struct rt_counts *cnt)
{
    struct hv_profiles ps;
    struct hv_settings s;
    hv_profiles_builtin(&ps);
    hv_settings_default(&s);
    s.power_cycle = pc;
    s.on_uncoverable = unc;
    size_t n;
    char **names = tu_fixture_names(&n);
    assert_true(n >= 15);
    memset(cnt, 0, sizeof(*cnt));
    for (size_t k = 0; k < n; k++) {
        hj *req = tu_fixture(names[k]);
        roundtrip_one(names[k], req, &ps, &s, cnt);
        hj_free(req);
    }
    tu_free_names(names, n);
    hv_profiles_free(&ps);
}

static void test_roundtrip_fixtures_ifneeded_fallback(void **state)
{
    struct rt_counts c;
    roundtrip_all(HV_PC_IF_NEEDED, HV_UNC_FALLBACK, &c);
    assert_int_equal(c.failures, 0);
    assert_true(c.declined >= 1);       /* unknown-kind.json */
    assert_true(c.patched >= 11);       /* every fixture with a hardware change */
    assert_true(c.fully_covered >= 10); /* grow, shrink, cores, float, v1beta2, templates */
}

static void test_roundtrip_fixtures_never_fallback(void **state)
{
    struct rt_counts c;
    roundtrip_all(HV_PC_NEVER, HV_UNC_FALLBACK, &c);
    assert_int_equal(c.failures, 0);
    assert_true(c.patched >= 7);       /* growths only */
    assert_true(c.fully_covered >= 6); /* no shrink, no cores */
}

static void test_roundtrip_fixtures_block(void **state)
{
    struct rt_counts c;
    roundtrip_all(HV_PC_IF_NEEDED, HV_UNC_BLOCK, &c);
    assert_true(c.failures >= 4); /* bootstrap files, disk, version (machine and set) */
    assert_true(c.declined >= 1);
    assert_true(c.patched >= 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_add_failures),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_move),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_test_op),
        cmocka_unit_test(test_sequence_and_errors),
        cmocka_unit_test(test_add_op_builder),
        cmocka_unit_test(test_b64_vectors),
        cmocka_unit_test(test_b64_roundtrip_all_bytes),
        cmocka_unit_test(test_b64_rejects_bad_input),
        cmocka_unit_test(test_roundtrip_fixtures_ifneeded_fallback),
        cmocka_unit_test(test_roundtrip_fixtures_never_fallback),
        cmocka_unit_test(test_roundtrip_fixtures_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
