/* test_libvirt_backend.c: the libvirt backend through backend.h against libvirt's in-process
 * test:///default driver (its running domain "test": 8 GiB max, 2 GiB current, 2 vCPUs) and
 * domains defined here. No daemon needed. Each test frees its backend, so the driver's state
 * starts fresh for the next one.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_testutil.h"

#define TURI      "test:///default"
#define TEST_UUID "6695eb01-f6a4-8304-79aa-97f2502e193f"

static const char *const turis[] = {TURI};

/* test:///default forgets what was defined once its last connection closes: each test holds
 * one of its own open while it runs */
static int lvt_setup(void **state)
{
    virConnectPtr c = virConnectOpen(TURI);
    *state = c;
    return c ? 0 : -1;
}

static int lvt_teardown(void **state)
{
    virConnectClose(*state);
    return 0;
}

static const char *const CPU_DOM =
    "<domain type='test'><name>t-cpu</name><memory unit='MiB'>1024</memory>"
    "<vcpu current='1'>4</vcpu><os><type>hvm</type></os></domain>";

static const char *const DIMM_DOM =
    "<domain type='test'><name>t-dimm</name><maxMemory slots='4' unit='MiB'>4096</maxMemory>"
    "<memory unit='MiB'>1024</memory><vcpu current='1'>4</vcpu><os><type>hvm</type></os>"
    "<features><acpi/></features><cpu><topology sockets='2' cores='2' threads='1'/>"
    "<numa><cell id='0' cpus='0-3' memory='1024' unit='MiB'/></numa></cpu></domain>";

static void test_find_by_name_and_uuid(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    assert_string_equal(be->ops->name, "libvirt");
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;

    lvt_ref(&ref, "", "", "test");
    assert_true(be->ops->serves(be, &ref));
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_true(obs.found);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_string_equal(obs.host, TURI);
    assert_string_equal(obs.id, "1");
    assert_int_equal(obs.hw.memory_mib, 2048); /* <currentMemory>: the balloon holds 6 GiB */
    assert_int_equal(obs.hw.cpus, 2);
    assert_int_equal(obs.hw.cores_per_socket, -1);
    assert_int_equal(obs.config.memory_mib, 2048);
    assert_int_equal(obs.config.cpus, 2);
    assert_string_equal(obs.record, "");
    assert_false(obs.tools_running);
    assert_true(obs.can_shutdown);
    assert_false(obs.busy);

    lvt_ref(&ref, TURI, TEST_UUID, "");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_true(obs.found);
    assert_string_equal(obs.id, "1");
    lvt_ref(&ref, "", "6695EB01-F6A4-8304-79AA-97F2502E193F", "ignored-when-uuid-set");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK); /* cached, any case */
    assert_true(obs.found);

    lvt_ref(&ref, "qemu:///elsewhere", "", "test");
    assert_false(be->ops->serves(be, &ref));
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_UNREACHABLE);
    be->ops->free(be);
}

static void test_missing_domain(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    const char *uuids[] = {"00000000-0000-0000-0000-00000000beef", "not-a-uuid", ""};
    for (size_t i = 0; i < 3; i++) {
        lvt_ref(&ref, "", uuids[i], i == 2 ? "nope" : "");
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_false(obs.found);
        assert_int_equal(obs.hw.memory_mib, -1);
    }
    struct hv_hw want = {4096, -1, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_E_NOT_FOUND);
    struct hv_step step = {.kind = HV_STEP_POWER_ON, .desired = want};
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_NOT_FOUND);
    assert_int_equal(be->ops->write_record(be, &ref, NULL, "{}", &err), HV_E_NOT_FOUND);
    lvt_ref(&ref, "", "", "");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_NOT_FOUND);
    be->ops->free(be);
}

