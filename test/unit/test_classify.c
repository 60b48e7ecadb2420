/* test_classify.c: the classes of a reconcile round (src/engine/reconcile.c rc_classify, pure),
 * the slot need (rc_slot_need, pure) and the cycle-step row's decision for a step in flight
 * (rc_step_decide, pure): how the VM's record relates to this call, who wrote
 * it, whether the VM may still go down and until when, each case named as
 * docs/how-it-works.md "The decision table" and "Slots while a VM may go down" name it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "pass.h"
#include "phase.h"

#define NOW 200000
#define ME  "host-a:42"

static const struct hv_hw want = {
    .memory_mib = 4096, .cpus = 2, .cores_per_socket = -1, .disk_mib = -1};
static const struct hv_hw older = {
    .memory_mib = 3072, .cpus = 2, .cores_per_socket = -1, .disk_mib = -1};
static struct hv_settings s = {.shutdown_timeout_s = 60, .deadline_s = 1800};

static struct rc_call call(bool on)
{
    struct rc_call c = {
        .desired = &want, .s = &s, .owner = ME, .now = NOW, .step_timeout_s = 30, .on = on};
    snprintf(c.policy, sizeof(c.policy), "P");
    return c;
}

static struct hv_oprecord rec(const struct hv_hw *hw, enum hv_phase ph, const char *owner,
                              int64_t step_ago)
{
    struct hv_oprecord r;
    memset(&r, 0, sizeof(r));
    r.desired = *hw;
    r.phase = ph;
    r.cold = true;
    r.started_at = r.step_at = NOW - step_ago;
    snprintf(r.owner, sizeof(r.owner), "%s", owner);
    snprintf(r.policy, sizeof(r.policy), "P");
    return r;
}

/* "What happens to a VM whose shutdown this process sent before it restarted?": this
 * hardware's record, written by a previous life of this process, a step that may still land
 * (row cycle-step); past its window it may not any more. */
static void test_shutdown_of_a_previous_life(void **state)
{
    (void)state;
    struct rc_call c = call(true);
    struct rc_class k;
    struct hv_oprecord r = rec(&want, HV_PH_SHUTDOWN, "host-a:41", 10);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_THIS);
    assert_int_equal(k.owner, OWN_PREVIOUS);
    assert_int_equal(k.hazard, HZ_STEP_SENT);
    assert_true(k.cycle);
    assert_false(k.takeover);
    r = rec(&want, HV_PH_SHUTDOWN, "host-a:41", 90); /* 60 + 30: the window is over */
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.hazard, HZ_NONE);
    r = rec(&want, HV_PH_SHUTDOWN, "host-b:41", 10); /* another host: another process */
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.owner, OWN_OTHER);
}

/* Another hardware's step that may still land, or a Failure that came upon one: taken over
 * (row takeover); the VM off: no hazard (it went down). */
static void test_takeover(void **state)
{
    (void)state;
    struct rc_call c = call(true);
    struct rc_class k;
    struct hv_oprecord r = rec(&older, HV_PH_POWER_OFF, "host-b:1", 5);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_OTHER);
    assert_int_equal(k.hazard, HZ_STEP_SENT);
    assert_int_equal(k.hazard_sent, NOW - 5);
    assert_true(k.takeover);
    assert_true(k.other_inflight && k.other_open);
    r = rec(&older, HV_PH_FAILED, ME, 5);
    hv_rec_move(&r, HV_PH_FAILED, true, NOW - 20, "test: failed upon a shutdown");
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.hazard, HZ_FAILED_UPON);
    assert_int_equal(k.hazard_sent, NOW - 20);
    assert_true(k.takeover && k.other_failed);
    c = call(false);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.hazard, HZ_NONE);
    assert_false(k.takeover);
    assert_true(k.left_off);
}

/* Off in the middle of a cycle of this process or its previous life (any hardware): a new
 * operation refused over it starts it first (seed 805796); another process's, a running VM or
 * a record past its cycle: not. */
