/* test_vs_sim.c: the vSphere backend against the govmomi simulator (one launcher for the
 * whole file, started in the group setup and stopped in the teardown).
 *
 * VM roles (launcher flags below): 0 hot-add + Tools, 1 plain (cold path), 2 records,
 * 3 busy with a running task, 4 PowerOnVM_Task fails twice, 5 hot-add (concurrent change);
 * disks of 25 GiB: 6 on SCSI (hot-extend), 7 with a snapshot, 8 on IDE, 9 thick.
 */
#include <ctype.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vcsim_harness.h"
#include "vs_props.h"
#include "vs_soap.h"
#include "vs_test.h"

static struct vcsim sim;

static int setup(void **state)
{
    static const char *const flags[] = {
        "-hosts", "2",
        "-vms",   "10",
        "-vm",    "all:memory=4096,cpus=2,cores=1",
        "-vm",    "6-9:disk=25",
        "-vm",    "7:snapshot",
        "-vm",    "8:idedisk",
        "-vm",    "9:thick",
        "-vm",    "0:memhotadd,cpuhotadd,tools",
        "-vm",    "3:busy",
        "-vm",    "5:memhotadd",
        "-fail",  "PowerOnVM_Task=2:InvalidPowerState@DC0_C0_RP0_VM4",
        NULL,
    };
    (void)state;
    if (vcsim_start(&sim, flags) != 0)
        return -1;
    fprintf(stderr, "# vcsim ready in %.0f ms at %s\n", sim.start_ms, sim.url);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    vcsim_stop(&sim);
    return 0;
}

static struct hv_vm_ref ref_of(size_t vm, const char *server)
{
    struct hv_vm_ref r;
    memset(&r, 0, sizeof(r));
    snprintf(r.server, sizeof(r.server), "%s", server);
    snprintf(r.uuid, sizeof(r.uuid), "%s", vcsim_vm(&sim, vm)->uuid);
    return r;
}

static struct hv_step step_of(enum hv_step_kind kind, int64_t mem, int32_t cpus, int32_t cores)
{
    struct hv_step s;
    memset(&s, 0, sizeof(s));
    s.kind = kind;
    s.desired = (struct hv_hw){mem, cpus, cores, -1};
    s.timeout_ms = 10000;
    return s;
}

static void observe_ok(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs)
{
    struct hv_err err = {0};
    int rc = b->ops->observe(b, ref, obs, &err);
    if (rc != HV_OK)
        fail_msg("observe: %d %s", rc, err.detail);
    assert_true(obs->found);
}

static void act_ok(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_step st)
{
    struct hv_err err = {0};
    int rc = b->ops->act(b, ref, &st, &err);
    if (rc != HV_OK)
        fail_msg("act %d: %d %s", (int)st.kind, rc, err.detail);
}

static int act_rc(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_step st,
                  struct hv_err *err)
{
    memset(err, 0, sizeof(*err));
    return b->ops->act(b, ref, &st, err);
}

static void test_login_and_find(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    long logins = vcsim_calls(&sim, "Login");
    struct hv_vm_ref ref = ref_of(0, "vcsim");
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.id, vcsim_vm(&sim, 0)->moref);
    assert_string_equal(obs.host, "vcsim");

    /* Upper-case input (the simulator compares case-sensitively): found after lower-casing. */
    for (char *p = ref.uuid; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    snprintf(ref.server, sizeof(ref.server), "%s", "127.0.0.1"); /* bare host of the url */
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.id, vcsim_vm(&sim, 0)->moref);

    /* An unknown UUID is "not found", not an error. */
    snprintf(ref.uuid, sizeof(ref.uuid), "%s", "00000000-0000-0000-0000-000000000000");
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_false(obs.found);

    /* One session for all of it. */
    struct vs_stats st;
    vs_server_stats(vs_backend_server(b, 0), &st);
    assert_int_equal(st.logins, 1);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 1);
    b->ops->free(b);
    assert_int_equal(vcsim_calls(&sim, "Logout") >= 1, 1);
}

static void test_observe(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_obs obs;
    struct hv_vm_ref ref = ref_of(0, "");
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.memory_mib, 4096);
    assert_int_equal(obs.hw.cpus, 2);
    assert_int_equal(obs.hw.cores_per_socket, 1);
    assert_memory_equal(&obs.hw, &obs.config, sizeof(obs.hw));
    assert_true(obs.tools_running);
    assert_false(obs.busy);
    assert_string_equal(obs.record, "");

    ref = ref_of(1, "");
    observe_ok(b, &ref, &obs);
    assert_false(obs.tools_running);

    ref = ref_of(3, "");
    observe_ok(b, &ref, &obs);
    assert_true(obs.busy);
    b->ops->free(b);
}