static void test_record_round_trip(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", TEST_UUID, "");
    const char *recs[] = {
        "{\"phase\":\"grow\",\"to\":{\"memory\":4096},\"note\":\"a<b & c>d ]]>\"}",
        "{\"phase\":\"done\"}\n\t  \r\n",
        "{\"who\":\"\xc3\xa9t\xc3\xa9\"}",
    };
    for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
        assert_int_equal(be->ops->write_record(be, &ref, NULL, recs[i], &err), HV_OK);
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_string_equal(obs.record, recs[i]);
    }
    /* stored in our namespace, in the persistent definition too */
    virConnectPtr c = virConnectOpen(TURI);
    virDomainPtr d = virDomainLookupByName(c, "test");
    char *m =
        virDomainGetMetadata(d, VIR_DOMAIN_METADATA_ELEMENT, LV_NS_URI, VIR_DOMAIN_AFFECT_CONFIG);
    assert_non_null(m);
    assert_non_null(strstr(m, "<operation"));
    free(m);

    assert_int_equal(be->ops->write_record(be, &ref, NULL, "", &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_string_equal(obs.record, "");
    assert_null(
        virDomainGetMetadata(d, VIR_DOMAIN_METADATA_ELEMENT, LV_NS_URI, VIR_DOMAIN_AFFECT_CONFIG));
    assert_int_equal(be->ops->write_record(be, &ref, NULL, "", &err), HV_OK); /* again: no error */

    char *big = malloc(HV_RECORD_MAX + 1);
    memset(big, 'x', HV_RECORD_MAX);
    big[HV_RECORD_MAX] = '\0';
    assert_int_equal(be->ops->write_record(be, &ref, NULL, big, &err), HV_E_INTERNAL);
    big[HV_RECORD_MAX - 1] = '\0'; /* the longest record that fits */
    assert_int_equal(be->ops->write_record(be, &ref, NULL, big, &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_string_equal(obs.record, big);
    free(big);
    assert_int_equal(be->ops->write_record(be, &ref, NULL, "bell\a", &err), HV_E_INTERNAL);
    virDomainFree(d);
    virConnectClose(c);
    be->ops->free(be);
}

/* A write with expected stores only while the domain holds that record: another writer's
 * record since makes it BUSY and leaves that record; the record the write stores already (a
 * retry whose first try landed) is no lost race. */
static void test_record_compare_and_swap(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", TEST_UUID, "");
    assert_int_equal(be->ops->write_record(be, &ref, NULL, "", &err), HV_OK);
    assert_int_equal(be->ops->write_record(be, &ref, "", "{\"by\":\"a\"}", &err), HV_OK);
    /* b read "" too, before a's write: lost */
    assert_int_equal(be->ops->write_record(be, &ref, "", "{\"by\":\"b\"}", &err), HV_E_BUSY);
    assert_int_equal(err.code, HV_E_BUSY);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_string_equal(obs.record, "{\"by\":\"a\"}");
    /* a again, from its own write: stored; the same write once more: no lost race */
    assert_int_equal(be->ops->write_record(be, &ref, "{\"by\":\"a\"}", "{\"by\":\"a2\"}", &err),
                     HV_OK);
    assert_int_equal(be->ops->write_record(be, &ref, "{\"by\":\"a\"}", "{\"by\":\"a2\"}", &err),
                     HV_OK);
    /* clearing is conditional too */
    assert_int_equal(be->ops->write_record(be, &ref, "{\"by\":\"a\"}", "", &err), HV_E_BUSY);
    assert_int_equal(be->ops->write_record(be, &ref, "{\"by\":\"a2\"}", "", &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_string_equal(obs.record, "");
    be->ops->free(be);
}

static void test_vcpu_growth_via_act(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    lvt_define(TURI, CPU_DOM, true);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    lvt_ref(&ref, "", "", "t-cpu");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.cpus, 1);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);

    struct hv_hw want = {-1, 3, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_CPUS].method, "vcpu hot-plug");
    struct hv_step step = {.kind = HV_STEP_LIVE_CPUS, .desired = want, .timeout_ms = 5000};
    snprintf(step.method, sizeof(step.method), "%s", plan[HV_F_CPUS].method);
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.cpus, 3);
    assert_int_equal(obs.config.cpus, 3);
    assert_string_equal(obs.id, id);
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK); /* done already: no-op */

    step.desired.cpus = 5;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNSUPPORTED);
    step.desired.cpus = 2;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNSUPPORTED);
    lvt_remove(TURI, "t-cpu");
    be->ops->free(be);
}

