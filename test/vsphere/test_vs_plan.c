/* test_vs_plan.c: the vSphere live/cold/impossible rules as a table: one row per rule
 * (power state, hot-add flags, 4 MiB multiple, hot-add increment and limit, the Linux 3 GB
 * edge, cores-per-socket multiples, coresPerSocket always cold).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vs_plan.h"

/* A running VM with every hot-plug switch on and no increment/limit. */
static struct vs_vm base(void)
{
    struct vs_vm vm;
    memset(&vm, 0, sizeof(vm));
    snprintf(vm.moref, sizeof(vm.moref), "vm-1");
    vm.power = HV_POWER_ON;
    vm.memory_mb = 4096;
    vm.cpus = 4;
    vm.cores_per_socket = 1;
    vm.mem_hot_add = vm.cpu_hot_add = vm.cpu_hot_remove = true;
    return vm;
}

struct row {
    const char *name;
    void (*tweak)(struct vs_vm *vm);
    struct hv_hw want;
    enum hv_field field;
    enum hv_how how;
    const char *reason; /* substring; NULL = don't care */
};

static void none(struct vs_vm *vm)
{
    (void)vm;
}
static void off(struct vs_vm *vm)
{
    vm->power = HV_POWER_OFF;
}
static void suspended(struct vs_vm *vm)
{
    vm->power = HV_POWER_PAUSED;
}
static void no_mem_hot(struct vs_vm *vm)
{
    vm->mem_hot_add = false;
}
static void no_cpu_hot(struct vs_vm *vm)
{
    vm->cpu_hot_add = false;
}
static void no_cpu_remove(struct vs_vm *vm)
{
    vm->cpu_hot_remove = false;
}
static void incr128(struct vs_vm *vm)
{
    vm->hotplug_increment_mb = 128;
}
static void limit16g(struct vs_vm *vm)
{
    vm->hotplug_limit_mb = 16384;
}
static void small_mem(struct vs_vm *vm)
{
    vm->memory_mb = 2048;
}
static void edge_mem(struct vs_vm *vm)
{
    vm->memory_mb = 3072;
}
static void cores2(struct vs_vm *vm)
{
    vm->cores_per_socket = 2;
}

static const struct row rows[] = {
    {"memory grows live", none, {8192, -1, -1, -1}, HV_F_MEMORY, HV_HOW_LIVE, ""},
    {"memory not a 4 MiB multiple",
     none,
     {8190, -1, -1, -1},
     HV_F_MEMORY,
     HV_HOW_IMPOSSIBLE,
     "memoryMiB must be a multiple of 4"},
    {"odd memory on an off VM is still impossible",
     off,
     {8191, -1, -1, -1},
     HV_F_MEMORY,
     HV_HOW_IMPOSSIBLE,
     "memoryMiB must be a multiple of 4"},
    {"zero memory", none, {0, -1, -1, -1}, HV_F_MEMORY, HV_HOW_IMPOSSIBLE, "positive"},
    {"memory shrinks cold", none, {2048, -1, -1, -1}, HV_F_MEMORY, HV_HOW_COLD, "shrink"},
    {"off VM: plain reconfigure", off, {8192, -1, -1, -1}, HV_F_MEMORY, HV_HOW_COLD, "not running"},
    {"suspended VM is not live",
     suspended,
     {8192, -1, -1, -1},
     HV_F_MEMORY,
     HV_HOW_COLD,
     "not running"},
    {"hot-add disabled",
     no_mem_hot,
     {8192, -1, -1, -1},
     HV_F_MEMORY,
     HV_HOW_COLD,
     "memory hot-add is disabled"},
    {"increment multiple", incr128, {4096 + 256, -1, -1, -1}, HV_F_MEMORY, HV_HOW_LIVE, ""},
    {"not an increment multiple",
     incr128,
     {4096 + 100, -1, -1, -1},
     HV_F_MEMORY,
     HV_HOW_COLD,
     "increment"},
    {"up to the limit", limit16g, {16384, -1, -1, -1}, HV_F_MEMORY, HV_HOW_LIVE, ""},
    {"past the limit", limit16g, {16388, -1, -1, -1}, HV_F_MEMORY, HV_HOW_COLD, "limit"},
    {"Linux edge: 2048 -> 4096", small_mem, {4096, -1, -1, -1}, HV_F_MEMORY, HV_HOW_COLD, "3072"},
    {"Linux edge: 3072 -> 3076", edge_mem, {3076, -1, -1, -1}, HV_F_MEMORY, HV_HOW_COLD, "3072"},
    {"below the edge stays live", small_mem, {3072, -1, -1, -1}, HV_F_MEMORY, HV_HOW_LIVE, ""},
    {"above the edge stays live", none, {4100, -1, -1, -1}, HV_F_MEMORY, HV_HOW_LIVE, ""},
    {"same memory: nothing", none, {4096, -1, -1, -1}, HV_F_MEMORY, HV_HOW_NONE, ""},
    {"cpus grow live", none, {-1, 6, -1, -1}, HV_F_CPUS, HV_HOW_LIVE, ""},
    {"cpu hot-add disabled",
     no_cpu_hot,
     {-1, 6, -1, -1},
     HV_F_CPUS,
     HV_HOW_COLD,
     "CPU hot-add is disabled"},
    {"cpus shrink live with hot-remove", none, {-1, 2, -1, -1}, HV_F_CPUS, HV_HOW_LIVE, ""},
    {"cpus shrink without hot-remove",
     no_cpu_remove,
     {-1, 2, -1, -1},
     HV_F_CPUS,
     HV_HOW_COLD,
     "hot-remove"},
    {"cpus off a cores multiple",
     cores2,
     {-1, 5, -1, -1},
     HV_F_CPUS,
     HV_HOW_IMPOSSIBLE,
     "multiple of coresPerSocket"},
    {"cpus on a cores multiple", cores2, {-1, 6, -1, -1}, HV_F_CPUS, HV_HOW_LIVE, ""},
    {"cpus on an off VM", off, {-1, 6, -1, -1}, HV_F_CPUS, HV_HOW_COLD, "not running"},
    {"zero cpus", none, {-1, 0, -1, -1}, HV_F_CPUS, HV_HOW_IMPOSSIBLE, "positive"},
    {"cores change is cold", none, {-1, -1, 2, -1}, HV_F_CORES, HV_HOW_COLD, "only changes"},
    {"cores change on an off VM is cold", off, {-1, -1, 2, -1}, HV_F_CORES, HV_HOW_COLD, ""},
    {"cores not dividing cpus", none, {-1, -1, 3, -1}, HV_F_CORES, HV_HOW_IMPOSSIBLE, "multiple"},
    {"cpus with new cores: checked against the new cores",
     none,
     {-1, 6, 3, -1},
     HV_F_CPUS,
     HV_HOW_COLD,
     "coresPerSocket changes too"},
    {"cpus with new cores that do not divide",
     none,
     {-1, 6, 4, -1},
     HV_F_CPUS,
     HV_HOW_IMPOSSIBLE,
     "multiple of coresPerSocket (4)"},
    {"same cores: nothing", none, {-1, -1, 1, -1}, HV_F_CORES, HV_HOW_NONE, ""},
};

