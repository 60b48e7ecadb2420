/* test_plan.c: cmocka tests for src/hooks/plan.c: which differences hvupdater covers, how (live or
 * with a power cycle), the JSON Patch it builds and the exact, deterministic messages, per
 * setting and with test doubles for the backend's availability and live-change probe. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "plan.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

#define VSM_UUID  "4205c9f4-1d3e-4a5b-9c1d-0123456789ab"
#define BLOCK_PFX "cannot update in place (onUncoverable=Block): "
#define LEFT      "; not covered, left to CAPI: "
#define NOTHING   "nothing hvupdater can change in place"
#define IM        "infrastructureMachine.spec."
#define NEVER_WHY "(needs a power cycle and powerCycle is Never)"

/* ---- test doubles for hv_plan_hooks ----------------------------------------------------- */

struct fake {
    int avail_rc;
    const char *avail_why;
    int avail_calls;
    struct hv_vm_ref avail_ref;
    char avail_backend[32];
    char avail_kind[64];

    int probe_rc;
    const char *probe_why;
    struct hv_field_plan plan[HV_F_COUNT];
    int probe_calls;
    struct hv_vm_ref probe_ref;
    struct hv_hw probe_desired;
};

static int fake_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                          char *why, size_t whylen)
{
    struct fake *f = ctx;
    f->avail_calls++;
    f->avail_ref = *ref;
    snprintf(f->avail_backend, sizeof(f->avail_backend), "%s", p->backend);
    snprintf(f->avail_kind, sizeof(f->avail_kind), "%s", p->kind);
    if (!f->avail_rc)
        snprintf(why, whylen, "%s", f->avail_why);
    return f->avail_rc;
}

static int fake_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    (void)s;
    struct fake *f = ctx;
    f->probe_calls++;
    f->probe_ref = *ref;
    f->probe_desired = *desired;
    if (f->probe_rc < 0) {
        snprintf(why, whylen, "%s", f->probe_why ? f->probe_why : "");
        return f->probe_rc;
    }
    memcpy(plan, f->plan, sizeof(f->plan));
    return 0;
}

static void fake_init(struct fake *f, struct hv_plan_hooks *h)
{
    memset(f, 0, sizeof(*f));
    f->avail_rc = 1;
    h->ctx = f;
    h->available = fake_available;
    h->probe = fake_probe;
    h->check = NULL;
    h->admit = NULL; /* no dry-run claims (test_dryrun.c) */
    h->admit_ctx = NULL;
}

static void plan_live(struct fake *f, enum hv_field fld, const char *method)
{
    f->plan[fld].how = HV_HOW_LIVE;
    snprintf(f->plan[fld].method, sizeof(f->plan[fld].method), "%s", method);
}

static void plan_cold(struct fake *f, enum hv_field fld, const char *reason)
{
    f->plan[fld].how = HV_HOW_COLD;
    snprintf(f->plan[fld].reason, sizeof(f->plan[fld].reason), "%s", reason);
}

/* ---- running the planner ---------------------------------------------------------------- */

struct env {
    struct hv_profiles ps;
    struct hv_settings s;
    const struct hv_plan_hooks *hooks;
};

static void env_init(struct env *e, enum hv_power_cycle pc, enum hv_on_uncoverable unc)
{
    hv_profiles_builtin(&e->ps);
    hv_settings_default(&e->s);
    e->s.power_cycle = pc;
    e->s.on_uncoverable = unc;
    e->hooks = NULL;
}

static void env_free(struct env *e)
{
    hv_profiles_free(&e->ps);
}

/* Plan a request shaped like the fixtures ({current, desired}); the kind of call follows
 * from the presence of infrastructureMachineTemplate. */
static void plan_req(const struct env *e, const hj *req, struct hv_coverage *c)
{
    bool set = hj_get(hj_get(req, "current"), "infrastructureMachineTemplate") != NULL;
    const char *infra = set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    const char *mach = set ? "machineSet" : "machine";
    const char *boot = set ? "bootstrapConfigTemplate" : "bootstrapConfig";
    const hj *cur = hj_get(req, "current"), *des = hj_get(req, "desired");
    struct hv_plan_input in = {
        .profiles = &e->ps,
        .settings = &e->s,
        .machine_set = set,
        .cur_machine = hj_get(cur, mach),
        .des_machine = hj_get(des, mach),
        .cur_infra = hj_get(cur, infra),
        .des_infra = hj_get(des, infra),
        .cur_boot = hj_get(cur, boot),
        .des_boot = hj_get(des, boot),
        .hooks = e->hooks,
    };
    hv_plan_coverage(&in, c);
}

/* Plan a fixture under the given settings and check message, failure/declined and patch
 * (expected_patch NULL: no patch). */
static void check_fixture(const char *name, enum hv_power_cycle pc, enum hv_on_uncoverable unc,
                          const char *message, bool failure, const char *expected_patch)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, pc, unc);
    hj *req = tu_fixture(name);
    plan_req(&e, req, &c);
    assert_string_equal(c.message, message);
    assert_int_equal(c.failure, failure);
    assert_false(c.declined);
    if (expected_patch) {
        assert_non_null(c.infra_patch);
        tu_assert_dump(c.infra_patch, expected_patch);
    } else {
        assert_null(c.infra_patch);
    }
    hv_coverage_free(&c);
    assert_null(c.infra_patch);
    hj_free(req);
    env_free(&e);
}

static const struct hv_field_result *field(const struct hv_coverage *c, enum hv_field f)
{
    for (size_t k = 0; k < c->n_fields; k++)
        if (c->fields[k].f == f)
            return &c->fields[k];
    fail_msg("no field result for field %d", (int)f);
    return NULL;
}

/* ---- classification under IfNeeded / Fallback ------------------------------------------- */

static void test_memory_grow_is_live(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live");
    assert_false(c.failure);
    assert_false(c.declined);
    assert_int_equal(c.n_fields, 1);
    const struct hv_field_result *r = field(&c, HV_F_MEMORY);
    assert_int_equal(r->cls, HV_CLASS_LIVE);
    assert_string_equal(r->name, "memoryMiB");
    assert_string_equal(r->from, "4096");
    assert_string_equal(r->to, "8192");
    assert_string_equal(r->how, "hot-add");
    assert_int_equal(c.n_uncovered, 0);
    assert_int_equal(c.n_uncovered_all, 0);
    assert_true(c.desired.memory_mib == 8192);
    assert_int_equal(c.desired.cpus, -1);
    assert_int_equal(c.desired.cores_per_socket, -1);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_memory_and_cpu_grow_are_live(void **state)
{
    check_fixture("vsm-memory-cpu-grow.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 4096->8192 live; numCPUs 2->4 live", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192},"
                  "{\"op\":\"replace\",\"path\":\"/spec/numCPUs\",\"value\":4}]");
}

