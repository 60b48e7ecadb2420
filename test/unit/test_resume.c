/* test_resume.c: issue 28 item 5, the API server's part. A power cycle the engine's scan finds
 * in flight (a record on a VM, no call behind it) is carried on with the machine check on only
 * when the record names the Machine of the checked call that began it and the API server
 * confirms it: the Machine with that uid, marked by CAPI as being updated in place, whose
 * infrastructureRef is the record's infra machine, which is marked too, finds this VM and asks
 * for the record's hardware. Refused (gone, another uid, not updating, another infra machine,
 * another VM, another spec, no Machine in the record): no slot, no look, no step, no write.
 * API server unreachable: the same now, and the scan is tried again, which carries it on once
 * the API server confirms. Without the machine check: carried on as before.
 *
 * The parts: the record's "machine" (oprecord.c), the hooks giving a checked call's Machine to
 * the engine (hooks.c, with the API server's uid from machinecheck.c), the reads
 * (hv_mc_resume_read) against a fake API server, the profile's word (hv_resume_matches), and
 * a driven engine whose fake backend lists one VM with a record; its confirm callback is
 * built as cli/runtime.c builds it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hooks.h"
#include "log.h"
#include "machinecheck.h"
#include "oprecord.h"
#include "plan.h"
#include "runtime.h"
#include "testutil.h"

#define API   "hooks.runtime.cluster.x-k8s.io/v1alpha1"
#define INFRA "infrastructure.cluster.x-k8s.io/v1beta1"
#define MPATH "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"
#define IPATH "/apis/" INFRA "/namespaces/ns/libvirtmachines/lm1"
#define UUID1 "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f"
#define UUID2 "11111111-2222-3333-4444-555555555555"
#define HOST  "qemu+ssh://h1/system"

/* ---- the fake API server ---- */

struct fake {
    char *machine, *infra;            /* NULL: 404 */
    int machine_status, infra_status; /* 0: 200 or 404 by the text */
    int gets;
};
static struct fake F;

static int f_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    (void)ctx;
    F.gets++;
    *out = NULL;
    snprintf(err, errlen, "fake");
    bool m = !strcmp(path, MPATH), i = !strcmp(path, IPATH);
    if (!m && !i)
        return 404;
    int st = m ? F.machine_status : F.infra_status;
    if (st)
        return st;
    const char *t = m ? F.machine : F.infra;
    if (!t)
        return 404;
    *out = tu_json(t);
    return 200;
}

/* Machine m1 as the API server holds it, its VM by providerID (machine_vm). */
static const char *machine_vm = UUID1;
static void put_machine(const char *uid, bool updating, const char *infra_name)
{
    char t[2048];
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
             "\"metadata\":{\"name\":\"m1\",\"namespace\":\"ns\",\"uid\":\"%s\","
             "\"annotations\":{%s}},"
             "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"libvirt://%s\","
             "\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
             "\"kind\":\"LibvirtMachine\",\"name\":\"%s\"}}}",
             uid,
             updating ? "\"" HV_MC_IN_PROGRESS "\":\"\",\"" HV_MC_PENDING_HOOKS
                        "\":\"UpdateMachine\""
                      : "",
             machine_vm, infra_name);
    free(F.machine);
    F.machine = strdup(t);
}

/* LibvirtMachine lm1 (its VM by providerID). */
static void put_infra(const char *uuid, int memory, bool updating)
{
    char t[1024];
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"" INFRA "\",\"kind\":\"LibvirtMachine\","
             "\"metadata\":{\"name\":\"lm1\",\"namespace\":\"ns\",\"annotations\":{%s}},"
             "\"spec\":{\"providerID\":\"libvirt://%s\",\"memoryMiB\":%d,\"vcpu\":2}}",
             updating ? "\"" HV_MC_IN_PROGRESS "\":\"\"" : "", uuid, memory);
    free(F.infra);
    F.infra = strdup(t);
}

static struct hv_mc *new_mc(void)
{
    struct hv_mc_cfg c = {.io = {.get = f_get}, .drive = true};
    struct hv_mc *mc = hv_mc_new(&c);
    assert_non_null(mc);
    return mc;
}