static void test_own_cycle_off(void **state)
{
    (void)state;
    struct rc_call c = call(false);
    struct rc_class k;
    struct hv_oprecord r = rec(&older, HV_PH_RECONFIGURE, ME, 5);
    r.cold = true;
    rc_classify(&r, true, &c, &k);
    assert_true(k.cycle && k.own_cycle_off);
    snprintf(r.owner, sizeof(r.owner), "host-a:7"); /* this host, another pid: a previous life */
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.owner, OWN_PREVIOUS);
    assert_true(k.own_cycle_off);
    snprintf(r.owner, sizeof(r.owner), "host-b:1");
    rc_classify(&r, true, &c, &k);
    assert_false(k.own_cycle_off);
    r = rec(&older, HV_PH_RECONFIGURE, ME, 5);
    r.cold = true;
    c = call(true);
    rc_classify(&r, true, &c, &k);
    assert_false(k.own_cycle_off);
    r = rec(&older, HV_PH_DONE, ME, 5);
    c = call(false);
    rc_classify(&r, true, &c, &k);
    assert_false(k.own_cycle_off);
}

/* Another process's operation for other hardware begun at or after the call this pass
 * follows: CAPI asked that replica for it since, so this pass begins nothing over it (seed
 * 200151); begun before the call (A -> B -> A), this process's own, or the engine's own pass
 * (no call): not superseded. */
static void test_superseded(void **state)
{
    (void)state;
    struct rc_call c = call(true);
    c.called_at = NOW - 3;
    struct rc_class k;
    struct hv_oprecord r = rec(&older, HV_PH_DONE, "host-b:1", 2);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_OTHER);
    assert_true(k.superseded);
    r = rec(&older, HV_PH_SHUTDOWN, "host-b:1", 3); /* the call's second: order unknown */
    rc_classify(&r, true, &c, &k);
    assert_true(k.superseded);
    r = rec(&older, HV_PH_DONE, "host-b:1", 4); /* begun before the call */
    rc_classify(&r, true, &c, &k);
    assert_false(k.superseded);
    r = rec(&older, HV_PH_DONE, ME, 2); /* this process's own */
    rc_classify(&r, true, &c, &k);
    assert_false(k.superseded);
    r = rec(&want, HV_PH_DONE, "host-b:1", 2); /* this hardware's */
    rc_classify(&r, true, &c, &k);
    assert_false(k.superseded);
    c.called_at = 0; /* the engine's own pass: it begins nothing anyway */
    r = rec(&older, HV_PH_DONE, "host-b:1", 2);
    rc_classify(&r, true, &c, &k);
    assert_false(k.superseded);
}

/* This hardware's record: open, done, failed (sticky) or failed under other settings. */
static void test_relation(void **state)
{
    (void)state;
    struct rc_call c = call(true);
    struct rc_class k;
    struct hv_oprecord r = rec(&want, HV_PH_FAILED, ME, 5);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_THIS_FAILED);
    snprintf(r.policy, sizeof(r.policy), "Q");
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_THIS_REFAILED);
    r = rec(&want, HV_PH_DONE, ME, 5);
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_THIS_DONE);
    memset(&r, 0, sizeof(r));
    rc_classify(&r, false, &c, &k);
    assert_int_equal(k.rel, REL_NONE);
    assert_int_equal(k.hazard, HZ_NONE);
}

/* The slot need: a gate takes one (over the caps for a cycle under way; anew, after giving
 * back what is held, for a cycle begun anew); the end gives it back only when the record was
 * read and shows nothing that needs it, or the VM is gone. */
static void test_slot_need(void **state)
{
    (void)state;
    struct rc_slot_facts f = {.gate = GATE_NEW};
    assert_int_equal(rc_slot_need(&f), SLOT_TAKE);
    f.gate = GATE_UNDER_WAY;
    assert_int_equal(rc_slot_need(&f), SLOT_FORCE);
    /* a cycle begun anew (a new one, or a first step sent again as one): what is held goes
     * back and one is taken within the caps as they are now */
    f = (struct rc_slot_facts){.gate = GATE_ANEW};
    assert_int_equal(rc_slot_need(&f), SLOT_RENEW);
    /* the operation ends (done, its sticky Failure again): given back, whatever else holds */
    f = (struct rc_slot_facts){.gate = GATE_ENDED, .seen = true, .cycling = true};
    assert_int_equal(rc_slot_need(&f), SLOT_FREE);
    f = (struct rc_slot_facts){.seen = true};
    assert_int_equal(rc_slot_need(&f), SLOT_FREE);
    f.cycling = true;
    assert_int_equal(rc_slot_need(&f), SLOT_AS_IS);
    f.stalled = true; /* paused mid-cycle: back */
    assert_int_equal(rc_slot_need(&f), SLOT_FREE);
    f = (struct rc_slot_facts){.seen = true, .record_down = true};
    assert_int_equal(rc_slot_need(&f), SLOT_AS_IS);
    /* a VM its previous life's cycle left off, not taken over by this pass: kept (seed
     * 1431952), unless the cycle cannot progress (paused) */
    f = (struct rc_slot_facts){.seen = true, .previous_off = true};
    assert_int_equal(rc_slot_need(&f), SLOT_AS_IS);
    f.stalled = true;
    assert_int_equal(rc_slot_need(&f), SLOT_FREE);
    f = (struct rc_slot_facts){.seen = true, .going_down = true};
    assert_int_equal(rc_slot_need(&f), SLOT_FORCE);
    f = (struct rc_slot_facts){.left_off = true};
    assert_int_equal(rc_slot_need(&f), SLOT_FORCE);
    f = (struct rc_slot_facts){.seen = false}; /* the record was not read: kept */
    assert_int_equal(rc_slot_need(&f), SLOT_AS_IS);
    /* the look found no VM: given back, whatever an earlier round of the pass saw */
    f = (struct rc_slot_facts){.gone = true, .left_off = true, .record_down = true};
    assert_int_equal(rc_slot_need(&f), SLOT_FREE);
}

