/* test_compose.c: cmocka tests for the pieces of compose mode that need no network:
 * CAPI's patch rules (src/hooks/capipatch.c: apply to a copy, copy back only the spec, merge
 * patches, the diff that becomes one patch per object), the `downstream` config, and which
 * downstream UpdateMachine asks (remembered dones) with the calls and the clock faked. */
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
#include "capipatch.h"
#include "compose.h"
#include "config.h"
#include "json.h"
#include "jsonpatch.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

/* A response patch field {patchType, patch: base64(text)}. */
static hj *field(const char *type, const char *text)
{
    hj *f = hj_new_object();
    if (type)
        hj_obj_set_take(f, "patchType", hj_new_string(type));
    if (text) {
        char *b = hv_b64_encode(text, strlen(text));
        hj_obj_set_take(f, "patch", hj_new_string(b));
        free(b);
    }
    return f;
}

static void apply_ok(const char *obj, const char *type, const char *patch, const char *path,
                     const char *want)
{
    char err[200] = "";
    hj *o = tu_json(obj), *f = field(type, patch);
    if (hv_capi_apply(&o, f, path, err, sizeof(err)) != 0)
        fail_msg("%s %s on %s: %s", type, patch, obj, err);
    tu_assert_dump(o, want);
    hj_free(o);
    hj_free(f);
}

static void apply_fails(const char *obj, const char *type, const char *patch, const char *want)
{
    char err[200] = "";
    hj *o = tu_json(obj), *f = field(type, patch);
    assert_int_equal(hv_capi_apply(&o, f, "/spec", err, sizeof(err)), -1);
    assert_string_equal(err, want);
    tu_assert_dump(o, obj); /* unchanged */
    hj_free(o);
    hj_free(f);
}

static void test_only_spec_is_copied_back(void **state)
{
    (void)state;
    const char *m = "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"version\":\"v1\"}}";
    apply_ok(m, "JSONPatch",
             "[{\"op\":\"replace\",\"path\":\"/spec/version\",\"value\":\"v2\"},"
             "{\"op\":\"replace\",\"path\":\"/metadata/name\",\"value\":\"b\"}]",
             "/spec", "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"version\":\"v2\"}}");
    apply_ok(m, "JSONMergePatch", "{\"spec\":{\"version\":\"v3\",\"x\":1},\"status\":{}}", "/spec",
             "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"version\":\"v3\",\"x\":1}}");
    /* merge patch null removes */
    apply_ok("{\"spec\":{\"a\":1,\"b\":2}}", "JSONMergePatch", "{\"spec\":{\"a\":null}}", "/spec",
             "{\"spec\":{\"b\":2}}");
    /* a MachineSet: only spec.template.spec */
    apply_ok("{\"spec\":{\"replicas\":1,\"template\":{\"spec\":{\"version\":\"v1\"}}}}",
             "JSONPatch",
             "[{\"op\":\"replace\",\"path\":\"/spec/replicas\",\"value\":3},"
             "{\"op\":\"replace\",\"path\":\"/spec/template/spec/version\",\"value\":\"v2\"}]",
             "/spec/template/spec",
             "{\"spec\":{\"replicas\":1,\"template\":{\"spec\":{\"version\":\"v2\"}}}}");
    /* no-ops */
    apply_ok(m, "JSONPatch", "[]", "/spec", m);
    apply_ok(m, "JSONMergePatch", "{}", "/spec", m);
    apply_ok(m, "JSONMergePatch", NULL, "/spec", m);
    /* numbers keep their literal: 4096.0 stays a float */
    apply_ok("{\"spec\":{\"m\":1}}", "JSONPatch",
             "[{\"op\":\"replace\",\"path\":\"/spec/m\",\"value\":4096.0}]", "/spec",
             "{\"spec\":{\"m\":4096.0}}");
}

static void test_bad_patches(void **state)
{
    (void)state;
    const char *m = "{\"spec\":{\"a\":1}}";
    apply_fails(m, NULL, "[]", "patchType is not set");
    apply_fails(m, "StrategicMerge", "{}", "unknown patchType StrategicMerge");
    apply_fails(m, "JSONPatch", "{\"a\":1}", "JSON patch is not an array");
    apply_fails(m, "JSONPatch", "[{\"op\":\"replace\",\"path\":\"/spec/zz\",\"value\":1}]",
                "operation 0 (replace /spec/zz) cannot be applied");
    apply_fails(m, "JSONPatch", "[", "patch does not parse: invalid JSON at byte 1: premature EOF");
    apply_fails(m, "JSONPatch", NULL, "empty JSON patch");
    hj *o = tu_json(m), *f = tu_json("{\"patchType\":\"JSONPatch\",\"patch\":\"***\"}");
    char err[200];
    assert_int_equal(hv_capi_apply(&o, f, "/spec", err, sizeof(err)), -1);
    assert_string_equal(err, "patch is not base64");
    hj_free(o);
    hj_free(f);
    /* CAPI's IsDefined */
    hj *e = tu_json("{}"), *p = tu_json("{\"patchType\":\"JSONPatch\"}");
    assert_false(hv_capi_patch_defined(e));
    assert_false(hv_capi_patch_defined(NULL));
    assert_true(hv_capi_patch_defined(p));
    hj_free(e);
    hj_free(p);
}

