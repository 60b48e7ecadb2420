/* test_errclass.c: the one classification of a failed hypervisor call (src/engine/errclass.c)
 * checked code by code and cell by cell, against the lists below (what docs/how-it-works.md
 * "Failed calls" shows): a code moved to another class, a cell changed, or a code added to
 * backends/backend.h without a row here fails. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "errclass.h"

/* Every code of enum hv_errcode, in its order, with its class. */
static const struct {
    enum hv_errcode code;
    enum hv_err_class cls;
} codes[] = {
    {HV_OK, HV_EC_NONE},
    {HV_E_NOT_FOUND, HV_EC_REFUSAL},
    {HV_E_UNREACHABLE, HV_EC_OUTAGE},
    {HV_E_AUTH, HV_EC_REFUSAL},
    {HV_E_INVALID_STATE, HV_EC_REFUSAL},
    {HV_E_BUSY, HV_EC_LOST_RACE},
    {HV_E_UNSUPPORTED, HV_EC_REFUSAL},
    {HV_E_RESOURCES, HV_EC_REFUSAL},
    {HV_E_TIMEOUT, HV_EC_NO_ANSWER},
    {HV_E_TLS, HV_EC_REFUSAL},
    {HV_E_CREDENTIALS, HV_EC_REFUSAL},
    {HV_E_INTERNAL, HV_EC_REFUSAL},
    {HV_E_AMBIGUOUS, HV_EC_REFUSAL},
    {HV_E_INFRA_SECRET, HV_EC_REFUSAL},
};
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

static void test_every_code_has_its_class(void **state)
{
    (void)state;
    /* the list is the enum, in order and complete: HV_E_INFRA_SECRET is the last code today (a
     * code added after it makes the list one short: add its row, and its case in errclass.c,
     * which the build asks for) */
    for (size_t k = 0; k < N_CODES; k++) {
        assert_int_equal(codes[k].code, (int)k);
        assert_int_equal(hv_err_classify(codes[k].code), codes[k].cls);
    }
    assert_int_equal(N_CODES, HV_E_INFRA_SECRET + 1);
    /* a code from nowhere (a newer backend's, memory gone bad) is a refusal, never a wait */
    assert_int_equal(hv_err_classify((enum hv_errcode)(HV_E_INFRA_SECRET + 1)), HV_EC_REFUSAL);
    assert_int_equal(hv_err_classify((enum hv_errcode) - 1), HV_EC_REFUSAL);
}

/* Every cell of the table, by class and kind of call. */
static const enum hv_err_take takes[HV_EC_COUNT][HV_EK_COUNT] = {
    /* look, record write, step */
    [HV_EC_NONE] = {HV_TAKE_FAIL, HV_TAKE_FAIL, HV_TAKE_FAIL},
    [HV_EC_OUTAGE] = {HV_TAKE_WAIT, HV_TAKE_WAIT, HV_TAKE_WAIT},
    [HV_EC_NO_ANSWER] = {HV_TAKE_WAIT, HV_TAKE_WAIT, HV_TAKE_TRY},
    [HV_EC_LOST_RACE] = {HV_TAKE_FAIL, HV_TAKE_WAIT, HV_TAKE_TRY},
    [HV_EC_REFUSAL] = {HV_TAKE_FAIL, HV_TAKE_FAIL, HV_TAKE_TRY},
};

static void test_every_cell(void **state)
{
    (void)state;
    for (int c = 0; c < HV_EC_COUNT; c++)
        for (int k = 0; k < HV_EK_COUNT; k++)
            if (hv_err_take((enum hv_err_class)c, (enum hv_err_call)k) != takes[c][k])
                fail_msg("class %d, call %d: %d, the table says %d", c, k,
                         hv_err_take((enum hv_err_class)c, (enum hv_err_call)k), takes[c][k]);
    /* out of range: the call's Failure */
    assert_int_equal(hv_err_take(HV_EC_COUNT, HV_EK_LOOK), HV_TAKE_FAIL);
    assert_int_equal(hv_err_take(HV_EC_OUTAGE, HV_EK_COUNT), HV_TAKE_FAIL);
}

/* What each code does at each kind of call, spelled out for the codes a pass waits on. */
static void test_what_each_transient_code_does(void **state)
{
    (void)state;
    /* a look that cannot reach the hypervisor or gets no answer waits (the outage bound) */
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_UNREACHABLE), HV_EK_LOOK), HV_TAKE_WAIT);
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_TIMEOUT), HV_EK_LOOK), HV_TAKE_WAIT);
    /* a step that never reached it is sent again, not a try (cc81fb0); one that timed out
     * may have been taken: a try */
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_UNREACHABLE), HV_EK_STEP), HV_TAKE_WAIT);
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_TIMEOUT), HV_EK_STEP), HV_TAKE_TRY);
    /* a record write that lost a race is made again (0a860dd) within the outage bound, as a
     * steady outage is; a step refused BUSY is a try */
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_BUSY), HV_EK_RECORD), HV_TAKE_WAIT);
    assert_int_equal(hv_err_take(hv_err_classify(HV_E_BUSY), HV_EK_STEP), HV_TAKE_TRY);
    /* every refusal is the call's Failure, or a step's try */
    for (size_t k = 0; k < N_CODES; k++) {
        if (codes[k].cls != HV_EC_REFUSAL)
            continue;
        assert_int_equal(hv_err_take(hv_err_classify(codes[k].code), HV_EK_LOOK), HV_TAKE_FAIL);
        assert_int_equal(hv_err_take(hv_err_classify(codes[k].code), HV_EK_RECORD), HV_TAKE_FAIL);
        assert_int_equal(hv_err_take(hv_err_classify(codes[k].code), HV_EK_STEP), HV_TAKE_TRY);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_has_its_class),
        cmocka_unit_test(test_every_cell),
        cmocka_unit_test(test_what_each_transient_code_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