/* This process's cycle for other hardware that the VM came through (seed 719176: the shutdown
 * landed, the operator powered the VM on, the rollout had changed meanwhile): it runs and no
 * step of it may still land, so the cycle is spent (an own pass refused over it keeps no slot
 * for it); within the step's window, off, or for this hardware it is a cycle in flight. */
static void test_other_cycle_spent(void **state)
{
    (void)state;
    struct rc_call c = call(true);
    struct rc_class k;
    struct hv_oprecord r = rec(&older, HV_PH_SHUTDOWN, ME, 90); /* 60 + 30: past the window */
    rc_classify(&r, true, &c, &k);
    assert_int_equal(k.rel, REL_OTHER);
    assert_int_equal(k.owner, OWN_SELF);
    assert_true(k.cycle);
    assert_true(k.other_cycle_spent);
    r = rec(&older, HV_PH_POWER_ON, ME, 5); /* its power-on done, the VM runs */
    rc_classify(&r, true, &c, &k);
    assert_true(k.other_cycle_spent);
    r = rec(&older, HV_PH_SHUTDOWN, ME, 10); /* it may still land: taken over */
    rc_classify(&r, true, &c, &k);
    assert_false(k.other_cycle_spent);
    assert_true(k.takeover);
    r = rec(&want, HV_PH_SHUTDOWN, ME, 90); /* this hardware's: its own passes carry it */
    rc_classify(&r, true, &c, &k);
    assert_false(k.other_cycle_spent);
    c = call(false); /* off mid-cycle: the VM must come back on */
    r = rec(&older, HV_PH_SHUTDOWN, ME, 90);
    rc_classify(&r, true, &c, &k);
    assert_false(k.other_cycle_spent);
}

/* The cycle-step row with its step in flight (rc_step_decide), over every combination of its
 * facts, as a pass runs it: decided, and when it asks for a look into the guest, decided again
 * with each thing the look may show. Checked against the row's promises, not its rules. */
static enum rc_step_act step_after(struct rc_step_facts f, enum rc_shows look, bool *looked)
{
    enum rc_step_act a = rc_step_decide(&f);
    *looked = a == STEP_LOOK;
    if (a != STEP_LOOK)
        return a;
    f.shows = look;
    a = rc_step_decide(&f);
    assert_int_not_equal(a, STEP_LOOK); /* one look a pass */
    return a;
}