/* Issue 17.2: the test driver runs no guest. Its balloon statistics report its own target as
 * "available" (with a last-update of 1989); they are not a guest's view of anything. */
static void test_test_driver_has_no_guest_view(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", "", "test");
    for (int k = 0; k < 2; k++) { /* the second look: with the statistics period set */
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_int_equal(obs.power, HV_POWER_ON);
        assert_int_equal(be->ops->observe_guest(be, &ref, &obs, &err), HV_OK);
        assert_int_equal(obs.guest.mem_view, HV_GV_NONE);
        assert_int_equal(obs.guest.cpu_view, HV_GV_NONE);
    }
    be->ops->free(be);
}

/* Issue 18 (sim seed 1000528): whether the VM's definition gives its guest a way to report
 * its memory (a virtio balloon) and its vCPUs (a guest agent channel) is known also while
 * it is off, so CanUpdateMachine under guestVerification Required can refuse what the guest
 * an operation starts could never show. */
static void test_report_channels_of_an_off_vm(void **state)
{
    (void)state;
    char with[64], without[64], xml[1024];
    lvt_name(with, sizeof(with), "chan");
    lvt_name(without, sizeof(without), "nochan");
    snprintf(xml, sizeof(xml),
             "<domain type='test'><name>%s</name><memory unit='MiB'>1024</memory>"
             "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices>"
             "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/>"
             "</channel><memballoon model='virtio'/></devices></domain>",
             with);
    lvt_define(TURI, xml, false);
    snprintf(xml, sizeof(xml),
             "<domain type='test'><name>%s</name><memory unit='MiB'>1024</memory>"
             "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices>"
             "<memballoon model='none'/></devices></domain>",
             without);
    lvt_define(TURI, xml, false);
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", "", with);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_false(obs.no_mem_report);
    assert_false(obs.no_cpu_report);
    lvt_ref(&ref, "", "", without);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_true(obs.no_mem_report);
    assert_true(obs.no_cpu_report);
    be->ops->free(be);
    lvt_remove(TURI, with);
    lvt_remove(TURI, without);
}

static void test_balloon_growth_via_act(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    lvt_ref(&ref, "", "", "test");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    struct hv_hw want = {4096, -1, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_MEMORY].method, "balloon");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);

    struct hv_step step = {.kind = HV_STEP_LIVE_MEMORY, .desired = want, .method = "dimm"};
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNSUPPORTED); /* not planned */
    snprintf(step.method, sizeof(step.method), "balloon");
    if (be->ops->act(be, &ref, &step, &err) != HV_OK)
        fail_msg("balloon: %s", err.detail);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.memory_mib, 4096);
    assert_int_equal(obs.config.memory_mib, 4096);

    /* above <memory> nothing live is left; shrink is cold; cores cold */
    struct hv_hw more = {9000, 3, 2, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &more, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "no memory hot-plug slots (no maxMemory)");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "above maximum vCPUs");
    assert_int_equal(plan[HV_F_CORES].how, HV_HOW_COLD);
    struct hv_hw less = {1024, -1, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &less, plan, &err), HV_OK);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory shrink needs a restart");
    step.desired = less;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNSUPPORTED);
    be->ops->free(be);
}

/* An assumed observation (the VM as an operation in flight leaves it: the probe's
 * plan_worst_with) is planned from its values, not from the domain as read: going back to
 * today's hardware after a grow in flight is a shrink. Without `assumed` the read wins. */
