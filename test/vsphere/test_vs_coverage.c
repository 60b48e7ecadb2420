/* test_vs_coverage.c: what CanUpdateMachine covers against what UpdateMachine then does on
 * the govmomi simulator, through the serving process's own wiring (hv_runtime: config ->
 * vSphere backend -> engine -> hooks). UpdateMachine is called the way CAPI calls it: again
 * after retryAfterSeconds (scaled down to 10 ms a second), until done or Failure.
 *  - a property test: for many generated (current, desired) VSphereMachine specs, whenever
 *    CanUpdateMachine covers the change, UpdateMachine brings the VM there and never fails;
 *  - the vSphere rules that hold for every VM (4 MiB multiples, cpus a multiple of
 *    coresPerSocket, the platform maxima) are applied at CanUpdate with UpdateMachine's reason;
 *  - powerCycle=Never covers a value the VM already has;
 *  - the rules that depend on the VM (its own cores per socket, snapshots) are applied at
 *    CanUpdateMachine under the default powerCycle=IfNeeded too, and the property holds on
 *    a VM where they decide.
 * VM 0: plain (no hot-add: growth is cold); VM 1: memory and CPU hot-add; VM 2: 4 vCPUs, 2
 * cores per socket; VM 3: a snapshot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "engine.h"
#include "hooks.h"
#include "json.h"
#include "log.h"
#include "runtime.h"
#include "vcsim_harness.h"

static struct vcsim sim;
static struct hv_config cfg;
static struct hv_runtime *rt;
static const struct hv_hooks_ctx *ctx;

static int setup(void **state)
{
    static const char *const flags[] = {
        "-hosts", "1",
        "-vms",   "4",
        "-vm",    "all:memory=4096,cpus=2,cores=1",
        "-vm",    "1:memhotadd,cpuhotadd",
        "-vm",    "2:cpus=4,cores=2",
        "-vm",    "3:disk=20,snapshot",
        NULL,
    };
    (void)state;
    hv_log_set_level(HV_LOG_ERROR);
    if (vcsim_start(&sim, flags) != 0)
        return -1;
    char ufile[400], doc[2048], err[256];
    snprintf(ufile, sizeof(ufile), "%s/username", sim.dir);
    FILE *f = fopen(ufile, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", sim.username);
    fclose(f);
    snprintf(
        doc, sizeof(doc),
        "{\"vsphere\":{\"servers\":[{\"name\":\"vcsim\",\"url\":\"%s\",\"usernameFile\":\"%s\","
        "\"passwordFile\":\"%s\",\"thumbprint\":\"%s\"}]},"
        "\"engine\":{\"workers\":2,\"stepTimeoutSeconds\":10}}",
        sim.url, ufile, sim.password_file, sim.sha256);
    hv_config_default(&cfg);
    if (hv_config_parse(&cfg, doc, strlen(doc), err, sizeof(err)) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    rt = hv_runtime_new(&cfg, err, sizeof(err));
    if (!rt) {
        fprintf(stderr, "runtime: %s\n", err);
        return -1;
    }
    ctx = hv_runtime_hooks(rt);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hv_runtime_free(rt);
    hv_config_free(&cfg);
    vcsim_stop(&sim);
    return 0;
}

static hj *call(enum hv_hook h, const char *req)
{
    char err[128];
    hj *r = hj_parse(req, strlen(req), err, sizeof(err));
    if (!r)
        fail_msg("bad request JSON (%s): %s", err, req);
    bool failure;
    size_t len;
    char *out = hv_hook_handle(ctx, h, r, &failure, NULL, 0, &len);
    hj_free(r);
    hj *resp = hj_parse(out, len, err, sizeof(err));
    free(out);
    assert_non_null(resp);
    return resp;
}

static bool is_failure(const hj *resp)
{
    return !strcmp(hj_get_str(resp, "status"), "Failure");
}

static const char *message(const hj *resp)
{
    const char *m = hj_get_str(resp, "message");
    return m ? m : "";
}

struct spec {
    char mem[48], cpus[48], cores[48]; /* JSON value texts; cores "": absent */
    char disk[48];                     /* diskGiB; "" (or never set): absent */
};

static void infra(char *out, size_t cap, const struct spec *s)
{
    char cores[80] = "", disk[80] = "";
    if (s->cores[0])
        snprintf(cores, sizeof(cores), ",\"numCoresPerSocket\":%s", s->cores);
    if (s->disk[0])
        snprintf(disk, sizeof(disk), ",\"diskGiB\":%s", s->disk);
    snprintf(out, cap,
             "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
             "\"VSphereMachine\",\"metadata\":{\"name\":\"vsm\",\"namespace\":\"default\"},"
             "\"spec\":{\"server\":\"vcsim\",\"datacenter\":\"DC0\",\"template\":\"t\","
             "\"memoryMiB\":%s,\"numCPUs\":%s%s%s}}",
             s->mem, s->cpus, cores, disk);
}

