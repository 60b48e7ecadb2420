/* The power-cycle slots (src/engine/slots.c): the caps count each slot on the host it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

static void zero_engine(struct hv_engine *e, int overall, int per_host)
{
    memset(e, 0, sizeof(*e));
    e->cfg.max_power_cycles = overall;
    e->cfg.max_power_cycles_per_host = per_host;
}

/* A blind pass retakes its entry's slot on the host it recorded (workers.c passes the entry's
 * own slot_host as host): the slot must keep that host, so that the per-host cap still counts
 * it against the next VM on that host. */
static void test_retaken_slot_keeps_its_host(void **state)
{
    (void)state;
    static struct hv_engine e;
    static struct entry a, b;
    zero_engine(&e, 4, 1);
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    snprintf(a.slot_host, sizeof(a.slot_host), "%s", "esx-1");
    assert_true(eng_slot_take(&e, &a, a.slot_host, true));
    assert_true(a.slot);
    assert_string_equal(a.slot_host, "esx-1");
    assert_int_equal(e.slots_used, 1);
    /* esx-1 is at its cap of one: a second VM there waits, one elsewhere goes */
    assert_false(eng_slot_take(&e, &b, "esx-1", false));
    assert_false(b.slot);
    assert_true(eng_slot_take(&e, &b, "esx-2", false));
    assert_string_equal(b.slot_host, "esx-2");
    assert_int_equal(e.slots_used, 2);
}

/* The overall cap counts every slot, forced ones included. */
static void test_overall_cap_counts_forced_slots(void **state)
{
    (void)state;
    static struct hv_engine e;
    static struct entry a, b, c;
    zero_engine(&e, 2, 2);
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    assert_true(eng_slot_take(&e, &a, "h1", false));
    assert_true(eng_slot_take(&e, &b, "h2", true));
    assert_false(b.slot_forced);
    assert_false(eng_slot_take(&e, &c, "h3", false));
    assert_true(eng_slot_take(&e, &c, "h3", true));
    assert_true(c.slot_forced);
    assert_int_equal(e.slots_used, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retaken_slot_keeps_its_host),
        cmocka_unit_test(test_overall_cap_counts_forced_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
