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

/* One observe-decide-act round. Returns true when it took a step after which the next one
 * can follow at once (power-off, shutdown, reconfigure): those run back to back, so a VM is
 * off as briefly as possible and nothing (e.g. CAPV, which powers on VMs it finds off) gets a
 * window between them. */
static bool one_pass(struct pass *p)
{
    const struct hv_vm_ref *ref = p->ref;
    const struct hv_hw *desired = p->desired;
    const struct hv_settings *s = p->s;
    struct hv_update_result *out = p->out;
    struct hv_err err = {0};
    p->chain = false;
    p->carried = false; /* only a step of this round carries the record */
    p->now = p->b->unix_s(p->b->ctx);
    int orc = HV_OK;
    if (p->after.found) { /* read when the last step finished: no second look needed */
        p->obs = p->after;
        p->after.found = false;
    } else {
        memset(&p->obs, 0, sizeof(p->obs));
        orc = p->be->ops->observe(p->be, ref, &p->obs, &err);
    }
    if (orc != HV_OK) {
        rc_log_err(p, "observe", &err);
        if (rc_wait_for_hypervisor(p, &err))
            return false;
        char m[400];
        if (err.code == HV_E_AMBIGUOUS) /* detail: the configured hosts that hold the name */
            snprintf(m, sizeof(m),
                     HV_MSG("VM %s is on several configured %s hosts (%s): name its server or "
                            "give its UUID"),
                     ref->name, p->be->ops->name, err.detail);
        else
            snprintf(m, sizeof(m), HV_MSG("cannot observe the VM: %s"),
                     hv_errcode_message(err.code));
        rc_answer(out, true, 0, m);
        return false;
    }
    p->b->unreachable_since(p->b->ctx, p->key, p->now, false); /* it answered */
    if (!p->obs.found) {
        char m[400];
        snprintf(m, sizeof(m), HV_MSG("VM %s not found on any configured %s host"),
                 ref->uuid[0] ? ref->uuid : ref->name, p->be->ops->name);
        rc_answer(out, true, 0, m);
        p->b->slot_release(p->b->ctx, p->key);
        return false;
    }
    if (p->obs.power != HV_POWER_ON && p->obs.power != HV_POWER_OFF) {
        rc_neither_on_nor_off(p);
        return false;
    }
    bool had = hv_oprecord_read(&p->rec, p->obs.record);
    p->seen = true;
    p->vm_cycle = had && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
                  p->rec.phase <= HV_PH_POWER_ON && !strcmp(p->rec.owner, p->b->owner);
    /* A record for other hardware belongs to an older operation. If that one left the VM
     * off mid-cycle, the new one must still bring it back on. */
    bool old_cold_inflight =
        had && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN && p->rec.phase <= HV_PH_POWER_ON;
    /* ... also one that failed in its cycle and left the VM off (its start or its rollback's
     * failed): that VM is not off on purpose, so "off" is no "done" for the new one. */
    bool old_left_off =
        had && p->rec.cold && p->rec.phase == HV_PH_FAILED && p->obs.power == HV_POWER_OFF;
    /* ... and while another process (e.g. a replica serving a newer spec) carries one out, the
     * VM is not done, whatever it shows now: it is about to change. */
    bool other_inflight = had && !hv_hw_equal(&p->rec.desired, desired) &&
                          p->rec.phase >= HV_PH_LIVE && p->rec.phase <= HV_PH_POWER_ON &&
                          strcmp(p->rec.owner, p->b->owner) != 0 &&
                          p->now - p->rec.started_at <= s->deadline_s;
    /* ... and a shutdown or power-off such an older operation sent may still take the VM
     * down (a rollout that changed, or went back, mid-shutdown): the new operation takes that
     * cycle over instead of answering done or stepping live on a VM about to go off. */
    bool on_now = p->obs.power == HV_POWER_ON;
    /* (also a Failure that came upon such a shutdown or power-off while it may still land:
     * downAt) */
    bool old_failed_down =
        had && on_now && p->rec.cold && hv_rec_failed_upon_at(&p->rec) &&
        p->now - hv_rec_failed_upon_at(&p->rec) < s->shutdown_timeout_s + p->b->cfg->step_timeout_s;
    /* (not one sent longer ago than such a step can take: the VM stayed on, and a new state
     * that shows takes no cycle for it) */
    bool old_step_recent =
        p->now - p->rec.step_at < s->shutdown_timeout_s + p->b->cfg->step_timeout_s;
    bool old_going_down =
        had && on_now && !hv_hw_equal(&p->rec.desired, desired) && p->rec.cold &&
        (((p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF) && old_step_recent) ||
         old_failed_down);
    p->record_down = had && on_now && p->rec.cold &&
                     (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF) &&
                     old_step_recent && hv_owner_previous(p->rec.owner, p->b->owner);
    enum hv_phase old_phase = old_failed_down ? HV_PH_SHUTDOWN : p->rec.phase;
    p->other_failed = had && p->rec.phase == HV_PH_FAILED && !hv_hw_equal(&p->rec.desired, desired);
    /* ... or still open before its cycle (planned, live, waiting for the guest, going down):
     * the VM may show this state by another operation's step the guest has not taken yet
     * (A -> B hot-plugged, then back to A, then B again) */
    bool other_open = had && !hv_hw_equal(&p->rec.desired, desired) &&
                      p->rec.phase >= HV_PH_PLANNED && p->rec.phase <= HV_PH_POWER_OFF;
    int64_t old_step_at = old_failed_down ? hv_rec_failed_upon_at(&p->rec) : p->rec.step_at;
    bool old_others = had && strcmp(p->rec.owner, p->b->owner) != 0;
    if (had && !hv_hw_equal(&p->rec.desired, desired))
        had = false;
    char pol[sizeof(p->rec.policy)];
    rc_policy_of(s, pol, sizeof(pol));
    /* A failure is final for this hardware under this policy; a changed policy (e.g. the
     * operator allowed power cycles) gets a new operation. */
    bool refailed = had && p->rec.phase == HV_PH_FAILED && strcmp(p->rec.policy, pol);
    if (refailed)
        had = false;
    if (had && p->rec.phase == HV_PH_FAILED) {
        p->b->slot_release(p->b->ctx, p->key);
        /* Starts after the failure are bounded too: a VM that halts at once stays off. */
        bool may = p->rec.starts < 2 * MAX_STARTS + p->rec.recycles;
        if (p->rec.rollback && p->obs.power == HV_POWER_OFF && may) {
            rc_roll_back_again(p); /* it did not start with the new configuration: as it was */
        } else if (p->rec.cold && p->obs.power == HV_POWER_OFF && may) {
            /* It failed mid-cycle and the guest went down after (e.g. a late ACPI shutdown):
             * a failure must not leave the VM off. Best effort, every call. */
            bool landed =
                hv_rec_failed_upon_at(&p->rec) != 0; /* the shutdown it came upon landed now */
            if (landed) {
                hv_rec_move(&p->rec, p->rec.phase, p->rec.cold, 0, "failed: the shutdown landed");
                p->rec.step_at = p->now; /* a start that fails keeps the slot from now */
            }
            if (rc_power_on_anyway(p) || landed)
                rc_store(p); /* counted */
        } else if (p->rec.cold && hv_rec_failed_upon_at(&p->rec) && on_now &&
                   p->now - hv_rec_failed_upon_at(&p->rec) <
                       s->shutdown_timeout_s + p->b->cfg->step_timeout_s) {
            p->going_down = true; /* a shutdown or power-off it came upon may land yet */
        }
        rc_answer_sticky(out, p->rec.message);
        return false;
    }
    bool on = p->obs.power == HV_POWER_ON;
    bool inflight = had && p->rec.phase != HV_PH_DONE;
    /* A shutdown or power-off we sent may still take the VM down: not done while it can. */
    bool going_down =
        (inflight && (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF)) ||
        old_going_down;
    p->ours = had;
    if (rc_matches(&p->obs.hw, desired) && !going_down &&
        (on || !(inflight || old_cold_inflight || old_left_off))) {
        if (other_inflight && !inflight) {
            rc_progress(p, RETRY_COLD,
                        HV_MSG("waiting for another operation on this VM to finish"));
            return false;
        }
        if (had && p->rec.phase == HV_PH_DONE && p->rec.message[0]) {
            rc_answer(out, false, 0, p->rec.message); /* as answered when it was done */
            return false;
        }
        if (!on) {
            rc_done(p, had, HV_MSG("not verified in the guest: the VM is off"));
            return false;
        }
        /* Another hardware's Failure that came upon an operation still in flight (it kept
         * that one's view from before), another hardware's operation still open (its base is
         * the view from before the chain of them), or this hardware's Failure under other
         * settings (e.g. a hot-add the guest did not take under Never, then IfNeeded): the VM
         * changed since,
         * so this state is not simply what it had; it begins an operation that verifies the
         * change against that view. */
        bool changed_since =
            !had && (p->other_failed || other_open || refailed) && p->rec.has_base &&
            p->now - p->rec.started_at <= s->deadline_s &&
            ((desired->memory_mib >= 0 && p->rec.base.hv_memory_mib != desired->memory_mib) ||
             (desired->cpus >= 0 && p->rec.base.hv_cpus != desired->cpus));
        if (!changed_since) {
            if (!rc_look_into_guest(p, had))
                return false;
            if (rc_done_in_guest(p, had, inflight))
                return false;
        }
    }
    if (!had || p->rec.phase == HV_PH_DONE) {
        if (!p->called && !(old_cold_inflight && (!on || !strcmp(p->rec.owner, p->b->owner)))) {
            /* The engine's own pass, to finish a cycle of this process: the VM's record no
             * longer shows it (done, or replaced by another replica's operation). Nothing of
             * ours is in flight; only a call begins an operation. (A VM off mid-cycle, or a
             * cycle of ours for older hardware going on, becomes the new operation: the VM
             * comes back on.) */
            rc_progress(p, RETRY_COLD, HV_MSG("observing the VM"));
            return false;
        }
        /* Never begin over another process's operation in flight (a late call for an older
         * spec reaching one replica while another carries out the newer one): its record
         * would be lost and with it what the guest showed before. A cycle it left going down
         * or off is taken over (below). */
        if (other_inflight && !old_going_down && !(old_cold_inflight && !on)) {
            rc_progress(p, RETRY_COLD,
                        HV_MSG("waiting for another operation on this VM to finish"));
            return false;
        }
        /* Another process's cycle going down is taken over like a new one, within this
         * process's caps: that process gives its slot back once the record is ours. */
        if (old_going_down && old_others &&
            !p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, false)) {
            rc_progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
            return false;
        }
        p->down_at = old_going_down ? old_step_at : 0;
        bool begun = rc_begin(p);
        p->down_at = 0;
        if (!begun)
            return false;
        p->ours = true;
        if (old_going_down) { /* the cycle already under way is this operation's now */
            /* (an operation that needs no cycle of its own only waits for that step: its
             * record says when it was sent, downAt, see cold_on_path) */
            hv_rec_move(&p->rec, old_phase, true, p->rec.cold ? p->rec.down_at : old_step_at,
                        "takes the cycle under way over");
            p->rec.step_at = old_step_at;
            p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, true);
            if (!rc_store(p))
                return false;
        }
    }
    if (p->now - p->rec.started_at > s->deadline_s) {
        if (!on) {
            if (rc_may_start(p) && rc_step(p, HV_PH_POWER_ON, HV_STEP_POWER_ON, NULL))
                rc_progress(p, RETRY_COLD, HV_MSG("deadline passed; powering the VM back on"));
            return false;
        }
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("the change did not complete within %d s (last step: %s)"),
                 s->deadline_s, hv_phase_name(p->rec.phase));
        rc_fail_sticky(p, HV_FAIL_DEADLINE, m);
        return false;
    }
    if (!on) {
        if (p->rec.cold)
            p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, true);
        rc_off_path(p);
    } else if (p->rec.cold) {
        rc_cold_on_path(p);
    } else {
        rc_live_path(p);
    }
    return p->chain;
}