static void machine(char *out, size_t cap, size_t vm)
{
    snprintf(out, cap,
             "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"metadata\":"
             "{\"name\":\"m\",\"namespace\":\"default\"},\"spec\":{\"clusterName\":\"c\","
             "\"version\":\"v1.31.0\",\"providerID\":\"vsphere://%s\"}}",
             vcsim_vm(&sim, vm)->uuid);
}

/* CanUpdateMachine; a retryable "still asking" Failure is asked again, as CAPI would. */
static hj *can_update(size_t vm, const struct spec *cur, const struct spec *des,
                      const char *settings)
{
    char c[1024], d[1024], m[512], req[4096];
    infra(c, sizeof(c), cur);
    infra(d, sizeof(d), des);
    machine(m, sizeof(m), vm);
    snprintf(req, sizeof(req),
             "{\"apiVersion\":\"%s\",\"kind\":\"CanUpdateMachineRequest\",\"settings\":%s,"
             "\"current\":{\"machine\":%s,\"infrastructureMachine\":%s},"
             "\"desired\":{\"machine\":%s,\"infrastructureMachine\":%s}}",
             HV_HOOKS_API, settings, m, c, m, d);
    for (int k = 0; k < 200; k++) {
        hj *r = call(HV_HOOK_CAN_UPDATE_MACHINE, req);
        if (!is_failure(r) || !strstr(message(r), "still asking the hypervisor"))
            return r;
        hj_free(r);
        usleep(20 * 1000);
    }
    fail_msg("CanUpdateMachine kept asking the hypervisor");
    return NULL;
}

/* UpdateMachine until done or Failure, honouring retryAfterSeconds (1 s = 10 ms here). */
static hj *update(size_t vm, const struct spec *des, const char *settings)
{
    char d[1024], m[512], req[4096];
    infra(d, sizeof(d), des);
    machine(m, sizeof(m), vm);
    snprintf(req, sizeof(req),
             "{\"apiVersion\":\"%s\",\"kind\":\"UpdateMachineRequest\",\"settings\":%s,"
             "\"desired\":{\"machine\":%s,\"infrastructureMachine\":%s}}",
             HV_HOOKS_API, settings, m, d);
    for (int k = 1; k <= 400; k++) {
        hj *r = call(HV_HOOK_UPDATE_MACHINE, req);
        const hj *retry = hj_get(r, "retryAfterSeconds");
        assert_non_null(retry);
        if (is_failure(r) || retry->i == 0)
            return r;
        usleep((useconds_t)retry->i * 10 * 1000);
        hj_free(r);
    }
    fail_msg("UpdateMachine still in progress after 400 calls");
    return NULL;
}

/* What vCenter shows for the VM: memory MiB, vCPUs, cores per socket, powered on. */
static void shows(size_t vm, long long *mem, int *cpus, int *cores, bool *on)
{
    struct hv_vsphere_server s = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&s);
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.server, sizeof(ref.server), "vcsim");
    snprintf(ref.uuid, sizeof(ref.uuid), "%s", vcsim_vm(&sim, vm)->uuid);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_true(obs.found);
    *mem = obs.hw.memory_mib;
    *cpus = obs.hw.cpus;
    *cores = obs.hw.cores_per_socket;
    *on = obs.power == HV_POWER_ON;
    b->ops->free(b);
}

static struct spec spec_of(const char *mem, const char *cpus, const char *cores)
{
    struct spec s;
    memset(&s, 0, sizeof(s));
    snprintf(s.mem, sizeof(s.mem), "%s", mem);
    snprintf(s.cpus, sizeof(s.cpus), "%s", cpus);
    snprintf(s.cores, sizeof(s.cores), "%s", cores);
    return s;
}

/* ---- SOAP calls of a hot-add ---------------------------------------------------------------- */

/* What a memory hot-add costs vCenter, driven as CAPI drives it (the first test, the VM listed
 * by the engine's first scan, which leaves its moref: no FindByUuid): one ReconfigVM_Task carrying
 * the hardware and the waiting record, whose task poll also reads the VM after it (that read is the
 * look that confirms the change); one ReconfigVM_Task marking the record done, with its poll; and
 * the first observation. Calls arriving while that pass runs, or after its "done", add none.
 * Counted once the engine's first scan has ended: the scan lists the VMs with calls of its own,
 * at the engine's start, and on a loaded machine it ran inside the counted span (a CI run:
 * RetrievePropertiesEx 4, not 3). */
