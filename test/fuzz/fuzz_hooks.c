/* fuzz_hooks.c: libFuzzer target for what a request body reaches in hvupdater.
 *
 * The input is parsed with hj_parse in a request arena (as server.c does with a body), on the
 * heap, and by yajl alone (hj_parse_yajl, the reference of hj_parse's own reader of the common
 * case): all three must agree (tree, printed the same, or error message). Then:
 * - the tree must print and re-parse to an equal tree (hj_dump / hj_parse / hj_equal), a
 *   clone must equal it, and each object member must be found by a lookup of its own key;
 * - a JSON object goes to hv_hook_handle for each of the four hooks, with two hooks contexts
 *   made from hv_config_default: no backend (update == NULL, no plan hooks) and stub engine
 *   functions. Every answer must be a JSON object with the right kind and status, and every
 *   patch it holds must be base64 of a JSON Patch that applies to the request's current object
 *   (CAPI treats a patch that does not apply as an error);
 * - a JSON array is applied as a JSON Patch (hv_jsonpatch_apply) to a copy of a fixed document.
 * A broken invariant aborts, which libFuzzer reports as a crash with the input saved.
 */
#include "base64.h"
#include "config.h"
#include "hooks.h"
#include "json.h"
#include "jsonpatch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct hv_config cfg;
static struct hv_hooks_ctx ctx_plain, ctx_stub;
static hj *fixed_doc;

static const char fixed_text[] =
    "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"VSphereMachine\","
    "\"metadata\":{\"name\":\"cp-abc12\",\"namespace\":\"default\",\"labels\":{\"a/b\":\"c\"},"
    "\"annotations\":{\"x~y\":\"1\"}},\"spec\":{\"server\":\"vcenter.example.com\","
    "\"numCPUs\":2,\"numCoresPerSocket\":1,\"memoryMiB\":4096,\"diskGiB\":25,"
    "\"network\":{\"devices\":[{\"networkName\":\"VM Network\",\"dhcp4\":true},"
    "{\"networkName\":\"b\",\"ipAddrs\":[\"10.0.0.2/24\"]}]},\"tags\":[],\"f\":4096.0,"
    "\"n\":null,\"t\":{\"template\":{\"spec\":{\"memoryMiB\":1024}}}}}";

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_hooks: invariant broken: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

/* Stub engine: answers from the desired hardware only, so results vary with the input. */
static void stub_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        const struct hv_hw *desired, const struct hv_settings *s,
                        struct hv_update_result *out)
{
    memset(out, 0, sizeof(*out));
    if (desired->memory_mib > 0 && desired->memory_mib % 3 == 0) {
        out->failure = true;
        snprintf(out->message, sizeof(out->message), "stub failure for %s", ref->name);
    } else {
        out->retry_after_s = desired->cpus > 0 ? desired->cpus % 7 : 0;
        snprintf(out->message, sizeof(out->message), "stub %s %s/%s", p->backend, ref->server,
                 ref->uuid);
    }
}

static int stub_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                          char *why, size_t whylen)
{
    if (ref->name[0] == 'x') {
        snprintf(why, whylen, "stub: no connection for %s", ref->server);
        return 0;
    }
    return 1;
}

static int stub_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    if (ref->name[0] == 'y') {
        snprintf(why, whylen, "stub: host unreachable");
        return -1;
    }
    for (int f = 0; f < HV_F_COUNT; f++) {
        plan[f].how = (desired->memory_mib + f) % 2 ? HV_HOW_LIVE : HV_HOW_COLD;
        snprintf(plan[f].method, sizeof(plan[f].method), "%s", f ? "hot-add" : "");
        snprintf(plan[f].reason, sizeof(plan[f].reason), "stub reason %d", f);
    }
    return 0;
}

static const struct hv_plan_hooks stub_plan_hooks = {
    .ctx = NULL, .available = stub_available, .probe = stub_probe};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[256];
    hv_config_default(&cfg);
    ctx_plain = (struct hv_hooks_ctx){
        .profiles = &cfg.profiles,
        .defaults = cfg.defaults,
        .plan_hooks = NULL,
        .update = NULL,
        .timeout_s = cfg.handler_timeout_s,
    };
    ctx_stub = ctx_plain;
    ctx_stub.plan_hooks = &stub_plan_hooks;
    ctx_stub.update = stub_update;
    fixed_doc = hj_parse(fixed_text, sizeof(fixed_text) - 1, err, sizeof(err));
    if (!fixed_doc)
        fail("fixed document", err);
    return 0;
}

/* Every member of every object is what a lookup by its own key finds (keys are unique). */
static void check_keys(const hj *v, int depth)
{
    if (depth > HJ_MAX_DEPTH + 1)
        fail("tree deeper than HJ_MAX_DEPTH", NULL);
    if (v->type != HJ_OBJECT && v->type != HJ_ARRAY)
        return;
    for (size_t k = 0; k < v->n; k++) {
        if (v->type == HJ_OBJECT && hj_get(v, v->keys[k]) != v->items[k])
            fail("object member not found by its own key", v->keys[k]);
        check_keys(v->items[k], depth + 1);
    }
}

static void check_roundtrip(const hj *doc)
{
    check_keys(doc, 0);
    char err[256];
    size_t len;
    char *text = hj_dump(doc, &len);
    if (!text)
        fail("hj_dump returned NULL", NULL);
    if (strlen(text) != len)
        fail("hj_dump length", text);
    hj *again = hj_parse(text, len, err, sizeof(err));
    if (!again)
        fail("hj_dump output does not parse", err);
    if (!hj_equal(doc, again))
        fail("re-parsed tree differs", text);
    hj *copy = hj_clone(doc);
    if (!hj_equal(doc, copy))
        fail("clone differs", text);
    hj_free(copy);
    hj_free(again);
    free(text);
}

