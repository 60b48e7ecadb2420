/* statusd.h: the optional status listener (--metrics-listen / metricsListen): plain HTTP,
 * GET /metrics, /healthz and /readyz only, on an address apart from the hooks, so that what
 * may scrape metrics cannot reach UpdateMachine. It borrows the hooks server (its readiness
 * and metrics) for its whole lifetime: stop it first. */
#ifndef HV_STATUSD_H
#define HV_STATUSD_H

#include "server.h"

struct hv_statusd;

struct hv_statusd *hv_statusd_start(const char *listen, struct hv_server *srv, char *err,
                                    size_t errlen);
unsigned hv_statusd_port(const struct hv_statusd *s);
void hv_statusd_stop(struct hv_statusd *s);

#endif
