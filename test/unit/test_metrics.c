/* test_metrics.c: the metrics an operator alerts on: build info, the in-progress gauges,
 * sticky failures per stable reason (every reason exported at 0 from the start, each
 * reason code counted under its own label), backend errors per server. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static char *render(void)
{
    size_t len;
    char *m = hv_metrics_render(NULL, &len);
    assert_non_null(m);
    assert_int_equal(strlen(m), len);
    return m;
}

static void has(const char *text, const char *line)
{
    if (!strstr(text, line))
        fail_msg("metrics lack: %s", line);
}

static void test_failure_reasons(void **state)
{
    (void)state;
    /* every code, with the label it is counted under (the engine gives the code; the
     * message is never read) */
    static const struct {
        enum hv_failure_reason why;
        const char *reason;
    } cases[] = {
        {HV_FAIL_STEP_FAILED, "step_failed"},
        {HV_FAIL_FIELD_NOT_CHANGEABLE, "field_not_changeable"},
        {HV_FAIL_POWER_CYCLE_NOT_ALLOWED, "power_cycle_not_allowed"},
        {HV_FAIL_SHUTDOWN_TIMEOUT, "shutdown_timeout"},
        {HV_FAIL_NOT_APPLIED_AFTER_POWER_CYCLE, "not_applied_after_power_cycle"},
        {HV_FAIL_POWERED_ON_EXTERNALLY, "powered_on_externally"},
        {HV_FAIL_NO_GUEST_TOOLS, "no_guest_tools"},
        {HV_FAIL_LIVE_CHANGE_NOT_SEEN, "live_change_not_seen"},
        {HV_FAIL_DEADLINE, "deadline"},
        {HV_FAIL_PAUSED_MID_CYCLE, "paused_mid_cycle"},
        {HV_FAIL_START_FAILED, "start_failed"},
        {HV_FAIL_DID_NOT_STAY_ON, "did_not_stay_on"},
        {HV_FAIL_OTHER, "other"},
    };
    assert_int_equal(sizeof(cases) / sizeof(cases[0]), HV_FAIL_COUNT);
    char *before = render();
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char line[200];
        snprintf(line, sizeof(line), "hvupdater_operation_failures_total{reason=\"%s\"} 0\n",
                 cases[k].reason);
        has(before, line); /* present at zero from the start */
        assert_string_equal(hv_metrics_failure_reason(cases[k].why), cases[k].reason);
        for (size_t j = 0; j < k; j++) /* one label per code */
            assert_string_not_equal(cases[j].reason, cases[k].reason);
        hv_metrics_failure(cases[k].why);
    }
    free(before);
    /* a code out of range is counted as other */
    assert_string_equal(hv_metrics_failure_reason(HV_FAIL_COUNT), "other");
    hv_metrics_failure(HV_FAIL_COUNT);
    hv_metrics_failure(HV_FAIL_DEADLINE);
    char *after = render();
    has(after, "hvupdater_operation_failures_total{reason=\"deadline\"} 2\n");
    has(after, "hvupdater_operation_failures_total{reason=\"other\"} 2\n");
    has(after, "hvupdater_operation_failures_total{reason=\"step_failed\"} 1\n");
    free(after);
}

static void gauges(void *ctx, int *ops, int *cycles)
{
    *ops = *(int *)ctx;
    *cycles = 2;
}

static void test_gauges_build_servers(void **state)
{
    (void)state;
    char *m = render();
    has(m, "hvupdater_build_info{version=\"" HV_VERSION "\",git=\"" HV_GIT "\"} 1\n");
    has(m, "hvupdater_operations_in_progress 0\n");
    has(m, "hvupdater_power_cycles_in_progress 0\n");
    free(m);
    int ops = 3;
    hv_metrics_set_gauges(gauges, &ops);
    hv_metrics_register_server("libvirt", "qemu+tls://kvm1.example.com/system");
    hv_metrics_register_server("vsphere", "vc\"1");
    m = render();
    has(m, "hvupdater_operations_in_progress 3\n");
    has(m, "hvupdater_power_cycles_in_progress 2\n");
    has(m, "hvupdater_backend_errors_total{backend=\"libvirt\",server=\"qemu+tls://"
           "kvm1.example.com/system\"} 0\n");
    has(m, "hvupdater_backend_errors_total{backend=\"vsphere\",server=\"vc\\\"1\"} 0\n");
    free(m);
    hv_metrics_backend_error("libvirt", "qemu+tls://kvm1.example.com/system");
    hv_metrics_backend_error("libvirt", "qemu+tls://kvm1.example.com/system");
    hv_metrics_set_gauges(NULL, NULL);
    m = render();
    has(m, "hvupdater_backend_errors_total{backend=\"libvirt\",server=\"qemu+tls://"
           "kvm1.example.com/system\"} 2\n");
    has(m, "hvupdater_operations_in_progress 0\n");
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failure_reasons),
        cmocka_unit_test(test_gauges_build_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