/* diff(a, b) applied to a gives b, and is what we expect. */
static void diff_is(const char *a, const char *b, const char *want)
{
    hj *x = tu_json(a), *y = tu_json(b), *ops = hj_new_array();
    hv_json_diff(hj_get(x, "spec"), hj_get(y, "spec"), "/spec", ops);
    tu_assert_dump(ops, want);
    char err[200];
    if (hv_jsonpatch_apply(&x, ops, err, sizeof(err)) != 0)
        fail_msg("diff does not apply: %s", err);
    assert_true(hj_equal(x, y));
    hj_free(x);
    hj_free(y);
    hj_free(ops);
}

static void test_diff(void **state)
{
    (void)state;
    diff_is("{\"spec\":{\"a\":1}}", "{\"spec\":{\"a\":1}}", "[]");
    diff_is("{\"spec\":{\"v\":\"1\",\"m\":2048,\"gone\":true}}",
            "{\"spec\":{\"v\":\"2\",\"m\":4096,\"new\":{\"x\":[1]}}}",
            "[{\"op\":\"remove\",\"path\":\"/spec/gone\"},"
            "{\"op\":\"replace\",\"path\":\"/spec/m\",\"value\":4096},"
            "{\"op\":\"add\",\"path\":\"/spec/new\",\"value\":{\"x\":[1]}},"
            "{\"op\":\"replace\",\"path\":\"/spec/v\",\"value\":\"2\"}]");
    /* int and float literals differ; arrays are replaced whole; keys are escaped */
    diff_is("{\"spec\":{\"m\":4096,\"l\":[1,2],\"a/b\":{\"c~d\":1}}}",
            "{\"spec\":{\"m\":4096.0,\"l\":[1],\"a/b\":{\"c~d\":2}}}",
            "[{\"op\":\"replace\",\"path\":\"/spec/a~1b/c~0d\",\"value\":2},"
            "{\"op\":\"replace\",\"path\":\"/spec/l\",\"value\":[1]},"
            "{\"op\":\"replace\",\"path\":\"/spec/m\",\"value\":4096.0}]");
    diff_is("{\"x\":1}", "{\"x\":1,\"spec\":{\"a\":1}}",
            "[{\"op\":\"add\",\"path\":\"/spec\",\"value\":{\"a\":1}}]");
}

/* ---- config ------------------------------------------------------------------------------ */

static int parse(const char *text, char *err, size_t errlen, struct hv_config *c)
{
    hv_config_default(c);
    return hv_config_parse(c, text, strlen(text), err, errlen);
}

static void config_fails(const char *text, const char *want)
{
    struct hv_config c;
    char err[300] = "";
    assert_int_equal(parse(text, err, sizeof(err), &c), -1);
    assert_string_equal(err, want);
    hv_config_free(&c);
}

