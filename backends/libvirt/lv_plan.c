/* lv_plan.c: which field can change live, how, and why not. Pure decisions over a parsed
 * live definition (struct lv_dominfo), shared by plan() and by the live steps, which re-plan
 * from a fresh read before acting. Reasons are fixed strings (never libvirt text) so the
 * engine can show them deterministically. Owns no memory.
 */
#include <stdio.h>
#include <string.h>

#include "lv_internal.h"

#define LV_R_OFF          HV_MSG("domain is off")
#define LV_R_MEM_SHRINK   HV_MSG("memory shrink needs a restart")
#define LV_R_NO_SLOTS_CFG HV_MSG("no memory hot-plug slots (no maxMemory)")
#define LV_R_SLOTS_FULL   HV_MSG("no free memory slots")
#define LV_R_ABOVE_MAX    HV_MSG("above maxMemory")
#define LV_R_DIMM_ALIGN   HV_MSG("memory delta not a multiple of 128 MiB")
#define LV_R_NO_NUMA      HV_MSG("no NUMA node for memory hot-add")
#define LV_R_NO_ACPI      HV_MSG("ACPI disabled: no memory hot-add")
#define LV_R_VMEM_ALIGN   HV_MSG("memory delta not a multiple of the virtio-mem block size")
#define LV_R_VMEM_ROOM    HV_MSG("virtio-mem device too small")
#define LV_R_CPU_SHRINK   HV_MSG("vCPU shrink needs a restart")
#define LV_R_CPU_MAX      HV_MSG("above maximum vCPUs")
#define LV_R_CORES        HV_MSG("cores per socket change needs a restart")
#define LV_R_MEM_MAX      HV_MSG("memory above what libvirt can express (8796093022207 MiB)")

const char *lv_mem_method_name(enum lv_mem_method m)
{
    switch (m) {
    case LV_MM_VIRTIO_MEM:
        return "virtio-mem";
    case LV_MM_DIMM:
        return "dimm";
    case LV_MM_BALLOON:
        return "balloon";
    default:
        return "";
    }
}

long long lv_align_up(long long v, long long a)
{
    if (a <= 0)
        return v;
    return (v + a - 1) / a * a;
}

bool lv_is_aligned(long long v, long long a)
{
    return a > 0 && v % a == 0;
}

/* NUMA node holding the least memory (cells + memory devices on it); ties: first cell. */
static int lv_least_node(const struct lv_dominfo *li)
{
    int best = -1;
    long long best_kib = 0;
    for (int i = 0; i < li->ncells; i++) {
        long long kib = li->cells[i].mem_kib;
        for (int j = 0; j < li->nmems; j++) {
            const struct lv_memdev *m = &li->mems[j];
            if (m->node != li->cells[i].id)
                continue;
            if (m->model == LV_MEM_VIRTIO_MEM)
                kib += m->current_kib > 0 ? m->current_kib : 0;
            else
                kib += m->size_kib;
        }
        if (best < 0 || kib < best_kib) {
            best = li->cells[i].id;
            best_kib = kib;
        }
    }
    return best;
}

void lv_plan_memory(const struct lv_dominfo *li, long long want_kib, struct lv_mem_choice *c)
{
    memset(c, 0, sizeof(*c));
    c->dev = -1;
    c->node = -1;
    long long delta = want_kib - li->effective_kib;
    if (delta <= 0)
        return;

    /* 1. a virtio-mem device with room: its <requested> grows by exactly delta */
    const char *vreason = NULL;
    for (int i = 0; i < li->nmems; i++) {
        const struct lv_memdev *m = &li->mems[i];
        if (m->model != LV_MEM_VIRTIO_MEM)
            continue;
        long long got = m->current_kib >= 0 ? m->current_kib : m->requested_kib;
        long long blk = m->block_kib > 0 ? m->block_kib : 2048;
        if (got < 0)
            got = 0;
        if (!lv_is_aligned(delta, blk)) {
            vreason = LV_R_VMEM_ALIGN;
            continue;
        }
        if (got + delta > m->size_kib) {
            vreason = LV_R_VMEM_ROOM;
            continue;
        }
        c->method = LV_MM_VIRTIO_MEM;
        c->dev = i;
        c->requested_kib = got + delta;
        return;
    }

    /* 2. a DIMM of exactly delta in a free slot, under maxMemory, on the emptiest node */
    const char *dreason;
    if (li->max_kib <= 0 || li->slots <= 0)
        dreason = LV_R_NO_SLOTS_CFG;
    else if (li->slots_used >= li->slots)
        dreason = LV_R_SLOTS_FULL;
    else if (li->memory_kib + delta > li->max_kib)
        dreason = LV_R_ABOVE_MAX;
    else if (!lv_is_aligned(delta, (long long)LV_DIMM_ALIGN_MIB * 1024))
        dreason = LV_R_DIMM_ALIGN;
    else if (li->ncells == 0)
        dreason = LV_R_NO_NUMA;
    else if (!li->acpi)
        dreason = LV_R_NO_ACPI;
    else {
        c->method = LV_MM_DIMM;
        c->dimm_kib = delta;
        c->node = lv_least_node(li);
        return;
    }

    /* 3. the balloon, only up to memory the guest already has plugged */
    long long ceiling = li->memory_kib < li->plugged_kib ? li->memory_kib : li->plugged_kib;
    if (li->balloon && want_kib <= ceiling) {
        c->method = LV_MM_BALLOON;
        c->balloon_kib = want_kib;
        return;
    }
    if (vreason)
        snprintf(c->reason, sizeof(c->reason), "%s; %s", vreason, dreason);
    else
        snprintf(c->reason, sizeof(c->reason), "%s", dreason);
}

