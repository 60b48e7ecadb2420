/* test_hooks.c: cmocka tests for src/hooks/hooks.c: discovery, request checks with their exact
 * Failure messages, settings, CanUpdateMachine(Set) responses with base64 JSON patches, and
 * UpdateMachine routing to the engine entry point (a stub here). */
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
#include "hooks.h"
#include "json.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

#include <yajl/yajl_gen.h>

/* Linked with -Wl,--wrap=yajl_gen_alloc (test/CMakeLists.txt): hj_dump's generator can be
 * made to fail, as it does when memory runs out. */
yajl_gen __real_yajl_gen_alloc(const yajl_alloc_funcs *afs);
yajl_gen __wrap_yajl_gen_alloc(const yajl_alloc_funcs *afs);
static bool gen_alloc_fails;
yajl_gen __wrap_yajl_gen_alloc(const yajl_alloc_funcs *afs)
{
    return gen_alloc_fails ? NULL : __real_yajl_gen_alloc(afs);
}

#define API     "hooks.runtime.cluster.x-k8s.io/v1alpha1"
#define LV_UUID "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f"

static const char *const request_kinds[] = {"DiscoveryRequest", "CanUpdateMachineRequest",
                                            "CanUpdateMachineSetRequest", "UpdateMachineRequest"};
static const char *const response_kinds[] = {"DiscoveryResponse", "CanUpdateMachineResponse",
                                             "CanUpdateMachineSetResponse",
                                             "UpdateMachineResponse"};

/* ---- context and update stub ------------------------------------------------------------ */

struct stub {
    int calls;
    char kind[64];
    char backend[32];
    struct hv_vm_ref ref;
    struct hv_hw hw;
    struct hv_settings s;
    struct hv_update_result answer;
};

static void stub_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        const struct hv_hw *desired, const struct hv_settings *s,
                        struct hv_update_result *out)
{
    struct stub *st = ctx;
    st->calls++;
    snprintf(st->kind, sizeof(st->kind), "%s", p->kind);
    snprintf(st->backend, sizeof(st->backend), "%s", p->backend);
    st->ref = *ref;
    st->hw = *desired;
    st->s = *s;
    *out = st->answer;
}

struct fx {
    struct hv_profiles ps;
    struct hv_hooks_ctx ctx;
    struct stub st;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    hv_profiles_builtin(&f->ps);
    f->ctx.profiles = &f->ps;
    hv_settings_default(&f->ctx.defaults);
    f->ctx.plan_hooks = NULL;
    f->ctx.update = NULL;
    f->ctx.update_ctx = &f->st;
    f->ctx.timeout_s = 10;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    hv_profiles_free(&f->ps);
    free(f);
    return 0;
}

/* ---- calling a hook --------------------------------------------------------------------- */

struct answer {
    hj *r;        /* parsed response */
    bool failure; /* failure_out */
    char msg[1100];
};

/* Call hook h with req and check the response envelope; caller frees a->r. */
static void call(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req, struct answer *a)
{
    size_t len = 0;
    char err[256] = "";
    memset(a, 0, sizeof(*a));
    memset(a->msg, 'Z', sizeof(a->msg) - 1);
    char *out = hv_hook_handle(ctx, h, req, &a->failure, a->msg, sizeof(a->msg), &len);
    assert_non_null(out);
    assert_int_equal(len, strlen(out));
    a->r = hj_parse(out, len, err, sizeof(err));
    if (!a->r)
        fail_msg("response is not JSON (%s): %s", err, out);
    free(out);
    assert_int_equal(a->r->type, HJ_OBJECT);
    assert_string_equal(hj_get_str(a->r, "apiVersion"), API);
    assert_string_equal(hj_get_str(a->r, "kind"), response_kinds[h]);
    const char *status = hj_get_str(a->r, "status");
    assert_non_null(status);
    assert_string_equal(status, a->failure ? "Failure" : "Success");
    const char *m = hj_get_str(a->r, "message");
    assert_string_equal(a->msg, m ? m : "");
    if (h == HV_HOOK_UPDATE_MACHINE) {
        const hj *ra = hj_get(a->r, "retryAfterSeconds");
        assert_non_null(ra);
        assert_int_equal(ra->type, HJ_INT);
        assert_true(ra->i >= 0 && ra->i <= INT32_MAX);
    } else {
        assert_null(hj_get(a->r, "retryAfterSeconds"));
    }
}

/* Expect a Failure with exactly msg. */
static void expect_failure(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                           const char *msg)
{
    struct answer a;
    call(ctx, h, req, &a);
    if (!a.failure)
        fail_msg("expected Failure \"%s\", got Success \"%s\"", msg, a.msg);
    assert_string_equal(a.msg, msg);
    assert_null(hj_get(a.r, "infrastructureMachinePatch"));
    assert_null(hj_get(a.r, "infrastructureMachineTemplatePatch"));
    if (h == HV_HOOK_UPDATE_MACHINE)
        assert_int_equal(hj_get(a.r, "retryAfterSeconds")->i, 0);
    hj_free(a.r);
}

/* A fixture as a full request for hook h. */
static hj *request(const char *fixture, enum hv_hook h)
{
    hj *req = tu_fixture(fixture);
    hj_obj_set_take(req, "apiVersion", hj_new_string(API));
    hj_obj_set_take(req, "kind", hj_new_string(request_kinds[h]));
    return req;
}

/* An UpdateMachineRequest: the desired half of a fixture. */
static hj *update_request(const char *fixture)
{
    hj *req = request(fixture, HV_HOOK_UPDATE_MACHINE);
    assert_true(hj_obj_del(req, "current"));
    return req;
}