static void test_config(void **state)
{
    (void)state;
    struct hv_config c;
    char err[300] = "";
    assert_int_equal(parse("{\"downstream\":[{\"name\":\"kubeup\",\"url\":\"https://k.example/"
                           "base/\",\"caFile\":\"/ca\",\"timeoutSeconds\":4,\"settings\":"
                           "{\"a\":\"b\"}},{\"name\":\"second\",\"url\":\"https://s:9443\","
                           "\"clientCertFile\":\"/c\",\"clientKeyFile\":\"/k\"}]}",
                           err, sizeof(err), &c),
                     0);
    assert_int_equal(c.downstream.n, 2);
    assert_string_equal(c.downstream.items[0].url, "https://k.example/base");
    assert_int_equal(c.downstream.items[0].timeout_s, 4);
    tu_assert_dump(c.downstream.items[0].settings, "{\"a\":\"b\"}");
    assert_null(c.downstream.items[1].settings);
    assert_int_equal(c.downstream.items[1].timeout_s, 3);
    assert_string_equal(c.downstream.items[1].key_file, "/k");
    hv_config_free(&c);

    const char *one = "{\"name\":\"a\",\"url\":\"https://a\"}";
    char buf[400];
    snprintf(buf, sizeof(buf), "{\"downstream\":[%s,%s]}", one, one);
    config_fails(buf, "downstream[1].name a is used twice");
    config_fails("{\"downstream\":[{\"name\":\"a\",\"url\":\"http://a\"}]}",
                 "downstream[0].url must be an https:// URL without query or fragment");
    config_fails("{\"downstream\":[{\"name\":\"A_b\",\"url\":\"https://a\"}]}",
                 "downstream[0].name must be a DNS-1123 label other than hvupdater");
    config_fails("{\"downstream\":[{\"name\":\"hvupdater\",\"url\":\"https://a\"}]}",
                 "downstream[0].name must be a DNS-1123 label other than hvupdater");
    config_fails("{\"downstream\":[{\"url\":\"https://a\"}]}",
                 "downstream[0].name must be a non-empty string");
    config_fails("{\"downstream\":[{\"name\":\"a\",\"url\":\"https://a\",\"clientCertFile\":"
                 "\"/c\"}]}",
                 "downstream[0]: clientCertFile and clientKeyFile go together");
    config_fails("{\"downstream\":[{\"name\":\"a\",\"url\":\"https://a\",\"timeout\":3}]}",
                 "downstream[0]: unknown key \"timeout\"");
    config_fails("{\"downstream\":[{\"name\":\"a\",\"url\":\"https://a\",\"settings\":"
                 "{\"x\":1}}]}",
                 "downstream[0].settings must be a map of strings");
    config_fails("{\"downstream\":[{\"name\":\"a\",\"url\":\"https://a\",\"timeoutSeconds\":30}]}",
                 "downstream[0].timeoutSeconds must be an integer from 1 to 29");
    config_fails("{\"handlerTimeoutSeconds\":5,\"downstream\":[{\"name\":\"a\",\"url\":"
                 "\"https://a\"},{\"name\":\"b\",\"url\":\"https://b\"}]}",
                 "downstream: the timeoutSeconds add up to 6 s, which must stay under "
                 "handlerTimeoutSeconds (5 s), the time CAPI gives hvupdater");
    config_fails("{\"downstream\":{}}", "downstream must be an array of at most 8 extensions");
}

/* ---- UpdateMachine: which downstream is asked ------------------------------------------- */

/* Two fake downstreams: "quick" answers done at once, "slow" is in progress until told
 * otherwise. Each call is counted; the clock is the test's. */
static int calls_quick, calls_slow;
static bool slow_done;
static const char *slow_msg; /* slow's in-progress message (NULL: "upgrading the kubelet") */
static int64_t fake_now = 1000000;

static int64_t fake_clock(void)
{
    return fake_now;
}

static enum hv_ds_result fake_call(struct hv_downstream *d, enum hv_hook h, const hj *req,
                                   int64_t deadline_ms, hj **answer, char *why, size_t whylen)
{
    (void)h;
    (void)req;
    (void)deadline_ms;
    (void)why;
    (void)whylen;
    bool quick = !strcmp(hv_downstream_name(d), "quick");
    bool done = quick || slow_done;
    (quick ? &calls_quick : &calls_slow)[0]++;
    *answer = hj_new_object();
    hj_obj_set_take(*answer, "status", hj_new_string("Success"));
    hj_obj_set_take(*answer, "message",
                    hj_new_string(done       ? "completed"
                                  : slow_msg ? slow_msg
                                             : "upgrading the kubelet"));
    hj_obj_set_take(*answer, "retryAfterSeconds", hj_new_int(done ? 0 : 5));
    return HV_DS_OK;
}

struct um_fx {
    struct hv_downstream_cfg items[2];
    struct hv_downstream_list list;
    struct hv_profiles profiles;
    struct hv_hooks_ctx ctx;
    struct hv_settings s;
};

static void um_setup_order(struct um_fx *f, bool with_slow, bool slow_first)
{
    memset(f, 0, sizeof(*f));
    f->items[slow_first] =
        (struct hv_downstream_cfg){.name = "quick", .url = "https://q", .timeout_s = 2};
    f->items[!slow_first] =
        (struct hv_downstream_cfg){.name = "slow", .url = "https://s", .timeout_s = 2};
    f->list.items = f->items;
    f->list.n = with_slow ? 2 : 1;
    hv_profiles_builtin(&f->profiles);
    f->ctx.profiles = &f->profiles;
    f->ctx.timeout_s = 10;
    f->ctx.compose = hv_compose_new(&f->list);
    hv_compose_set_test_hooks(f->ctx.compose, fake_call, fake_clock);
    hv_settings_default(&f->s);
    calls_quick = calls_slow = 0;
    slow_done = false;
    slow_msg = NULL;
}

static void um_setup(struct um_fx *f, bool with_slow)
{
    um_setup_order(f, with_slow, false);
}

static void um_teardown(struct um_fx *f)
{
    hv_compose_free(f->ctx.compose);
    hv_profiles_free(&f->profiles);
}

