/* judge.c: the one begin judgement (issue 27 step 2, see judge.h) and the rules it is made
 * of: the base an operation verifies the guest against, what the guest cannot show under
 * guestVerification Required, and when a running VM may not be power-cycled. Pure: no
 * hypervisor, no clock, no engine state. */
#include "judge.h"
#include "msg.h"

#include <stdio.h>
#include <string.h>

static const char *const fnames[HV_F_COUNT] = {"memory", "vCPUs", "cores per socket", "disk"};

static bool untouched(const char *plan);

/* The one rule for which fields the guest must show: a field the operation asks for that
 * ends elsewhere than its base, or that it steps even when it ends where the base began (A's
 * live vCPU added, then B takes it away by a power cycle): the guest shows it by being back
 * at its base. The done check (hv_guest_fields) and guestVerification Required's refusal
 * (hv_guest_cannot_show) both use it, so CanUpdateMachine never covers under Required a field
 * whose report the done would then wait for in vain (held-out seeds 1663917, 1858945). The
 * probe plans a change from the hardware an operation in flight leaves, so this also refuses
 * a field that operation's cycle under way would make a hot-plug no agent can show (held-out
 * seed 5219462, once a clause of its own). */
static bool guest_checks(int64_t want, int64_t base, bool stepped)
{
    return want >= 0 && (want != base || stepped);
}

void hv_guest_fields(const struct hv_oprecord *r, const struct hv_hw *want, bool *mem, bool *cpus)
{
    int64_t m = r->has_base ? r->base.hv_memory_mib : r->prev.memory_mib;
    int32_t c = r->has_base ? r->base.hv_cpus : r->prev.cpus;
    *mem = guest_checks(want->memory_mib, m, !untouched(r->plan[HV_F_MEMORY]));
    *cpus = guest_checks(want->cpus, c, !untouched(r->plan[HV_F_CPUS]));
}

bool hv_guest_mem_current(const struct hv_guest_obs *g, int64_t now)
{
    /* (a report stamped in the future: a clock ahead of ours, as good as now) */
    return g->mem_view == HV_GV_SEEN && (g->mem_at <= 0 || now - g->mem_at <= GUEST_REPORT_S);
}

/* A recorded field plan that changes nothing. */
static bool untouched(const char *plan)
{
    return !plan[0] || !strcmp(plan, "none");
}

bool hv_begin_base(const struct hv_oprecord *old, const struct hv_settings *s, int64_t now,
                   const struct hv_guest_base *fresh, struct hv_guest_base *out)
{
    struct hv_guest_base b = *fresh;
    /* an operation for other hardware still in flight (e.g. a rollout that changed A -> B
     * while A's hot-plug waits for the guest), or whose live step failed: the VM as it was
     * before A is what B changes; not once A's cycle has started the VM again (reconfigure,
     * power-on): its guest booted afresh, with all its memory as boot memory. (A Failure
     * refused before any step has a base only when it inherited one: pass_paths.c refuse.) */
    bool inherited = old && old->has_base &&
                     ((old->phase >= HV_PH_PLANNED && old->phase <= HV_PH_POWER_OFF) ||
                      (old->phase == HV_PH_FAILED && !old->cold)) &&
                     now - old->started_at <= s->deadline_s;
    if (inherited) {
        /* Where A's base has no guest view of a field (it began with the VM off, under
         * guestVerification Off, or before the guest reported), the view taken now serves,
         * with the hypervisor's value now, unless a live step of A may still be on its way
         * into the guest: only when A took none of that field yet (planned or shutting down)
         * or A does not change that field at all (its plan for it is none, e.g. A's live disk
         * step: nothing of A is on its way into the guest's memory or vCPUs). */
        bool unstepped = old->phase == HV_PH_PLANNED || old->phase == HV_PH_SHUTDOWN ||
                         old->phase == HV_PH_POWER_OFF;
        /* ... or, before A's cycle, the hypervisor shows the field as A's base had it: no
         * live step of A for it landed (a cold A planned from its begin takes none, whatever
         * its plan says the field could be; one that stepped live and timed out shows the
         * step), so nothing of A is on its way into the guest (seed 915749: A, cold under
         * Off, planned with memory live:dimm, no step taken; B under IfAvailable kept A's
         * blind base and answered "not verified" with the guest able to tell); the same
         * after A's live step failed (a live Failure is never rolled back): a field the
         * hypervisor still shows as A's base had it took no step of A (held-out seeds
         * 2387411, 2438098: A's DIMM refused three times) */
        bool as_base = unstepped || old->phase == HV_PH_FAILED;
        bool now_mem = (unstepped && strncmp(old->plan[HV_F_MEMORY], "live:", 5)) ||
                       (as_base && fresh->hv_memory_mib == old->base.hv_memory_mib) ||
                       untouched(old->plan[HV_F_MEMORY]);
        bool now_cpus = (unstepped && strncmp(old->plan[HV_F_CPUS], "live:", 5)) ||
                        (as_base && fresh->hv_cpus == old->base.hv_cpus) ||
                        untouched(old->plan[HV_F_CPUS]);
        b = old->base;
        if (b.guest_memory_mib < 0 && fresh->guest_memory_mib >= 0 && now_mem) {
            b.hv_memory_mib = fresh->hv_memory_mib;
            b.guest_memory_mib = fresh->guest_memory_mib;
        }
        if (b.guest_cpus < 0 && fresh->guest_cpus >= 0 && now_cpus) {
            b.hv_cpus = fresh->hv_cpus;
            b.guest_cpus = fresh->guest_cpus;
        }
    }
    *out = b;
    return inherited;
}