/* Decode a {patchType, patch} member: base64 text of a JSON array. Caller frees. */
static hj *decode_patch(const hj *resp, const char *member)
{
    const hj *p = hj_get(resp, member);
    assert_non_null(p);
    assert_int_equal(p->type, HJ_OBJECT);
    assert_int_equal(p->n, 2);
    assert_string_equal(hj_get_str(p, "patchType"), "JSONPatch");
    const hj *b64 = hj_get(p, "patch");
    assert_non_null(b64);
    assert_int_equal(b64->type, HJ_STRING); /* Go []byte: a base64 string, not an array */
    size_t n;
    char err[256] = "";
    char *text = hv_b64_decode(b64->s, b64->slen, &n);
    assert_non_null(text);
    hj *ops = hj_parse(text, n, err, sizeof(err));
    if (!ops)
        fail_msg("decoded patch is not JSON (%s): %s", err, text);
    assert_int_equal(ops->type, HJ_ARRAY);
    free(text);
    return ops;
}

/* ---- discovery -------------------------------------------------------------------------- */

static void test_discovery(void **state)
{
    struct fx *f = *state;
    struct answer a;
    hj *req = tu_json("{\"apiVersion\":\"" API "\",\"kind\":\"DiscoveryRequest\"}");
    call(&f->ctx, HV_HOOK_DISCOVERY, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "");
    hj *want = tu_json(
        "{\"apiVersion\":\"" API "\",\"kind\":\"DiscoveryResponse\",\"status\":\"Success\","
        "\"handlers\":["
        "{\"name\":\"can-update-machine\",\"requestHook\":{\"apiVersion\":\"" API "\","
        "\"hook\":\"CanUpdateMachine\"},\"timeoutSeconds\":10,\"failurePolicy\":\"Fail\"},"
        "{\"name\":\"can-update-machine-set\",\"requestHook\":{\"apiVersion\":\"" API "\","
        "\"hook\":\"CanUpdateMachineSet\"},\"timeoutSeconds\":10,\"failurePolicy\":\"Fail\"},"
        "{\"name\":\"update-machine\",\"requestHook\":{\"apiVersion\":\"" API "\","
        "\"hook\":\"UpdateMachine\"},\"timeoutSeconds\":10,\"failurePolicy\":\"Fail\"}]}");
    assert_true(hj_equal(a.r, want));
    const hj *hs = hj_get(a.r, "handlers");
    assert_int_equal(hs->n, 3);
    assert_int_equal(hj_get(hs->items[0], "timeoutSeconds")->type, HJ_INT);
    hj_free(want);
    hj_free(a.r);

    /* the advertised timeout follows the config */
    f->ctx.timeout_s = 30;
    call(&f->ctx, HV_HOOK_DISCOVERY, req, &a);
    hs = hj_get(a.r, "handlers");
    for (size_t k = 0; k < hs->n; k++)
        assert_int_equal(hj_get(hs->items[k], "timeoutSeconds")->i, 30);
    hj_free(a.r);
    hj_free(req);
}

/* canUpdateFailurePolicy Ignore: the two CanUpdate handlers say Ignore (CAPI falls back to
 * replacement while hvupdater is down), UpdateMachine stays Fail; Fail again when unset. */
static void test_discovery_failure_policy(void **state)
{
    struct fx *f = *state;
    struct answer a;
    hj *req = tu_json("{\"apiVersion\":\"" API "\",\"kind\":\"DiscoveryRequest\"}");
    static const char *const hooks[] = {"CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"};
    static const char *const with_ignore[] = {"Ignore", "Ignore", "Fail"};
    for (int ignore = 1; ignore >= 0; ignore--) {
        f->ctx.can_update_ignore = ignore;
        call(&f->ctx, HV_HOOK_DISCOVERY, req, &a);
        assert_false(a.failure);
        const hj *hs = hj_get(a.r, "handlers");
        assert_int_equal(hs->n, 3);
        for (size_t k = 0; k < hs->n; k++) {
            assert_string_equal(hj_get_str(hj_get(hs->items[k], "requestHook"), "hook"), hooks[k]);
            assert_string_equal(hj_get_str(hs->items[k], "failurePolicy"),
                                ignore ? with_ignore[k] : "Fail");
        }
        hj_free(a.r);
    }
    hj_free(req);
}

static void test_hook_names(void **state)
{
    assert_string_equal(hv_hook_name(HV_HOOK_DISCOVERY), "Discovery");
    assert_string_equal(hv_hook_name(HV_HOOK_CAN_UPDATE_MACHINE), "CanUpdateMachine");
    assert_string_equal(hv_hook_name(HV_HOOK_CAN_UPDATE_MACHINE_SET), "CanUpdateMachineSet");
    assert_string_equal(hv_hook_name(HV_HOOK_UPDATE_MACHINE), "UpdateMachine");
    assert_string_equal(hv_hook_handler_name(HV_HOOK_DISCOVERY), "");
    assert_string_equal(hv_hook_handler_name(HV_HOOK_CAN_UPDATE_MACHINE), "can-update-machine");
    assert_string_equal(hv_hook_handler_name(HV_HOOK_CAN_UPDATE_MACHINE_SET),
                        "can-update-machine-set");
    assert_string_equal(hv_hook_handler_name(HV_HOOK_UPDATE_MACHINE), "update-machine");
}

/* ---- envelope --------------------------------------------------------------------------- */

