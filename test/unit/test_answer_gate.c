/* test_answer_gate.c: the answer gate ("done" only fresh, src/engine/answer.c
 * eng_answer_gate) over its whole state space: every combination of its ten facts (1024),
 * each checked against the rules written out here on their own, and the promises they make
 * checked as properties over all of them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "engine_internal.h"

#define N_FACTS 10

static struct eng_gate_in facts(unsigned bits)
{
    return (struct eng_gate_in){.known = bits & 1,
                                .failure = bits & 2,
                                .once = bits & 4,
                                .waiting = bits & 8,
                                .confirming = bits & 16,
                                .fresh = bits & 32,
                                .retried = bits & 64,
                                .checked = bits & 128,
                                .recent = bits & 256,
                                .late = bits & 512};
}

static void describe(char *out, size_t cap, const struct eng_gate_in *g)
{
    snprintf(out, cap,
             "known=%d failure=%d once=%d waiting=%d confirming=%d fresh=%d retried=%d "
             "checked=%d recent=%d late=%d",
             g->known, g->failure, g->once, g->waiting, g->confirming, g->fresh, g->retried,
             g->checked, g->recent, g->late);
}

/* The rules, one case at a time. */
static enum eng_gate expected(const struct eng_gate_in *g)
{
    if (!g->known)
        return ENG_GATE_OBSERVE;      /* nothing concluded for this hardware and these settings */
    if (!g->failure && !g->waiting) { /* a "done" */
        if (g->confirming && g->fresh)
            return ENG_GATE_DONE; /* a call waits for it, and its pass began after that call */
        /* stale: a new look first; a call that came late waits for it (its own pass) */
        return g->late ? ENG_GATE_LOOK_FIRST : ENG_GATE_OBSERVE;
    }
    if (!g->failure)
        return ENG_GATE_KNOWN; /* in progress: an older conclusion is safe */
    if (g->retried)
        return ENG_GATE_KNOWN; /* CAPI retries it */
    /* a Failure of one look: news to the first call after the pass that concluded it only
     * (seed 22294: a look failed, a call for other hardware came, then one for this hardware
     * again after A -> B -> A, B carried by the other replica meanwhile), or once a pass
     * looked since it was held back */
    if (g->once)
        return g->recent || g->checked ? ENG_GATE_KNOWN : ENG_GATE_RECHECK;
    /* a sticky Failure: answered when a call waits for the outcome of this hardware and its
     * pass began after that call (a call waiting does not confirm a Failure concluded
     * before it: seed 20675, the call that began the series was told "observing the VM"
     * instead of it and no pass looked before the next call) */
    if (g->confirming && g->fresh)
        return ENG_GATE_KNOWN;
    /* not so confirmed, for a late call: that call's own look first, whatever looked since
     * an earlier call (held-out seed 1495500: A -> B -> A, another replica began A anew over
     * the record the Failure came from) */
    if (g->late)
        return ENG_GATE_LOOK_FIRST;
    /* else answered once a pass began since a call was told "observing the VM" instead */
    return g->checked ? ENG_GATE_KNOWN : ENG_GATE_RECHECK;
}

static void test_every_combination(void **state)
{
    (void)state;
    int count[5] = {0};
    for (unsigned bits = 0; bits < 1u << N_FACTS; bits++) {
        struct eng_gate_in g = facts(bits);
        enum eng_gate got = eng_answer_gate(&g), want = expected(&g);
        if (got != want) {
            char d[256];
            describe(d, sizeof(d), &g);
            fail_msg("%s: gate %d, want %d", d, got, want);
        }
        assert_true(got >= ENG_GATE_DONE && got <= ENG_GATE_LOOK_FIRST);
        count[got]++;
    }
    /* DONE: known, no failure, not waiting, confirming, fresh; once, retried, checked,
     * recent, late free */
    assert_int_equal(count[ENG_GATE_DONE], 32);
    /* RECHECK: a known Failure, not retried, not checked, waiting free; sticky and not
     * confirmed by a call its pass began after (confirming and fresh not both: 3 of 4;
     * recent free), not late: 12; or of one look and not recent (confirming, fresh, late
     * free): 16 */
    assert_int_equal(count[ENG_GATE_RECHECK], 28);
    /* LOOK_FIRST, late: a "done" (known, no failure, not waiting) not fresh (confirming and
     * fresh not both: 3 of 4; once, retried, checked, recent free): 48; a sticky Failure not
     * retried and not so confirmed (3 of 4; waiting, checked, recent free): 24 */
    assert_int_equal(count[ENG_GATE_LOOK_FIRST], 72);
    assert_int_equal(count[ENG_GATE_DONE] + count[ENG_GATE_KNOWN] + count[ENG_GATE_OBSERVE] +
                         count[ENG_GATE_RECHECK] + count[ENG_GATE_LOOK_FIRST],
                     1 << N_FACTS);
}