/* What the Required refusal lists for field f: the field and why the guest cannot show it. */
static const char *unshown(enum hv_field f)
{
    switch (f) {
    case HV_F_MEMORY:
        return HV_MSG("memory (no memory statistics from the guest, or the VM is off)");
    case HV_F_CPUS:
        return HV_MSG("vCPUs (no guest agent, or the VM is off)");
    case HV_F_CORES:
        return HV_MSG("cores per socket");
    default:
        return HV_MSG("the disk size");
    }
}

#define REQUIRED_UNSHOWN HV_MSG("guestVerification is Required but the guest cannot show %s")

bool hv_guest_cannot_show(enum hv_field f, bool on, bool no_report,
                          const struct hv_guest_base *base, const struct hv_hw *desired,
                          enum hv_how plan, const struct hv_settings *s, char *m, size_t cap)
{
    bool blind;
    if (s->guest_check != HV_GC_REQUIRED)
        return false;
    /* A VM whose definition gives the guest no way to report the field (no_report) shows no
     * change of it, running or not: a base with a guest view (inherited from an operation in
     * flight, from before the device went) does not make a report after the step (seed
     * 13144: CanUpdateMachine covered B on A's base, A ended first, B's begin on a fresh base
     * refused it; B on A's base would have waited for a report that never comes). */
    bool stepped = plan != HV_HOW_NONE;
    if (f == HV_F_MEMORY)
        blind = guest_checks(desired->memory_mib, base->hv_memory_mib, stepped) &&
                (no_report || (on && base->guest_memory_mib < 0));
    else if (f == HV_F_CPUS)
        blind = guest_checks(desired->cpus, base->hv_cpus, stepped) &&
                (no_report || (on && base->guest_cpus < 0));
    else
        blind = plan != HV_HOW_NONE;
    if (blind)
        snprintf(m, cap, REQUIRED_UNSHOWN, unshown(f));
    return blind;
}

bool hv_cycle_refused(const char *no_power_cycle, bool can_shutdown, const struct hv_settings *s,
                      char *m, size_t cap, enum hv_failure_reason *why)
{
    if (no_power_cycle[0]) { /* e.g. a transient domain: off would be gone */
        snprintf(m, cap, HV_MSG("cannot power-cycle the VM: %s"), no_power_cycle);
        if (why)
            *why = HV_FAIL_OTHER;
        return true;
    }
    if (!can_shutdown && s->power_off_mode == HV_POM_SOFT) {
        if (why)
            *why = HV_FAIL_NO_GUEST_TOOLS;
        snprintf(m, cap, "%s",
                 HV_MSG("the guest cannot be asked to shut down (no guest tools running) and "
                        "powerOffMode is Soft"));
        return true;
    }
    return false;
}

