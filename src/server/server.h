/* server.h: the HTTPS endpoint (libmicrohttpd, TLS 1.2+, thread pool) that routes CAPI's
 * Runtime SDK paths to hooks.c and serves /healthz, /readyz and /metrics.
 * hv_server_start borrows opts->hooks for the server's lifetime; hv_server_stop frees all. */
#ifndef HV_SERVER_H
#define HV_SERVER_H

#include "hooks.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct hv_server_opts {
    const char *listen;    /* "ADDR:PORT", "[v6]:PORT" or ":PORT"; port 0 = ephemeral */
    const char *cert_file; /* PEM chain; NULL with key_file NULL: self-signed in cert_dir */
    const char *key_file;
    const char *cert_dir;          /* where a self-signed CA and serving cert are kept */
    const char *const *extra_sans; /* NULL-terminated extra DNS names for the self-signed cert */
    size_t max_body;               /* bytes; larger bodies get 413 */
    /* bytes of hook bodies in flight at once (0: max_body * 5 / 4); over it 503 with
     * Retry-After */
    size_t max_inflight;
    unsigned threads;         /* worker threads answering requests */
    unsigned max_connections; /* in total; 0 = HV_SERVER_MAX_CONNECTIONS */
    unsigned max_per_address; /* from one client address; 0 = HV_SERVER_MAX_PER_ADDRESS */
    unsigned head_timeout;    /* s for TLS handshake + first request head; 0 = default */
    const struct hv_hooks_ctx *hooks;
    /* Client certificates (NULL: none asked for). When set, hook routes and /metrics answer
     * 403 unless the client presented a certificate that chains to a CA in this PEM file;
     * /healthz and /readyz stay open for kubelet probes. */
    const char *client_ca_file;
    /* With client_ca_file: NULL-terminated names of the clients allowed (a certificate's
     * subject CN or a DNS, URI or e-mail SAN, exact); NULL or empty: any client of that CA.
     * Either way the certificate must allow TLS client authentication (extended key usage
     * clientAuth). */
    const char *const *client_names;
    bool metrics_elsewhere; /* /metrics is served by the status listener only (statusd.h) */
};

#define HV_SERVER_MAX_CONNECTIONS 8192
#define HV_SERVER_MAX_PER_ADDRESS 128
#define HV_SERVER_HEAD_TIMEOUT    10

struct hv_server;

struct hv_server *hv_server_start(const struct hv_server_opts *o, char *err, size_t errlen);
unsigned hv_server_port(const struct hv_server *s);
/* The per-address connection cap and head timeout in force (the status listener uses the
 * same). */
void hv_server_limits(const struct hv_server *s, unsigned *per_address, unsigned *head_timeout);
/* The CA file clients should trust when the server made its own certificate, else NULL. */
const char *hv_server_ca_file(const struct hv_server *s);
void hv_server_set_ready(struct hv_server *s, bool ready);
bool hv_server_ready(const struct hv_server *s);
/* The Prometheus text of /metrics (caller frees), for either listener. */
char *hv_server_metrics(struct hv_server *s, size_t *len);
/* Parse "ADDR:PORT" / "[v6]:PORT" / ":PORT" into a socket address (numeric hosts only). */
int hv_listen_parse(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, char *err,
                    size_t errlen);
void hv_server_stop(struct hv_server *s);

#endif