static void test_envelope_errors(void **state)
{
    struct fx *f = *state;
    static const enum hv_hook hooks[] = {HV_HOOK_CAN_UPDATE_MACHINE, HV_HOOK_CAN_UPDATE_MACHINE_SET,
                                         HV_HOOK_UPDATE_MACHINE};
    for (size_t k = 0; k < 3; k++) {
        enum hv_hook h = hooks[k];
        char want[200];
        hj *req = request(h == HV_HOOK_CAN_UPDATE_MACHINE_SET ? "vsmt-memory-cpu-grow.json"
                                                              : "vsm-memory-grow.json",
                          h);
        /* wrong kind: another hook's request */
        hj_obj_set_take(
            req, "kind",
            hj_new_string(request_kinds[h == HV_HOOK_UPDATE_MACHINE ? HV_HOOK_CAN_UPDATE_MACHINE
                                                                    : HV_HOOK_UPDATE_MACHINE]));
        snprintf(want, sizeof(want), "request kind is not %s", request_kinds[h]);
        expect_failure(&f->ctx, h, req, want);
        hj_obj_set_take(req, "kind", hj_new_string("Something"));
        expect_failure(&f->ctx, h, req, want);
        /* kind not a string, kind missing */
        hj_obj_set_take(req, "kind", hj_new_int(1));
        snprintf(want, sizeof(want), "request has no kind (want %s)", request_kinds[h]);
        expect_failure(&f->ctx, h, req, want);
        assert_true(hj_obj_del(req, "kind"));
        expect_failure(&f->ctx, h, req, want);
        /* wrong apiVersion */
        hj_obj_set_take(req, "kind", hj_new_string(request_kinds[h]));
        hj_obj_set_take(req, "apiVersion",
                        hj_new_string("hooks.runtime.cluster.x-k8s.io/v1alpha2"));
        expect_failure(&f->ctx, h, req, "request apiVersion is not " API);
        hj_obj_set_take(req, "apiVersion", hj_new_string("v1"));
        expect_failure(&f->ctx, h, req, "request apiVersion is not " API);
        hj_free(req);

        /* not an object at all */
        hj *arr = tu_json("[]");
        expect_failure(&f->ctx, h, arr, want);
        hj_free(arr);
    }
}

/* ---- CanUpdateMachine(Set) request checks ------------------------------------------------ */

static void expect_edit_failure(const struct hv_hooks_ctx *ctx, enum hv_hook h, const char *fx,
                                const char *op_ptr, const char *value, const char *msg)
{
    hj *req = h == HV_HOOK_UPDATE_MACHINE ? update_request(fx) : request(fx, h);
    if (value)
        tu_set(req, op_ptr, value);
    else
        tu_del(req, op_ptr);
    expect_failure(ctx, h, req, msg);
    hj_free(req);
}