bool hv_never_refused(const struct hv_settings *s, int field, const char *reason, char *m,
                      size_t cap)
{
    if (s->power_cycle != HV_PC_NEVER)
        return false;
    snprintf(m, cap, HV_MSG("%s needs a power cycle (%s) and powerCycle is Never"),
             field >= 0 && field < HV_F_COUNT ? fnames[field] : HV_MSG("the change"),
             reason && reason[0] ? reason : HV_MSG("not possible live"));
    return true;
}

/* The base: the look's (the guest's views of a running VM only), or an operation in flight's
 * (hv_begin_base); an operation of other hardware whose record the look did not find yet
 * stores one first, which the judged operation inherits: without a guest view of a field it
 * changes when it began without one (the VM off, guestVerification Off, the guest not
 * reported yet) and may step live. Its base cannot be read: none is taken for those fields,
 * as begin may (seed 4654: A under Off planned a cycle, CanUpdateMachine for B under Required
 * covered the vCPUs by the guest's view, then B's begin, on A's base, refused them). */
static void judge_base(const struct hv_begin_in *in, struct hv_guest_base *base, bool *inherited)
{
    const struct hv_begin_facts *f = in->facts;
    struct hv_guest_base fresh = {
        .hv_memory_mib = f->hw.memory_mib,
        .hv_cpus = f->hw.cpus,
        .guest_memory_mib = f->on && f->guest_mem_current ? f->guest.memory_mib : -1,
        .guest_cpus = f->on && f->guest.cpu_view == HV_GV_SEEN ? f->guest.cpus : -1};
    *inherited = hv_begin_base(in->old, in->s, in->now, &fresh, base);
    const struct hv_begin_other *o = in->other;
    if (o && o->unseen) {
        if (o->hw.memory_mib >= 0 && o->hw.memory_mib != f->hw.memory_mib)
            base->guest_memory_mib = -1;
        if (o->hw.cpus >= 0 && o->hw.cpus != f->hw.cpus)
            base->guest_cpus = -1;
    }
}

/* The engine's power-on that an operation begun over old now carries on (its bootAt; 0: none).
 * A guest started by an operation (its power-on, or done since) boots for liveTimeoutSeconds
 * from that start. A live operation that found the VM off (the operator powered it off) and
 * started it (starts) is not cold, yet its guest boots as well. */
int64_t hv_boot_passed_on(const struct hv_oprecord *old, const struct hv_settings *s, int64_t now,
                          int step_timeout_s)
{
    if (!old)
        return 0;
    bool powered = old->cold || old->starts > 0;
    bool started = powered && old->phase == HV_PH_POWER_ON;
    bool booting = (started || (powered && old->phase == HV_PH_DONE)) && /* done since */
                   now - old->step_at < s->live_timeout_s;
    /* A cold Failure's VM on again was started by that operation (its rollback, as it was)
     * or after it by the engine's own passes, for step_timeout_s (restart_failed_off): its
     * guest boots as after a power-on step. Seed 218383: A failed with the VM off, the
     * rollout changed A -> B, B's pass started the VM as A's Failure, and B's begin found
     * the guest booting and refused it under Required (for that call, not waited for). */
    booting |= old->phase == HV_PH_FAILED && old->cold && old->starts > 0 &&
               now - old->step_at < (int64_t)step_timeout_s + s->live_timeout_s;
    if (booting)
        return old->step_at;
    /* An operation begun over such a record while its guest booted (it needed no view the
     * guest had not shown yet, e.g. a vCPU hot-plug without the agent) carries that power-on
     * on (bootAt), and so does each one begun over it within liveTimeoutSeconds of it: else
     * the next one, for memory, took a blind base from the guest still booting and answered
     * "not verified in the guest" once that guest could tell (held-out seeds 1741850,
     * 1742502). */
    return old->boot_at && now - old->boot_at < s->live_timeout_s ? old->boot_at : 0;
}

/* A guest still booting from the engine's power-on (hv_boot_passed_on) that has not reported
 * since is asked again until it does, before the new operation takes its first step: else its
 * baseline would be missing and the change could not be verified. silent: the operation's own
 * power-on longer ago than liveTimeoutSeconds, the guest silent since. */