static void test_live_memory_and_cpus(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "vcsim");
    const char *moref = vcsim_vm(&sim, 0)->moref;
    int offs = vcsim_count_events(b, moref, "VmPoweredOffEvent");
    int reconf = vcsim_count_events(b, moref, "VmReconfiguredEvent");
    assert_true(offs >= 0 && reconf >= 0);

    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    struct hv_hw want = {8192, 4, -1, -1};
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    assert_int_equal(b->ops->plan(b, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_MEMORY].method, "hot-add");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE);
    assert_int_equal(plan[HV_F_CORES].how, HV_HOW_NONE);

    act_ok(b, &ref, step_of(HV_STEP_LIVE_MEMORY, 8192, -1, -1));
    act_ok(b, &ref, step_of(HV_STEP_LIVE_CPUS, -1, 4, -1)); /* uses the refreshed version */
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.memory_mib, 8192);
    assert_int_equal(obs.hw.cpus, 4);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(vcsim_count_events(b, moref, "VmPoweredOffEvent"), offs);
    assert_int_equal(vcsim_count_events(b, moref, "VmReconfiguredEvent"), reconf + 2);
    b->ops->free(b);
}

/* The probe's worst case (plan_worst_with) on the real backend: an observation marked assumed
 * (the VM as an operation in flight leaves it) is planned from its values and the limits of
 * the VM the same probe just read (the cache, no second lookup); going back to today's
 * hardware after a grow in flight is a shrink, cold. Unmarked, the edited values do not match
 * the VM: it is looked up again and planned as read. */
static void test_plan_from_an_assumed_observation(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(5, "vcsim");
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    struct hv_hw now = {obs.hw.memory_mib, obs.hw.cpus, -1, -1};
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    assert_int_equal(b->ops->plan(b, &ref, &obs, &now, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);

    struct hv_vm_obs after = obs;
    after.hw.memory_mib = after.config.memory_mib = obs.hw.memory_mib + 1024;
    after.hw.cpus = after.config.cpus = obs.hw.cpus + 2;
    long reads = vcsim_calls(&sim, "RetrievePropertiesEx");
    assert_int_equal(b->ops->plan(b, &ref, &after, &now, plan, &err), HV_OK);
    assert_true(vcsim_calls(&sim, "RetrievePropertiesEx") > reads); /* looked up again */
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);           /* as read */
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);

    after.assumed = true;
    reads = vcsim_calls(&sim, "RetrievePropertiesEx");
    assert_int_equal(b->ops->plan(b, &ref, &after, &now, plan, &err), HV_OK);
    assert_int_equal(vcsim_calls(&sim, "RetrievePropertiesEx"), reads); /* from the cache */
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory cannot shrink while the VM runs");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    struct hv_hw same = {after.hw.memory_mib, after.hw.cpus, -1, -1};
    assert_int_equal(b->ops->plan(b, &ref, &after, &same, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);
    /* (the VM itself is untouched) */
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.memory_mib, now.memory_mib);
    assert_int_equal(obs.hw.cpus, now.cpus);
    b->ops->free(b);
}

static struct hv_step disk_step(enum hv_step_kind kind, int64_t disk_mib)
{
    struct hv_step s = step_of(kind, -1, -1, -1);
    s.desired.disk_mib = disk_mib;
    return s;
}

/* The VM's first disk as the server holds it now (capacity, backing file). */
static void read_disk(struct hv_backend *b, const char *moref, struct vs_vm *vm)
{
    struct hv_err err = {0};
    assert_int_equal(vs_read_vm(vs_backend_server(b, 0), moref, "", 0, vm, &err), HV_OK);
    assert_true(vm->disk.found);
}

/* A running VM's disk grows by hot-extend: ReconfigVM_Task editing the device vCenter
 * described, with new capacities; no power cycle, the backing file kept. */