static void test_can_update_missing_parts(void **state)
{
    struct fx *f = *state;
    const enum hv_hook m = HV_HOOK_CAN_UPDATE_MACHINE;
    const char *fx = "vsm-memory-grow.json";
    expect_edit_failure(&f->ctx, m, fx, "/desired", NULL, "request has no desired");
    expect_edit_failure(&f->ctx, m, fx, "/desired", "\"x\"", "request has no desired");
    expect_edit_failure(&f->ctx, m, fx, "/current", NULL, "request has no current");
    expect_edit_failure(&f->ctx, m, fx, "/current", "[]", "request has no current");
    expect_edit_failure(&f->ctx, m, fx, "/desired/infrastructureMachine", NULL,
                        "request has no desired.infrastructureMachine");
    expect_edit_failure(&f->ctx, m, fx, "/desired/infrastructureMachine", "null",
                        "request has no desired.infrastructureMachine");
    expect_edit_failure(&f->ctx, m, fx, "/current/infrastructureMachine", NULL,
                        "request has no current.infrastructureMachine");
    expect_edit_failure(&f->ctx, m, fx, "/desired/infrastructureMachine/kind", NULL,
                        "desired.infrastructureMachine has no kind");
    expect_edit_failure(&f->ctx, m, fx, "/desired/infrastructureMachine/apiVersion", NULL,
                        "desired.infrastructureMachine has no apiVersion");
    expect_edit_failure(&f->ctx, m, fx, "/current/infrastructureMachine/kind", NULL,
                        "current.infrastructureMachine has no kind");
    expect_edit_failure(&f->ctx, m, fx, "/current/infrastructureMachine/apiVersion", "4",
                        "current.infrastructureMachine has no apiVersion");
    expect_edit_failure(&f->ctx, m, fx, "/desired/infrastructureMachine/spec", NULL,
                        "desired.infrastructureMachine has no spec");
    expect_edit_failure(&f->ctx, m, fx, "/current/infrastructureMachine/spec", NULL,
                        "current.infrastructureMachine has no spec");
    expect_edit_failure(&f->ctx, m, fx, "/current/infrastructureMachine/spec", "[]",
                        "current.infrastructureMachine has no spec");

    /* both halves missing: desired is named first */
    hj *req = request(fx, m);
    assert_true(hj_obj_del(req, "desired"));
    assert_true(hj_obj_del(req, "current"));
    expect_failure(&f->ctx, m, req, "request has no desired");
    hj_free(req);

    /* machine and bootstrap config are optional... */
    req = request(fx, m);
    tu_del(req, "/desired/machine");
    tu_del(req, "/current/machine");
    tu_del(req, "/desired/bootstrapConfig");
    tu_del(req, "/current/bootstrapConfig");
    struct answer a;
    call(&f->ctx, m, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live");
    hj_free(a.r);
    hj_free(req);
    /* ...but one half without the other cannot be shown unchanged */
    req = request(fx, m);
    tu_del(req, "/desired/machine");
    tu_del(req, "/current/bootstrapConfig");
    call(&f->ctx, m, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live; not covered, left to CAPI: "
                               "machine.spec, bootstrapConfig.spec");
    hj_free(a.r);
    hj_free(req);

    const enum hv_hook s = HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const char *sfx = "vsmt-memory-cpu-grow.json";
    expect_edit_failure(&f->ctx, s, sfx, "/desired/infrastructureMachineTemplate", NULL,
                        "request has no desired.infrastructureMachineTemplate");
    expect_edit_failure(&f->ctx, s, sfx, "/current/infrastructureMachineTemplate", NULL,
                        "request has no current.infrastructureMachineTemplate");
    expect_edit_failure(&f->ctx, s, sfx, "/desired/infrastructureMachineTemplate/kind", NULL,
                        "desired.infrastructureMachineTemplate has no kind");
    expect_edit_failure(&f->ctx, s, sfx, "/current/infrastructureMachineTemplate/spec", NULL,
                        "current.infrastructureMachineTemplate has no spec");
    /* a CanUpdateMachine body sent as a set request */
    expect_edit_failure(&f->ctx, s, fx, "/desired/machine/kind", "\"Machine\"",
                        "request has no desired.infrastructureMachineTemplate");
}

/* ---- settings --------------------------------------------------------------------------- */

static void expect_settings_failure(const struct hv_hooks_ctx *ctx, const char *settings,
                                    const char *msg)
{
    static const enum hv_hook hooks[] = {HV_HOOK_CAN_UPDATE_MACHINE, HV_HOOK_CAN_UPDATE_MACHINE_SET,
                                         HV_HOOK_UPDATE_MACHINE};
    for (size_t k = 0; k < 3; k++) {
        enum hv_hook h = hooks[k];
        hj *req = h == HV_HOOK_UPDATE_MACHINE           ? update_request("lvm-grow.json")
                  : h == HV_HOOK_CAN_UPDATE_MACHINE_SET ? request("vsmt-memory-cpu-grow.json", h)
                                                        : request("vsm-memory-grow.json", h);
        hj_obj_set_take(req, "settings", tu_json(settings));
        expect_failure(ctx, h, req, msg);
        hj_free(req);
    }
}

static void test_bad_settings(void **state)
{
    struct fx *f = *state;
    expect_settings_failure(&f->ctx, "{\"powerCycle\":\"Sometimes\"}",
                            "setting powerCycle has an invalid value (want IfNeeded|Never)");
    expect_settings_failure(&f->ctx, "{\"powerCycle\":\"never\"}",
                            "setting powerCycle has an invalid value (want IfNeeded|Never)");
    expect_settings_failure(&f->ctx, "{\"onUncoverable\":\"block\"}",
                            "setting onUncoverable has an invalid value (want Fallback|Block)");
    expect_settings_failure(&f->ctx, "{\"powerOffMode\":\"\"}",
                            "setting powerOffMode has an invalid value (want TrySoft|Soft|Hard)");
    expect_settings_failure(&f->ctx, "{\"liveTimeoutSeconds\":\"0\"}",
                            "setting liveTimeoutSeconds must be a whole number of seconds from 1 "
                            "to 86400");
    expect_settings_failure(&f->ctx, "{\"shutdownTimeoutSeconds\":\"10s\"}",
                            "setting shutdownTimeoutSeconds must be a whole number of seconds "
                            "from 1 to 86400");
    expect_settings_failure(&f->ctx, "{\"deadlineSeconds\":\"604801\"}",
                            "setting deadlineSeconds must be a whole number of seconds from 1 to "
                            "604800");
    expect_settings_failure(&f->ctx, "{\"deadlineSeconds\":\"\"}",
                            "setting deadlineSeconds must be a whole number of seconds from 1 to "
                            "604800");
    /* digits only: no sign, no space, no leading zero (strtol alone took all three) */
    static const char *const not_digits[] = {
        "{\"liveTimeoutSeconds\":\" 60\"}", "{\"liveTimeoutSeconds\":\"+60\"}",
        "{\"liveTimeoutSeconds\":\"060\"}", "{\"liveTimeoutSeconds\":\"60 \"}"};
    for (size_t k = 0; k < sizeof(not_digits) / sizeof(not_digits[0]); k++)
        expect_settings_failure(&f->ctx, not_digits[k],
                                "setting liveTimeoutSeconds must be a whole number of seconds "
                                "from 1 to 86400");
    expect_settings_failure(&f->ctx, "{\"liveTimeoutSeconds\":60}",
                            "setting liveTimeoutSeconds must be a string");
    expect_settings_failure(&f->ctx, "{\"powercycle\":\"Never\"}",
                            "unknown setting powercycle (known: powerCycle, onUncoverable, "
                            "powerOffMode, guestVerification, liveTimeoutSeconds, "
                            "shutdownTimeoutSeconds, deadlineSeconds)");
    expect_settings_failure(&f->ctx, "{\"guestVerification\":\"Require\"}",
                            "setting guestVerification has an invalid value (want "
                            "IfAvailable|Required|Off)");
    expect_settings_failure(&f->ctx, "[\"powerCycle\"]", "settings must be a map of strings");
    expect_settings_failure(&f->ctx, "\"powerCycle=Never\"", "settings must be a map of strings");
    /* several bad settings: the same one is named whatever their order */
    expect_settings_failure(&f->ctx, "{\"powerCycle\":\"x\",\"deadlineSeconds\":\"x\"}",
                            "setting deadlineSeconds must be a whole number of seconds from 1 to "
                            "604800");
    expect_settings_failure(&f->ctx, "{\"deadlineSeconds\":\"x\",\"powerCycle\":\"x\"}",
                            "setting deadlineSeconds must be a whole number of seconds from 1 to "
                            "604800");
    /* a bad setting next to good ones */
    expect_settings_failure(&f->ctx,
                            "{\"powerCycle\":\"Never\",\"onUncoverable\":\"Block\",\"zzz\":\"1\"}",
                            "unknown setting zzz (known: powerCycle, onUncoverable, powerOffMode, "
                            "guestVerification, liveTimeoutSeconds, shutdownTimeoutSeconds, "
                            "deadlineSeconds)");
}

static void test_settings_reach_the_plan(void **state)
{
    struct fx *f = *state;
    struct answer a;
    hj *req = request("vsm-disk-shrink.json", HV_HOOK_CAN_UPDATE_MACHINE);
    /* default Fallback: Success with a patch */
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live; not covered, left to CAPI: "
                               "infrastructureMachine.spec.diskGiB (disks cannot shrink)");
    hj *ops = decode_patch(a.r, "infrastructureMachinePatch");
    hj_free(ops);
    hj_free(a.r);
    /* Block from the request's settings */
    hj_obj_set_take(req, "settings", tu_json("{\"onUncoverable\":\"Block\"}"));
    expect_failure(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req,
                   "cannot update in place (onUncoverable=Block): "
                   "infrastructureMachine.spec.diskGiB (disks cannot shrink)");
    /* Block from the defaults, overridden by the request */
    f->ctx.defaults.on_uncoverable = HV_UNC_BLOCK;
    hj_obj_set_take(req, "settings", tu_json("{\"onUncoverable\":\"Fallback\"}"));
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_false(a.failure);
    hj_free(a.r);
    /* settings absent or null: the defaults */
    hj_obj_set_take(req, "settings", hj_new_null());
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_true(a.failure);
    hj_free(a.r);
    assert_true(hj_obj_del(req, "settings"));
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_true(a.failure);
    hj_free(a.r);
    /* the request did not change the defaults */
    assert_int_equal(f->ctx.defaults.on_uncoverable, HV_UNC_BLOCK);
    hj_free(req);

    /* powerCycle=Never from settings */
    f->ctx.defaults.on_uncoverable = HV_UNC_FALLBACK;
    req = request("vsm-shrink.json", HV_HOOK_CAN_UPDATE_MACHINE);
    hj_obj_set_take(req, "settings", tu_json("{\"powerCycle\":\"Never\"}"));
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_false(a.failure);
    assert_string_equal(
        a.msg,
        "nothing hvupdater can change in place; not covered, left to CAPI: "
        "infrastructureMachine.spec.memoryMiB (needs a power cycle and powerCycle is Never), "
        "infrastructureMachine.spec.numCPUs (needs a power cycle and powerCycle is Never)");
    assert_null(hj_get(a.r, "infrastructureMachinePatch"));
    hj_free(a.r);
    hj_free(req);
}