static void test_plan_from_an_assumed_observation(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    lvt_ref(&ref, "", "", "test");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    struct hv_hw now = {obs.hw.memory_mib, obs.hw.cpus, -1, -1};
    struct hv_vm_obs after = obs;
    after.hw.memory_mib = after.config.memory_mib = obs.hw.memory_mib + 512;
    after.hw.cpus = after.config.cpus = obs.hw.cpus + 1;

    assert_int_equal(be->ops->plan(be, &ref, &after, &now, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE); /* (not assumed: as read) */
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);

    after.assumed = true;
    assert_int_equal(be->ops->plan(be, &ref, &after, &now, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory shrink needs a restart");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "vCPU shrink needs a restart");
    /* the assumed values themselves: nothing to do */
    struct hv_hw same = {after.hw.memory_mib, after.hw.cpus, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &after, &same, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);
    be->ops->free(be);
}

static void test_dimm_plan_and_driver_refusal(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    lvt_define(TURI, DIMM_DOM, true);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    lvt_ref(&ref, "", "", "t-dimm");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.memory_mib, 1024);
    assert_int_equal(obs.hw.cores_per_socket, 2);
    struct hv_hw want = {1536, -1, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_MEMORY].method, "dimm");
    struct hv_hw odd = {1124, -1, -1, -1};
    assert_int_equal(be->ops->plan(be, &ref, &obs, &odd, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory delta not a multiple of 128 MiB");
    /* the test driver cannot attach devices: a real libvirt refusal, mapped */
    struct hv_step step = {.kind = HV_STEP_LIVE_MEMORY, .desired = want, .method = "dimm"};
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNSUPPORTED);
    assert_non_null(strstr(err.detail, "virDomainAttachDeviceFlags"));
    lvt_remove(TURI, "t-dimm");
    be->ops->free(be);
}

static void test_cold_path(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    lvt_define(TURI, DIMM_DOM, true);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    lvt_ref(&ref, "", "", "t-dimm");
    assert_int_equal(be->ops->write_record(be, &ref, NULL, "{\"phase\":\"cold\"}", &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);

    struct hv_hw want = {768, 2, 1, -1};
    struct hv_step step = {.kind = HV_STEP_RECONFIGURE, .desired = want};
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_INVALID_STATE);

    step.kind = HV_STEP_POWER_OFF;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK); /* off already */
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_string_equal(obs.id, "");
    assert_false(obs.can_shutdown);
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_OK);
    for (int f = 0; f < HV_F_DISK; f++) {
        assert_int_equal(plan[f].how, HV_HOW_COLD);
        assert_string_equal(plan[f].reason, "domain is off");
    }
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE); /* not asked for */

    step.kind = HV_STEP_RECONFIGURE;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK); /* idempotent */
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.config.memory_mib, 768);
    assert_int_equal(obs.config.cpus, 2);
    assert_int_equal(obs.config.cores_per_socket, 1);
    assert_string_equal(obs.record, "{\"phase\":\"cold\"}"); /* kept by the redefine */

    step.kind = HV_STEP_POWER_ON;
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK); /* on already */
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.memory_mib, 768);
    assert_int_equal(obs.hw.cpus, 2);
    assert_int_equal(obs.hw.cores_per_socket, 1);
    assert_string_not_equal(obs.id, id);
    assert_string_not_equal(obs.id, "");

    step.kind = HV_STEP_SHUTDOWN; /* the test driver's guests obey at once */
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.power, HV_POWER_OFF);
    lvt_remove(TURI, "t-dimm");
    be->ops->free(be);
}