static void lv_set(struct hv_field_plan *p, enum hv_how how, const char *method, const char *reason)
{
    p->how = how;
    snprintf(p->method, sizeof(p->method), "%s", method ? method : "");
    snprintf(p->reason, sizeof(p->reason), "%s", reason ? reason : "");
}

/* The rules no domain escapes (they depend on the desired values alone): shared by plan()
 * and, through ops->check, by CanUpdateMachine(Set). */
void lv_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT])
{
    for (int f = 0; f < HV_F_COUNT; f++)
        lv_set(&plan[f], HV_HOW_NONE, NULL, NULL);
    if (desired->memory_mib == 0)
        lv_set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("memory must be positive"));
    else if (desired->memory_mib > LV_MAX_MEMORY_MIB)
        lv_set(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, NULL, LV_R_MEM_MAX);
    if (desired->cpus == 0)
        lv_set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("vCPUs must be positive"));
    else if (desired->cpus > LV_MAX_VCPUS)
        lv_set(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, NULL,
               HV_MSG("above the vCPUs a domain can have"));
    if (desired->cores_per_socket == 0 || desired->cores_per_socket > LV_MAX_VCPUS)
        lv_set(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, NULL, HV_MSG("cores per socket out of range"));
    if (desired->disk_mib > HV_DISK_MAX_MIB)
        lv_set(&plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, NULL, HV_REASON_DISK_MAX);
}

void lv_plan_compute(const struct lv_dominfo *li, bool active, bool persistent,
                     const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT])
{
    struct hv_field_plan fixed[HV_F_COUNT];
    lv_check(desired, fixed);
    for (int f = 0; f < HV_F_COUNT; f++)
        lv_set(&plan[f], HV_HOW_NONE, NULL, NULL);

    long long cur_mib = li->effective_kib / 1024;
    if (desired->memory_mib >= 0 && desired->memory_mib != cur_mib) {
        struct hv_field_plan *p = &plan[HV_F_MEMORY];
        if (fixed[HV_F_MEMORY].how == HV_HOW_IMPOSSIBLE) {
            *p = fixed[HV_F_MEMORY];
        } else if (!active) {
            lv_set(p, HV_HOW_COLD, NULL, LV_R_OFF);
        } else if (desired->memory_mib < cur_mib) {
            lv_set(p, HV_HOW_COLD, NULL, LV_R_MEM_SHRINK);
        } else {
            struct lv_mem_choice c;
            lv_plan_memory(li, desired->memory_mib * 1024, &c);
            if (c.method != LV_MM_NONE)
                lv_set(p, HV_HOW_LIVE, lv_mem_method_name(c.method), NULL);
            else
                lv_set(p, HV_HOW_COLD, NULL, c.reason);
        }
    }

    if (desired->cpus >= 0 && desired->cpus != li->vcpu_current) {
        struct hv_field_plan *p = &plan[HV_F_CPUS];
        if (fixed[HV_F_CPUS].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_CPUS];
        else if (!active)
            lv_set(p, HV_HOW_COLD, NULL, LV_R_OFF);
        else if (desired->cpus < li->vcpu_current)
            lv_set(p, HV_HOW_COLD, NULL, LV_R_CPU_SHRINK);
        else if (desired->cpus > li->vcpu_max)
            lv_set(p, HV_HOW_COLD, NULL, LV_R_CPU_MAX);
        else
            lv_set(p, HV_HOW_LIVE, "vcpu hot-plug", NULL);
    }

    if (desired->cores_per_socket >= 0 && desired->cores_per_socket != li->cores) {
        struct hv_field_plan *p = &plan[HV_F_CORES];
        if (fixed[HV_F_CORES].how == HV_HOW_IMPOSSIBLE)
            *p = fixed[HV_F_CORES];
        else
            lv_set(p, HV_HOW_COLD, NULL, active ? LV_R_CORES : LV_R_OFF);
    }

    /* A transient domain vanishes when it stops: what needs a power cycle cannot be done. */
    if (active && !persistent) {
        for (int f = 0; f < HV_F_COUNT; f++)
            if (plan[f].how == HV_HOW_COLD)
                lv_set(&plan[f], HV_HOW_IMPOSSIBLE, NULL, LV_R_TRANSIENT);
    }
}

