/* kv_parse.c: a VirtualMachine, its VirtualMachineInstance and the KubeVirt CR (JSON as the
 * API server serves them) read into struct kv_state, and the state told as an hv_vm_obs.
 * Pure: no I/O; absent or malformed members stay "not known" (-1, "", false).
 */
#include <stdio.h>
#include <string.h>

#include "hv_quantity.h"
#include "kv_internal.h"

#define DOMAIN "spec.template.spec.domain"

void kv_state_init(struct kv_state *st)
{
    memset(st, 0, sizeof(*st));
    st->mem_mib = st->max_guest_mib = -1;
    st->sockets = st->cores = st->threads = st->max_sockets = -1;
    st->running = -1;
    st->vmi_mem_mib = st->vmi_max_guest_mib = -1;
    st->vmi_sockets = st->vmi_max_sockets = -1;
    st->guest_current_mib = st->guest_requested_mib = -1;
    st->cur_sockets = st->cur_cores = -1;
    st->cr_max_guest_mib = -1;
    st->cr_max_sockets = st->cr_ratio = -1;
}

yajl_val kv_get(yajl_val v, const char *dotted)
{
    char key[128];
    const char *p = dotted;
    while (v && *p) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof(key) || !YAJL_IS_OBJECT(v))
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        yajl_val next = NULL;
        for (size_t k = 0; k < v->u.object.len; k++) {
            if (!strcmp(v->u.object.keys[k], key)) {
                next = v->u.object.values[k];
                break;
            }
        }
        v = next;
        p += n;
        if (*p == '.')
            p++;
    }
    return v;
}

const char *kv_str(yajl_val v, const char *dotted)
{
    yajl_val s = kv_get(v, dotted);
    return YAJL_IS_STRING(s) ? s->u.string : NULL;
}

int64_t kv_mib(yajl_val v, const char *dotted)
{
    yajl_val q = kv_get(v, dotted);
    int64_t bytes = -1;
    if (YAJL_IS_STRING(q))
        bytes = hv_quantity_bytes(q->u.string);
    else if (YAJL_IS_INTEGER(q) && q->u.number.i >= 0)
        bytes = q->u.number.i;
    return bytes < 0 ? -1 : bytes >> 20;
}

static int32_t count(yajl_val v, const char *dotted)
{
    yajl_val n = kv_get(v, dotted);
    if (!YAJL_IS_INTEGER(n) || n->u.number.i < 0 || n->u.number.i > INT32_MAX)
        return -1;
    return (int32_t)n->u.number.i;
}

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s && strlen(s) < cap ? s : "");
}

/* true when the conditions array at dotted has type with that status ("True", or "False" for a
 * condition KubeVirt states either way) */
static bool condition_is(yajl_val v, const char *dotted, const char *type, const char *status)
{
    yajl_val a = kv_get(v, dotted);
    if (!YAJL_IS_ARRAY(a))
        return false;
    for (size_t k = 0; k < a->u.array.len; k++) {
        const char *t = kv_str(a->u.array.values[k], "type");
        const char *s = kv_str(a->u.array.values[k], "status");
        if (t && s && !strcmp(t, type) && !strcmp(s, status))
            return true;
    }
    return false;
}

void kv_parse_vm(yajl_val vm, struct kv_state *st)
{
    st->found = YAJL_IS_OBJECT(vm);
    if (!st->found)
        return;
    copy(st->ns, sizeof(st->ns), kv_str(vm, "metadata.namespace"));
    copy(st->name, sizeof(st->name), kv_str(vm, "metadata.name"));
    copy(st->rv, sizeof(st->rv), kv_str(vm, "metadata.resourceVersion"));
    st->has_annotations = YAJL_IS_OBJECT(kv_get(vm, "metadata.annotations"));
    yajl_val ann = kv_get(vm, "metadata.annotations");
    if (YAJL_IS_OBJECT(ann)) {
        for (size_t k = 0; k < ann->u.object.len; k++) {
            yajl_val a = ann->u.object.values[k];
            if (!YAJL_IS_STRING(a))
                continue;
            if (!strcmp(ann->u.object.keys[k], KV_ANN_RECORD))
                copy(st->record, sizeof(st->record), a->u.string);
            else if (!strcmp(ann->u.object.keys[k], KV_ANN_STRATEGY))
                copy(st->saved_strategy, sizeof(st->saved_strategy), a->u.string);
        }
    }
    st->has_memory_obj = YAJL_IS_OBJECT(kv_get(vm, DOMAIN ".memory"));
    st->has_cpu_obj = YAJL_IS_OBJECT(kv_get(vm, DOMAIN ".cpu"));
    st->mem_mib = kv_mib(vm, DOMAIN ".memory.guest");
    if (st->mem_mib < 0)
        st->mem_mib = kv_mib(vm, DOMAIN ".resources.requests.memory");
    st->max_guest_mib = kv_mib(vm, DOMAIN ".memory.maxGuest");
    st->sockets = count(vm, DOMAIN ".cpu.sockets");
    st->cores = count(vm, DOMAIN ".cpu.cores");
    st->threads = count(vm, DOMAIN ".cpu.threads");
    st->max_sockets = count(vm, DOMAIN ".cpu.maxSockets");
    /* KubeVirt's defaults: one socket, one core, one thread */
    if (st->sockets < 0)
        st->sockets = 1;
    if (st->cores < 0)
        st->cores = 1;
    copy(st->run_strategy, sizeof(st->run_strategy), kv_str(vm, "spec.runStrategy"));
    yajl_val r = kv_get(vm, "spec.running");
    st->running = YAJL_IS_TRUE(r) ? 1 : YAJL_IS_FALSE(r) ? 0 : -1;
    st->restart_required = condition_is(vm, "status.conditions", "RestartRequired", "True");
    copy(st->printable, sizeof(st->printable), kv_str(vm, "status.printableStatus"));
}

