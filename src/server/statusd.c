/* statusd.c: see statusd.h. One small libmicrohttpd daemon (one thread); requests carry no
 * body, so each is answered on its second callback. The hook port's abuse limits hold here
 * too (kubelet's probes come here, and a liveness probe that times out restarts the pod): the
 * per-address connection cap, and a deadline for each connection's head (conntrack.h), so
 * that clients trickling bytes cannot hold every slot. */
#include "statusd.h"
#include "conntrack.h"
#include "log.h"
#include "msg.h"
#include "respond.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Connections at once; the answer's deadline after a head. */
#define STATUS_CONNECTIONS 256
#define STATUS_IO_TIMEOUT  10

struct hv_statusd {
    struct MHD_Daemon *d;
    struct hv_conntrack *conns;
    struct hv_server *srv;
    unsigned port;
};

static enum MHD_Result text(struct MHD_Connection *c, unsigned code, const char *s,
                            const char *allow)
{
    char *b = strdup(s);
    return b ? hv_respond(c, code, "text/plain; charset=utf-8", b, strlen(b), allow, false, NULL)
             : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    struct hv_statusd *s = cls;
    if (!*con_cls) { /* first call: headers only; answer on the next one */
        *con_cls = s;
        hv_conn_busy(c, true);
        hv_conn_deadline(c, STATUS_IO_TIMEOUT);
        return MHD_YES;
    }
    if (*upload_size) { /* no route takes a body: drop it */
        *upload_size = 0;
        return MHD_YES;
    }
    bool known = !strcmp(url, "/metrics") || !strcmp(url, "/healthz") || !strcmp(url, "/readyz");
    if (!known)
        return text(c, 404, HV_MSG("no such path") "\n", NULL);
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text(c, 405, HV_MSG("method not allowed: use ") "GET\n", "GET");
    if (!strcmp(url, "/healthz"))
        return text(c, 200, "ok\n", NULL);
    if (!strcmp(url, "/readyz"))
        return hv_server_ready(s->srv) ? text(c, 200, "ready\n", NULL)
                                       : text(c, 503, "not ready\n", NULL);
    size_t len;
    char *m = hv_server_metrics(s->srv, &len);
    return m ? hv_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", m, len, NULL, false,
                          NULL)
             : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    *con_cls = NULL;
    hv_conn_busy(c, false);
    hv_conn_deadline(c, STATUS_IO_TIMEOUT); /* for the next head on a keep-alive connection */
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    hv_log(HV_LOG_DEBUG, "http", "listener", "status", "detail", line, (char *)NULL);
}

struct hv_statusd *hv_statusd_start(const char *listen, struct hv_server *srv, char *err,
                                    size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char e[256];
    if (hv_listen_parse(listen, &ss, &sl, e, sizeof(e)) < 0) {
        snprintf(err, errlen, "metrics listener: %s", e);
        return NULL;
    }
    struct hv_statusd *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->srv = srv;
    unsigned per_address, head_timeout;
    hv_server_limits(srv, &per_address, &head_timeout);
    s->conns = hv_conntrack_start(head_timeout, err, errlen);
    if (!s->conns) {
        free(s);
        return NULL;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)STATUS_IO_TIMEOUT,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)STATUS_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address,
                            MHD_OPTION_NOTIFY_CONNECTION, hv_conntrack_notify, s->conns,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->d) {
        hv_conntrack_free(s->conns);
        snprintf(err, errlen,
                 "metrics listener: cannot listen on %s (address in use or not "
                 "permitted)",
                 listen);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : 0;
    return s;
}

unsigned hv_statusd_port(const struct hv_statusd *s)
{
    return s ? s->port : 0;
}

void hv_statusd_stop(struct hv_statusd *s)
{
    if (!s)
        return;
    hv_conntrack_stop(s->conns);
    MHD_stop_daemon(s->d);
    hv_conntrack_free(s->conns);
    free(s);
}
