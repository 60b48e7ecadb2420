/* test_coverage.c: what CanUpdateMachine covers against what UpdateMachine then does, through
 * the serving process's own wiring (hv_runtime: config -> libvirt backend -> engine -> hooks)
 * on libvirt's in-process test:///default driver. UpdateMachine is called the way CAPI calls
 * it: again after retryAfterSeconds (scaled down to 10 ms a second), until done or Failure.
 *  - a property test: for many generated (current, desired) pairs, on domains whose own state
 *    decides (persistent, transient, a raw block disk), whenever CanUpdateMachine covers the
 *    change, UpdateMachine brings the domain there and never fails;
 *  - under the default powerCycle=IfNeeded CanUpdateMachine does not cover what UpdateMachine
 *    refuses for this domain (a cold change of a transient domain, a raw block disk);
 *  - transient domains: never shut down (a power cycle would delete them), live growth works;
 *  - powerCycle=Never covers a value the domain already has.
 * Built only when the libvirt backend is. */
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#ifdef HV_HAVE_BACKEND_libvirt

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "hooks.h"
#include "json.h"
#include "log.h"
#include "runtime.h"

#define TRANSIENT_WHY "transient domain: a power cycle would delete it"

struct fx {
    virConnectPtr conn; /* keeps the shared test:///default state alive */
    struct hv_config cfg;
    struct hv_runtime *rt;
    const struct hv_hooks_ctx *ctx;
};

static void quiet(void *ud, virErrorPtr err)
{
    (void)ud;
    (void)err;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    virSetErrorFunc(NULL, quiet);
    hv_log_set_level(HV_LOG_ERROR);
    f->conn = virConnectOpen("test:///default");
    assert_non_null(f->conn);
    static const char doc[] = "{\"libvirt\":{\"uris\":[\"test:///default\"]},"
                              "\"engine\":{\"workers\":2,\"stepTimeoutSeconds\":10}}";
    char err[256];
    hv_config_default(&f->cfg);
    assert_int_equal(hv_config_parse(&f->cfg, doc, strlen(doc), err, sizeof(err)), 0);
    f->rt = hv_runtime_new(&f->cfg, err, sizeof(err));
    assert_non_null(f->rt);
    f->ctx = hv_runtime_hooks(f->rt);
    *state = f;
    return 0;
}

static void drop_domain(struct fx *f, const char *name)
{
    virDomainPtr d = virDomainLookupByName(f->conn, name);
    if (!d)
        return;
    if (virDomainIsActive(d) == 1)
        virDomainDestroy(d);
    if (virDomainIsPersistent(d) == 1)
        virDomainUndefine(d);
    virDomainFree(d);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    hv_runtime_free(f->rt);
    hv_config_free(&f->cfg);
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(f->conn, &doms, 0);
    for (int k = 0; k < n; k++) {
        if (strncmp(virDomainGetName(doms[k]), "cov-", 4) == 0)
            drop_domain(f, virDomainGetName(doms[k]));
        virDomainFree(doms[k]);
    }
    free(doms);
    virConnectClose(f->conn);
    free(f);
    return 0;
}

/* A raw block device as the domain's vda: libvirt cannot grow it. test:///default reports its
 * capacity as almost 1 TiB, so a desired 2048 GiB would grow it. */
#define BLOCK_DISK                                                                                 \
    "<disk type='block' device='disk'><source dev='/dev/null'/><target dev='vda' "                 \
    "bus='virtio'/></disk>"
#define BLOCK_WHY "the disk is a raw block device, which libvirt cannot grow; grow it on the host"

/* Domain XML: memory MiB (== currentMemory), vcpus current/max, more devices. */
static void dom_xml_with(char *xml, size_t cap, const char *name, long long mem, int vcpus, int max,
                         const char *devices)
{
    snprintf(xml, cap,
             "<domain type='test'><name>%s</name><memory unit='MiB'>%lld</memory>"
             "<currentMemory unit='MiB'>%lld</currentMemory><vcpu current='%d'>%d</vcpu>"
             "<os><type arch='x86_64'>hvm</type></os>"
             "<devices>%s<memballoon model='virtio'/></devices></domain>",
             name, mem, mem, vcpus, max, devices);
}