void kv_parse_vmi(yajl_val vmi, struct kv_state *st)
{
    st->vmi = YAJL_IS_OBJECT(vmi);
    if (!st->vmi)
        return;
    copy(st->vmi_uid, sizeof(st->vmi_uid), kv_str(vmi, "metadata.uid"));
    copy(st->vmi_phase, sizeof(st->vmi_phase), kv_str(vmi, "status.phase"));
    copy(st->node, sizeof(st->node), kv_str(vmi, "status.nodeName"));
    st->vmi_mem_mib = kv_mib(vmi, "spec.domain.memory.guest");
    if (st->vmi_mem_mib < 0)
        st->vmi_mem_mib = kv_mib(vmi, "spec.domain.resources.requests.memory");
    st->vmi_max_guest_mib = kv_mib(vmi, "spec.domain.memory.maxGuest");
    st->vmi_sockets = count(vmi, "spec.domain.cpu.sockets");
    st->vmi_max_sockets = count(vmi, "spec.domain.cpu.maxSockets");
    st->guest_current_mib = kv_mib(vmi, "status.memory.guestCurrent");
    st->guest_requested_mib = kv_mib(vmi, "status.memory.guestRequested");
    st->cur_sockets = count(vmi, "status.currentCPUTopology.sockets");
    st->cur_cores = count(vmi, "status.currentCPUTopology.cores");
    st->hot_mem = condition_is(vmi, "status.conditions", "HotMemoryChange", "True");
    st->hot_cpu = condition_is(vmi, "status.conditions", "HotVCPUChange", "True");
    st->agent = condition_is(vmi, "status.conditions", "AgentConnected", "True");
    st->not_migratable = condition_is(vmi, "status.conditions", "LiveMigratable", "False");
    yajl_val ms = kv_get(vmi, "status.migrationState");
    st->migrating = YAJL_IS_OBJECT(ms) && !YAJL_IS_TRUE(kv_get(ms, "completed")) &&
                    !YAJL_IS_TRUE(kv_get(ms, "failed"));
}

void kv_parse_kubevirt(yajl_val cr, struct kv_state *st)
{
    yajl_val items = kv_get(cr, "items");
    if (YAJL_IS_ARRAY(items))
        cr = items->u.array.len ? items->u.array.values[0] : NULL;
    st->cr_read = YAJL_IS_OBJECT(cr);
    if (!st->cr_read)
        return;
    copy(st->rollout, sizeof(st->rollout), kv_str(cr, "spec.configuration.vmRolloutStrategy"));
    st->cr_max_guest_mib = kv_mib(cr, "spec.configuration.liveUpdateConfiguration.maxGuest");
    st->cr_max_sockets = count(cr, "spec.configuration.liveUpdateConfiguration.maxCpuSockets");
    st->cr_ratio = count(cr, "spec.configuration.liveUpdateConfiguration.maxHotplugRatio");
}

/* A live-update limit as KubeVirt takes it: the VM's own, else the VMI's, else the KubeVirt
 * CR's, else the boot value (the VMI's, else the spec's) times the hot-plug ratio; -1: none. */
static int64_t limit(int64_t vm, int64_t vmi, int64_t cr, int64_t vmi_boot, int64_t boot,
                     int64_t ratio)
{
    if (vm > 0)
        return vm;
    if (vmi > 0)
        return vmi;
    if (cr > 0)
        return cr;
    int64_t b = vmi_boot > 0 ? vmi_boot : boot;
    return b > 0 ? b * (ratio > 0 ? ratio : KV_HOTPLUG_RATIO) : -1;
}

int64_t kv_max_guest(const struct kv_state *st)
{
    return limit(st->max_guest_mib, st->vmi_max_guest_mib, st->cr_max_guest_mib, st->vmi_mem_mib,
                 st->mem_mib, st->cr_ratio);
}

int32_t kv_max_sockets(const struct kv_state *st)
{
    return (int32_t)limit(st->max_sockets, st->vmi_max_sockets, st->cr_max_sockets, st->vmi_sockets,
                          st->sockets, st->cr_ratio);
}

/* a VMI that runs: the VM's printableStatus lags its VMI (a VM still "Running" while its VMI
 * was replaced by one that is not running yet, or is gone), so "Running" and "Migrating" count
 * only with a VMI in phase Running */
static bool vmi_runs(const struct kv_state *st)
{
    return st->vmi && !strcmp(st->vmi_phase, "Running");
}