static void test_shrink_is_cold(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-shrink.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message,
                        "memoryMiB 8192->4096 with a power cycle; numCPUs 4->2 with a power cycle");
    assert_int_equal(field(&c, HV_F_MEMORY)->cls, HV_CLASS_COLD);
    assert_int_equal(field(&c, HV_F_CPUS)->cls, HV_CLASS_COLD);
    assert_string_equal(field(&c, HV_F_MEMORY)->how, "");
    assert_true(c.desired.memory_mib == 4096);
    assert_int_equal(c.desired.cpus, 2);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":4096},"
                   "{\"op\":\"replace\",\"path\":\"/spec/numCPUs\",\"value\":2}]");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_cores_per_socket_is_cold_even_when_growing(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-cores.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "numCoresPerSocket 1->2 with a power cycle");
    assert_int_equal(field(&c, HV_F_CORES)->cls, HV_CLASS_COLD);
    assert_int_equal(c.desired.cores_per_socket, 2);
    assert_true(c.desired.memory_mib == -1);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/numCoresPerSocket\",\"value\":2}]");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_other_differences_fallback(void **state)
{
    check_fixture("vsm-version-and-memory.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 4096->8192 live" LEFT "machine.spec.version", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    check_fixture("vsm-bootstrap-files.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  NOTHING LEFT "bootstrapConfig.spec.files", false, NULL);
    /* a disk grows online; it never shrinks */
    check_fixture("vsm-disk.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 4096->8192 live; diskGiB 25->50 live", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192},"
                  "{\"op\":\"replace\",\"path\":\"/spec/diskGiB\",\"value\":50}]");
    check_fixture("vsm-disk-shrink.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 4096->8192 live" LEFT IM "diskGiB (disks cannot shrink)", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
}

static void test_uncovered_reasons(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-version-and-memory.json");
    tu_set(req, "/desired/infrastructureMachine/spec/template", "\"ubuntu-2404\"");
    tu_set(req, "/desired/bootstrapConfig/spec/files/0/content", "\"changed\"");
    plan_req(&e, req, &c);
    /* infra first, then the Machine, then the bootstrap config */
    assert_int_equal(c.n_uncovered, 3);
    assert_string_equal(c.uncovered[0].where, IM "template");
    assert_string_equal(c.uncovered[0].reason, "not a field hvupdater can change");
    assert_string_equal(c.uncovered[1].where, "machine.spec.version");
    assert_string_equal(c.uncovered[1].reason, "hvupdater changes hypervisor hardware only");
    assert_string_equal(c.uncovered[2].where, "bootstrapConfig.spec.files");
    assert_string_equal(c.uncovered[2].reason, "hvupdater changes hypervisor hardware only");
    assert_string_equal(c.message, "memoryMiB 4096->8192 live" LEFT IM
                                   "template, machine.spec.version, bootstrapConfig.spec.files");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- powerCycle=Never ------------------------------------------------------------------- */

static void test_never_drops_cold_fields(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_NEVER, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-shrink.json");
    plan_req(&e, req, &c);
    assert_string_equal(
        c.message,
        "nothing hvupdater can change in place; not covered, left to CAPI: "
        "infrastructureMachine.spec.memoryMiB (needs a power cycle and powerCycle is Never), "
        "infrastructureMachine.spec.numCPUs (needs a power cycle and powerCycle is Never)");
    assert_false(c.failure);
    assert_null(c.infra_patch);
    assert_int_equal(c.n_uncovered, 2);
    assert_string_equal(c.uncovered[0].reason, "needs a power cycle and powerCycle is Never");
    assert_string_equal(c.uncovered[1].reason, "needs a power cycle and powerCycle is Never");
    assert_int_equal(field(&c, HV_F_MEMORY)->cls, HV_CLASS_NO);
    assert_true(c.desired.memory_mib == -1);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);

    check_fixture("vsm-cores.json", HV_PC_NEVER, HV_UNC_FALLBACK,
                  NOTHING LEFT IM "numCoresPerSocket " NEVER_WHY, false, NULL);
    check_fixture("lvm-shrink.json", HV_PC_NEVER, HV_UNC_FALLBACK,
                  NOTHING LEFT IM "memoryMiB " NEVER_WHY ", " IM "vcpu " NEVER_WHY, false, NULL);
}

static void test_never_keeps_live_growth(void **state)
{
    /* no probe hook: growth stays live */
    check_fixture("vsm-memory-grow.json", HV_PC_NEVER, HV_UNC_FALLBACK, "memoryMiB 4096->8192 live",
                  false, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    check_fixture("vsm-memory-grow.json", HV_PC_NEVER, HV_UNC_BLOCK, "memoryMiB 4096->8192 live",
                  false, "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
}

static void test_never_mixed_growth_and_shrink(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_NEVER, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_set(req, "/desired/infrastructureMachine/spec/numCPUs", "1");
    plan_req(&e, req, &c);
    assert_string_equal(
        c.message,
        "memoryMiB 4096->8192 live; not covered, left to CAPI: infrastructureMachine.spec.numCPUs "
        "(needs a power cycle and powerCycle is Never)");
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    assert_true(c.desired.memory_mib == 8192);
    assert_int_equal(c.desired.cpus, -1); /* not covered: not in the desired hardware */
    hv_coverage_free(&c);

    /* the same under IfNeeded covers both */
    e.s.power_cycle = HV_PC_IF_NEEDED;
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->1 with a power cycle");
    assert_int_equal(c.desired.cpus, 1);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- onUncoverable=Block ---------------------------------------------------------------- */

static void test_block_turns_uncovered_into_failure(void **state)
{
    check_fixture("vsm-version-and-memory.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  BLOCK_PFX "machine.spec.version (hvupdater changes hypervisor hardware only)",
                  true, NULL);
    check_fixture("vsm-bootstrap-files.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  BLOCK_PFX
                  "bootstrapConfig.spec.files (hvupdater changes hypervisor hardware only)",
                  true, NULL);
    check_fixture("vsm-disk-shrink.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  BLOCK_PFX IM "diskGiB (disks cannot shrink)", true, NULL);
    check_fixture("vsm-disk.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  "memoryMiB 4096->8192 live; diskGiB 25->50 live", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192},"
                  "{\"op\":\"replace\",\"path\":\"/spec/diskGiB\",\"value\":50}]");
    check_fixture("vsmt-version.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  BLOCK_PFX "machineSet.spec.template.spec.version (hvupdater changes hypervisor "
                            "hardware only)",
                  true, NULL);
    check_fixture("vsm-shrink.json", HV_PC_NEVER, HV_UNC_BLOCK,
                  BLOCK_PFX IM "memoryMiB (needs a power cycle and powerCycle is Never); " IM
                               "numCPUs (needs a power cycle and powerCycle is Never)",
                  true, NULL);
}

/* A difference under a key too long to name as a path is still a difference. */
static void test_block_sees_differences_under_long_keys(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    char key[601];
    memset(key, 'k', 600);
    key[600] = '\0';
    hj *spec = hj_ptr(req, "/desired/bootstrapConfig/spec");
    assert_non_null(spec);
    hj_obj_set_take(spec, key, hj_new_string("x"));
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_null(c.infra_patch);
    assert_non_null(strstr(c.message, "bootstrapConfig.spec ("));
    hv_coverage_free(&c);
    /* the same long key, equal on both sides, is no difference */
    hj_obj_set_take(hj_ptr(req, "/current/bootstrapConfig/spec"), key, hj_new_string("x"));
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_non_null(c.infra_patch);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_block_with_everything_covered_is_success(void **state)
{
    check_fixture("vsm-memory-cpu-grow.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  "memoryMiB 4096->8192 live; numCPUs 2->4 live", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192},"
                  "{\"op\":\"replace\",\"path\":\"/spec/numCPUs\",\"value\":4}]");
    check_fixture("vsm-shrink.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  "memoryMiB 8192->4096 with a power cycle; numCPUs 4->2 with a power cycle", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":4096},"
                  "{\"op\":\"replace\",\"path\":\"/spec/numCPUs\",\"value\":2}]");
}

static void test_block_lists_every_item_in_order(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    hj *req = tu_fixture("vsm-disk-shrink.json");
    tu_set(req, "/desired/machine/spec/version", "\"v1.32.0\"");
    tu_set(req, "/desired/bootstrapConfig/spec/files", "[]");
    tu_set(req, "/desired/infrastructureMachine/spec/numCPUs", "4.5");
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_null(c.infra_patch);
    assert_string_equal(c.message,
                        BLOCK_PFX IM "numCPUs (not a whole positive number); " IM
                                     "diskGiB (disks cannot shrink); "
                                     "machine.spec.version (hvupdater changes hypervisor hardware "
                                     "only); bootstrapConfig.spec.files (hvupdater changes "
                                     "hypervisor hardware only)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- declined kinds --------------------------------------------------------------------- */

static void check_declined(const hj *req, enum hv_power_cycle pc, enum hv_on_uncoverable unc,
                           const char *message)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, pc, unc);
    fake_init(&f, &h);
    e.hooks = &h;
    plan_req(&e, req, &c);
    assert_true(c.declined);
    assert_false(c.failure);
    assert_null(c.infra_patch);
    assert_int_equal(c.n_fields, 0);
    assert_int_equal(f.avail_calls, 0);
    assert_int_equal(f.probe_calls, 0);
    assert_string_equal(c.message, message);
    hv_coverage_free(&c);
    env_free(&e);
}

static void test_unknown_kind_declined_never_failure(void **state)
{
    hj *req = tu_fixture("unknown-kind.json");
    const char *msg = "declined: no hvupdater profile for FooMachine "
                      "infrastructure.cluster.x-k8s.io/v1beta1; CAPI decides without hvupdater";
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_FALLBACK, msg);
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK, msg);
    check_declined(req, HV_PC_NEVER, HV_UNC_BLOCK, msg);
    /* even with other differences that Block would otherwise fail on */
    tu_set(req, "/desired/machine/spec/version", "\"v1.32.0\"");
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK, msg);
    hj_free(req);
}

static void test_unknown_version_group_or_missing_kind_declined(void **state)
{
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_set(req, "/desired/infrastructureMachine/apiVersion",
           "\"infrastructure.cluster.x-k8s.io/v1alpha9\"");
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                   "declined: no hvupdater profile for VSphereMachine "
                   "infrastructure.cluster.x-k8s.io/v1alpha9; CAPI decides without hvupdater");
    tu_set(req, "/desired/infrastructureMachine/apiVersion", "\"infra.example.com/v1beta1\"");
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                   "declined: no hvupdater profile for VSphereMachine infra.example.com/v1beta1; "
                   "CAPI decides without hvupdater");
    tu_del(req, "/desired/infrastructureMachine/apiVersion");
    tu_del(req, "/desired/infrastructureMachine/kind");
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                   "declined: no hvupdater profile for (no kind) (no apiVersion); CAPI decides "
                   "without hvupdater");
    hj_free(req);
}

static void test_template_kind_mismatch_declined(void **state)
{
    /* a template kind offered to CanUpdateMachine */
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_set(req, "/desired/infrastructureMachine/kind", "\"VSphereMachineTemplate\"");
    check_declined(req, HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                   "declined: no hvupdater profile for VSphereMachineTemplate "
                   "infrastructure.cluster.x-k8s.io/v1beta1; CAPI decides without hvupdater");
    hj_free(req);
    /* a machine kind offered to CanUpdateMachineSet */
    hj *set = tu_fixture("vsmt-memory-cpu-grow.json");
    tu_set(set, "/desired/infrastructureMachineTemplate/kind", "\"VSphereMachine\"");
    check_declined(set, HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                   "declined: no hvupdater profile for VSphereMachine "
                   "infrastructure.cluster.x-k8s.io/v1beta1; CAPI decides without hvupdater");
    hj_free(set);
}

static void test_kind_or_version_change_uncovered(void **state)
{
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_set(req, "/desired/infrastructureMachine/apiVersion",
           "\"infrastructure.cluster.x-k8s.io/v1beta2\"");
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    plan_req(&e, req, &c);
    assert_false(c.declined);
    assert_string_equal(
        c.message, "nothing hvupdater can change in place; not covered, left to CAPI: "
                   "infrastructureMachine.kind (the infrastructure kind or apiVersion changes)");
    assert_null(c.infra_patch);
    hv_coverage_free(&c);
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message, BLOCK_PFX "infrastructureMachine.kind (the infrastructure kind "
                                             "or apiVersion changes)");
    hv_coverage_free(&c);
    env_free(&e);
    hj_free(req);
}

