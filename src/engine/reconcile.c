/* reconcile.c: one level-triggered pass of the UpdateMachine engine for one VM.
 * Observe; read the operation record on the VM; decide the next step from what is seen plus
 * the record; write the record (intent) before acting; act once; answer. Nothing here
 * remembers anything between passes except through the record and the slot table. The acts
 * are in pass_*.c (pass.h). */
#include "reconcile.h"
#include "pass.h"
#include "phase.h"
#include "log.h"
#include "msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- classify: how this round's look and the VM's record relate to this call -------------
 * Pure (rc_classify): the same record, look and call, the same classes. */

/* A round's look: the VM is observed (answered otherwise), found, and on or off (a VM paused,
 * suspended or in transition is answered apart, rc_neither_on_nor_off). False: answered. */
static bool look(struct pass *p)
{
    struct hv_err err = {0};
    int orc = HV_OK;
    if (p->after.found) { /* read when the last step finished: no second look needed */
        p->obs = p->after;
        p->after.found = false;
    } else {
        memset(&p->obs, 0, sizeof(p->obs));
        orc = p->be->ops->observe(p->be, p->ref, &p->obs, &err);
    }
    if (orc != HV_OK) {
        rc_log_err(p, "observe", &err);
        if (rc_wait_for_hypervisor(p, HV_EK_LOOK, &err))
            return false;
        char m[400];
        if (err.code == HV_E_AMBIGUOUS) /* detail: the configured hosts that hold the name */
            snprintf(m, sizeof(m),
                     HV_MSG("VM %s is on several configured %s hosts (%s): name its server or "
                            "give its UUID"),
                     p->ref->name, p->be->ops->name, err.detail);
        else
            snprintf(m, sizeof(m), HV_MSG("cannot observe the VM: %s"),
                     hv_errcode_message(err.code));
        rc_answer(p->out, true, 0, m);
        return false;
    }
    p->b->unreachable_since(p->b->ctx, p->key, p->now, false); /* it answered */
    if (!p->obs.found) {
        char m[400];
        snprintf(m, sizeof(m), HV_MSG("VM %s not found on any configured %s host"),
                 p->ref->uuid[0] ? p->ref->uuid : p->ref->name, p->be->ops->name);
        rc_answer(p->out, true, 0, m);
        p->gone = true; /* (its slot goes; a parking ends: no resume will come, HV_FOLLOW_GONE) */
        return false;
    }
    snprintf(p->on_vm, sizeof(p->on_vm), "%s", p->obs.record); /* what a store expects */
    p->on_vm_known = true;
    if (p->obs.power != HV_POWER_ON && p->obs.power != HV_POWER_OFF) {
        rc_neither_on_nor_off(p);
        return false;
    }
    return true;
}

