/* kv_plan.c: which field KubeVirt can change live on this VM now (its LiveUpdate rules) and
 * why not. Pure decisions over struct kv_state; reasons are fixed strings.
 */
#include <stdio.h>
#include <string.h>

#include "kv_internal.h"

#define KV_MAX_MEMORY_MIB (INT64_MAX >> 20)
#define KV_MAX_SOCKETS    4096

#define KV_R_OFF         HV_MSG("the VirtualMachine is not running")
#define KV_R_NO_CR       HV_MSG("the KubeVirt CR cannot be read: its vmRolloutStrategy is unknown")
#define KV_R_STAGE       HV_MSG("KubeVirt's vmRolloutStrategy is not LiveUpdate")
#define KV_R_RESTART_REQ HV_MSG("the VirtualMachine already needs a restart (RestartRequired)")
#define KV_R_MEM_SHRINK  HV_MSG("memory shrink needs a restart")
#define KV_R_MEM_MAX     HV_MSG("above memory.maxGuest")
#define KV_R_MEM_NOGUEST HV_MSG("the VirtualMachine sets no memory.guest to hot-plug")
#define KV_R_CPU_SHRINK  HV_MSG("socket shrink needs a restart")
#define KV_R_CPU_MAX     HV_MSG("above cpu.maxSockets")
#define KV_R_CORES       HV_MSG("cores per socket change needs a restart")
#define KV_R_NOT_MIGR    HV_MSG("the VMI is not live-migratable (KubeVirt hot-plugs by migration)")

static void set(struct hv_field_plan *p, enum hv_how how, const char *method, const char *reason)
{
    p->how = how;
    snprintf(p->method, sizeof(p->method), "%s", method ? method : "");
    snprintf(p->reason, sizeof(p->reason), "%s", reason ? reason : "");
}

void kv_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT])
{
    for (int f = 0; f < HV_F_COUNT; f++)
        set(&plan[f], HV_HOW_NONE, NULL, NULL);
    if (desired->memory_mib == 0)
        set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("memory must be positive"));
    else if (desired->memory_mib > KV_MAX_MEMORY_MIB)
        set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, NULL,
            HV_MSG("memory above what a quantity of bytes can express"));
    if (desired->cpus == 0 || desired->cpus > KV_MAX_SOCKETS)
        set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("sockets out of range (1 to 4096)"));
    if (desired->cores_per_socket == 0 || desired->cores_per_socket > KV_MAX_SOCKETS)
        set(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("cores per socket out of range"));
    if (hv_disk_set(desired->disk_mib))
        set(&plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, NULL,
            HV_MSG("the KubeVirt backend does not resize disks"));
}

void kv_assume(struct kv_state *st, const struct hv_hw *hw)
{
    if (hw->memory_mib > 0) {
        st->mem_mib = hw->memory_mib;
        if (st->vmi_mem_mib >= 0)
            st->vmi_mem_mib = hw->memory_mib;
        if (st->guest_current_mib >= 0)
            st->guest_current_mib = hw->memory_mib;
        if (st->guest_requested_mib >= 0)
            st->guest_requested_mib = hw->memory_mib;
    }
    if (hw->cpus > 0) {
        st->sockets = hw->cpus;
        if (st->vmi_sockets >= 0)
            st->vmi_sockets = hw->cpus;
        if (st->cur_sockets >= 0)
            st->cur_sockets = hw->cpus;
    }
    if (hw->cores_per_socket > 0) {
        st->cores = hw->cores_per_socket;
        if (st->cur_cores >= 0)
            st->cur_cores = hw->cores_per_socket;
    }
}

