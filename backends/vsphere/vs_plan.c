/* vs_plan.c: vSphere's live-change rules. Disks grow only, by hot-extend unless on IDE. Memory
 * grows live only on a powered-on VM with memoryHotAddEnabled, by a multiple of
 * hotPlugMemoryIncrementSize, up to hotPlugMemoryLimit, and not across the 3 GB edge Linux guests
 * cannot cross live. vCPUs change live with cpuHotAdd/RemoveEnabled while staying a multiple of
 * coresPerSocket; coresPerSocket only changes cold. Reasons are stable strings (they reach CAPI
 * answers); no I/O here.
 */
#include "vs_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void set(struct hv_field_plan *p, enum hv_how how, const char *method, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set(struct hv_field_plan *p, enum hv_how how, const char *method, const char *fmt, ...)
{
    p->how = how;
    snprintf(p->method, sizeof(p->method), "%s", method);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
    va_end(ap);
}

void vs_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT])
{
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    int64_t mem = desired->memory_mib;
    int32_t cpus = desired->cpus, cores = desired->cores_per_socket;
    if (mem == 0)
        set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, "", HV_MSG("memoryMiB must be positive"));
    else if (mem > 0 && mem % 4 != 0)
        set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, "", HV_MSG("memoryMiB must be a multiple of 4"));
    else if (mem > VS_MAX_MEMORY_MB)
        set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, "",
            HV_MSG("memoryMiB above vSphere's maximum for a VM (%d MiB)"), VS_MAX_MEMORY_MB);
    if (cpus == 0)
        set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, "", HV_MSG("cpus must be positive"));
    else if (cpus > VS_MAX_CPUS)
        set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, "",
            HV_MSG("cpus above vSphere's maximum for a VM (%d)"), VS_MAX_CPUS);
    else if (cpus > 0 && cores > 0 && cpus % cores != 0)
        set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, "",
            HV_MSG("cpus must be a multiple of coresPerSocket (%d)"), cores);
    if (cores == 0)
        set(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, "", HV_MSG("coresPerSocket must be positive"));
    else if (cores > VS_MAX_CORES_PER_SOCKET)
        set(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, "",
            HV_MSG("coresPerSocket above vSphere's maximum (%d)"), VS_MAX_CORES_PER_SOCKET);
    else if (cores > 0 && cpus > 0 && cpus % cores != 0)
        set(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, "",
            HV_MSG("cpus (%d) must be a multiple of coresPerSocket"), cpus);
    if (desired->disk_mib > HV_DISK_MAX_MIB)
        set(&plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, "", "%s", HV_REASON_DISK_MAX);
}

static void plan_memory(const struct vs_vm *vm, int64_t want, struct hv_field_plan *p)
{
    int64_t have = vm->memory_mb;
    if (vm->power != HV_POWER_ON) {
        set(p, HV_HOW_COLD, "", HV_MSG("VM is not running: memory changes with a reconfigure"));
    } else if (want < have) {
        set(p, HV_HOW_COLD, "", HV_MSG("memory cannot shrink while the VM runs"));
    } else if (!vm->mem_hot_add) {
        set(p, HV_HOW_COLD, "", HV_MSG("memory hot-add is disabled on this VM"));
    } else if (vm->hotplug_increment_mb > 0 && (want - have) % vm->hotplug_increment_mb != 0) {
        set(p, HV_HOW_COLD, "",
            HV_MSG("memory increase is not a multiple of the VM's hot-add increment (%lld MiB)"),
            (long long)vm->hotplug_increment_mb);
    } else if (vm->hotplug_limit_mb > 0 && want > vm->hotplug_limit_mb) {
        set(p, HV_HOW_COLD, "", HV_MSG("memory would exceed the VM's hot-add limit (%lld MiB)"),
            (long long)vm->hotplug_limit_mb);
    } else if (have <= VS_LINUX_HOTADD_EDGE_MB && want > VS_LINUX_HOTADD_EDGE_MB) {
        set(p, HV_HOW_COLD, "",
            HV_MSG(
                "growing past 3072 MiB from 3072 MiB or less needs a power cycle (Linux guests)"));
    } else {
        set(p, HV_HOW_LIVE, "hot-add", "%s", "");
    }
}

static void plan_cpus(const struct vs_vm *vm, int32_t want, int32_t cores, bool cores_change,
                      struct hv_field_plan *p)
{
    if (want % cores != 0) { /* the VM's own coresPerSocket (the desired one: vs_check) */
        set(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("cpus must be a multiple of coresPerSocket (%d)"),
            cores);
    } else if (vm->power != HV_POWER_ON) {
        set(p, HV_HOW_COLD, "", HV_MSG("VM is not running: cpus change with a reconfigure"));
    } else if (cores_change) {
        set(p, HV_HOW_COLD, "", HV_MSG("coresPerSocket changes too, which needs a power cycle"));
    } else if (want > vm->cpus && !vm->cpu_hot_add) {
        set(p, HV_HOW_COLD, "", HV_MSG("CPU hot-add is disabled on this VM"));
    } else if (want < vm->cpus && !vm->cpu_hot_remove) {
        set(p, HV_HOW_COLD, "", HV_MSG("CPU hot-remove is disabled on this VM"));
    } else {
        set(p, HV_HOW_LIVE, want > vm->cpus ? "hot-add" : "hot-remove", "%s", "");
    }
}