void rc_classify(const struct hv_oprecord *r, bool had, const struct rc_call *c, struct rc_class *k)
{
    memset(k, 0, sizeof(*k));
    k->on = c->on;
    k->phase = r->phase;
    k->off_first = r->off_first;
    if (!had) {
        k->rel = REL_NONE;
        return;
    }
    bool same = hv_hw_equal(&r->desired, c->desired);
    if (!same)
        k->rel = REL_OTHER;
    else if (r->phase == HV_PH_FAILED && strcmp(r->policy, c->policy))
        k->rel = REL_THIS_REFAILED; /* a changed policy gets a new operation */
    else if (r->phase == HV_PH_FAILED)
        k->rel = REL_THIS_FAILED; /* final for this hardware under this policy */
    else if (r->phase == HV_PH_DONE)
        k->rel = REL_THIS_DONE;
    else
        k->rel = REL_THIS;
    k->owner = rc_owner_of(r->owner, c->owner);
    /* the VM may still go down from a shutdown or power-off already sent, until when: sent
     * within the time such a step can take (else the VM stayed on), by an operation in its
     * cycle, or one whose Failure came upon it (downAt) */
    bool stepping = r->phase == HV_PH_SHUTDOWN || r->phase == HV_PH_POWER_OFF;
    /* (timed from when the VM ran again after a pause this process saw, as the operation's
     * own pass times it, rc_step_run_at: a step sent before the pause may land once it runs;
     * held-out seed 5273493: A's shutdown sent, the VM paused for 287 s; back, B began over
     * A as over a spent cycle, waited for a slot, and A's shutdown landed beside another
     * VM's cycle of the host) */
    int64_t sent_at = c->run_at > r->step_at ? c->run_at : r->step_at;
    if (c->on && r->cold && stepping &&
        c->now < rc_may_land_until(c->s, c->step_timeout_s, sent_at)) {
        k->hazard = HZ_STEP_SENT;
        k->hazard_sent = sent_at;
        k->hazard_tries = r->attempts;
    } else if (c->on && r->cold && hv_rec_failed_upon_at(r) &&
               c->now < rc_may_land_until(c->s, c->step_timeout_s,
                                          hv_rec_failed_upon_at(r) > c->run_at
                                              ? hv_rec_failed_upon_at(r)
                                              : c->run_at)) {
        /* (its time from when the VM ran again, when this process saw it paused since: a
         * Failure at the deadline of a cycle paused in its shutdown, rc_neither_on_nor_off) */
        k->hazard = HZ_FAILED_UPON;
        k->hazard_sent =
            hv_rec_failed_upon_at(r) > c->run_at ? hv_rec_failed_upon_at(r) : c->run_at;
        /* a Failure after failed tries of that step (its last one got no answer in time): a
         * failed last try, sent again by the operation that takes it over, with its slot
         * (held-out seed 2415192: B waited under Soft for a shutdown that never reached the
         * guest and failed with 13 s of its own window) */
        k->hazard_tries = r->attempts > 0;
    }
    k->cycle = r->cold && r->phase >= HV_PH_SHUTDOWN && r->phase <= HV_PH_POWER_ON;
    k->other_cycle_spent = k->cycle && !same && c->on && k->hazard == HZ_NONE;
    k->left_off = r->cold && r->phase == HV_PH_FAILED && !c->on;
    k->own_cycle_off = k->cycle && !c->on && k->owner != OWN_OTHER;
    /* another process (e.g. a replica serving a newer spec) carries an operation for other
     * hardware out: the VM is about to change, whatever it shows now. Not this process's
     * previous life: no one carries its operation but this process, which begins over it as
     * over its own (held-out seed 1856157: its spent shutdown taken for a live process's
     * operation, waited for until its deadline, the slot the scan had taken for it given
     * back, and another VM of the host went down beside it) */
    k->other_inflight = !same && r->phase >= HV_PH_LIVE && r->phase <= HV_PH_POWER_ON &&
                        k->owner == OWN_OTHER && c->now - r->started_at <= c->s->deadline_s;
    /* ... or one is still open before its cycle (planned, live, waiting for the guest, going
     * down): the VM may show this state by its step the guest has not taken yet (A -> B
     * hot-plugged, then back to A, then B again) */
    k->other_open = !same && r->phase >= HV_PH_PLANNED && r->phase <= HV_PH_POWER_OFF;
    k->other_failed = !same && r->phase == HV_PH_FAILED;
    /* such an older operation's step may still take the VM down (a rollout that changed, or
     * went back, mid-shutdown): the new operation takes that cycle over */
    k->takeover = !same && k->hazard != HZ_NONE;
    /* CAPI asks another replica for other hardware after it asked here (the rollout changed,
     * or went back): that process begins it from a call later than this one, so its record
     * starts at or after this call (the same second: the order is unknown, a later call
     * tells) */
    k->superseded =
        !same && k->owner == OWN_OTHER && c->called_at > 0 && r->started_at >= c->called_at;
}

int64_t rc_may_land_until(const struct hv_settings *s, int step_timeout_s, int64_t sent)
{
    return sent + s->shutdown_timeout_s + step_timeout_s;
}

int64_t rc_step_run_at(struct pass *p)
{
    int64_t paused = p->b->running_seen(p->b->ctx, p->key, p->rec.started_at, p->now);
    return paused > p->rec.step_at ? paused : p->rec.step_at;
}

/* ---- decide and act, in the documented order (docs/how-it-works.md "Phases") ------------ */

/* The VM is off under the sticky Failure p->rec of a cold operation: it is started again, as
 * it is or rolled back again, within the starts the Failure may take. Best effort, every pass
 * that comes; a start that fails keeps the slot (left_off) for step_timeout_s after the
 * Failure, and the engine's own passes try again meanwhile. */