/* ---- the confirm callback: cli/runtime.c's own composition, counted ---- */

struct confirm {
    struct hv_mc *mc;
    struct hv_profiles ps;
    int calls;
};

static enum hv_resume_verdict confirm_resume(void *ctx, const char *backend,
                                             const struct hv_vm_ref *vm,
                                             const struct hv_hw *desired, char *msg, size_t msglen)
{
    struct confirm *c = ctx;
    c->calls++;
    return hv_runtime_confirm_resume(c->mc, &c->ps, backend, vm, desired, msg, msglen);
}

/* ---- the record and the fake backend ---- */

static const struct hv_hw WANT = {4096, 2, -1, -1};

static struct hv_vm_ref vm_ref(bool with_machine)
{
    struct hv_vm_ref r;
    memset(&r, 0, sizeof(r));
    snprintf(r.server, sizeof(r.server), HOST);
    snprintf(r.uuid, sizeof(r.uuid), UUID1);
    snprintf(r.name, sizeof(r.name), "vm1");
    if (with_machine) {
        struct hv_machine_id *m = &r.machine;
        snprintf(m->ns, sizeof(m->ns), "ns");
        snprintf(m->name, sizeof(m->name), "m1");
        snprintf(m->uid, sizeof(m->uid), "u1");
        snprintf(m->infra_api_version, sizeof(m->infra_api_version), INFRA);
        snprintf(m->infra_kind, sizeof(m->infra_kind), "LibvirtMachine");
        snprintf(m->infra_name, sizeof(m->infra_name), "lm1");
    }
    return r;
}

struct fb {
    int observes, acts, writes, lists;
    struct hv_vm_found vm, vm2;
    bool two; /* vm2 is listed too */
};
static struct fb FB;

static bool fb_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    (void)b, (void)ref;
    return true;
}

/* Every look and step fails as an outage: a resumed pass keeps its slot and changes nothing. */
static int fb_observe(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                      struct hv_err *err)
{
    (void)b, (void)ref;
    FB.observes++;
    memset(obs, 0, sizeof(*obs));
    err->code = HV_E_UNREACHABLE;
    snprintf(err->detail, sizeof(err->detail), "fake outage");
    return HV_E_UNREACHABLE;
}

static int fb_plan(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *obs,
                   const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT],
                   struct hv_err *err)
{
    (void)b, (void)ref, (void)obs, (void)desired, (void)plan;
    err->code = HV_E_UNREACHABLE;
    return HV_E_UNREACHABLE;
}

static int fb_act(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *step,
                  struct hv_err *err)
{
    (void)b, (void)ref, (void)step;
    FB.acts++;
    err->code = HV_E_UNREACHABLE;
    return HV_E_UNREACHABLE;
}

static int fb_write(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                    const char *record, struct hv_err *err)
{
    (void)b, (void)ref, (void)expected, (void)record;
    FB.writes++;
    err->code = HV_E_UNREACHABLE;
    return HV_E_UNREACHABLE;
}

static void fb_free(struct hv_backend *b)
{
    (void)b;
}

static int fb_list(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err)
{
    (void)b, (void)err;
    FB.lists++;
    fn(ctx, &FB.vm);
    if (FB.two)
        fn(ctx, &FB.vm2);
    return HV_OK;
}

static const struct hv_backend_ops fb_ops = {.name = "libvirt",
                                             .serves = fb_serves,
                                             .observe = fb_observe,
                                             .plan = fb_plan,
                                             .act = fb_act,
                                             .write_record = fb_write,
                                             .free = fb_free,
                                             .list_records = fb_list};
static struct hv_backend fake_be = {.ops = &fb_ops};

static int64_t clock_ms = 1000000;
static int64_t d_mono(void *ctx)
{
    (void)ctx;
    return clock_ms;
}
static int64_t d_unix(void *ctx)
{
    (void)ctx;
    return 1800000000 + clock_ms / 1000;
}
static const struct hv_engine_drive drive = {.mono_ms = d_mono, .unix_s = d_unix, .owner = "me:1"};

/* A VM as the scan lists it (uuid, name): off, in the power-off phase of a cycle its previous
 * life (owner me:2) left, the record naming the Machine (or not). */
