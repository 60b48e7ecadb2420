/* server.c: libmicrohttpd glue. One small state struct per request (route, body buffer,
 * start time), freed by MHD's completion callback. Bodies are capped while they stream in,
 * so an oversized request never costs more than the cap. Hook work is in hooks.c.
 *
 * Connections: the acceptor (acceptor.h) owns the listening socket and hands each connection
 * to MHD_add_connection, which spreads them over the worker threads by descriptor number
 * (MHD's own accept let whichever worker woke first take a burst of them).
 *
 * Abuse limits: MHD caps connections per client address, the acceptor those in total (it
 * stops accepting at the total, so further clients wait in the listen queue); every connection also
 * has a deadline (conntrack.h) by which its next step must be done: the TLS
 * handshake and the first request head within head_timeout of the accept, the body and the
 * answer within IO_TIMEOUT_S of the head, the next head within IO_TIMEOUT_S of the previous
 * answer. MHD's own timeout only counts idle time, so a byte now and then would keep a
 * connection forever; conntrack.c's thread shuts down the socket of a connection past its
 * deadline and MHD then closes it as if the client had. Framing that RFC 9112 section 6.3
 * calls ambiguous (differing Content-Length values, Transfer-Encoding with Content-Length or
 * not ending in chunked), whitespace between a field name and its colon (section 5.1),
 * whitespace in the request target (section 3) and a missing or repeated Host (section 3.2)
 * are answered 400 and the connection closed. A Content-Length that libmicrohttpd cannot
 * parse (`2, 2`, `2x`, `-2`) is answered by libmicrohttpd itself, before on_request: 0.9.75
 * sends two 400 heads there (see test/integration/abuse_test.py, case framing). */
#include "server.h"
#include "json.h"
#include "hv_clock.h"
#include "log.h"
#include "metrics.h"
#include "acceptor.h"
#include "conntrack.h"
#include "respond.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HOOKS_PREFIX "/hooks.runtime.cluster.x-k8s.io/v1alpha1/"

enum route { R_NONE = 0, R_HOOK, R_HEALTHZ, R_READYZ, R_METRICS };

/* Idle timeout (MHD's) and the deadline for a body plus answer, or for the next head of a
 * keep-alive connection. */
#define IO_TIMEOUT_S 60

struct hv_server {
    struct MHD_Daemon *d;
    char *client_ca_pem; /* MHD_OPTION_HTTPS_MEM_TRUST keeps the pointer */
    struct hv_tls *tls;
    struct hv_server_opts o;
    char ca_file[512];
    char max_body_text[32];
    /* Bodies of hook calls in flight, in bytes reserved as their heads (Content-Length) or
     * chunks arrive, and the budget for them: over it a call is answered 503 with
     * Retry-After. With the JSON node budget (json.h) this bounds the memory that request
     * bodies and their parse trees can take at once, whatever the clients send. */
    atomic_size_t inflight;
    size_t inflight_cap;
    atomic_bool ready;
    unsigned port;
    struct hv_conntrack *conns; /* the connections' deadlines (conntrack.h) */
    struct hv_acceptor *acc;    /* the listening socket and its accepting thread */
};

struct req {
    enum route route;
    enum hv_hook hook;
    char *body;
    size_t len, cap;
    struct timespec start;
    bool answered;
    /* An error found before the body was read: the body is read and dropped (at most
     * drain_cap bytes), then the error is answered, so that it reaches the client instead of
     * being lost to the TCP reset a close with unread input causes. */
    int pending_code;
    const char *pending_a, *pending_b, *pending_allow;
    size_t drained;
    size_t reserved; /* bytes of srv->inflight this request holds */
    bool close;      /* answer with Connection: close (framing we cannot trust) */
};

/* Reserve n more bytes of the in-flight body budget for r; false (nothing reserved) when
 * that would go over it. */
