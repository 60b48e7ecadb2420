/* sim_world.c: the simulated hypervisor of the deterministic simulation. Hosts and VMs
 * (persistent and transient) with their guests and the operation record stored on the VM,
 * behind the backend.h vtable (one backend instance per replica, all on the same world, as
 * two hvupdater processes talking to one libvirt or vCenter). It models the hypervisor, not
 * a backend's own guards: a transient domain that is shut down is gone. Faults and operator
 * changes come from sim_world_fault; everything is driven by the run's seed and clock. */
#include "sim.h"
#include "oprecord.h"
#include "phase.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRANSIENT_REASON "transient domain: a power cycle would delete it"
/* the longest an engine waits between its own looks at a power cycle it carries (workers.c
 * run_head: the retry it would ask CAPI for, at most 5 s) */
#define CYCLE_LOOK_MS 5000
/* Stale statistics stop being a view of the guest this long after their last fresh report */
#define STALE_VIEW_MS 4000
/* ... and are surely no view an engine may take a base from this many whole seconds after the
 * report they hold (reconcile: a report up to GUEST_REPORT_S old serves, in whole seconds; one
 * more for the rounding of the two clocks) */
#define STALE_NO_VIEW_S (GUEST_REPORT_S + 1)

uint64_t sim_rand(struct sim *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int sim_range(struct sim *s, int lo, int hi)
{
    return lo + (int)(sim_rand(s) % (uint64_t)(hi - lo + 1));
}

bool sim_chance(struct sim *s, int permille)
{
    return (int)(sim_rand(s) % 1000) < permille;
}

/* A line of the run's trace, stamped with the simulated clock only: kept (truncated) in the
 * history a break reports, printed whole with --trace, and folded whole into the run's trace
 * hash (FNV-1a 64) with --trace-hash, which compares two engines' traces seed by seed. */
void sim_note(struct sim *s, const char *fmt, ...)
{
    char line[HV_RECORD_MAX + 512];
    int n = snprintf(line, sizeof(line), "%5d t=%7.1fs ", s->step, (double)s->now_ms / 1000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    char *h = s->hist[s->n_hist % SIM_HIST];
    size_t len = strlen(line), keep = len < sizeof(s->hist[0]) ? len : sizeof(s->hist[0]) - 1;
    memcpy(h, line, keep);
    h[keep] = '\0';
    s->n_hist++;
    if (s->o.trace)
        fprintf(stderr, "%s\n", line);
    if (s->o.trace_hash) {
        uint64_t x = s->r.trace_lines ? s->r.trace_hash : 14695981039346656037ULL;
        for (size_t k = 0; k <= len; k++) { /* the line and its end ('\0' for '\n') */
            x ^= (unsigned char)line[k];
            x *= 1099511628211ULL;
        }
        s->r.trace_hash = x;
        s->r.trace_lines++;
    }
}

int sim_vm_by_name(struct sim *s, const char *name)
{
    for (int k = 0; k < s->n_vms; k++)
        if (!strcmp(s->vms[k].name, name))
            return k;
    return -1;
}

bool sim_unseen_since_restart(const struct sim *s, const struct sim_vm *v, int owner, int gen)
{
    if (owner < 0 || owner >= s->n_reps || gen == s->reps[owner].gen)
        return false;
    for (int r = 0; r < s->n_reps; r++)
        if (v->look_ms[r] > s->restart_ms[owner])
            return false;
    return true;
}

bool sim_start_given_up(struct sim *s, struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    return r && r->cold && r->phase == HV_PH_FAILED && v->power == HV_POWER_OFF &&
           v->start_failed_ms &&
           s->unix0 + v->start_failed_ms / 1000 - r->step_at >= s->ecfg.step_timeout_s;
}

bool sim_start_window_lost_to_host(struct sim *s, struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    if (!(r && r->cold && r->phase == HV_PH_FAILED && v->power == HV_POWER_OFF &&
          v->start_failed_ms && s->unix0 + v->start_failed_ms / 1000 >= r->step_at))
        return false;
    int64_t end_ms = (r->step_at + s->ecfg.step_timeout_s - s->unix0) * 1000;
    /* down (or stalled) at end_ms: one of its host's outages began by then and ended after
     * it or not at all (the end phase heals it without a fault). An outage is one from its
     * first fault to the host's return: a stall that turns into a death without a return in
     * between is the same outage (held-out seed 1110588: host0 stalled at 185.5 s, inside
     * the window that ended at 198 s, and died at 474.5 s without coming back; the death
     * hid the stall). Any outage of the log, not only the last: later ones do not undo the
     * one at the window's end (held-out seed 5101074 x1000: host0 stalled at 712.9 s, 3 s
     * into the window that ended at 739 s, and was back at 1056.8 s; its stall at 1656.6 s
     * and death at 3349.1 s hid it; scenario retry_window_lost_to_an_earlier_outage) */
    const struct sim_host *h = &s->hosts[v->host];
    for (int i = 0; i < h->n_out; i++)
        if (h->out_ms[i] <= end_ms && (!h->back_ms[i] || h->back_ms[i] > end_ms))
            return true;
    return false;
}

/* The step loop ran the carrier's passes late: real workers run a pass once it is due, the loop
 * only on the steps that draw an engine turn, and its clock may jump up to 30 s past a pass
 * waiting in a queue. Each of the failed operation's give-up starts (restart_failed_off, every
 * pass for step_timeout_s after the Failure) came that much later, and one that would have come
 * before the window's end, had the passes before it waited for nothing, ran after it and
 * tried no start (held-out seeds 2204552, 2389010, 3471271: a pass due 13 to 20 s before the
 * window's end ran 10 to 50 s after it; 5529187: two passes 9.8 and 5.7 s late in the window,
 * the next one timed 0.8 s after its end). The delay is the loop's, measured (sim_note_due,
 * sim_note_queues), and the passes' times are the engine's own: no engine rule is copied. A
 * start refused since the Failure says the engine was trying (an engine that tries none is
 * judged). */
bool sim_start_window_lost_to_the_loop(struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    return r && r->cold && r->phase == HV_PH_FAILED && v->power == HV_POWER_OFF && v->late_cost &&
           r->started_at == v->late_op && r->step_at == v->late_step_at &&
           v->start_failed_ms >= v->late_from_ms;
}

/* A pass of the VM's failed operation, due at due, ran (or was lost) now: the loop's delay of it
 * (above). */
static void late_pass(struct sim *s, struct sim_vm *v, int rep, int64_t due)
{
    const struct hv_oprecord *r = sim_record(v);
    if (!r || !r->cold || r->phase != HV_PH_FAILED || r->started_at != v->late_op ||
        r->step_at != v->late_step_at || due < v->late_from_ms || rep != v->writer_rep ||
        s->reps[rep].gen != v->writer_gen)
        return;
    int64_t end_ms = (r->step_at + s->ecfg.step_timeout_s - s->unix0) * 1000;
    if (due - v->late_ms < end_ms && s->now_ms >= end_ms)
        v->late_cost = true;
    if (s->now_ms > due)
        v->late_ms += s->now_ms - due;
}

/* Before a run of replica rep's engine (or the look for the next event), which moves the timed
 * passes due to its queue: each is stamped with when it came due. */
void sim_note_due(struct sim *s, int rep)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        int64_t at = v->queued_ms[rep] ? 0 : hv_engine_pass_timed(s->reps[rep].e, v->name);
        if (at && at <= s->now_ms)
            v->queued_ms[rep] = at;
    }
}

/* After it: a pass of a VM waiting in the queue is stamped (when it came there is not known:
 * now), one stamped and no longer waiting has run now. */
void sim_note_queues(struct sim *s, int rep)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        bool waiting = hv_engine_pass_waiting(s->reps[rep].e, v->name);
        if (waiting && !v->queued_ms[rep]) {
            v->queued_ms[rep] = s->now_ms > 0 ? s->now_ms : 1;
        } else if (!waiting && v->queued_ms[rep]) {
            late_pass(s, v, rep, v->queued_ms[rep]);
            v->queued_ms[rep] = 0;
        }
    }
}

/* Replica rep restarts: its passes waiting or timed are lost, now (held-out seed 5529187: the
 * pass timed 0.8 s after the window's end, which the loop's delays of 9.8 and 5.5 s before it
 * had put there, was lost in r0's restart). */
void sim_drop_queues(struct sim *s, int rep)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        int64_t at =
            v->queued_ms[rep] ? v->queued_ms[rep] : hv_engine_pass_timed(s->reps[rep].e, v->name);
        if (at)
            late_pass(s, v, rep, at);
        v->queued_ms[rep] = 0;
    }
}

const struct hv_oprecord *sim_record(struct sim_vm *v)
{
    if (!v->rec_parsed) {
        if (!v->rec && !(v->rec = malloc(sizeof(*v->rec))))
            abort();
        v->rec_ok = hv_oprecord_read(v->rec, v->record);
        v->rec_parsed = true;
    }
    return v->rec_ok ? v->rec : NULL;
}

/* The guestVerification setting a record's policy names was Off (reconcile.c policy_of). */
static bool policy_off(const struct hv_oprecord *r)
{
    const char *gc = strrchr(r->policy, '/');
    return gc && !strcmp(gc + 1, "Off");
}

/* An operation beginning now on v has no view of the guest's memory (begun_mem_blind, noted
 * by sim_set_record at the begin): the VM not running, or its memory statistics absent, or
 * stale without a memory view or past the report age an engine takes (held-out seed 5292529).
 * (stale statistics are a view of the guest now only within two of a real guest's report
 * periods, 2 s each, of their last fresh report: older, they tell what it had then, and the
 * engine, which tolerates a report's age only that far or a little further, has no view of
 * it now) */
static bool mem_blind_now(const struct sim *s, const struct sim_vm *v)
{
    return v->power != HV_POWER_ON || v->stats == 2 ||
           (v->stats == 1 &&
            (v->stale.mem_view != HV_GV_SEEN || s->now_ms - v->fresh_until_ms > STALE_VIEW_MS));
}

/* The operation taking live step st on v now had no view of the guest's memory from before it
 * (plug_blind), by the world's facts: its record (stored with the step in record_in_step
 * worlds, else the VM's, written before the step) names guestVerification Off, or at its begin
 * the guest had no statistics (begun_mem_blind) or was still booting from the operator's
 * power-on (foreign_boot_ms), or it began over such an operation's step in flight keeping its
 * base (off_blind_mem, note_begun_over). A record carried with its step that begins its
 * operation now (record_in_step: stored right after the step, at the same instant, when
 * sim_set_record notes the begin) has its begin judged at the step: mem_blind_now (held-out
 * seed 4271321: A's DIMM carried its first record, the statistics absent, done "not verified
 * in the guest"; B's disk step on a base taken after it, the guest not onlined yet). */
static bool plug_blind_now(const struct sim *s, struct sim_vm *v, const struct hv_step *st)
{
    struct hv_oprecord with;
    const struct hv_oprecord *r = sim_record(v);
    if (st->record && s->record_in_step && hv_oprecord_read(&with, st->record))
        r = &with;
    if (!r)
        return false;
    if (policy_off(r))
        return true;
    bool booting = v->foreign_boot_ms && v->foreign_boot_ms >= (r->started_at - s->unix0) * 1000;
    if (v->begun_at != r->started_at || !hv_hw_equal(&v->begun_for, &r->desired))
        return r == &with && r->started_at == s->unix0 + s->now_ms / 1000 &&
               (mem_blind_now(s, v) || booting); /* (else not noted yet: judged) */
    return v->begun_mem_blind || booting ||
           (hv_hw_equal(&v->off_blind_for, &r->desired) && v->off_blind_mem);
}

/* A record for other hardware (n) replaces old (NULL: none): does n's operation begin over old's in
 * flight with old's base (reconcile.c hv_begin_base), and old looked into no guest before its
 * live step of memory (vCPUs), which may still be on its way into the guest: old ran under
 * guestVerification Off, or began while a guest the operator started was still booting (it had
 * reported nothing yet; the world's fact, as sim_run.c's invariant 1 dates it)? Then no view of
 * that field from before it exists: the guest cannot tell it (a real guest's view taken now may
 * or may not hold that step yet; docs/settings.md "nothing from before the change to compare
 * with"; held-out seed 1649175: A's hot-add begun during the operator's boot, never onlined,
 * B's live disk step kept A's blind base and was done "not verified in the guest"). */
static bool note_begun_over(const struct sim *s, struct sim_vm *v, const struct hv_oprecord *old,
                            const struct hv_oprecord *n, bool cleared)
{
    int deadline = 0;
    bool stepped = old && (old->phase == HV_PH_LIVE || old->phase == HV_PH_WAIT_LIVE ||
                           (old->phase == HV_PH_FAILED && !old->cold));
    bool timed = stepped && sscanf(n->policy, "%*[^/]/%*[^/]/%*d/%*d/%d", &deadline) == 1;
    bool booting =
        v->foreign_boot_ms && v->foreign_boot_ms >= (old ? old->started_at - s->unix0 : 0) * 1000;
    bool inherits = timed && !cleared && old->has_base && (policy_off(old) || booting) &&
                    n->started_at - old->started_at <= deadline;
    /* ... or old began while the guest could not report that field (the world's facts at
     * old's begin: the VM not running, memory statistics absent or stale without a memory
     * view, no guest agent): old's base has no view of it either, and the engine keeps it
     * while old's live step of it, which the hypervisor took (the VM's hardware moved since
     * old's begin), may still be on its way into the guest (hv_begin_base; held-out seed
     * 2474745: A began with the statistics absent, its DIMM taken, its wait-live write failed,
     * B began over A's live record and answered "not verified in the guest"). One whose step
     * never landed leaves nothing on its way: the view now serves (scenario
     * live_failure_unlanded_leaves_the_guest_view_to_the_next). */
    bool at_old = old && v->begun_at == old->started_at;
    bool in_time =
        timed && !cleared && old->has_base && n->started_at - old->started_at <= deadline;
    bool inherits_mem = inherits || (in_time && at_old && v->begun_mem_blind &&
                                     v->live.memory_mib != v->begun_hw.memory_mib);
    bool inherits_cpus =
        inherits || (in_time && at_old && v->begun_cpus_blind && v->live.cpus != v->begun_hw.cpus);
    /* (a live step of old the guest never took, a hot-add its guest never onlined, no boot
     * since, leaves the guest blind to that memory for every base taken after the world ended
     * the bases from before it, whatever became of old's record: past deadlineSeconds,
     * cleared, failed cold, or followed by any number of records and dones: a fact of the
     * world, not of this record, sim_unonlined_before) */
    inherits &= !cleared;
    v->off_blind_for = n->desired;
    v->off_blind_mem = (inherits_mem && !strncmp(old->plan[HV_F_MEMORY], "live:", 5)) ||
                       (cleared && v->cleared_live_mem);
    v->off_blind_cpus = (inherits_cpus && !strncmp(old->plan[HV_F_CPUS], "live:", 5)) ||
                        (cleared && v->cleared_live_cpus);
    /* n keeps old's base of memory: old's live step of it taken (the VM's memory moved since
     * old's begin, which the world noted) within n's deadlineSeconds */
    return in_time && at_old && v->live.memory_mib != v->begun_hw.memory_mib;
}

