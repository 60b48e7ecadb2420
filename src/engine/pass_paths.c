/* pass_paths.c: the acts of a reconcile pass once it is decided: begin an operation (on the
 * one begin judgement, judge.h), and carry one on: the VM off (reconfigure, power on), cold
 * and running (a power-cycle slot, shutdown, power-off), or live (the live steps, the wait
 * for them to show); neither on nor off (paused, suspended) is pass_paused.c's. */
#include "pass.h"
#include "reconcile.h"
#include "judge.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "phase.h"

#include <stdio.h>
#include <string.h>

/* The look begin needs: the guest's own view of a running VM, from backends that give it only
 * on request, when the change is one the guest can show against what the hypervisor shows
 * now. False (with a Failure for this call) when the VM cannot be read. */
static bool look_before_begin(struct pass *p, bool on)
{
    struct hv_guest_base *b = &p->rec.base;
    p->rec.has_base = true;
    b->hv_memory_mib = p->obs.hw.memory_mib;
    b->hv_cpus = p->obs.hw.cpus;
    b->guest_memory_mib = b->guest_cpus = -1;
    return !on || rc_look_into_guest(p, true);
}

/* A begin refused for good: a sticky Failure that took no step. The base a record keeps is
 * what the VM showed before the operation's first step, which a later operation inherits
 * from a Failure (hv_begin_base) as the view from before a live step that may still be on its
 * way into the guest. This one took none: it keeps the base only when the judgement inherited
 * it from an operation in flight (that one's step may be), not its own look, which nothing
 * moved the guest from since. Seed 708978: a Required change refused while the guest's
 * statistics were absent (no guest view of memory), a live change of other hardware begun
 * after they came back inherited that view-less base and answered done "not verified in the
 * guest" before the guest onlined the memory. */
static void refuse(struct pass *p, const struct hv_begin_judgement *j, enum hv_failure_reason why,
                   const char *msg)
{
    p->rec.has_base = j->base_inherited;
    /* Nor is it cold, whatever its plan, while the VM runs and no older operation's step goes
     * down under it: no cycle of it began, so an operation after it takes that base over
     * (hv_begin_base), as after new_cycle's refusal. Seed 4791005: A's DIMM the guest never
     * onlined; B, a memory decrease needing a cycle, refused under Required within A's deadline
     * with A's base; C, for A's memory and more vCPUs, took a fresh look (the DIMM as the
     * hypervisor's), hot-plugged only the vCPUs and answered "the guest shows it". */
    if (p->obs.power == HV_POWER_ON && !p->down_at)
        hv_rec_move(&p->rec, HV_PH_NONE, false, 0, "refused before it began");
    rc_fail_sticky(p, why, msg);
}

/* The refusal j makes of the operation begin, if any (the first in the order the judgement
 * names them), as a Failure: sticky, recorded with the plan so far; or for this call only
 * while the guest may still report by itself. True when refused. */
/* A sticky refusal of the new operation over a VM that a cycle of this process (or its previous
 * life) left off, which its passes carry on as the new operation (begin_or_wait): the VM is
 * started as it is first, never left off (seed 805796: A's shutdown landed, the rollout had
 * changed to B, and B's begin, refused under Required for a guest without statistics, left it
 * off for good). A start that fails leaves it to the failed operation's retries (left_off). */
static void refused_over_own_cycle_off(struct pass *p)
{
    if (p->own_cycle_off)
        rc_power_on_anyway(p);
}

static bool begin_refused(struct pass *p, const struct hv_begin_judgement *j)
{
    char m[HV_MSG_MAX + 400];
    if (j->impossible >= 0) {
        hv_begin_impossible_msg(j, m, sizeof(m));
        refused_over_own_cycle_off(p);
        refuse(p, j, HV_FAIL_FIELD_NOT_CHANGEABLE, m);
    } else if (j->unshown && j->unshown_sticky) {
        refused_over_own_cycle_off(p);
        refuse(p, j, HV_FAIL_OTHER, j->unshown_msg);
    } else if (j->unshown) {
        rc_answer(p->out, true, 0, j->unshown_msg);
        hv_log(HV_LOG_INFO, "guest-not-reporting-yet", "vm", p->key, "message", j->unshown_msg,
               (char *)NULL);
    } else {
        return false;
    }
    return true;
}