/* ---- templates, versions, kinds --------------------------------------------------------- */

static void test_machine_set_templates(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsmt-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    tu_assert_dump(
        c.infra_patch,
        "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/memoryMiB\",\"value\":8192},"
        "{\"op\":\"replace\",\"path\":\"/spec/template/spec/numCPUs\",\"value\":4}]");
    assert_true(c.desired.memory_mib == 8192);
    hv_coverage_free(&c);
    /* MachineSet fields outside spec.template.spec do not count */
    tu_set(req, "/desired/machineSet/spec/replicas", "5");
    tu_set(req, "/desired/machineSet/metadata/labels", "{\"x\":\"y\"}");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    hv_coverage_free(&c);
    /* a template difference outside the profile fields does */
    tu_set(req, "/desired/infrastructureMachineTemplate/spec/template/spec/template", "\"u2\"");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live" LEFT
                                   "infrastructureMachineTemplate.spec.template.spec.template");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);

    check_fixture("vsmt-shrink.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 8192->4096 with a power cycle; numCPUs 4->2 with a power cycle", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/memoryMiB\",\"value\":4096},"
                  "{\"op\":\"replace\",\"path\":\"/spec/template/spec/numCPUs\",\"value\":2}]");
    check_fixture("vsmt-shrink.json", HV_PC_NEVER, HV_UNC_FALLBACK,
                  NOTHING LEFT
                  "infrastructureMachineTemplate.spec.template.spec.memoryMiB " NEVER_WHY
                  ", infrastructureMachineTemplate.spec.template.spec.numCPUs " NEVER_WHY,
                  false, NULL);
    check_fixture("vsmt-version.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  NOTHING LEFT "machineSet.spec.template.spec.version", false, NULL);
}

static void test_v1beta2_vspheremachine(void **state)
{
    check_fixture("vsm-v1beta2-grow.json", HV_PC_IF_NEEDED, HV_UNC_BLOCK,
                  "memoryMiB 4096->6144 live", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":6144}]");
}

static void test_libvirt_machine(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    fake_init(&f, &h);
    e.hooks = &h;
    hj *req = tu_fixture("lvm-grow.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 1024->2048 live; vcpu 1->3 live");
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":2048},"
                   "{\"op\":\"replace\",\"path\":\"/spec/vcpu\",\"value\":3}]");
    assert_string_equal(field(&c, HV_F_CPUS)->name, "vcpu");
    assert_true(c.desired.memory_mib == 2048);
    assert_int_equal(c.desired.cpus, 3);
    assert_int_equal(c.desired.cores_per_socket, -1);
    /* identity by name: no providerID anywhere */
    assert_int_equal(f.avail_calls, 1);
    assert_string_equal(f.avail_backend, "libvirt");
    assert_string_equal(f.avail_ref.name, "hvt-dimm");
    assert_string_equal(f.avail_ref.uuid, "");
    assert_string_equal(f.avail_ref.server, "");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);

    check_fixture("lvm-shrink.json", HV_PC_IF_NEEDED, HV_UNC_FALLBACK,
                  "memoryMiB 2048->1024 with a power cycle; vcpu 3->1 with a power cycle", false,
                  "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":1024},"
                  "{\"op\":\"replace\",\"path\":\"/spec/vcpu\",\"value\":1}]");
}