static void put_vm_on(struct hv_vm_found *vm, const char *uuid, const char *name, bool with_machine)
{
    struct hv_oprecord rec;
    memset(&rec, 0, sizeof(rec));
    rec.desired = WANT;
    rec.prev = (struct hv_hw){2048, 1, -1, -1};
    rec.phase = HV_PH_POWER_OFF;
    rec.cold = true;
    snprintf(rec.plan[HV_F_MEMORY], sizeof(rec.plan[HV_F_MEMORY]), "cold");
    rec.started_at = rec.step_at = d_unix(NULL) - 5;
    snprintf(rec.owner, sizeof(rec.owner), "me:2");
    snprintf(rec.policy, sizeof(rec.policy), "IfNeeded/TrySoft/120/300/1800/IfAvailable");
    rec.ref = vm_ref(with_machine);
    snprintf(rec.ref.uuid, sizeof(rec.ref.uuid), "%s", uuid);
    snprintf(rec.ref.name, sizeof(rec.ref.name), "%s", name);
    memset(vm, 0, sizeof(*vm));
    assert_true(hv_oprecord_write(&rec, vm->record, sizeof(vm->record)));
    vm->ref = vm_ref(false);
    snprintf(vm->ref.uuid, sizeof(vm->ref.uuid), "%s", uuid);
    snprintf(vm->ref.name, sizeof(vm->ref.name), "%s", name);
    snprintf(vm->host, sizeof(vm->host), HOST);
    vm->power = HV_POWER_OFF;
}

static void put_vm(bool with_machine)
{
    put_vm_on(&FB.vm, UUID1, "vm1", with_machine);
}

/* A driven engine over the fake backend; check: the machine check is configured. */
static struct hv_engine *new_engine(struct confirm *c)
{
    struct hv_engine_cfg cfg;
    hv_engine_cfg_default(&cfg);
    cfg.scan_interval_s = 0; /* at start, and again only when a scan asks for it */
    cfg.drive = &drive;
    if (c) {
        cfg.confirm_resume = confirm_resume;
        cfg.confirm_ctx = c;
    }
    struct hv_backend *b = &fake_be;
    struct hv_engine *e = hv_engine_new(&cfg, &b, 1);
    assert_non_null(e);
    return e;
}

static int cycles(struct hv_engine *e)
{
    int ops = 0, n = 0;
    hv_engine_gauges(e, &ops, &n);
    return n;
}

static int setup(void **state)
{
    (void)state;
    free(F.machine);
    free(F.infra);
    memset(&F, 0, sizeof(F));
    memset(&FB, 0, sizeof(FB));
    clock_ms += 3600000;
    machine_vm = UUID1;
    hv_log_set_level(getenv("HV_TEST_LOG") ? HV_LOG_DEBUG : HV_LOG_ERROR);
    put_machine("u1", true, "lm1");
    put_infra(UUID1, 4096, true);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(F.machine);
    free(F.infra);
    memset(&F, 0, sizeof(F));
    return 0;
}

/* ---- the record ---- */

static void test_record_keeps_the_machine(void **state)
{
    (void)state;
    put_vm(true);
    struct hv_oprecord r;
    assert_true(hv_oprecord_read(&r, FB.vm.record));
    assert_string_equal(r.ref.machine.ns, "ns");
    assert_string_equal(r.ref.machine.name, "m1");
    assert_string_equal(r.ref.machine.uid, "u1");
    assert_string_equal(r.ref.machine.infra_api_version, INFRA);
    assert_string_equal(r.ref.machine.infra_kind, "LibvirtMachine");
    assert_string_equal(r.ref.machine.infra_name, "lm1");
    assert_non_null(strstr(FB.vm.record, "\"machine\":{\"namespace\":\"ns\",\"name\":\"m1\","
                                         "\"uid\":\"u1\""));
    /* a record of an unchecked call (or an older version) has none, and reads as before */
    put_vm(false);
    assert_null(strstr(FB.vm.record, "machine"));
    assert_true(hv_oprecord_read(&r, FB.vm.record));
    assert_string_equal(r.ref.machine.name, "");
    assert_string_equal(r.ref.uuid, UUID1);
    assert_int_equal(r.phase, HV_PH_POWER_OFF);
}