bool kv_running(const struct kv_state *st)
{
    if (st->printable[0] && strcmp(st->printable, "Running") && strcmp(st->printable, "Migrating"))
        return false;
    return vmi_runs(st);
}

/* The VM's power as hvupdater counts it: printableStatus (the VM controller's summary) when
 * there is one (Running and Migrating only with a VMI in phase Running), else the VMI's
 * phase. Starting, Stopping, Provisioning, Terminating and the
 * like are transitions (UNKNOWN, power_state ""); Paused is PAUSED; the error states
 * (CrashLoopBackOff, ErrorUnschedulable, ...) are UNKNOWN with their name. */
static void power_of(const struct kv_state *st, struct hv_vm_obs *obs)
{
    static const char *const transitions[] = {"Starting",    "Stopping",  "Provisioning",
                                              "Terminating", "Migrating", "WaitingForVolumeBinding",
                                              NULL};
    const char *p = st->printable;
    if (!p[0]) {
        bool halted = !strcmp(st->run_strategy, "Halted") || st->running == 0;
        if (vmi_runs(st))
            obs->power = HV_POWER_ON;
        else if (!st->vmi && halted)
            obs->power = HV_POWER_OFF;
        else
            obs->power = HV_POWER_UNKNOWN;
        return;
    }
    if (!strcmp(p, "Running") || !strcmp(p, "Migrating")) {
        obs->power = vmi_runs(st) ? HV_POWER_ON : HV_POWER_UNKNOWN; /* else a transition */
        return;
    }
    if (!strcmp(p, "Stopped")) {
        /* a VMI still there (being deleted) is a transition: off is when it is gone */
        obs->power = st->vmi ? HV_POWER_UNKNOWN : HV_POWER_OFF;
        return;
    }
    if (!strcmp(p, "Paused")) {
        obs->power = HV_POWER_PAUSED;
        snprintf(obs->power_state, sizeof(obs->power_state), "paused");
        return;
    }
    obs->power = HV_POWER_UNKNOWN;
    for (const char *const *t = transitions; *t; t++)
        if (!strcmp(p, *t))
            return;
    snprintf(obs->power_state, sizeof(obs->power_state), "%s", p);
}

void kv_fill_obs(const struct kv_state *st, const char *cluster, struct hv_vm_obs *obs)
{
    memset(obs, 0, sizeof(*obs));
    obs->found = st->found;
    if (!st->found)
        return;
    power_of(st, obs);
    obs->config.memory_mib = st->mem_mib;
    obs->config.cpus = st->sockets;
    obs->config.cores_per_socket = st->cores;
    obs->config.disk_mib = -1;
    obs->hw = obs->config;
    bool on = obs->power == HV_POWER_ON || obs->power == HV_POWER_PAUSED;
    if (on && st->vmi) {
        /* what runs: the VMI status, else its spec (a KubeVirt without status.memory) */
        bool mem_flight =
            st->hot_mem || (st->guest_current_mib >= 0 && st->guest_requested_mib >= 0 &&
                            st->guest_current_mib != st->guest_requested_mib);
        int64_t mem = st->guest_current_mib >= 0 ? st->guest_current_mib : st->vmi_mem_mib;
        obs->hw.memory_mib = mem_flight ? -1 : mem;
        bool cpu_flight = st->hot_cpu || (st->cur_sockets >= 0 && st->vmi_sockets >= 0 &&
                                          st->cur_sockets != st->vmi_sockets);
        int32_t sockets = st->cur_sockets >= 0 ? st->cur_sockets : st->vmi_sockets;
        obs->hw.cpus = cpu_flight ? -1 : sockets;
        if (st->cur_cores >= 0)
            obs->hw.cores_per_socket = st->cur_cores;
        /* the guest's view as KubeVirt reports it (virt-handler: what the guest plugged) */
        if (st->guest_current_mib >= 0) {
            obs->guest.mem_view = HV_GV_SEEN;
            obs->guest.memory_mib = st->guest_current_mib;
        }
        if (st->cur_sockets >= 0) {
            obs->guest.cpu_view = HV_GV_SEEN;
            obs->guest.cpus = st->cur_sockets;
        }
        obs->busy = mem_flight || cpu_flight || st->migrating;
        snprintf(obs->id, sizeof(obs->id), "%s", st->vmi_uid);
        obs->can_shutdown = true; /* KubeVirt asks the guest (ACPI), then ends it after its
                                     terminationGracePeriodSeconds */
        obs->tools_running = st->agent;
    }
    /* the host of the power-cycle caps: the infrastructure cluster (a VMI's node changes
     * with every migration and restart, and an off VM has none) */
    snprintf(obs->host, sizeof(obs->host), "%s", cluster);
    snprintf(obs->record, sizeof(obs->record), "%s", st->record);
    if (!strcmp(st->run_strategy, "Manual") || !strcmp(st->run_strategy, "Once"))
        snprintf(obs->no_power_cycle, sizeof(obs->no_power_cycle), "%s",
                 HV_MSG("the VirtualMachine's runStrategy is Manual or Once: hvupdater does not "
                        "stop and start it"));
}
