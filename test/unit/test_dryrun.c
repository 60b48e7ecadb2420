/* test_dryrun.c: claims only what the provider accepts (kube/dryrun.h, hv_plan_hooks.admit):
 * the judge of a dry run's answer (a webhook's refusal, RBAC's 403, errors), the cache per
 * template pair with its worker driven here (unknown first, then the cached verdict without
 * a new API call, a refresh after its time), the Machine a MachineSet's dry run is tried on,
 * no client, and what CanUpdateMachine(Set) answer for each verdict (refused: not covered
 * with the webhook's reason, Fallback or Block; unchecked: covered and said so; unknown: a
 * retryable Failure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dryrun.h"
#include "hooks.h"
#include "testutil.h"

#define API "hooks.runtime.cluster.x-k8s.io/v1alpha1"
/* CAPV's refusal as the API server's Status carries it (inside a JSON string here), and the
 * reason hvupdater gives for it (the machine's name left out) */
#define CAPV_REFUSAL_JSON                                                                          \
    "admission webhook \\\"validation.vspheremachine.infrastructure.x-k8s.io\\\" denied the "      \
    "request: VSphereMachine.infrastructure.cluster.x-k8s.io \\\"lm-a\\\" is invalid: spec: "      \
    "Forbidden: cannot be modified"
#define CAPV_REASON                                                                                \
    "admission webhook \"validation.vspheremachine.infrastructure.x-k8s.io\" denied the request: " \
    "VSphereMachine.infrastructure.cluster.x-k8s.io \"*\" is invalid: spec: Forbidden: "           \
    "cannot be modified"

/* ---- the judge -------------------------------------------------------------------------- */

static enum hv_dryrun_verdict judge(int http, const char *status_json, char *why, size_t cap)
{
    hj *st = status_json ? tu_json(status_json) : NULL;
    enum hv_dryrun_verdict v = hv_dryrun_judge(http, st, "vspheremachines", "lm-a", why, cap);
    hj_free(st);
    return v;
}