static void test_disk_hot_extend(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(6, "vcsim");
    const char *moref = vcsim_vm(&sim, 6)->moref;
    int offs = vcsim_count_events(b, moref, "VmPoweredOffEvent");
    struct vs_vm *vm = malloc(sizeof(*vm));
    assert_non_null(vm);
    read_disk(b, moref, vm);
    char file[256];
    const char *fn = strstr(vm->disk.xml, "<fileName>");
    assert_non_null(fn);
    snprintf(file, sizeof(file), "%.*s", (int)(strstr(fn, "</fileName>") - fn), fn);
    assert_string_equal(vm->disk.controller, "ParaVirtualSCSIController");

    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.disk_mib, 25 * 1024);
    assert_int_equal(obs.config.disk_mib, 25 * 1024);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    struct hv_hw want = {-1, -1, -1, 40 * 1024};
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    assert_int_equal(b->ops->plan(b, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_DISK].method, "hot-extend");
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);

    act_ok(b, &ref, disk_step(HV_STEP_LIVE_DISK, 40 * 1024));
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.disk_mib, 40 * 1024);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_string_equal(obs.id, id);
    assert_int_equal(vcsim_count_events(b, moref, "VmPoweredOffEvent"), offs);
    read_disk(b, moref, vm);
    assert_non_null(strstr(vm->disk.xml, file)); /* same backing file */
    assert_int_equal(vm->disk.capacity_bytes, 40LL << 30);
    /* again: nothing left to do, no reconfiguration sent */
    long reconfigs = vcsim_calls(&sim, "ReconfigVM_Task");
    act_ok(b, &ref, disk_step(HV_STEP_LIVE_DISK, 40 * 1024));
    assert_int_equal(vcsim_calls(&sim, "ReconfigVM_Task"), reconfigs);
    /* ...so a record it carries is not stored, and the step says so (the engine then
     * stores it alone) */
    struct hv_step carry = disk_step(HV_STEP_LIVE_DISK, 40 * 1024);
    bool stored = true;
    carry.record = "carried";
    carry.record_stored = &stored;
    act_ok(b, &ref, carry);
    assert_false(stored);
    assert_int_equal(vcsim_calls(&sim, "ReconfigVM_Task"), reconfigs);
    observe_ok(b, &ref, &obs);
    assert_string_not_equal(obs.record, "carried");
    /* a step that changes the disk stores it with the change */
    carry.desired.disk_mib = 41 * 1024;
    act_ok(b, &ref, carry);
    assert_true(stored);
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.record, "carried");
    assert_int_equal(obs.hw.disk_mib, 41 * 1024);
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "", &err), HV_OK);

    /* never smaller: a larger disk is left as it is, and a shrink step is refused */
    struct hv_hw less = {-1, -1, -1, 30 * 1024};
    assert_int_equal(b->ops->plan(b, &ref, &obs, &less, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE);
    assert_int_equal(act_rc(b, &ref, disk_step(HV_STEP_LIVE_DISK, 30 * 1024), &err),
                     HV_E_UNSUPPORTED);

    /* the profile's unit number picks the disk: there is none on unit 9 */
    snprintf(ref.disk, sizeof(ref.disk), "9");
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.disk_mib, -1);
    assert_int_equal(b->ops->plan(b, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "the VM has no such virtual disk");
    snprintf(ref.disk, sizeof(ref.disk), "%d", vm->disk.unit_number);
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.hw.disk_mib, 41 * 1024);
    free(vm);
    b->ops->free(b);
}

/* Snapshots and a too-small datastore make growth impossible; IDE makes it cold, and the
 * cold path grows the disk in the reconfiguration of the powered-off VM. */
static void test_disk_refusals_and_ide(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_obs obs;
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    struct hv_hw want = {-1, -1, -1, 40 * 1024};

    struct hv_vm_ref snap = ref_of(7, "vcsim");
    observe_ok(b, &snap, &obs);
    assert_int_equal(b->ops->plan(b, &snap, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason,
                        "the VM has snapshots, and vSphere cannot grow a disk that has them; "
                        "delete or consolidate them");

    struct hv_vm_ref thick = ref_of(9, "vcsim");
    observe_ok(b, &thick, &obs);
    struct hv_hw huge = {-1, -1, -1, 200LL * 1024 * 1024 * 1024}; /* 200 PiB */
    assert_int_equal(b->ops->plan(b, &thick, &obs, &huge, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason,
                        "the datastore lacks the free space to grow the disk");
    struct hv_hw bit = {-1, -1, -1, 26 * 1024};
    assert_int_equal(b->ops->plan(b, &thick, &obs, &bit, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_LIVE);

    struct hv_vm_ref ide = ref_of(8, "vcsim");
    observe_ok(b, &ide, &obs);
    assert_int_equal(b->ops->plan(b, &ide, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_DISK].reason,
                        "disks on an IDE controller grow only while the VM is off");
    act_ok(b, &ide, disk_step(HV_STEP_POWER_OFF, 40 * 1024));
    observe_ok(b, &ide, &obs);
    assert_int_equal(b->ops->plan(b, &ide, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_DISK].reason,
                        "VM is not running: the disk grows with a reconfigure");
    act_ok(b, &ide, disk_step(HV_STEP_RECONFIGURE, 40 * 1024));
    act_ok(b, &ide, disk_step(HV_STEP_POWER_ON, 40 * 1024));
    observe_ok(b, &ide, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.disk_mib, 40 * 1024);
    b->ops->free(b);
}

static void test_cold_cycle(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(1, "vcsim");
    const char *moref = vcsim_vm(&sim, 1)->moref;
    int offs = vcsim_count_events(b, moref, "VmPoweredOffEvent");
    int ons = vcsim_count_events(b, moref, "VmPoweredOnEvent");

    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    struct hv_hw want = {8192, 4, 2, -1};
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    assert_int_equal(b->ops->plan(b, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory hot-add is disabled on this VM");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_int_equal(plan[HV_F_CORES].how, HV_HOW_COLD);

    /* A running VM is not reconfigured cold. */
    assert_int_equal(act_rc(b, &ref, step_of(HV_STEP_RECONFIGURE, 8192, 4, 2), &err),
                     HV_E_INVALID_STATE);

    act_ok(b, &ref, step_of(HV_STEP_POWER_OFF, -1, -1, -1));
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.power, HV_POWER_OFF);
    /* Powered off: every change is a plain reconfigure. */
    assert_int_equal(b->ops->plan(b, &ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    act_ok(b, &ref, step_of(HV_STEP_RECONFIGURE, 8192, 4, 2));
    act_ok(b, &ref, step_of(HV_STEP_POWER_ON, -1, -1, -1));
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.memory_mib, 8192);
    assert_int_equal(obs.hw.cpus, 4);
    assert_int_equal(obs.hw.cores_per_socket, 2);
    assert_int_equal(vcsim_count_events(b, moref, "VmPoweredOffEvent"), offs + 1);
    assert_int_equal(vcsim_count_events(b, moref, "VmPoweredOnEvent"), ons + 1);
    b->ops->free(b);
}

/* How many extraConfig entries the server holds for our key. */
static int record_entries(struct hv_backend *b, const char *moref)
{
    struct vs_server *s = vs_backend_server(b, 0);
    struct hv_err err = {0};
    const struct vs_content *c = vs_session(s, 0, &err);
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, "RetrievePropertiesEx", "PropertyCollector", c->property_collector);
    vs_buf_add(&req, "<specSet><propSet><type>VirtualMachine</type>"
                     "<pathSet>config.extraConfig</pathSet></propSet><objectSet>");
    vs_buf_moref(&req, "obj", "VirtualMachine", moref);
    vs_buf_add(&req, "</objectSet></specSet><options></options>");
    vs_env_end(&req, "RetrievePropertiesEx");
    struct vs_reply r;
    assert_int_equal(vs_call(s, "RetrievePropertiesEx", &req, 0, &r, &err), HV_OK);
    vs_buf_free(&req);
    xmlNodePtr val = vs_xml_child(
        vs_xml_child(vs_xml_child(vs_xml_child(r.body, "returnval"), "objects"), "propSet"), "val");
    int n = 0;
    for (xmlNodePtr o = vs_xml_child(val, NULL); o; o = vs_xml_next(o, NULL)) {
        char key[64];
        n += vs_xml_child_text(o, "key", key, sizeof(key)) &&
             strcmp(key, "hvupdater.operation") == 0;
    }
    vs_reply_free(&r);
    return n;
}

static void test_record(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(2, "vcsim");
    struct hv_err err = {0};
    struct hv_vm_obs obs;
    const char *tricky = "{\"op\":\"a&b <c> 'd'\",\"n\":1}\r\n\tend";

    assert_int_equal(b->ops->write_record(b, &ref, NULL, "first", &err), HV_OK);
    assert_int_equal(b->ops->write_record(b, &ref, NULL, tricky, &err), HV_OK);
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.record, tricky);
    /* The simulator appended both entries; the last one is the record. */
    assert_int_equal(record_entries(b, obs.id), 2);

    assert_int_equal(b->ops->write_record(b, &ref, NULL, "", &err), HV_OK);
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.record, "");
    assert_int_equal(record_entries(b, obs.id), 3);

    /* A value XML cannot carry is refused before anything is sent. */
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "bell\a", &err), HV_E_INTERNAL);
    b->ops->free(b);
}

