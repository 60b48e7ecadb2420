/* answer.c: the answer gate: what an UpdateMachine call is told from what the engine
 * concluded ("done" only from a pass begun after the call that asked, each "done" used up;
 * a sticky Failure not from a pass begun before a late call or one for other hardware), and
 * the pass the call queues or times. Answers never wait for the hypervisor. */
#include "engine.h"
#include "engine_internal.h"
#include "hv_clock.h"
#include "msg.h"

#include <stdio.h>
#include <string.h>

/* A call for the same hardware that comes this much or more after the wait CAPI was asked for
 * (after this process's previous answer) begins a new series: what this process saw before it
 * confirms nothing. Another replica can take the VM to other hardware and back to a state
 * CAPI then asks here again (A -> B -> A) only while CAPI calls elsewhere: it must take that
 * replica's done for A, then wait at least the 1 s its first answer for B asks ("observing
 * the VM"), then its done for B; a call here less than 1 s late leaves no room for that. */
#define LATE_CALL_MS 1000

/* The answer gate: "done" only fresh. Pure: what a call is told from the facts in g (struct
 * eng_gate_in); test/unit/test_answer_gate.c enumerates every combination. A "done" is
 * answered only when a call for this hardware waits for one and the pass that concluded it
 * began at or after that call (each "done" is then used up); one not fresh waits for a new
 * look, which a call that came late waits for itself (LOOK_FIRST); any other conclusion for this
 * hardware is answered as it is, except a Failure that nothing confirms, which is looked at
 * again first: a sticky one with no call waiting that its pass began after, a Failure of one
 * look concluded before the previous call (news to no call any more), either one not CAPI
 * retrying it and with no pass begun since a call answered "observing the VM" for it; a sticky
 * one not so confirmed, for a call that came late, waits for that call's own look as a "done"
 * does (LOOK_FIRST), whatever looked since an earlier call. */
enum eng_gate eng_answer_gate(const struct eng_gate_in *g)
{
    bool done = g->known && !g->failure && !g->waiting;
    if (done && g->confirming && g->fresh)
        return ENG_GATE_DONE;
    if (done && g->late)
        return ENG_GATE_LOOK_FIRST; /* a "done" not fresh for a late call: a look first */
    if (!g->known || done)
        return ENG_GATE_OBSERVE; /* nothing for this hardware, or a "done" not fresh */
    if (!g->failure || g->retried)
        return ENG_GATE_KNOWN;
    /* (a Failure of one look names a call that failed in the pass after the previous call: it
     * is news to the first call after it only; a call in between, answered otherwise, e.g.
     * for other hardware, leaves it stale: A -> B -> A with B carried by another replica while
     * this one's look at A failed; seed 22294) */
    if (g->once)
        return g->recent || g->checked ? ENG_GATE_KNOWN : ENG_GATE_RECHECK;
    /* (a call waiting confirms only a sticky Failure concluded by a pass begun since it: the
     * call that began the series, for other hardware or late, may have been answered
     * "observing the VM" instead of this very Failure, and no pass has looked since; seed
     * 20675) */
    if (g->confirming && g->fresh)
        return ENG_GATE_KNOWN;
    /* (a call that came late waits for its own look, as for a "done": the pass that looked
     * since an earlier call was told "observing the VM" is from before CAPI's excursion;
     * after A -> B -> A another replica may have begun A anew over that Failure's record,
     * held-out seed 1495500) */
    if (g->late)
        return ENG_GATE_LOOK_FIRST;
    return g->checked ? ENG_GATE_KNOWN : ENG_GATE_RECHECK;
}

/* The gate's facts of x's conclusion for a call for desired under s (retried: as the call
 * found it). Caller holds the lock. */
static struct eng_gate_in gate_in(const struct entry *x, const struct hv_hw *desired,
                                  const struct hv_settings *s, bool retried, uint64_t prev_seq,
                                  bool late)
{
    /* a conclusion holds for the hardware and the settings it was reached under */
    return (struct eng_gate_in){.known = x->have_answer && hv_hw_equal(&x->answer_for, desired) &&
                                         hv_settings_equal(&x->answer_s, s),
                                .failure = x->answer.failure,
                                .once = x->answer.once,
                                .waiting = x->answer.retry_after_s != 0,
                                .confirming = x->confirm_seq != 0,
                                .fresh = x->answer_seq >= x->confirm_seq,
                                .recent = x->answer_seq >= prev_seq,
                                .retried = retried,
                                .checked = x->fail_check_seq && x->answer_seq >= x->fail_check_seq,
                                .late = late};
}