/* The same for a power cycle j refuses (under powerCycle Never, or one this VM may not take),
 * which begin applies once the record says the operation is cold. takeover: the operation takes
 * an older one's shutdown or power-off over (its cycle goes on from there, see cold_on_path). */
static bool begin_cycle_refused(struct pass *p, const struct hv_begin_judgement *j, bool takeover)
{
    if (j->never || (j->cycle_refused && !takeover))
        refused_over_own_cycle_off(p);
    if (j->never)
        refuse(p, j, HV_FAIL_POWER_CYCLE_NOT_ALLOWED, j->never_msg);
    else if (j->cycle_refused && !takeover)
        refuse(p, j, j->cycle_code, j->cycle_msg);
    else
        return false;
    return true;
}

/* A new operation: ask the backend how each field can change on this VM now, judge it
 * (hv_begin_judge, as CanUpdateMachine does), and begin it or refuse it. */
bool rc_begin(struct pass *p)
{
    struct hv_begin_facts f;
    struct hv_err err = {0};
    memset(&f, 0, sizeof(f));
    if (p->be->ops->plan(p->be, p->ref, &p->obs, p->desired, f.plan, &err) != HV_OK) {
        rc_log_err(p, "plan", &err);
        if (rc_wait_for_hypervisor(p, HV_EK_LOOK, &err))
            return false;
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("cannot plan the change: %s"), hv_errcode_message(err.code));
        rc_answer(p->out, true, 0, m);
        return false;
    }
    struct hv_oprecord old = p->rec; /* an operation in flight may leave its base to this one */
    hv_rec_clear(&p->rec);
    p->rec.desired = *p->desired;
    p->rec.prev.memory_mib = p->desired->memory_mib >= 0 ? p->obs.config.memory_mib : -1;
    p->rec.prev.cpus = p->desired->cpus >= 0 ? p->obs.config.cpus : -1;
    p->rec.prev.cores_per_socket =
        p->desired->cores_per_socket >= 0 ? p->obs.config.cores_per_socket : -1;
    p->rec.started_at = p->rec.step_at = p->now;
    bool on = p->obs.power == HV_POWER_ON;
    if (!look_before_begin(p, on))
        return false;
    f.on = on;
    f.hw = p->obs.hw;
    f.guest = p->obs.guest;
    f.guest_mem_current = hv_guest_mem_current(&p->obs.guest, p->now);
    f.no_mem_report = p->obs.no_mem_report;
    f.no_cpu_report = p->obs.no_cpu_report;
    f.can_shutdown = p->obs.can_shutdown;
    f.no_power_cycle = p->obs.no_power_cycle;
    struct hv_begin_in in = {.facts = &f,
                             .old = &old,
                             .desired = p->desired,
                             .s = p->s,
                             .now = p->now,
                             .step_timeout_s = p->b->cfg->step_timeout_s};
    struct hv_begin_judgement j;
    hv_begin_judge(&in, &j);
    p->rec.base = j.base;
    p->rec.boot_at = j.boot_at;
    if (j.wait_boot) {
        rc_progress(p, RETRY_LIVE_SOON, HV_MSG("waiting for the guest to finish starting"));
        return false; /* nothing stored: the next call asks again */
    }
    /* the plan as recorded (up to a field it cannot change, when one is) */
    int upto = j.impossible >= 0 ? j.impossible : HV_F_COUNT;
    for (int k = 0; k < upto; k++) {
        if (f.plan[k].how == HV_HOW_LIVE)
            snprintf(p->rec.plan[k], sizeof(p->rec.plan[k]), "live:%s", f.plan[k].method);
        else
            snprintf(p->rec.plan[k], sizeof(p->rec.plan[k]), "%s",
                     f.plan[k].how == HV_HOW_COLD ? "cold" : "none");
        if (f.plan[k].how == HV_HOW_COLD)
            hv_rec_move(&p->rec, p->rec.phase, true, p->rec.down_at, "plan: a field needs a cycle");
    }
    if (begin_refused(p, &j))
        return false;
    if (!on)
        hv_rec_move(&p->rec, p->rec.phase, true, p->rec.down_at, "plan: the VM is off");
    if (begin_cycle_refused(p, &j, p->down_at != 0))
        return false;
    hv_rec_set_phase(&p->rec, HV_PH_NONE, "begun");
    p->sight_new = p->rec.started_at; /* ours once stored: nothing to re-issue */
    p->b->began(p->b->ctx, p->key, p->rec.started_at);
    hv_metrics_operation("started", p->rec.cold ? "cold" : "live");
    hv_log(HV_LOG_INFO, "operation-start", "vm", p->key, "desired", p->what, "path",
           p->rec.cold ? "cold" : "live", (char *)NULL);
    return true;
}