/* ---- the hooks give the engine a checked call's Machine ---- */

struct stub {
    int calls;
    struct hv_vm_ref ref;
};

static void stub_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        const struct hv_hw *desired, const struct hv_settings *s,
                        struct hv_update_result *out)
{
    struct stub *st = ctx;
    (void)p, (void)desired, (void)s;
    st->calls++;
    st->ref = *ref;
    memset(out, 0, sizeof(*out));
}

static enum hv_gate gate(void *ctx, enum hv_hook h, const hj *req, hj **req_out, char *msg,
                         size_t msglen)
{
    return (enum hv_gate)hv_mc_check(ctx, h, req, req_out, msg, msglen);
}

static void handle(const struct hv_hooks_ctx *ctx)
{
    hj *req = tu_json(
        "{\"apiVersion\":\"" API "\",\"kind\":\"UpdateMachineRequest\",\"desired\":{"
        "\"machine\":{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
        "\"metadata\":{\"name\":\"m1\",\"namespace\":\"ns\"},"
        "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"libvirt://" UUID1 "\","
        "\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
        "\"kind\":\"LibvirtMachine\",\"name\":\"lm1\"}}},"
        "\"infrastructureMachine\":{\"apiVersion\":\"" INFRA "\",\"kind\":\"LibvirtMachine\","
        "\"metadata\":{\"name\":\"lm1\",\"namespace\":\"ns\"},"
        "\"spec\":{\"providerID\":\"libvirt://" UUID1 "\",\"memoryMiB\":4096,\"vcpu\":2}}}}");
    bool failure;
    size_t len;
    char *out = hv_hook_handle(ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, NULL, 0, &len);
    assert_non_null(out);
    free(out);
    hj_free(req);
}

static void test_checked_call_gives_the_machine(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    struct stub st = {0};
    struct hv_hooks_ctx ctx = {
        .profiles = &ps, .update = stub_update, .update_ctx = &st, .timeout_s = 10};
    hv_settings_default(&ctx.defaults);
    /* no machine check: the engine gets no Machine (records stay as they were) */
    handle(&ctx);
    assert_int_equal(st.calls, 1);
    assert_string_equal(st.ref.uuid, UUID1);
    assert_string_equal(st.ref.machine.name, "");
    assert_int_equal(F.gets, 0);
    /* checked: the Machine, with the uid the API server gave it (the request has none) */
    ctx.gate = gate;
    ctx.gate_ctx = mc;
    handle(&ctx); /* in progress while the objects are read */
    assert_int_equal(st.calls, 1);
    hv_mc_work(mc);
    handle(&ctx);
    assert_int_equal(st.calls, 2);
    assert_string_equal(st.ref.uuid, UUID1);
    assert_string_equal(st.ref.machine.ns, "ns");
    assert_string_equal(st.ref.machine.name, "m1");
    assert_string_equal(st.ref.machine.uid, "u1");
    assert_string_equal(st.ref.machine.infra_api_version, INFRA);
    assert_string_equal(st.ref.machine.infra_kind, "LibvirtMachine");
    assert_string_equal(st.ref.machine.infra_name, "lm1");
    hv_profiles_free(&ps);
    hv_mc_free(mc);
}

/* ---- the API server's word, refusal by refusal ---- */

static enum hv_resume_verdict ask(const struct hv_vm_ref *vm, const struct hv_hw *want, char *msg,
                                  size_t cap)
{
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    msg[0] = '\0';
    enum hv_resume_verdict v = confirm_resume(&c, "libvirt", vm, want, msg, cap);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
    return v;
}

static void refused(const char *want_msg)
{
    struct hv_vm_ref vm = vm_ref(true);
    char msg[600];
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_REFUSED);
    assert_string_equal(msg, want_msg);
}

static void test_confirmed(void **state)
{
    (void)state;
    struct hv_vm_ref vm = vm_ref(true);
    char msg[600];
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_CONFIRMED);
    assert_int_equal(F.gets, 2); /* the Machine and its infra machine, nothing else */
}