struct lv_plan_arg {
    const struct hv_hw *desired;
    struct hv_field_plan *plan;
    const char *disk;
    const struct hv_hw *assumed; /* obs->hw of an assumed observation, else NULL */
};

/* The domain as an operation in flight leaves it (hv_vm_obs.assumed): its current memory,
 * vCPUs and cores per socket from hw where set; the limits (maximum memory, slots, maximum
 * vCPUs) as read, widened where the assumed values pass them (a cold change raises them). */
void lv_assume(struct lv_dominfo *li, const struct hv_hw *hw)
{
    if (hw->memory_mib > 0) {
        long long kib = (long long)hw->memory_mib * 1024;
        li->effective_kib = li->plugged_kib = li->current_kib = kib;
        if (li->memory_kib < kib)
            li->memory_kib = kib;
        if (li->max_kib >= 0 && li->max_kib < kib)
            li->max_kib = kib;
    }
    if (hw->cpus > 0) {
        li->vcpu_current = hw->cpus;
        if (li->vcpu_max < hw->cpus)
            li->vcpu_max = hw->cpus;
    }
    if (hw->cores_per_socket > 0)
        li->cores = hw->cores_per_socket;
}

static int lv_plan_body(struct lv_dom *d, void *arg, struct hv_err *err)
{
    struct lv_plan_arg *a = arg;
    struct lv_dominfo li;
    bool active;
    int rc = lv_read_live(d, &li, &active, NULL, err);
    if (rc != HV_OK)
        return rc;
    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0)
        return lv_fail(d, "virDomainIsPersistent", err);
    if (a->assumed)
        lv_assume(&li, a->assumed);
    lv_plan_compute(&li, active, persistent == 1, a->desired, a->plan);
    if (!hv_disk_set(a->desired->disk_mib))
        return HV_OK;
    if (a->desired->disk_mib > HV_DISK_MAX_MIB) { /* its bytes would not fit 64 bits */
        lv_set(&a->plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, NULL, HV_REASON_DISK_MAX);
        return HV_OK;
    }
    struct lv_disk dk;
    if (!a->disk[0]) {
        lv_set(&a->plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, NULL,
               HV_MSG("the profile names no disk target device"));
        return HV_OK;
    }
    rc = lv_disk_read(d, a->disk, &dk, err);
    if (rc != HV_OK)
        return rc;
    long long have = lv_disk_mib(&dk);
    if (a->assumed && hv_disk_set(a->assumed->disk_mib) && a->assumed->disk_mib > have)
        have = a->assumed->disk_mib; /* (the operation in flight grows it) */
    if (have < a->desired->disk_mib) /* a larger disk is left as it is */
        lv_plan_disk(&dk, active, !active && lv_disk_in_pool(d, &dk), a->desired->disk_mib,
                     &a->plan[HV_F_DISK]);
    return HV_OK;
}

int lv_plan_op(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *obs,
               const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT],
               struct hv_err *err)
{
    /* the plan follows a fresh read, which is never older than obs; of an assumed obs it
     * takes the values an operation in flight will leave */
    struct hv_err dummy;
    err = lv_err_start(err, &dummy);
    for (int f = 0; f < HV_F_COUNT; f++)
        lv_set(&plan[f], HV_HOW_NONE, NULL, NULL);
    if (!ref || !desired)
        return lv_seterr(err, HV_E_INTERNAL, "plan: missing ref or desired");
    struct lv_plan_arg a = {desired, plan, ref->disk, obs && obs->assumed ? &obs->hw : NULL};
    bool found;
    int rc = lv_with_dom(b->priv, ref, lv_plan_body, &a, &found, err);
    if (rc == HV_OK && !found)
        return lv_seterr(err, HV_E_NOT_FOUND, "domain not found on any configured host");
    return rc;
}