/* The VM is off during an operation: write the desired hardware if needed, then start it. */
void rc_off_path(struct pass *p)
{
    /* Powered off by this operation: always rewrite the definition, even when it already
     * shows the desired values (hot-plugged ones a guest did not take): the rewrite folds
     * DIMMs and virtio-mem into boot memory, which every guest sees without onlining. */
    bool ours = p->rec.cold && (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF);
    if (!rc_matches(&p->obs.config, p->desired) || ours) {
        if (rc_step(p, HV_PH_RECONFIGURE, HV_STEP_RECONFIGURE, NULL)) {
            rc_progress(p, 1, HV_MSG("reconfigured the powered-off VM to %s; starting it next"),
                        p->what);
        }
        return;
    }
    if (rc_may_start(p) && rc_step(p, HV_PH_POWER_ON, HV_STEP_POWER_ON, NULL))
        rc_progress(p, RETRY_COLD, HV_MSG("powering the VM on with %s"), p->what);
}

/* The shutdown or power-off of this operation's cycle in flight: sent again when recorded by
 * a process that is gone (or another replica) or when the last try failed, else waited for;
 * past shutdownTimeoutSeconds a power-off (TrySoft) or a Failure (Soft). The decision is
 * rc_step_decide's (pass_step.c); this gathers its facts and acts. */