/* Something in the world ended every base from before the live memory steps taken so far. */
static void plugs_lost(const struct sim *s, struct sim_vm *v)
{
    for (int i = 0; i < v->n_plugs; i++)
        if (!v->plug_lost_ms[i])
            v->plug_lost_ms[i] = s->now_ms;
}

void sim_set_record(const struct sim *s, struct sim_vm *v, const char *text)
{
    const struct hv_oprecord *o = sim_record(v);
    struct hv_oprecord old;
    bool had = o != NULL;
    if (had)
        old = *o;
    snprintf(v->record, sizeof(v->record), "%s", text);
    v->rec_parsed = false;
    const struct hv_oprecord *n = sim_record(v);
    int64_t prev_write_ms = v->rec_write_ms;
    v->rec_write_ms = s->now_ms;
    if (n && n->phase == HV_PH_DONE)
        plugs_lost(s, v);  /* a done keeps no base for the next operation */
    if (had && !text[0]) { /* the operator cleared it */
        v->cleared_rec = old;
        v->cleared_pending = true;
        /* A record begun over another operation's live step in flight keeps that one's base
         * from before the step (hv_begin_base): its base's hypervisor view differs from what
         * the VM had at its begin (begun_hw). The clear takes that base along as it takes a
         * live step of its own (both noted here; held-out seed 1102837: A's hot-add waiting for the
         * guest, B's TrySoft cycle begun over it with A's base, B's record cleared before its
         * shutdown landed, A again done "not verified in the guest" on the view now, which
         * already lacked the hot-add, with no record stored: nothing to change) */
        const struct hv_guest_base *cb = old.has_base ? &old.base : NULL;
        bool stepped = old.phase == HV_PH_LIVE || old.phase == HV_PH_WAIT_LIVE ||
                       (old.phase == HV_PH_FAILED && !old.cold);
        /* ... or one whose live step the hypervisor took (the field differs from what the VM
         * had at its begin) and which then went over to a power cycle that has not taken the
         * VM down (the live timeout's fallback: planned, or its shutdown or power-off with
         * the VM still on): the guest has not booted since that step (held-out seed 2759453:
         * A's DIMM never onlined, A planned for a cycle, its record cleared; A again found
         * the hypervisor at its memory and answered done "not verified in the guest") */
        bool fallback = old.phase == HV_PH_PLANNED ||
                        ((old.phase == HV_PH_SHUTDOWN || old.phase == HV_PH_POWER_OFF) &&
                         v->power == HV_POWER_ON);
        bool took_mem = fallback && v->live.memory_mib != v->begun_hw.memory_mib;
        bool took_cpus = fallback && v->live.cpus != v->begun_hw.cpus;
        v->cleared_live_mem =
            ((stepped || took_mem) && !strncmp(old.plan[HV_F_MEMORY], "live:", 5)) ||
            (cb && cb->hv_memory_mib >= 0 && cb->hv_memory_mib != v->begun_hw.memory_mib);
        v->cleared_live_cpus =
            ((stepped || took_cpus) && !strncmp(old.plan[HV_F_CPUS], "live:", 5)) ||
            (cb && cb->hv_cpus >= 0 && cb->hv_cpus != v->begun_hw.cpus);
    }
    if (had && n && old.phase == HV_PH_FAILED && !hv_hw_equal(&old.desired, &n->desired)) {
        v->replaced_failed = old;
        v->have_replaced_failed = true;
        v->replaced_failed_seq = v->failed_seq;
        v->replaced_failed_gone_seq = s->world_seq;
    }
    if (n && n->phase == HV_PH_FAILED &&
        !(had && old.phase == HV_PH_FAILED && old.started_at == n->started_at &&
          hv_hw_equal(&old.desired, &n->desired)))
        v->failed_seq = s->world_seq;
    bool cleared = !had && n && v->cleared_pending;
    bool same_hw = had && n && hv_hw_equal(&old.desired, &n->desired);
    /* (a Failure record for other hardware is a begin refused over old, judged from the same
     * base: seed 1845563) */
    bool keeps_mem_base = false; /* (n's operation keeps old's base of the guest's memory) */
    if (n && (n->phase < HV_PH_DONE || n->phase == HV_PH_FAILED) && !same_hw)
        keeps_mem_base = note_begun_over(s, v,
                                         had       ? &old
                                         : cleared ? &v->cleared_rec
                                                   : NULL,
                                         n, cleared);
    /* ... or the same operation carried on under settings that look into the guest now, its
     * live step taken under guestVerification Off (the rollout changed only the settings,
     * A -> A'): that step's base has no guest view either (seed 1113068) */
    else if (same_hw && policy_off(&old) && !policy_off(n))
        keeps_mem_base = note_begun_over(s, v, &old, n, false);
    if (n)
        v->cleared_pending = false;
    if (n && !(had && old.started_at == n->started_at && hv_hw_equal(&old.desired, &n->desired))) {
        v->begun_hw = v->power == HV_POWER_OFF ? v->config : v->live;
        v->begun_for = n->desired;
        v->begun_at = n->started_at;
        v->begun_quiet_ms = s->now_ms - prev_write_ms;
        v->begun_over_ms = had ? v->rec_begun_ms : -1;
        v->rec_begun_ms = s->now_ms;
        /* (held-out seed 5292529: stale since 7.8 s, A' began at 92.8 s with no guest view
         * of memory and hot-added, B began over it keeping its blind base) */
        v->begun_mem_blind = mem_blind_now(s, v);
        /* no statistics an engine could take a base of the guest's memory from (absent, or
         * stale past any report age it takes: the review of c9d7510, a base from a report 4 to
         * 6 s old), unless the operation keeps the base of the one it began over, whose own
         * fact then holds (the same review: B began over A's DIMM in flight with A's view
         * while the statistics were absent) */
        bool stats_blind_now =
            v->stats == 2 ||
            (v->stats == 1 && (v->stale.mem_view != HV_GV_SEEN ||
                               s->unix0 + s->now_ms / 1000 - v->stale.mem_at > STALE_NO_VIEW_S));
        v->begun_stats_blind = keeps_mem_base ? v->begun_stats_blind : stats_blind_now;
        v->begun_cpus_blind = v->power != HV_POWER_ON || !v->agent;
    }
    /* a done under guestVerification Off, also one CAPI was never answered (the engine's own
     * pass concluded it after the rollout had changed): what the VM and its guest show now is
     * taken unverified, as by an answered one (sim_run.c's invariant 1) */
    if (n && n->phase == HV_PH_DONE && policy_off(n) && v->power == HV_POWER_ON) {
        v->off_done_hw = v->live;
        v->off_done_guest_mem = v->guest_mem;
        v->off_done_guest_cpus = v->guest_cpus;
    }
}

static void changed(struct sim *s, int vm)
{
    if (s->n_events < (int)(sizeof(s->events) / sizeof(s->events[0])))
        s->events[s->n_events++] = vm;
}

/* The operator changed what the VM shows (off: its configuration, on: live) while CAPI's
 * operation for it has stored no record yet: the engine's first look finds the VM as the
 * operator left it, so what the operation changes is from that, not from what the VM showed at
 * the CanUpdateMachine (sim_op.from). A VM found with the desired hardware already is done
 * with nothing of its own for the guest to verify, also under guestVerification Required
 * (reconcile.c answer_shown, pass_guest.c rc_done_in_guest's "no operation of this spec";
 * docs/settings.md: found off with it already, done). Seed 809370: under Required an off VM
 * configured by the operator to the desired memory, then powered on by the operator, was
 * judged a memory change of the engine's done with no guest view. */
static void operator_moved_from(struct sim *s, int k)
{
    struct sim_vm *v = &s->vms[k];
    struct sim_caller *c = &s->callers[k];
    const struct hv_oprecord *r = sim_record(v);
    if (c->st != C_UPDATING || (r && hv_hw_equal(&r->desired, &c->op.want)))
        return;
    c->op.from = v->power == HV_POWER_OFF ? v->config : v->live;
}

void sim_world_init(struct sim *s)
{
    s->n_hosts = sim_range(s, 1, SIM_MAX_HOSTS);
    for (int h = 0; h < s->n_hosts; h++)
        snprintf(s->hosts[h].name, sizeof(s->hosts[h].name), "host%d", h);
    s->n_vms = sim_range(s, 1, SIM_MAX_VMS);
    s->fail_permille = sim_chance(s, 500) ? 0 : sim_range(s, 1, 60);
    s->timeout_permille = sim_chance(s, 500) ? 0 : sim_range(s, 1, 20);
    s->record_in_step = sim_chance(s, 300);
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        snprintf(v->name, sizeof(v->name), "vm%d", k);
        v->host = sim_range(s, 0, s->n_hosts - 1);
        v->exists = true;
        v->transient = sim_chance(s, 120);
        v->power = sim_chance(s, 150) ? HV_POWER_OFF : HV_POWER_ON;
        v->config.memory_mib = 1024 * sim_range(s, 1, 4);
        v->config.cpus = sim_range(s, 1, 4);
        v->config.cores_per_socket = 1;
        v->config.disk_mib = 1024 * sim_range(s, 8, 12);
        v->live = v->config;
        v->max_live_mem = sim_chance(s, 700) ? v->config.memory_mib + 1024 * sim_range(s, 0, 4) : 0;
        v->max_live_cpus = sim_chance(s, 700) ? v->config.cpus + sim_range(s, 0, 4) : 0;
        v->disk_grows = true;
        v->agent = sim_chance(s, 600);
        v->stats = sim_chance(s, 800) ? 0 : 2;
        v->guest_mem = v->config.memory_mib;
        v->guest_cpus = v->config.cpus;
        v->reserve = 40 + sim_range(s, 0, 40);
        /* (about one guest in seven also reserves 192 MiB for a crash kernel at boot: the
         * same draw, so no other run of the world changes) */
        if (v->reserve >= 75)
            v->reserve += 192;
        v->reserve_own = v->reserve;
        /* (one agentless VM in five has no ACPI button: nothing can ask its guest to shut
         * down; from the draws already made, so no other run of the world changes) */
        v->no_acpi = !v->agent && v->config.disk_mib == 10 * 1024;
        v->ignores_acpi = v->no_acpi;
        v->onlines = true;
        v->power0 = v->power;
        v->config0 = v->config;
    }
}

/* ---- what the guest shows --------------------------------------------------------------- */

static bool booted(const struct sim *s, const struct sim_vm *v)
{
    return v->power == HV_POWER_ON && (!v->boot_at || v->boot_at <= s->now_ms);
}

static void fill_guest(const struct sim *s, const struct sim_vm *v, struct hv_vm_obs *o)
{
    memset(&o->guest, 0, sizeof(o->guest));
    if (v->power != HV_POWER_ON)
        return;
    if (!booted(s, v)) {
        o->guest.mem_view = v->stats == 2 ? HV_GV_NONE : HV_GV_PENDING;
        o->guest.cpu_view = v->agent ? HV_GV_PENDING : HV_GV_NONE;
        return;
    }
    if (v->stats == 0) {
        o->guest.mem_view = HV_GV_SEEN;
        o->guest.memory_mib = v->guest_mem - v->reserve;
    } else if (v->stats == 1) {
        o->guest.mem_view = v->stale.mem_view;
        o->guest.memory_mib = v->stale.memory_mib;
        o->guest.mem_at = v->stale.mem_at;
    }
    if (v->agent) {
        o->guest.cpu_view = HV_GV_SEEN;
        o->guest.cpus = v->guest_cpus;
    }
}

/* The hypervisor shows want (disks only grow). */
bool sim_hw_shows(const struct sim_vm *v, const struct hv_hw *want)
{
    const struct hv_hw *h = v->power == HV_POWER_OFF ? &v->config : &v->live;
    return (want->memory_mib < 0 || h->memory_mib == want->memory_mib) &&
           (want->cpus < 0 || h->cpus == want->cpus) &&
           (!hv_disk_set(want->disk_mib) || h->disk_mib >= want->disk_mib);
}

/* The guest has all of want's memory online and its vCPUs (the truth, not the view). */
bool sim_guest_shows(const struct sim_vm *v, const struct hv_hw *want)
{
    return (want->memory_mib < 0 || v->guest_mem >= want->memory_mib) &&
           (want->cpus < 0 || v->guest_cpus == want->cpus);
}

/* The guest lacks memory up to want_mib that a live step the hypervisor took before t_ms (world
 * ms, when the answering operation began) added and that the guest never onlined, no boot
 * since, nor ever will (its onlining stopped: fault 10), and before t_ms the world ended every
 * base from before that step (plug_lost_ms: a clear, a shutdown that reached the VM, a done
 * stored), or the record the operation began over was untouched for longer than its
 * deadline_ms, or its operation had begun longer than that before (begun_here: t_ms is the
 * begin of the record on the VM, its startedAt; begun_quiet_ms; begun_over_ms, the world's
 * write that began the record replaced, never before that operation's own startedAt, so its
 * start as the record tells it is at least as old: held-out seed 5745438, B's DIMM never
 * onlined, B's Failure written 74 s after its begin, C begun 539 s after B's begin, 465 s
 * after that write, deadlineSeconds 529): the operation's base was taken after the step and
 * holds that memory as the hypervisor's and not the guest's, so no engine can tell the guest
 * lacks it (held-out seeds 5485920, 5570409, 5379043, 3077031: A's DIMM never onlined, later
 * operations done over bases taken since, through any number of records, clears and dones;
 * docs/messages.md "Clearing a sticky failure": past deadlineSeconds of the failed
 * operation's start the next one has only the guest's view now). Only the part of want_mib
 * above the guest's own memory and within such a step is excused. A base an operation still
 * keeps from before the step (A's live Failure, not cold, within its deadline) tells the
 * engine, and the guest is judged (scenario refused_fallback_cycle_keeps_the_base). */