/* Backings whose capacity an edit can grow (not raw device mappings, not others). */
static bool growable_backing(const char *t)
{
    return !strcmp(t, "VirtualDiskFlatVer2BackingInfo") ||
           !strcmp(t, "VirtualDiskSeSparseBackingInfo") ||
           !strcmp(t, "VirtualDiskSparseVer2BackingInfo") ||
           !strcmp(t, "VirtualDiskFlatVer1BackingInfo");
}

/* Disks only grow. Live ("hot-extend") on a running VM unless its controller is IDE; never on
 * a VM with snapshots, a raw device mapping, or a thick disk whose datastore lacks the room. */
static void plan_disk(const struct vs_vm *vm, int64_t want_mib, struct hv_field_plan *p)
{
    const struct vs_disk *d = &vm->disk;
    int64_t want = want_mib * 1024 * 1024;
    if (!d->found) {
        set(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("the VM has no such virtual disk"));
    } else if (d->capacity_bytes < 0) {
        set(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("vCenter does not report the disk's capacity"));
    } else if (want < d->capacity_bytes) {
        set(p, HV_HOW_IMPOSSIBLE, "", HV_REASON_DISK_SHRINK);
    } else if (!growable_backing(d->backing)) {
        set(p, HV_HOW_IMPOSSIBLE, "",
            HV_MSG("the disk's backing cannot be grown (e.g. a raw device mapping)"));
    } else if (!d->xml[0]) {
        set(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("the disk's device description is too large"));
    } else if (vm->has_snapshots) {
        set(p, HV_HOW_IMPOSSIBLE, "",
            HV_MSG("the VM has snapshots, and vSphere cannot grow a disk that has them; "
                   "delete or consolidate them"));
    } else if (!d->thin && vm->disk_ds_free >= 0 && want - d->capacity_bytes > vm->disk_ds_free) {
        set(p, HV_HOW_IMPOSSIBLE, "",
            HV_MSG("the datastore lacks the free space to grow the disk"));
    } else if (vm->power != HV_POWER_ON) {
        set(p, HV_HOW_COLD, "", HV_MSG("VM is not running: the disk grows with a reconfigure"));
    } else if (!strcmp(d->controller, "VirtualIDEController")) {
        set(p, HV_HOW_COLD, "", HV_MSG("disks on an IDE controller grow only while the VM is off"));
    } else {
        set(p, HV_HOW_LIVE, "hot-extend", "%s", "");
    }
}

void vs_assume(struct vs_vm *vm, const struct hv_hw *hw)
{
    if (hw->memory_mib > 0)
        vm->memory_mb = hw->memory_mib;
    if (hw->cpus > 0)
        vm->cpus = hw->cpus;
    if (hw->cores_per_socket > 0)
        vm->cores_per_socket = hw->cores_per_socket;
    if (hv_disk_set(hw->disk_mib) && vm->disk.found &&
        (int64_t)hw->disk_mib * 1024 * 1024 > vm->disk.capacity_bytes)
        vm->disk.capacity_bytes = (int64_t)hw->disk_mib * 1024 * 1024;
}

/* The disk's capacity in MiB as the contract counts it (-1 when there is no such disk). */
int64_t vs_disk_mib(const struct vs_vm *vm)
{
    if (!vm->disk.found || vm->disk.capacity_bytes < 0)
        return -1;
    return vm->disk.capacity_bytes / (1024 * 1024);
}

void vs_plan(const struct vs_vm *vm, const struct hv_hw *desired,
             struct hv_field_plan plan[HV_F_COUNT])
{
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    int32_t have_cores = vm->cores_per_socket > 0 ? vm->cores_per_socket : 1;
    bool cores_change = desired->cores_per_socket >= 0 && desired->cores_per_socket != have_cores;
    int32_t cores = desired->cores_per_socket > 0 ? desired->cores_per_socket : have_cores;
    int32_t cpus = desired->cpus >= 0 ? desired->cpus : vm->cpus;

    struct hv_field_plan fixed[HV_F_COUNT];
    vs_check(desired, fixed);

    if (desired->memory_mib >= 0 && desired->memory_mib != vm->memory_mb) {
        if (fixed[HV_F_MEMORY].how == HV_HOW_IMPOSSIBLE)
            plan[HV_F_MEMORY] = fixed[HV_F_MEMORY];
        else
            plan_memory(vm, desired->memory_mib, &plan[HV_F_MEMORY]);
    }
    if (desired->cpus >= 0 && desired->cpus != vm->cpus) {
        if (fixed[HV_F_CPUS].how == HV_HOW_IMPOSSIBLE)
            plan[HV_F_CPUS] = fixed[HV_F_CPUS];
        else
            plan_cpus(vm, desired->cpus, cores, cores_change, &plan[HV_F_CPUS]);
    }
    if (fixed[HV_F_DISK].how == HV_HOW_IMPOSSIBLE)
        plan[HV_F_DISK] = fixed[HV_F_DISK];
    else if (hv_disk_set(desired->disk_mib) && vs_disk_mib(vm) < desired->disk_mib)
        plan_disk(vm, desired->disk_mib, &plan[HV_F_DISK]);
    if (cores_change) {
        struct hv_field_plan *p = &plan[HV_F_CORES];
        if (fixed[HV_F_CORES].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_CORES];
        else if (cpus > 0 && cpus % cores != 0) /* the VM's own cpus */
            set(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("cpus (%d) must be a multiple of coresPerSocket"),
                cpus);
        else
            set(p, HV_HOW_COLD, "", HV_MSG("coresPerSocket only changes while the VM is off"));
    }
}