static void judge_boot(const struct hv_begin_in *in, struct hv_begin_judgement *j, bool *silent)
{
    const struct hv_oprecord *old = in->old;
    bool started = old && (old->cold || old->starts > 0) && old->phase == HV_PH_POWER_ON;
    int64_t boot = hv_boot_passed_on(old, in->s, in->now, in->step_timeout_s);
    bool booting = boot != 0;
    j->boot_at = in->facts->on ? boot : 0;
    struct hv_oprecord r = {.has_base = true, .base = j->base};
    bool mem, cpus;
    hv_guest_fields(&r, in->desired, &mem, &cpus);
    const struct hv_guest_obs *g = &in->facts->guest;
    j->wait_boot =
        booting && in->facts->on && in->s->guest_check != HV_GC_OFF &&
        ((mem && g->mem_view == HV_GV_PENDING) || (cpus && g->cpu_view == HV_GV_PENDING));
    *silent = started && !booting;
}

/* This hardware's own operation past its power-off (reconfigure, power-on), which
 * hv_begin_base does not inherit from (the VM runs the new configuration, or is about to): it
 * is not begun again but carried on, and its done verifies the fields it changed against its
 * record's base (hv_guest_fields), whatever the look shows now. A field the guest has no way
 * to report is refused as at that operation's begin (held-out seed 5382197: B's cycle, begun
 * under IfAvailable, was left in power-on by A -> B -> A; B covered again under Required on
 * the look, nothing to change, and the pass carried B on and failed it "did not report its
 * vCPUs"). A guest still booting with a way to report is waited for by the pass: not refused
 * (off: the guest's view does not count). */
static const struct hv_oprecord *own_cycle_on(const struct hv_begin_in *in)
{
    const struct hv_oprecord *r = in->old;
    bool on = r && r->has_base && (r->phase == HV_PH_RECONFIGURE || r->phase == HV_PH_POWER_ON) &&
              hv_hw_equal(&r->desired, in->desired);
    return on ? r : NULL;
}

static bool own_cycle_cannot_show(const struct hv_oprecord *r, enum hv_field f, bool no_report,
                                  const struct hv_begin_in *in, char *m, size_t cap)
{
    if (!r || (f != HV_F_MEMORY && f != HV_F_CPUS))
        return false;
    enum hv_how how = untouched(r->plan[f]) ? HV_HOW_NONE : HV_HOW_COLD;
    return hv_guest_cannot_show(f, false, no_report, &r->base, in->desired, how, in->s, m, cap);
}

/* guestVerification Required: a change of a field the guest cannot show is refused before
 * any step (waiting or a power cycle would not make the guest report it), every such field
 * named in one message. Sticky, except when the guest may still report by itself (it has the
 * device or agent channel but has not reported since it started, or its statistics stopped
 * and may come back); silent: an operation started it long ago and it has not reported since:
 * sticky. With an operation for other hardware that starts the off VM first, the judged one
 * changes a running VM from that hardware whose freshly booted guest has shown nothing. */