/* x's answer is a "done" that the next call will return (see hv_engine_update): for the
 * hardware and settings asked last, concluded by a pass that began after the first call
 * not yet answered done. Caller holds the lock. */
bool eng_concludes(const struct entry *x)
{
    if (!x->have_desired)
        return false;
    struct eng_gate_in g = gate_in(x, &x->desired, &x->s, false, x->call_seq, false);
    return eng_answer_gate(&g) == ENG_GATE_DONE;
}

/* The answer being given only waits for a change already made to show: nothing to act on
 * before CAPI's next call, retry_after_s from now. A look taken now would be a whole interval
 * old by then, so the pass this call asks for starts late enough to end just before that call
 * (the last pass's duration and 200 ms ahead of it): its conclusion is then the freshest
 * possible, and a "done" is not held back one interval. A pass slower than the interval
 * starts at once. Still one pass per call. */
static int64_t settle_delay_ms(const struct entry *x)
{
    int64_t delay = (int64_t)x->answer.retry_after_s * 1000 - (x->pass_ms + 200);
    return delay > 0 ? delay : 0;
}

/* A call that came late, for hardware this process concluded done (or a sticky Failure of)
 * before it: CAPI may have been through other states elsewhere since that look (the excursion
 * LATE_CALL_MS is about), so only a look begun after this call may answer it. Without one, a
 * caller late on every call would never be answered: each call's pass confirms only for the
 * next call, late again. So the call waits for that look, as CanUpdateMachine waits for its
 * probe: its pass goes first in the queue (a driven engine runs it now) and the call waits at
 * most probe_wait_ms for it to end. True when that pass concluded done or a sticky Failure for
 * this call (the gate says so; a "done" is then used up). Caller holds the lock, released
 * while waiting. */
static bool late_call_waits(struct hv_engine *e, struct entry *x, const struct hv_hw *desired,
                            const struct hv_settings *s, bool retried, uint64_t prev_seq)
{
    uint64_t mine = x->call_seq;
    int64_t limit = eng_now_ms(e) + e->cfg.probe_wait_ms;
    x->waiters++;
    eng_run_first(e, x);
    while (x->answer_seq < mine && !e->stopping && !e->cfg.drive && limit - eng_now_ms(e) > 0)
        hv_cond_wait_until(&e->pass_cond, &e->lock, limit);
    x->waiters--;
    if (x->answer_seq < mine || x->call_seq != mine)
        return false; /* no look since, or another call came meanwhile: it answers */
    struct eng_gate_in g = gate_in(x, desired, s, retried, prev_seq, true);
    enum eng_gate gate = eng_answer_gate(&g);
    return gate == ENG_GATE_DONE || (gate == ENG_GATE_KNOWN && g.failure);
}

/* What CAPI's call for desired under s told, and what it was answered (out, at now): the
 * entry's record of its last call. Caller holds the lock. */
static void note_call(struct hv_engine *e, struct entry *x, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      const struct hv_update_result *out, int64_t now)
{
    x->expect_ms = out->failure ? 0 : (int64_t)out->retry_after_s * 1000;
    x->told_failure = out->failure;
    x->call_ms = now;
    x->call_unix_s = eng_unix_s(e);
    /* A probe cached for other hardware was taken before this call told of CAPI's move to
     * this one: CAPI may go back to that hardware, and by then another replica may have begun
     * this one (a step this process has not seen yet); CanUpdateMachine looks again and plans
     * from every state this operation may leave (held-out seed 5483754: A covered at r0 from
     * its probe of 12.0 s, B stepped at r1, UpdateMachine for B at r0 at 15.2 s, back to A at
     * r0 at 15.9 s answered covered from the probe of 12.0 s, and r1 refused A's vCPU shrink
     * under Never) */
    eng_probe_expire_other(x, desired);
    x->desired = *desired;
    x->have_desired = true;
    x->s = *s;
    x->ref = *ref; /* same VM (the key), but the profile's disk selector may have changed */
}