static void restart_failed_off(struct pass *p)
{
    /* Starts after the failure are bounded too: a VM that halts at once stays off. */
    bool may = p->rec.starts < 2 * MAX_STARTS + p->rec.recycles;
    if (p->rec.rollback && may) {
        rc_roll_back_again(p); /* it did not start with the new configuration: as it was */
    } else if (p->rec.cold && may) {
        /* It failed mid-cycle and the guest went down after (e.g. a late ACPI shutdown):
         * a failure must not leave the VM off. */
        bool landed = hv_rec_failed_upon_at(&p->rec) != 0; /* the shutdown it came upon landed */
        if (landed) {
            hv_rec_move(&p->rec, p->rec.phase, p->rec.cold, 0, "failed: the shutdown landed");
            p->rec.step_at = p->now; /* a start that fails keeps the slot from now */
        }
        if (rc_power_on_anyway(p) || landed)
            rc_store(p); /* counted */
    }
}

/* 2. The record is this hardware's sticky Failure: the same Failure again, no step; a VM it
 * left off is started (as it is, or rolled back again), and one a shutdown it came upon may
 * still take down keeps its slot (going_down). */
static bool on_sticky_failure(struct pass *p, const struct rc_class *k)
{
    rc_slot_gate(p, GATE_ENDED);
    if (!k->on) {
        restart_failed_off(p);
    } else if (k->hazard == HZ_FAILED_UPON) {
        p->going_down = true; /* a shutdown or power-off it came upon may land yet */
    } else if (p->rec.rollback && k->on) {
        rc_rollback_note_follows_vm(p); /* its message says what it runs with */
    }
    rc_answer_sticky(p->out, p->rec.message);
    return false;
}

/* 3. The VM shows the desired hardware (and no shutdown may still take it down; off only with
 * no operation in flight): done, when the guest shows it too or cannot tell, or the answer
 * recorded when it was done; waiting while another process's operation is in flight. True:
 * answered; false: an operation begins or goes on. */
static bool answer_shown(struct pass *p, const struct rc_class *k)
{
    bool had = rc_ours(k), inflight = k->rel == REL_THIS;
    if (k->other_inflight && !inflight) {
        rc_progress(p, RETRY_COLD, HV_MSG("waiting for another operation on this VM to finish"));
        return true;
    }
    if (k->rel == REL_THIS_DONE && p->rec.message[0]) {
        rc_answer(p->out, false, 0, p->rec.message); /* as answered when it was done */
        return true;
    }
    if (!k->on) {
        rc_done(p, had, HV_MSG("not verified in the guest: the VM is off"));
        return true;
    }
    /* Another hardware's Failure that came upon an operation still in flight (it kept that
     * one's view from before), another hardware's operation still open (its base is the view
     * from before the chain of them), or this hardware's Failure under other settings (e.g. a
     * hot-add the guest did not take under Never, then IfNeeded): the VM changed since, so
     * this state is not simply what it had; it begins an operation that verifies the change
     * against that view. */
    const struct hv_hw *want = p->desired;
    bool changed_since =
        !had && (k->other_failed || k->other_open || k->rel == REL_THIS_REFAILED) &&
        p->rec.has_base && p->now - p->rec.started_at <= p->s->deadline_s &&
        ((want->memory_mib >= 0 && p->rec.base.hv_memory_mib != want->memory_mib) ||
         (want->cpus >= 0 && p->rec.base.hv_cpus != want->cpus));
    if (changed_since)
        return false;
    return !rc_look_into_guest(p, had) || rc_done_in_guest(p, had, inflight);
}

/* The cycle under way (another process's, or a step of this process's taken by the new
 * operation) becomes this operation's: its step, its time and tries, a slot; false when its
 * record could not be stored. unsent: a step of this process it knows it did not send;
 * unanswered: a try of it that got no answer (unanswered_sent). */
