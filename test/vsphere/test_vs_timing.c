/* test_vs_timing.c: the vSphere backend against a slow simulator (ReconfigVM_Task delayed
 * 300 ms) with sessions that expire after 400 ms idle: call timeouts, waiting within a
 * bound, idle-session re-login, and the loopback costs of login and a SOAP round trip
 * (printed for the record, loosely bounded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vcsim_harness.h"
#include "vs_soap.h"
#include "vs_test.h"

#define DELAY_MS 300

static struct vcsim sim;

static int setup(void **state)
{
    static const char *const flags[] = {
        "-hosts",
        "1",
        "-vms",
        "2",
        "-vm",
        "all:memory=4096,cpus=2,memhotadd",
        "-delay",
        "ReconfigVM_Task=300ms",
        "-session-idle",
        "400ms",
        NULL,
    };
    (void)state;
    return vcsim_start(&sim, flags);
}

static int teardown(void **state)
{
    (void)state;
    vcsim_stop(&sim);
    return 0;
}

static struct hv_vm_ref ref_of(size_t vm)
{
    struct hv_vm_ref r;
    memset(&r, 0, sizeof(r));
    snprintf(r.uuid, sizeof(r.uuid), "%s", vcsim_vm(&sim, vm)->uuid);
    return r;
}

static struct hv_step live_memory(int64_t mib, int timeout_ms)
{
    struct hv_step s;
    memset(&s, 0, sizeof(s));
    s.kind = HV_STEP_LIVE_MEMORY;
    s.desired = (struct hv_hw){mib, -1, -1, -1};
    s.timeout_ms = timeout_ms;
    return s;
}

static void test_costs(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0);
    struct hv_vm_obs obs;
    struct hv_err err = {0};

    /* Session: TLS handshake, RetrieveServiceContent, Login. */
    double t0 = vcsim_now_ms();
    assert_non_null(vs_session(vs_backend_server(b, 0), 0, &err));
    double login = vcsim_now_ms() - t0;
    t0 = vcsim_now_ms();
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    double first = vcsim_now_ms() - t0;

    enum { N = 50 };
    struct vs_stats before, after;
    vs_server_stats(vs_backend_server(b, 0), &before);
    t0 = vcsim_now_ms();
    for (int i = 0; i < N; i++)
        assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    double each = (vcsim_now_ms() - t0) / N;
    vs_server_stats(vs_backend_server(b, 0), &after);
    double per_call = each / (double)((after.calls - before.calls) / N);
    fprintf(stderr,
            "# vcsim start %.0f ms; handshake+RetrieveServiceContent+Login %.1f ms; "
            "first observe %.2f ms; observe %.2f ms = %lu SOAP calls of %.2f ms\n",
            sim.start_ms, login, first, each, (after.calls - before.calls) / N, per_call);
    assert_int_equal(after.logins, before.logins); /* connection and session reused */
    assert_true(each < 250.0);
    b->ops->free(b);
}

static void test_delay_within_timeout(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    struct hv_step st = live_memory(8192, 5000);
    double t0 = vcsim_now_ms();
    int rc = b->ops->act(b, &ref, &st, &err);
    double took = vcsim_now_ms() - t0;
    if (rc != HV_OK)
        fail_msg("act: %s", err.detail);
    fprintf(stderr, "# delayed ReconfigVM_Task accepted in %.0f ms\n", took);
    assert_true(took >= DELAY_MS);
    assert_true(took < 5000);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.memory_mib, 8192);
    b->ops->free(b);
}

static void test_timeout(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(1);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    struct hv_step st = live_memory(8192, 100);
    double t0 = vcsim_now_ms();
    assert_int_equal(b->ops->act(b, &ref, &st, &err), HV_E_TIMEOUT);
    double took = vcsim_now_ms() - t0;
    fprintf(stderr, "# 100 ms step against a 300 ms call: HV_E_TIMEOUT after %.0f ms (%s)\n", took,
            err.detail);
    assert_true(took < DELAY_MS);
    /* "Timed out" is not "not done": the simulator still applies the change. */
    usleep(2 * DELAY_MS * 1000);
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_int_equal(obs.hw.memory_mib, 8192);
    b->ops->free(b);
}

static void test_idle_session(void **state)
{
    (void)state;
    struct hv_vsphere_server cfg = vcsim_server(&sim);
    struct hv_backend *b = vcsim_backend(&cfg);
    struct hv_vm_ref ref = ref_of(0);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    usleep(1000 * 1000); /* > 2 x idle timeout: the simulator drops the session */
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    struct vs_stats st;
    vs_server_stats(vs_backend_server(b, 0), &st);
    assert_int_equal(st.relogins, 1);
    b->ops->free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_costs),
        cmocka_unit_test(test_delay_within_timeout),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_idle_session),
    };
    return cmocka_run_group_tests_name("vsphere-timing", tests, setup, teardown);
}