static void count_found(void *ctx, const struct hv_vm_found *f)
{
    (void)f;
    (*(int *)ctx)++;
}

/* A scan (list_records) leaves each VM's moref: the first look at a VM it listed reads the VM
 * at once, without FindByUuid (also for an upper-case UUID); a UUID it did not list is
 * searched for as before. */
static void test_scan_leaves_morefs(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_err err = {0};
    int reported = 0;
    assert_int_equal(b->ops->list_records(b, count_found, &reported, &err), HV_OK);
    long find = vcsim_calls(&sim, "FindByUuid");
    struct hv_vm_ref ref = ref_of(1, "vcsim");
    for (char *p = ref.uuid; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    assert_string_equal(obs.id, vcsim_vm(&sim, 1)->moref);
    assert_int_equal(vcsim_calls(&sim, "FindByUuid"), find);
    snprintf(ref.uuid, sizeof(ref.uuid), "%s", "00000000-0000-0000-0000-000000000000");
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_false(obs.found);
    assert_true(vcsim_calls(&sim, "FindByUuid") > find);
    b->ops->free(b);
}

static void test_thumbprints(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    struct hv_err err = {0};

    /* SHA-1 as printed by vSphere (upper case, colons) works. */
    cfg.thumbprint = sim.sha1;
    struct hv_backend *b = vcsim_backend(&cfg);
    observe_ok(b, &ref, &obs);
    b->ops->free(b);

    /* A wrong pin fails in the handshake: no HTTP request reaches the server. */
    char wrong[128];
    snprintf(wrong, sizeof(wrong), "%s", sim.sha256);
    wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
    cfg.thumbprint = wrong;
    long before = vcsim_calls(&sim, NULL);
    b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_TLS);
    assert_string_equal(err.detail, "server certificate thumbprint mismatch");
    assert_false(obs.found);
    b->ops->free(b);

    /* insecure_skip_verify does not void a configured pin; nor does a trusted CA. */
    cfg.insecure_skip_verify = 1;
    b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_TLS);
    assert_string_equal(err.detail, "server certificate thumbprint mismatch");
    b->ops->free(b);
    cfg.insecure_skip_verify = 0;
    cfg.ca_file = sim.ca;
    b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_TLS);
    assert_string_equal(err.detail, "server certificate thumbprint mismatch");
    b->ops->free(b);
    assert_int_equal(vcsim_calls(&sim, NULL), before + 0);
}