static bool take_cycle_over(struct pass *p, const struct rc_class *k, bool unsent,
                            int64_t unanswered)
{
    /* (an operation that needs no cycle of its own only waits for that step: its record
     * says when it was sent, downAt, see cold_on_path) */
    enum hv_phase under_way = k->hazard == HZ_FAILED_UPON ? HV_PH_SHUTDOWN : k->phase;
    hv_rec_move(&p->rec, under_way, true, p->rec.cold ? p->rec.down_at : k->hazard_sent,
                "takes the cycle under way over");
    p->rec.step_at = k->hazard_sent;
    p->rec.off_first = under_way == HV_PH_POWER_OFF && k->off_first; /* (no shutdown before) */
    /* its failed tries with it: a step whose last try was refused was not sent, and is
     * sent again rather than waited for (seed 16617: B took over A's refused shutdown
     * and waited for it until Soft's timeout) */
    p->rec.attempts = k->hazard_tries;
    /* (so is a step of this process's previous life: its record is stored before it is sent,
     * and a try that did not reach the hypervisor is not counted, so this life cannot tell
     * whether it was sent. Carried on as this life's own, it was waited for and failed Soft's
     * timeout on a shutdown never sent (held-out seed 3998342: r0's try failed unreached, r0
     * restarted, B took the step over and A took it back); as a try that may have been taken,
     * it is sent again within the caps, its slot kept while it may land) */
    if (k->owner == OWN_PREVIOUS && k->hazard == HZ_STEP_SENT && k->hazard_sent > unanswered)
        unanswered = k->hazard_sent;
    /* (a try of this process that got no answer is a failed try, also when the write of its
     * count failed: the step is sent again, as with the count on the record; held-out seed
     * 3623803: A -> B -> A carried a Soft shutdown whose only try timed out, its count's write
     * failed too, and B failed Soft's timeout on a shutdown that never reached the guest) */
    if (!p->rec.attempts && unanswered && k->hazard == HZ_STEP_SENT)
        p->rec.attempts = 1;
    rc_slot_gate(p, GATE_UNDER_WAY);
    bool theirs = k->owner == OWN_OTHER && under_way == HV_PH_SHUTDOWN && p->rec.cold &&
                  p->s->power_off_mode == HV_POM_SOFT &&
                  p->now - k->hazard_sent >= p->s->shutdown_timeout_s;
    /* (nothing stored: the VM's record is still the older operation's, and what this
     * process knows of its step stays as it was, rc_begin's sight noted only with the
     * record: the next takeover carries a step it sent, not sends it again with its slot
     * given back while it may land; held-out seed 1706332). A write that got no answer
     * may have landed: the next look that finds this record notes it as seen then, so the
     * step it carries is not taken for one never sent (review of c2bdfd5), unless this
     * takeover sends the step again anyway (below). */
    if (!rc_store(p)) {
        if (p->store_no_answer && !unsent && !theirs)
            p->b->landing(p->b->ctx, p->key, p->rec.started_at);
        return false;
    }
    if (unanswered)
        p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, unanswered);
    /* Another replica's shutdown whose graceful window is spent already, taken over by
     * an operation under Soft, would fail it at once, "the guest did not shut down within
     * N s", on a window this operation never had, from a step no process may have sent
     * (its try failed, its record stored before it; held-out seed 1495300): it sends the
     * shutdown again once, so the guest gets its whole window from a shutdown this
     * process knows it sent. (TrySoft powers off instead, as its policy says; a step of
     * this process's previous life is carried on over the caps: seed 217798.) */
    if (unsent || theirs)
        rc_forget_sight(p);
    return true;
}

/* The engine's own pass (no call behind it) for a VM whose record shows no cycle of this
 * process to finish: it begins nothing. */
static void own_pass_begins_nothing(struct pass *p, const struct rc_class *k)
{
    /* The engine's own pass, to finish a cycle of this process: the VM's record no longer
     * shows it (done, or replaced by another replica's operation). Nothing of ours is in
     * flight; only a call begins an operation. (A VM off mid-cycle of this process or its
     * previous life, or a cycle of ours for older hardware going on, becomes the new
     * operation: the VM comes back on. Another process's cycle that left it off is that
     * process's to bring back: two replicas' own passes would each begin their own
     * hardware over the other's for ever, seed 9879.) */
    /* A cold operation of this process (or its previous life) that failed and left the VM
     * off is still this process's to start again: its own passes do, as that Failure's
     * pass would (its hardware; its record keeps its settings, rc_store), for whatever
     * hardware CAPI asked since. Seed 209529: A's rollback could not start the VM (the
     * host refused), the rollout changed A -> B and back at once, B's pass ran late
     * (uncalled), began nothing and gave the Failure's slot back; CAPI never called again
     * (A not covered with the VM off) and the VM, which would start now, stayed off.
     * Only within step_timeout_s after the Failure, while its slot keeps these passes
     * going: a VM off later (the operator's) is the next operation's to start, with the
     * hardware CAPI asks for (seed 109330: an old Failure's VM started as it was, B's
     * begin then found its guest booting, not yet shown). */
    if (k->left_off && k->owner != OWN_OTHER &&
        p->now - p->rec.step_at < p->b->cfg->step_timeout_s) {
        const struct hv_hw *asked = p->desired;
        p->desired = &p->rec.desired;
        restart_failed_off(p);
        p->desired = asked;
    }
    rc_progress(p, RETRY_COLD, HV_MSG("observing the VM"));
}