static void dom_xml(char *xml, size_t cap, const char *name, long long mem, int vcpus, int max)
{
    dom_xml_with(xml, cap, name, mem, vcpus, max, "");
}

static void define_running_with(struct fx *f, const char *name, long long mem, int vcpus, int max,
                                const char *devices)
{
    char xml[1024];
    dom_xml_with(xml, sizeof(xml), name, mem, vcpus, max, devices);
    virDomainPtr d = virDomainDefineXML(f->conn, xml);
    assert_non_null(d);
    assert_int_equal(virDomainCreate(d), 0);
    virDomainFree(d);
}

static void define_running(struct fx *f, const char *name, long long mem, int vcpus, int max)
{
    char xml[1024];
    dom_xml(xml, sizeof(xml), name, mem, vcpus, max);
    virDomainPtr d = virDomainDefineXML(f->conn, xml);
    assert_non_null(d);
    assert_int_equal(virDomainCreate(d), 0);
    virDomainFree(d);
}

/* A transient domain: it exists only while it runs. */
static void create_transient(struct fx *f, const char *name, long long mem, int vcpus, int max)
{
    char xml[1024];
    dom_xml(xml, sizeof(xml), name, mem, vcpus, max);
    virDomainPtr d = virDomainCreateXML(f->conn, xml, 0);
    assert_non_null(d);
    assert_int_equal(virDomainIsPersistent(d), 0);
    virDomainFree(d);
}

/* What libvirt shows now: running, memory MiB, vCPUs. Returns false when the domain is gone. */
static bool shows(struct fx *f, const char *name, bool *running, long long *mem, int *vcpus)
{
    virDomainPtr d = virDomainLookupByName(f->conn, name);
    if (!d)
        return false;
    virDomainInfo info;
    assert_int_equal(virDomainGetInfo(d, &info), 0);
    *running = virDomainIsActive(d) == 1;
    *mem = (long long)(info.memory / 1024);
    *vcpus = info.nrVirtCpu;
    virDomainFree(d);
    return true;
}