/* The answer's patch field must be base64 of a JSON Patch that applies to the current object. */
static void check_patch(const hj *ans, const char *field, const hj *req, const char *current_name)
{
    const hj *p = hj_get(ans, field);
    if (!p)
        return;
    const char *type = hj_get_str(p, "patchType"), *b64 = hj_get_str(p, "patch");
    if (!type || strcmp(type, "JSONPatch") || !b64)
        fail("patch without patchType JSONPatch or patch", field);
    size_t n;
    char err[256];
    char *text = hv_b64_decode(b64, strlen(b64), &n);
    if (!text)
        fail("patch is not base64", b64);
    hj *ops = hj_parse(text, n, err, sizeof(err));
    if (!ops || ops->type != HJ_ARRAY)
        fail("patch is not a JSON array", text);
    const hj *cur = hj_get(hj_get(req, "current"), current_name);
    if (!cur)
        fail("patch for a request without a current object", field);
    hj *doc = hj_clone(cur);
    if (hv_jsonpatch_apply(&doc, ops, err, sizeof(err)) < 0)
        fail("patch does not apply to the current object", err);
    /* each op copies the desired value at its path */
    const hj *des = hj_get(hj_get(req, "desired"), current_name);
    for (size_t k = 0; k < ops->n; k++) {
        const char *path = hj_get_str(ops->items[k], "path");
        if (!path || !hj_equal(hj_ptr(doc, path), hj_ptr(des, path)))
            fail("patched value differs from desired", path ? path : "(no path)");
    }
    hj_free(doc);
    hj_free(ops);
    free(text);
}

static void check_answer(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req)
{
    static const char *const kinds[] = {"DiscoveryResponse", "CanUpdateMachineResponse",
                                        "CanUpdateMachineSetResponse", "UpdateMachineResponse"};
    bool failure = false;
    size_t len = 0;
    char msg[1024], err[256];
    char *out = hv_hook_handle(ctx, h, req, &failure, msg, sizeof(msg), &len);
    if (!out)
        fail("hv_hook_handle returned NULL", hv_hook_name(h));
    hj *ans = hj_parse(out, len, err, sizeof(err));
    if (!ans || ans->type != HJ_OBJECT)
        fail("answer is not a JSON object", out);
    const char *kind = hj_get_str(ans, "kind"), *status = hj_get_str(ans, "status");
    if (!kind || strcmp(kind, kinds[h]))
        fail("answer kind", out);
    if (!status || strcmp(status, failure ? "Failure" : "Success"))
        fail("answer status", out);
    if (failure && !hj_get_str(ans, "message"))
        fail("Failure without a message", out);
    if (h == HV_HOOK_UPDATE_MACHINE) {
        const hj *ra = hj_get(ans, "retryAfterSeconds");
        if (!ra || ra->type != HJ_INT || ra->i < 0 || ra->i > INT32_MAX)
            fail("retryAfterSeconds", out);
    } else if (h == HV_HOOK_CAN_UPDATE_MACHINE) {
        check_patch(ans, "infrastructureMachinePatch", req, "infrastructureMachine");
    } else if (h == HV_HOOK_CAN_UPDATE_MACHINE_SET) {
        check_patch(ans, "infrastructureMachineTemplatePatch", req,
                    "infrastructureMachineTemplate");
    }
    hj_free(ans);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], herr[256];
    /* The heap parse and the request-arena parse (what serve does) must agree exactly. */
    hj *heap = hj_parse((const char *)data, size, herr, sizeof(herr));
    struct hj_arena arena;
    hj_arena_begin(&arena);
    hj *doc = hj_parse((const char *)data, size, err, sizeof(err));
    if (!heap != !doc || (heap && !hj_equal(heap, doc)) || (!doc && strcmp(err, herr)))
        abort();
    /* ... and yajl alone, the reference of hj_parse's own reader of the common case: the same
     * tree, printed byte for byte the same, or the same message */
    char rerr[256];
    hj *ref = hj_parse_yajl((const char *)data, size, rerr, sizeof(rerr));
    if (!ref != !heap || (!ref && strcmp(rerr, herr)))
        fail("hj_parse and yajl alone disagree on whether it parses", rerr);
    if (ref) {
        size_t la, lb;
        char *a = hj_dump(ref, &la), *b = hj_dump(heap, &lb);
        if (!hj_equal(ref, heap) || la != lb || memcmp(a, b, la))
            fail("hj_parse and yajl alone build different trees", a);
        free(a);
        free(b);
        hj_free(ref);
    }
    hj_free(heap);
    if (!doc) {
        hj_arena_end(&arena);
        return 0;
    }
    check_roundtrip(doc);
    if (doc->type == HJ_OBJECT) {
        for (int h = 0; h < HV_HOOK_COUNT; h++) {
            check_answer(&ctx_plain, (enum hv_hook)h, doc);
            check_answer(&ctx_stub, (enum hv_hook)h, doc);
        }
    } else if (doc->type == HJ_ARRAY) {
        hj *target = hj_clone(fixed_doc);
        if (hv_jsonpatch_apply(&target, doc, err, sizeof(err)) == 0)
            check_roundtrip(target);
        hj_free(target);
    }
    hj_free(doc);
    hj_arena_end(&arena);
    return 0;
}