/* 4. No operation of this call's in flight: begin one, unless the engine's own pass has
 * nothing of this process's to carry on, or another process's operation is in flight; a
 * shutdown or power-off still under way is taken over (within this process's caps when
 * another process sent it). False: answered. */
static bool begin_or_wait(struct pass *p, const struct rc_class *k)
{
    if (!p->called_at &&
        !(k->cycle && (k->owner == OWN_SELF || (!k->on && k->owner != OWN_OTHER)))) {
        own_pass_begins_nothing(p, k);
        return false;
    }
    /* Nor a pass whose call another process's operation for other hardware began after: CAPI
     * has asked that replica for that hardware since, and gets its answers (a "done" from a
     * look that began before this pass) while this call's hardware may be wanted no more.
     * Begun over it, this would undo that operation behind CAPI's back and make its done
     * false (seed 200151: B done by one replica, A begun over it by the other's pass for a
     * call before B's, the VM off when CAPI got B's done). Only a call after that operation
     * began begins this hardware over it (A -> B -> A). */
    if (k->superseded) {
        rc_progress(p, 1, HV_MSG("observing the VM"));
        return false;
    }
    /* Never begin over another process's operation in flight (a late call for an older spec
     * reaching one replica while another carries out the newer one): its record would be
     * lost and with it what the guest showed before. A cycle it left going down or off is
     * taken over (below). */
    if (k->other_inflight && !k->takeover && !(k->cycle && !k->on)) {
        rc_progress(p, RETRY_COLD, HV_MSG("waiting for another operation on this VM to finish"));
        return false;
    }
    /* Another process's cycle going down is taken over like a new one, within this process's
     * caps: that process gives its slot back once the record is ours. One of this process's
     * previous life may take the VM down at any moment and no live process holds a slot for
     * it: it counts against the caps at once (taken over them, below; seed 217798). */
    if (k->takeover && k->owner == OWN_OTHER && !rc_slot_gate(p, GATE_NEW)) {
        rc_progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
        return false;
    }
    /* This process's own step taken over that it knows it did not send (a try that did not
     * reach the hypervisor: it forgot its sight of the operation, step_failed): sent again
     * by the new operation, not waited for until Soft's timeout (seed 203773). Looked at,
     * not noted: a begin refused, or whose record is not stored, leaves that knowledge as it
     * was for the next pass (held-out seeds 2320295, 2244983: a begin refused for a failed
     * plan call left the step noted as sent, and the next takeover waited for a shutdown
     * never sent until Soft's timeout). */
    bool own_step = k->takeover && k->hazard == HZ_STEP_SENT && k->owner == OWN_SELF;
    bool unsent = own_step && !p->b->seen(p->b->ctx, p->key, p->rec.started_at);
    /* a try of that step that got no answer (it may have been taken, unanswered_sent): the
     * step goes on with the new operation, so does what this process knows of it (held-out
     * seed 2326676: A -> B -> A, A's takeover kept the try but not its note, took the step
     * for one known unsent, gave the slot back and waited for one while it could land) */
    int64_t unanswered =
        k->takeover ? p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, 0) : 0;
    /* A step this process knows it never sent (no try of it got no answer) cannot take the
     * VM down: an operation that needs no power cycle of its own does not take it over, it
     * goes on live (seeds 13464, 2614285: B, live, took A's unsent shutdown over and waited
     * for it; its next pass noted the step as seen, and A's takeover after it waited for a
     * shutdown never sent until Soft's timeout). One that needs a cycle sends it again. */
    bool never_sent = unsent && !unanswered;
    p->down_at = k->takeover && !never_sent ? k->hazard_sent : 0;
    bool begun = rc_begin(p);
    p->down_at = 0;
    /* An own pass whose begin over a spent cycle of ours for older hardware was refused (for
     * this call only: e.g. a Required guest whose statistics went stale) leaves that cycle
     * to no one: its slot goes back and the engine stops looking; a call begins anew (seed
     * 719176: the slot kept and a refused begin every 5 s, for ever). */
    if (!begun && !p->called_at && k->other_cycle_spent && p->out->failure)
        p->vm_cycle = false;
    if (!begun)
        return false;
    p->ours = true;
    if (k->takeover && !(never_sent && !p->rec.cold)) /* the cycle under way is ours now */
        return take_cycle_over(p, k, unsent, unanswered);
    return true;
}

