/* pass_paused.c: the acts of a reconcile pass that finds the VM neither running nor off
 * (paused, suspended, in a transition): no step is taken; a sticky Failure stays sticky, a
 * cycle under way waits or fails at its deadline, and a shutdown or power-off sent before the
 * pause, which may land once the VM runs again, is followed: its entry parked for the
 * resume's change report (HV_FOLLOW_RESUME), its time from when the VM runs again. */
#include "pass.h"
#include "reconcile.h"
#include "msg.h"
#include "phase.h"

#include <stdio.h>
#include <string.h>

/* When the record's shutdown or power-off was sent as this process knows it (0: none, or
 * the record shows no such step): no failed try recorded, its sight kept (a try that did not
 * reach the hypervisor forgets it, step_failed) and not an older operation's step taken over
 * (another process's, or one this process sent for other hardware: its own record holds that
 * one), or its last try got no answer (unanswered_sent); or, *previous, stored by this
 * process's previous life, which this life never saw: stored before it was sent, so it may
 * have been, and, the VM paused, it has not landed yet (held-out seeds 5217236, 5304196,
 * 5305957, 5367643: the new life failed the cycle at its deadline upon nothing, and the
 * resumed guest's shutdown landed beside another cycle of its host). */
static int64_t paused_step_sent_at(struct pass *p, bool had, enum rc_owner who, bool *previous)
{
    *previous = false;
    if (!had || (p->rec.phase != HV_PH_SHUTDOWN && p->rec.phase != HV_PH_POWER_OFF))
        return 0;
    if (p->rec.attempts)
        return p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, 0);
    if (hv_rec_taken_over_at(&p->rec))
        return 0;
    if (p->b->seen(p->b->ctx, p->key, p->rec.started_at))
        return p->rec.step_at;
    *previous = who == OWN_PREVIOUS;
    return *previous ? p->rec.step_at : 0;
}

/* A sticky Failure of the operation of this hardware found with the VM paused: parked for the
 * resume's report when it came upon a step that may still land (the rule below). */
static void park_failed_upon(struct pass *p, enum rc_owner who)
{
    /* (a Failure of this process, or of its previous life (the scan's: when the pause
     * began is lost), upon a step sent before the pause, within the time it may still
     * land, or paused since this process saw it so: the step has its time from when the
     * VM runs again, which its resume's report shows; parked, seeds 5206287, 5378229) */
    int64_t upon = hv_rec_failed_upon_at(&p->rec);
    /* (the step's time runs from when this life last saw the VM paused or, once a pass
     * saw it running again, from then, rc_step_run_at: a VM this life saw running for
     * that step's whole window, by the clock, is parked no more when found paused later,
     * as for a Failure of its own; held-out seed 5505482: the scan took up the previous
     * life's Failure on a running VM, its passes saw it running from 791 s, its host died
     * at 831 s and the VM paused at 952 s, found paused at 1196 s and parked for ever).
     * A previous life's Failure that this life never saw, paused or running, may have
     * been paused all along: parked (sighted; review of 6c6be6c: a life that had seen the
     * VM running only on calls, the scan not taking it up, parked it for ever at a later
     * pause, and its resume held a slot over the caps for a step long spent) */
    int64_t from = p->b->paused_seen(p->b->ctx, p->key, p->rec.started_at, 0);
    int64_t since = upon > from ? upon : from;
    if (who != OWN_OTHER && p->rec.cold && upon &&
        (p->now < rc_may_land_until(p->s, p->b->cfg->step_timeout_s, since) ||
         p->b->paused_open(p->b->ctx, p->key, p->rec.started_at) ||
         (who == OWN_PREVIOUS && !p->b->sighted(p->b->ctx, p->key, p->rec.started_at)))) {
        p->b->paused_seen(p->b->ctx, p->key, p->rec.started_at, p->now);
        p->parked = true;
    }
}

/* The VM is neither running nor off: paused, suspended, or in a transition. No step is
 * taken (resuming a VM is not ours to decide). A sticky Failure stays sticky. In the middle of
 * this operation's power cycle that is expected for a moment (a domain being started is
 * briefly paused, seen by another replica), but the cycle cannot progress: the slot goes back
 * at the end of the pass (see hv_reconcile_key) and deadlineSeconds still applies. */