/* UpdateMachine for Machine `name` at Kubernetes `version` (a kind hvupdater has no profile
 * for, so only the downstreams work); returns retryAfterSeconds, the message in msg. */
static int um(struct um_fx *f, const char *name, const char *version, char *msg, size_t cap)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"apiVersion\":\"%s\",\"kind\":\"UpdateMachineRequest\",\"desired\":{"
             "\"machine\":{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
             "\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},\"spec\":{\"version\":"
             "\"%s\"}},\"infrastructureMachine\":{\"apiVersion\":\"infrastructure.cluster.x-k8s."
             "io/v1beta1\",\"kind\":\"DockerMachine\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"default\"},\"spec\":{}}}}",
             HV_HOOKS_API, name, version, name);
    hj *req = tu_json(text);
    hj *r = hv_compose_handle(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &f->s);
    assert_string_equal(hj_get_str(r, "status"), "Success");
    snprintf(msg, cap, "%s", hj_get_str(r, "message"));
    int retry = (int)hj_get(r, "retryAfterSeconds")->i;
    hj_free(r);
    hj_free(req);
    return retry;
}

/* A -> B -> A while the update is in flight: the second A is the first request byte for
 * byte, but the Machine went to B in between, so quick's done for A no longer holds. */
static void test_done_is_forgotten_when_the_machine_sees_another_state(void **state)
{
    (void)state;
    struct um_fx f;
    char m[1024];
    um_setup(&f, true);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    assert_string_equal(m, "downstream quick: completed; downstream slow: upgrading the kubelet");
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    assert_int_equal(calls_quick, 1); /* remembered while slow still works on A */
    assert_int_equal(calls_slow, 2);
    assert_int_equal(um(&f, "cp-0", "v1.33.0", m, sizeof(m)), 5); /* B */
    assert_int_equal(calls_quick, 2);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5); /* A again */
    assert_int_equal(calls_quick, 3);
    /* another Machine's states do not touch cp-0's memory */
    assert_int_equal(um(&f, "cp-1", "v1.33.0", m, sizeof(m)), 5);
    assert_int_equal(calls_quick, 4);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    assert_int_equal(calls_quick, 4);
    um_teardown(&f);
}

/* A downstream's message, bounded inside ours, is cut where a character begins: the answer
 * CAPI (or an hvupdater calling this one as its downstream) gets reads back as JSON (a cut
 * inside a 2-byte character, in the middle of the composed message, made it unreadable). */
static void test_downstream_message_cut_where_a_character_begins(void **state)
{
    (void)state;
    struct um_fx f;
    char m[1024], slow[400];
    memset(slow, 'x', 299);
    snprintf(slow + 299, sizeof(slow) - 299, "\xc3\xa9 and more");
    um_setup_order(&f, true, true); /* slow's part first: the cut in the middle of ours */
    slow_msg = slow;
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    char text[1200], err[128];
    snprintf(text, sizeof(text), "{\"m\":\"%s\"}", m);
    hj *back = hj_parse(text, strlen(text), err, sizeof(err));
    assert_non_null(back);
    hj_free(back);
    assert_non_null(strstr(m, "downstream slow: xxx"));
    assert_null(strstr(m, "\xc3"));
    um_teardown(&f);
}

/* A done answer ends the update: the same objects again are a new update, asked again. */
static void test_done_is_forgotten_when_the_update_is_done(void **state)
{
    (void)state;
    struct um_fx f;
    char m[1024];
    um_setup(&f, true);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    slow_done = true;
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 0);
    assert_string_equal(m, "downstream quick: completed; downstream slow: completed");
    assert_int_equal(calls_quick, 1);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 0);
    assert_int_equal(calls_quick, 2);
    assert_int_equal(calls_slow, 3);
    um_teardown(&f);
}

/* Calls for the Machine stop reaching this process for longer than twice the retry it
 * answered plus 15 s (another replica answers them, and may see other states): forgotten. */
static void test_done_is_forgotten_after_a_gap(void **state)
{
    (void)state;
    struct um_fx f;
    char m[1024];
    um_setup(&f, true);
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    fake_now += 25000; /* 2 * 5 s + 15 s: still following it */
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    assert_int_equal(calls_quick, 1);
    fake_now += 25001;
    assert_int_equal(um(&f, "cp-0", "v1.32.0", m, sizeof(m)), 5);
    assert_int_equal(calls_quick, 2);
    um_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_done_is_forgotten_when_the_machine_sees_another_state),
        cmocka_unit_test(test_downstream_message_cut_where_a_character_begins),
        cmocka_unit_test(test_done_is_forgotten_when_the_update_is_done),
        cmocka_unit_test(test_done_is_forgotten_after_a_gap),
        cmocka_unit_test(test_only_spec_is_copied_back),
        cmocka_unit_test(test_bad_patches),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