/* ---- CanUpdateMachine(Set) responses ---------------------------------------------------- */

static void test_can_update_machine_response(void **state)
{
    struct fx *f = *state;
    struct answer a;
    hj *req = request("vsm-memory-grow.json", HV_HOOK_CAN_UPDATE_MACHINE);
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live");
    /* exactly these members: no machine or bootstrap patch; affectsAvailability with it */
    assert_int_equal(a.r->n, 6);
    assert_true(hj_get(a.r, "affectsAvailability")->b);
    assert_non_null(hj_get(a.r, "infrastructureMachinePatch"));
    assert_null(hj_get(a.r, "machinePatch"));
    assert_null(hj_get(a.r, "bootstrapConfigPatch"));
    assert_string_equal(
        hj_get_str(hj_get(a.r, "infrastructureMachinePatch"), "patch"),
        "W3sib3AiOiJyZXBsYWNlIiwicGF0aCI6Ii9zcGVjL21lbW9yeU1pQiIsInZhbHVlIjo4MTkyfV0"
        "=");
    hj *ops = decode_patch(a.r, "infrastructureMachinePatch");
    tu_assert_dump(ops, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    hj_free(ops);
    hj_free(a.r);
    hj_free(req);

    /* a float desired value travels verbatim */
    req = request("vsm-float-memory.json", HV_HOOK_CAN_UPDATE_MACHINE);
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    ops = decode_patch(a.r, "infrastructureMachinePatch");
    tu_assert_dump(ops, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192.0}]");
    hj_free(ops);
    hj_free(a.r);
    hj_free(req);
}

static void test_can_update_machine_set_response(void **state)
{
    struct fx *f = *state;
    struct answer a;
    hj *req = request("vsmt-memory-cpu-grow.json", HV_HOOK_CAN_UPDATE_MACHINE_SET);
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE_SET, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    assert_null(hj_get(a.r, "infrastructureMachinePatch"));
    assert_null(hj_get(a.r, "machineSetPatch"));
    assert_null(hj_get(a.r, "bootstrapConfigTemplatePatch"));
    hj *ops = decode_patch(a.r, "infrastructureMachineTemplatePatch");
    tu_assert_dump(
        ops, "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/memoryMiB\",\"value\":8192},"
             "{\"op\":\"replace\",\"path\":\"/spec/template/spec/numCPUs\",\"value\":4}]");
    hj_free(ops);
    hj_free(a.r);
    hj_free(req);
}

static void test_can_update_declined_and_uncovered(void **state)
{
    struct fx *f = *state;
    struct answer a;
    f->ctx.defaults.on_uncoverable = HV_UNC_BLOCK;
    hj *req = request("unknown-kind.json", HV_HOOK_CAN_UPDATE_MACHINE);
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &a);
    assert_false(a.failure); /* declined is never a Failure, even under Block */
    assert_string_equal(a.msg, "declined: no hvupdater profile for FooMachine "
                               "infrastructure.cluster.x-k8s.io/v1beta1; CAPI decides without "
                               "hvupdater");
    assert_int_equal(a.r->n, 4);
    hj_free(a.r);
    hj_free(req);

    req = request("vsm-version-and-memory.json", HV_HOOK_CAN_UPDATE_MACHINE);
    expect_failure(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req,
                   "cannot update in place (onUncoverable=Block): machine.spec.version "
                   "(hvupdater changes hypervisor hardware only)");
    hj_free(req);

    f->ctx.defaults.on_uncoverable = HV_UNC_FALLBACK;
    req = request("vsmt-version.json", HV_HOOK_CAN_UPDATE_MACHINE_SET);
    call(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE_SET, req, &a);
    assert_false(a.failure);
    assert_string_equal(a.msg, "nothing hvupdater can change in place; not covered, left to "
                               "CAPI: machineSet.spec.template.spec.version");
    assert_null(hj_get(a.r, "infrastructureMachineTemplatePatch"));
    hj_free(a.r);
    hj_free(req);
}