static void test_unreachable_uri(void **state)
{
    (void)state;
    const char *const bad[] = {"qemu+unix:///system?socket=/nonexistent/hvt-libvirt.sock"};
    struct hv_backend *be = lvt_backend(bad, 1);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", "", "test");
    for (int i = 0; i < 2; i++) { /* the second call reopens and fails the same way */
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_UNREACHABLE);
        assert_int_equal(err.code, HV_E_UNREACHABLE);
        assert_false(obs.found);
        assert_non_null(strstr(err.detail, "/nonexistent/hvt-libvirt.sock"));
    }
    struct hv_step step = {.kind = HV_STEP_POWER_OFF};
    assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_UNREACHABLE);
    be->ops->free(be);

    const char *const bogus[] = {"bogus:///nothing"};
    be = lvt_backend(bogus, 1);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_UNREACHABLE);
    assert_true(strlen(err.detail) > 0);
    be->ops->free(be);

    /* a fleet with one dead host: found where it lives; "missing" cannot be claimed */
    const char *const fleet[] = {"bogus:///nothing", TURI};
    be = lvt_backend(fleet, 2);
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_true(obs.found);
    assert_string_equal(obs.host, TURI);
    lvt_ref(&ref, "", "", "nope");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_UNREACHABLE);
    lvt_ref(&ref, TURI, "", "nope");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_false(obs.found);
    be->ops->free(be);
}

/* A name on several configured hosts: which domain is meant is unknown, so none is touched:
 * an error naming the hosts (a UUID, or the server, still finds it). The second host is a
 * test driver of its own (a file), holding a domain named "test" like test:///default. */
static void test_ambiguous_name_names_the_hosts(void **state)
{
    (void)state;
    char path[] = "/tmp/hvt-lv-second-XXXXXX.xml";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    static const char node[] =
        "<node><domain type='test'><name>test</name><memory unit='MiB'>1024</memory>"
        "<vcpu>1</vcpu><os><type>hvm</type></os></domain>"
        "<domain type='test'><name>only-here</name><memory unit='MiB'>1024</memory>"
        "<vcpu>1</vcpu><os><type>hvm</type></os></domain></node>";
    assert_int_equal(write(fd, node, sizeof(node) - 1), (ssize_t)(sizeof(node) - 1));
    close(fd);
    char second[sizeof(path) + 8];
    snprintf(second, sizeof(second), "test://%s", path);
    const char *const fleet[] = {TURI, second};
    struct hv_backend *be = lvt_backend(fleet, 2);
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    for (int round = 0; round < 2; round++) { /* the second time the first host is cached */
        lvt_ref(&ref, "", "", "test");
        memset(&err, 0, sizeof(err));
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_AMBIGUOUS);
        assert_int_equal(err.code, HV_E_AMBIGUOUS);
        assert_false(obs.found);
        assert_non_null(strstr(err.detail, TURI));
        assert_non_null(strstr(err.detail, second));
        struct hv_step step = {.kind = HV_STEP_POWER_OFF};
        assert_int_equal(be->ops->act(be, &ref, &step, &err), HV_E_AMBIGUOUS);
        /* by server or by UUID: one domain */
        lvt_ref(&ref, TURI, "", "test");
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_true(obs.found);
        assert_string_equal(obs.host, TURI);
        lvt_ref(&ref, "", TEST_UUID, "");
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_true(obs.found);
        /* a name on one host only */
        lvt_ref(&ref, "", "", "only-here");
        assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
        assert_true(obs.found);
        assert_string_equal(obs.host, second);
    }
    be->ops->free(be);
    unlink(path);
}

/* A disk size whose bytes do not fit 64 bits: refused by ops->check and by the plan with the
 * same reason, never multiplied into a negative size (which read as a shrink). */
static void test_disk_size_past_64_bits(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_hw want = {-1, -1, -1, (INT64_MAX >> 20) + 1};
    be->ops->check(be, &want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "disk size above what a hypervisor can express");
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", "", "test");
    snprintf(ref.disk, sizeof(ref.disk), "vda");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_OK);
    assert_int_equal(be->ops->plan(be, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "disk size above what a hypervisor can express");
    struct hv_step step = {.kind = HV_STEP_LIVE_DISK, .desired = want};
    assert_int_not_equal(be->ops->act(be, &ref, &step, &err), HV_OK);
    want.disk_mib = INT64_MAX >> 20; /* the largest that fits */
    be->ops->check(be, &want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE);
    be->ops->free(be);
}

