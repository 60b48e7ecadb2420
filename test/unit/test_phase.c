/* test_phase.c: the one writer of an operation record's phase (src/engine/phase.c): the
 * table's shape (what docs/how-it-works.md "The phase table" promises), a legal move carried
 * out, an illegal one fatal when strict (test and simulation builds) and, in production,
 * logged, counted (hvupdater_engine_illegal_transitions_total) and carried out. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics.h"
#include "phase.h"

static void test_table_shape(void **state)
{
    (void)state;
    for (int to = 0; to < HV_PH_COUNT; to++) {
        /* a new operation (none) may end in any phase; done ends the operation */
        assert_true(hv_phase_move_allowed(HV_PH_NONE, (enum hv_phase)to));
        assert_false(hv_phase_move_allowed(HV_PH_DONE, (enum hv_phase)to));
        /* a sticky Failure stays one (only its downAt clears) */
        assert_int_equal(hv_phase_move_allowed(HV_PH_FAILED, (enum hv_phase)to),
                         to == HV_PH_FAILED);
        /* planned: a new operation, or one that re-plans a power cycle (a live change past
         * its timeout, a VM started by someone else before it was reconfigured) */
        assert_int_equal(hv_phase_move_allowed((enum hv_phase)to, HV_PH_PLANNED),
                         to == HV_PH_NONE || to == HV_PH_WAIT_LIVE || to == HV_PH_RECONFIGURE ||
                             to == HV_PH_POWER_ON);
    }
    for (int from = 0; from < HV_PH_COUNT; from++) {
        /* every open phase can fail (sticky Failure, deadline) */
        if (from != HV_PH_DONE)
            assert_true(hv_phase_move_allowed((enum hv_phase)from, HV_PH_FAILED));
        /* once the VM went down for the cycle (or was found off), no live step follows */
        if (from == HV_PH_RECONFIGURE || from == HV_PH_POWER_ON) {
            assert_false(hv_phase_move_allowed((enum hv_phase)from, HV_PH_LIVE));
            assert_false(hv_phase_move_allowed((enum hv_phase)from, HV_PH_WAIT_LIVE));
        }
    }
    /* a shutdown or power-off in flight may still take the VM down: never done from there */
    assert_false(hv_phase_move_allowed(HV_PH_SHUTDOWN, HV_PH_DONE));
    assert_false(hv_phase_move_allowed(HV_PH_POWER_OFF, HV_PH_DONE));
    /* a wait-live record is followed by nothing live but the live record its own last step
     * carried it for (stored again when that step's answer was lost) */
    assert_false(hv_phase_move_allowed(HV_PH_WAIT_LIVE, HV_PH_WAIT_LIVE));
    assert_true(hv_phase_move_allowed(HV_PH_WAIT_LIVE, HV_PH_LIVE));
    /* power-off escalates from a shutdown, never back */
    assert_true(hv_phase_move_allowed(HV_PH_SHUTDOWN, HV_PH_POWER_OFF));
    assert_false(hv_phase_move_allowed(HV_PH_POWER_OFF, HV_PH_SHUTDOWN));
    assert_false(hv_phase_move_allowed(HV_PH_COUNT, HV_PH_NONE));
    assert_false(hv_phase_move_allowed(HV_PH_NONE, HV_PH_COUNT));
}

static void test_legal_move(void **state)
{
    (void)state;
    struct hv_oprecord r;
    hv_rec_clear(&r);
    hv_rec_move(&r, HV_PH_SHUTDOWN, true, 0, "test");
    assert_int_equal(r.phase, HV_PH_SHUTDOWN);
    assert_true(r.cold);
    hv_rec_move(&r, HV_PH_FAILED, true, 1234, "test");
    assert_int_equal(r.phase, HV_PH_FAILED);
    assert_int_equal(r.down_at, 1234);
    hv_rec_set_phase(&r, HV_PH_FAILED, "test"); /* cold and downAt kept */
    assert_true(r.cold);
    assert_int_equal(r.down_at, 1234);
}