bool hv_reconcile_key(const struct hv_books *b, const char *key, struct hv_backend *be,
                      const struct hv_vm_ref *ref, const struct hv_hw *desired,
                      const struct hv_settings *s, bool called, struct hv_update_result *out)
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
    p->called = called;
    snprintf(p->key, sizeof(p->key), "%s", key);
    rc_describe(p->what, sizeof(p->what), desired);
    for (int round = 0; round < 4 && one_pass(p); round++)
        ;
    /* No power-cycle slot outlives its cycle: once the VM's record shows no cycle of this
     * operation in flight (done, failed, live, waiting, or cleared or replaced by someone
     * else), the slot goes back. A pass that could not read the record keeps it. */
    bool cycling = p->ours && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
                   p->rec.phase <= HV_PH_POWER_ON &&
                   !(out->failure && p->obs.power == HV_POWER_ON); /* e.g. no record stored */
    /* A failed operation that left the VM off (starting it, as it is or rolled back, failed)
     * still has it down: it keeps a slot (taken over the caps: the VM is off already), so no
     * other VM of the host goes down meanwhile and the engine tries again by itself, for
     * step_timeout_s after the failure. Then the slot goes: a VM that cannot start holds none
     * (each call still tries). */
    bool left_off = p->left_off && p->rec.phase == HV_PH_FAILED &&
                    p->now - p->rec.step_at < b->cfg->step_timeout_s;
    /* A cycle that cannot progress (the VM paused or suspended in the middle of it) holds no
     * slot either: the other VMs of the host go on, and this one takes a slot again when it
     * runs or is off. A shutdown or power-off of this process's previous life that may still
     * take the VM down is a cycle no live process holds a slot for: a slot this process took
     * for it (the scan's resume, a takeover) stays, also when this pass took no step (its
     * write failed, an uncalled pass for other hardware), and the engine keeps looking, until
     * the step lands (the VM off: taken over as a cycle under way) or its window ends. */
    if (left_off || p->going_down)
        b->slot_acquire(b->ctx, key, p->obs.host, true);
    else if (p->seen && ((!cycling && !p->vm_cycle && !p->record_down) || p->stalled))
        b->slot_release(b->ctx, key);
    cycling |= p->going_down || p->record_down; /* the engine looks again by itself */
    free(p);
    return cycling;
}