static void test_refused_machine_gone(void **state)
{
    (void)state;
    free(F.machine);
    F.machine = NULL;
    refused("machine check: Machine ns/m1 does not exist in the API server; not carried on");
    assert_int_equal(F.gets, 1);
}

static void test_refused_other_uid(void **state)
{
    (void)state;
    put_machine("u2", true, "lm1"); /* deleted and made again under the same name */
    refused("machine check: Machine ns/m1 in the API server has another uid than the record's; "
            "not carried on");
}

static void test_refused_not_updating(void **state)
{
    (void)state;
    put_machine("u1", false, "lm1"); /* CAPI's update ended (or never was) */
    refused("machine check: Machine ns/m1 is not being updated in place by Cluster API; not "
            "carried on");
    put_machine("u1", true, "lm1");
    put_infra(UUID1, 4096, false);
    refused("machine check: LibvirtMachine ns/lm1 is not being updated in place by Cluster API; "
            "not carried on");
}

static void test_refused_other_infra_machine(void **state)
{
    (void)state;
    put_machine("u1", true, "lm2");
    refused("machine check: the infrastructureRef of Machine ns/m1 is not the record's "
            "LibvirtMachine lm1; not carried on");
    put_machine("u1", true, "lm1");
    free(F.infra);
    F.infra = NULL;
    refused("machine check: LibvirtMachine ns/lm1 does not exist in the API server; not carried "
            "on");
}

static void test_refused_other_vm(void **state)
{
    (void)state;
    /* a real Machine being updated, named in a record put on another VM */
    machine_vm = UUID2;
    put_machine("u1", true, "lm1");
    put_infra(UUID2, 4096, true);
    refused("machine check: LibvirtMachine ns/lm1 in the API server names another VM than the "
            "one the record is on; not carried on");
}

static void test_refused_other_spec(void **state)
{
    (void)state;
    put_infra(UUID1, 8192, true); /* the record asks for 4096 MiB */
    refused("machine check: the spec of LibvirtMachine ns/lm1 in the API server asks for other "
            "hardware than the record on the VM; not carried on");
}

static void test_refused_record_names_no_valid_machine(void **state)
{
    (void)state;
    struct hv_vm_ref vm = vm_ref(true);
    vm.machine.uid[0] = '\0';
    char msg[600];
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_REFUSED);
    assert_string_equal(msg, "machine check: the record on the VM names no valid Machine and "
                             "infra machine; not carried on");
    assert_int_equal(F.gets, 0); /* nothing read */
}

static void test_unreachable_is_unknown(void **state)
{
    (void)state;
    struct hv_vm_ref vm = vm_ref(true);
    char msg[600];
    F.machine_status = -1; /* no answer */
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_UNKNOWN);
    assert_string_equal(msg, "machine check: cannot read Machine ns/m1 from the API server; "
                             "looked at again at the next scan");
    F.machine_status = 503;
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_UNKNOWN);
    F.machine_status = 0;
    F.infra_status = 403;
    assert_int_equal(ask(&vm, &WANT, msg, sizeof(msg)), HV_RESUME_UNKNOWN);
    assert_string_equal(msg, "machine check: cannot read LibvirtMachine ns/lm1 from the API "
                             "server; looked at again at the next scan");
}

/* ---- through the engine's scan ---- */

/* The engine's first scan (and the passes it queues); the earliest thing due after it. */
static int64_t scan(struct hv_engine *e)
{
    int64_t next = 0;
    hv_engine_run(e, 4, &next);
    return next;
}

static void left_alone(struct hv_engine *e, int64_t next)
{
    assert_int_equal(FB.lists, 1);
    assert_int_equal(cycles(e), 0);
    assert_int_equal(FB.observes, 0);
    assert_int_equal(FB.acts, 0);
    assert_int_equal(FB.writes, 0);
    assert_int_equal(next, 0); /* refused: not asked again until a checked call comes */
}

static void test_scan_carries_on_a_confirmed_cycle(void **state)
{
    (void)state;
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    put_vm(true);
    struct hv_engine *e = new_engine(&c);
    scan(e);
    assert_int_equal(c.calls, 1);
    assert_int_equal(cycles(e), 1); /* a slot, and its passes */
    assert_true(FB.observes >= 1);
    hv_engine_free(e);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
}