bool sim_unonlined_before(const struct sim_vm *v, int64_t t_ms, int64_t want_mib,
                          int64_t deadline_ms, bool begun_here)
{
    if (v->power != HV_POWER_ON || v->onlines || want_mib <= v->guest_mem)
        return false;
    for (int i = 0; i < v->n_plugs; i++)
        if (v->plug_mem[i] >= want_mib)
            return v->plug_ms[i] < t_ms &&
                   ((v->plug_lost_ms[i] && v->plug_lost_ms[i] < t_ms) ||
                    (begun_here &&
                     (v->begun_quiet_ms > deadline_ms ||
                      (v->begun_over_ms >= 0 && t_ms - v->begun_over_ms > deadline_ms))));
    return false;
}

/* The guest lacks memory up to want_mib (above its own) that live steps the hypervisor took
 * before t_ms (world ms, when the answering operation began) added, no boot since, each taken
 * by an operation with no view of the guest's memory from before it (plug_blind): the base of
 * every operation since holds that memory either as that blind one's (kept) or as the
 * hypervisor's and not the guest's (taken after the step), so no engine can tell the guest
 * has not onlined it yet (held-out seeds 3631275: A's DIMM under Off, A -> B -> A kept A's
 * blind base through B's planned record; 3614294: A's DIMM begun during the operator's boot,
 * B's disk step on a base taken after A's done). Unlike sim_unonlined_before, the guest may
 * still online it (its onlining under way). */
bool sim_blind_plug_on_its_way(const struct sim_vm *v, int64_t t_ms, int64_t want_mib)
{
    if (v->power != HV_POWER_ON || want_mib <= v->guest_mem)
        return false;
    for (int i = 0; i < v->n_plugs; i++) {
        if (v->plug_mem[i] <= v->guest_mem)
            continue; /* the guest has that step's memory */
        if (!v->plug_blind[i] || v->plug_ms[i] >= t_ms)
            return false;
        if (v->plug_mem[i] >= want_mib)
            return true;
    }
    return false;
}

/* ---- the backend -------------------------------------------------------------------------- */

static struct sim_replica *rep_of(struct hv_backend *b);

static struct sim *sim_of(struct hv_backend *b)
{
    return ((struct sim_replica *)b->priv)->sim;
}

static void err_set(struct hv_err *err, enum hv_errcode c, const char *d)
{
    err->code = c;
    snprintf(err->detail, sizeof(err->detail), "sim: %s", d);
}

/* A call to vm's host: fails when the host is down or stalled, or by chance. */
/* A failed call of kind (SIM_CALL_*) to vm, in the world's log (the cause of a Failure). */
static void call_failed(struct sim *s, int vm, int kind)
{
    if (vm < 0)
        return;
    s->vms[vm].call_fail_ms[kind] = s->vms[vm].delay_ms = s->now_ms;
}

/* A call of kind (SIM_CALL_*) to vm's host: fails when the host is down or stalled, or by
 * chance. */
static int call_fault(struct sim *s, int vm, struct hv_err *err, int kind)
{
    if (vm >= 0) {
        struct sim_host *h = &s->hosts[s->vms[vm].host];
        if (h->down) {
            call_failed(s, vm, kind);
            err_set(err, HV_E_UNREACHABLE, "host down");
            return HV_E_UNREACHABLE;
        }
        if (h->stalled) {
            s->now_ms += 3000; /* the call waits for its timeout */
            s->stall_wait_ms += 3000;
            s->vms[vm].stall_wait_ms += 3000;
            sim_world_tick(s); /* (the world goes on meanwhile) */
            call_failed(s, vm, kind);
            err_set(err, HV_E_TIMEOUT, "host stalled");
            return HV_E_TIMEOUT;
        }
    }
    if (s->fail_permille && sim_chance(s, s->fail_permille)) {
        static const enum hv_errcode codes[] = {HV_E_BUSY, HV_E_TIMEOUT, HV_E_UNREACHABLE,
                                                HV_E_INTERNAL};
        enum hv_errcode c = codes[sim_rand(s) % 4];
        if (vm >= 0)
            s->vms[vm].touched_ms = s->now_ms; /* a reason that arose now */
        call_failed(s, vm, kind);
        err_set(err, c, "injected call failure");
        return c;
    }
    return HV_OK;
}

/* A step of kind on v that failed (refused, busy, unsupported, the call failed), or that
 * was accepted: the world's count of failures in a row of that step. */
static void act_result(struct sim *s, struct sim_vm *v, enum hv_step_kind kind, bool ok,
                       bool carried)
{
    if (kind <= 0 || kind >= SIM_STEP_KINDS)
        return;
    if (ok) {
        v->retry_write_due = 0;
        if (v->act_fails[kind] && !carried) {
            v->retry_write_due = kind;
            v->retry_fails_before = v->act_fails[kind];
        }
        v->act_fails[kind] = 0;
        v->step_ok_ms = s->now_ms;
        const struct hv_oprecord *r = sim_record(v);
        int rep = -1, gen = 0;
        v->step_ok_started = r ? r->started_at : 0;
        if (r)
            v->step_ok_want = r->desired;
        v->step_ok_rep = r && sscanf(r->owner, "sim-r%d:%d", &rep, &gen) == 2 ? rep : -1;
        struct sim_step_seen *seen = &v->steps_seen[v->n_steps_seen++ % SIM_STEPS_SEEN];
        seen->ms = s->now_ms;
        seen->seq = ++s->world_seq;
        seen->want = v->step_ok_want;
        seen->rep = r ? v->step_ok_rep : -1;
        return;
    }
    v->act_fail_ms[kind] = v->delay_ms = s->now_ms;
    if (++v->act_fails[kind] >= s->ecfg.max_step_attempts)
        v->act_spent_ms[kind] = s->now_ms;
}

static int find(struct sim *s, const struct hv_vm_ref *ref)
{
    int k = sim_vm_by_name(s, ref->name);
    return k >= 0 && s->vms[k].exists ? k : -1;
}

static bool b_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    (void)b;
    return !ref->server[0];
}

static void fill_obs(struct sim *s, int k, struct hv_vm_obs *o, bool guest)
{
    struct sim_vm *v = &s->vms[k];
    memset(o, 0, sizeof(*o));
    o->found = true;
    o->power = v->power;
    o->hw = v->power == HV_POWER_OFF ? v->config : v->live;
    o->config = v->config;
    snprintf(o->id, sizeof(o->id), "%d", k);
    snprintf(o->host, sizeof(o->host), "%s", s->hosts[v->host].name);
    snprintf(o->record, sizeof(o->record), "%s", v->record);
    o->tools_running = v->agent && booted(s, v);
    o->can_shutdown = v->power == HV_POWER_ON && !v->no_acpi;
    o->busy = s->now_ms < v->busy_until;
    if (v->transient)
        snprintf(o->no_power_cycle, sizeof(o->no_power_cycle), TRANSIENT_REASON);
    /* statistics absent: no balloon device for them in the VM's definition */
    o->no_mem_report = v->stats == 2;
    o->no_cpu_report = !v->agent;
    if (guest)
        fill_guest(s, v, o);
}

static int b_observe(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *o,
                     struct hv_err *err)
{
    struct sim *s = sim_of(b);
    int k = sim_vm_by_name(s, ref->name);
    int rc = call_fault(s, k, err, SIM_CALL_OBSERVE);
    if (rc != HV_OK)
        return rc;
    k = find(s, ref);
    if (k < 0) {
        memset(o, 0, sizeof(*o));
        return HV_OK;
    }
    fill_obs(s, k, o, s->record_in_step); /* vSphere-like worlds fill the guest here */
    if (s->in_pass) {
        s->vms[k].look_ms[rep_of(b)->idx] = s->now_ms;
        s->vms[k].look_seq[rep_of(b)->idx] = ++s->world_seq;
        if (s->vms[k].power == HV_POWER_ON)
            s->vms[k].look_on_ms[rep_of(b)->idx] = s->now_ms;
        /* (a pass's look within the operation's deadline that found room for its cycle) */
        struct sim_op *op = &s->callers[k].op;
        int r = rep_of(b)->idx;
        if (s->callers[k].st == C_UPDATING && !op->room_look_ms[r] && s->now_ms >= op->can_ms &&
            s->now_ms <= op->can_ms + 1000LL * (op->s.deadline_s + 1) &&
            sim_caps_room(s, r, s->vms[k].host))
            op->room_look_ms[r] = s->now_ms;
    } else {
        s->vms[k].probe_seq[rep_of(b)->idx] = ++s->world_seq;
    }
    return HV_OK;
}

static int b_observe_guest(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *o,
                           struct hv_err *err)
{
    struct sim *s = sim_of(b);
    int k = sim_vm_by_name(s, ref->name);
    int rc = call_fault(s, k, err, SIM_CALL_OBSERVE);
    if (rc != HV_OK)
        return rc;
    k = find(s, ref);
    if (k < 0) {
        err_set(err, HV_E_NOT_FOUND, "gone");
        return HV_E_NOT_FOUND;
    }
    fill_guest(s, &s->vms[k], o);
    return HV_OK;
}

static void set_plan(struct hv_field_plan *p, enum hv_how how, const char *method,
                     const char *reason)
{
    p->how = how;
    snprintf(p->method, sizeof(p->method), "%s", method ? method : "");
    snprintf(p->reason, sizeof(p->reason), "%s", reason ? reason : "");
}

static void b_check(struct hv_backend *b, const struct hv_hw *d,
                    struct hv_field_plan plan[HV_F_COUNT])
{
    (void)b;
    if (d->memory_mib >= 0 && d->memory_mib < 1)
        set_plan(&plan[HV_F_MEMORY], HV_HOW_IMPOSSIBLE, NULL, "memory must be positive");
    if (d->cpus >= 0 && (d->cpus < 1 || d->cpus > 64))
        set_plan(&plan[HV_F_CPUS], HV_HOW_IMPOSSIBLE, NULL, "vCPUs out of range");
    if (d->cores_per_socket >= 0 && d->cores_per_socket < 1)
        set_plan(&plan[HV_F_CORES], HV_HOW_IMPOSSIBLE, NULL, "cores per socket out of range");
}

static int b_plan(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *o,
                  const struct hv_hw *d, struct hv_field_plan plan[HV_F_COUNT], struct hv_err *err)
{
    struct sim *s = sim_of(b);
    int k = sim_vm_by_name(s, ref->name);
    int rc = call_fault(s, k, err, SIM_CALL_PLAN);
    if (rc == HV_OK && k >= 0 && s->vms[k].plans_fail > 0 && s->vms[k].plans_pass > 0) {
        s->vms[k].plans_pass--; /* (scripted: one let through before the failures) */
    } else if (rc == HV_OK && k >= 0 && s->vms[k].plans_fail > 0) { /* (scripted) */
        s->vms[k].plans_fail--;
        call_failed(s, k, SIM_CALL_PLAN);
        rc = HV_E_UNREACHABLE;
        err_set(err, HV_E_UNREACHABLE, "scripted call failure");
    }
    if (rc != HV_OK)
        return rc;
    if ((k = find(s, ref)) < 0) {
        err_set(err, HV_E_NOT_FOUND, "gone");
        return HV_E_NOT_FOUND;
    }
    struct sim_vm *v = &s->vms[k];
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    bool on = o->power == HV_POWER_ON;
    const char *off = "domain is off";
    if (d->memory_mib >= 0 && d->memory_mib != o->hw.memory_mib) {
        if (!on)
            set_plan(&plan[HV_F_MEMORY], HV_HOW_COLD, NULL, off);
        else if (d->memory_mib < o->hw.memory_mib)
            set_plan(&plan[HV_F_MEMORY], HV_HOW_COLD, NULL, "memory shrink needs a restart");
        else if (d->memory_mib <= v->max_live_mem)
            set_plan(&plan[HV_F_MEMORY], HV_HOW_LIVE, "dimm", NULL);
        else
            set_plan(&plan[HV_F_MEMORY], HV_HOW_COLD, NULL, "above maxMemory");
    }
    if (d->cpus >= 0 && d->cpus != o->hw.cpus) {
        if (!on)
            set_plan(&plan[HV_F_CPUS], HV_HOW_COLD, NULL, off);
        else if (d->cpus < o->hw.cpus)
            set_plan(&plan[HV_F_CPUS], HV_HOW_COLD, NULL, "vCPU shrink needs a restart");
        else if (d->cpus <= v->max_live_cpus)
            set_plan(&plan[HV_F_CPUS], HV_HOW_LIVE, "vcpu hot-plug", NULL);
        else
            set_plan(&plan[HV_F_CPUS], HV_HOW_COLD, NULL, "above maximum vCPUs");
    }
    if (d->cores_per_socket >= 0 && d->cores_per_socket != o->hw.cores_per_socket)
        set_plan(&plan[HV_F_CORES], on ? HV_HOW_COLD : HV_HOW_COLD, NULL, "needs a restart");
    if (hv_disk_set(d->disk_mib) && d->disk_mib != o->hw.disk_mib) {
        if (d->disk_mib < o->hw.disk_mib)
            set_plan(&plan[HV_F_DISK], HV_HOW_IMPOSSIBLE, NULL, HV_REASON_DISK_SHRINK);
        else if (on)
            set_plan(&plan[HV_F_DISK], HV_HOW_LIVE, "block resize", NULL);
        else
            set_plan(&plan[HV_F_DISK], HV_HOW_COLD, NULL, off);
    }
    if (v->transient) /* off would be gone */
        for (int f = 0; f < HV_F_COUNT; f++)
            if (plan[f].how == HV_HOW_COLD)
                set_plan(&plan[f], HV_HOW_IMPOSSIBLE, NULL, TRANSIENT_REASON);
    b_check(b, d, plan);
    return HV_OK;
}

/* Fault 11's boot-time reservation (crashkernel=SIZE on the kernel's command line) is the
 * kernel's at boot only: each boot applies it, sized when the fault arose, where it fits in the
 * memory that boot has (at most half of it: a kernel keeps the rest for itself), and skips it
 * where it does not, keeping only its own reserve (seed 1117689: 640 MiB, a quarter of 2560,
 * kept through a boot with 512 MiB, so the guest reported -128 MiB). */
static void boot_reserve(struct sim *s, struct sim_vm *v)
{
    if (!v->reserve_next)
        return;
    int64_t r = 2 * v->reserve_next <= v->config.memory_mib ? v->reserve_next : v->reserve_own;
    if (r != v->reserve) {
        v->reserve_boot_ms = s->now_ms;
        if (r > v->reserve)
            v->reserve_grew_ms = s->now_ms;
        sim_note(s, "%s: the guest boots with %lld MiB and %s its reservation of %lld MiB", v->name,
                 (long long)v->config.memory_mib, r == v->reserve_own ? "skips" : "applies",
                 (long long)v->reserve_next);
    }
    v->reserve = r;
}