static hj *call(struct fx *f, enum hv_hook h, const char *req)
{
    char err[128];
    hj *r = hj_parse(req, strlen(req), err, sizeof(err));
    if (!r)
        fail_msg("bad request JSON (%s): %s", err, req);
    bool failure;
    size_t len;
    char *out = hv_hook_handle(f->ctx, h, r, &failure, NULL, 0, &len);
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

/* A LibvirtMachine JSON object; mem, vcpu and disk (GiB) are JSON value texts ("" = field
 * absent). */
static void infra_d(char *out, size_t cap, const char *name, const char *mem, const char *vcpu,
                    const char *disk)
{
    char spec[256] = "";
    const char *keys[3] = {"memoryMiB", "vcpu", "diskGiB"}, *vals[3] = {mem, vcpu, disk};
    for (int k = 0; k < 3; k++) {
        if (!vals[k][0])
            continue;
        size_t at = strlen(spec);
        snprintf(spec + at, sizeof(spec) - at, "%s\"%s\":%s", at ? "," : "", keys[k], vals[k]);
    }
    snprintf(out, cap,
             "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1alpha1\","
             "\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
             "\"spec\":{%s}}",
             name, spec);
}

#define MACHINE                                                                                    \
    "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"metadata\":{\"name\":"    \
    "\"m\",\"namespace\":\"default\"},\"spec\":{\"clusterName\":\"c\",\"version\":\"v1.31.0\"}}"

/* CanUpdateMachine as KubeadmControlPlane calls it; a retryable "still asking" Failure is
 * asked again, as CAPI would after its back-off. */
static hj *can_update_d(struct fx *f, const char *name, const char *cur_mem, const char *cur_vcpu,
                        const char *cur_disk, const char *mem, const char *vcpu, const char *disk,
                        const char *settings)
{
    char cur[512], des[512], req[2048];
    infra_d(cur, sizeof(cur), name, cur_mem, cur_vcpu, cur_disk);
    infra_d(des, sizeof(des), name, mem, vcpu, disk);
    snprintf(req, sizeof(req),
             "{\"apiVersion\":\"%s\",\"kind\":\"CanUpdateMachineRequest\",\"settings\":%s,"
             "\"current\":{\"machine\":" MACHINE ",\"infrastructureMachine\":%s},"
             "\"desired\":{\"machine\":" MACHINE ",\"infrastructureMachine\":%s}}",
             HV_HOOKS_API, settings, cur, des);
    for (int k = 0; k < 200; k++) {
        hj *r = call(f, HV_HOOK_CAN_UPDATE_MACHINE, req);
        if (!is_failure(r) || !strstr(message(r), "still asking the hypervisor"))
            return r;
        hj_free(r);
        usleep(20 * 1000);
    }
    fail_msg("CanUpdateMachine kept asking the hypervisor");
    return NULL;
}

static hj *can_update(struct fx *f, const char *name, const char *cur_mem, const char *cur_vcpu,
                      const char *mem, const char *vcpu, const char *settings)
{
    return can_update_d(f, name, cur_mem, cur_vcpu, "", mem, vcpu, "", settings);
}

/* UpdateMachine until done or Failure, honouring retryAfterSeconds (1 s = 10 ms here).
 * Returns the last answer; *calls gets the number of calls. */
static hj *update_d(struct fx *f, const char *name, const char *mem, const char *vcpu,
                    const char *disk, const char *settings, int *calls)
{
    char des[512], req[2048];
    infra_d(des, sizeof(des), name, mem, vcpu, disk);
    snprintf(req, sizeof(req),
             "{\"apiVersion\":\"%s\",\"kind\":\"UpdateMachineRequest\",\"settings\":%s,"
             "\"desired\":{\"machine\":" MACHINE ",\"infrastructureMachine\":%s}}",
             HV_HOOKS_API, settings, des);
    for (int k = 1; k <= 400; k++) {
        hj *r = call(f, HV_HOOK_UPDATE_MACHINE, req);
        const hj *retry = hj_get(r, "retryAfterSeconds");
        assert_non_null(retry);
        if (is_failure(r) || retry->i == 0) {
            if (calls)
                *calls = k;
            return r;
        }
        usleep((useconds_t)retry->i * 10 * 1000);
        hj_free(r);
    }
    fail_msg("UpdateMachine for %s still in progress after 400 calls", name);
    return NULL;
}

static hj *update(struct fx *f, const char *name, const char *mem, const char *vcpu,
                  const char *settings, int *calls)
{
    return update_d(f, name, mem, vcpu, "", settings, calls);
}

/* ---- transient domains ----------------------------------------------------------------- */

static void test_transient_domain_is_never_shut_down(void **state)
{
    struct fx *f = *state;
    const char *s = "{\"powerOffMode\":\"Hard\"}";
    create_transient(f, "cov-tr", 2048, 2, 4);

    /* a shrink needs a power cycle, which would delete the domain */
    hj *r = update(f, "cov-tr", "1024", "2", s, NULL);
    assert_true(is_failure(r));
    if (!strstr(message(r), TRANSIENT_WHY))
        fail_msg("answer: %s", message(r));
    hj_free(r);
    bool running;
    long long mem;
    int vcpus;
    assert_true(shows(f, "cov-tr", &running, &mem, &vcpus));
    assert_true(running);
    assert_int_equal(mem, 2048);

    /* the same Failure again, sticky, and the domain still there */
    r = update(f, "cov-tr", "1024", "2", s, NULL);
    assert_true(is_failure(r));
    assert_non_null(strstr(message(r), TRANSIENT_WHY));
    hj_free(r);
    assert_true(shows(f, "cov-tr", &running, &mem, &vcpus));

    /* growth the domain can take live still works: vCPUs 2 -> 3 (max 4) */
    r = update(f, "cov-tr", "2048", "3", s, NULL);
    if (is_failure(r))
        fail_msg("live growth failed: %s", message(r));
    assert_string_equal(message(r), "done: memory 2048 MiB, 3 vCPUs (not verified in the guest)");
    hj_free(r);
    assert_true(shows(f, "cov-tr", &running, &mem, &vcpus));
    assert_true(running);
    assert_int_equal(vcpus, 3);

    /* growth beyond the vCPU maximum would need a power cycle: refused, domain kept */
    r = update(f, "cov-tr", "2048", "8", s, NULL);
    assert_true(is_failure(r));
    assert_non_null(strstr(message(r), TRANSIENT_WHY));
    hj_free(r);
    assert_true(shows(f, "cov-tr", &running, &mem, &vcpus));
    assert_true(running);
}

/* Under powerCycle=Never CanUpdateMachine asks the hypervisor: for a transient domain a change
 * that needs a power cycle is not covered, with the transient reason. */
static void test_transient_domain_not_covered_when_known(void **state)
{
    struct fx *f = *state;
    create_transient(f, "cov-tr2", 2048, 2, 4);
    hj *r = can_update(f, "cov-tr2", "2048", "4", "2048", "8", "{\"powerCycle\":\"Never\"}");
    assert_false(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    if (!strstr(message(r), TRANSIENT_WHY))
        fail_msg("answer: %s", message(r));
    hj_free(r);
    r = can_update(f, "cov-tr2", "2048", "2", "2048", "3", "{\"powerCycle\":\"Never\"}");
    assert_false(is_failure(r));
    assert_non_null(hj_get(r, "infrastructureMachinePatch"));
    assert_string_equal(message(r), "vcpu 2->3 live");
    hj_free(r);
}

/* Under the default powerCycle=IfNeeded too, CanUpdateMachine asks the domain and does not
 * cover what UpdateMachine refuses for it, with UpdateMachine's reason. */
static void test_if_needed_does_not_cover_what_the_domain_refuses(void **state)
{
    struct fx *f = *state;
    const char *dflt = "{}";
    create_transient(f, "cov-ifn-tr", 2048, 2, 4);
    /* a shrink needs a power cycle, which would delete the transient domain */
    hj *r = can_update(f, "cov-ifn-tr", "2048", "2", "1024", "2", dflt);
    assert_false(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    if (!strstr(message(r), "infrastructureMachine.spec.memoryMiB (" TRANSIENT_WHY ")"))
        fail_msg("covered a shrink of a transient domain: %s", message(r));
    hj_free(r);
    r = update(f, "cov-ifn-tr", "1024", "2", dflt, NULL);
    assert_true(is_failure(r)); /* and UpdateMachine indeed refuses it */
    assert_non_null(strstr(message(r), TRANSIENT_WHY));
    hj_free(r);
    /* (the shrink's last call queued a pass: while it may still run, CanUpdateMachine plans
     * other hardware also from the VM as that shrink would leave it, which the transient domain
     * cannot have; the refused shrink changes nothing once its pass has run) */
    struct hv_engine *e = f->ctx->update_ctx;
    for (int k = 0; k < 5000 && hv_engine_pass_pending(e, "cov-ifn-tr"); k++)
        usleep(1000);
    assert_false(hv_engine_pass_pending(e, "cov-ifn-tr"));
    /* growth within its maximum is live: covered, and done */
    r = can_update(f, "cov-ifn-tr", "2048", "2", "2048", "3", dflt);
    assert_non_null(hj_get(r, "infrastructureMachinePatch"));
    hj_free(r);

    /* a raw block disk: not covered, with UpdateMachine's reason */
    define_running_with(f, "cov-ifn-blk", 2048, 2, 4, BLOCK_DISK);
    r = can_update_d(f, "cov-ifn-blk", "2048", "2", "20", "2048", "2", "2048", dflt);
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    if (!strstr(message(r), "infrastructureMachine.spec.diskGiB (" BLOCK_WHY ")"))
        fail_msg("covered growing a raw block disk: %s", message(r));
    hj_free(r);
    r = update_d(f, "cov-ifn-blk", "2048", "2", "2048", dflt, NULL);
    assert_true(is_failure(r));
    assert_string_equal(message(r), "cannot change disk: " BLOCK_WHY);
    hj_free(r);
    /* the spec keeps its disk size, but UpdateMachine would still try to grow the disk (the
     * domain does not show it): nothing is covered */
    r = can_update_d(f, "cov-ifn-blk", "2048", "2", "2048", "2048", "3", "2048", dflt);
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    assert_non_null(strstr(message(r), "(the VM cannot take diskGiB as desired: " BLOCK_WHY ")"));
    hj_free(r);

    /* a paused domain: UpdateMachine takes no step until it runs, so no cover now but a
     * retryable Failure (never a replacement for a pause) */
    define_running(f, "cov-ifn-paused", 2048, 2, 4);
    virDomainPtr d = virDomainLookupByName(f->conn, "cov-ifn-paused");
    assert_non_null(d);
    assert_int_equal(virDomainSuspend(d), 0);
    r = can_update(f, "cov-ifn-paused", "2048", "2", "2048", "3", dflt);
    assert_true(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    assert_string_equal(message(r), "cannot check the change on this VM: the VM is paused, "
                                    "suspended or in transition; retry");
    hj_free(r);
    assert_int_equal(virDomainResume(d), 0);
    virDomainFree(d);
    /* running again: covered (another desired value, so not the paused look, which is
     * cached for 5 s) */
    r = can_update(f, "cov-ifn-paused", "2048", "2", "2048", "4", dflt);
    if (is_failure(r) || !hj_get(r, "infrastructureMachinePatch"))
        fail_msg("not covered once running: %s", message(r));
    hj_free(r);

    /* a VM that is not there: not covered */
    r = can_update(f, "cov-ifn-none", "2048", "2", "4096", "2", dflt);
    assert_false(is_failure(r));
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    assert_non_null(strstr(message(r), "(the VM was not found)"));
    hj_free(r);
}

/* ---- powerCycle=Never and values the VM already has ------------------------------------- */

static void test_never_covers_a_value_the_vm_already_has(void **state)
{
    struct fx *f = *state;
    const char *never = "{\"powerCycle\":\"Never\"}";
    define_running(f, "cov-have", 2048, 2, 4);
    /* the spec says 4096 -> 2048 (a shrink), but the domain already has 2048: nothing to do */
    hj *r = can_update(f, "cov-have", "4096", "2", "2048", "2", never);
    if (is_failure(r) || !hj_get(r, "infrastructureMachinePatch"))
        fail_msg("not covered: %s", message(r));
    assert_string_equal(message(r), "memoryMiB 4096->2048 already on the VM");
    hj_free(r);
    /* vCPUs 4 -> 2 in the spec, 2 on the domain; memory 2048 -> 4096 needs a power cycle here
     * (no hot-plug slots, beyond the balloon): only the vCPUs are covered */
    r = can_update(f, "cov-have", "2048", "4", "4096", "2", never);
    assert_false(is_failure(r));
    assert_non_null(strstr(message(r), "vcpu 4->2 already on the VM"));
    assert_non_null(strstr(message(r), "infrastructureMachine.spec.memoryMiB"));
    hj_free(r);
    /* and UpdateMachine agrees: done at once, no power cycle */
    int calls;
    r = update(f, "cov-have", "2048", "2", never, &calls);
    assert_false(is_failure(r));
    assert_string_equal(message(r), "done: memory 2048 MiB, 2 vCPUs (not verified in the guest)");
    hj_free(r);
    /* a shrink the domain does not have yet stays uncovered under Never */
    r = can_update(f, "cov-have", "2048", "2", "1024", "2", never);
    assert_null(hj_get(r, "infrastructureMachinePatch"));
    assert_non_null(strstr(message(r), "needs a power cycle and powerCycle is Never"));
    hj_free(r);
}

/* ---- static rules ------------------------------------------------------------------------- */

static void test_values_libvirt_cannot_express_are_not_covered(void **state)
{
    struct fx *f = *state;
    define_running(f, "cov-big", 2048, 2, 4);
    const char *block = "{\"onUncoverable\":\"Block\"}";
    hj *r = can_update(f, "cov-big", "2048", "2", "9000000000000000", "2", block);
    assert_true(is_failure(r));
    if (!strstr(message(r), "infrastructureMachine.spec.memoryMiB (memory above what libvirt "
                            "can express (8796093022207 MiB))"))
        fail_msg("answer: %s", message(r));
    hj_free(r);
    r = can_update(f, "cov-big", "2048", "2", "2048", "5000", block);
    assert_true(is_failure(r));
    if (!strstr(message(r), "infrastructureMachine.spec.vcpu (above the vCPUs a domain can have)"))
        fail_msg("answer: %s", message(r));
    hj_free(r);
    /* and UpdateMachine gives the same reason (it never gets this far under CAPI) */
    r = update(f, "cov-big", "9000000000000000", "2", block, NULL);
    assert_true(is_failure(r));
    assert_string_equal(message(r), "cannot change memory: memory above what libvirt can express "
                                    "(8796093022207 MiB)");
    hj_free(r);
}

/* ---- the property ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Edge values as JSON texts; the generator mixes them with ordinary sizes. */
static const char *const mem_edges[] = {
    "0",    "-512",    "1.5",           "\"4096\"",           "null",
    "8193", "1",       "8796093022207", "8796093022208",      "9000000000000000",
    "9e15", "1048576", "4096.0",        "9223372036854775807"};
static const char *const cpu_edges[] = {"0",    "-1",     "2.5", "\"4\"",      "4096",
                                        "4097", "100000", "2.0", "2147483648", "1"};

static void gen_mem(char *out, size_t cap)
{
    uint64_t r = rnd();
    if (r % 3 == 0)
        snprintf(out, cap, "%s", mem_edges[(r >> 8) % (sizeof(mem_edges) / sizeof(*mem_edges))]);
    else
        snprintf(out, cap, "%llu", (unsigned long long)(((r >> 8) % 64 + 1) * 128));
}

static void gen_cpu(char *out, size_t cap)
{
    uint64_t r = rnd();
    if (r % 4 == 0)
        snprintf(out, cap, "%s", cpu_edges[(r >> 8) % (sizeof(cpu_edges) / sizeof(*cpu_edges))]);
    else
        snprintf(out, cap, "%llu", (unsigned long long)((r >> 8) % 8 + 1));
}

static void gen_disk(char *out, size_t cap)
{
    /* test:///default reports a block disk of almost 1 TiB: 1500 and 2048 GiB grow it */
    static const char *const d[] = {"", "20", "1500", "2048"};
    snprintf(out, cap, "%s", d[rnd() % 4]);
}

/* One domain's run of the property: n generated desired specs, each after the last one
 * covered. disk: the spec carries a disk size too; keep_mem: most specs keep the memory. */
static void property_on(struct fx *f, const char *name, const char *mem0, const char *cpu0,
                        bool disk, bool keep_mem, int n, int *covered, int *refused)
{
    const char *s = "{\"onUncoverable\":\"Block\",\"powerOffMode\":\"Hard\"}";
    char cur_mem[48], cur_cpu[48], cur_disk[48] = "";
    snprintf(cur_mem, sizeof(cur_mem), "%s", mem0);
    snprintf(cur_cpu, sizeof(cur_cpu), "%s", cpu0);
    if (disk)
        snprintf(cur_disk, sizeof(cur_disk), "20");
    for (int k = 0; k < n; k++) {
        char mem[48], cpu[48], dsk[48] = "";
        gen_mem(mem, sizeof(mem));
        gen_cpu(cpu, sizeof(cpu));
        if (keep_mem && rnd() % 3) /* e.g. a transient domain: mostly vCPU changes */
            snprintf(mem, sizeof(mem), "%s", cur_mem);
        if (disk)
            gen_disk(dsk, sizeof(dsk));
        hj *r = can_update_d(f, name, cur_mem, cur_cpu, cur_disk, mem, cpu, dsk, s);
        bool ok = !is_failure(r) && hj_get(r, "infrastructureMachinePatch");
        if (!ok) {
            /* uncovered: a stable reason, and nothing happened */
            assert_true(is_failure(r) || !strcmp(message(r), "nothing hvupdater can change in "
                                                             "place"));
            (*refused)++;
            hj_free(r);
            continue;
        }
        hj_free(r);
        (*covered)++;
        int calls;
        hj *u = update_d(f, name, mem, cpu, dsk, s, &calls);
        if (is_failure(u))
            fail_msg("%s pair %d: memoryMiB %s->%s, vcpu %s->%s, diskGiB %s->%s covered, then "
                     "UpdateMachine failed: %s",
                     name, k, cur_mem, mem, cur_cpu, cpu, cur_disk, dsk, message(u));
        hj_free(u);
        bool running;
        long long have_mem;
        int have_cpu;
        assert_true(shows(f, name, &running, &have_mem, &have_cpu));
        assert_true(running);
        if (have_mem != atoll(mem) || have_cpu != atoi(cpu))
            fail_msg("%s pair %d: want %s MiB / %s vCPUs, domain shows %lld / %d", name, k, mem,
                     cpu, have_mem, have_cpu);
        snprintf(cur_mem, sizeof(cur_mem), "%s", mem);
        snprintf(cur_cpu, sizeof(cur_cpu), "%s", cpu);
        snprintf(cur_disk, sizeof(cur_disk), "%s", dsk);
    }
}

/* Whenever CanUpdateMachine covers a change (under Block: Success with a patch), CAPI then
 * calls UpdateMachine: it must end done with the domain showing the desired values, never a
 * Failure, whether the reason would be the value (no domain could take it) or this domain
 * (transient, so never power-cycled; a raw block disk libvirt cannot grow). */
static void test_property_covered_changes_never_fail(void **state)
{
    struct fx *f = *state;
    define_running(f, "cov-prop", 1024, 2, 4);
    int covered = 0, refused = 0;
    property_on(f, "cov-prop", "1024", "2", false, false, 150, &covered, &refused);
    fprintf(stderr, "# property, persistent domain: %d pairs covered and done, %d not covered\n",
            covered, refused);
    assert_true(covered > 20);
    assert_true(refused > 20);
    /* VM-dependent states */
    int c_tr = 0, r_tr = 0, c_blk = 0, r_blk = 0;
    create_transient(f, "cov-prop-tr", 1024, 1, 8); /* vCPUs only grow there, up to 8 */
    property_on(f, "cov-prop-tr", "1024", "1", false, true, 80, &c_tr, &r_tr);
    define_running_with(f, "cov-prop-blk", 1024, 2, 4, BLOCK_DISK);
    property_on(f, "cov-prop-blk", "1024", "2", true, false, 40, &c_blk, &r_blk);
    fprintf(stderr,
            "# property, transient domain: %d covered and done, %d not covered; raw block "
            "disk: %d covered and done, %d not covered\n",
            c_tr, r_tr, c_blk, r_blk);
    assert_true(c_tr >= 2); /* live vCPU growth */
    assert_true(r_tr > 20);
    assert_true(r_blk > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transient_domain_is_never_shut_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transient_domain_not_covered_when_known, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_never_covers_a_value_the_vm_already_has, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_values_libvirt_cannot_express_are_not_covered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_if_needed_does_not_cover_what_the_domain_refuses,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_property_covered_changes_never_fail, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
    /* the libvirt backend is not built: this test cannot run, and says so loudly */
    fprintf(stderr, "test_coverage: built without the libvirt backend\n");
    return 1;
}

#endif
