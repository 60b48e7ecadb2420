/* metrics.h: process-wide Prometheus counters, gauges and histograms, lock-free (atomics).
 * hv_metrics_render returns malloc'd text/plain exposition format the caller frees. */
#ifndef HV_METRICS_H
#define HV_METRICS_H

#include <stddef.h>

#include "hooks.h"

enum hv_call_status { HV_CALL_SUCCESS = 0, HV_CALL_FAILURE, HV_CALL_ERROR, HV_CALL_STATUS_COUNT };

void hv_metrics_call_start(void);
/* A finished hook call: hook, status (Success / Failure / HTTP error), seconds taken. */
void hv_metrics_call_end(enum hv_hook h, enum hv_call_status st, double seconds);
void hv_metrics_http(int code);

/* Engine: an operation reached a phase / ended with an outcome; a step took seconds. */
void hv_metrics_operation(const char *phase, const char *outcome);
void hv_metrics_step(const char *step, double seconds);

/* A call to a downstream extension (compose mode): its name, the hook, the answer status
 * (Success / Failure, or Error when there was no usable answer; error_kind then says why:
 * timeout, unreachable, tls, http, bad-answer), seconds taken. */
void hv_metrics_downstream(const char *name, const char *hook, const char *status,
                           const char *error_kind, double seconds);

/* Render everything, plus extra lines (may be NULL) appended verbatim. */
char *hv_metrics_render(const char *extra, size_t *len_out);

#endif