int kv_plan_compute(const struct kv_state *st, const struct hv_hw *desired,
                    struct hv_field_plan plan[HV_F_COUNT])
{
    struct hv_field_plan fixed[HV_F_COUNT];
    kv_check(desired, fixed);
    for (int f = 0; f < HV_F_COUNT; f++)
        set(&plan[f], HV_HOW_NONE, NULL, NULL);
    bool on = kv_running(st) && st->vmi;
    /* what the VM runs with now (the VMI), or is configured with (off) */
    int64_t cur_mem = st->mem_mib;
    int32_t cur_sockets = st->sockets, cur_cores = st->cores;
    if (on) {
        if (st->guest_current_mib >= 0)
            cur_mem = st->guest_current_mib;
        else if (st->vmi_mem_mib >= 0)
            cur_mem = st->vmi_mem_mib;
        if (st->cur_sockets >= 0)
            cur_sockets = st->cur_sockets;
        else if (st->vmi_sockets >= 0)
            cur_sockets = st->vmi_sockets;
        if (st->cur_cores >= 0)
            cur_cores = st->cur_cores;
    }
    bool mem = desired->memory_mib >= 0 && desired->memory_mib != cur_mem;
    bool cpus = desired->cpus >= 0 && desired->cpus != cur_sockets;
    bool cores = desired->cores_per_socket >= 0 && desired->cores_per_socket != cur_cores;
    /* one hot-plug of each kind at a time: a change of a field whose last one KubeVirt has not
     * finished waits (the engine asks again) */
    if (on &&
        ((mem && (st->hot_mem || (st->guest_current_mib >= 0 && st->guest_requested_mib >= 0 &&
                                  st->guest_current_mib != st->guest_requested_mib))) ||
         (cpus && st->hot_cpu)))
        return HV_E_BUSY;
    /* the reason every change that could otherwise be live is cold for */
    const char *all_cold = NULL;
    if (!on)
        all_cold = KV_R_OFF;
    else if (st->restart_required)
        all_cold = KV_R_RESTART_REQ;
    else if (!st->cr_read)
        all_cold = KV_R_NO_CR;
    else if (st->rollout[0] && strcmp(st->rollout, "LiveUpdate"))
        all_cold = KV_R_STAGE;
    else if (st->not_migratable)
        all_cold = KV_R_NOT_MIGR;

    if (mem) {
        struct hv_field_plan *p = &plan[HV_F_MEMORY];
        int64_t max = kv_max_guest(st);
        if (fixed[HV_F_MEMORY].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_MEMORY];
        else if (all_cold)
            set(p, HV_HOW_COLD, NULL, all_cold);
        else if (desired->memory_mib < cur_mem)
            set(p, HV_HOW_COLD, NULL, KV_R_MEM_SHRINK);
        else if (!st->has_memory_obj || st->vmi_mem_mib < 0)
            set(p, HV_HOW_COLD, NULL, KV_R_MEM_NOGUEST);
        else if (max < 0 || desired->memory_mib > max)
            set(p, HV_HOW_COLD, NULL, KV_R_MEM_MAX);
        else
            set(p, HV_HOW_LIVE, "memory hot-plug", NULL);
    }
    if (cpus) {
        struct hv_field_plan *p = &plan[HV_F_CPUS];
        int32_t max = kv_max_sockets(st);
        if (fixed[HV_F_CPUS].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_CPUS];
        else if (all_cold)
            set(p, HV_HOW_COLD, NULL, all_cold);
        else if (desired->cpus < cur_sockets)
            set(p, HV_HOW_COLD, NULL, KV_R_CPU_SHRINK);
        else if (max < 0 || desired->cpus > max)
            set(p, HV_HOW_COLD, NULL, KV_R_CPU_MAX);
        else
            set(p, HV_HOW_LIVE, "socket hot-plug", NULL);
    }
    if (cores) {
        struct hv_field_plan *p = &plan[HV_F_CORES];
        if (fixed[HV_F_CORES].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_CORES];
        else
            set(p, HV_HOW_COLD, NULL, on ? KV_R_CORES : KV_R_OFF);
    }
    if (fixed[HV_F_DISK].how == HV_HOW_IMPOSSIBLE)
        plan[HV_F_DISK] = fixed[HV_F_DISK];
    return HV_OK;
}