static void test_custom_profile_from_config(void **state)
{
    struct env e;
    struct hv_coverage c;
    char err[256] = "";
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *profiles =
        tu_json("[{\"kind\":\"KVMMachineTemplate\",\"apiGroup\":\"infrastructure.example."
                "com\",\"apiVersions\":[\"v1beta1\"],\"template\":true,\"backend\":"
                "\"libvirt\",\"fields\":{\"memory\":{\"path\":\"/resources/memoryGiB\","
                "\"unit\":\"GiB\"},\"cpus\":{\"path\":\"/resources/vcpus\"}},"
                "\"identity\":{\"providerIDPrefix\":\"libvirt://\"}}]");
    assert_int_equal(hv_profiles_load(&e.ps, profiles, err, sizeof(err)), 0);
    hj_free(profiles);
    hj *req = tu_json(
        "{\"current\":{\"infrastructureMachineTemplate\":{\"apiVersion\":\"infrastructure.example."
        "com/v1beta1\",\"kind\":\"KVMMachineTemplate\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
        "\"template\":{\"spec\":{\"resources\":{\"memoryGiB\":8,\"vcpus\":2},\"image\":\"i\"}}}}},"
        "\"desired\":{\"infrastructureMachineTemplate\":{\"apiVersion\":\"infrastructure.example."
        "com/v1beta1\",\"kind\":\"KVMMachineTemplate\",\"metadata\":{\"name\":\"t\"},\"spec\":{"
        "\"template\":{\"spec\":{\"resources\":{\"memoryGiB\":16,\"vcpus\":2},\"image\":\"i\"}}}}}"
        "}");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryGiB 8->16 live");
    assert_true(c.desired.memory_mib == 16384);
    tu_assert_dump(c.infra_patch, "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/resources/"
                                  "memoryGiB\",\"value\":16}]");
    hv_coverage_free(&c);
    /* not a whole number of MiB at all */
    tu_set(req, "/desired/infrastructureMachineTemplate/spec/template/spec/resources/memoryGiB",
           "\"16Gi\"");
    plan_req(&e, req, &c);
    assert_string_equal(c.message,
                        "nothing hvupdater can change in place; not covered, left to CAPI: "
                        "infrastructureMachineTemplate.spec.template.spec.resources.memoryGiB (not "
                        "a whole positive number of MiB)");
    assert_string_equal(c.uncovered[0].reason, "not a whole positive number of MiB");
    assert_null(c.infra_patch);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- values ----------------------------------------------------------------------------- */

static void test_float_desired_copied_verbatim(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    hj *req = tu_fixture("vsm-float-memory.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192.0 live");
    assert_false(c.failure);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192.0}]");
    assert_int_equal(c.infra_patch->items[0]->items[2]->type, HJ_FLOAT);
    assert_true(c.desired.memory_mib == 8192);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void check_bad_value(const char *ptr, const char *value, const char *where,
                            const char *reason, const char *to_text)
{
    struct env e;
    struct hv_coverage c;
    char msg[512];
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    /* memoryMiB back to its current value, so only the field under test differs */
    tu_set(req, "/desired/infrastructureMachine/spec/memoryMiB", "4096");
    tu_set(req, ptr, value);
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_null(c.infra_patch);
    snprintf(msg, sizeof(msg), NOTHING LEFT "%s (%s)", where, reason);
    assert_string_equal(c.message, msg);
    assert_int_equal(c.n_uncovered, 1);
    assert_string_equal(c.uncovered[0].where, where);
    assert_string_equal(c.uncovered[0].reason, reason);
    assert_int_equal(c.n_fields, 1);
    assert_int_equal(c.fields[0].cls, HV_CLASS_NO);
    assert_string_equal(c.fields[0].to, to_text);
    hv_coverage_free(&c);
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    snprintf(msg, sizeof(msg), BLOCK_PFX "%s (%s)", where, reason);
    assert_string_equal(c.message, msg);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_bad_values_uncovered_with_reason(void **state)
{
    const char *mem = "/desired/infrastructureMachine/spec/memoryMiB";
    const char *cpu = "/desired/infrastructureMachine/spec/numCPUs";
    check_bad_value(mem, "4096.5", IM "memoryMiB", "not a whole positive number of MiB", "4096.5");
    check_bad_value(mem, "\"8Gi\"", IM "memoryMiB", "not a whole positive number of MiB", "8Gi");
    check_bad_value(mem, "0", IM "memoryMiB", "not a whole positive number of MiB", "0");
    check_bad_value(mem, "-8192", IM "memoryMiB", "not a whole positive number of MiB", "-8192");
    check_bad_value(mem, "null", IM "memoryMiB", "not a whole positive number of MiB",
                    "(not a number)");
    check_bad_value(mem, "{\"v\":8192}", IM "memoryMiB", "not a whole positive number of MiB",
                    "(not a number)");
    check_bad_value(cpu, "\"4\"", IM "numCPUs", "not a whole positive number", "4");
    check_bad_value(cpu, "2.5", IM "numCPUs", "not a whole positive number", "2.5");
    check_bad_value(cpu, "3000000000", IM "numCPUs", "not a whole positive number", "3000000000");
}

static void test_field_absent_in_current_is_added(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_del(req, "/current/infrastructureMachine/spec/memoryMiB");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    /* the current size is unknown, so growth cannot be assumed: cold */
    assert_string_equal(c.message, "memoryMiB unset->8192 with a power cycle");
    tu_assert_dump(c.infra_patch, "[{\"op\":\"add\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    hv_coverage_free(&c);
    /* under Never that is not covered */
    e.s.power_cycle = HV_PC_NEVER;
    plan_req(&e, req, &c);
    assert_string_equal(c.message,
                        BLOCK_PFX IM "memoryMiB (needs a power cycle and powerCycle is Never)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_field_removed_in_desired_uncovered(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_del(req, "/desired/infrastructureMachine/spec/memoryMiB");
    plan_req(&e, req, &c);
    assert_string_equal(c.message,
                        "nothing hvupdater can change in place; not covered, left to CAPI: "
                        "infrastructureMachine.spec.memoryMiB (removed from the desired spec)");
    assert_string_equal(c.uncovered[0].reason, "removed from the desired spec");
    assert_string_equal(c.fields[0].to, "unset");
    assert_null(c.infra_patch);
    hv_coverage_free(&c);
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_string_equal(c.message, BLOCK_PFX IM "memoryMiB (removed from the desired spec)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_machine_cleanup_fields_ignored(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    /* everything CAPI strips before comparing Machines */
    tu_set(req, "/current/machine/spec/providerID", "\"vsphere://old\"");
    tu_set(req, "/desired/machine/spec/clusterName", "\"other\"");
    tu_set(req, "/desired/machine/spec/minReadySeconds", "30");
    tu_set(req, "/desired/machine/spec/readinessGates", "[{\"conditionType\":\"X\"}]");
    tu_set(req, "/desired/machine/spec/taints", "[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]");
    tu_set(req, "/desired/machine/spec/deletion",
           "{\"nodeDrainTimeoutSeconds\":10,\"nodeVolumeDetachTimeoutSeconds\":20,"
           "\"nodeDeletionTimeoutSeconds\":30}");
    tu_set(req, "/desired/machine/spec/infrastructureRef/name", "\"x\"");
    tu_set(req, "/desired/machine/spec/bootstrap/configRef/name", "\"x\"");
    tu_set(req, "/desired/machine/metadata/labels/new", "\"label\"");
    tu_set(req, "/desired/infrastructureMachine/metadata/annotations", "{\"a\":\"b\"}");
    tu_set(req, "/desired/bootstrapConfig/metadata/name", "\"renamed\"");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live");
    hv_coverage_free(&c);
    /* but failureDomain and other deletion members count */
    tu_set(req, "/desired/machine/spec/failureDomain", "\"fd-2\"");
    tu_set(req, "/desired/machine/spec/deletion/order", "\"Oldest\"");
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message,
                        BLOCK_PFX "machine.spec.deletion (hvupdater changes hypervisor hardware "
                                  "only); machine.spec.failureDomain (hvupdater changes hypervisor "
                                  "hardware only)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_keys_with_slash_and_tilde_named_plainly(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_set(req, "/desired/infrastructureMachine/spec/a~1b~0c", "1");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live" LEFT IM "a/b~c");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_many_uncovered_capped(void **state)
{
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-grow.json");
    for (int k = 0; k < 40; k++) {
        char p[96];
        snprintf(p, sizeof(p), "/desired/machine/spec/k%02d", k);
        tu_set(req, p, "1");
    }
    plan_req(&e, req, &c);
    assert_int_equal(c.n_uncovered, HV_MAX_ITEMS);
    assert_int_equal(c.n_uncovered_all, 40);
    assert_string_equal(c.uncovered[0].where, "machine.spec.k00");
    assert_string_equal(c.uncovered[31].where, "machine.spec.k31");
    assert_true(strncmp(c.message, "memoryMiB 4096->8192 live" LEFT "machine.spec.k00, ",
                        strlen("memoryMiB 4096->8192 live" LEFT "machine.spec.k00, ")) == 0);
    const char *tail = "machine.spec.k31, and more";
    assert_true(strlen(c.message) > strlen(tail));
    assert_string_equal(c.message + strlen(c.message) - strlen(tail), tail);
    assert_non_null(c.infra_patch);
    hv_coverage_free(&c);
    /* Block: capped to the message buffer, still a Failure */
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_true(strlen(c.message) < sizeof(c.message));
    assert_true(strncmp(c.message, BLOCK_PFX "machine.spec.k00 (", strlen(BLOCK_PFX) + 18) == 0);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- hooks: availability and probe ------------------------------------------------------ */

static void test_available_called_with_vm_ref(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    assert_int_equal(f.avail_calls, 1);
    assert_string_equal(f.avail_backend, "vsphere");
    assert_string_equal(f.avail_kind, "VSphereMachine");
    assert_string_equal(f.avail_ref.server, "vcenter.example.com");
    assert_string_equal(f.avail_ref.uuid, VSM_UUID);
    assert_string_equal(f.avail_ref.name, "");
    assert_int_equal(f.probe_calls, 1); /* IfNeeded asks too: for what this VM cannot take */
    hv_coverage_free(&c);
    hj_free(req);

    /* nothing hardware differs: the backend is not asked */
    f.avail_calls = 0;
    req = tu_fixture("vsm-bootstrap-files.json");
    plan_req(&e, req, &c);
    assert_int_equal(f.avail_calls, 0);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_unavailable_backend_uncovers_fields(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    f.avail_rc = 0;
    f.avail_why = "no vsphere server configured for vcenter.example.com";
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_null(c.infra_patch);
    assert_string_equal(c.message,
                        "nothing hvupdater can change in place; not covered, left to CAPI: "
                        "infrastructureMachine.spec.memoryMiB (no vsphere server configured for "
                        "vcenter.example.com), infrastructureMachine.spec.numCPUs (no vsphere "
                        "server configured for vcenter.example.com)");
    assert_string_equal(c.uncovered[0].reason,
                        "no vsphere server configured for vcenter.example.com");
    assert_string_equal(c.uncovered[1].reason,
                        "no vsphere server configured for vcenter.example.com");
    assert_true(c.desired.memory_mib == -1);
    hv_coverage_free(&c);
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message,
                        BLOCK_PFX IM "memoryMiB (no vsphere server configured for "
                                     "vcenter.example.com); " IM "numCPUs (no vsphere server "
                                     "configured for vcenter.example.com)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_available_for_machine_set_gets_server_only(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    e.hooks = &h;
    hj *req = tu_fixture("vsmt-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_int_equal(f.avail_calls, 1);
    assert_string_equal(f.avail_kind, "VSphereMachineTemplate");
    assert_string_equal(f.avail_ref.server, "vcenter.example.com");
    assert_string_equal(f.avail_ref.uuid, "");
    assert_string_equal(f.avail_ref.name, "");
    /* templates name no VM: no probe, growth stays live under Never */
    assert_int_equal(f.probe_calls, 0);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    hv_coverage_free(&c);
    f.avail_rc = 0;
    f.avail_why = "no vsphere server configured for vcenter.example.com";
    plan_req(&e, req, &c);
    assert_string_equal(
        c.message,
        "nothing hvupdater can change in place; not covered, left to CAPI: "
        "infrastructureMachineTemplate.spec.template.spec.memoryMiB (no vsphere server configured "
        "for vcenter.example.com), infrastructureMachineTemplate.spec.template.spec.numCPUs (no "
        "vsphere server configured for vcenter.example.com)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_vm_not_identifiable(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_BLOCK);
    fake_init(&f, &h);
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-grow.json");
    tu_del(req, "/desired/machine/spec/providerID");
    tu_del(req, "/desired/infrastructureMachine/spec/providerID");
    tu_del(req, "/current/infrastructureMachine/spec/providerID");
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message,
                        BLOCK_PFX IM "memoryMiB (cannot find the VM: no providerID of the "
                                     "form vsphere://<UUID>)");
    assert_int_equal(f.avail_calls, 0);
    hv_coverage_free(&c);
    tu_set(req, "/desired/machine/spec/providerID", "\"vsphere://short\"");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, BLOCK_PFX IM "memoryMiB (cannot find the VM: providerID is not "
                                                "vsphere://<UUID>)");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_probe_live_keeps_field(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_BLOCK);
    fake_init(&f, &h);
    plan_live(&f, HV_F_MEMORY, "virtio-mem");
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-grow.json");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live");
    assert_string_equal(field(&c, HV_F_MEMORY)->how, "virtio-mem");
    assert_int_equal(f.probe_calls, 1);
    assert_string_equal(f.probe_ref.uuid, VSM_UUID);
    assert_string_equal(f.probe_ref.server, "vcenter.example.com");
    /* the whole desired spec, as UpdateMachine plans it */
    assert_true(f.probe_desired.memory_mib == 8192);
    assert_int_equal(f.probe_desired.cpus, 2);
    assert_int_equal(f.probe_desired.cores_per_socket, 1);
    assert_true(f.probe_desired.disk_mib == 25 * 1024);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_probe_cold_under_never(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_BLOCK);
    fake_init(&f, &h);
    plan_cold(&f, HV_F_MEMORY, "no free DIMM slots");
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-grow.json");
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message, BLOCK_PFX IM "memoryMiB (not possible live on this VM now: no "
                                                "free DIMM slots)");
    hv_coverage_free(&c);
    /* a cold answer without a reason */
    plan_cold(&f, HV_F_MEMORY, "");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, BLOCK_PFX IM "memoryMiB (not possible live on this VM now: "
                                                "needs a power cycle)");
    hv_coverage_free(&c);
    /* Fallback: just not covered */
    e.s.on_uncoverable = HV_UNC_FALLBACK;
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "nothing hvupdater can change in place; not covered, left to "
                                   "CAPI: infrastructureMachine.spec.memoryMiB (not possible live "
                                   "on this VM now: needs a power cycle)");
    assert_string_equal(c.uncovered[0].reason,
                        "not possible live on this VM now: needs a power cycle");
    assert_null(c.infra_patch);
    hv_coverage_free(&c);
    /* IfNeeded: asked as well, but a cold answer is covered (UpdateMachine power-cycles);
     * the label stays the reading of the numbers */
    e.s.power_cycle = HV_PC_IF_NEEDED;
    f.probe_calls = 0;
    plan_req(&e, req, &c);
    assert_int_equal(f.probe_calls, 1);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live");
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_probe_mixed_answers(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    plan_live(&f, HV_F_MEMORY, "dimm");
    plan_cold(&f, HV_F_CPUS, "vCPU hot-add is disabled on this VM");
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_int_equal(f.probe_calls, 1); /* asked once for all fields */
    assert_true(f.probe_desired.memory_mib == 8192);
    assert_int_equal(f.probe_desired.cpus, 4);
    assert_string_equal(
        c.message,
        "memoryMiB 4096->8192 live; not covered, left to CAPI: infrastructureMachine.spec.numCPUs "
        "(not possible live on this VM now: vCPU hot-add is disabled on this VM)");
    assert_string_equal(c.uncovered[0].reason,
                        "not possible live on this VM now: vCPU hot-add is disabled on this VM");
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    assert_true(c.desired.memory_mib == 8192);
    assert_int_equal(c.desired.cpus, -1);
    hv_coverage_free(&c);
    hj_free(req);

    /* only cold fields: the probe is still asked, for what the VM already has */
    f.probe_calls = 0;
    memset(f.plan, 0, sizeof(f.plan));
    plan_cold(&f, HV_F_MEMORY, "memory cannot shrink while the VM runs");
    req = tu_fixture("vsm-shrink.json");
    plan_req(&e, req, &c);
    assert_int_equal(f.probe_calls, 1);
    assert_string_equal(c.message, "numCPUs 4->2 already on the VM; not covered, left to CAPI: " IM
                                   "memoryMiB (needs a power cycle and powerCycle is Never)");
    tu_assert_dump(c.infra_patch, "[{\"op\":\"replace\",\"path\":\"/spec/numCPUs\",\"value\":2}]");
    hv_coverage_free(&c);
    /* the VM shows the desired value already (the spec lags behind): covered, nothing to do */
    memset(f.plan, 0, sizeof(f.plan));
    plan_req(&e, req, &c);
    assert_non_null(c.infra_patch);
    assert_non_null(strstr(c.message, "already on the VM"));
    assert_null(strstr(c.message, "not covered"));
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_probe_error(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_BLOCK);
    fake_init(&f, &h);
    f.probe_rc = -1;
    f.probe_why = "vcenter.example.com cannot be reached";
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    /* the VM cannot be read: a retryable Failure under every policy, never a cover, and
     * never a replacement for a hypervisor that is away for a moment */
    for (int pc = 0; pc < 2; pc++) {
        e.s.power_cycle = pc ? HV_PC_IF_NEEDED : HV_PC_NEVER;
        for (int unc = 0; unc < 2; unc++) {
            e.s.on_uncoverable = unc ? HV_UNC_FALLBACK : HV_UNC_BLOCK;
            plan_req(&e, req, &c);
            assert_true(c.failure);
            assert_null(c.infra_patch);
            assert_string_equal(c.message, "cannot check the change on this VM: "
                                           "vcenter.example.com cannot be reached; retry");
            hv_coverage_free(&c);
        }
    }
    hj_free(req);
    env_free(&e);
}

/* Under powerCycle Never, a field the spec does not change but the VM does not show yet (an
 * operation of the previous desired state left it behind) and cannot take live: UpdateMachine
 * would change it too and fail the whole update ("memory needs a power cycle (...) and
 * powerCycle is Never"), so nothing is covered (issue 18, sim seed 1732). */
static void test_never_unchanged_field_needing_a_cycle_covers_nothing(void **state)
{
    (void)state;
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_NEVER, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    plan_live(&f, HV_F_CPUS, "hot-add");
    plan_cold(&f, HV_F_DISK, "the VM is behind the spec");
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    /* the spec changes memory and vCPUs; the VM also lacks the (unchanged) disk size */
    plan_live(&f, HV_F_MEMORY, "hot-add");
    plan_req(&e, req, &c);
    assert_null(c.infra_patch);
    assert_string_equal(c.uncovered[0].reason,
                        "the VM cannot take diskGiB as desired: needs a power cycle and "
                        "powerCycle is Never");
    hv_coverage_free(&c);
    /* under IfNeeded the power cycle is allowed: covered */
    e.s.power_cycle = HV_PC_IF_NEEDED;
    plan_req(&e, req, &c);
    assert_non_null(c.infra_patch);
    assert_int_equal(c.n_uncovered_all, 0);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* Under the default IfNeeded, CanUpdateMachine asks the VM too: a rule that depends on the VM
 * (here vSphere's: numCPUs must be a multiple of the VM's own cores per socket when the spec
 * names none) uncovers the field with the backend's reason, the one UpdateMachine gives. */
static void test_if_needed_applies_the_vms_own_rules(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    f.plan[HV_F_CPUS].how = HV_HOW_IMPOSSIBLE;
    snprintf(f.plan[HV_F_CPUS].reason, sizeof(f.plan[HV_F_CPUS].reason),
             "cpus must be a multiple of coresPerSocket (2)");
    plan_live(&f, HV_F_MEMORY, "hot-add");
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; not covered, left to CAPI: " IM
                                   "numCPUs (cpus must be a multiple of coresPerSocket (2))");
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/memoryMiB\",\"value\":8192}]");
    hv_coverage_free(&c);
    /* Block: a Failure naming the rule */
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message, BLOCK_PFX IM "numCPUs (cpus must be a multiple of "
                                                "coresPerSocket (2))");
    hv_coverage_free(&c);
    /* a field the spec does not change but the VM cannot take (the disk the spec names, on a
     * VM with snapshots): UpdateMachine would fail the whole update, so nothing is covered */
    e.s.on_uncoverable = HV_UNC_FALLBACK;
    memset(f.plan, 0, sizeof(f.plan));
    plan_live(&f, HV_F_MEMORY, "hot-add");
    f.plan[HV_F_DISK].how = HV_HOW_IMPOSSIBLE;
    snprintf(f.plan[HV_F_DISK].reason, sizeof(f.plan[HV_F_DISK].reason), "the VM has snapshots");
    plan_req(&e, req, &c);
    assert_null(c.infra_patch);
    assert_string_equal(c.uncovered[0].reason,
                        "the VM cannot take diskGiB as desired: the VM has snapshots");
    hv_coverage_free(&c);
    /* the VM is gone: not covered (UpdateMachine could only fail) */
    memset(f.plan, 0, sizeof(f.plan));
    f.probe_rc = -3;
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_null(c.infra_patch);
    assert_string_equal(c.uncovered[0].reason, "the VM was not found");
    hv_coverage_free(&c);
    /* the hypervisor has not answered within the wait: a retryable Failure */
    f.probe_rc = -2;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message,
                        "still asking the hypervisor whether this VM can take the change; retry");
    hv_coverage_free(&c);
    hj_free(req);
    /* CanUpdateMachineSet names no VM: nothing to ask */
    f.probe_rc = 0;
    f.probe_calls = 0;
    req = tu_fixture("vsmt-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_int_equal(f.probe_calls, 0);
    assert_false(c.failure);
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* A backend's rules that hold whatever the VM (hooks->check) uncover a value with the reason
 * the backend gives; the check sees the whole desired hardware, unchanged fields included. */
static struct hv_hw check_seen;
static int check_calls;

static void fake_check(void *ctx, const struct hv_profile *p, const struct hv_hw *desired,
                       struct hv_field_plan plan[HV_F_COUNT])
{
    (void)ctx;
    (void)p;
    check_calls++;
    check_seen = *desired;
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    if (desired->memory_mib > 0 && desired->memory_mib % 4) {
        plan[HV_F_MEMORY].how = HV_HOW_IMPOSSIBLE;
        snprintf(plan[HV_F_MEMORY].reason, sizeof(plan[0].reason),
                 "memoryMiB must be a multiple "
                 "of 4");
    }
    if (desired->cpus > 0 && desired->cores_per_socket > 0 &&
        desired->cpus % desired->cores_per_socket) {
        plan[HV_F_CPUS].how = HV_HOW_IMPOSSIBLE;
        snprintf(plan[HV_F_CPUS].reason, sizeof(plan[0].reason),
                 "cpus must be a multiple of coresPerSocket (%d)", desired->cores_per_socket);
    }
}

/* UpdateMachine can never confirm memory or vCPUs in a vSphere guest, so under
 * guestVerification Required CanUpdate must not cover them (it would fail later). */
static void test_guest_required_on_vsphere_uncovers_memory_and_cpus(void **state)
{
    (void)state;
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    plan_req(&e, req, &c);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    hv_coverage_free(&c);
    e.s.guest_check = HV_GC_REQUIRED;
    plan_req(&e, req, &c);
    assert_null(c.infra_patch);
    assert_non_null(strstr(c.message, "memoryMiB (guestVerification is Required and vSphere "
                                      "gives no guest view)"));
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* Issue 17.3: no backend has a guest view of a disk, so under guestVerification Required a
 * disk change (here vSphere's disk-only change) is never covered: UpdateMachine would fail
 * it, and a power cycle would not make the guest report it. */
static void test_guest_required_uncovers_a_disk_change(void **state)
{
    (void)state;
    struct env e;
    struct hv_coverage c;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    hj *req = tu_fixture("vsm-disk.json");
    plan_req(&e, req, &c);
    assert_non_null(c.infra_patch); /* IfAvailable: covered */
    hv_coverage_free(&c);
    e.s.guest_check = HV_GC_REQUIRED;
    plan_req(&e, req, &c);
    assert_null(c.infra_patch);
    assert_non_null(strstr(c.message, "(guestVerification is Required and no guest shows this "
                                      "field)"));
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

static void test_backend_static_rules_uncover(void **state)
{
    struct env e;
    struct hv_coverage c;
    struct fake f;
    struct hv_plan_hooks h;
    env_init(&e, HV_PC_IF_NEEDED, HV_UNC_FALLBACK);
    fake_init(&f, &h);
    h.check = fake_check;
    e.hooks = &h;
    hj *req = tu_fixture("vsm-memory-cpu-grow.json");
    tu_set(req, "/desired/infrastructureMachine/spec/memoryMiB", "8193");
    tu_set(req, "/current/infrastructureMachine/spec/numCoresPerSocket", "2");
    tu_set(req, "/desired/infrastructureMachine/spec/numCoresPerSocket", "2");
    tu_set(req, "/desired/infrastructureMachine/spec/numCPUs", "3");
    check_calls = 0;
    plan_req(&e, req, &c);
    assert_int_equal(check_calls, 1);
    assert_true(check_seen.memory_mib == 8193);
    assert_int_equal(check_seen.cpus, 3);
    assert_int_equal(check_seen.cores_per_socket, 2); /* unchanged, still given */
    assert_null(c.infra_patch);
    assert_string_equal(c.message, NOTHING LEFT IM "memoryMiB (memoryMiB must be a multiple of "
                                                   "4), " IM "numCPUs (cpus must be a multiple of "
                                                   "coresPerSocket (2))");
    hv_coverage_free(&c);
    e.s.on_uncoverable = HV_UNC_BLOCK;
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_string_equal(c.message,
                        BLOCK_PFX IM "memoryMiB (memoryMiB must be a multiple of 4); " IM
                                     "numCPUs (cpus must be a multiple of coresPerSocket (2))");
    hv_coverage_free(&c);
    /* values the rules accept stay covered */
    tu_set(req, "/desired/infrastructureMachine/spec/memoryMiB", "8192");
    tu_set(req, "/desired/infrastructureMachine/spec/numCPUs", "4");
    plan_req(&e, req, &c);
    assert_false(c.failure);
    assert_string_equal(c.message, "memoryMiB 4096->8192 live; numCPUs 2->4 live");
    hv_coverage_free(&c);
    /* templates (CanUpdateMachineSet) get the same rules */
    hj_free(req);
    req = tu_fixture("vsmt-memory-cpu-grow.json");
    tu_set(req, "/desired/infrastructureMachineTemplate/spec/template/spec/memoryMiB", "8193");
    plan_req(&e, req, &c);
    assert_true(c.failure);
    assert_non_null(strstr(c.message, "memoryMiB (memoryMiB must be a multiple of 4)"));
    hv_coverage_free(&c);
    hj_free(req);
    env_free(&e);
}

/* ---- determinism ------------------------------------------------------------------------ */

static void test_deterministic_messages(void **state)
{
    static const enum hv_on_uncoverable uncs[] = {HV_UNC_FALLBACK, HV_UNC_BLOCK};
    for (size_t u = 0; u < 2; u++) {
        struct env e;
        struct fake f;
        struct hv_plan_hooks h;
        env_init(&e, HV_PC_NEVER, uncs[u]);
        fake_init(&f, &h);
        plan_cold(&f, HV_F_MEMORY, "no free DIMM slots");
        plan_live(&f, HV_F_CPUS, "vcpu hot-plug");
        plan_cold(&f, HV_F_CORES, "coresPerSocket only changes while the VM is off");
        e.hooks = &h;
        hj *req = tu_fixture("vsm-version-and-memory.json");
        tu_set(req, "/desired/infrastructureMachine/spec/numCPUs", "4");
        tu_set(req, "/desired/infrastructureMachine/spec/numCoresPerSocket", "2");
        tu_set(req, "/desired/infrastructureMachine/spec/zeta", "1");
        tu_set(req, "/desired/infrastructureMachine/spec/alpha", "1");
        tu_set(req, "/desired/bootstrapConfig/spec/files", "[]");
        tu_set(req, "/desired/machine/spec/failureDomain", "\"fd\"");
        char first[sizeof(((struct hv_coverage *)0)->message)];
        char *first_patch = NULL;
        for (int run = 0; run < 3; run++) {
            struct hv_coverage c;
            plan_req(&e, req, &c);
            char *patch = c.infra_patch ? hj_dump(c.infra_patch, NULL) : strdup("none");
            if (run == 0) {
                snprintf(first, sizeof(first), "%s", c.message);
                first_patch = patch;
            } else {
                assert_memory_equal(c.message, first, strlen(first) + 1);
                assert_string_equal(patch, first_patch);
                free(patch);
            }
            hv_coverage_free(&c);
        }
        if (uncs[u] == HV_UNC_FALLBACK)
            assert_string_equal(
                first, "numCPUs 2->4 live; not covered, left to CAPI: "
                       "infrastructureMachine.spec.alpha, infrastructureMachine.spec.zeta, "
                       "infrastructureMachine.spec.memoryMiB (not possible live on this VM now: no "
                       "free DIMM slots), infrastructureMachine.spec.numCoresPerSocket (needs a "
                       "power cycle and powerCycle is Never), machine.spec.failureDomain, "
                       "machine.spec.version, bootstrapConfig.spec.files");
        else
            assert_string_equal(first, BLOCK_PFX IM
                                "alpha (not a field hvupdater can change); " IM
                                "zeta (not a field hvupdater can change); " IM
                                "memoryMiB (not possible live on this VM now: no free DIMM "
                                "slots); " IM "numCoresPerSocket (needs a power cycle and "
                                "powerCycle is Never); machine.spec.failureDomain (hvupdater "
                                "changes hypervisor hardware only); machine.spec.version "
                                "(hvupdater changes hypervisor hardware only); "
                                "bootstrapConfig.spec.files (hvupdater changes hypervisor "
                                "hardware only)");
        free(first_patch);
        hj_free(req);
        env_free(&e);
    }
}

/* ---- identity, desired hardware, units -------------------------------------------------- */

static void test_identity_rules(void **state)
{
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    const struct hv_profile *vs =
        hv_profile_find(&ps, "infrastructure.cluster.x-k8s.io/v1beta1", "VSphereMachine");
    const struct hv_profile *lv =
        hv_profile_find(&ps, "infrastructure.cluster.x-k8s.io/v1alpha1", "LibvirtMachine");
    assert_non_null(vs);
    assert_non_null(lv);
    struct hv_vm_ref ref;
    char why[200];

    hj *m =
        tu_json("{\"spec\":{\"providerID\":\"libvirt://6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f\"}}");
    hj *infra = tu_json("{\"metadata\":{\"name\":\"vm-1\"},\"spec\":{\"server\":\"vc\"}}");
    assert_int_equal(hv_identity(lv, m, infra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.uuid, "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f");
    assert_string_equal(ref.name, "");
    assert_string_equal(ref.server, ""); /* libvirt has no serverPath built in */
    /* no providerID on the Machine: by name */
    assert_int_equal(hv_identity(lv, NULL, infra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.uuid, "");
    assert_string_equal(ref.name, "vm-1");
    /* a malformed providerID with the right prefix is an error, not a name lookup */
    hj *bad = tu_json("{\"spec\":{\"providerID\":\"libvirt://vm-1\"}}");
    assert_int_equal(hv_identity(lv, bad, infra, &ref, why, sizeof(why)), -1);
    assert_string_equal(why, "providerID is not libvirt://<UUID>");
    hj *noname = tu_json("{\"metadata\":{},\"spec\":{}}");
    assert_int_equal(hv_identity(lv, NULL, noname, &ref, why, sizeof(why)), -1);
    assert_string_equal(why, "no providerID of the form libvirt://<UUID> and no metadata.name");

    /* vSphere: providerID from the infra spec when the Machine has none; server from spec */
    hj *vinfra = tu_json("{\"metadata\":{\"name\":\"vm-1\"},\"spec\":{\"server\":\"vc.example\","
                         "\"providerID\":\"vsphere://" VSM_UUID "\"}}");
    assert_int_equal(hv_identity(vs, NULL, vinfra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.uuid, VSM_UUID);
    assert_string_equal(ref.server, "vc.example");
    assert_int_equal(hv_identity(vs, NULL, infra, &ref, why, sizeof(why)), -1);
    assert_string_equal(why, "no providerID of the form vsphere://<UUID>");

    hj_free(m);
    hj_free(infra);
    hj_free(bad);
    hj_free(noname);
    hj_free(vinfra);
    hv_profiles_free(&ps);
}

static void test_desired_hw(void **state)
{
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    const struct hv_profile *vs =
        hv_profile_find(&ps, "infrastructure.cluster.x-k8s.io/v1beta1", "VSphereMachine");
    const struct hv_profile *lv =
        hv_profile_find(&ps, "infrastructure.cluster.x-k8s.io/v1alpha1", "LibvirtMachine");
    struct hv_hw hw;
    hj *v = tu_json("{\"spec\":{\"memoryMiB\":8192.0,\"numCPUs\":4,\"numCoresPerSocket\":2}}");
    hv_desired_hw(vs, v, &hw);
    assert_true(hw.memory_mib == 8192);
    assert_int_equal(hw.cpus, 4);
    assert_int_equal(hw.cores_per_socket, 2);
    hj_free(v);
    v = tu_json("{\"spec\":{\"memoryMiB\":4096.5,\"numCPUs\":\"4\"}}");
    hv_desired_hw(vs, v, &hw);
    assert_true(hw.memory_mib == -1);
    assert_int_equal(hw.cpus, -1);
    assert_int_equal(hw.cores_per_socket, -1);
    hj_free(v);
    v = tu_json("{\"spec\":{\"memoryMiB\":2048,\"vcpu\":3,\"numCoresPerSocket\":2}}");
    hv_desired_hw(lv, v, &hw);
    assert_true(hw.memory_mib == 2048);
    assert_int_equal(hw.cpus, 3);
    assert_int_equal(hw.cores_per_socket, -1); /* not a libvirt profile field */
    hj_free(v);
    hv_profiles_free(&ps);
}

static void test_unit_conversion(void **state)
{
    struct {
        const char *v;
        enum hv_unit u;
        int64_t want;
    } cases[] = {
        {"4096", HV_UNIT_MIB, 4096},    {"4096.0", HV_UNIT_MIB, 4096},
        {"4096.5", HV_UNIT_MIB, -1},    {"0", HV_UNIT_MIB, -1},
        {"-1", HV_UNIT_MIB, -1},        {"\"4096\"", HV_UNIT_MIB, -1},
        {"16", HV_UNIT_GIB, 16384},     {"4194304", HV_UNIT_KIB, 4096},
        {"1000", HV_UNIT_KIB, -1},      {"17179869184", HV_UNIT_BYTES, 16384},
        {"1000000", HV_UNIT_BYTES, -1}, {"1e300", HV_UNIT_MIB, -1},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        hj *v = tu_json(cases[k].v);
        int64_t got = hv_unit_to_mib(v, cases[k].u);
        if (got != cases[k].want)
            fail_msg("%s in unit %d: got %lld want %lld", cases[k].v, (int)cases[k].u,
                     (long long)got, (long long)cases[k].want);
        hj_free(v);
    }
    assert_true(hv_unit_to_mib(NULL, HV_UNIT_MIB) == -1);
}

/* BUG: hv_unit_to_mib is documented (profile.h) to return -1 only "when not a whole, positive
 * number of MiB", and plan.c reports exactly that reason, but it rejects every non-whole value
 * in the field's own unit: 8.5 GiB (= 8704 MiB) and 0.5 GiB (= 512 MiB) come back -1, so a
 * GiB-unit profile calls a valid size "not a whole positive number of MiB".
 * Fix (src/hooks/profile.c, hv_unit_to_mib): for HJ_FLOAT in HV_UNIT_GIB compute `double m = x *
 * 1024.0;` and accept when `m > 0 && m == floor(m) && m <= 9.0e15` (return (int64_t)m); keep the
 * integer paths for HJ_INT. (Or, if whole values of the unit are intended, say so in profile.h
 * and give plan.c a reason naming the unit.) Kept out of the run list until decided. */
static void test_unit_fractional_gib_is_whole_mib(void **state)
{
    hj *v = tu_json("8.5");
    assert_true(hv_unit_to_mib(v, HV_UNIT_GIB) == 8704);
    hj_free(v);
    v = tu_json("0.5");
    assert_true(hv_unit_to_mib(v, HV_UNIT_GIB) == 512);
    hj_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_grow_is_live),
        cmocka_unit_test(test_memory_and_cpu_grow_are_live),
        cmocka_unit_test(test_shrink_is_cold),
        cmocka_unit_test(test_cores_per_socket_is_cold_even_when_growing),
        cmocka_unit_test(test_other_differences_fallback),
        cmocka_unit_test(test_uncovered_reasons),
        cmocka_unit_test(test_never_drops_cold_fields),
        cmocka_unit_test(test_never_keeps_live_growth),
        cmocka_unit_test(test_never_mixed_growth_and_shrink),
        cmocka_unit_test(test_block_turns_uncovered_into_failure),
        cmocka_unit_test(test_block_with_everything_covered_is_success),
        cmocka_unit_test(test_block_sees_differences_under_long_keys),
        cmocka_unit_test(test_block_lists_every_item_in_order),
        cmocka_unit_test(test_unknown_kind_declined_never_failure),
        cmocka_unit_test(test_unknown_version_group_or_missing_kind_declined),
        cmocka_unit_test(test_template_kind_mismatch_declined),
        cmocka_unit_test(test_kind_or_version_change_uncovered),
        cmocka_unit_test(test_machine_set_templates),
        cmocka_unit_test(test_v1beta2_vspheremachine),
        cmocka_unit_test(test_libvirt_machine),
        cmocka_unit_test(test_custom_profile_from_config),
        cmocka_unit_test(test_float_desired_copied_verbatim),
        cmocka_unit_test(test_bad_values_uncovered_with_reason),
        cmocka_unit_test(test_field_absent_in_current_is_added),
        cmocka_unit_test(test_field_removed_in_desired_uncovered),
        cmocka_unit_test(test_machine_cleanup_fields_ignored),
        cmocka_unit_test(test_keys_with_slash_and_tilde_named_plainly),
        cmocka_unit_test(test_many_uncovered_capped),
        cmocka_unit_test(test_available_called_with_vm_ref),
        cmocka_unit_test(test_unavailable_backend_uncovers_fields),
        cmocka_unit_test(test_available_for_machine_set_gets_server_only),
        cmocka_unit_test(test_vm_not_identifiable),
        cmocka_unit_test(test_probe_live_keeps_field),
        cmocka_unit_test(test_probe_cold_under_never),
        cmocka_unit_test(test_probe_mixed_answers),
        cmocka_unit_test(test_probe_error),
        cmocka_unit_test(test_if_needed_applies_the_vms_own_rules),
        cmocka_unit_test(test_never_unchanged_field_needing_a_cycle_covers_nothing),
        cmocka_unit_test(test_backend_static_rules_uncover),
        cmocka_unit_test(test_guest_required_on_vsphere_uncovers_memory_and_cpus),
        cmocka_unit_test(test_guest_required_uncovers_a_disk_change),
        cmocka_unit_test(test_deterministic_messages),
        cmocka_unit_test(test_identity_rules),
        cmocka_unit_test(test_desired_hw),
        cmocka_unit_test(test_unit_conversion),
        cmocka_unit_test(test_unit_fractional_gib_is_whole_mib),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