/* affectsAvailability accompanies every covering patch: false only under powerCycle: Never,
 * where no power cycle can happen (CAPI then starts the update without a buffer Machine),
 * true otherwise (a live growth may fall back to a power cycle). No patch, no field. */
static void expect_affects(const struct hv_hooks_ctx *ctx, enum hv_hook h, hj *req,
                           const char *settings, int want)
{
    struct answer a;
    if (settings)
        hj_obj_set_take(req, "settings", tu_json(settings));
    call(ctx, h, req, &a);
    const hj *v = hj_get(a.r, "affectsAvailability");
    if (want < 0) {
        if (v)
            fail_msg("affectsAvailability present without a patch: %s", a.msg);
    } else {
        if (!v || v->type != HJ_BOOL)
            fail_msg("no boolean affectsAvailability in the answer \"%s\"", a.msg);
        assert_int_equal(v->b, want);
    }
    hj_free(a.r);
    hj_free(req);
}

static void test_affects_availability(void **state)
{
    struct fx *f = *state;
    enum hv_hook m = HV_HOOK_CAN_UPDATE_MACHINE, ms = HV_HOOK_CAN_UPDATE_MACHINE_SET;
    expect_affects(&f->ctx, ms, request("vsmt-memory-cpu-grow.json", ms), NULL, 1);
    expect_affects(&f->ctx, ms, request("vsmt-memory-cpu-grow.json", ms),
                   "{\"powerCycle\":\"Never\"}", 0);
    expect_affects(&f->ctx, m, request("vsm-memory-grow.json", m), NULL, 1);
    expect_affects(&f->ctx, m, request("vsm-memory-grow.json", m), "{\"powerCycle\":\"Never\"}", 0);
    /* a shrink: a power cycle under IfNeeded, nothing covered under Never */
    expect_affects(&f->ctx, ms, request("vsmt-shrink.json", ms), NULL, 1);
    expect_affects(&f->ctx, ms, request("vsmt-shrink.json", ms), "{\"powerCycle\":\"Never\"}", -1);
    /* nothing covered, declined, Failure: no field */
    expect_affects(&f->ctx, ms, request("vsmt-version.json", ms), NULL, -1);
    expect_affects(&f->ctx, m, request("unknown-kind.json", m), NULL, -1);
    expect_affects(&f->ctx, m, request("vsm-version-and-memory.json", m),
                   "{\"onUncoverable\":\"Block\"}", -1);
}

static void test_every_fixture_answers_well_formed(void **state)
{
    struct fx *f = *state;
    size_t n;
    char **names = tu_fixture_names(&n);
    assert_true(n > 0);
    for (int unc = 0; unc < 2; unc++) {
        f->ctx.defaults.on_uncoverable = unc ? HV_UNC_BLOCK : HV_UNC_FALLBACK;
        for (size_t k = 0; k < n; k++) {
            hj *probe = tu_fixture(names[k]);
            bool set = hj_get(hj_get(probe, "current"), "infrastructureMachineTemplate") != NULL;
            hj_free(probe);
            enum hv_hook h = set ? HV_HOOK_CAN_UPDATE_MACHINE_SET : HV_HOOK_CAN_UPDATE_MACHINE;
            hj *req = request(names[k], h);
            struct answer a;
            call(&f->ctx, h, req, &a);
            assert_true(a.msg[0] != '\0'); /* every answer says what it did */
            const char *pm =
                set ? "infrastructureMachineTemplatePatch" : "infrastructureMachinePatch";
            if (hj_get(a.r, pm)) {
                assert_false(a.failure);
                hj *ops = decode_patch(a.r, pm);
                assert_true(ops->n > 0);
                for (size_t j = 0; j < ops->n; j++) {
                    const char *op = hj_get_str(ops->items[j], "op");
                    const char *path = hj_get_str(ops->items[j], "path");
                    assert_non_null(op);
                    assert_true(!strcmp(op, "replace") || !strcmp(op, "add"));
                    assert_non_null(path);
                    const char *root = set ? "/spec/template/spec/" : "/spec/";
                    assert_true(strncmp(path, root, strlen(root)) == 0);
                    assert_non_null(hj_get(ops->items[j], "value"));
                }
                hj_free(ops);
            }
            /* the same request answers the same, byte for byte */
            bool fo1, fo2;
            size_t l1, l2;
            char *o1 = hv_hook_handle(&f->ctx, h, req, &fo1, NULL, 0, &l1);
            char *o2 = hv_hook_handle(&f->ctx, h, req, &fo2, NULL, 0, &l2);
            assert_string_equal(o1, o2);
            assert_int_equal(fo1, fo2);
            free(o1);
            free(o2);
            hj_free(a.r);
            hj_free(req);
        }
    }
    tu_free_names(names, n);
}

/* ---- UpdateMachine ---------------------------------------------------------------------- */

static void test_update_machine_without_backend(void **state)
{
    struct fx *f = *state;
    hj *req = update_request("lvm-grow.json");
    expect_failure(&f->ctx, HV_HOOK_UPDATE_MACHINE, req,
                   "no libvirt backend is configured in hvupdater");
    hj_free(req);
    req = update_request("vsm-memory-grow.json");
    expect_failure(&f->ctx, HV_HOOK_UPDATE_MACHINE, req,
                   "no vsphere backend is configured in hvupdater");
    hj_free(req);
}