static bool inflight_reserve(struct hv_server *srv, struct req *r, size_t n)
{
    size_t now = atomic_load(&srv->inflight);
    do {
        if (n > srv->inflight_cap || now > srv->inflight_cap - n)
            return false;
    } while (!atomic_compare_exchange_weak(&srv->inflight, &now, now + n));
    r->reserved += n;
    return true;
}

static void inflight_release(struct hv_server *srv, struct req *r)
{
    if (r->reserved)
        atomic_fetch_sub(&srv->inflight, r->reserved);
    r->reserved = 0;
}

#define BUSY_MESSAGE HV_MSG("server busy: too many request bytes in flight; retry")

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Map a path (query already stripped by MHD) to a route; hook names are case-insensitive. */
static enum route match(const char *url, enum hv_hook *hook)
{
    if (!strcmp(url, "/healthz"))
        return R_HEALTHZ;
    if (!strcmp(url, "/readyz"))
        return R_READYZ;
    if (!strcmp(url, "/metrics"))
        return R_METRICS;
    size_t pl = strlen(HOOKS_PREFIX);
    if (strncasecmp(url, HOOKS_PREFIX, pl))
        return R_NONE;
    const char *rest = url + pl;
    for (int h = 0; h < HV_HOOK_COUNT; h++) {
        char want[128];
        if (h == HV_HOOK_DISCOVERY)
            snprintf(want, sizeof(want), "discovery");
        else
            snprintf(want, sizeof(want), "%s/%s", hv_hook_name((enum hv_hook)h),
                     hv_hook_handler_name((enum hv_hook)h));
        if (!strcasecmp(rest, want)) {
            *hook = (enum hv_hook)h;
            return R_HOOK;
        }
    }
    return R_NONE;
}

static enum MHD_Result reply(struct MHD_Connection *c, struct req *r, int code, const char *type,
                             char *body_take, size_t len, const char *allow)
{
    bool made;
    enum MHD_Result rc =
        hv_respond(c, (unsigned)code, type, body_take, len, allow, r->close, &made);
    if (!made)
        return rc;
    r->answered = true;
    hv_metrics_http(code);
    return rc;
}

/* A one-line plain-text error; hook routes count it as an Error call. */
static enum MHD_Result fail(struct MHD_Connection *c, struct req *r, int code, const char *a,
                            const char *b, const char *allow)
{
    char line[400];
    snprintf(line, sizeof(line), "%s%s", a, b ? b : "");
    size_t n = strlen(line);
    if (n + 1 < sizeof(line))
        line[n++] = '\n';
    char *body = malloc(n);
    if (!body)
        return MHD_NO;
    memcpy(body, line, n);
    /* Client errors at warn, server errors at error; hook routes also count the call. */
    enum hv_log_level lvl = code >= 500 ? HV_LOG_ERROR : HV_LOG_WARN;
    double s = since(&r->start);
    char code_s[8], ms[32];
    snprintf(code_s, sizeof(code_s), "%d", code);
    snprintf(ms, sizeof(ms), "%.3f", s * 1e3);
    line[n - 1] = '\0';
    if (r->route == R_HOOK) {
        hv_metrics_call_end(r->hook, HV_CALL_ERROR, s);
        hv_log(lvl, "hook", "hook", hv_hook_name(r->hook), "status", "Error", "#http", code_s,
               "#ms", ms, "message", line, (char *)NULL);
    } else {
        hv_log(lvl, "http-error", "#http", code_s, "#ms", ms, "message", line, (char *)NULL);
    }
    return reply(c, r, code, "text/plain; charset=utf-8", body, n, allow);
}

static enum MHD_Result text(struct MHD_Connection *c, struct req *r, int code, const char *s)
{
    char *b = strdup(s);
    return b ? reply(c, r, code, "text/plain; charset=utf-8", b, strlen(b), NULL) : MHD_NO;
}