/* The promises, as properties over the whole space. */
static void test_promises(void **state)
{
    (void)state;
    for (unsigned bits = 0; bits < 1u << N_FACTS; bits++) {
        struct eng_gate_in g = facts(bits);
        enum eng_gate got = eng_answer_gate(&g);
        char d[256];
        describe(d, sizeof(d), &g);
        /* "done" only fresh: from a conclusion for this hardware, no Failure, nothing to wait
         * for, concluded by a pass begun after the call that waits for it */
        if (got == ENG_GATE_DONE &&
            !(g.known && !g.failure && !g.waiting && g.confirming && g.fresh))
            fail_msg("%s: done not fresh", d);
        /* nothing is answered from memory for other hardware or settings */
        if (!g.known && got != ENG_GATE_OBSERVE)
            fail_msg("%s: answered without a conclusion for this hardware", d);
        /* only a Failure is ever looked at again instead of answered */
        if (got == ENG_GATE_RECHECK && !(g.known && g.failure))
            fail_msg("%s: recheck of what is no Failure", d);
        /* a Failure of one look concluded before the previous call is never answered unless
         * CAPI retries it or a pass began since a call was told "observing the VM" */
        if (got == ENG_GATE_KNOWN && g.known && g.failure && g.once && !g.recent && !g.retried &&
            !g.checked)
            fail_msg("%s: a Failure of one look from before the previous call answered", d);
        /* ... and one concluded since is answered */
        if (g.known && g.failure && g.once && g.recent && got != ENG_GATE_KNOWN)
            fail_msg("%s: a Failure of one look that is news held back", d);
        /* recent only ever decides a Failure of one look */
        struct eng_gate_in n = g;
        n.recent = !g.recent;
        if (!(g.known && g.failure && g.once) && eng_answer_gate(&n) != got)
            fail_msg("%s: recent decides what is no Failure of one look", d);
        /* a sticky Failure concluded before the call that waits is never answered unless
         * CAPI retries it or a pass began since a call was told "observing the VM" */
        if (got == ENG_GATE_KNOWN && g.known && g.failure && !g.once && !g.fresh && !g.retried &&
            !g.checked)
            fail_msg("%s: a sticky Failure from before the call answered unchecked", d);
        /* CAPI retrying a Failure it was told, or a pass begun since the check, gets it; a
         * sticky one checked before a late call only from that call's own look */
        bool sticky_late = g.known && g.failure && !g.once && g.late;
        if (g.known && g.failure && (g.retried || (g.checked && !sticky_late)) &&
            got != ENG_GATE_KNOWN)
            fail_msg("%s: a retried or checked Failure not answered", d);
        /* a sticky Failure is answered to a late call only from a pass begun after it, or
         * when CAPI retries it */
        if (got == ENG_GATE_KNOWN && sticky_late && !g.retried && !(g.confirming && g.fresh))
            fail_msg("%s: a sticky Failure from before a late call answered", d);
        /* retried and checked only ever decide a Failure */
        struct eng_gate_in h = g;
        h.retried = !g.retried;
        if (!(g.known && g.failure) && eng_answer_gate(&h) != got)
            fail_msg("%s: retried decides what is no Failure", d);
        h = g;
        h.checked = !g.checked;
        if (!(g.known && g.failure) && eng_answer_gate(&h) != got)
            fail_msg("%s: checked decides what is no Failure", d);
        /* a call waits for a look only for a "done" or a sticky Failure held back, and only
         * when it came late */
        if (got == ENG_GATE_LOOK_FIRST &&
            !(g.known && g.late && ((!g.failure && !g.waiting) || (g.failure && !g.once))))
            fail_msg("%s: a look waited for without a conclusion held back for a late call", d);
        /* late only ever decides whether a call waits for its own look */
        struct eng_gate_in l = g;
        l.late = !g.late;
        enum eng_gate lg = eng_answer_gate(&l);
        if (lg != got && got != ENG_GATE_LOOK_FIRST && lg != ENG_GATE_LOOK_FIRST)
            fail_msg("%s: late decides more than whether a late call waits for its look", d);
        /* pure: the same facts, the same answer */
        assert_int_equal(eng_answer_gate(&g), got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_combination),
        cmocka_unit_test(test_promises),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