static void test_hot_add_calls(void **state)
{
    (void)state;
    struct hv_engine *e = hv_runtime_engine(rt);
    for (int k = 0; !hv_engine_scanned(e); k++) {
        if (k == 3000)
            fail_msg("the engine's first scan did not end within 30 s");
        usleep(10 * 1000);
    }
    long find = vcsim_calls(&sim, "FindByUuid"), reconf = vcsim_calls(&sim, "ReconfigVM_Task"),
         props = vcsim_calls(&sim, "RetrievePropertiesEx");
    struct spec d = spec_of("8192", "2", "1");
    hj *r = update(1, &d, "{}");
    if (is_failure(r) || strncmp(message(r), "done: ", 6) != 0)
        fail_msg("UpdateMachine: %s", message(r));
    hj_free(r);
    /* no FindByUuid: the scan left each VM's moref */
    assert_int_equal(vcsim_calls(&sim, "FindByUuid") - find, 0);
    assert_int_equal(vcsim_calls(&sim, "ReconfigVM_Task") - reconf, 2);
    assert_int_equal(vcsim_calls(&sim, "RetrievePropertiesEx") - props, 3);
    long long mem;
    int cpus, cores;
    bool on;
    shows(1, &mem, &cpus, &cores, &on);
    assert_true(on);
    assert_int_equal(mem, 8192);
    /* and back (a hot-add cannot shrink: a power cycle), for the tests that follow */
    d = spec_of("4096", "2", "1");
    r = update(1, &d, "{\"powerOffMode\":\"Hard\"}");
    if (is_failure(r))
        fail_msg("UpdateMachine back: %s", message(r));
    hj_free(r);
}

/* ---- the vSphere rules that hold for every VM ---------------------------------------------- */