static void test_constructor_errors(void **state)
{
    (void)state;
    char err[128];
    assert_null(hv_libvirt_new(NULL, err, sizeof(err)));
    assert_non_null(strstr(err, "no URI"));
    const char *const empty[] = {""};
    struct hv_libvirt_opts o = {.uris = empty, .n_uris = 1};
    assert_null(hv_libvirt_new(&o, err, sizeof(err)));
    o.uris = turis;
    o.call_timeout_ms = -1;
    assert_null(hv_libvirt_new(&o, err, sizeof(err)));
}

struct lvt_worker {
    struct hv_backend *be;
    int fails;
};

static void *lvt_work(void *arg)
{
    struct lvt_worker *w = arg;
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", TEST_UUID, "");
    for (int i = 0; i < 40; i++) {
        if (w->be->ops->observe(w->be, &ref, &obs, &err) != HV_OK || !obs.found)
            w->fails++;
        char rec[64];
        snprintf(rec, sizeof(rec), "{\"i\":%d}", i);
        if (w->be->ops->write_record(w->be, &ref, NULL, rec, &err) != HV_OK)
            w->fails++;
    }
    return NULL;
}

static void test_threads_share_connections(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    pthread_t t[4];
    struct lvt_worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct lvt_worker){be, 0};
        assert_int_equal(pthread_create(&t[i], NULL, lvt_work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].fails, 0);
    }
    be->ops->free(be);
}

/* The lanes of host 0: how many are open, and the users they carry in all (under its lock). */
static void lvt_lanes(struct lv_backend *lb, int *open, int *users)
{
    struct lv_host *h = &lb->hosts[0];
    pthread_mutex_lock(&h->mu);
    *open = *users = 0;
    for (int k = 0; k < LV_LANES; k++) {
        *open += h->lane[k].conn != NULL;
        *users += h->lane[k].users;
        if (!h->lane[k].conn)
            assert_int_equal(h->lane[k].users, 0);
    }
    pthread_mutex_unlock(&h->mu);
}

/* Look the domain "test" up once and give it back until host 0 has `want` lanes open (each
 * lookup takes in what finished opening); false after 10 s. */
static bool lvt_settle(struct lv_backend *lb, const struct hv_vm_ref *ref, int want)
{
    for (int i = 0; i < 10000; i++) {
        struct lv_dom d;
        struct hv_err err;
        assert_int_equal(lv_find(lb, ref, &d, &err), HV_OK);
        assert_non_null(d.dom);
        lv_dom_release(&d);
        int open, users;
        lvt_lanes(lb, &open, &users);
        if (open == want)
            return true;
        usleep(1000);
    }
    return false;
}

/* One connection carries LV_LANE_USERS callers; past that, another opens, up to LV_LANES,
 * each new caller going to the least busy; every reference handed out is counted back. */