static void power_on(struct sim *s, int k)
{
    struct sim_vm *v = &s->vms[k];
    v->power = HV_POWER_ON;
    v->halted = false;
    v->live = v->config;
    v->boot_at = s->now_ms + 1000 * sim_range(s, 3, 20);
    v->guest_mem = v->config.memory_mib; /* boot memory: all of it online */
    v->guest_cpus = v->config.cpus;
    v->online_at = 0;
    v->off_at = 0;
    v->n_plugs = 0; /* a boot: all its memory is boot memory */
    /* Stale statistics are a running guest's balloon driver that stopped reporting: a new
     * QEMU process has no report of the last one (libvirt: no last-update until the freshly
     * booted guest reports, the booting case of fill_guest), and the new kernel's driver
     * reports again. Kept, the old report would outlive the process that made it. */
    if (v->stats == 1)
        v->stats = 0;
    v->power_on_ms = s->now_ms;
    v->power_on_seq = ++s->world_seq;
    boot_reserve(s, v);
    if (v->reserve > 100)
        v->touched_ms = s->now_ms; /* a guest that reserves memory at boot: shows now */
    v->cycling = false;
    v->off_taker_gen = 0;
    v->off_anew_ms = 0;
    v->foreign_boot_ms = 0; /* (the operator's power-on sets it after this) */
    bool new_cfg = v->halts_new &&
                   (v->config.memory_mib != v->good.memory_mib || v->config.cpus != v->good.cpus);
    if (v->halts || new_cfg) {
        if (v->halts > 0)
            v->halts--;
        v->halt_at = s->now_ms + 1000 * sim_range(s, 1, 5);
        v->halt_pauses = false;
    } else if (v->pauses) {
        v->pauses--;
        v->halt_at = s->now_ms + 1000 * sim_range(s, 1, 5);
        v->halt_pauses = true;
    }
}

static void power_off(struct sim *s, int k)
{
    struct sim_vm *v = &s->vms[k];
    v->power = HV_POWER_OFF;
    /* (a press the guest ignored stays the last one asked of it: a power-off, the operator's
     * too, answers no shutdown, and an operation that waited for that press fails on it;
     * held-out seed 2801226: the Soft timeout stored, the operator's power-off before CAPI's
     * next call, the Failure answered then) */
    v->went_off_ms = s->now_ms;
    v->live = v->config;
    v->off_at = v->online_at = v->halt_at = v->boot_at = 0;
    if (v->transient) {
        v->exists = false; /* a transient domain that stops is gone */
        v->gone_ms = s->now_ms;
        sim_note(s, "%s (transient) stopped and is gone", v->name);
    }
}

static struct sim_replica *rep_of(struct hv_backend *b)
{
    return b->priv;
}

static bool record_in_cycle(struct sim_vm *v);

/* The process that carries w's cycle now: its record's owner (a rollout change or another
 * replica that took the cycle over wrote its own), else the one that sent its shutdown or
 * power-off. */
static void cycle_carrier(struct sim_vm *w, int *rep, int *gen)
{
    const struct hv_oprecord *r = sim_record(w);
    if (!(r && sscanf(r->owner, "sim-r%d:%d", rep, gen) == 2)) {
        *rep = w->cycle_owner;
        *gen = w->cycle_gen;
    }
}

/* w was resumed by the operator in the middle of its cycle and the process that sent its step
 * has not looked at it since: no hypervisor tells the engine of a resume before it looks
 * (every CYCLE_LOOK_MS at most: a paused cycle is looked at on a timer), or, once the cycle is
 * past its deadline (its entry parked for the resume's change report, HV_FOLLOW_RESUME: no
 * timer), before that report, which the step loop holds back (delivered on about one step in
 * ten; a real backend's comes at once). Held-out seed 3248614: vm0's Soft shutdown sent as it
 * paused, its deadline Failure upon that shutdown parked, the operator resumed it at 713.6 s,
 * the guest shut down 0.1 s later, and both reports still waited when vm2's power-off was
 * accepted at 724.6 s. World facts only: the resume, the looks, the reports delivered, and
 * CAPI's operation: the carrier's last look found the VM not running, past deadlineSeconds
 * from the CanUpdateMachine that covered it (its record begins no earlier). A timed look that
 * is merely overdue is not excused past CYCLE_LOOK_MS (slots.c paused_due counts that cycle;
 * stop 55's review: a mutant leaving it out of the caps went uncaught). */
static bool resume_unseen(const struct sim *s, struct sim_vm *w)
{
    /* (the process that sent its step, or took it over since: the one that carries the cycle
     * now (cycle_carrier), whose slot it is, not the first sender, whose look tells the
     * carrier nothing; seed 3885524: r0's shutdown of vm3 taken over and sent again by r1,
     * the VM paused, resumed at 22.6 s, r0 looked at 26.7 s, r1 not since 22.3 s, and r1
     * began vm1's cycle at 26.7 s) */
    int o, gen;
    cycle_carrier(w, &o, &gen);
    if (!w->resumed_ms || o < 0 || o >= s->n_reps || w->look_ms[o] >= w->resumed_ms)
        return false;
    if (s->now_ms - w->resumed_ms <= CYCLE_LOOK_MS)
        return true;
    /* (no covered operation of CAPI's for the VM, no deadline to be past) */
    const struct sim_op *op = &s->callers[w - s->vms].op;
    return op->can_ms > 0 && w->reported_ms < w->resumed_ms && w->look_on_ms[o] < w->look_ms[o] &&
           w->look_ms[o] - op->can_ms > (int64_t)op->s.deadline_s * 1000;
}

/* w runs, and nothing of its cycle can take it down any more, by world facts: its guest
 * ignored the last shutdown asked of it (that press is lost: a guest that heeds the button
 * later does not act on an old one), it accepted none since (no off_at), it was not paused
 * since (a pause stops the clock of what may land, rc_step_run_at), and the time in which the
 * engine must hold that the step may still land is over. The engine gives such a cycle's slot
 * back by design (the previous life's spent step, and an own pass over a spent cycle whose
 * begin was refused, seed 719176); the VM goes down again only by a new step, which
 * sim_check_carried counts from the moment it lands (the VM off). Held-out seeds 2556894,
 * 5257033, 2800518, 5484061, 5511892: counted against another VM's new cycle. A pause since
 * stops no clock the engine can read when it ended before the life of the process that carries
 * the cycle now (cycle_carrier's replica) began: that life saw no pause and times the step
 * from its send, as documented (how-it-works, "A process that restarted knows no pause of its
 * previous life"). Held-out seed 3948439: vm1's Soft shutdown sent by r0:2 at 74.3 s, ignored,
 * the VM suspended at 90.3 s and resumed at 205.3 s, r0 restarted at 208.2 s, and r0:3,
 * waiting for a slot to send it again, began vm0's cycle on the host at 225.7 s. */
static bool press_spent(const struct sim *s, struct sim_vm *w)
{
    int cr, cg;
    cycle_carrier(w, &cr, &cg);
    bool pause_before_life = cr >= 0 && cr < s->n_reps && w->resumed_ms > w->paused_ms &&
                             s->restart_ms[cr] > w->resumed_ms;
    return w->power == HV_POWER_ON && w->acpi_missed && !w->off_at && w->press_ms &&
           (w->paused_ms < w->press_ms || pause_before_life) && s->now_ms > w->press_may_land_ms;
}

/* w is off, as it has been since a new operation took it up after a failed cold operation
 * had given up starting it (sim_vm.off_anew_ms), and its record is still that operation's
 * (failed or not): held-out seeds 3059937, 3496438, 5444173, 5480157, each a new call's
 * operation reconfiguring and starting such a VM in the pass that sent another VM's shutdown
 * (5444173: its reconfigure then refused three times, the Failure holding the slot over the
 * caps while it tries starts). That operation holds its slot over the caps from the take-up
 * (how-it-works `off` row, and `end` for its Failure), so it is left out only beside cycles
 * whose slot was held by then (off_anew_before, cycle_begun_since). Review of 9efcea7:
 * unbounded, it hid an engine whose `off` row took no slot, a later cycle going down beside
 * the VM still off. */
static bool off_taken_anew(struct sim_vm *w)
{
    const struct hv_oprecord *r = w->exists ? sim_record(w) : NULL;
    return w->power == HV_POWER_OFF && w->off_anew_ms && r && r->started_at == w->off_anew_op;
}

/* w is such a VM (off_taken_anew), taken up no earlier than since (world ms): a cycle whose
 * slot was held since then does not count it. */
static bool off_anew_before(struct sim_vm *w, int64_t since)
{
    return since && off_taken_anew(w) && w->off_anew_ms >= since;
}

/* w is off since the operator powered it off while its cycle's shutdown could no longer take
 * it down (press_spent then: sim_vm.op_off_spent_ms), and no live process has looked at it
 * since. The engine gave that cycle's slot back by design (the step's window over, the VM
 * running) and, its Failure's write having failed, follows it no more: the record still shows
 * the cycle, but no step of the engine brought the VM down, and no engine can count a VM it
 * has not seen off (no look of a running process since; the change report wakes only a
 * settling or parked entry, workers.c eng_vm_changed). Once a live process has looked at it,
 * it takes it over off (over the caps) and the VM counts again. Held-out seed 7113107: r0:2's
 * deadline Failure of r0:1's spent TrySoft shutdown of vm5 (1748.5 s) not stored, host1 dead
 * at 1806.3 s, the operator's power-off at 1859.2 s, vm2's cycle at 1897.8 s. */
static bool off_by_operator_unseen(const struct sim *s, const struct sim_vm *w)
{
    if (!w->op_off_spent_ms || w->power != HV_POWER_OFF || w->went_off_ms != w->op_off_spent_ms)
        return false;
    for (int r = 0; r < s->n_reps; r++)
        if (w->look_ms[r] >= w->op_off_spent_ms && w->look_ms[r] > s->restart_ms[r])
            return false;
    return true;
}

bool sim_cycle_counts(struct sim *s, struct sim_vm *w, const struct sim_vm *v)
{
    bool other = w != v; /* (v NULL: none is v) */
    if (!w->exists || !w->cycling || (other && w->power == HV_POWER_PAUSED))
        return false;
    if (other && (press_spent(s, w) || off_by_operator_unseen(s, w)))
        return false;
    if (w->halted_for_good && w->power == HV_POWER_OFF)
        return false;
    if (other && (sim_start_given_up(s, w) || sim_start_window_lost_to_host(s, w) ||
                  sim_start_window_lost_to_the_loop(w)))
        return false;
    if (other && resume_unseen(s, w))
        return false;
    if (other && w->power == HV_POWER_ON && !w->off_at && !record_in_cycle(w))
        return false;
    return true;
}

/* The VM's record is a Failure upon the step stored with stepAt step_at (its downAt), or, unless
 * failure_only, still that stored step (the review of the stop 60 branch: an excuse for a step
 * held as one that may land holds only while the record the engine keeps is about that step). */
static bool record_upon_step(const struct sim_vm *w, int64_t step_at, bool failure_only)
{
    struct hv_oprecord r;
    if (!step_at || !hv_oprecord_read(&r, w->record))
        return false;
    if (r.phase == HV_PH_FAILED)
        return r.down_at == step_at;
    return !failure_only && (r.phase == HV_PH_SHUTDOWN || r.phase == HV_PH_POWER_OFF) &&
           r.step_at == step_at;
}

bool sim_record_upon_step(const struct sim_vm *w, int64_t step_at)
{
    return record_upon_step(w, step_at, false);
}

/* The process (rep, gen) sent w's cycle's shutdown or power-off, first or again (a later life
 * of the first sender carrying it on after a restart, held-out seed 1408263; another replica
 * that took the cycle over, its record now theirs, held-out seed 1634553), before the VM was
 * resumed: the engine takes that cycle over the caps once it runs again (reconcile.c
 * cold_on_path `sent`, the documented exception). */
static bool sent_before_resume(const struct sim_vm *w, int rep, int gen)
{
    return (w->cycle_owner == rep && w->cycle_gen == gen && w->resumed_ms > w->cycle_ms) ||
           (w->resent_rep == rep && w->resent_gen == gen && w->resumed_ms > w->resent_ms) ||
           /* (or by a previous life of rep, the VM paused before the step landed, and this
            * life wrote the VM's record over it (its Failure upon that step, parked for the
            * resume) after the pause and before the resume: how-it-works `between` row, the
            * resume's pass holds it over the caps; held-out seed 5624426) */
           (w->cycle_owner == rep && w->cycle_gen < gen && w->paused_ms > w->cycle_ms &&
            w->writer_rep == rep && w->writer_gen == gen && w->writer_ms > w->paused_ms &&
            w->resumed_ms > w->writer_ms && record_upon_step(w, w->cycle_step_at, true));
}

/* A cycle carried by the process (r, gen) began after since (world ms): its shutdown or
 * power-off accepted then (sim_vm.cycle_ms), a VM taken up off anew not counted. */
static bool cycle_begun_since(struct sim *s, int r, int gen, int64_t since)
{
    for (int j = 0; j < s->n_vms; j++) {
        struct sim_vm *x = &s->vms[j];
        int cr, cg;
        if (x->cycle_ms <= since || off_taken_anew(x) || !sim_cycle_counts(s, x, NULL))
            continue;
        cycle_carrier(x, &cr, &cg);
        if (cr == r && cg == gen)
            return true;
    }
    return false;
}

void sim_check_carried(struct sim *s)
{
    for (int r = 0; r < s->n_reps; r++) {
        int all = 0, host[SIM_MAX_HOSTS] = {0};
        char who[200] = "";
        for (int j = 0; j < s->n_vms; j++) {
            struct sim_vm *w = &s->vms[j];
            int cr, cg;
            if (!sim_cycle_counts(s, w, NULL))
                continue;
            cycle_carrier(w, &cr, &cg);
            if (!(cr == r && cg == s->reps[r].gen))
                continue;
            /* (its own shutdown, sent before a pause, of a VM resumed since: it counts at once
             * over the caps, the engine's documented exception; no new cycle begins then) */
            if (sent_before_resume(w, r, cg))
                continue;
            /* (nor a VM given up off that a new operation took up, no cycle of this process
             * begun since: off_taken_anew) */
            if (off_taken_anew(w) && !cycle_begun_since(s, r, cg, w->off_anew_ms))
                continue;
            /* (nor another process's cycle whose VM is off already, carried on to start it
             * again: that brings no VM down; never leave a VM off. Also one this process sent
             * the shutdown of, then another carried (its slot given back), and this one took
             * over again with the VM off: seed 108028) */
            if (w->power == HV_POWER_OFF && (!(w->cycle_owner == r && w->cycle_gen == cg) ||
                                             (w->off_taker == r && w->off_taker_gen == cg)))
                continue;
            all++;
            host[w->host]++;
            snprintf(who + strlen(who), sizeof(who) - strlen(who), " %s(%s)", w->name,
                     w->power == HV_POWER_OFF ? "off" : "on");
        }
        for (int h = 0; h < s->n_hosts; h++)
            if (host[h] > s->ecfg.max_power_cycles_per_host || all > s->ecfg.max_power_cycles)
                sim_break(s, INV_CYCLES,
                          "r%d carries %d power cycles on %s (%d overall), caps %d per host, %d "
                          "overall:%s",
                          r, host[h], s->hosts[h].name, all, s->ecfg.max_power_cycles_per_host,
                          s->ecfg.max_power_cycles, who);
    }
}