static void test_update_machine_by_provider_id(void **state)
{
    struct fx *f = *state;
    struct answer a;
    f->ctx.update = stub_update;
    f->st.answer.failure = false;
    f->st.answer.retry_after_s = 30;
    snprintf(f->st.answer.message, sizeof(f->st.answer.message), "growing memory live");
    hj *req = update_request("lvm-grow.json");
    tu_set(req, "/desired/machine/spec/providerID", "\"libvirt://" LV_UUID "\"");
    hj_obj_set_take(req, "settings",
                    tu_json("{\"powerOffMode\":\"Hard\",\"liveTimeoutSeconds\":\"60\"}"));
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    assert_int_equal(f->st.calls, 1);
    assert_string_equal(f->st.kind, "LibvirtMachine");
    assert_string_equal(f->st.backend, "libvirt");
    assert_string_equal(f->st.ref.uuid, LV_UUID);
    assert_string_equal(f->st.ref.name, "");
    assert_true(f->st.hw.memory_mib == 2048);
    assert_int_equal(f->st.hw.cpus, 3);
    assert_int_equal(f->st.hw.cores_per_socket, -1);
    /* request settings over the defaults */
    assert_int_equal(f->st.s.power_off_mode, HV_POM_HARD);
    assert_int_equal(f->st.s.live_timeout_s, 60);
    assert_int_equal(f->st.s.power_cycle, HV_PC_IF_NEEDED);
    assert_int_equal(f->st.s.shutdown_timeout_s, 300);
    assert_false(a.failure);
    assert_string_equal(a.msg, "growing memory live");
    assert_int_equal(hj_get(a.r, "retryAfterSeconds")->i, 30);
    assert_int_equal(a.r->n, 5);
    hj_free(a.r);

    /* done */
    f->st.answer.retry_after_s = 0;
    f->st.answer.message[0] = '\0';
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    assert_false(a.failure);
    assert_null(hj_get(a.r, "message"));
    assert_int_equal(hj_get(a.r, "retryAfterSeconds")->i, 0);
    hj_free(a.r);

    /* a failed update: retryAfterSeconds is 0 whatever the engine put there */
    f->st.answer.failure = true;
    f->st.answer.retry_after_s = 45;
    snprintf(f->st.answer.message, sizeof(f->st.answer.message), "the VM was not found");
    expect_failure(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, "the VM was not found");
    assert_int_equal(f->st.calls, 3);
    hj_free(req);
}

/* machine_vm (the remediation hold, kube/mhc.h) hears which VM serves the request's Machine,
 * before the engine answers; a request whose VM cannot be found does not call it. */
struct seen_vm {
    int calls;
    char machine[300], backend[32], uuid[64];
};

static void stub_machine_vm(void *ctx, const hj *machine, const char *backend,
                            const struct hv_vm_ref *ref)
{
    struct seen_vm *v = ctx;
    const hj *md = hj_get(machine, "metadata");
    v->calls++;
    snprintf(v->machine, sizeof(v->machine), "%s/%s", hj_get_str(md, "namespace"),
             hj_get_str(md, "name"));
    snprintf(v->backend, sizeof(v->backend), "%s", backend);
    snprintf(v->uuid, sizeof(v->uuid), "%s", ref->uuid);
}

static void test_update_machine_tells_machine_vm(void **state)
{
    struct fx *f = *state;
    struct answer a;
    struct seen_vm v = {0};
    f->ctx.update = stub_update;
    f->ctx.machine_vm = stub_machine_vm;
    f->ctx.machine_vm_ctx = &v;
    f->st.answer.retry_after_s = 10;
    hj *req = update_request("lvm-grow.json");
    tu_set(req, "/desired/machine/spec/providerID", "\"libvirt://" LV_UUID "\"");
    tu_set(req, "/desired/machine/metadata/namespace", "\"team-a\"");
    tu_set(req, "/desired/machine/metadata/name", "\"web-0\"");
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    hj_free(a.r);
    assert_int_equal(v.calls, 1);
    assert_string_equal(v.machine, "team-a/web-0");
    assert_string_equal(v.backend, "libvirt");
    assert_string_equal(v.uuid, LV_UUID);
    /* no VM to name: not called */
    tu_set(req, "/desired/infrastructureMachine/kind", "\"OtherMachine\"");
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    hj_free(a.r);
    assert_int_equal(v.calls, 1);
    f->ctx.machine_vm = NULL;
    hj_free(req);
}

static void test_update_machine_by_name(void **state)
{
    struct fx *f = *state;
    struct answer a;
    f->ctx.update = stub_update;
    f->st.answer.retry_after_s = 10;
    hj *req = update_request("lvm-grow.json");
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    assert_int_equal(f->st.calls, 1);
    assert_string_equal(f->st.ref.uuid, "");
    assert_string_equal(f->st.ref.name, "hvt-dimm");
    assert_int_equal(hj_get(a.r, "retryAfterSeconds")->i, 10);
    hj_free(a.r);
    /* the infra spec's providerID counts when the Machine has none */
    tu_set(req, "/desired/infrastructureMachine/spec/providerID", "\"libvirt://" LV_UUID "\"");
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    assert_string_equal(f->st.ref.uuid, LV_UUID);
    hj_free(a.r);
    hj_free(req);
}

static void test_update_machine_vsphere(void **state)
{
    struct fx *f = *state;
    struct answer a;
    f->ctx.update = stub_update;
    hj *req = update_request("vsm-memory-cpu-grow.json");
    call(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &a);
    assert_int_equal(f->st.calls, 1);
    assert_string_equal(f->st.backend, "vsphere");
    assert_string_equal(f->st.ref.uuid, "4205c9f4-1d3e-4a5b-9c1d-0123456789ab");
    assert_string_equal(f->st.ref.server, "vcenter.example.com");
    assert_true(f->st.hw.memory_mib == 8192);
    assert_int_equal(f->st.hw.cpus, 4);
    assert_int_equal(f->st.hw.cores_per_socket, 1);
    hj_free(a.r);
    hj_free(req);
}

