/* vs_plan.c: vSphere's live-change rules. Memory grows live only on a powered-on VM with
 * memoryHotAddEnabled, by a multiple of hotPlugMemoryIncrementSize, up to hotPlugMemoryLimit,
 * and not across the 3 GB edge Linux guests cannot cross live. vCPUs change live with
 * cpuHotAdd/RemoveEnabled while staying a multiple of coresPerSocket; coresPerSocket only
 * changes cold. Reasons are stable strings (they reach CAPI answers); no I/O here.
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