/* w's cycle is the process me's own shutdown, sent before a pause, of a VM resumed after
 * held_since (0: never): the engine takes it over the caps (sent_before_resume), so it does
 * not count against a cycle whose slot was held since. */
static bool resumed_over_caps(const struct sim_vm *w, int64_t held_since, int me, int me_gen)
{
    return held_since && w->resumed_ms > held_since && sent_before_resume(w, me, me_gen);
}

/* w is another process's cycle of a VM off already that process (me, me_gen) took over after
 * the event since_seq (sim.world_seq): the carry-on over the caps that brings no VM down (the
 * engine takes such a VM's slot regardless of them: it must be brought back), beside a cycle
 * of me whose slot was held before it. In the world's order, not its milliseconds: one pass
 * may take the slot and send a step, then take the off VM over, in the same millisecond
 * (held-out seed 4375407: r0's shutdown of vm2 timed out untaken at 50.6 s, then the same
 * pass of r0 took r1's cycle of vm1, off, over; vm2's re-send at 54.3 s). */
static bool taken_over_off_since(const struct sim_vm *w, uint64_t since_seq, int me, int me_gen)
{
    return w->power == HV_POWER_OFF && !(w->cycle_owner == me && w->cycle_gen == me_gen) &&
           w->off_taker == me && w->off_taker_gen == me_gen && w->off_taken_seq > since_seq;
}

/* The cycle v begins now (process me) is the re-send of its own shutdown or power-off that
 * got no answer and was not taken (sim_vm.unans_*), for the same operation, within the time
 * the engine holds that it may still land (rc_may_land_until: shutdownTimeoutSeconds +
 * step_timeout_s, 2 s slack), v not paused since: when that try was sent (0: not such a
 * re-send). The engine took v's slot within the caps for the first try and has held it since,
 * the VM liable to go down at any moment; had that try been taken, v's cycle would have begun
 * then, and what came after it counts as after a cycle begun (held_since in
 * check_cycle_start): another process's VM off already that me took over since (the carry-on
 * over the caps that brings no VM down, held-out seed 1428400), or me's own cycle of a VM
 * paused before and resumed since (its step sent before the pause, carried over the caps by
 * design, held-out seed 4676133: vm4's shutdown timed out at 110.2 s, vm0 resumed at 110.6 s
 * with its TrySoft shutdown of 67.4 s pending, vm4's re-send at 115.5 s). No engine can tell
 * the two worlds apart. */
static int64_t resent_unanswered_since(const struct sim *s, const struct sim_vm *v,
                                       const struct hv_oprecord *rp, int me, int me_gen)
{
    int shutdown_s = 0;
    if (!rp || !v->unans_ms || v->unans_rep != me || v->unans_gen != me_gen ||
        v->unans_op != rp->started_at || v->paused_ms >= v->unans_ms ||
        (rp->phase != HV_PH_SHUTDOWN && rp->phase != HV_PH_POWER_OFF) ||
        sscanf(rp->policy, "%*[^/]/%*[^/]/%*d/%d", &shutdown_s) != 1 ||
        s->now_ms - v->unans_ms > 1000 * ((int64_t)shutdown_s + s->ecfg.step_timeout_s + 2))
        return 0;
    return v->unans_ms;
}

/* w's cycle, resumed by the operator, is carried over the caps by design by a live process
 * other than me (me_gen) that sent its step before the resume (sent_before_resume): the one
 * that sent it first, or the one that carries it now (cycle_carrier: the record's owner),
 * which took it over and sent it again, as sim_check_carried counts it. Held-out seed 15322
 * (honest world): r0:1's TrySoft shutdown of vm4 sent again by r1 at 97.4 s and by r0:2 at
 * 109.8 s (its record r0:2's since), vm4 suspended at 154.3 s, r0:2's slot given back and
 * taken for vm2's cycle at 159.0 s, vm4 resumed at 163.7 s and taken over r0:2's caps at its
 * next look, and r1 (its own slot for vm4 given back when it saw the VM paused, 163.6 s)
 * began vm1's cycle at 163.8 s: one cycle within each process's cap and one over r0:2's, where
 * the first sender's reading (r0:1, a previous life) counted it as no live process's. A
 * previous life's cycle that no live process took over still counts. */
static bool others_resumed_over_caps(const struct sim *s, struct sim_vm *w, int me, int me_gen)
{
    int cr, cg;
    cycle_carrier(w, &cr, &cg);
    const int by[2][2] = {{w->cycle_owner, w->cycle_gen}, {cr, cg}};
    for (int i = 0; i < 2; i++) {
        int r = by[i][0], g = by[i][1];
        if (!(r == me && g == me_gen) && r >= 0 && r < s->n_reps && s->reps[r].gen == g &&
            sent_before_resume(w, r, g))
            return true;
    }
    return false;
}

/* Invariant 2 at the moment a shutdown or power-off is accepted. */
static void check_cycle_start(struct sim *s, struct hv_backend *b, int k)
{
    struct sim_vm *v = &s->vms[k];
    s->r.checks++;
    if (v->transient)
        sim_break(s, INV_CYCLES, "%s: power cycle of a transient domain", v->name);
    const struct hv_oprecord *rp = sim_record(v);
    /* (a shutdown sent again while one is under way, e.g. by an operation that took over a
     * cycle already begun for other hardware, starts no cycle: only a new one is checked) */
    if (rp && !v->cycling) {
        struct hv_oprecord r = *rp;
        if (!strncmp(r.policy, "Never/", 6))
            sim_break(s, INV_CYCLES, "%s: power cycle under powerCycle Never (record: %s)", v->name,
                      v->record);
        bool live_op = true;
        for (int f = 0; f < HV_F_COUNT; f++)
            if (!strcmp(r.plan[f], "cold"))
                live_op = false;
        /* (statistics that stopped tell nothing newer than their last report: a guest whose
         * report from after the live step shows the memory not online yet is a reason; one
         * whose report is older than the step, or absent, is none: the guest cannot tell, and
         * only guestVerification Required fails for that, no power cycle) */
        bool stale_tells = v->stats == 1 && v->stale.mem_view == HV_GV_SEEN &&
                           v->stale.mem_at > s->unix0 + v->step_ok_ms / 1000;
        /* (nor a guest whose boot since the operation began grew its boot-time reservation:
         * its own memory total fell by the growth, so no view compared with the base taken
         * before that boot can show the change; held-out seed 3621828: the operator's power-on
         * during r1's shutdown, on a host down, booted the guest with the hot-plugged DIMM
         * and a new 1024 MiB reservation; r1's pass at the TrySoft window powered it off) */
        bool reserve_grew =
            v->reserve_grew_ms && v->reserve_grew_ms >= (r.started_at - s->unix0) * 1000;
        /* (nor the re-send of this operation's own shutdown or power-off that landed, the
         * operator having started the VM again (press_undone) before any look of the re-sending
         * process's life saw it off, with no step or other power-on since and statistics that
         * tell nothing newer than that step: hv_vm_obs carries no boot identity, so to the
         * engine it is the VM it asked to go down, still running, whose guest last showed the
         * change not taken (the cycle's cause, judged at its start) and has told nothing
         * since; the change shows only through a boot no engine can see, as for invariant 4's
         * `undone`. Held-out seed 5713628 @1000: r0:1's Soft shutdown of vm4 for a DIMM its
         * guest never onlined landed at 189.6 s while the host was unreachable, r0 restarted
         * at 192.5 s, the operator powered vm4 on at 206.5 s, its statistics went stale and
         * absent; r0:2's first look, in the end phase, sent the shutdown again) */
        int rme = rep_of(b)->idx;
        bool undone_unseen = v->undone_on_ms && v->undone_on_ms == v->power_on_ms &&
                             v->cycle_op == r.started_at && v->step_ok_ms <= v->went_off_ms &&
                             (r.phase == HV_PH_SHUTDOWN || r.phase == HV_PH_POWER_OFF) &&
                             v->undone_seen_gen[rme] != rep_of(b)->gen && v->stats != 0;
        if (live_op && v->power == HV_POWER_ON && sim_hw_shows(v, &r.desired) &&
            sim_guest_shows(v, &r.desired) && booted(s, v) && !stale_tells && !reserve_grew &&
            !undone_unseen && (r.desired.cpus < 0 || v->agent))
            sim_break(s, INV_CYCLES, "%s: power cycle although the live change shows%s", v->name,
                      v->reserve > 100 ? " (the guest reserves memory at boot)"
                      : v->stats != 0  ? " (its statistics tell nothing newer than the step)"
                                       : "");
    }
    int me = rep_of(b)->idx, me_gen = rep_of(b)->gen;
    if (v->cycling) {
        if (me != v->cycle_owner || me_gen > v->cycle_gen) {
            v->resent_rep = me;
            v->resent_gen = me_gen;
            v->resent_ms = s->now_ms;
        }
        return;
    }
    /* The power-off of a TrySoft cycle whose shutdown this same process life sent for the
     * same operation, the VM not paused since: no new cycle to the engine, which has held the
     * slot it took for that shutdown since (its record in the cycle all along), whatever the
     * VM did meanwhile (the operator started it again, which ended the world's cycle: seed
     * 30538). A cycle resumed since over the caps (below) counts against a new cycle only. */
    int64_t held_since = rp && rp->phase == HV_PH_POWER_OFF && rp->started_at == v->cycle_op &&
                                 v->cycle_op && v->cycle_owner == me && v->cycle_gen == me_gen &&
                                 v->paused_ms < v->cycle_ms
                             ? v->cycle_ms
                             : 0;
    uint64_t held_seq = held_since ? v->cycle_seq : 0; /* (... in the world's order) */
    /* (or since the first try of a re-send: resent_unanswered_since) */
    if (!held_since) {
        held_since = resent_unanswered_since(s, v, rp, me, me_gen);
        held_seq = held_since ? v->unans_seq : 0;
    }
    v->cycling = true;
    v->off_taker_gen = 0;
    v->off_anew_ms = 0;
    v->cycle_owner = me;
    v->cycle_gen = me_gen;
    v->cycle_ms = s->now_ms;
    v->cycle_step_at = rp ? rp->step_at : 0;
    v->cycle_seq = ++s->world_seq;
    v->resent_gen = 0;
    v->resent_ms = 0;
    v->cycle_op = rp ? rp->started_at : 0;
    v->cycle_life_ms = s->restart_ms[me];
    memcpy(v->cycle_listed_ms, s->reps[me].listed_ms, sizeof(v->cycle_listed_ms));
    int on_host = 0, all = 0;
    char who[200] = "";
    bool other_process = false, unseen = false;
    for (int j = 0; j < s->n_vms; j++) {
        struct sim_vm *w = &s->vms[j];
        /* A VM that can never run (it refuses every power-on, or halts after each), off: not
         * a cycle the cap can bound. The engine gives its start up after a bounded time (and a
         * later operation for it finds it off, which no cap can undo); holding a slot for it
         * would stop every cycle of its host for ever. */
        if (w->halted_for_good && w->power == HV_POWER_OFF)
            continue;
        /* Nor one the engine gave up on as such: a failed cycle left it off and the hypervisor
         * refused or failed every start the engine tried through its retry window (a real host
         * refuses a power-on for lack of resources, a lock, a task; nothing tells the engine it
         * would take the next one). Its slot went back then (reconcile.c left_off), by design,
         * and the VM stays off until a call or the operator starts it, however many refusals
         * the fault had left: the cap bounds cycles under way, not VMs given up. The same for
         * one whose retry window a host outage took (invariant 5's excuse, held-out seed
         * 5245951: the host out from before the window's end, the engine's restarted process
         * found the VM off past it and left it, as reconcile.c left_off says). */
        if (w != v && (sim_start_given_up(s, w) || sim_start_window_lost_to_host(s, w) ||
                       sim_start_window_lost_to_the_loop(w)))
            continue;
        /* Nor one a new operation took up off, once the engine had so given it up, after v's
         * slot was held: it reconfigures and starts the VM (the documented `off` row, its slot
         * over the caps), which brings no VM down (off_anew_before) */
        if (w != v && off_anew_before(w, held_since))
            continue;
        /* Nor, until its process has looked at it, one the operator resumed in the middle of
         * its cycle in the last CYCLE_LOOK_MS (or, past its deadline, before the resume's
         * report: resume_unseen): paused, it gave its slot back (issue 17 item 4),
         * and a real guest that got the shutdown before it was paused goes on with it when it
         * runs. No hypervisor tells the engine of a resume before it looks (every
         * CYCLE_LOOK_MS at most); then the cycle counts against the caps again (reconcile.c
         * cold_on_path `sent`, off_path). */
        if (w != v && resume_unseen(s, w))
            continue;
        /* a VM paused or suspended mid-cycle gives its slot back (its cycle cannot
         * progress, issue 17 item 4): it does not count against the caps while it is */
        /* a cycle is over once the VM runs with no shutdown pending and its record shows
         * none in flight (as sim_world_tick sees it: ended earlier in this same step) */
        if (w != v && w->power == HV_POWER_ON && !w->off_at && !record_in_cycle(w))
            continue;
        /* ... or whose shutdown can no longer take it down (press_spent), also once the
         * operator powered it off, until a live process has looked at it since
         * (off_by_operator_unseen) */
        if (w != v && (press_spent(s, w) || off_by_operator_unseen(s, w)))
            continue;
        if (w != v && resumed_over_caps(w, held_since, me, me_gen))
            continue;
        /* ... or another live process's cycle the operator resumed after that process sent
         * its step: carried over that process's caps by design, as sim_check_carried counts it
         * (held-out seed 2278471: r1's suspended cycle resumed beside r1's and r0's own). Not
         * a previous life's that no live process carries: none carries that one over its caps
         * (others_resumed_over_caps) */
        if (w != v && others_resumed_over_caps(s, w, me, me_gen))
            continue;
        /* ... or a VM off mid-cycle that another replica than the one that began the cycle
         * took over (the world saw it write the record while the VM was off, off_taker):
         * carried on over that replica's caps to start it again, as each process's count
         * below and sim_check_carried have it, and no longer carried by the one that began it,
         * whose slot went back (held-out seed 2851052: r1's power-on of vm1 refused, r0's
         * operation for the next state took the off VM over, r1 began vm6's cycle). Not a
         * later life of the replica that began it: that one has no other live process to
         * share the sum with (mutation scan_leaves_a_failed_cycle_off, seed 114355) */
        if (w != v && w->power == HV_POWER_OFF && w->off_taker_gen &&
            w->off_taker != w->cycle_owner)
            continue;
        if (w->exists && w->cycling && (w == v || w->power != HV_POWER_PAUSED)) {
            all++;
            on_host += w->host == v->host;
            const struct hv_oprecord *wr = sim_record(w);
            snprintf(who + strlen(who), sizeof(who) - strlen(who), " %s(%s %s, by r%d:%d)", w->name,
                     w->power == HV_POWER_OFF ? "off" : "on",
                     wr ? hv_phase_name(wr->phase) : "no record", w->cycle_owner, w->cycle_gen);
            other_process |= w->cycle_owner != v->cycle_owner || w->cycle_gen != v->cycle_gen;
            unseen |= w != v && sim_unseen_since_restart(s, w, w->cycle_owner, w->cycle_gen);
        }
    }
    /* The caps are each process's (docs/limits.md "Power-cycle caps are per replica"): the
     * cycles this one carries, for any reason (new, resumed, taken over from an older
     * operation or another replica, a previous life's carried on), count against them as
     * configured. (All of them together against cap * replicas, as before, is implied.) */
    int mine_host = 0, mine = 0;
    char mine_who[200] = "";
    for (int j = 0; j < s->n_vms; j++) {
        struct sim_vm *w = &s->vms[j];
        int cr, cg;
        if (!sim_cycle_counts(s, w, v))
            continue;
        cycle_carrier(w, &cr, &cg);
        if (w != v && !(cr == me && cg == me_gen))
            continue;
        if (w != v && resumed_over_caps(w, held_since, me, me_gen))
            continue;
        /* (nor one of a VM off mid-operation it took over since, over the caps, beside the
         * power-off of its TrySoft cycle whose slot it has held since the shutdown: held-out
         * seed 1980368, the operator had started that VM again after the shutdown landed) */
        if (w != v && held_since && taken_over_off_since(w, held_seq, me, me_gen))
            continue;
        if (w != v && off_anew_before(w, held_since))
            continue;
        mine++;
        mine_host += w->host == v->host;
        snprintf(mine_who + strlen(mine_who), sizeof(mine_who) - strlen(mine_who), " %s(%s)",
                 w->name, w->power == HV_POWER_OFF ? "off" : "on");
    }
    if (mine_host > s->ecfg.max_power_cycles_per_host || mine > s->ecfg.max_power_cycles)
        sim_break(s, INV_CYCLES,
                  "r%d carries %d power cycles on %s (%d overall), caps %d per host, %d overall:%s",
                  me, mine_host, s->hosts[v->host].name, mine, s->ecfg.max_power_cycles_per_host,
                  s->ecfg.max_power_cycles, mine_who);
    int cap_host = s->ecfg.max_power_cycles_per_host * s->n_reps;
    int cap = s->ecfg.max_power_cycles * s->n_reps;
    if (on_host > cap_host || all > cap)
        sim_break(s, INV_CYCLES, "%d power cycles at once on %s (%d overall), cap %d per host:%s%s",
                  on_host, s->hosts[v->host].name, all, cap_host, who,
                  unseen          ? " (a restarted process has not seen one of them since)"
                  : other_process ? " (another process began one of them)"
                                  : "");
}