/* What each hook call's log line names: Machine, cluster, infra object and VM. */
static void test_who(void **state)
{
    struct fx *f = *state;
    f->ctx.update = stub_update;
    struct hv_hook_who w;
    bool failure;
    size_t len;
    hj *req = update_request("lvm-grow.json");
    tu_set(req, "/desired/machine/spec/providerID", "\"libvirt://" LV_UUID "\"");
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.machine, "default/cp-abc12");
    assert_string_equal(w.cluster, "c1");
    assert_string_equal(w.infra, "LibvirtMachine/hvt-dimm");
    assert_string_equal(w.vm, "(no host) uuid " LV_UUID);
    /* the only configured host, or how many it may be on */
    const char *one[] = {"qemu:///system"}, *two[] = {"qemu+tls://a/system", "qemu:///system"};
    f->ctx.libvirt_uris = one;
    f->ctx.n_libvirt_uris = 1;
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.vm, "qemu:///system uuid " LV_UUID);
    f->ctx.libvirt_uris = two;
    f->ctx.n_libvirt_uris = 2;
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.vm, "(one of 2 libvirt hosts) uuid " LV_UUID);
    f->ctx.n_libvirt_uris = 0;
    hj_free(req);
    /* by name (the built-in LibvirtMachine profile names no host) */
    req = request("lvm-grow.json", HV_HOOK_CAN_UPDATE_MACHINE);
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.machine, "default/cp-abc12");
    assert_string_equal(w.vm, "(no host) name hvt-dimm");
    hj_free(req);
    /* vSphere: the vCenter and the BIOS UUID */
    req = update_request("vsm-memory-cpu-grow.json");
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.vm, "vcenter.example.com uuid 4205c9f4-1d3e-4a5b-9c1d-0123456789ab");
    assert_true(!strncmp(w.infra, "VSphereMachine/", 15));
    hj_free(req);
    /* a template: no VM; discovery and broken requests: nothing */
    req = request("vsmt-memory-cpu-grow.json", HV_HOOK_CAN_UPDATE_MACHINE_SET);
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_CAN_UPDATE_MACHINE_SET, req, &failure, NULL, 0, &len,
                            &w));
    assert_true(!strncmp(w.infra, "VSphereMachineTemplate/", 23));
    assert_string_equal(w.vm, "");
    hj_free(req);
    req = tu_json("[1]");
    free(hv_hook_handle_who(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len, &w));
    assert_string_equal(w.machine, "");
    assert_string_equal(w.vm, "");
    hj_free(req);
}

static void test_update_machine_failures(void **state)
{
    struct fx *f = *state;
    const enum hv_hook u = HV_HOOK_UPDATE_MACHINE;
    f->ctx.update = stub_update;
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/machine/spec/providerID",
                        "\"libvirt://vm-1\"",
                        "cannot find the VM: providerID is not libvirt://<UUID>");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/infrastructureMachine/metadata/name",
                        NULL,
                        "cannot find the VM: no providerID of the form libvirt://<UUID> and no "
                        "metadata.name");
    expect_edit_failure(&f->ctx, u, "vsm-memory-grow.json", "/desired/infrastructureMachine/kind",
                        "\"VSphereMachineTemplate\"",
                        "no hvupdater profile for VSphereMachineTemplate "
                        "infrastructure.cluster.x-k8s.io/v1beta1");
    expect_edit_failure(
        &f->ctx, u, "unknown-kind.json", "/desired/infrastructureMachine/kind", "\"FooMachine\"",
        "no hvupdater profile for FooMachine infrastructure.cluster.x-k8s.io/v1beta1");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired", NULL, "request has no desired");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/infrastructureMachine", NULL,
                        "request has no desired.infrastructureMachine");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/infrastructureMachine/spec", NULL,
                        "desired.infrastructureMachine has no spec");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/infrastructureMachine/kind", NULL,
                        "desired.infrastructureMachine has no kind");
    expect_edit_failure(&f->ctx, u, "lvm-grow.json", "/desired/infrastructureMachine/apiVersion",
                        NULL, "desired.infrastructureMachine has no apiVersion");
    assert_int_equal(f->st.calls, 0); /* the engine never saw a bad request */

    /* UpdateMachine needs no current half and no Machine */
    hj *req = update_request("lvm-grow.json");
    tu_del(req, "/desired/machine");
    struct answer a;
    call(&f->ctx, u, req, &a);
    assert_false(a.failure);
    assert_int_equal(f->st.calls, 1);
    hj_free(a.r);
    hj_free(req);
}

static void test_message_out_optional(void **state)
{
    struct fx *f = *state;
    hj *req = update_request("lvm-grow.json");
    bool failure = false;
    size_t len = 0;
    char *out = hv_hook_handle(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len);
    assert_non_null(out);
    assert_true(failure);
    assert_int_equal(len, strlen(out));
    free(out);
    /* a short message buffer is truncated, not overrun */
    char small[8];
    out =
        hv_hook_handle(&f->ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, small, sizeof(small), &len);
    assert_string_equal(small, "no libv");
    free(out);
    hj_free(req);
}

/* hj_dump failing (out of memory) is not passed on: no field, false, no crash. */
static void test_put_patch_when_the_dump_fails(void **state)
{
    (void)state;
    hj *ops = hj_new_array();
    hj *r = hj_new_object();
    gen_alloc_fails = true;
    bool ok = hv_hook_put_patch(r, "p", ops);
    gen_alloc_fails = false;
    assert_false(ok);
    assert_null(hj_get(r, "p"));
    assert_true(hv_hook_put_patch(r, "p", ops));
    assert_non_null(hj_get(r, "p"));
    hj_free(r);
    hj_free(ops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_discovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discovery_failure_policy, setup, teardown),
        cmocka_unit_test(test_hook_names),
        cmocka_unit_test(test_put_patch_when_the_dump_fails),
        cmocka_unit_test_setup_teardown(test_envelope_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_can_update_missing_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settings_reach_the_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_can_update_machine_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_can_update_machine_set_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_can_update_declined_and_uncovered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_affects_availability, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_fixture_answers_well_formed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_who, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_without_backend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_by_provider_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_tells_machine_vm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_vsphere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_machine_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_out_optional, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