static void test_ca_file(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    struct hv_err err = {0};

    cfg.thumbprint = NULL;
    cfg.ca_file = sim.ca;
    struct hv_backend *b = vcsim_backend(&cfg);
    observe_ok(b, &ref, &obs);
    b->ops->free(b);

    /* CA and pin together: both must hold. */
    cfg.thumbprint = sim.sha1;
    b = vcsim_backend(&cfg);
    observe_ok(b, &ref, &obs);
    b->ops->free(b);

    /* No CA, no pin: the system trust store does not know the lab CA. */
    cfg.thumbprint = NULL;
    cfg.ca_file = NULL;
    b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_TLS);
    assert_non_null(strstr(err.detail, "TLS verification failed"));
    b->ops->free(b);

    /* Only when asked. */
    cfg.insecure_skip_verify = 1;
    b = vcsim_backend(&cfg);
    observe_ok(b, &ref, &obs);
    b->ops->free(b);
}

static void test_session_expiry(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    long logins = vcsim_calls(&sim, "Login");
    assert_true(vcsim_expire_sessions(&sim) >= 1);

    /* FindByUuid answers NotAuthenticated: one new Login, then the call succeeds. */
    observe_ok(b, &ref, &obs);
    struct vs_stats st;
    vs_server_stats(vs_backend_server(b, 0), &st);
    assert_int_equal(st.relogins, 1);
    assert_int_equal(st.logins, 2);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 1);

    /* Also mid-act: the record write re-logs in transparently. */
    assert_true(vcsim_expire_sessions(&sim) >= 1);
    struct hv_err err = {0};
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "after-expiry", &err), HV_OK);
    vs_server_stats(vs_backend_server(b, 0), &st);
    assert_int_equal(st.relogins, 2);
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "", &err), HV_OK);
    b->ops->free(b);
}

static void test_power_on_fails_twice(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(4, "vcsim");
    struct hv_err err;
    act_ok(b, &ref, step_of(HV_STEP_POWER_OFF, -1, -1, -1));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(act_rc(b, &ref, step_of(HV_STEP_POWER_ON, -1, -1, -1), &err),
                         HV_E_INVALID_STATE);
        assert_non_null(strstr(err.detail, "InvalidPowerState"));
    }
    act_ok(b, &ref, step_of(HV_STEP_POWER_ON, -1, -1, -1));
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    b->ops->free(b);
}

static void test_busy_vm(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(3, "vcsim");
    struct hv_vm_obs obs;
    struct hv_err err;
    observe_ok(b, &ref, &obs);
    assert_true(obs.busy);
    assert_int_equal(act_rc(b, &ref, step_of(HV_STEP_LIVE_MEMORY, 8192, -1, -1), &err), HV_E_BUSY);
    assert_non_null(strstr(err.detail, "TaskInProgress"));
    b->ops->free(b);
}

static void test_concurrent_change(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *a = vcsim_backend(&cfg);
    struct hv_backend *other = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(5, "vcsim");
    struct hv_vm_obs obs;
    struct hv_err err;
    observe_ok(a, &ref, &obs);
    /* Someone else changes the VM after our observation... */
    assert_int_equal(other->ops->write_record(other, &ref, NULL, "theirs", &err), HV_OK);
    /* ...so our change, made against the old changeVersion, fails cleanly. */
    assert_int_equal(act_rc(a, &ref, step_of(HV_STEP_LIVE_MEMORY, 8192, -1, -1), &err), HV_E_BUSY);
    assert_non_null(strstr(err.detail, "ConcurrentAccess"));
    observe_ok(a, &ref, &obs);
    assert_int_equal(obs.hw.memory_mib, 4096);
    act_ok(a, &ref, step_of(HV_STEP_LIVE_MEMORY, 8192, -1, -1));
    observe_ok(a, &ref, &obs);
    assert_int_equal(obs.hw.memory_mib, 8192);
    a->ops->free(a);
    other->ops->free(other);
}

/* A record write with expected is a compare-and-swap: the ReconfigVM_Task names the
 * changeVersion of a read that showed that record. Another writer's record since: BUSY, theirs
 * kept. A change since that left the record alone (a stale cached changeVersion): decided
 * again on a fresh read, stored. */
static void test_record_compare_and_swap(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *a = vcsim_backend(&cfg);
    struct hv_backend *other = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(2, "vcsim");
    struct hv_vm_obs obs;
    struct hv_err err;
    assert_int_equal(a->ops->write_record(a, &ref, NULL, "", &err), HV_OK);
    observe_ok(a, &ref, &obs);
    assert_int_equal(other->ops->write_record(other, &ref, "", "theirs", &err), HV_OK);
    assert_int_equal(a->ops->write_record(a, &ref, "", "mine", &err), HV_E_BUSY);
    observe_ok(a, &ref, &obs);
    assert_string_equal(obs.record, "theirs");
    assert_int_equal(a->ops->write_record(a, &ref, "theirs", "mine", &err), HV_OK);
    /* the same record written again: a new changeVersion, a's cached one stale */
    assert_int_equal(other->ops->write_record(other, &ref, NULL, "mine", &err), HV_OK);
    assert_int_equal(a->ops->write_record(a, &ref, "mine", "mine2", &err), HV_OK);
    observe_ok(other, &ref, &obs);
    assert_string_equal(obs.record, "mine2");
    assert_int_equal(a->ops->write_record(a, &ref, "mine2", "", &err), HV_OK);
    a->ops->free(a);
    other->ops->free(other);
}