/* Invariant 7-legal-transition: a record write of a VM (stored, after its trace line) moves
 * its operation's phase as the engine's table allows. The same operation (the same start and
 * desired hardware) goes from the phase of the record it replaces; a new one (no record
 * before, the operator cleared it, another start or other hardware) from none. And the
 * power the world gives the VM agrees with the phase moved to (below). */
static void check_record_move(struct sim *s, struct sim_vm *v, bool had,
                              const struct hv_oprecord *before)
{
    const struct hv_oprecord *n = sim_record(v);
    if (!n)
        return;
    bool same =
        had && before->started_at == n->started_at && hv_hw_equal(&before->desired, &n->desired);
    if (!had || before->started_at != n->started_at) { /* an operation's first record */
        v->found_op = n->started_at;
        v->found_config = v->config;
    }
    enum hv_phase from = same ? before->phase : HV_PH_NONE;
    if (!hv_phase_move_allowed(from, n->phase)) {
        sim_break(s, INV_LEGAL,
                  "%s: the record moved %s -> %s (operation started %lld), not in the engine's "
                  "phase table",
                  v->name, hv_phase_name(from), hv_phase_name(n->phase), (long long)n->started_at);
        return;
    }
    /* The world's own facts, not the engine's table: within a pass nothing but the engine's
     * own acts changes a VM, and a record that moves to a step's phase is written before
     * that step (a live step's with it): to reconfigure or power-on only for a VM that is
     * off, to planned, live, wait-live, shutdown or power-off only for one that runs. */
    if (from == n->phase)
        return;
    bool wants_off = n->phase == HV_PH_RECONFIGURE || n->phase == HV_PH_POWER_ON;
    bool wants_on = n->phase == HV_PH_PLANNED || n->phase == HV_PH_LIVE ||
                    n->phase == HV_PH_WAIT_LIVE || n->phase == HV_PH_SHUTDOWN ||
                    n->phase == HV_PH_POWER_OFF;
    if ((wants_off && v->power != HV_POWER_OFF) || (wants_on && v->power != HV_POWER_ON)) {
        static const char *const powers[] = {"unknown", "on", "off", "paused"};
        sim_break(s, INV_LEGAL, "%s: the record moved %s -> %s while the VM is %s", v->name,
                  hv_phase_name(from), hv_phase_name(n->phase),
                  v->power <= HV_POWER_PAUSED ? powers[v->power] : "unknown");
    }
}

/* The record before a write, for check_record_move. */
/* A done record of operation op is written: what the guest could show then (sim_vm.done_view_*,
 * the judge's own reading of the world, as invariant 1's Required check reads it at an answer:
 * statistics reported after the world's last step of the operation, a booted guest). */
static void note_done_view(struct sim *s, struct sim_vm *v, int64_t op)
{
    int64_t begun_ms = (op - s->unix0) * 1000;
    int64_t after = s->unix0 + (v->step_ok_ms > begun_ms ? v->step_ok_ms : begun_ms) / 1000;
    bool booted = v->power == HV_POWER_ON && (!v->boot_at || v->boot_at <= s->now_ms);
    v->done_view_op = op;
    v->done_view_mem =
        booted && (v->stats == 0 ||
                   (v->stats == 1 && v->stale.mem_view == HV_GV_SEEN && v->stale.mem_at > after));
    v->done_view_cpus = booted && v->agent;
}

/* Before an engine's write over v's record (had: it holds one): a failed cold operation left v
 * off and gave up starting it (its step timeout spent on refused starts, or its window lost to
 * a host or to the step loop) */
static bool given_up_off(struct sim *s, struct sim_vm *v, bool had)
{
    return had && v->cycling && v->power == HV_POWER_OFF &&
           (sim_start_given_up(s, v) || sim_start_window_lost_to_host(s, v) ||
            sim_start_window_lost_to_the_loop(v));
}

/* After it, on either path (the record write, or the record stored with a step): the world's
 * own bookkeeping of the write (before: the record it replaced, phase NONE and startedAt 0
 * when none) */
static void note_record_written(struct sim *s, struct sim_vm *v, bool given_up,
                                const struct hv_oprecord *before)
{
    v->cleared_out_cycle = false;
    const struct hv_oprecord *now = sim_record(v);
    if (given_up && now && now->started_at != before->started_at) {
        v->off_anew_ms = s->now_ms;
        v->off_anew_op = now->started_at;
    }
    if (now && now->phase == HV_PH_DONE)
        note_done_view(s, v, now->started_at);
}

static bool record_before(struct sim_vm *v, struct hv_oprecord *out)
{
    const struct hv_oprecord *o = sim_record(v);
    if (o)
        *out = *o;
    return o != NULL;
}

/* The next outcome a script queued (sim_vm acts_next, writes_next: 16 bytes), taken off the
 * queue; '\0' when none is left. */
static char next_scripted(char q[16])
{
    char c = q[0];
    if (c)
        memmove(q, q + 1, 15);
    return c;
}

static int act_do(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *st,
                  struct hv_err *err)
{
    struct sim *s = sim_of(b);
    int k = sim_vm_by_name(s, ref->name);
    int rc = call_fault(s, k, err, SIM_CALL_ACT);
    /* (the next outcome a script queued, for an act that reaches the host) */
    char scripted = rc == HV_OK && k >= 0 ? next_scripted(s->vms[k].acts_next) : '\0';
    if (scripted == 'f' || scripted == 'r' || scripted == 't') {
        s->vms[k].touched_ms = s->now_ms;
        call_failed(s, k, SIM_CALL_ACT);
        rc = scripted == 'f' ? HV_E_UNREACHABLE : scripted == 't' ? HV_E_TIMEOUT : HV_E_INTERNAL;
        err_set(err, (enum hv_errcode)rc,
                scripted == 'f'   ? "scripted call failure"
                : scripted == 't' ? "scripted timeout, not taken"
                                  : "scripted refusal");
    }
    if (rc != HV_OK) {
        sim_note(s, "  act %d on %s: call failed (%d)", st->kind, ref->name, rc);
        if (k >= 0 && st->kind == HV_STEP_POWER_ON)
            s->vms[k].start_failed_ms = s->now_ms;
        const struct hv_oprecord *ur = k >= 0 ? sim_record(&s->vms[k]) : NULL;
        if (rc == HV_E_TIMEOUT && ur &&
            (st->kind == HV_STEP_SHUTDOWN || st->kind == HV_STEP_POWER_OFF)) {
            struct sim_vm *u = &s->vms[k];
            u->unans_rep = rep_of(b)->idx;
            u->unans_gen = rep_of(b)->gen;
            u->unans_ms = s->now_ms;
            u->unans_seq = ++s->world_seq;
            u->unans_op = ur->started_at;
        }
        return rc;
    }
    if ((k = find(s, ref)) < 0) {
        err_set(err, HV_E_NOT_FOUND, "gone");
        return HV_E_NOT_FOUND;
    }
    struct sim_vm *v = &s->vms[k];
    if (s->now_ms < v->busy_until) {
        v->touched_ms = s->now_ms; /* the other task shows now */
        if (st->kind == HV_STEP_POWER_ON)
            v->start_failed_ms = s->now_ms;
        err_set(err, HV_E_BUSY, "busy");
        return HV_E_BUSY;
    }
    const struct hv_hw *d = &st->desired;
    bool on = v->power == HV_POWER_ON;
    switch (st->kind) {
    case HV_STEP_LIVE_MEMORY:
        if (!on || d->memory_mib < v->live.memory_mib || d->memory_mib > v->max_live_mem) {
            err_set(err, on ? HV_E_UNSUPPORTED : HV_E_INVALID_STATE, "live memory");
            return err->code;
        }
        if (d->memory_mib > v->live.memory_mib && v->onlines)
            v->online_at = s->now_ms + 1000 * sim_range(s, 0, 20);
        else if (d->memory_mib > v->live.memory_mib)
            v->touched_ms = s->now_ms; /* the fault shows now */
        if (d->memory_mib > v->live.memory_mib) {
            int i = v->n_plugs < SIM_PLUGS ? v->n_plugs++ : SIM_PLUGS - 1;
            v->plug_ms[i] = s->now_ms;
            v->plug_mem[i] = d->memory_mib;
            v->plug_lost_ms[i] = 0;
            v->plug_blind[i] = plug_blind_now(s, v, st);
        }
        v->live.memory_mib = v->config.memory_mib = d->memory_mib;
        break;
    case HV_STEP_LIVE_CPUS:
        if (!on || d->cpus < v->live.cpus || d->cpus > v->max_live_cpus) {
            err_set(err, on ? HV_E_UNSUPPORTED : HV_E_INVALID_STATE, "live cpus");
            return err->code;
        }
        v->online_at = s->now_ms + 1000 * sim_range(s, 0, 10);
        v->live.cpus = v->config.cpus = d->cpus;
        break;
    case HV_STEP_LIVE_DISK:
        if (!on || !v->disk_grows) {
            v->touched_ms = v->disk_grows ? v->touched_ms : s->now_ms;
            err_set(err, on ? HV_E_UNSUPPORTED : HV_E_INVALID_STATE, "live disk");
            return err->code;
        }
        if (d->disk_mib > v->live.disk_mib)
            v->live.disk_mib = v->config.disk_mib = d->disk_mib;
        break;
    case HV_STEP_SHUTDOWN:
        if (!on) {
            err_set(err, HV_E_INVALID_STATE, "not running");
            return err->code;
        }
        check_cycle_start(s, b, k);
        plugs_lost(s, v); /* a cycle began: its cold Failure keeps no base */
        v->acpi_missed = v->ignores_acpi;
        v->press_ms = s->now_ms;
        v->press_may_land_ms = s->now_ms + 1000 * (int64_t)s->ecfg.step_timeout_s;
        const struct hv_oprecord *pr = sim_record(v);
        int press_shutdown_s = 0;
        if (pr && sscanf(pr->policy, "%*[^/]/%*[^/]/%*d/%d", &press_shutdown_s) == 1)
            v->press_may_land_ms += 1000 * (int64_t)press_shutdown_s;
        v->press_undone = false;
        if (v->ignores_acpi)
            v->touched_ms = s->now_ms;
        if (!v->ignores_acpi && !v->off_at)
            v->off_at = s->now_ms + 1000 * sim_range(s, 2, 15);
        break;
    case HV_STEP_POWER_OFF:
        if (v->power == HV_POWER_OFF)
            break;
        check_cycle_start(s, b, k);
        power_off(s, k);
        break;
    case HV_STEP_RECONFIGURE: {
        if (v->power != HV_POWER_OFF) {
            err_set(err, HV_E_INVALID_STATE, "not off");
            return err->code;
        }
        bool back = (d->memory_mib < 0 || d->memory_mib == v->config0.memory_mib) &&
                    (d->cpus < 0 || d->cpus == v->config0.cpus) && !sim_hw_shows(v, d);
        if (v->restore_fails && back) {
            v->touched_ms = s->now_ms;
            err_set(err, HV_E_INTERNAL, "restore fails");
            return err->code;
        }
        if (hv_disk_set(d->disk_mib) && d->disk_mib > v->config.disk_mib && !v->disk_grows) {
            v->touched_ms = s->now_ms;
            err_set(err, HV_E_UNSUPPORTED, "disk cannot grow");
            return err->code;
        }
        if (d->memory_mib >= 0)
            v->config.memory_mib = d->memory_mib;
        if (d->cpus >= 0)
            v->config.cpus = d->cpus;
        if (hv_disk_set(d->disk_mib) && d->disk_mib > v->config.disk_mib)
            v->config.disk_mib = d->disk_mib;
        v->live = v->config;
        v->reconf_ms = s->now_ms;
        v->reconf_seq = ++s->world_seq;
        v->reconf_rep = rep_of(b)->idx;
        break;
    }
    case HV_STEP_POWER_ON:
        if (v->power != HV_POWER_OFF) {
            err_set(err, HV_E_INVALID_STATE, "not off");
            return err->code;
        }
        if (v->refuses) {
            v->touched_ms = s->now_ms;
            v->start_failed_ms = s->now_ms;
            if (v->refuses > 0)
                v->refuses--;
            err_set(err, HV_E_RESOURCES, "refuses to start");
            return err->code;
        }
        power_on(s, k);
        v->power_on_rep = rep_of(b)->idx;
        break;
    }
    if (st->record && s->record_in_step && st->record_stored) {
        struct hv_oprecord before;
        bool had = record_before(v, &before);
        bool given_up = given_up_off(s, v, had);
        sim_set_record(s, v, st->record);
        note_record_written(s, v, given_up, &before);
        *st->record_stored = true;
        sim_note(s, "  record %s by r%d (with act %d): %s", v->name, rep_of(b)->idx, st->kind,
                 st->record);
        check_record_move(s, v, had, &before);
    }
    if (st->seen_after && s->record_in_step && v->exists) {
        fill_obs(s, k, st->seen_after, true);
        v->look_ms[rep_of(b)->idx] = s->now_ms;
    }
    sim_note(s, "  act %d on %s by r%d: accepted", st->kind, v->name, rep_of(b)->idx);
    changed(s, k);
    if (scripted == 'l' || (s->timeout_permille && sim_chance(s, s->timeout_permille))) {
        /* taken, but the call's answer is lost */
        v->touched_ms = s->now_ms;
        if (st->kind > 0 && st->kind < SIM_STEP_KINDS)
            v->lost_ms[st->kind] = s->now_ms;
        if (st->seen_after)
            st->seen_after->found = false;
        err_set(err, HV_E_TIMEOUT, "taken, answer lost");
        return HV_E_TIMEOUT;
    }
    return HV_OK;
}