void rc_neither_on_nor_off(struct pass *p)
{
    char pol[sizeof(p->rec.policy)];
    rc_policy_of(p->s, pol, sizeof(pol));
    bool had = hv_oprecord_read(&p->rec, p->obs.record);
    bool mine = had && hv_hw_equal(&p->rec.desired, p->desired);
    bool cycle =
        had && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN && p->rec.phase <= HV_PH_POWER_ON;
    p->seen = true;
    p->ours = mine;
    enum rc_owner who = had ? rc_owner_of(p->rec.owner, p->b->owner) : OWN_OTHER;
    bool own = who == OWN_SELF;
    bool previous;
    int64_t sent = paused_step_sent_at(p, had, who, &previous);
    if (mine && p->rec.phase == HV_PH_FAILED && !strcmp(p->rec.policy, pol)) {
        park_failed_upon(p, who);
        rc_answer_sticky(p->out, p->rec.message);
        return;
    }
    if (!(mine && cycle)) {
        /* Paused in the middle of a cycle of this process for other hardware (the rollout
         * changed or went back during its shutdown): the shutdown it got may land once it
         * runs again, and no call may come to see the VM off then. The cycle stays this
         * process's to follow, its slot given back as for this operation's (stalled); the
         * next pass that sees the VM off makes it the new operation (begin_or_wait), and the
         * VM comes back on (seed 209945). Until the cycle's deadline (its record's policy;
         * this operation's when it names none), as a stalled cycle of this operation: a VM
         * left paused is not looked at for ever (seed 125). */
        int deadline_s = p->s->deadline_s;
        if (sscanf(p->rec.policy, "%*[^/]/%*[^/]/%*d/%*d/%d", &deadline_s) != 1)
            deadline_s = p->s->deadline_s;
        p->vm_cycle = p->stalled = cycle && own && p->now - p->rec.started_at <= deadline_s;
        /* (its shutdown or power-off has its time from when the VM runs again, as for this
         * operation's below: the pass that finds it running takes the older cycle's step as
         * one that may land yet; held-out seed 5273493) */
        if (p->stalled)
            p->b->paused_seen(p->b->ctx, p->key, p->rec.started_at, p->now);
        /* Past that deadline its shutdown or power-off may still land once the VM runs: no
         * pass is timed for it, the change report of the resume wakes one, which takes that
         * step over (seed 2001007: resumed 1400 s later, its shutdown landed and nothing
         * started the VM) */
        p->parked = !p->stalled && cycle && own && sent;
        rc_answer(p->out, true, 0,
                  HV_MSG("the VM is paused, suspended or in transition; hvupdater continues when "
                         "it runs or is off"));
        return;
    }
    if (p->now - p->rec.started_at > p->s->deadline_s) {
        char m[300];
        snprintf(m, sizeof(m),
                 HV_MSG("the VM is %s in the middle of its power cycle (last step: %s) and the "
                        "change did not complete within %d s"),
                 p->obs.power_state[0] ? p->obs.power_state : HV_MSG("in transition"),
                 hv_phase_name(p->rec.phase), p->s->deadline_s);
        /* A shutdown or power-off sent before the pause (no failed try recorded, or one with
         * no answer) has not landed yet, and may once the VM runs: the Failure comes upon it
         * (downAt). No slot while the VM is paused (the cycle cannot progress) and no timed
         * pass (a VM left paused is not looked at for ever, seed 125): the change report of
         * its resume wakes a pass, which takes a slot over the caps while the step may land
         * (its time from the resume, rc_step_run_at) and starts the VM again once it is off
         * (held-out seeds 5206287, 2001437: the Failure had no downAt, the VM was no longer
         * followed, and its shutdown landed beside another cycle of its host). Parked only
         * once the Failure is stored: else the entry is left as before this rule (no timer;
         * the record on the VM still shows the cycle, for the scan and the next call). */
        if (sent)
            p->b->paused_seen(p->b->ctx, p->key, p->rec.started_at, p->now);
        p->down_at = sent;
        bool stored = rc_fail_sticky(p, HV_FAIL_PAUSED_MID_CYCLE, m);
        p->down_at = 0;
        p->going_down = false; /* (paused: no slot, see above) */
        p->parked = stored && sent != 0 && (own || previous);
        /* A Failure whose write failed leaves the VM's record showing this process's cycle
         * (rc_fail_sticky: kept "until a later pass stores the Failure"): followed as a
         * stalled cycle of this process, looked at again on a timer, no slot, until a pass
         * stores it (and parks the entry). Else nothing follows the VM: resumed, its shutdown
         * lands and it stays off (held-out seed 5538521). */
        if (!stored && who != OWN_OTHER)
            p->vm_cycle = p->stalled = true;
        return;
    }
    p->stalled = true;
    /* a shutdown or power-off it got before the pause has not landed yet, and has its time
     * from when the VM runs again (rc_step_run_at) */
    p->b->paused_seen(p->b->ctx, p->key, p->rec.started_at, p->now);
    rc_progress(p, RETRY_COLD, HV_MSG("waiting for the VM to finish starting or stopping"));
}