char *hv_server_metrics(struct hv_server *srv, size_t *len)
{
    char extra[1024];
    snprintf(extra, sizeof(extra),
             "# HELP hvupdater_request_body_bytes_in_flight Bytes of hook request bodies "
             "being received or served.\n"
             "# TYPE hvupdater_request_body_bytes_in_flight gauge\n"
             "hvupdater_request_body_bytes_in_flight %zu\n"
             "# HELP hvupdater_request_body_bytes_in_flight_limit Over it a hook call is "
             "answered 503.\n"
             "# TYPE hvupdater_request_body_bytes_in_flight_limit gauge\n"
             "hvupdater_request_body_bytes_in_flight_limit %zu\n"
             "# HELP hvupdater_tls_certificate_reloads_total Serving certificate reloads.\n"
             "# TYPE hvupdater_tls_certificate_reloads_total counter\n"
             "hvupdater_tls_certificate_reloads_total %u\n"
             "# HELP hvupdater_tls_certificate_expiry_timestamp_seconds When the serving "
             "certificate now served expires (Unix time).\n"
             "# TYPE hvupdater_tls_certificate_expiry_timestamp_seconds gauge\n"
             "hvupdater_tls_certificate_expiry_timestamp_seconds %lld\n",
             atomic_load(&srv->inflight), srv->inflight_cap, hv_tls_generation(srv->tls),
             hv_tls_not_after(srv->tls));
    return hv_metrics_render(extra, len);
}

/* Whether crt names itself name: its subject's CN or a DNS, URI or e-mail SAN, exactly. */
static bool cert_has_name(gnutls_x509_crt_t crt, const char *name)
{
    char buf[512];
    size_t len = sizeof(buf);
    if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &len) == 0 &&
        len == strlen(name) && memcmp(buf, name, len) == 0)
        return true;
    for (unsigned i = 0;; i++) {
        len = sizeof(buf);
        int type = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &len, NULL);
        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            return false;
        if (type < 0)
            continue; /* too long or unreadable: not this name */
        if ((type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_URI ||
             type == GNUTLS_SAN_RFC822NAME) &&
            len == strlen(name) && memcmp(buf, name, len) == 0)
            return true;
    }
}

/* Whether crt's extended key usage allows TLS client authentication. A certificate without
 * the extension is refused: a CA certificate or a serving certificate of the same CA (the CA
 * bundle's own Certificate) is no client's. */
static bool cert_for_client_auth(gnutls_x509_crt_t crt)
{
    for (unsigned i = 0;; i++) {
        char oid[128];
        size_t len = sizeof(oid);
        int rc = gnutls_x509_crt_get_key_purpose_oid(crt, i, oid, &len, NULL);
        if (rc < 0)
            return false; /* no more (or no extension) */
        if (!strcmp(oid, GNUTLS_KP_TLS_WWW_CLIENT) || !strcmp(oid, GNUTLS_KP_ANY))
            return true;
    }
}

/* With a client CA: NULL when the peer's certificate chains to it, is meant for client
 * authentication and (with an allow-list) names one of the allowed clients; else why not. */
static const char *client_cert_problem(const struct hv_server *srv, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t session = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned n = 0;
    const gnutls_datum_t *peers = session ? gnutls_certificate_get_peers(session, &n) : NULL;
    if (!peers || n == 0)
        return HV_MSG("client certificate required");
    unsigned status = 0;
    if (gnutls_certificate_verify_peers2(session, &status) < 0 || status != 0)
        return HV_MSG("client certificate not trusted");
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return HV_MSG("client certificate not trusted");
    const char *why = NULL;
    if (gnutls_x509_crt_import(crt, &peers[0], GNUTLS_X509_FMT_DER) < 0) {
        why = HV_MSG("client certificate not trusted");
    } else if (!cert_for_client_auth(crt)) {
        why = HV_MSG("client certificate not for client authentication");
    } else if (srv->o.client_names && srv->o.client_names[0]) {
        why = HV_MSG("client certificate names no allowed client");
        for (size_t k = 0; srv->o.client_names[k]; k++)
            if (cert_has_name(crt, srv->o.client_names[k]))
                why = NULL;
    }
    gnutls_x509_crt_deinit(crt);
    return why;
}