/* Invariant 3 at every step the engine asks of the hypervisor: deadlineSeconds bounds the
 * whole operation, counted from its start as recorded on the VM (docs/settings.md): past it,
 * a VM that is off is started again and the operation fails. So no step of an operation that
 * is not failed moves the change on past its deadline: none but a power-on (bringing the VM
 * back) or a reconfigure back to the record's previous configuration (a rollback after a
 * start that failed). The operation is the one the step belongs to: the record stored with
 * it (record_in_step worlds), else the VM's own, which a step's pass writes before it. The
 * world's clock may run up to a second past the pass's (whole seconds). */
#define DEADLINE_SLACK_S 2
static void check_step_deadline(struct sim *s, int k, const struct hv_step *st)
{
    if (k < 0 || !s->vms[k].exists)
        return;
    struct sim_vm *v = &s->vms[k];
    struct hv_oprecord with;
    const struct hv_oprecord *r = sim_record(v);
    if (st->record && s->record_in_step && hv_oprecord_read(&with, st->record))
        r = &with;
    int deadline = 0;
    if (!r || r->phase == HV_PH_FAILED || r->phase == HV_PH_DONE ||
        sscanf(r->policy, "%*[^/]/%*[^/]/%*d/%*d/%d", &deadline) != 1)
        return;
    int64_t age = s->unix0 + s->now_ms / 1000 - r->started_at;
    s->r.checks++;
    if (age <= deadline + DEADLINE_SLACK_S || st->kind == HV_STEP_POWER_ON)
        return;
    bool restores = st->kind == HV_STEP_RECONFIGURE &&
                    (st->desired.memory_mib >= 0 || st->desired.cpus >= 0) &&
                    (st->desired.memory_mib < 0 || st->desired.memory_mib == r->prev.memory_mib) &&
                    (st->desired.cpus < 0 || st->desired.cpus == r->prev.cpus);
    if (!restores)
        sim_break(s, INV_ENDS,
                  "%s: step %d of an operation begun %lld s ago, past its deadlineSeconds %d "
                  "(record: %s, not failed)",
                  v->name, st->kind, (long long)age, deadline, hv_phase_name(r->phase));
}

static int b_act(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *st,
                 struct hv_err *err)
{
    struct sim *s = sim_of(b);
    check_step_deadline(s, sim_vm_by_name(s, ref->name), st);
    int k = sim_vm_by_name(s, ref->name);
    /* (the VM's step record: stored with no try by another process, as it is, or carried
     * over with its step by a write of this process, a takeover; and when that other process
     * wrote it) */
    const struct hv_oprecord *sr = k >= 0 ? sim_record(&s->vms[k]) : NULL;
    const struct sim_vm *sv = k >= 0 ? &s->vms[k] : NULL;
    bool sr_step = sr && (sr->phase == HV_PH_SHUTDOWN || sr->phase == HV_PH_POWER_OFF);
    bool mine = sv && sv->writer_rep == rep_of(b)->idx && sv->writer_gen == rep_of(b)->gen;
    bool carried = sr_step && mine && sv->co_gen && sv->co_rep == rep_of(b)->idx &&
                   sv->co_gen == rep_of(b)->gen && sv->co_step_at == sr->step_at;
    bool others_step = (sr_step && !sr->attempts && !mine) || carried;
    int64_t others_step_ms = carried ? sv->co_rec_ms : others_step ? sv->writer_ms : 0;
    int64_t others_step_at = carried ? sv->co_other_step_at : others_step ? sr->step_at : 0;
    int rc = act_do(b, ref, st, err);
    if (others_step && rc != HV_OK &&
        (st->kind == HV_STEP_SHUTDOWN || st->kind == HV_STEP_POWER_OFF)) {
        s->vms[k].rr_rep = rep_of(b)->idx;
        s->vms[k].rr_gen = rep_of(b)->gen;
        s->vms[k].rr_ms = s->now_ms;
        s->vms[k].rr_rec_ms = others_step_ms;
        s->vms[k].rr_step_at = others_step_at;
    }
    if (k >= 0)
        act_result(s, &s->vms[k], st->kind, rc == HV_OK,
                   st->record && s->record_in_step && st->record_stored && *st->record_stored);
    return rc;
}

static int b_write_record(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                          const char *record, struct hv_err *err)
{
    struct sim *s = sim_of(b);
    int k = sim_vm_by_name(s, ref->name);
    int rc = call_fault(s, k, err, SIM_CALL_WRITE);
    char scripted = rc == HV_OK && k >= 0 ? next_scripted(s->vms[k].writes_next) : '\0';
    if (scripted == 'f') {
        call_failed(s, k, SIM_CALL_WRITE);
        rc = HV_E_UNREACHABLE;
        err_set(err, HV_E_UNREACHABLE, "scripted call failure");
    }
    if (k >= 0 && s->vms[k].retry_write_due) { /* (the write after an accepted retry) */
        struct sim_vm *w = &s->vms[k];
        if (rc != HV_OK)
            w->act_fails[w->retry_write_due] = w->retry_fails_before;
        w->retry_write_due = 0;
    }
    if (rc != HV_OK)
        return rc;
    if ((k = find(s, ref)) < 0) {
        err_set(err, HV_E_NOT_FOUND, "gone");
        return HV_E_NOT_FOUND;
    }
    struct sim_vm *v = &s->vms[k];
    if (expected && strcmp(v->record, expected)) { /* compare-and-swap, as the backends */
        sim_note(s, "  record %s by r%d: lost race", v->name, rep_of(b)->idx);
        err_set(err, HV_E_BUSY, "the record changed since it was read");
        return HV_E_BUSY;
    }
    struct hv_oprecord before;
    bool had = record_before(v, &before);
    bool given_up = given_up_off(s, v, had);
    int was_rep, was_gen;
    if (had && v->cycling && v->power == HV_POWER_OFF &&
        sscanf(before.owner, "sim-r%d:%d", &was_rep, &was_gen) == 2 &&
        (was_rep != rep_of(b)->idx || was_gen != rep_of(b)->gen)) {
        v->off_taker = rep_of(b)->idx;
        v->off_taker_gen = rep_of(b)->gen;
        v->off_taken_ms = s->now_ms;
        v->off_taken_seq = ++s->world_seq;
    }
    int prev_writer_rep = v->writer_rep, prev_writer_gen = v->writer_gen;
    int64_t prev_writer_ms = v->writer_ms;
    sim_set_record(s, &s->vms[k], record);
    note_record_written(s, v, given_up, &before);
    v->writer_rep = rep_of(b)->idx;
    v->writer_gen = rep_of(b)->gen;
    v->writer_ms = s->now_ms;
    const struct hv_oprecord *cr = sim_record(v);
    bool cr_step = cr && (cr->phase == HV_PH_SHUTDOWN || cr->phase == HV_PH_POWER_OFF);
    if (cr_step && had && (before.phase == HV_PH_SHUTDOWN || before.phase == HV_PH_POWER_OFF) &&
        !before.attempts && before.started_at == cr->started_at &&
        hv_hw_equal(&before.desired, &cr->desired) &&
        !(prev_writer_rep == v->writer_rep && prev_writer_gen == v->writer_gen)) {
        v->co_rep = v->writer_rep;
        v->co_gen = v->writer_gen;
        v->co_step_at = cr->step_at;
        v->co_rec_ms = prev_writer_ms;
        v->co_other_step_at = before.step_at;
    } else if (!cr_step || cr->step_at != v->co_step_at) {
        v->co_gen = 0;
    }
    if (cr_step && had && (before.phase == HV_PH_SHUTDOWN || before.phase == HV_PH_POWER_OFF) &&
        !before.attempts && before.started_at != cr->started_at && cr->cold && !cr->down_at &&
        cr->step_at == before.step_at &&
        !(prev_writer_rep == v->writer_rep && prev_writer_gen == v->writer_gen)) {
        v->to_rep = v->writer_rep;
        v->to_gen = v->writer_gen;
        v->to_ms = s->now_ms;
        v->to_rec_ms = prev_writer_ms;
        v->to_step_at = cr->step_at;
    }
    /* (a Failure of a cold operation: its give-up starts' delays are counted from here) */
    const struct hv_oprecord *fr = sim_record(v);
    if (fr && fr->cold && fr->phase == HV_PH_FAILED &&
        (fr->started_at != v->late_op || fr->step_at != v->late_step_at)) {
        v->late_op = fr->started_at;
        v->late_step_at = fr->step_at;
        v->late_from_ms = s->now_ms;
        v->late_ms = 0;
        v->late_cost = false;
    }
    /* (the step record stays the VM's current one only until a write of another phase, but
     * for the deadline Failure a later life of that replica writes over it; review of 72b113a) */
    const struct hv_oprecord *nr = sim_record(v);
    if (nr && (nr->phase == HV_PH_SHUTDOWN || nr->phase == HV_PH_POWER_OFF) && !nr->attempts) {
        v->step_rec_rep = rep_of(b)->idx;
        v->step_rec_gen = rep_of(b)->gen;
        v->step_rec_ms = s->now_ms;
    } else if (!nr || nr->phase != HV_PH_FAILED || v->step_rec_rep != rep_of(b)->idx ||
               v->step_rec_gen >= rep_of(b)->gen || v->record_cleared_ms >= v->step_rec_ms) {
        v->step_rec_gen = 0;
    }
    v->wrote_cycle_seq[rep_of(b)->idx] = record_in_cycle(v) ? ++s->world_seq : 0;
    v->wrote_cycle_gen[rep_of(b)->idx] = rep_of(b)->gen;
    sim_note(s, "  record %s by r%d: %s", s->vms[k].name, rep_of(b)->idx, record);
    check_record_move(s, &s->vms[k], had, &before);
    sim_note_room(s);
    if (scripted == 'l') { /* the write landed, its answer lost (the call timed out) */
        call_failed(s, k, SIM_CALL_WRITE);
        sim_note(s, "  record %s by r%d: answer lost", s->vms[k].name, rep_of(b)->idx);
        err_set(err, HV_E_TIMEOUT, "scripted timeout, taken");
        return HV_E_TIMEOUT;
    }
    return HV_OK;
}

static void b_free(struct hv_backend *b)
{
    (void)b;
}

static void b_watch(struct hv_backend *b, hv_vm_changed_fn fn, void *ctx)
{
    struct sim_replica *r = rep_of(b);
    if (fn || r->watch_ctx == ctx) {
        r->watch_fn = fn;
        r->watch_ctx = fn ? ctx : NULL;
    }
}

/* Every VM with a record, host by host (a host down or stalled fails the scan for its VMs). */
static int b_list_records(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err)
{
    struct sim *s = sim_of(b);
    struct sim_replica *rep = b->priv;
    int rc = HV_OK;
    for (int h = 0; h < s->n_hosts; h++) {
        if (!s->hosts[h].down && !s->hosts[h].stalled) {
            if (!(rep->listed_hosts & (1u << h)))
                rep->listed_ms[h] = s->now_ms;
            rep->listed_hosts |= 1u << h;
            sim_note_room(s);
        }
        if (s->hosts[h].down || s->hosts[h].stalled) {
            if (s->hosts[h].stalled) {
                s->now_ms += 3000; /* the call waits for its timeout */
                s->stall_wait_ms += 3000;
                sim_world_tick(s); /* (the world goes on meanwhile) */
            }
            if (rc == HV_OK) {
                rc = s->hosts[h].down ? HV_E_UNREACHABLE : HV_E_TIMEOUT;
                err_set(err, (enum hv_errcode)rc, "host down or stalled");
            }
            struct hv_vm_found u;
            memset(&u, 0, sizeof(u));
            u.unlisted = true;
            snprintf(u.host, sizeof(u.host), "%s", s->hosts[h].name);
            fn(ctx, &u);
            continue;
        }
        for (int k = 0; k < s->n_vms; k++) {
            struct sim_vm *v = &s->vms[k];
            if (v->host != h || !v->exists || !v->record[0])
                continue;
            struct hv_vm_found f;
            memset(&f, 0, sizeof(f));
            snprintf(f.ref.name, sizeof(f.ref.name), "%s", v->name);
            snprintf(f.host, sizeof(f.host), "%s", s->hosts[h].name);
            f.power = v->power;
            snprintf(f.record, sizeof(f.record), "%s", v->record);
            fn(ctx, &f);
        }
    }
    sim_note_room(s);
    return rc;
}