static void judge_unshown(const struct hv_begin_in *in, struct hv_begin_judgement *j, bool silent)
{
    const struct hv_begin_facts *f = in->facts;
    const struct hv_begin_other *o = in->other;
    struct hv_guest_base started = {.hv_memory_mib = o && o->hw.memory_mib >= 0 ? o->hw.memory_mib
                                                                                : f->hw.memory_mib,
                                    .hv_cpus = o && o->hw.cpus >= 0 ? o->hw.cpus : f->hw.cpus,
                                    .guest_memory_mib = -1,
                                    .guest_cpus = -1};
    /* statistics of a running guest that stopped report nothing after the step either, until
     * they come back: with a base of its own (fresh: none) or inherited from an operation in
     * flight (its view from before they stopped; seed 987) */
    bool mem_stopped = f->on && f->guest.mem_view == HV_GV_SEEN && !f->guest_mem_current;
    /* ... and so does a running guest whose balloon gives no statistics now, for a field this
     * operation steps (its look asked the guest then: no way to ask, though the device is
     * there): an inherited base's view from before is no report after the step (sim seed
     * 5536292) */
    mem_stopped |= f->on && f->guest.mem_view == HV_GV_NONE &&
                   f->plan[HV_F_MEMORY].how != HV_HOW_NONE &&
                   f->plan[HV_F_MEMORY].how != HV_HOW_IMPOSSIBLE;
    bool no_report[HV_F_COUNT] = {
        [HV_F_MEMORY] = f->no_mem_report || mem_stopped, [HV_F_CPUS] = f->no_cpu_report};
    const char *why[HV_F_COUNT];
    int n = 0;
    bool sticky = silent;
    const struct hv_oprecord *cyc = own_cycle_on(in);
    for (int k = 0; k < HV_F_COUNT; k++) {
        char m[HV_MSG_MAX];
        enum hv_field fld = (enum hv_field)k;
        if (j->plan[k].how == HV_HOW_IMPOSSIBLE ||
            !(hv_guest_cannot_show(fld, f->on, no_report[k], &j->base, in->desired, j->plan[k].how,
                                   in->s, m, sizeof(m)) ||
              (o && o->starts &&
               hv_guest_cannot_show(fld, true, no_report[k], &started, in->desired, j->plan[k].how,
                                    in->s, m, sizeof(m))) ||
              own_cycle_cannot_show(cyc, fld, no_report[k], in, m, sizeof(m))))
            continue;
        why[n++] = unshown(fld);
        j->plan[k].how = HV_HOW_IMPOSSIBLE;
        snprintf(j->plan[k].reason, sizeof(j->plan[k].reason), "%s", m);
        if (fld == HV_F_MEMORY) { /* its statistics stopped: they may come back */
            bool stopped = f->guest.mem_view == HV_GV_SEEN && !f->guest_mem_current;
            sticky |= !f->on || (f->guest.mem_view != HV_GV_PENDING && !stopped);
        } else if (fld == HV_F_CPUS) {
            sticky |= !f->on || f->guest.cpu_view != HV_GV_PENDING;
        } else {
            sticky = true;
        }
    }
    if (!n)
        return;
    char list[300] = "";
    for (int k = 0; k < n; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                 k == 0       ? ""
                 : k == n - 1 ? " and "
                              : ", ",
                 why[k]);
    j->unshown = true;
    j->unshown_sticky = sticky;
    snprintf(j->unshown_msg, sizeof(j->unshown_msg), REQUIRED_UNSHOWN, list);
}

/* A power cycle of a running VM: refused under powerCycle Never (naming the first field that
 * needs it), or when this VM may not take one (hv_cycle_refused: every field that needs it
 * made impossible with that reason). */
static void judge_cycle(const struct hv_begin_in *in, struct hv_begin_judgement *j)
{
    const struct hv_begin_facts *f = in->facts;
    bool any_cold = j->cold_field >= 0;
    if (!any_cold || !f->on)
        return;
    if (hv_never_refused(in->s, j->cold_field, f->plan[j->cold_field].reason, j->never_msg,
                         sizeof(j->never_msg))) {
        j->never = true;
        return;
    }
    if (!hv_cycle_refused(f->no_power_cycle, f->can_shutdown, in->s, j->cycle_msg,
                          sizeof(j->cycle_msg), &j->cycle_code))
        return;
    j->cycle_refused = true;
    for (int k = 0; k < HV_F_COUNT; k++) {
        if (j->plan[k].how != HV_HOW_COLD)
            continue;
        j->plan[k].how = HV_HOW_IMPOSSIBLE;
        snprintf(j->plan[k].reason, sizeof(j->plan[k].reason), "%s", j->cycle_msg);
    }
}

void hv_begin_judge(const struct hv_begin_in *in, struct hv_begin_judgement *j)
{
    const struct hv_begin_facts *f = in->facts;
    memset(j, 0, sizeof(*j));
    memcpy(j->plan, f->plan, sizeof(j->plan));
    j->impossible = j->cold_field = -1;
    for (int k = 0; k < HV_F_COUNT; k++) {
        if (f->plan[k].how == HV_HOW_COLD && j->cold_field < 0)
            j->cold_field = k;
        if (f->plan[k].how == HV_HOW_IMPOSSIBLE && j->impossible < 0)
            j->impossible = k;
    }
    j->cold = j->cold_field >= 0 || !f->on;
    judge_base(in, &j->base, &j->base_inherited);
    bool silent;
    judge_boot(in, j, &silent);
    judge_unshown(in, j, silent);
    judge_cycle(in, j);
}

void hv_begin_impossible_msg(const struct hv_begin_judgement *j, char *m, size_t cap)
{
    int f = j->impossible;
    snprintf(m, cap, HV_MSG("cannot change %s: %s"), f >= 0 ? fnames[f] : "",
             f >= 0 ? j->plan[f].reason : "");
}