/* offFirst is a power-off's own mark (TrySoft's first step, no shutdown before it): kept while
 * the phase stays power-off (a try sent again), gone with any other phase, so a power-off
 * that a later shutdown escalates to is never taken for a first step. */
static void test_off_first_is_the_power_off_s_own(void **state)
{
    (void)state;
    struct hv_oprecord r;
    hv_rec_clear(&r);
    r.off_first = true;
    hv_rec_move(&r, HV_PH_POWER_OFF, true, 0, "test: first step");
    assert_true(r.off_first);
    hv_rec_move(&r, HV_PH_POWER_OFF, true, 0, "test: sent again");
    assert_true(r.off_first);
    hv_rec_move(&r, HV_PH_RECONFIGURE, true, 0, "test: off");
    assert_false(r.off_first);
    hv_rec_clear(&r);
    r.off_first = true; /* (a stale mark is not carried into a shutdown and past it) */
    hv_rec_move(&r, HV_PH_SHUTDOWN, true, 0, "test: a shutdown");
    assert_false(r.off_first);
    hv_rec_move(&r, HV_PH_POWER_OFF, true, 0, "test: TrySoft escalates");
    assert_false(r.off_first);
}

/* The MachineHealthCheck hold's question: a cycle's steps hold it; a Failure only while the
 * shutdown or power-off it came upon (downAt) may still land, shutdownTimeoutSeconds of the
 * record's policy plus the step timeout after it (a VM left paused under it is not held for
 * ever); the defaults when the policy names no settings. */
static void test_in_power_cycle_bounded_for_a_failure(void **state)
{
    (void)state;
    struct hv_oprecord r;
    hv_rec_clear(&r);
    hv_rec_move(&r, HV_PH_SHUTDOWN, true, 0, "test");
    assert_true(hv_rec_in_power_cycle(&r, 30, 1800009999));
    hv_rec_move(&r, HV_PH_FAILED, true, 1800000000, "test: upon the shutdown");
    snprintf(r.policy, sizeof(r.policy), "IfNeeded/Soft/120/60/1800/Off");
    assert_true(hv_rec_in_power_cycle(&r, 30, 1800000089));
    assert_false(hv_rec_in_power_cycle(&r, 30, 1800000090));
    r.policy[0] = '\0'; /* (no settings named: shutdownTimeoutSeconds 300) */
    assert_true(hv_rec_in_power_cycle(&r, 30, 1800000329));
    assert_false(hv_rec_in_power_cycle(&r, 30, 1800000330));
    hv_rec_move(&r, HV_PH_FAILED, true, 0, "test: no step may land");
    assert_false(hv_rec_in_power_cycle(&r, 30, 1800000001));
}

static void test_illegal_move_strict_aborts(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        hv_phase_set_strict(true);
        struct hv_oprecord r;
        hv_rec_clear(&r);
        hv_rec_set_phase(&r, HV_PH_DONE, "test");
        hv_rec_set_phase(&r, HV_PH_LIVE, "test: done -> live");
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
}

static void test_illegal_move_lenient_counts(void **state)
{
    (void)state;
    hv_phase_set_strict(false);
    struct hv_oprecord r;
    hv_rec_clear(&r);
    hv_rec_set_phase(&r, HV_PH_DONE, "test");
    hv_rec_move(&r, HV_PH_LIVE, false, 7, "test: done -> live");
    hv_phase_set_strict(true);
    assert_int_equal(r.phase, HV_PH_LIVE); /* carried out */
    assert_int_equal(r.down_at, 7);
    size_t len;
    char *m = hv_metrics_render(NULL, &len);
    assert_non_null(m);
    if (!strstr(m, "\nhvupdater_engine_illegal_transitions_total 1\n"))
        fail_msg("the illegal move is not counted");
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_shape),
        cmocka_unit_test(test_legal_move),
        cmocka_unit_test(test_off_first_is_the_power_off_s_own),
        cmocka_unit_test(test_in_power_cycle_bounded_for_a_failure),
        cmocka_unit_test(test_illegal_move_strict_aborts),
        cmocka_unit_test(test_illegal_move_lenient_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
