/* test_metrics.c: the metrics an operator alerts on: build info, the in-progress gauges,
 * sticky failures per stable reason (every reason exported at 0 from the start, each
 * catalogued failure template filed under its own reason), backend errors per server. */
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
    static const struct {
        const char *message, *reason;
    } cases[] = {
        {"step reconfigure failed 3 times: the hypervisor cannot be reached", "step_failed"},
        {"cannot change memoryMiB: shrinking memory is not supported", "field_not_changeable"},
        {"memoryMiB needs a power cycle (above the hot-add limit) and powerCycle is Never",
         "power_cycle_not_allowed"},
        {"the guest did not shut down within 300 s and powerOffMode is Soft", "shutdown_timeout"},
        {"after the power cycle the hypervisor reports memory 2048 MiB, want memory 4096 MiB",
         "not_applied_after_power_cycle"},
        {"the VM was powered on again before hvupdater could reconfigure it; update it again",
         "powered_on_externally"},
        {"the guest cannot be asked to shut down (no guest tools running) and powerOffMode is "
         "Soft",
         "no_guest_tools"},
        {"the live change to vcpus 4 did not show within 120 s (the guest did not take it); ...",
         "live_change_not_seen"},
        {"the change did not complete within 1800 s (last step: power-on)", "deadline"},
        {"the VM is paused in the middle of its power cycle (last step: shutdown) and the change "
         "did not complete within 1800 s",
         "paused_mid_cycle"},
        {"the VM could not start with memory 8192 MiB (step power-on failed 3 times: the host "
         "lacks the resources); its previous configuration (memory 4096 MiB) was restored and it "
         "was started",
         "start_failed"},
        {"the VM did not stay on: it was started 3 times with memory 8192 MiB; its previous "
         "configuration (memory 4096 MiB) was restored and it was started",
         "did_not_stay_on"},
        {"something new", "other"},
    };
    char *before = render();
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char line[200];
        snprintf(line, sizeof(line), "hvupdater_operation_failures_total{reason=\"%s\"} 0\n",
                 cases[k].reason);
        has(before, line); /* present at zero from the start */
        assert_string_equal(hv_metrics_failure_reason(cases[k].message), cases[k].reason);
        hv_metrics_failure(cases[k].message);
    }
    free(before);
    char *after = render();
    has(after, "hvupdater_operation_failures_total{reason=\"deadline\"} 1\n");
    has(after, "hvupdater_operation_failures_total{reason=\"other\"} 1\n");
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