static void test_busy_host_opens_more_connections(void **state)
{
    (void)state;
    struct hv_backend *be = lvt_backend(turis, 1);
    struct lv_backend *lb = be->priv;
    struct hv_vm_ref ref;
    lvt_ref(&ref, "", "", "test");
    enum { HELD = LV_LANES * LV_LANE_USERS + 3 };
    struct lv_dom d[HELD];
    struct hv_err err;
    int open, users;
    /* callers up to one lane's share, then one more: a single connection */
    for (int i = 0; i <= LV_LANE_USERS; i++) {
        assert_int_equal(lv_find(lb, &ref, &d[i], &err), HV_OK);
        assert_non_null(d[i].dom);
        assert_ptr_equal(d[i].conn, d[0].conn);
    }
    lvt_lanes(lb, &open, &users);
    assert_int_equal(open, 1);
    assert_int_equal(users, LV_LANE_USERS + 1);
    /* the one past the share started a second connection: the next caller gets it */
    assert_true(lvt_settle(lb, &ref, 2));
    int held = LV_LANE_USERS + 1;
    assert_int_equal(lv_find(lb, &ref, &d[held], &err), HV_OK);
    assert_ptr_not_equal(d[held].conn, d[0].conn);
    held++;
    /* more callers than all lanes' shares: never more than LV_LANES connections */
    for (int want = 3; want <= LV_LANES; want++) {
        while (held < want * LV_LANE_USERS - LV_LANE_USERS + 1) {
            assert_int_equal(lv_find(lb, &ref, &d[held], &err), HV_OK);
            held++;
        }
        assert_true(lvt_settle(lb, &ref, want));
    }
    while (held < HELD) {
        assert_int_equal(lv_find(lb, &ref, &d[held], &err), HV_OK);
        held++;
    }
    /* every lane past its share: callers come and go, no fifth connection opens */
    for (int i = 0; i < 100; i++) {
        struct lv_dom x;
        assert_int_equal(lv_find(lb, &ref, &x, &err), HV_OK);
        lv_dom_release(&x);
    }
    lvt_lanes(lb, &open, &users);
    assert_int_equal(open, LV_LANES);
    assert_int_equal(users, HELD);
    pthread_mutex_lock(&lb->hosts[0].mu);
    assert_int_equal(lb->hosts[0].n_opening, 0);
    /* the least busy lane took each caller: the lanes differ by one caller at most */
    int lo = HELD, hi = 0;
    for (int k = 0; k < LV_LANES; k++) {
        lo = lb->hosts[0].lane[k].users < lo ? lb->hosts[0].lane[k].users : lo;
        hi = lb->hosts[0].lane[k].users > hi ? lb->hosts[0].lane[k].users : hi;
    }
    pthread_mutex_unlock(&lb->hosts[0].mu);
    assert_in_range(hi - lo, 0, 1);
    for (int i = 0; i < HELD; i++)
        lv_dom_release(&d[i]);
    lvt_lanes(lb, &open, &users);
    assert_int_equal(open, LV_LANES);
    assert_int_equal(users, 0);
    be->ops->free(be);
}

/* A TCP listener that accepts and never answers: a libvirt host that hangs mid-handshake. */
struct lvt_deaf {
    int fd;
    int port;
    int conns[16];
    int n; /* connections accepted so far */
    pthread_mutex_t mu;
    pthread_t t;
};

static void *lvt_deaf_run(void *arg)
{
    struct lvt_deaf *d = arg;
    for (;;) {
        int c = accept(d->fd, NULL, NULL);
        if (c < 0)
            return NULL; /* the listener was shut down */
        pthread_mutex_lock(&d->mu);
        if (d->n < 16)
            d->conns[d->n] = c;
        else
            close(c);
        d->n++;
        pthread_mutex_unlock(&d->mu);
    }
}

static void lvt_deaf_start(struct lvt_deaf *d)
{
    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->mu, NULL);
    d->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(d->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(d->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(d->fd, 16), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(d->fd, (struct sockaddr *)&a, &len), 0);
    d->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&d->t, NULL, lvt_deaf_run, d), 0);
}