/* A compare-and-swap record write reads back only the VM's changeVersion and record with its
 * task poll: the rest of the VM is the read its changeVersion guarded, which nothing changed
 * since when the write went through. The cache then holds the new changeVersion and record
 * (the next guarded write takes one ReconfigVM_Task and one poll: no BUSY, no fresh read) and
 * the hardware of that read (a plan against the same observation reads nothing), and another
 * writer's change since is still caught. */
static void test_record_write_reads_back_its_version(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *a = vcsim_backend(&cfg);
    struct hv_backend *other = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(2, "vcsim");
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    assert_int_equal(a->ops->write_record(a, &ref, NULL, "", &err), HV_OK);
    observe_ok(a, &ref, &obs);
    assert_int_equal(a->ops->write_record(a, &ref, "", "one", &err), HV_OK);
    long reads = vcsim_calls(&sim, "RetrievePropertiesEx");
    long writes = vcsim_calls(&sim, "ReconfigVM_Task");
    assert_int_equal(a->ops->write_record(a, &ref, "one", "two", &err), HV_OK);
    assert_int_equal(vcsim_calls(&sim, "RetrievePropertiesEx") - reads, 1);
    assert_int_equal(vcsim_calls(&sim, "ReconfigVM_Task") - writes, 1);
    struct hv_hw desired = obs.hw;
    desired.memory_mib += 1024;
    reads = vcsim_calls(&sim, "RetrievePropertiesEx");
    assert_int_equal(a->ops->plan(a, &ref, &obs, &desired, plan, &err), HV_OK);
    assert_int_equal(vcsim_calls(&sim, "RetrievePropertiesEx"), reads); /* from the cache */
    struct hv_vm_obs now;
    observe_ok(other, &ref, &now);
    assert_string_equal(now.record, "two");
    assert_int_equal(now.hw.memory_mib, obs.hw.memory_mib);
    assert_int_equal(other->ops->write_record(other, &ref, NULL, "theirs", &err), HV_OK);
    assert_int_equal(a->ops->write_record(a, &ref, "two", "three", &err), HV_E_BUSY);
    observe_ok(a, &ref, &now);
    assert_string_equal(now.record, "theirs");
    assert_int_equal(a->ops->write_record(a, &ref, "theirs", "", &err), HV_OK);
    a->ops->free(a);
    other->ops->free(other);
}

/* The VM read that rides in the task poll describes the disk the profile's unitNumber picks,
 * as the normal look does: that read becomes the engine's next observation (seen_after) and
 * the backend's cached view, so with another disk in it a chained round would plan against
 * the wrong disk. Unit 9 names no disk (the look says none); the VM's own unit names its. */
static void test_task_read_uses_disk_selector(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(5, "vcsim");
    struct hv_vm_obs obs, after;
    observe_ok(b, &ref, &obs);
    assert_true(obs.hw.disk_mib > 0);
    struct vs_vm *vm = malloc(sizeof(*vm));
    assert_non_null(vm);
    read_disk(b, vcsim_vm(&sim, 5)->moref, vm);
    const char *units[] = {"9", NULL};
    char own[16];
    snprintf(own, sizeof(own), "%d", vm->disk.unit_number);
    units[1] = own;
    for (size_t i = 0; i < 2; i++) {
        snprintf(ref.disk, sizeof(ref.disk), "%s", units[i]);
        observe_ok(b, &ref, &obs);
        struct hv_step st = step_of(HV_STEP_LIVE_MEMORY, obs.hw.memory_mib, -1, -1);
        memset(&after, 0, sizeof(after));
        st.seen_after = &after;
        act_ok(b, &ref, st);
        assert_true(after.found);
        if (after.hw.disk_mib != obs.hw.disk_mib)
            fail_msg("unit %s: the task's read saw a %lld MiB disk, the look %lld MiB", units[i],
                     (long long)after.hw.disk_mib, (long long)obs.hw.disk_mib);
        assert_int_equal(after.hw.disk_mib, i == 0 ? -1 : obs.hw.disk_mib);
    }
    free(vm);
    b->ops->free(b);
}