static void test_rule_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        struct vs_vm vm = base();
        r->tweak(&vm);
        struct hv_field_plan plan[HV_F_COUNT];
        vs_plan(&vm, &r->want, plan);
        const struct hv_field_plan *p = &plan[r->field];
        if (p->how != r->how)
            fail_msg("%s: how %d, want %d (%s)", r->name, p->how, r->how, p->reason);
        if (r->reason && !strstr(p->reason, r->reason))
            fail_msg("%s: reason '%s' lacks '%s'", r->name, p->reason, r->reason);
        if (p->how == HV_HOW_LIVE && r->field == HV_F_MEMORY && strcmp(p->method, "hot-add"))
            fail_msg("%s: method '%s'", r->name, p->method);
    }
}

static void test_untouched_fields(void **state)
{
    (void)state;
    struct vs_vm vm = base();
    struct hv_hw want = {8192, -1, -1, -1};
    struct hv_field_plan plan[HV_F_COUNT];
    vs_plan(&vm, &want, plan);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);
    assert_int_equal(plan[HV_F_CORES].how, HV_HOW_NONE);
    /* Unknown cores (older VMs report none) count as one per socket. */
    vm.cores_per_socket = -1;
    want = (struct hv_hw){-1, 5, -1, -1};
    vs_plan(&vm, &want, plan);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE);
    assert_int_equal(plan[HV_F_CORES].how, HV_HOW_NONE);
}

/* The VM as an operation in flight leaves it (hv_vm_obs.assumed, vs_assume): going back to
 * today's hardware after a grow in flight is a shrink; the limits stay as read. */
static void test_assumed_values(void **state)
{
    (void)state;
    struct vs_vm vm = base();
    struct hv_hw now = {vm.memory_mb, vm.cpus, -1, -1};
    struct hv_field_plan plan[HV_F_COUNT];
    vs_plan(&vm, &now, plan);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_NONE);
    struct hv_hw after = {vm.memory_mb + 1024, vm.cpus + 2, -1, -1};
    vs_assume(&vm, &after);
    assert_int_equal(vm.memory_mb, after.memory_mib);
    assert_int_equal(vm.cpus, after.cpus);
    assert_true(vm.mem_hot_add); /* (as read) */
    vs_plan(&vm, &now, plan);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_int_equal(plan[HV_F_CPUS].how, vm.cpu_hot_remove ? HV_HOW_LIVE : HV_HOW_COLD);
    /* unset fields keep what was read */
    struct hv_hw none = {-1, -1, -1, -1};
    int32_t cores = vm.cores_per_socket;
    vs_assume(&vm, &none);
    assert_int_equal(vm.cores_per_socket, cores);
    assert_int_equal(vm.memory_mb, after.memory_mib);
}