static enum MHD_Result serve_hook(struct hv_server *srv, struct MHD_Connection *c, struct req *r)
{
    char err[200];
    hj *doc = NULL;
    /* Everything the call builds from JSON lives in this arena and goes at once at the end;
     * what leaves the call (the answer text, the engine's state) is copied out of it. */
    struct hj_arena arena;
    hj_arena_begin(&arena);
    if (r->len == 0 && r->hook == HV_HOOK_DISCOVERY) {
        doc = hj_new_object(); /* discovery needs nothing from its body */
    } else {
        doc = hj_parse(r->body ? r->body : "", r->len, err, sizeof(err));
        if (!doc) {
            hj_arena_end(&arena);
            return fail(c, r, 400, err, NULL, NULL);
        }
    }
    if (doc->type != HJ_OBJECT) {
        hj_free(doc);
        hj_arena_end(&arena);
        return fail(c, r, 400, HV_MSG("request body must be a JSON object"), NULL, NULL);
    }
    bool failure;
    size_t len;
    char msg[1024];
    struct hv_hook_who who;
    /* who only feeds the info log line: finding it costs a profile lookup and an identity */
    bool info = hv_log_enabled(HV_LOG_INFO);
    char *out = hv_hook_handle_who(srv->o.hooks, r->hook, doc, &failure, msg, sizeof(msg), &len,
                                   info ? &who : NULL);
    hj_free(doc);
    hj_arena_end(&arena);
    if (!out)
        return fail(c, r, 500, HV_MSG("out of memory"), NULL, NULL);
    double s = since(&r->start);
    hv_metrics_call_end(r->hook, failure ? HV_CALL_FAILURE : HV_CALL_SUCCESS, s);
    if (info && r->hook == HV_HOOK_DISCOVERY) {
        char ms[32];
        snprintf(ms, sizeof(ms), "%.3f", s * 1e3);
        hv_log(HV_LOG_INFO, "hook", "hook", hv_hook_name(r->hook), "status",
               failure ? "Failure" : "Success", "#http", "200", "#ms", ms, "message", msg,
               (char *)NULL);
    } else if (info) {
        char ms[32];
        snprintf(ms, sizeof(ms), "%.3f", s * 1e3);
        /* the Machine (MachineSet) as namespace/name and its Cluster: objects in the capi
         * log format, as CAPI's own lines name them */
        hv_log(HV_LOG_INFO, "hook", "hook", hv_hook_name(r->hook), "status",
               failure ? "Failure" : "Success", "#http", "200", "#ms", ms, "message", msg,
               r->hook == HV_HOOK_CAN_UPDATE_MACHINE_SET ? "@MachineSet" : "@Machine", who.machine,
               "@Cluster", who.cluster, "infra", who.infra, "vm", who.vm, (char *)NULL);
    }
    return reply(c, r, 200, "application/json", out, len, NULL);
}

/* How much of a body is read and dropped for an error answer before giving up on it. */
static size_t drain_cap(const struct hv_server *srv)
{
    size_t cap = srv->o.max_body * 4;
    return cap < (16u << 20) ? (16u << 20) : cap;
}

static void pend(struct req *r, int code, const char *a, const char *b, const char *allow)
{
    r->pending_code = code;
    r->pending_a = a;
    r->pending_b = b;
    r->pending_allow = allow;
}

struct framing {
    int n_cl, n_te, n_host;
    bool cl_bad, cl_differ, te_not_chunked, name_space;
    unsigned long long cl;
};