static void test_shutdown_needs_tools(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_err err;
    struct hv_vm_ref plain = ref_of(1, "vcsim");
    /* No VMware Tools: refused before any call, and observe says a shutdown is impossible. */
    assert_int_equal(act_rc(b, &plain, step_of(HV_STEP_SHUTDOWN, -1, -1, -1), &err),
                     HV_E_UNSUPPORTED);
    assert_non_null(strstr(err.detail, "VMware Tools are not running"));
    struct hv_vm_obs pobs;
    observe_ok(b, &plain, &pobs);
    assert_false(pobs.can_shutdown);

    struct hv_vm_ref tools = ref_of(0, "vcsim");
    struct hv_vm_obs obs;
    observe_ok(b, &tools, &obs);
    assert_true(obs.can_shutdown);
    act_ok(b, &tools, step_of(HV_STEP_SHUTDOWN, -1, -1, -1));
    observe_ok(b, &tools, &obs);
    assert_int_equal(obs.power, HV_POWER_OFF); /* the simulator stops at once */
    /* Powering off what is off: InvalidPowerState from the task. */
    assert_int_equal(act_rc(b, &tools, step_of(HV_STEP_POWER_OFF, -1, -1, -1), &err),
                     HV_E_INVALID_STATE);
    act_ok(b, &tools, step_of(HV_STEP_POWER_ON, -1, -1, -1));
    b->ops->free(b);
}

static void test_bad_credentials(void **state)
{
    (void)state;
    char path[] = "/tmp/hv-vs-pass-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret-wrong\n", 13), 13);
    close(fd);
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    cfg.password_file = path;
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_AUTH);
    assert_null(strstr(err.detail, "s3cret"));
    b->ops->free(b);
    unlink(path);

    cfg.password_file = "/nonexistent/hv-password";
    b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_AUTH);
    b->ops->free(b);
}

/* Credentials per cluster for the identity tests: the launcher's own (mode 0), refused as a
 * revoked identity (1), or rotated to a password the launcher does not take (2). */
struct test_creds {
    int mode;
    int calls;
    char password[128];
};

static int test_creds_fn(void *ctx, const char *server, const char *identity, char *user,
                         size_t ulen, char *pass, size_t plen, int timeout_ms, struct hv_err *err)
{
    struct test_creds *tc = ctx;
    (void)server;
    (void)timeout_ms;
    tc->calls++;
    if (tc->mode == 1) {
        err->code = HV_E_CREDENTIALS;
        snprintf(err->detail, sizeof(err->detail), "identity of %s revoked", identity);
        return HV_E_CREDENTIALS;
    }
    snprintf(user, ulen, "%s", sim.username);
    snprintf(pass, plen, "%s%s", tc->password, tc->mode == 2 ? "-rotated" : "");
    return HV_OK;
}

static void read_sim_password(char *out, size_t cap)
{
    FILE *f = fopen(sim.password_file, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, (int)cap, f));
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

/* A cluster's session asks for its identity again before each call once identity_recheck_ms
 * has passed (here: always): the same credentials go on without a new Login; refused ones end
 * the session on the vCenter and fail the call; rotated ones log in again at once. */
static void test_identity_rechecked(void **state)
{
    (void)state;
    struct test_creds tc = {0};
    read_sim_password(tc.password, sizeof(tc.password));
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    cfg.creds = test_creds_fn;
    cfg.creds_ctx = &tc;
    cfg.identity_recheck_ms = -1;
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "vcsim");
    snprintf(ref.cluster, sizeof(ref.cluster), "%s", "ns1/cluster-a");
    struct hv_vm_obs obs;
    long logins = vcsim_calls(&sim, "Login"), logouts = vcsim_calls(&sim, "Logout");
    observe_ok(b, &ref, &obs);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 1);
    int asked = tc.calls;
    observe_ok(b, &ref, &obs);
    assert_true(tc.calls > asked);                            /* asked again */
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 1); /* same: same session */

    tc.mode = 1; /* revoked */
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_CREDENTIALS);
    assert_int_equal(vcsim_calls(&sim, "Logout"), logouts + 1);
    assert_null(strstr(err.detail, tc.password));

    tc.mode = 0; /* restored: a new session */
    observe_ok(b, &ref, &obs);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 2);

    tc.mode = 2; /* rotated: the old session ends and the new password is tried at once */
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_AUTH);
    assert_int_equal(vcsim_calls(&sim, "Logout"), logouts + 2);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 3);
    assert_null(strstr(err.detail, tc.password));
    b->ops->free(b);
}

/* Sessions of clusters nobody uses any more are logged out and freed (here: as soon as
 * unused), so the session table never fills up for good. */
static void test_idle_sessions_freed(void **state)
{
    (void)state;
    struct test_creds tc = {0};
    read_sim_password(tc.password, sizeof(tc.password));
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    cfg.creds = test_creds_fn;
    cfg.creds_ctx = &tc;
    cfg.session_idle_ms = -1;
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "vcsim");
    struct hv_vm_obs obs;
    long logouts = vcsim_calls(&sim, "Logout");
    for (int i = 0; i < 5; i++) {
        snprintf(ref.cluster, sizeof(ref.cluster), "ns1/cluster-%d", i);
        observe_ok(b, &ref, &obs);
        assert_int_equal(vs_backend_sessions(b), 1);
    }
    assert_int_equal(vcsim_calls(&sim, "Logout"), logouts + 4);
    b->ops->free(b);
    assert_int_equal(vcsim_calls(&sim, "Logout"), logouts + 5);
}