static void test_scan_leaves_a_refused_cycle(void **state)
{
    (void)state;
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    put_vm(true);
    put_infra(UUID1, 8192, true); /* another spec */
    struct hv_engine *e = new_engine(&c);
    left_alone(e, scan(e));
    assert_int_equal(c.calls, 1);
    hv_engine_free(e);
    /* the Machine gone */
    memset(&FB, 0, sizeof(FB));
    put_vm(true);
    free(F.machine);
    F.machine = NULL;
    e = new_engine(&c);
    left_alone(e, scan(e));
    assert_int_equal(c.calls, 2);
    hv_engine_free(e);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
}

static void test_scan_refuses_a_record_without_machine(void **state)
{
    (void)state;
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    put_vm(false); /* written by an unchecked call, an older version, or forged */
    struct hv_engine *e = new_engine(&c);
    left_alone(e, scan(e));
    assert_int_equal(c.calls, 0); /* refused before the API server is asked */
    assert_int_equal(F.gets, 0);
    hv_engine_free(e);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
}

static void test_scan_tries_again_when_unreachable(void **state)
{
    (void)state;
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    put_vm(true);
    F.machine_status = -1;
    struct hv_engine *e = new_engine(&c);
    int64_t next = scan(e);
    assert_int_equal(c.calls, 1);
    assert_int_equal(cycles(e), 0);
    assert_int_equal(FB.observes + FB.acts + FB.writes, 0);
    assert_int_equal(next, clock_ms + 30000); /* the scan again, as after a host it missed */
    /* still unreachable: again later */
    clock_ms = next;
    next = scan(e);
    assert_int_equal(c.calls, 2);
    assert_int_equal(cycles(e), 0);
    assert_int_equal(next, clock_ms + 30000);
    /* the API server answers and confirms: carried on */
    F.machine_status = 0;
    clock_ms = next;
    scan(e);
    assert_int_equal(c.calls, 3);
    assert_int_equal(FB.lists, 3);
    assert_int_equal(cycles(e), 1);
    assert_true(FB.observes >= 1);
    hv_engine_free(e);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
}

/* One scan waits for the API server's timeout once at most: after a cycle it could not
 * confirm, it asks about no other (they wait for the next scan with it). */
static void test_scan_asks_no_more_once_unreachable(void **state)
{
    (void)state;
    struct confirm c = {.mc = new_mc()};
    hv_profiles_builtin(&c.ps);
    put_vm(true);
    put_vm_on(&FB.vm2, UUID2, "vm2", true);
    FB.two = true;
    F.machine_status = -1;
    struct hv_engine *e = new_engine(&c);
    int64_t next = scan(e);
    assert_int_equal(c.calls, 1);
    assert_int_equal(F.gets, 1);
    assert_int_equal(cycles(e), 0);
    assert_int_equal(FB.observes + FB.acts + FB.writes, 0);
    assert_int_equal(next, clock_ms + 30000);
    /* answered: both asked; vm1's confirmed, vm2's refused (the Machine's VM is vm1) */
    F.machine_status = 0;
    clock_ms = next;
    scan(e);
    assert_int_equal(c.calls, 3);
    assert_int_equal(cycles(e), 1);
    hv_engine_free(e);
    hv_profiles_free(&c.ps);
    hv_mc_free(c.mc);
}

static void test_without_machine_check_as_before(void **state)
{
    (void)state;
    put_vm(false); /* no Machine in the record: carried on, as before */
    struct hv_engine *e = new_engine(NULL);
    int64_t next = scan(e);
    assert_int_equal(cycles(e), 1);
    assert_true(FB.observes >= 1);
    assert_int_equal(F.gets, 0);
    assert_true(next != 0); /* (its pass's own next look) */
    hv_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_record_keeps_the_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checked_call_gives_the_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_confirmed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_machine_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_other_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_not_updating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_other_infra_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_other_vm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_other_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_record_names_no_valid_machine, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_is_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_carries_on_a_confirmed_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_leaves_a_refused_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_refuses_a_record_without_machine, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_tries_again_when_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_asks_no_more_once_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_machine_check_as_before, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