void hv_engine_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      struct hv_update_result *out)
{
    struct hv_engine *e = ctx;
    char why[300];
    struct hv_backend *be = eng_backend_for(e, p, ref, why, sizeof(why));
    if (!be) {
        out->failure = true;
        out->retry_after_s = 0;
        snprintf(out->message, sizeof(out->message), "%s", why);
        return;
    }
    char key[HV_KEY_MAX];
    eng_make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    eng_sweep(e, false);
    struct entry *x = eng_entry_for(e, key, be, ref, false);
    if (!x) { /* the table is full of VMs with work in flight: CAPI retries with back-off */
        pthread_mutex_unlock(&e->lock);
        out->failure = true;
        out->retry_after_s = 0;
        out->settling = false;
        snprintf(
            out->message, sizeof(out->message), "%s",
            HV_MSG("hvupdater holds engine.maxEntries VMs with work in flight already; retry"));
        return;
    }
    int64_t now = eng_now_ms(e);
    uint64_t prev_seq = x->call_seq; /* the previous call's number */
    x->call_seq++;
    /* CAPI retries a Failure at its own back-off, at no pace this process asked for */
    bool retried = x->have_desired && hv_hw_equal(&x->desired, desired) && x->told_failure;
    bool late = false;
    if (!x->have_desired || !hv_hw_equal(&x->desired, desired)) {
        x->confirm_seq = 0; /* other hardware: nothing seen so far confirms it */
    } else if (now - x->call_ms >= x->expect_ms + LATE_CALL_MS) {
        x->confirm_seq = 0; /* late: CAPI may have been through other states elsewhere */
        late = true;
    }
    struct eng_gate_in g = gate_in(x, desired, s, retried, prev_seq, late);
    enum eng_gate gate = eng_answer_gate(&g);
    bool answered_done = gate == ENG_GATE_DONE;
    if (answered_done) {
        /* concluded by a pass that began after a call for this hardware found it not yet
         * confirmed: what CAPI is told is what the VM showed since. Each "done" is used up,
         * so a later call (another replica may have changed the VM meanwhile) looks again. */
        *out = x->answer;
        x->confirm_seq = 0;
    } else {
        /* In progress: an older conclusion is safe; a Failure of one look, when it is news
         * (concluded by a pass begun since the previous call: not from before a call for
         * other hardware) or CAPI retries it. The sticky
         * Failure recorded on the VM is final for this hardware: like a done, not from a pass
         * begun before a call that came late or for other hardware (CAPI may have been
         * through other states elsewhere: after A -> B -> A another replica may have begun
         * this hardware anew over that record), unless it is what this process answered
         * CAPI's last call (CAPI retrying it) or a pass began since the call answered this
         * way for it (a caller late every time still gets it). */
        if (gate == ENG_GATE_KNOWN) {
            *out = x->answer;
        } else {
            if (gate == ENG_GATE_RECHECK)
                x->fail_check_seq = x->call_seq;
            out->failure = false;
            out->retry_after_s = 1;
            out->settling = false;
            snprintf(out->message, sizeof(out->message), HV_MSG("in progress: observing the VM"));
        }
        if (!x->confirm_seq)
            x->confirm_seq = x->call_seq;
    }
    note_call(e, x, ref, desired, s, out, now);
    if (!answered_done)
        x->called = true;
    /* After a "done" no pass is queued: its answer could not be used, as the next call
     * (confirm_seq is 0 again) asks for a new look anyway and queues that one. */
    if (!answered_done && x->running)
        x->again = true;
    else if (!answered_done && !x->queued) {
        if (g.known && g.waiting && !g.failure && x->answer.settling)
            eng_schedule(e, x, settle_delay_ms(x));
        else
            eng_enqueue(e, x);
    }
    /* (LOOK_FIRST: the look this call needs is the pass it just queued; see late_call_waits) */
    if (gate == ENG_GATE_LOOK_FIRST && late_call_waits(e, x, desired, s, retried, prev_seq)) {
        *out = x->answer;
        if (!out->failure)
            x->confirm_seq = 0;
        x->expect_ms = 0;
        x->told_failure = out->failure;
    }
    pthread_mutex_unlock(&e->lock);
}