/* Content-Length: digits only; a comma-separated list counts as that many fields. */
static void framing_cl(struct framing *f, const char *v)
{
    while (*v) {
        v += strspn(v, " \t");
        size_t n = strspn(v, "0123456789");
        if (n == 0 || n > 19) {
            f->cl_bad = true;
            return;
        }
        unsigned long long x = strtoull(v, NULL, 10);
        if (f->n_cl++ && x != f->cl)
            f->cl_differ = true;
        f->cl = x;
        v += n;
        v += strspn(v, " \t");
        if (*v == ',')
            v++;
        else if (*v) {
            f->cl_bad = true;
            return;
        }
    }
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    struct framing *f = cls;
    if (!key || !value)
        return MHD_YES;
    /* RFC 9112 section 5.1: no whitespace between a field name and its colon (libmicrohttpd
     * keeps it in the name instead of refusing the request) */
    if (key[strcspn(key, " \t")])
        f->name_space = true;
    if (!strcasecmp(key, MHD_HTTP_HEADER_HOST))
        f->n_host++;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        framing_cl(f, value);
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        /* The last coding must be chunked (and only chunked is supported). */
        f->n_te++;
        const char *v = value + strspn(value, " \t");
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n != 7 || strncasecmp(v, "chunked", 7))
            f->te_not_chunked = true;
    }
    return MHD_YES;
}

/* What on_uri leaves in *con_cls for a request line whose target holds whitespace. */
static char bad_target;