static void expect_uncovered(const struct spec *des, const char *where_reason,
                             const char *update_msg)
{
    struct spec cur = spec_of("4096", "2", "1");
    hj *r = can_update(0, &cur, des, "{\"onUncoverable\":\"Block\"}");
    assert_true(is_failure(r));
    if (!strstr(message(r), where_reason))
        fail_msg("CanUpdateMachine: %s", message(r));
    hj_free(r);
    r = can_update(0, &cur, des, "{}");
    assert_false(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    hj_free(r);
    /* UpdateMachine (which CAPI will not call now) refuses with the same reason */
    r = update(0, des, "{}");
    assert_true(is_failure(r));
    assert_string_equal(message(r), update_msg);
    hj_free(r);
}

static void test_static_rules_are_applied_at_can_update(void **state)
{
    (void)state;
    struct spec d = spec_of("8193", "2", "1");
    expect_uncovered(&d, "infrastructureMachine.spec.memoryMiB (memoryMiB must be a multiple of 4)",
                     "cannot change memory: memoryMiB must be a multiple of 4");
    d = spec_of("4096", "3", "2");
    expect_uncovered(
        &d, "infrastructureMachine.spec.numCPUs (cpus must be a multiple of coresPerSocket (2))",
        "cannot change vCPUs: cpus must be a multiple of coresPerSocket (2)");
    d = spec_of("9000000000000000", "2", "1");
    expect_uncovered(&d,
                     "infrastructureMachine.spec.memoryMiB (memoryMiB above vSphere's maximum for "
                     "a VM (25149440 MiB))",
                     "cannot change memory: memoryMiB above vSphere's maximum for a VM (25149440 "
                     "MiB)");
    d = spec_of("4096", "1024", "1");
    expect_uncovered(&d,
                     "infrastructureMachine.spec.numCPUs (cpus above vSphere's maximum for a VM "
                     "(768))",
                     "cannot change vCPUs: cpus above vSphere's maximum for a VM (768)");
    /* the largest VM there is stays covered, and is done */
    d = spec_of("25149440", "768", "8");
    struct spec cur = spec_of("4096", "2", "1");
    hj *r = can_update(0, &cur, &d, "{\"onUncoverable\":\"Block\"}");
    if (is_failure(r))
        fail_msg("not covered: %s", message(r));
    hj_free(r);
    r = update(0, &d, "{\"powerOffMode\":\"Hard\"}");
    if (is_failure(r))
        fail_msg("UpdateMachine: %s", message(r));
    hj_free(r);
    /* and back, for the tests that follow */
    d = spec_of("4096", "2", "1");
    r = update(0, &d, "{\"powerOffMode\":\"Hard\"}");
    assert_false(is_failure(r));
    hj_free(r);
}

/* ---- the rules that depend on the VM ------------------------------------------------------- */

/* Under the default powerCycle=IfNeeded, CanUpdateMachine reads the VM and does not cover
 * what UpdateMachine refuses for it, with UpdateMachine's reason. */
static void test_vm_rules_are_applied_at_can_update(void **state)
{
    (void)state;
    /* numCPUs 4 -> 5 with no numCoresPerSocket in the spec, on a VM with 2 cores per socket */
    struct spec cur = spec_of("4096", "4", ""), des = spec_of("4096", "5", "");
    hj *r = can_update(2, &cur, &des, "{}");
    assert_false(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    if (!strstr(message(r), "infrastructureMachine.spec.numCPUs (cpus must be a multiple of "
                            "coresPerSocket (2))"))
        fail_msg("CanUpdateMachine: %s", message(r));
    hj_free(r);
    r = update(2, &des, "{}");
    assert_true(is_failure(r));
    assert_string_equal(message(r),
                        "cannot change vCPUs: cpus must be a multiple of coresPerSocket (2)");
    hj_free(r);
    /* 4 -> 6 is a multiple: covered, and done */
    des = spec_of("4096", "6", "");
    r = can_update(2, &cur, &des, "{\"onUncoverable\":\"Block\"}");
    if (is_failure(r) || !hj_get(r, "infrastructureMachinePatch"))
        fail_msg("not covered: %s", message(r));
    hj_free(r);
    r = update(2, &des, "{\"powerOffMode\":\"Hard\"}");
    if (is_failure(r))
        fail_msg("UpdateMachine: %s", message(r));
    hj_free(r);

    /* a disk on a VM with snapshots */
    cur = spec_of("4096", "2", "1");
    snprintf(cur.disk, sizeof(cur.disk), "20");
    des = cur;
    snprintf(des.disk, sizeof(des.disk), "30");
    r = can_update(3, &cur, &des, "{\"onUncoverable\":\"Block\"}");
    assert_true(is_failure(r));
    if (!strstr(message(r), "infrastructureMachine.spec.diskGiB (the VM has snapshots, and "
                            "vSphere cannot grow a disk that has them; delete or consolidate "
                            "them)"))
        fail_msg("CanUpdateMachine: %s", message(r));
    hj_free(r);
    r = update(3, &des, "{}");
    assert_true(is_failure(r));
    assert_non_null(strstr(message(r), "cannot change disk: the VM has snapshots"));
    hj_free(r);
}

/* ---- powerCycle=Never and values the VM already has ---------------------------------------- */

static void test_never_covers_a_value_the_vm_already_has(void **state)
{
    (void)state;
    const char *never = "{\"powerCycle\":\"Never\"}";
    /* the spec says 8192 -> 4096 and 4 -> 2 vCPUs (shrinks), the VM already has 4096 / 2 */
    struct spec cur = spec_of("8192", "4", "1"), des = spec_of("4096", "2", "1");
    hj *r = can_update(0, &cur, &des, never);
    if (is_failure(r) || !hj_get(r, "infrastructureMachinePatch"))
        fail_msg("not covered: %s", message(r));
    assert_string_equal(message(r),
                        "memoryMiB 8192->4096 already on the VM; numCPUs 4->2 already on the VM");
    hj_free(r);
    r = update(0, &des, never);
    assert_false(is_failure(r));
    assert_string_equal(
        message(r),
        "done: memory 4096 MiB, 2 vCPUs, 1 cores per socket (not verified in the guest)");
    hj_free(r);
    /* coresPerSocket 2 -> 1 in the spec, 1 on the VM; a real shrink stays uncovered */
    cur = spec_of("4096", "2", "2");
    des = spec_of("2048", "2", "1");
    r = can_update(0, &cur, &des, never);
    assert_non_null(strstr(message(r), "numCoresPerSocket 2->1 already on the VM"));
    assert_non_null(strstr(message(r), "infrastructureMachine.spec.memoryMiB (needs a power cycle "
                                       "and powerCycle is Never)"));
    hj_free(r);
    /* on the hot-add VM a live growth is covered live, as before */
    cur = spec_of("4096", "2", "1");
    des = spec_of("4096", "4", "1");
    r = can_update(1, &cur, &des, never);
    assert_string_equal(message(r), "numCPUs 2->4 live");
    hj_free(r);
}

/* ---- the property -------------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#define PICK(a) (a)[(rnd() >> 8) % (sizeof(a) / sizeof(*(a)))]

static const char *const mem_edges[] = {"0",        "-4",       "8193",  "4098",
                                        "25149440", "25149444", "9e15",  "9000000000000000",
                                        "2048.0",   "\"4096\"", "4097.5"};
static const char *const cpu_edges[] = {"0", "3", "5", "768", "769", "1024", "-2", "\"2\""};
static const char *const core_edges[] = {"0", "3", "256", "257", "-1"};

static void gen(struct spec *s)
{
    uint64_t r = rnd();
    if (r % 4 == 0)
        snprintf(s->mem, sizeof(s->mem), "%s", PICK(mem_edges));
    else
        snprintf(s->mem, sizeof(s->mem), "%llu", (unsigned long long)(((r >> 8) % 32 + 1) * 256));
    r = rnd();
    if (r % 4 == 0)
        snprintf(s->cpus, sizeof(s->cpus), "%s", PICK(cpu_edges));
    else
        snprintf(s->cpus, sizeof(s->cpus), "%llu", (unsigned long long)((r >> 8) % 4 + 1) * 2);
    r = rnd();
    if (r % 5 == 0)
        snprintf(s->cores, sizeof(s->cores), "%s", PICK(core_edges));
    else
        snprintf(s->cores, sizeof(s->cores), "%d", 1 << ((r >> 8) % 2));
}

/* One VM's run of the property. no_cores: the specs name no numCoresPerSocket (the VM's own
 * decides which numCPUs it can take). */
static void property_on(size_t vm, struct spec cur, bool no_cores, int n, int *covered,
                        int *refused)
{
    const char *s = "{\"onUncoverable\":\"Block\",\"powerOffMode\":\"Hard\"}";
    for (int k = 0; k < n; k++) {
        struct spec des;
        memset(&des, 0, sizeof(des));
        gen(&des);
        if (no_cores)
            des.cores[0] = '\0';
        hj *r = can_update(vm, &cur, &des, s);
        bool ok = !is_failure(r) && hj_get(r, "infrastructureMachinePatch");
        if (!ok) {
            assert_true(is_failure(r) ||
                        !strcmp(message(r), "nothing hvupdater can change in place"));
            (*refused)++;
            hj_free(r);
            continue;
        }
        hj_free(r);
        (*covered)++;
        hj *u = update(vm, &des, s);
        if (is_failure(u))
            fail_msg("VM %zu pair %d: memoryMiB %s->%s, numCPUs %s->%s, numCoresPerSocket %s->%s "
                     "covered, then UpdateMachine failed: %s",
                     vm, k, cur.mem, des.mem, cur.cpus, des.cpus, cur.cores, des.cores, message(u));
        hj_free(u);
        long long mem;
        int cpus, cores;
        bool on;
        shows(vm, &mem, &cpus, &cores, &on);
        assert_true(on);
        if (mem != atoll(des.mem) || cpus != atoi(des.cpus) ||
            (des.cores[0] && cores != atoi(des.cores)))
            fail_msg("VM %zu pair %d: want %s / %s / %s, VM shows %lld / %d / %d", vm, k, des.mem,
                     des.cpus, des.cores, mem, cpus, cores);
        cur = des;
    }
}

/* Whenever CanUpdateMachine covers a change (under Block: Success with a patch), UpdateMachine
 * ends done with the VM showing the desired values; never a Failure: whether the value breaks
 * a rule for every VM or one of this VM's (VM 2: its own 2 cores per socket). */
static void test_property_covered_changes_never_fail(void **state)
{
    (void)state;
    int covered = 0, refused = 0;
    property_on(0, spec_of("4096", "2", "1"), false, 100, &covered, &refused);
    fprintf(stderr, "# property: %d pairs covered and done, %d not covered\n", covered, refused);
    assert_true(covered > 20);
    assert_true(refused > 20);
    int c2 = 0, r2 = 0;
    property_on(2, spec_of("4096", "6", ""), true, 40, &c2, &r2);
    fprintf(stderr,
            "# property, VM with 2 cores per socket, specs without cores: %d covered and "
            "done, %d not covered\n",
            c2, r2);
    assert_true(c2 > 5);
    assert_true(r2 > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_add_calls),
        cmocka_unit_test(test_static_rules_are_applied_at_can_update),
        cmocka_unit_test(test_never_covers_a_value_the_vm_already_has),
        cmocka_unit_test(test_vm_rules_are_applied_at_can_update),
        cmocka_unit_test(test_property_covered_changes_never_fail),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