static int lvt_deaf_count(struct lvt_deaf *d)
{
    pthread_mutex_lock(&d->mu);
    int n = d->n;
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* Stop listening and hang up: a connection attempt still waiting then fails and ends. */
static void lvt_deaf_stop(struct lvt_deaf *d)
{
    shutdown(d->fd, SHUT_RDWR);
    close(d->fd);
    pthread_join(d->t, NULL);
    for (int i = 0; i < d->n && i < 16; i++)
        close(d->conns[i]);
    pthread_mutex_destroy(&d->mu);
}

struct lvt_observer {
    struct hv_backend *be;
    const char *uuid, *name;
    int rc;
    bool found;
};

static void *lvt_observe_run(void *arg)
{
    struct lvt_observer *o = arg;
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", o->uuid, o->name);
    o->rc = o->be->ops->observe(o->be, &ref, &obs, &err);
    o->found = obs.found;
    return NULL;
}

/* A host that accepts TCP and never answers, listed first: lookups on the other host still
 * find their VM (after one bounded wait for the dead one), a VM whose host is known is never
 * looked for on the dead host again, and the dead host gets one connection attempt, not one
 * per call. */
static void test_dead_host_does_not_stall_the_others(void **state)
{
    (void)state;
    struct lvt_deaf deaf;
    lvt_deaf_start(&deaf);
    char dead[128];
    snprintf(dead, sizeof(dead), "qemu+tcp://127.0.0.1:%d/system", deaf.port);
    const char *const uris[] = {dead, TURI};
    struct hv_libvirt_opts o = {.uris = uris, .n_uris = 2, .connect_timeout_ms = 500};
    char e[256];
    struct hv_backend *be = hv_libvirt_new(&o, e, sizeof(e));
    assert_non_null(be);

    /* four threads at once, by UUID and by name: each finds the domain on test:///default */
    pthread_t t[4];
    struct lvt_observer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct lvt_observer){be, i % 2 ? TEST_UUID : "", i % 2 ? "" : "test", -1, false};
        assert_int_equal(pthread_create(&t[i], NULL, lvt_observe_run, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, HV_OK);
        assert_true(w[i].found);
    }
    assert_int_equal(lvt_deaf_count(&deaf), 1); /* one attempt, shared by every caller */

    /* known host: found there, the dead host is not asked again */
    for (int i = 0; i < 20; i++) {
        struct lvt_observer x = {be, TEST_UUID, "", -1, false};
        lvt_observe_run(&x);
        assert_int_equal(x.rc, HV_OK);
        assert_true(x.found);
    }
    assert_int_equal(lvt_deaf_count(&deaf), 1);

    /* a VM on no host: the dead host makes that "unreachable", not "missing", and answers at
     * once (its attempt is still stuck: no new wait, no new connection) */
    struct hv_vm_ref ref;
    struct hv_vm_obs obs;
    struct hv_err err;
    lvt_ref(&ref, "", "", "lvt-nowhere");
    assert_int_equal(be->ops->observe(be, &ref, &obs, &err), HV_E_UNREACHABLE);
    assert_false(obs.found);
    assert_int_equal(lvt_deaf_count(&deaf), 1);

    be->ops->free(be);
    lvt_deaf_stop(&deaf);
    usleep(300 * 1000); /* the stuck attempt sees the hang-up and frees itself */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_find_by_name_and_uuid, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_missing_domain, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_name_names_the_hosts, lvt_setup,
                                        lvt_teardown),
        cmocka_unit_test_setup_teardown(test_disk_size_past_64_bits, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_record_round_trip, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_record_compare_and_swap, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_test_driver_has_no_guest_view, lvt_setup,
                                        lvt_teardown),
        cmocka_unit_test_setup_teardown(test_vcpu_growth_via_act, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_balloon_growth_via_act, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_plan_from_an_assumed_observation, lvt_setup,
                                        lvt_teardown),
        cmocka_unit_test_setup_teardown(test_report_channels_of_an_off_vm, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_dimm_plan_and_driver_refusal, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_cold_path, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_uri, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_constructor_errors, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_connections, lvt_setup, lvt_teardown),
        cmocka_unit_test_setup_teardown(test_busy_host_opens_more_connections, lvt_setup,
                                        lvt_teardown),
        cmocka_unit_test_setup_teardown(test_dead_host_does_not_stall_the_others, lvt_setup,
                                        lvt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