static void test_judge(void **state)
{
    (void)state;
    char why[400];
    assert_int_equal(judge(200, NULL, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    assert_string_equal(why, "");
    /* CAPV's refusal (controller-runtime answers an Invalid error with 422) */
    assert_int_equal(
        judge(422,
              "{\"kind\":\"Status\",\"reason\":\"Invalid\",\"message\":\"" CAPV_REFUSAL_JSON "\"}",
              why, sizeof(why)),
        HV_DRYRUN_REFUSED);
    assert_string_equal(why, CAPV_REASON);
    /* admission.Denied answers 403: a webhook's, not RBAC's */
    assert_int_equal(judge(403,
                           "{\"message\":\"admission webhook \\\"x\\\" denied the request: no\\n"
                           "\\tmemory  changes\"}",
                           why, sizeof(why)),
                     HV_DRYRUN_REFUSED);
    assert_string_equal(why, "admission webhook \"x\" denied the request: no memory changes");
    /* RBAC */
    assert_int_equal(judge(403,
                           "{\"message\":\"vspheremachines.infrastructure.cluster.x-k8s.io "
                           "\\\"lm-a\\\" is forbidden: User \\\"system:serviceaccount:h:h\\\" "
                           "cannot patch resource\"}",
                           why, sizeof(why)),
                     HV_DRYRUN_UNCHECKED);
    assert_string_equal(why, "hvupdater may not patch vspheremachines (HTTP 403)");
    assert_int_equal(judge(401, NULL, why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    assert_int_equal(judge(404, "{}", why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    assert_string_equal(why, "no such vspheremachines to try it on (HTTP 404)");
    /* CRD validation, no message: the reason */
    assert_int_equal(judge(422, "{\"reason\":\"Invalid\"}", why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_string_equal(why, "Invalid");
    /* a message of white space alone: the reason, else none (never an empty reason) */
    assert_int_equal(judge(422, "{\"message\":\" \\t \",\"reason\":\"Invalid\"}", why, sizeof(why)),
                     HV_DRYRUN_REFUSED);
    assert_string_equal(why, "Invalid");
    assert_int_equal(judge(400, "{\"message\":\"\\n\"}", why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_string_equal(why, "no reason given");
    assert_int_equal(judge(422, NULL, why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_string_equal(why, "no reason given");
    assert_int_equal(judge(500, "{\"message\":\"failed calling webhook\"}", why, sizeof(why)),
                     HV_DRYRUN_ERROR);
    assert_string_equal(why, "the API server answered HTTP 500");
    assert_int_equal(judge(-1, NULL, why, sizeof(why)), HV_DRYRUN_ERROR);
    assert_string_equal(why, "no answer from the API server");
    /* a long reason is cut, not inside a UTF-8 sequence */
    char big[700] = "{\"message\":\"x";
    size_t at = strlen(big);
    for (int i = 0; i < 119; i++, at += 2)
        memcpy(big + at, "\xc3\xa9", 2); /* 238 bytes of é */
    memcpy(big + at, "\xc3\xa9\xc3\xa9\"}", 7);
    assert_int_equal(judge(422, big, why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_int_equal(strlen(why), 239); /* x and 119 of 120 */
    /* a whole sequence at the end stays (fuzz_kube: it was dropped as if cut) */
    assert_int_equal(judge(422, "{\"message\":\"cannot be modified \xc3\xa9\"}", why, sizeof(why)),
                     HV_DRYRUN_REFUSED);
    assert_string_equal(why, "cannot be modified \xc3\xa9");
    assert_int_equal(judge(422, "{\"message\":\"no \xe2\x82\xac\"}", why, sizeof(why)),
                     HV_DRYRUN_REFUSED);
    assert_string_equal(why, "no \xe2\x82\xac");
    /* cut inside a sequence after a space: neither the sequence's start nor the space stays */
    memset(big, 0, sizeof(big));
    memcpy(big, "{\"message\":\"", 12);
    memset(big + 12, 'y', 238);
    memcpy(big + 250, " \xe2\x82\xac\"}", 7);
    assert_int_equal(judge(422, big, why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_int_equal(strlen(why), 238);
    assert_int_equal(why[237], 'y');
    char plural[64];
    hv_dryrun_plural("VSphereMachine", plural, sizeof(plural));
    assert_string_equal(plural, "vspheremachines");
    hv_dryrun_plural("Bad/Kind", plural, sizeof(plural));
    assert_string_equal(plural, "");
}

/* ---- the fake API server ---------------------------------------------------------------- */

struct fake {
    int lists, patches;
    int list_status;
    int patch_status;
    const char *patch_answer; /* Status JSON of an error answer */
    char last_path[600], last_patch[600];
    int64_t now;
};

static int f_list(void *ctx, const char *path, const char *cont, hj **out, char *err, size_t errlen)
{
    struct fake *f = ctx;
    (void)err;
    (void)errlen;
    f->lists++;
    assert_string_equal(path, "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines");
    *out = NULL;
    if (f->list_status != 200)
        return f->list_status;
    /* two pages: another set's Machine and one being deleted, then two of md-0-x */
    if (!cont) {
        *out = tu_json(
            "{\"metadata\":{\"continue\":\"p2\"},\"items\":["
            "{\"metadata\":{\"name\":\"m-0\",\"labels\":{\"cluster.x-k8s.io/set-name\":\"other\"}},"
            "\"spec\":{\"infrastructureRef\":{\"kind\":\"VSphereMachine\",\"name\":\"lm-0\"}}},"
            "{\"metadata\":{\"name\":\"m-1\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\","
            "\"labels\":{\"cluster.x-k8s.io/set-name\":\"md-0-x\"}},"
            "\"spec\":{\"infrastructureRef\":{\"kind\":\"VSphereMachine\",\"name\":\"lm-1\"}}}]}");
        return 200;
    }
    assert_string_equal(cont, "p2");
    *out = tu_json(
        "{\"metadata\":{},\"items\":["
        "{\"metadata\":{\"name\":\"m-b\",\"labels\":{\"cluster.x-k8s.io/set-name\":\"md-0-x\"}},"
        "\"spec\":{\"infrastructureRef\":{\"kind\":\"VSphereMachine\",\"name\":\"lm-b\"}}},"
        "{\"metadata\":{\"name\":\"m-a\",\"ownerReferences\":[{\"kind\":\"MachineSet\","
        "\"name\":\"md-0-x\"}]},"
        "\"spec\":{\"infrastructureRef\":{\"kind\":\"VSphereMachine\",\"name\":\"lm-a\"}}}]}");
    return 200;
}

static int f_dry_patch(void *ctx, const char *path, const char *patch, hj **status, char *err,
                       size_t errlen)
{
    struct fake *f = ctx;
    (void)err;
    (void)errlen;
    f->patches++;
    snprintf(f->last_path, sizeof(f->last_path), "%s", path);
    snprintf(f->last_patch, sizeof(f->last_patch), "%s", patch);
    *status = f->patch_answer ? tu_json(f->patch_answer) : NULL;
    return f->patch_status;
}

static int64_t f_now(void *ctx)
{
    return ((struct fake *)ctx)->now;
}

static struct hv_dryrun *new_driven(struct fake *f)
{
    struct hv_dryrun_cfg c = {.io = {.ctx = f, .list = f_list, .dry_patch = f_dry_patch},
                              .drive = true,
                              .now_ms = f_now,
                              .now_ctx = f};
    struct hv_dryrun *d = hv_dryrun_new(&c);
    assert_non_null(d);
    return d;
}

static enum hv_dryrun_verdict ask_set(struct hv_dryrun *d, const char *des, int mem, char *why,
                                      size_t cap)
{
    char text[128];
    snprintf(text, sizeof(text), "{\"spec\":{\"memoryMiB\":%d}}", mem);
    hj *patch = tu_json(text);
    struct hv_dryrun_req r = {.machine_set = true,
                              .ns = "default",
                              .owner = "md-0-x",
                              .api_version = "infrastructure.cluster.x-k8s.io/v1beta1",
                              .kind = "VSphereMachineTemplate",
                              .cur_name = "md-0",
                              .des_name = des,
                              .patch = patch};
    enum hv_dryrun_verdict v = hv_dryrun_ask(d, &r, why, cap);
    hj_free(patch);
    return v;
}

static void test_cache_per_template_pair(void **state)
{
    (void)state;
    struct fake f = {.list_status = 200, .patch_status = 422, .now = 1000};
    f.patch_answer = "{\"kind\":\"Status\",\"message\":\"" CAPV_REFUSAL_JSON "\"}";
    struct hv_dryrun *d = new_driven(&f);
    char why[400];
    /* unknown: answered at once, nothing asked on the hook's thread */
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_PENDING);
    assert_int_equal(f.lists + f.patches, 0);
    assert_int_equal(hv_dryrun_pass(d), 1);
    /* tried on the MachineSet's first Machine by name that is not being deleted */
    assert_int_equal(f.lists, 2);
    assert_int_equal(f.patches, 1);
    assert_string_equal(f.last_path, "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/"
                                     "default/vspheremachines/lm-a");
    assert_string_equal(f.last_patch, "{\"spec\":{\"memoryMiB\":8192}}");
    /* cached: the same answer, no API call */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_REFUSED);
        assert_string_equal(why, CAPV_REASON);
    }
    assert_int_equal(hv_dryrun_pass(d), 0);
    assert_int_equal(f.patches, 1);
    /* another pair is another question */
    assert_int_equal(ask_set(d, "md-2", 8192, why, sizeof(why)), HV_DRYRUN_PENDING);
    f.patch_status = 200;
    assert_int_equal(hv_dryrun_pass(d), 1);
    assert_int_equal(ask_set(d, "md-2", 8192, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    assert_int_equal(hv_dryrun_cached(d), 2);
    /* after its time the answer is asked again; the old one stands meanwhile */
    f.now += (int64_t)HV_DRYRUN_TTL_S * 1000;
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_REFUSED);
    assert_int_equal(hv_dryrun_pass(d), 1);
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    hv_dryrun_free(d);
}

static void test_unchecked_and_errors(void **state)
{
    (void)state;
    char why[400];
    /* RBAC: patch not granted */
    struct fake f = {.list_status = 200, .patch_status = 403, .now = 1};
    f.patch_answer = "{\"message\":\"vspheremachines is forbidden: cannot patch\"}";
    struct hv_dryrun *d = new_driven(&f);
    ask_set(d, "md-1", 8192, why, sizeof(why));
    hv_dryrun_pass(d);
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    assert_string_equal(why, "hvupdater may not patch vspheremachines (HTTP 403)");
    /* unchecked is kept a shorter time: RBAC may be fixed */
    f.now += (int64_t)HV_DRYRUN_UNCHECKED_S * 1000;
    f.patch_status = 200;
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    hv_dryrun_pass(d);
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    /* listing Machines not granted */
    f.list_status = 403;
    ask_set(d, "md-3", 8192, why, sizeof(why));
    hv_dryrun_pass(d);
    assert_int_equal(ask_set(d, "md-3", 8192, why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    assert_string_equal(why, "hvupdater may not list Machines (HTTP 403)");
    /* the API server down: a retryable error, asked again at the next call */
    f.list_status = 503;
    int before = f.lists;
    ask_set(d, "md-4", 8192, why, sizeof(why));
    hv_dryrun_pass(d);
    assert_int_equal(ask_set(d, "md-4", 8192, why, sizeof(why)), HV_DRYRUN_ERROR);
    assert_string_equal(why, "the API server answered HTTP 503");
    assert_int_equal(hv_dryrun_pass(d), 1);
    assert_int_equal(f.lists, before + 2);
    hv_dryrun_free(d);

    /* no Kubernetes client at all */
    struct hv_dryrun_cfg c = {.no_client = "no kubernetes.server and no KUBERNETES_SERVICE_HOST "
                                           "(not in a pod)"};
    d = hv_dryrun_new(&c);
    assert_non_null(d);
    assert_int_equal(ask_set(d, "md-1", 8192, why, sizeof(why)), HV_DRYRUN_UNCHECKED);
    assert_string_equal(why, "no Kubernetes client: no kubernetes.server and no "
                             "KUBERNETES_SERVICE_HOST (not in a pod)");
    hv_dryrun_free(d);
}

static void test_machine_tried_itself(void **state)
{
    (void)state;
    struct fake f = {.patch_status = 200, .now = 1};
    struct hv_dryrun *d = new_driven(&f);
    char why[400];
    hj *patch = tu_json("{\"spec\":{\"memoryMiB\":8192}}");
    struct hv_dryrun_req r = {.ns = "default",
                              .api_version = "infrastructure.cluster.x-k8s.io/v1beta1",
                              .kind = "VSphereMachine",
                              .cur_name = "cp-abc12",
                              .des_name = "cp-abc12",
                              .patch = patch};
    assert_int_equal(hv_dryrun_ask(d, &r, why, sizeof(why)), HV_DRYRUN_PENDING);
    hv_dryrun_pass(d);
    assert_int_equal(hv_dryrun_ask(d, &r, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    assert_int_equal(f.lists, 0);
    assert_string_equal(f.last_path, "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/"
                                     "default/vspheremachines/cp-abc12");
    hj_free(patch);
    hv_dryrun_free(d);
}

/* The worker thread: a first question waits for its answer (bounded by wait_ms, here far
 * above what a fake takes), and the thread stops with hv_dryrun_free. */
static void test_thread(void **state)
{
    (void)state;
    struct fake f = {.patch_status = 200};
    struct hv_dryrun_cfg c = {.io = {.ctx = &f, .list = f_list, .dry_patch = f_dry_patch},
                              .wait_ms = 60000};
    struct hv_dryrun *d = hv_dryrun_new(&c);
    assert_non_null(d);
    char why[400];
    hj *patch = tu_json("{\"spec\":{\"memoryMiB\":8192}}");
    struct hv_dryrun_req r = {.ns = "default",
                              .api_version = "infrastructure.cluster.x-k8s.io/v1beta1",
                              .kind = "VSphereMachine",
                              .cur_name = "cp-abc12",
                              .patch = patch};
    assert_int_equal(hv_dryrun_ask(d, &r, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    assert_int_equal(hv_dryrun_ask(d, &r, why, sizeof(why)), HV_DRYRUN_ACCEPTED);
    hv_dryrun_free(d);
    assert_int_equal(f.patches, 1);
    hj_free(patch);
}

/* ---- what the hooks answer -------------------------------------------------------------- */

struct admit_fake {
    int calls;
    int verdict;
    const char *why;
    struct hv_admit_ask seen;
    char patch[300];
};

static int fake_admit(void *ctx, const struct hv_admit_ask *a, char *why, size_t whylen)
{
    struct admit_fake *f = ctx;
    f->calls++;
    f->seen = *a;
    char *t = hj_dump(a->patch, NULL);
    snprintf(f->patch, sizeof(f->patch), "%s", t);
    free(t);
    snprintf(why, whylen, "%s", f->why ? f->why : "");
    return f->verdict;
}

struct hook_answer {
    bool failure;
    char msg[1100];
    bool patched;
};

static void call(enum hv_hook h, const char *fixture, int on_uncoverable, struct admit_fake *af,
                 struct hook_answer *out)
{
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    struct hv_plan_hooks ph = {.admit = fake_admit, .admit_ctx = af};
    struct hv_hooks_ctx ctx = {.profiles = &ps, .plan_hooks = &ph, .timeout_s = 10};
    hv_settings_default(&ctx.defaults);
    ctx.defaults.on_uncoverable = on_uncoverable;
    hj *req = tu_fixture(fixture);
    hj_obj_set_take(req, "apiVersion", hj_new_string(API));
    hj_obj_set_take(req, "kind",
                    hj_new_string(h == HV_HOOK_CAN_UPDATE_MACHINE ? "CanUpdateMachineRequest"
                                                                  : "CanUpdateMachineSetRequest"));
    size_t len;
    char *text = hv_hook_handle(&ctx, h, req, &out->failure, out->msg, sizeof(out->msg), &len);
    char e[128];
    hj *r = hj_parse(text, len, e, sizeof(e));
    assert_non_null(r);
    out->patched =
        hj_get(r, "infrastructureMachineTemplatePatch") || hj_get(r, "infrastructureMachinePatch");
    hj_free(r);
    free(text);
    hj_free(req);
    hv_profiles_free(&ps);
}

static void test_hooks_answer_by_verdict(void **state)
{
    (void)state;
    struct hook_answer a;
    struct admit_fake af = {.verdict = HV_ADMIT_ACCEPTED};
    /* accepted: covered as before, the question as the dry run needs it */
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_false(a.failure);
    assert_true(a.patched);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    assert_int_equal(af.calls, 1);
    assert_true(af.seen.machine_set);
    assert_string_equal(af.patch, "{\"spec\":{\"memoryMiB\":8192,\"numCPUs\":4}}");

    /* refused, Fallback: nothing covered, the webhook's reason said; CAPI replaces */
    af.verdict = HV_ADMIT_REFUSED;
    af.why = CAPV_REASON;
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_false(a.failure);
    assert_false(a.patched);
    assert_string_equal(a.msg, "nothing hvupdater can change in place; not covered, left to CAPI: "
                               "infrastructureMachineTemplate.spec.template.spec.memoryMiB (the "
                               "provider refuses the change: " CAPV_REASON
                               "), infrastructureMachineTemplate.spec.template.spec.numCPUs (the "
                               "provider refuses the change: " CAPV_REASON ")");
    /* refused, Block: blocked */
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_BLOCK, &af, &a);
    assert_true(a.failure);
    assert_false(a.patched);
    assert_string_equal(a.msg, "cannot update in place (onUncoverable=Block): "
                               "infrastructureMachineTemplate.spec.template.spec.memoryMiB (the "
                               "provider refuses the change: " CAPV_REASON
                               "); infrastructureMachineTemplate.spec.template.spec.numCPUs (the "
                               "provider refuses the change: " CAPV_REASON ")");

    /* unchecked (no access): covered, and the message says the claim is unchecked */
    af.verdict = HV_ADMIT_UNCHECKED;
    af.why = "hvupdater may not patch vspheremachines (HTTP 403)";
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_false(a.failure);
    assert_true(a.patched);
    assert_string_equal(a.msg, "memoryMiB 4096->8192 live; numCPUs 2->4 live (not checked with the "
                               "provider: hvupdater may not patch vspheremachines (HTTP 403))");

    /* unknown yet: a retryable Failure, no claim */
    af.verdict = HV_ADMIT_PENDING;
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_true(a.failure);
    assert_false(a.patched);
    assert_string_equal(a.msg, "still asking the API server whether the provider accepts the "
                               "change; retry");
    af.verdict = HV_ADMIT_ERROR;
    af.why = "the API server answered HTTP 503";
    call(HV_HOOK_CAN_UPDATE_MACHINE_SET, "vsmt-memory-cpu-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_true(a.failure);
    assert_string_equal(a.msg, "cannot ask the API server whether the provider accepts the change: "
                               "the API server answered HTTP 503; retry");

    /* CanUpdateMachine: the Machine's own infra machine */
    af.verdict = HV_ADMIT_REFUSED;
    af.why = "no";
    af.calls = 0;
    call(HV_HOOK_CAN_UPDATE_MACHINE, "vsm-memory-grow.json", HV_UNC_FALLBACK, &af, &a);
    assert_int_equal(af.calls, 1);
    assert_false(af.seen.machine_set);
    assert_false(a.failure);
    assert_false(a.patched);
    assert_non_null(strstr(a.msg, "infrastructureMachine.spec.memoryMiB (the provider refuses the "
                                  "change: no)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_cache_per_template_pair),
        cmocka_unit_test(test_unchecked_and_errors),
        cmocka_unit_test(test_machine_tried_itself),
        cmocka_unit_test(test_thread),
        cmocka_unit_test(test_hooks_answer_by_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