/* MHD_OPTION_URI_LOG_CALLBACK: sees the request target as sent, before MHD splits off the
 * query and unescapes it; its result is the request's first *con_cls. libmicrohttpd 0.9.75
 * takes the last space of the request line as the one before the version, so the target
 * of 'GET /a b HTTP/1.1' is '/a b'. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    return uri[strcspn(uri, " \t")] ? &bad_target : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    struct hv_server *srv = cls;
    struct req *r = *con_cls;
    if (!r || r == (void *)&bad_target) {
        bool target_ws = r != NULL;
        r = calloc(1, sizeof(*r));
        *con_cls = r;
        if (!r)
            return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &r->start);
        r->route = match(url, &r->hook);
        if (r->route == R_HOOK)
            hv_metrics_call_start();
        hv_conn_deadline(c, IO_TIMEOUT_S);
        hv_conn_busy(c, true);
        struct framing f = {0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &f);
        if (target_ws) { /* RFC 9112 section 3: an invalid request line */
            r->close = true;
            return fail(c, r, 400, HV_MSG("malformed request line: whitespace in the target"), NULL,
                        NULL);
        }
        /* RFC 9112 section 3.2: exactly one Host in HTTP/1.1, at most one in HTTP/1.0 */
        if (f.n_host > 1 || (!f.n_host && strcmp(version, MHD_HTTP_VERSION_1_0) != 0)) {
            r->close = true;
            return fail(c, r, 400, HV_MSG("malformed header: Host missing or repeated"), NULL,
                        NULL);
        }
        if (f.name_space) {
            r->close = true;
            return fail(c, r, 400, HV_MSG("malformed header: whitespace before the colon"), NULL,
                        NULL);
        }
        if (f.cl_bad || f.cl_differ || f.n_te > 1 || f.te_not_chunked || (f.n_te && f.n_cl)) {
            r->close = true; /* where this body ends is not known: no next request */
            return fail(c, r, 400,
                        f.n_te ? HV_MSG("ambiguous framing: Transfer-Encoding must be chunked "
                                        "alone, without Content-Length")
                               : HV_MSG("ambiguous framing: Content-Length values differ or are "
                                        "not numbers"),
                        NULL, NULL);
        }
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        unsigned long long body = cl ? strtoull(cl, NULL, 10) : 0;
        bool want_post = r->route == R_HOOK;
        bool is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        if (r->route == R_METRICS && srv->o.metrics_elsewhere)
            r->route = R_NONE;
        const char *cert_problem =
            srv->client_ca_pem && (r->route == R_HOOK || r->route == R_METRICS)
                ? client_cert_problem(srv, c)
                : NULL;
        if (r->route == R_NONE)
            pend(r, 404, HV_MSG("no such path"), NULL, NULL);
        else if (cert_problem)
            pend(r, 403, cert_problem, NULL, NULL);
        else if (want_post ? strcmp(method, "POST") != 0 : !is_get)
            pend(r, 405, HV_MSG("method not allowed: use "), want_post ? "POST" : "GET",
                 want_post ? "POST" : "GET");
        else if (body > srv->o.max_body)
            pend(r, 413, HV_MSG("request body larger than the limit of "), srv->max_body_text,
                 NULL);
        else if (body && !inflight_reserve(srv, r, (size_t)body))
            pend(r, 503, BUSY_MESSAGE, NULL, NULL); /* the body is read and dropped */
        /* No body coming, or too much to read for nothing: answer now. */
        if (r->pending_code && ((!body && !te) || body > drain_cap(srv)))
            return fail(c, r, r->pending_code, r->pending_a, r->pending_b, r->pending_allow);
        return MHD_YES;
    }
    if (r->answered) { /* an early answer: drop whatever else the client sends */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->pending_code && r->len + *upload_size > srv->o.max_body) {
            pend(r, 413, HV_MSG("request body larger than the limit of "), srv->max_body_text,
                 NULL);
            r->drained = r->len;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
            inflight_release(srv, r);
        }
        /* a chunked body (no Content-Length) reserves its bytes as they come */
        if (!r->pending_code && r->len + *upload_size > r->reserved &&
            !inflight_reserve(srv, r, r->len + *upload_size - r->reserved)) {
            pend(r, 503, BUSY_MESSAGE, NULL, NULL);
            r->drained = r->len;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
            inflight_release(srv, r);
        }
        if (r->pending_code) {
            r->drained += *upload_size;
            *upload_size = 0;
            return r->drained > drain_cap(srv) ? MHD_NO : MHD_YES;
        }
        if (r->len + *upload_size + 1 > r->cap) {
            size_t ncap = (r->len + *upload_size + 1) * 2;
            if (ncap > srv->o.max_body + 1)
                ncap = srv->o.max_body + 1;
            char *nb = realloc(r->body, ncap);
            if (!nb)
                return MHD_NO;
            r->body = nb;
            r->cap = ncap;
        }
        memcpy(r->body + r->len, upload_data, *upload_size);
        r->len += *upload_size;
        r->body[r->len] = '\0';
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->pending_code)
        return fail(c, r, r->pending_code, r->pending_a, r->pending_b, r->pending_allow);
    switch (r->route) {
    case R_HEALTHZ:
        return text(c, r, 200, "ok\n");
    case R_READYZ:
        return atomic_load(&srv->ready) ? text(c, r, 200, "ready\n")
                                        : text(c, r, 503, "not ready\n");
    case R_METRICS: {
        size_t len;
        char *m = hv_server_metrics(srv, &len);
        return reply(c, r, 200, "text/plain; version=0.0.4; charset=utf-8", m, len, NULL);
    }
    case R_HOOK:
        return serve_hook(srv, c, r);
    default:
        return fail(c, r, 404, HV_MSG("no such path"), NULL, NULL);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req *r = *con_cls;
    if (r == (void *)&bad_target) { /* on_uri's mark; on_request was not called */
        r = NULL;
        *con_cls = NULL;
    }
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        hv_conn_deadline(c, IO_TIMEOUT_S); /* for the next head on this keep-alive connection */
    hv_conn_busy(c, false);
    if (!r)
        return;
    if (r->route == R_HOOK && !r->answered) /* client went away before an answer */
        hv_metrics_call_end(r->hook, HV_CALL_ERROR, since(&r->start));
    inflight_release(cls, r);
    free(r->body);
    free(r);
    *con_cls = NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: the connection deadlines, and the count the acceptor stops
 * at (it counts a connection from its hand-off; in libmicrohttpd 0.9.75 every added connection
 * it accepted ends with a close notification, but for one its worker drops unannounced when
 * it cannot allocate the connection's memory pool: that one stays counted). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct hv_server *s = cls;
    hv_conntrack_notify(s->conns, c, socket_context, code);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        hv_acceptor_held(s->acc, -1);
}

/* The acceptor's hand-off: libmicrohttpd gives the connection to the worker its descriptor
 * number picks and closes it when it refuses it (over the per-address limit). */
static bool hand_to_mhd(void *ctx, int fd, const struct sockaddr *sa, socklen_t len)
{
    struct hv_server *s = ctx;
    return MHD_add_connection(s->d, fd, sa, len) == MHD_YES;
}

/* Let the process hold the connections it may accept (plus files for logs, backends and
 * certificates); returns how many connections fit. */
static unsigned fit_fd_limit(unsigned want)
{
    const rlim_t spare = 256;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return want;
    rlim_t need = (rlim_t)want + spare;
    if (rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        return rl.rlim_cur > spare * 2 ? (unsigned)(rl.rlim_cur - spare) : (unsigned)spare;
    return want;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    hv_log(HV_LOG_DEBUG, "http", "detail", line, (char *)NULL);
}

int hv_listen_parse(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, char *err,
                    size_t errlen)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
        strtoul(colon + 1, NULL, 10) > 65535) {
        snprintf(err, errlen, "--listen %s: want ADDR:PORT", listen);
        return -1;
    }
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof(host)) {
        snprintf(err, errlen, "--listen: address too long");
        return -1;
    }
    memcpy(host, listen, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host[0] ? host : "0.0.0.0", colon + 1, &hints, &ai) != 0 || !ai) {
        snprintf(err, errlen, "--listen %s: not a numeric address", listen);
        return -1;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sl = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

struct hv_server *hv_server_start(const struct hv_server_opts *o, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (hv_listen_parse(o->listen, &ss, &sl, err, errlen) < 0)
        return NULL;
    struct hv_server *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    /* Keys, session cookies and credentials live in this process: no core dumps, no
     * ptrace by other processes of the same user (PR_SET_DUMPABLE 0). Large allocations
     * (request bodies, parse arenas' big blocks) are mmap'd so that their memory goes back to
     * the system when the request ends instead of staying in malloc's heaps. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    s->o = *o;
    /* by default one largest body at a time, beside 1/4 of that for the usual small calls */
    s->inflight_cap = o->max_inflight ? o->max_inflight : o->max_body + o->max_body / 4;
    if (s->inflight_cap < o->max_body)
        s->inflight_cap = o->max_body; /* one largest body always fits */
    snprintf(s->max_body_text, sizeof(s->max_body_text), "%zu bytes", o->max_body);
    const char *cert = o->cert_file, *key = o->key_file;
    char cert_path[512], key_path[512];
    if (!cert && !key) {
        const char *dns[16] = {"localhost"};
        size_t n = 1;
        char hostname[256];
        if (gethostname(hostname, sizeof(hostname)) == 0 && strchr(hostname, '.') == NULL &&
            strcmp(hostname, "localhost"))
            dns[n++] = hostname;
        for (size_t k = 0; o->extra_sans && o->extra_sans[k] && n < 15; k++)
            dns[n++] = o->extra_sans[k];
        dns[n] = NULL;
        const char *ips[] = {"127.0.0.1", "::1", NULL};
        if (hv_tls_make_selfsigned(o->cert_dir, dns, ips, err, errlen) < 0)
            goto fail;
        snprintf(cert_path, sizeof(cert_path), "%s/tls.crt", o->cert_dir);
        snprintf(key_path, sizeof(key_path), "%s/tls.key", o->cert_dir);
        snprintf(s->ca_file, sizeof(s->ca_file), "%s/ca.crt", o->cert_dir);
        cert = cert_path;
        key = key_path;
    } else if (!cert || !key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        goto fail;
    }
    s->tls = hv_tls_open(cert, key, err, errlen);
    if (!s->tls)
        goto fail;
    struct MHD_OptionItem trust[] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (o->client_ca_file) {
        s->client_ca_pem = hv_tls_read_ca_bundle(o->client_ca_file, err, errlen);
        if (!s->client_ca_pem)
            goto fail;
        trust[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->client_ca_pem};
    }
    hv_tls_activate(s->tls);
    if (!s->o.head_timeout)
        s->o.head_timeout = HV_SERVER_HEAD_TIMEOUT;
    if (!s->o.max_connections)
        s->o.max_connections = HV_SERVER_MAX_CONNECTIONS;
    if (!s->o.max_per_address)
        s->o.max_per_address = HV_SERVER_MAX_PER_ADDRESS;
    unsigned threads = o->threads ? o->threads : 4;
    unsigned limit = fit_fd_limit(s->o.max_connections);
    if (limit < s->o.max_connections) {
        char want[16], got[16];
        snprintf(want, sizeof(want), "%u", s->o.max_connections);
        snprintf(got, sizeof(got), "%u", limit);
        hv_log(HV_LOG_WARN, "connection limit lowered to fit the open file limit", "#wanted", want,
               "#limit", got, (char *)NULL);
    }
    if (limit < threads)
        limit = threads;
    s->conns = hv_conntrack_start(s->o.head_timeout, err, errlen);
    if (!s->conns)
        goto fail;
    s->acc = hv_acceptor_open((struct sockaddr *)&ss, sl, limit, err, errlen);
    if (!s->acc) { /* (its reason, strerror's, is replaced by the one startup has always given) */
        snprintf(err, errlen, "cannot listen on %s (address in use or not permitted)", o->listen);
        goto fail;
    }
    /* The acceptor owns the listening socket and hands connections over (acceptor.h); it
     * keeps the total at `limit`. libmicrohttpd splits its own limit evenly over the workers
     * and checks a worker's share against the connections it has started, not those still in
     * its queue of added ones, so with `limit` it would close connections the acceptor has
     * room for (two handed to one worker with room for one, while another has room): each
     * worker may take up to `limit` here, which the total never exceeds. */
    unsigned mhd_limit = threads > 1 ? limit * threads : limit;
    unsigned flags = MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    /* Strict level 0: level 1's only checks in libmicrohttpd 0.9.75 are a Host in HTTP/1.1
     * (answered with two 400 heads back to back, the first announcing a body that is the
     * second head) and no space in the target (a close without an answer); on_request and
     * on_uri make both checks themselves and answer one 400. */
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
        MHD_OPTION_HTTPS_CERT_CALLBACK, hv_tls_cert_callback, MHD_OPTION_HTTPS_PRIORITIES,
        hv_tls_priorities(), MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)IO_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->o.max_per_address, MHD_OPTION_STRICT_FOR_CLIENT,
        (int)0, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_ARRAY, trust, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot serve on %s (the HTTP server did not start)", o->listen);
        goto fail;
    }
    if (hv_acceptor_run(s->acc, hand_to_mhd, s, err, errlen) < 0) {
        hv_conntrack_stop(s->conns);
        MHD_stop_daemon(s->d);
        goto fail;
    }
    s->port = hv_acceptor_port(s->acc);
    return s;