/* 5.-8. The operation goes on: past its deadline (start an off VM, then fail), off
 * (reconfigure, power on), cold and running (the power cycle), or live. */
static void carry_on(struct pass *p, const struct rc_class *k)
{
    if (p->now - p->rec.started_at > p->s->deadline_s) {
        if (!k->on) {
            if (rc_may_start(p) && rc_step(p, HV_PH_POWER_ON, HV_STEP_POWER_ON, NULL))
                rc_progress(p, RETRY_COLD, HV_MSG("deadline passed; powering the VM back on"));
            return;
        }
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("the change did not complete within %d s (last step: %s)"),
                 p->s->deadline_s, hv_phase_name(p->rec.phase));
        /* A shutdown or power-off sent that may still land takes the VM down after the
         * Failure: it comes upon that step (downAt), so its slot stays and the VM is started
         * again once it is off (seed 907093: a Soft shutdown sent 4 s before the deadline,
         * the Failure at it, the guest shut down 2 s later and the VM stayed off) */
        p->down_at = k->hazard == HZ_STEP_SENT ? k->hazard_sent : 0;
        rc_fail_sticky(p, HV_FAIL_DEADLINE, m);
        p->down_at = 0;
        return;
    }
    if (!k->on) {
        if (p->rec.cold) /* it must be brought back, whatever the caps */
            rc_slot_gate(p, GATE_UNDER_WAY);
        rc_off_path(p);
    } else if (p->rec.cold) {
        rc_cold_on_path(p);
    } else {
        rc_live_path(p);
    }
}

/* One observe-decide-act round: look, classify, then decide in the documented order (1. the
 * look, 2. a sticky Failure, 3. the VM shows it, 4. begin, 5.-8. go on) and act. Returns true
 * when it took a step after which the next one can follow at once (power-off, shutdown,
 * reconfigure): those run back to back, so a VM is off as briefly as possible and nothing
 * (e.g. CAPV, which powers on VMs it finds off) gets a window between them. */
static bool one_pass(struct pass *p)
{
    p->chain = false;
    p->carried = false; /* only a step of this round carries the record */
    p->now = p->b->unix_s(p->b->ctx);
    if (!look(p))
        return false;
    bool had = hv_oprecord_read(&p->rec, p->obs.record);
    if (had) { /* (its starts as this process knows them: untaken ones not counted) */
        int untaken = p->b->starts_untaken(p->b->ctx, p->key, p->rec.started_at, 0);
        p->rec.starts = p->rec.starts > untaken ? p->rec.starts - untaken : 0;
    }
    p->seen = true;
    struct rc_call c = {.desired = p->desired,
                        .s = p->s,
                        .owner = p->b->owner,
                        .now = p->now,
                        .step_timeout_s = p->b->cfg->step_timeout_s,
                        .on = p->obs.power == HV_POWER_ON,
                        .called_at = p->called_at};
    rc_policy_of(p->s, c.policy, sizeof(c.policy));
    /* (also of a Failure that came upon such a step: a deadline Failure of a cycle paused in
     * its shutdown, rc_neither_on_nor_off, whose step has its time from the resume) */
    if (had && c.on && p->rec.cold &&
        (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF ||
         hv_rec_failed_upon_at(&p->rec))) {
        int64_t run_at = rc_step_run_at(p); /* (once: it closes the pause it finds open) */
        c.run_at = run_at > p->rec.step_at ? run_at : 0;
    }
    struct rc_class k;
    rc_classify(&p->rec, had, &c, &k);
    p->vm_cycle = k.cycle && k.owner == OWN_SELF;
    p->record_down = k.hazard == HZ_STEP_SENT && k.owner == OWN_PREVIOUS;
    p->record_down_at = p->record_down ? k.hazard_sent : 0;
    p->other_down_at =
        k.hazard == HZ_STEP_SENT && k.owner == OWN_OTHER && !k.hazard_tries ? k.hazard_sent : 0;
    p->previous_off = k.own_cycle_off && k.owner == OWN_PREVIOUS;
    p->other_failed = k.other_failed;
    p->other_open = k.other_open;
    p->own_cycle_off = k.own_cycle_off;
    if (k.rel == REL_THIS_FAILED)
        return on_sticky_failure(p, &k);
    p->ours = rc_ours(&k);
    /* a shutdown or power-off sent may still take the VM down: not done while it can */
    bool going_down =
        (k.rel == REL_THIS && (k.phase == HV_PH_SHUTDOWN || k.phase == HV_PH_POWER_OFF)) ||
        k.takeover;
    if (rc_matches(&p->obs.hw, p->desired) && !going_down &&
        (k.on || !(k.rel == REL_THIS || k.cycle || k.left_off)) && answer_shown(p, &k))
        return false;
    if (k.rel != REL_THIS && !begin_or_wait(p, &k))
        return false;
    carry_on(p, &k);
    return p->chain;
}