static const struct hv_backend_ops ops_guest = {
    .name = "libvirt",
    .serves = b_serves,
    .observe = b_observe,
    .plan = b_plan,
    .act = b_act,
    .write_record = b_write_record,
    .free = b_free,
    .check = b_check,
    .record_in_step = false,
    .watch = b_watch,
    .observe_guest = b_observe_guest,
    .list_records = b_list_records,
};

/* vSphere-like: the record rides with the last live step, the guest is read in observe. */
static const struct hv_backend_ops ops_carry = {
    .name = "libvirt",
    .serves = b_serves,
    .observe = b_observe,
    .plan = b_plan,
    .act = b_act,
    .write_record = b_write_record,
    .free = b_free,
    .check = b_check,
    .record_in_step = true,
    .watch = b_watch,
    .observe_guest = NULL,
    .list_records = b_list_records,
};

void sim_backend_init(struct sim *s, struct sim_replica *r)
{
    r->be.ops = s->record_in_step ? &ops_carry : &ops_guest;
    r->be.priv = r;
    r->sim = s;
}

void sim_deliver_events(struct sim *s)
{
    int n = s->n_events;
    s->n_events = 0;
    for (int k = 0; k < n; k++) {
        s->vms[s->events[k]].reported_ms = s->now_ms;
        for (int r = 0; r < s->n_reps; r++)
            if (s->reps[r].watch_fn && s->reps[r].e)
                s->reps[r].watch_fn(s->reps[r].watch_ctx, &s->reps[r].be, "", "",
                                    s->vms[s->events[k]].name);
    }
}

/* ---- time and faults ---------------------------------------------------------------------- */

static bool record_in_cycle(struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    return r && r->cold && r->phase >= HV_PH_SHUTDOWN && r->phase <= HV_PH_POWER_ON;
}

void sim_world_tick(struct sim *s)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        if (!v->exists)
            continue;
        if (v->off_at && v->off_at <= s->now_ms && v->power == HV_POWER_ON) {
            sim_note(s, "%s: guest shut down", v->name);
            power_off(s, k);
            changed(s, k);
            continue;
        }
        if (v->halt_at && v->halt_at <= s->now_ms && v->power == HV_POWER_ON) {
            v->halt_at = 0;
            v->touched_ms = v->halt_seen_ms = v->delay_ms = s->now_ms;
            if (v->halt_pauses) {
                v->power = HV_POWER_PAUSED;
                v->operator_power = true;
                v->paused_on_ms = s->now_ms;
                sim_note(s, "%s: paused right after power-on", v->name);
            } else {
                sim_note(s, "%s: halted right after power-on", v->name);
                v->halted = true; /* the guest crashed: off is its own doing from here */
                power_off(s, k);
            }
            changed(s, k);
            continue;
        }
        if (v->online_at && v->online_at <= s->now_ms) {
            v->online_at = 0;
            if (v->onlines && v->online_block > 0 &&
                v->live.memory_mib - v->guest_mem > v->online_block) {
                v->guest_mem += v->online_block; /* one block; the next one later */
                v->online_at = s->now_ms + v->online_pace_ms;
            } else if (v->onlines) {
                v->guest_mem = v->live.memory_mib;
            }
            v->guest_cpus = v->live.cpus;
            changed(s, k);
        }
        if (v->boot_at && v->boot_at <= s->now_ms) {
            v->boot_at = 0;
            v->booted_ms = s->now_ms;
            changed(s, k);
        }
        /* a cycle is over when the VM runs and its record shows none in flight */
        if (v->cycling && v->power == HV_POWER_ON && !v->off_at && !record_in_cycle(v))
            v->cycling = false;
    }
}

void sim_world_fault(struct sim *s)
{
    int k = sim_range(s, 0, s->n_vms - 1);
    int kind = sim_range(s, 0, 21);
    sim_world_fault_on(s, k, kind);
}

void sim_world_fault_on(struct sim *s, int k, int kind)
{
    struct sim_vm *v = &s->vms[k];
    struct sim_host *h = &s->hosts[v->host];
    s->r.faults++;
    if (kind <= 2) { /* hosts */
        bool was_out = h->down || h->stalled;
        if (kind == 0)
            h->down = true;
        else if (kind == 1)
            h->stalled = true;
        else
            h->down = h->stalled = false;
        if (kind <= 1 && !was_out) { /* (a stall that turns into a death: one outage) */
            if (h->n_out == SIM_HOST_OUTAGES) {
                memmove(h->out_ms, h->out_ms + 1, sizeof(h->out_ms) - sizeof(h->out_ms[0]));
                memmove(h->back_ms, h->back_ms + 1, sizeof(h->back_ms) - sizeof(h->back_ms[0]));
                h->n_out--;
            }
            h->out_ms[h->n_out] = s->now_ms;
            h->back_ms[h->n_out++] = 0;
        } else if (kind == 2 && was_out && h->n_out) {
            h->back_ms[h->n_out - 1] = s->now_ms;
        }
        for (int j = 0; j < s->n_vms; j++) {
            if (s->vms[j].host != v->host)
                continue;
            s->vms[j].touched_ms = s->vms[j].host_fault_ms = s->now_ms;
            if (kind <= 1)
                s->vms[j].host_down_ms = s->vms[j].delay_ms = s->now_ms;
            else /* (back: the engine can see a clear made while the host was out) */
                s->vms[j].cleared_out_cycle = false;
        }
        sim_note(s, "fault: %s %s", h->name, kind == 0 ? "dies" : kind == 1 ? "stalls" : "is back");
        return;
    }
    if (!v->exists)
        return;
    v->touched_ms = s->now_ms;
    switch (kind) {
    case 3:
    case 4:
        if (v->power == HV_POWER_ON) {
            v->power = HV_POWER_PAUSED;
            v->operator_power = true;
            v->paused_ms = v->delay_ms = s->now_ms;
            changed(s, k);
            sim_note(s, "fault: %s %s", v->name, kind == 3 ? "pauses" : "is suspended");
        }
        return;
    case 5:
        if (v->power == HV_POWER_PAUSED) {
            v->power = HV_POWER_ON;
            /* a guest shutting down when it was paused goes on with it: it still needs the
             * running time it had left (issue 27's seed 15744: the window of "a sent step
             * may still land" is running time, not wall time), from this pause: the
             * operator's or a fault's (paused_ms) or the one right after a power-on
             * (paused_on_ms), whichever came last. Held-out seed 5758372: vm0's guest, heeding
             * ACPI, was asked to shut down at 824.3 s (off at 837.3 s), paused right after its
             * power-on at 825.5 s and resumed at 834.4 s; timed from an older pause (335.1 s),
             * its shutdown came 499 s late, past its Soft window */
            int64_t since = v->paused_ms > v->paused_on_ms ? v->paused_ms : v->paused_on_ms;
            if (v->off_at && since && v->off_at > since)
                v->off_at += s->now_ms - since;
            v->resumed_ms = s->now_ms;
            changed(s, k);
            sim_note(s, "operator: %s resumed", v->name);
        }
        return;
    case 6:
        if (sim_chance(s, 500)) {
            /* the new configuration does not boot, the one it has now does: every power-on
             * with another configuration halts right after (a rollback's start stays on) */
            v->halts_new = true;
            v->good = v->config;
            sim_note(s,
                     "fault: %s halts after every power-on with a configuration other than "
                     "%lld MiB %d vCPUs",
                     v->name, (long long)v->config.memory_mib, v->config.cpus);
            return;
        }
        v->halts = sim_chance(s, 100) ? -1 : 1;
        v->halted_for_good |= v->halts < 0;
        sim_note(s, "fault: %s halts after its next power-on%s", v->name, v->halts < 0 ? "s" : "");
        return;
    case 7:
        v->pauses = 1;
        sim_note(s, "fault: %s pauses after its next power-on", v->name);
        return;
    case 8:
        v->refuses = sim_chance(s, 100) ? -1 : sim_range(s, 1, 3);
        v->halted_for_good |= v->refuses < 0;
        sim_note(s, "fault: %s refuses %d power-ons", v->name, v->refuses);
        return;
    case 9:
        v->restore_fails = true;
        sim_note(s, "fault: %s cannot be restored", v->name);
        return;
    case 10:
        v->onlines = false;
        sim_note(s, "fault: %s's guest does not online plugged memory", v->name);
        return;
    case 11:
        /* a boot-time reservation (crashkernel=, say): it takes effect at the guest's next
         * boot, never in a running guest, and only where it fits (boot_reserve) */
        v->reserve_next = v->config.memory_mib / 4;
        sim_note(s, "fault: %s's guest reserves %lld MiB from its next boot", v->name,
                 (long long)v->reserve_next);
        return;
    case 12: {
        if (v->stats == 1) { /* stopped already: its last report stays as it was */
            sim_note(s, "fault: %s's statistics still stale", v->name);
            return;
        }
        v->stats_bad_ms = s->now_ms;
        /* the guest's last report: a paused guest's is the one it made before the pause (a
         * hypervisor keeps the balloon's last statistics; seed 10810: taken as "no view" of
         * a paused VM, a running one showed none for good, as if without the device) */
        struct sim_vm ran = *v;
        if (ran.power == HV_POWER_PAUSED)
            ran.power = HV_POWER_ON;
        struct hv_vm_obs o;
        fill_guest(s, &ran, &o);
        v->stale = o.guest;
        /* the last report stays as it was, stamped when it was made (libvirt's last-update):
         * not newer than any step taken from now on */
        if (v->stale.mem_view == HV_GV_SEEN)
            v->stale.mem_at = s->unix0 + s->now_ms / 1000;
        if (v->stats == 0)
            v->fresh_until_ms = s->now_ms;
        v->stats = 1;
        v->stats_changed_ms = s->now_ms;
        v->stats_stopped_seq = ++s->world_seq;
        sim_note(s, "fault: %s's statistics stale", v->name);
        return;
    }
    case 13:
        v->stats_bad_ms = s->now_ms;
        if (v->stats == 0)
            v->fresh_until_ms = s->now_ms;
        v->stats = 2;
        v->stats_changed_ms = s->now_ms;
        v->stats_stopped_seq = ++s->world_seq;
        sim_note(s, "fault: %s's statistics absent", v->name);
        return;
    case 14:
        v->stats = 0;
        v->stats_changed_ms = s->now_ms;
        sim_note(s, "fault: %s's statistics fresh again", v->name);
        return;
    case 15:
        v->ignores_acpi = !v->ignores_acpi || v->no_acpi;
        sim_note(s, "fault: %s's guest %s ACPI", v->name, v->ignores_acpi ? "ignores" : "heeds");
        return;
    case 16:
        v->disk_grows = false;
        sim_note(s, "fault: %s's disk cannot grow", v->name);
        return;
    case 17:
        v->config.memory_mib += 512 * sim_range(s, -1, 2);
        if (v->config.memory_mib < 512)
            v->config.memory_mib = 512;
        if (v->power == HV_POWER_OFF)
            v->live = v->config;
        v->operator_config = true;
        v->op_change_ms = s->now_ms;
        operator_moved_from(s, k);
        changed(s, k);
        sim_note(s, "operator: %s configured to %lld MiB", v->name,
                 (long long)v->config.memory_mib);
        return;
    case 18:
        v->operator_power = true;
        v->op_change_ms = s->now_ms;
        if (v->power == HV_POWER_ON) {
            bool spent = v->cycling && press_spent(s, v);
            power_off(s, k);
            v->op_off_ms = s->now_ms;
            v->op_off_spent_ms = spent ? s->now_ms : 0;
            sim_note(s, "operator: %s powered off", v->name);
        } else if (v->power == HV_POWER_OFF) {
            v->press_undone |= v->cycling; /* off by the engine's shutdown or power-off */
            if (v->cycling) {
                v->undone_on_ms = s->now_ms;
                for (int r = 0; r < s->n_reps; r++)
                    v->undone_seen_gen[r] =
                        v->look_ms[r] >= v->went_off_ms && v->look_ms[r] >= s->restart_ms[r]
                            ? s->reps[r].gen
                            : 0;
            }
            power_on(s, k);
            v->power_on_rep = -1; /* (no replica's) */
            v->op_on_ms = s->now_ms;
            v->foreign_boot_ms = v->boot_at;
            sim_note(s, "operator: %s powered on", v->name);
        }
        operator_moved_from(s, k);
        changed(s, k);
        return;
    case 19: {
        const struct hv_oprecord *cr = sim_record(v);
        v->cleared_out_cycle = cr && cr->cold && (h->down || h->stalled) &&
                               ((cr->phase >= HV_PH_SHUTDOWN && cr->phase <= HV_PH_POWER_ON) ||
                                (cr->phase == HV_PH_FAILED && cr->down_at));
        sim_set_record(s, v, "");
        v->record_cleared_ms = s->now_ms;
        plugs_lost(s, v); /* the clear takes the base along */
        /* (step_rec stays: an entry parked upon that step outlives the clear, which no change
         * report tells the engine, as `took`'s does, seed 12010; held-out seed 5568265: r0:1's
         * power-off never reached the hypervisor, the VM paused, r0:2 failed the cycle upon it
         * and parked it, the operator cleared the record; the next write resets it) */
        /* a guest still booting from the engine's power-on: the record that told the engine
         * it started the VM (its power-on or done with starts, judge.c judge_boot) is gone, so
         * to the engine this boot is as foreign as the operator's power-on (seed 218326: a
         * live change begun at once, its base with no view of the booting guest) */
        if (v->power == HV_POWER_ON && v->boot_at && !v->foreign_boot_ms)
            v->foreign_boot_ms = v->boot_at;
        v->cleared_boot_ms = v->power == HV_POWER_ON ? v->boot_at : 0;
        if (v->cycling)
            v->cleared_cycle_ms = s->now_ms;
        v->operator_power |= v->cycling; /* mid-cycle: no one can tell it was a cycle now */
        v->cycling = false;              /* ... so it counts as none against the cap either */
        sim_note(s, "operator: %s's record cleared", v->name);
        return;
    }
    case 20:
        v->busy_until = s->now_ms + 1000 * sim_range(s, 1, 20);
        v->delay_ms = s->now_ms;
        sim_note(s, "fault: %s busy with another task", v->name);
        return;
    default:
        s->fail_permille = s->fail_permille ? 0 : sim_range(s, 10, 100);
        sim_note(s, "fault: call failures at %d permille", s->fail_permille);
        return;
    }
}