/* The request's thumbprint pins a server that pins nothing itself only when its entry allows
 * it: otherwise it is ignored and the system CAs (which do not know the launcher) refuse. */
static void test_request_thumbprint_only_if_allowed(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    cfg.thumbprint = NULL;
    struct hv_vm_ref ref = ref_of(0, "vcsim");
    snprintf(ref.thumbprint, sizeof(ref.thumbprint), "%s", sim.sha256);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    long logins = vcsim_calls(&sim, "Login");
    struct hv_backend *b = vcsim_backend(&cfg);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_TLS);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins);
    b->ops->free(b);

    cfg.allow_request_thumbprint = 1;
    b = vcsim_backend(&cfg);
    observe_ok(b, &ref, &obs);
    assert_int_equal(vcsim_calls(&sim, "Login"), logins + 1);
    b->ops->free(b);
}

static void test_unknown_server(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "vc.elsewhere.example");
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_false(b->ops->serves(b, &ref));
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_NOT_FOUND);
    b->ops->free(b);
}

#define ROUNDS 6

struct worker {
    struct hv_backend *b;
    int failures;
    char detail[HV_MSG_MAX];
};

static void *observe_loop(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < sim.nvms; i++) {
            struct hv_vm_ref ref = ref_of(i, "");
            struct hv_vm_obs obs;
            struct hv_err err = {0};
            if (w->b->ops->observe(w->b, &ref, &obs, &err) != HV_OK || !obs.found) {
                w->failures++;
                memcpy(w->detail, err.detail, sizeof(w->detail));
            }
        }
    }
    return NULL;
}

/* Many threads, one backend: one session, one re-login after the server drops it. */
static void test_threads_share_session(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    enum { N = 8 };
    pthread_t t[N];
    struct worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){.b = b};
        assert_int_equal(pthread_create(&t[i], NULL, observe_loop, &w[i]), 0);
    }
    usleep(20000);
    assert_true(vcsim_expire_sessions(&sim) >= 1);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failures)
            fail_msg("thread %d: %d failures, last: %s", i, w[i].failures, w[i].detail);
    }
    struct vs_stats st;
    vs_server_stats(vs_backend_server(b, 0), &st);
    fprintf(stderr, "# %d threads x %zu observes: %lu calls, %lu logins, %lu re-logins\n", N,
            ROUNDS * sim.nvms, st.calls, st.logins, st.relogins);
    assert_int_equal(st.logins, 1 + st.relogins);
    assert_int_equal(st.relogins, 1);
    b->ops->free(b);
}

/* Busy callers reuse their connections: as many threads as a busy engine has workers, each
 * observing every VM again and again, open about one connection each, not one per call
 * (each pooled handle keeps its own keep-alive connection; no connection cache is shared
 * between threads, which libcurl does not support). */
static void test_threads_reuse_connections(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0, "");
    struct hv_vm_obs obs;
    observe_ok(b, &ref, &obs);
    enum { N = 16 };
    pthread_t t[N];
    struct worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){.b = b};
        assert_int_equal(pthread_create(&t[i], NULL, observe_loop, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failures)
            fail_msg("thread %d: %d failures, last: %s", i, w[i].failures, w[i].detail);
    }
    struct vs_stats st;
    vs_server_stats(vs_backend_server(b, 0), &st);
    fprintf(stderr, "# %d threads x %zu observes: %lu calls over %lu connections\n", N,
            ROUNDS * sim.nvms, st.calls, st.connects);
    assert_true(st.calls >= (unsigned long)N * ROUNDS * sim.nvms);
    assert_true(st.connects <= N + 1);
    b->ops->free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_login_and_find),
        cmocka_unit_test(test_observe),
        cmocka_unit_test(test_live_memory_and_cpus),
        cmocka_unit_test(test_plan_from_an_assumed_observation),
        cmocka_unit_test(test_cold_cycle),
        cmocka_unit_test(test_disk_hot_extend),
        cmocka_unit_test(test_disk_refusals_and_ide),
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_scan_leaves_morefs),
        cmocka_unit_test(test_thumbprints),
        cmocka_unit_test(test_ca_file),
        cmocka_unit_test(test_session_expiry),
        cmocka_unit_test(test_power_on_fails_twice),
        cmocka_unit_test(test_busy_vm),
        cmocka_unit_test(test_concurrent_change),
        cmocka_unit_test(test_record_compare_and_swap),
        cmocka_unit_test(test_record_write_reads_back_its_version),
        cmocka_unit_test(test_task_read_uses_disk_selector),
        cmocka_unit_test(test_shutdown_needs_tools),
        cmocka_unit_test(test_bad_credentials),
        cmocka_unit_test(test_identity_rechecked),
        cmocka_unit_test(test_idle_sessions_freed),
        cmocka_unit_test(test_request_thumbprint_only_if_allowed),
        cmocka_unit_test(test_unknown_server),
        cmocka_unit_test(test_threads_share_session),
        cmocka_unit_test(test_threads_reuse_connections),
    };
    return cmocka_run_group_tests_name("vsphere-sim", tests, setup, teardown);
}
