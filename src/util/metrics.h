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

/* A sticky operation failure, counted under its stable reason (derived from the message's
 * catalogued template, docs/messages.md); every reason is exported from the start at 0. */
void hv_metrics_failure(const char *message);
/* The reason label hv_metrics_failure files message under. */
const char *hv_metrics_failure_reason(const char *message);

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