static void test_step_in_flight_promises(void **state)
{
    (void)state;
    int seen[STEP_POWER_OFF + 1] = {0};
    for (unsigned bits = 0; bits < 1u << 10; bits++) {
        for (int look = SHOWS_NO; look <= SHOWS_YES; look++) {
            struct rc_step_facts f = {
                .power_off = bits & 1,
                .first = bits & 2,
                .failed_try = bits & 4,
                .busy = bits & 8,
                .can_ask = bits & 16,
                .unanswered = bits & 32,
                .off_late = bits & 64,
                .window_over = bits & 128,
                .may_land = bits & 256,
                .soft = bits & 512,
            };
            bool looked;
            enum rc_step_act a = step_after(f, (enum rc_shows)look, &looked);
            seen[a]++;
            bool again = f.first || f.failed_try; /* may not have gone out */
            /* this process's sight of the step: forgotten only on a first sight; not used up by
             * a pass that cannot send the step (a task holds the VM, no guest to ask: seed
             * 8544), nor by one that waits while the guest shows the change; used by a send */
            bool forgets = rc_step_forgets_sight(&f, a);
            if (forgets)
                assert_true(f.first);
            if (f.first && (f.busy || (!f.power_off && !f.can_ask)))
                assert_true(forgets);
            if (f.first && a == STEP_WAIT_SHOWN)
                assert_true(forgets);
            if (a == STEP_SEND_AGAIN || (a == STEP_POWER_OFF_AGAIN && !f.busy))
                assert_false(forgets);
            if (f.power_off) {
                /* a power-off: sent or waited for, never a look, a shutdown or a Failure */
                assert_false(looked);
                assert_true(a == STEP_WAIT_OFF || a == STEP_POWER_OFF_AGAIN);
                /* one that may not have gone out is sent when the VM can take it */
                if (again && !f.busy)
                    assert_int_equal(a, STEP_POWER_OFF_AGAIN);
                /* one that went out is waited for within stepTimeoutSeconds */
                if (!again && !f.off_late)
                    assert_int_equal(a, STEP_WAIT_OFF);
                continue;
            }
            assert_true(a != STEP_WAIT_OFF && a != STEP_POWER_OFF_AGAIN);
            bool can_send = again && f.can_ask && !f.busy;
            /* the guest is looked into before a shutdown is sent again and at the window's
             * end, and only then */
            assert_int_equal(looked, can_send || f.window_over);
            /* a guest that shows the change is not cycled: no shutdown sent again, no
             * power-off, no Failure; it goes on live once nothing sent can land */
            if (looked && look == SHOWS_YES)
                assert_int_equal(a, f.may_land ? STEP_WAIT_SHOWN : STEP_GO_LIVE);
            if (a == STEP_WAIT_SHOWN || a == STEP_GO_LIVE)
                assert_true(looked && look == SHOWS_YES);
            /* a shutdown sent again is one that may not have gone out, to a guest that can be
             * asked, the VM free */
            if (a == STEP_SEND_AGAIN)
                assert_true(can_send);
            if (can_send && look == SHOWS_NO)
                assert_int_equal(a, STEP_SEND_AGAIN);
            /* a power-off or a Failure only at the window's end, as powerOffMode says */
            if (a == STEP_FAIL)
                assert_true(f.window_over && f.soft);
            if (a == STEP_POWER_OFF)
                assert_true(f.window_over && !f.soft);
            /* one to send again that a task holding the VM keeps from being sent, none of its
             * tries unanswered, waits to be sent with its whole window, also past the window
             * (held-out seed 3303391) */
            if (again && f.busy && !f.unanswered && look == SHOWS_NO)
                assert_int_equal(a, STEP_WAIT_BUSY);
            if (a == STEP_WAIT_BUSY)
                assert_true(again && f.busy && !f.unanswered);
            /* within the window, nothing to send: waited for */
            if (!f.window_over && !can_send && !(again && f.busy && !f.unanswered))
                assert_int_equal(a, STEP_WAIT_SHUTDOWN);
            if (f.window_over && look == SHOWS_NO && !can_send &&
                !(again && f.busy && !f.unanswered))
                assert_int_equal(a, f.soft ? STEP_FAIL : STEP_POWER_OFF);
        }
    }
    for (int a = 0; a <= STEP_POWER_OFF; a++)
        if (a != STEP_LOOK) /* every act is reachable (LOOK is decided again) */
            assert_true(seen[a] > 0);
    /* held-out seed 3676195: the window over, the guest booted by the operator with the DIMM
     * and showing it: wait while the shutdown may land, then live */
    struct rc_step_facts f = {.window_over = true, .may_land = true, .can_ask = true};
    bool looked;
    assert_int_equal(step_after(f, SHOWS_YES, &looked), STEP_WAIT_SHOWN);
    f.may_land = false;
    assert_int_equal(step_after(f, SHOWS_YES, &looked), STEP_GO_LIVE);
    assert_int_equal(step_after(f, SHOWS_NO, &looked), STEP_POWER_OFF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shutdown_of_a_previous_life),
        cmocka_unit_test(test_takeover),
        cmocka_unit_test(test_relation),
        cmocka_unit_test(test_superseded),
        cmocka_unit_test(test_own_cycle_off),
        cmocka_unit_test(test_slot_need),
        cmocka_unit_test(test_other_cycle_spent),
        cmocka_unit_test(test_step_in_flight_promises),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