static void step_in_flight(struct pass *p, bool first, int64_t elapsed, bool may_land)
{
    bool power_off = p->rec.phase == HV_PH_POWER_OFF;
    struct rc_step_facts f = {
        .power_off = power_off,
        .first = first,
        .failed_try = p->rec.attempts != 0,
        .busy = p->obs.busy,
        .can_ask = p->obs.can_shutdown,
        .unanswered = p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, 0) != 0,
        .off_late = elapsed >= p->b->cfg->step_timeout_s,
        .window_over = elapsed >= p->s->shutdown_timeout_s,
        .may_land = may_land,
        .soft = p->s->power_off_mode == HV_POM_SOFT,
    };
    enum rc_step_act act = rc_step_decide(&f);
    int shows = 0;
    if (act == STEP_LOOK) {
        /* the look is taken only when the VM runs with the desired hardware, live and
         * next-boot (rc_shows_without_cycle); a look that fails leaves the act a look */
        shows = rc_shows_without_cycle(p);
        if (shows >= 0) {
            f.shows = shows ? SHOWS_YES : SHOWS_NO;
            act = rc_step_decide(&f);
        }
    }
    if (rc_step_forgets_sight(&f, act))
        rc_forget_sight(p);
    if (shows < 0)
        return;
    switch (act) {
    case STEP_WAIT_OFF:
        rc_going_off(p, HV_MSG("waiting for the VM to power off"));
        return;
    case STEP_POWER_OFF_AGAIN:
        if (rc_step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
            rc_going_off(p, HV_MSG("powering off again"));
        return;
    case STEP_WAIT_SHOWN:
        /* its slot kept (on a first sight, the sight forgotten above, for a send should the
         * guest no longer show it) */
        rc_going_off(p, HV_MSG("waiting for the guest to shut down"));
        return;
    case STEP_GO_LIVE:
        /* the operation goes on live, whose done asks the guest again (as for a taken-over
         * step that did not land) */
        hv_rec_move(&p->rec, HV_PH_NONE, false, 0, "the change shows without the cycle");
        p->rec.attempts = 0;
        rc_live_path(p);
        return;
    case STEP_SEND_AGAIN:
        /* recorded by a process that is gone (or another replica) and maybe never sent: ask
         * again so the guest gets its whole graceful window; once per process, and again
         * while the last try failed (it was not sent) */
        if (rc_step(p, HV_PH_SHUTDOWN, HV_STEP_SHUTDOWN, NULL))
            rc_going_off(p, HV_MSG("shutting the guest down to apply %s"), p->what);
        return;
    case STEP_WAIT_BUSY:
        rc_progress_busy(p);
        return;
    case STEP_LOOK: /* (not after the look: decided with what it showed) */
    case STEP_WAIT_SHUTDOWN:
        rc_going_off(p, HV_MSG("waiting for the guest to shut down"));
        return;
    case STEP_FAIL: {
        char m[300];
        snprintf(m, sizeof(m),
                 HV_MSG("the guest did not shut down within %d s and powerOffMode is Soft"),
                 p->s->shutdown_timeout_s);
        rc_fail_sticky(p, HV_FAIL_SHUTDOWN_TIMEOUT, m);
        return;
    }
    case STEP_POWER_OFF:
        if (rc_step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
            rc_going_off(p, HV_MSG("powering off: the guest did not shut down in time"));
        return;
    }
}

/* The VM runs in phase reconfigure or power-on: started with the new configuration but
 * showing other values (a Failure), or started by someone else before it was reconfigured
 * (e.g. CAPV powers on VMs it finds off): cycled again, at most MAX_RECYCLES times. True
 * when it cycles again (the record back to none). */
static bool on_again(struct pass *p)
{
    if (p->rec.phase == HV_PH_POWER_ON && rc_matches(&p->obs.config, p->desired)) {
        char m[400], seen[160];
        rc_describe(seen, sizeof(seen), &p->obs.hw);
        snprintf(m, sizeof(m), HV_MSG("after the power cycle the hypervisor reports %s, want %s"),
                 seen, p->what);
        rc_fail_sticky(p, HV_FAIL_NOT_APPLIED_AFTER_POWER_CYCLE, m);
        return false;
    }
    if (++p->rec.recycles > MAX_RECYCLES) {
        rc_fail_sticky(p, HV_FAIL_POWERED_ON_EXTERNALLY,
                       HV_MSG("the VM was powered on again before hvupdater could reconfigure it; "
                              "pause the cluster (spec.paused) and retry"));
        return false;
    }
    hv_rec_set_phase(&p->rec, HV_PH_NONE, "on again before reconfigured");
    return true;
}

/* A power cycle begins: refused when this VM may not take one, else a slot (or waiting for
 * one, the record planned), then a shutdown or a power-off as powerOffMode says. again: the VM
 * was started by someone else before this operation reconfigured it (on_again). */
static void new_cycle(struct pass *p, bool again)
{
    char refused[HV_MSG_MAX + 64];
    enum hv_failure_reason why = HV_FAIL_POWER_CYCLE_NOT_ALLOWED;
    /* Under powerCycle Never a running VM is never shut down or powered off (hv_never_refused,
     * the begin judgement's rule), also when the operation went cold only because it found the
     * VM off and someone started it again before it was reconfigured (held-out seed 2497107:
     * the operator's power-off made a vCPU hot-plug cold, and after the operator's power-on
     * the engine shut the VM down), or when CAPI asks again under Never for a cycle planned
     * under another powerCycle. The reason is the cycle's: the start before the
     * reconfiguration (again), else the first field its plan needs a cycle for. */
    int field = -1;
    for (int k = HV_F_COUNT - 1; k >= 0 && !again; k--)
        if (!strcmp(p->rec.plan[k], "cold"))
            field = k;
    bool never = hv_never_refused(
        p->s, field, again ? HV_MSG("the VM was started again before it was reconfigured") : NULL,
        refused, sizeof(refused));
    if (never || hv_cycle_refused(p->obs.no_power_cycle, p->obs.can_shutdown, p->s, refused,
                                  sizeof(refused), &why)) {
        /* A cycle refused before it began (no step of it sent, none going down, the VM never
         * cycled or started by this operation: e.g. after a live step the guest did not take,
         * a transient domain): the Failure is not cold, the live step is the last thing it did
         * to the VM, so an operation after it takes its base over (hv_begin_base; seed 800269:
         * B began on a fresh look of A's hot-plugged memory the guest never onlined, left it
         * alone and answered "the guest shows it") */
        bool never_down = p->rec.phase == HV_PH_NONE && !p->rec.recycles && !p->rec.starts &&
                          !p->down_at && !p->rec.down_at;
        if (never_down)
            hv_rec_move(&p->rec, HV_PH_NONE, false, 0, "power cycle refused before it began");
        rc_fail_sticky(p, why, refused);
        return;
    }
    /* A new cycle fits the caps as they are now: a slot still held from a cycle of this VM that
     * ended (its power-on landed, a new state begun meanwhile) is no claim on them, since a
     * cycle resumed over the caps may have come beside it (seeds 27966, 22427). */
    if (!rc_slot_gate(p, GATE_ANEW)) {
        if (p->rec.phase == HV_PH_NONE) { /* keep the plan and start time while waiting */
            hv_rec_set_phase(&p->rec, HV_PH_PLANNED, "waiting for a slot");
            if (!rc_store(p))
                return;
        }
        rc_progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
        return;
    }
    if (p->s->power_off_mode == HV_POM_HARD || !p->obs.can_shutdown) {
        /* (under TrySoft the record says that no shutdown came before this power-off: a
         * TrySoft power-off otherwise follows one, which may still land; rc_cold_on_path) */
        p->rec.off_first = p->s->power_off_mode == HV_POM_TRY_SOFT;
        if (rc_step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
            rc_going_off(p, HV_MSG("powering off to apply %s"), p->what);
    } else if (rc_step(p, HV_PH_SHUTDOWN, HV_STEP_SHUTDOWN, NULL)) {
        rc_going_off(p, HV_MSG("shutting the guest down to apply %s"), p->what);
    }
}

/* Cold and running: a step taken over waits for its window, a cycle in its shutdown or
 * power-off takes its slot first, then the phase says what is next. */
void rc_cold_on_path(struct pass *p)
{
    const struct hv_engine_cfg *cfg = p->b->cfg;
    int64_t run_at = rc_step_run_at(p);
    int64_t elapsed = p->now - run_at;
    bool first = rc_first_sight(p, p->rec.started_at);
    bool may_land = p->now < rc_may_land_until(p->s, cfg->step_timeout_s, run_at);
    /* The shutdown or power-off in flight is an older operation's that this one, which needs
     * no power cycle itself, took over while it might still take the VM down (downAt): it
     * sends no step of its own (no new cycle for hardware that needs none). Once that step
     * has not taken the VM down within the time it could (rc_may_land_until), it will not:
     * the operation goes on as planned, live, and the slot goes back with the record. */
    bool inherited = hv_rec_taken_over_at(&p->rec) != 0;
    if (inherited && !may_land) {
        hv_rec_move(&p->rec, HV_PH_NONE, false, 0, "a taken-over step did not take the VM down");
        /* (the tries it carried were that step's: the live steps have their own; review of
         * b4e0d83: the record before the first live step kept them, and a live step refused
         * twice failed "3 times") */
        p->rec.attempts = 0;
        rc_live_path(p);
        return;
    }
    /* This process's own shutdown or power-off, sent (no failed try recorded) within the time
     * it may still take the VM down, of a cycle that lost its slot while the VM was paused:
     * the VM may go down at any moment, so the cycle counts against the caps at once (taken
     * over them), before a new cycle of its host begins. */
    bool sent = p->vm_cycle && !first && !p->rec.attempts && may_land;
    /* This process's own first step of the cycle (its shutdown, or a power-off no shutdown
     * came before: powerOffMode Hard or Soft, or TrySoft's when its record says so, offFirst:
     * the guest could not be asked; TrySoft otherwise turns a shutdown into a power-off),
     * that it knows it did not send (its last try did not reach the hypervisor, which forgot
     * the sight, or was refused; none got no answer): sending it again begins the cycle, which
     * fits the caps as they are now, as a new one: the slot held for it is no claim on them,
     * since a cycle resumed over the caps may have come beside it (seeds 818577, 5103891). */
    /* (held-out seed 2816971: a TrySoft power-off of a guest with no tools, refused, its slot
     * kept; the retry went down under it beside a paused VM's cycle resumed over the caps) */
    bool first_step = p->rec.phase == HV_PH_SHUTDOWN ||
                      (p->rec.phase == HV_PH_POWER_OFF &&
                       (p->s->power_off_mode != HV_POM_TRY_SOFT || p->rec.off_first));
    /* (so does a shutdown or power-off of this process's previous life once its window has
     * passed, whichever step and whether or not this life saw it before: nothing it sent may
     * land, and a slot taken for it over the caps, by the scan or below, is no claim on them;
     * review of e5257fd: two such VMs of a host with cap 1 held each other back until their
     * deadlines) */
    bool stepping = p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF;
    bool spent =
        stepping && !p->record_down && rc_owner_of(p->rec.owner, p->b->owner) == OWN_PREVIOUS;
    bool resend = !inherited &&
                  (spent || (p->vm_cycle && first_step && (first || p->rec.attempts))) &&
                  !p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, 0);
    /* A shutdown or power-off of this process's previous life that may still take the VM down
     * (its record is stored before it is sent), found running with no slot within the caps:
     * it counts against them at once (taken over them), as the takeover of such a step does,
     * and is waited for, not sent again: if that life never sent it, a step sent now would
     * begin a cycle over the caps. Once its window has passed without the VM going down, the
     * cycle goes on within the caps as a new one, its step sent again (the sight kept unused
     * for that). Held-out seeds 3108706, 5377849: it waited for a slot within the caps, the
     * guest shut down, and another VM's cycle of the host began beside it. */
    /* (a step sent again as a new cycle is not one under way: sent needs this life's sight
     * and no failed try, resend the sight lost or a try failed, or the previous life's step) */
    enum rc_gate gate = sent ? GATE_UNDER_WAY : resend ? GATE_ANEW : GATE_NEW;
    bool gated = stepping && !rc_slot_gate(p, gate);
    bool previous = gated && p->record_down;
    if (previous) {
        rc_slot_gate(p, GATE_UNDER_WAY);
        if (first)
            rc_forget_sight(p);
    } else if (gated) {
        /* A cycle this process does not hold a slot for (begun by a process that is gone or
         * by another replica, or one whose step is older): it goes on like a new one, when a
         * slot is free (not handled here yet: the pass that goes on sends its step again). */
        if (first)
            rc_forget_sight(p);
        rc_progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
        return;
    }
    if (inherited || previous) {
        if (p->rec.phase == HV_PH_SHUTDOWN)
            rc_going_off(p, HV_MSG("waiting for the guest to shut down"));
        else
            rc_going_off(p, HV_MSG("waiting for the VM to power off"));
        return;
    }
    switch (p->rec.phase) {
    case HV_PH_SHUTDOWN:
    case HV_PH_POWER_OFF:
        step_in_flight(p, first, elapsed, may_land);
        return;
    case HV_PH_RECONFIGURE:
    case HV_PH_POWER_ON:
        if (on_again(p))
            new_cycle(p, true); /* shut it down again */
        return;
    default:
        new_cycle(p, false);
        return;
    }
}

void rc_live_path(struct pass *p)
{
    if (p->rec.phase == HV_PH_WAIT_LIVE) {
        bool hv_shows = rc_matches(&p->obs.hw, p->desired);
        if (p->now - p->rec.step_at < p->s->live_timeout_s) {
            rc_settle(p, HV_MSG("waiting for the hypervisor to show %s"), p->what);
            return;
        }
        if (p->s->power_cycle == HV_PC_IF_NEEDED) {
            hv_log(HV_LOG_INFO, "live-timeout", "vm", p->key, "next", "power cycle", (char *)NULL);
            hv_rec_move(&p->rec, HV_PH_NONE, true, p->rec.down_at, "live timeout: power cycle");
            rc_cold_on_path(p);
            return;
        }
        char m[400];
        if (hv_shows)
            snprintf(m, sizeof(m),
                     HV_MSG("the hypervisor shows %s but the guest did not take it within %d s; "
                            "allow powerCycle IfNeeded or check the guest's hot-plug support"),
                     p->what, p->s->live_timeout_s);
        else
            snprintf(
                m, sizeof(m),
                HV_MSG("the live change to %s did not show within %d s (the guest did not take "
                       "it); allow powerCycle IfNeeded or check the guest's hot-plug support"),
                p->what, p->s->live_timeout_s);
        /* (the first is counted as other, as the message prefixes filed it before the codes:
         * a metrics label of its own is a change of its own) */
        rc_fail_sticky(p, hv_shows ? HV_FAIL_OTHER : HV_FAIL_LIVE_CHANGE_NOT_SEEN, m);
        return;
    }
    /* Issue every live step still needed; each is idempotent against what the VM shows.
     * The last one may carry the waiting record (see rc_step()). */
    bool mem = p->desired->memory_mib >= 0 && p->obs.hw.memory_mib != p->desired->memory_mib;
    bool cpus = p->desired->cpus >= 0 && p->obs.hw.cpus != p->desired->cpus;
    bool disk = hv_disk_set(p->desired->disk_mib) && p->obs.hw.disk_mib < p->desired->disk_mib;
    int steps = mem + cpus + disk;
    /* The record goes on the VM before the operation's first live step, whatever the field:
     * a restart or another replica that sees the change sees what to compare it with (the
     * guest's view from before), and no step is taken under another operation's record that
     * the VM still holds (an older one CAPI called no more, past its deadline and never
     * failed: a disk-only step taken under it, seeds 415609, 609790, 701253, scenario
     * disk_only_step_after_its_record). A backend that stores the record with the step needs
     * no separate write when that step is the only one: it carries it. */
    bool record_first =
        steps > 0 && p->rec.phase < HV_PH_LIVE && !(p->be->ops->record_in_step && steps == 1);
    if (record_first) {
        hv_rec_set_phase(&p->rec, HV_PH_LIVE, "record before the first live step");
        p->rec.step_at = p->now;
        if (!rc_store(p))
            return;
    }
    p->carry = mem && !cpus && !disk;
    if (mem && !rc_step(p, HV_PH_LIVE, HV_STEP_LIVE_MEMORY, p->rec.plan[HV_F_MEMORY] + 5))
        return;
    p->carry = cpus && !disk;
    if (cpus && !rc_step(p, HV_PH_LIVE, HV_STEP_LIVE_CPUS, p->rec.plan[HV_F_CPUS] + 5))
        return;
    p->carry = disk;
    if (disk && !rc_step(p, HV_PH_LIVE, HV_STEP_LIVE_DISK, p->rec.plan[HV_F_DISK] + 5))
        return;
    p->carry = false;
    bool stepped = p->rec.phase == HV_PH_LIVE || p->carried;
    if (!p->carried) {
        hv_rec_set_phase(&p->rec, HV_PH_WAIT_LIVE, "live steps issued");
        p->rec.step_at = p->now;
        if (!rc_store(p))
            return;
    }
    if (stepped)
        rc_settle(p, HV_MSG("hot-plugged; waiting for the hypervisor to show %s"), p->what);
    else
        rc_settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
}