/* A running VM with a thin 25 GiB disk on a PVSCSI controller and 100 GiB free. */
static struct vs_vm disk_vm(void)
{
    struct vs_vm vm = base();
    vm.disk.found = true;
    vm.disk.capacity_bytes = 25LL << 30;
    vm.disk.thin = true;
    vm.disk_ds_free = 100LL << 30;
    snprintf(vm.disk.backing, sizeof(vm.disk.backing), "VirtualDiskFlatVer2BackingInfo");
    snprintf(vm.disk.controller, sizeof(vm.disk.controller), "ParaVirtualSCSIController");
    snprintf(vm.disk.xml, sizeof(vm.disk.xml), "<key>2000</key>");
    return vm;
}

/* A disk size whose bytes do not fit 64 bits is refused by the rules that hold whatever the
 * VM (ops->check, so CanUpdate and UpdateMachine alike) and by the plan, never multiplied. */
static void test_disk_size_past_64_bits(void **state)
{
    (void)state;
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_hw want = {-1, -1, -1, (INT64_MAX >> 20) + 1};
    vs_check(&want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "disk size above what a hypervisor can express");
    struct vs_vm vm = disk_vm();
    vs_plan(&vm, &want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "disk size above what a hypervisor can express");
    want.disk_mib = INT64_MAX >> 20; /* the largest that fits */
    vs_check(&want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE);
}

static void test_disk_rules(void **state)
{
    (void)state;
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_hw want = {-1, -1, -1, 40 * 1024};
    struct {
        const char *name;
        void (*tweak)(struct vs_vm *vm);
        enum hv_how how;
        const char *reason;
    } drows[] = {
        {"hot-extend", NULL, HV_HOW_LIVE, ""},
        {"no disk", NULL, HV_HOW_IMPOSSIBLE, "the VM has no such virtual disk"},
        {"no capacity", NULL, HV_HOW_IMPOSSIBLE, "vCenter does not report the disk's capacity"},
        {"larger already", NULL, HV_HOW_NONE, ""},
        {"rdm", NULL, HV_HOW_IMPOSSIBLE, "raw device mapping"},
        {"snapshots", NULL, HV_HOW_IMPOSSIBLE, "the VM has snapshots"},
        {"thick, no room", NULL, HV_HOW_IMPOSSIBLE, "lacks the free space"},
        {"thin, no room", NULL, HV_HOW_LIVE, ""},
        {"off", NULL, HV_HOW_COLD, "VM is not running"},
        {"ide", NULL, HV_HOW_COLD, "IDE controller"},
        {"too large to echo", NULL, HV_HOW_IMPOSSIBLE, "device description is too large"},
    };
    for (size_t i = 0; i < sizeof(drows) / sizeof(drows[0]); i++) {
        struct vs_vm vm = disk_vm();
        struct hv_hw w = want;
        switch (i) {
        case 1:
            vm.disk.found = false;
            break;
        case 2:
            vm.disk.capacity_bytes = -1;
            break;
        case 3:
            w.disk_mib = 24 * 1024;
            break;
        case 4:
            snprintf(vm.disk.backing, sizeof(vm.disk.backing),
                     "VirtualDiskRawDiskMappingVer1BackingInfo");
            break;
        case 5:
            vm.has_snapshots = true;
            break;
        case 6:
            vm.disk.thin = false;
            vm.disk_ds_free = 10LL << 30;
            break;
        case 7:
            vm.disk_ds_free = 10LL << 30;
            break;
        case 8:
            vm.power = HV_POWER_OFF;
            break;
        case 9:
            snprintf(vm.disk.controller, sizeof(vm.disk.controller), "VirtualIDEController");
            break;
        case 10:
            vm.disk.xml[0] = '\0';
            break;
        default:
            break;
        }
        vs_plan(&vm, &w, plan);
        if (plan[HV_F_DISK].how != drows[i].how)
            fail_msg("%s: how %d, want %d (%s)", drows[i].name, plan[HV_F_DISK].how, drows[i].how,
                     plan[HV_F_DISK].reason);
        if (!strstr(plan[HV_F_DISK].reason, drows[i].reason))
            fail_msg("%s: reason '%s' lacks '%s'", drows[i].name, plan[HV_F_DISK].reason,
                     drows[i].reason);
        assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);
    }
    /* the same size: nothing to plan; an unset size neither */
    struct vs_vm vm = disk_vm();
    want.disk_mib = 25 * 1024;
    vs_plan(&vm, &want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE);
    want.disk_mib = 0;
    vs_plan(&vm, &want, plan);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE);
    assert_int_equal(vs_disk_mib(&vm), 25 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_table),
        cmocka_unit_test(test_disk_rules),
        cmocka_unit_test(test_disk_size_past_64_bits),
        cmocka_unit_test(test_untouched_fields),
        cmocka_unit_test(test_assumed_values),
    };
    return cmocka_run_group_tests_name("vsphere-plan", tests, NULL, NULL);
}
