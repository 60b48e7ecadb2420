/* metrics.h: process-wide Prometheus counters, gauges and histograms, lock-free (atomics).
 * hv_metrics_render returns malloc'd text/plain exposition format the caller frees. */
#ifndef HV_METRICS_H
#define HV_METRICS_H

#include <stddef.h>

#include "hookname.h"

enum hv_call_status { HV_CALL_SUCCESS = 0, HV_CALL_FAILURE, HV_CALL_ERROR, HV_CALL_STATUS_COUNT };

void hv_metrics_call_start(void);
/* A finished hook call: hook, status (Success / Failure / HTTP error), seconds taken. */
void hv_metrics_call_end(enum hv_hook h, enum hv_call_status st, double seconds);
void hv_metrics_http(int code);

/* Engine: an operation reached a phase / ended with an outcome; a step took seconds. */
void hv_metrics_operation(const char *phase, const char *outcome);
void hv_metrics_step(const char *step, double seconds);
/* Engine passes: one finished; passes queued or running changed by delta; a record write. */
void hv_metrics_pass(void);
void hv_metrics_passes_pending(long delta);
void hv_metrics_record_write(void);
/* A phase move of an operation record outside the engine's table (carried out, logged). */
void hv_metrics_illegal_transition(void);
/* An engine invariant found broken (src/engine/phase.h hv_engine_check; production only). */
void hv_metrics_engine_assertion(void);
/* The machine check (kube/machinecheck.h): an API request it made; a check's verdict
 * (0 pass, 1 wait, 2 fail). */
void hv_metrics_machine_check_read(void);
void hv_metrics_machine_check(int verdict);
/* A new VM refused by the engine: its table held engine.maxEntries busy entries. */
void hv_metrics_engine_refused(void);

/* Why an operation ended in a sticky Failure: the code the engine gives every Failure beside
 * its message (docs/messages.md's templates), for counting; the message is for people and is
 * never parsed. Each code has one stable label (hv_metrics_failure_reason). */
enum hv_failure_reason {
    HV_FAIL_STEP_FAILED = 0,               /* "step ... failed N times: ..." */
    HV_FAIL_FIELD_NOT_CHANGEABLE,          /* "cannot change ..." */
    HV_FAIL_SHUTDOWN_TIMEOUT,              /* "the guest did not shut down within ..." */
    HV_FAIL_NOT_APPLIED_AFTER_POWER_CYCLE, /* "after the power cycle the hypervisor reports" */
    HV_FAIL_POWERED_ON_EXTERNALLY,         /* "the VM was powered on again before ..." */
    HV_FAIL_NO_GUEST_TOOLS,                /* "the guest cannot be asked to shut down ..." */
    HV_FAIL_LIVE_CHANGE_NOT_SEEN,          /* "the live change to ... did not show ..." */
    HV_FAIL_DEADLINE,                      /* "the change did not complete within ..." */
    HV_FAIL_PAUSED_MID_CYCLE,              /* "the VM is paused in the middle of its ..." */
    HV_FAIL_START_FAILED,                  /* "the VM could not start with ..." */
    HV_FAIL_DID_NOT_STAY_ON,               /* "the VM did not stay on ..." */
    HV_FAIL_POWER_CYCLE_NOT_ALLOWED,       /* "... needs a power cycle ... powerCycle is Never" */
    HV_FAIL_OTHER, /* guest verification under Required, a VM that cannot be power-cycled */
    HV_FAIL_COUNT
};
/* A sticky operation failure, counted under its reason's label; every label is exported from
 * the start at 0. */
void hv_metrics_failure(enum hv_failure_reason why);
/* The stable label of why ("other" for a code out of range). */
const char *hv_metrics_failure_reason(enum hv_failure_reason why);

/* A failed backend call on server (libvirt URI or vCenter name). Servers registered before
 * are exported at 0 from the start. */
void hv_metrics_register_server(const char *backend, const char *server);
void hv_metrics_backend_error(const char *backend, const char *server);

/* Gauges read at render time: operations and power cycles in progress in this process. */
typedef void (*hv_metrics_gauge_fn)(void *ctx, int *operations, int *power_cycles);
void hv_metrics_set_gauges(hv_metrics_gauge_fn fn, void *ctx);
/* A call to a downstream extension (compose mode): its name, the hook, the answer status
 * (Success / Failure, or Error when there was no usable answer; error_kind then says why:
 * timeout, unreachable, tls, http, bad-answer), seconds taken. */
void hv_metrics_downstream(const char *name, const char *hook, const char *status,
                           const char *error_kind, double seconds);

/* Render everything, plus extra lines (may be NULL) appended verbatim. */
char *hv_metrics_render(const char *extra, size_t *len_out);

#endif