fail:
    hv_acceptor_free(s->acc);
    hv_conntrack_free(s->conns);
    if (s->tls) {
        hv_tls_activate(NULL);
        hv_tls_free(s->tls);
    }
    free(s->client_ca_pem);
    free(s);
    return NULL;
}

unsigned hv_server_port(const struct hv_server *s)
{
    return s->port;
}

const char *hv_server_ca_file(const struct hv_server *s)
{
    return s->ca_file[0] ? s->ca_file : NULL;
}

void hv_server_set_ready(struct hv_server *s, bool ready)
{
    atomic_store(&s->ready, ready);
}

void hv_server_limits(const struct hv_server *s, unsigned *per_address, unsigned *head_timeout)
{
    *per_address = s->o.max_per_address;
    *head_timeout = s->o.head_timeout;
}

bool hv_server_ready(const struct hv_server *s)
{
    return atomic_load(&s->ready);
}

void hv_server_stop(struct hv_server *s)
{
    if (!s)
        return;
    hv_acceptor_stop(s->acc); /* nothing is handed to libmicrohttpd after this */
    hv_conntrack_stop(s->conns);
    MHD_stop_daemon(s->d);
    hv_acceptor_free(s->acc);
    hv_conntrack_free(s->conns);
    hv_tls_activate(NULL);
    hv_tls_free(s->tls);
    free(s->client_ca_pem);
    free(s);
}