enum hv_follow hv_reconcile_key(const struct hv_books *b, const char *key, struct hv_backend *be,
                                const struct hv_vm_ref *ref, const struct hv_hw *desired,
                                const struct hv_settings *s, int64_t called_at,
                                struct hv_update_result *out)
{
    struct pass *p = calloc(1, sizeof(*p));
    if (!p)
        abort();
    p->b = b;
    p->be = be;
    p->ref = ref;
    p->desired = desired;
    p->s = s;
    p->out = out;
    p->called_at = called_at;
    snprintf(p->key, sizeof(p->key), "%s", key);
    rc_describe(p->what, sizeof(p->what), desired);
    for (int round = 0; round < 4 && one_pass(p); round++)
        ;
    /* No power-cycle slot outlives its cycle: once the VM's record shows no cycle of this
     * operation in flight (done, failed, live, waiting, or cleared or replaced by someone
     * else), the slot goes back. A pass that could not read the record keeps it. */
    struct rc_slot_facts f = {
        .seen = p->seen,
        .gone = p->gone,
        .cycling = p->ours && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
                   p->rec.phase <= HV_PH_POWER_ON &&
                   !(out->failure && p->obs.power == HV_POWER_ON), /* e.g. no record stored */
        .vm_cycle = p->vm_cycle,
        .record_down = p->record_down,
        .previous_off = p->previous_off,
        .stalled = p->stalled,
        /* a failed operation's start just now (as it is or rolled back) failed: step_timeout_s
         * after the Failure */
        .left_off = p->left_off && p->rec.phase == HV_PH_FAILED &&
                    p->now - p->rec.step_at < b->cfg->step_timeout_s,
        .going_down = p->going_down};
    enum rc_slot need = rc_slot_need(&f);
    rc_slot(p, need);
    /* a slot held implies a cycle, a step that may still land, or a VM left off (or a record
     * this pass could not read) */
    bool held = b->slot_held && b->slot_held(b->ctx, key);
    hv_engine_check(!held || !f.seen || f.cycling || f.vm_cycle || f.record_down ||
                        f.previous_off || f.going_down || f.left_off,
                    "a slot held implies a cycle, a hazard or a VM left off");
    /* (a cycle of this process for other hardware that a pause stalled: rc_neither_on_nor_off;
     * or one of its previous life, whose shutdown sent before the pause may land once the VM
     * runs again: seed 908970, the host then stalled, no call came, and the passes stopped) */
    bool stalled_own =
        p->stalled && (p->vm_cycle || rc_owner_of(p->rec.owner, b->owner) == OWN_PREVIOUS);
    bool previous = p->record_down || p->previous_off;
    bool cycling = f.cycling || p->going_down || previous || stalled_own; /* looks again */
    /* (a step of this process's previous life that may still land is this process's cycle to
     * carry: followed through blind passes as its own, seed 109359) */
    bool own = (p->ours && !strcmp(p->rec.owner, b->owner)) || previous || stalled_own;
    enum hv_follow follow = !p->seen && p->gone ? HV_FOLLOW_GONE
                            : !p->seen          ? HV_FOLLOW_UNSEEN
                            : !cycling          ? (p->parked ? HV_FOLLOW_RESUME : HV_FOLLOW_NONE)
                            : own && p->stalled ? HV_FOLLOW_PAUSED
                            : own               ? HV_FOLLOW_OWN
                                                : HV_FOLLOW_CYCLE;
    free(p);
    return follow;
}
