/* vs_soap.h: one vCenter server: HTTPS transport (libcurl), TLS policy, and the single
 * vim25 session all threads share.
 *
 * A vs_server owns its copies of the configuration, a curl share (DNS), a small pool of
 * easy handles (each keeps its own keep-alive connection) and the session cookie;
 * vs_server_free logs out and frees all of it. Every function is thread-safe. Credentials
 * are read from their files at each login and never kept, logged or put in hv_err.detail.
 */
#ifndef HV_VS_SOAP_H
#define HV_VS_SOAP_H

#include <stdint.h>
#include <libxml/tree.h>

#include "backend.h"
#include "vs_config.h"
#include "vs_xml.h"

/* What RetrieveServiceContent told us; stable once known. */
struct vs_content {
    char api_version[32];
    char property_collector[64];
    char search_index[64];
    char session_manager[64];
    char event_manager[64];
    char root_folder[64];  /* "" when the answer names none */
    char view_manager[64]; /* "" when the answer names none */
};

struct vs_stats {
    unsigned long calls;    /* HTTP requests sent */
    unsigned long logins;   /* successful Login calls */
    unsigned long relogins; /* logins caused by NotAuthenticated */
    unsigned long connects; /* new connections (each a TLS handshake) */
    unsigned long rechecks; /* identity credentials asked again for a live session */
    unsigned long revoked;  /* sessions logged out because their identity was refused */
    unsigned long changed;  /* sessions logged in again because their identity changed */
};

/* One parsed answer: doc is owned (vs_reply_free), body borrows the <XResponse> in it. */
struct vs_reply {
    xmlDocPtr doc;
    xmlNodePtr body;
};

struct vs_server;

struct vs_server *vs_server_new(const struct hv_vsphere_server *cfg, char *err, size_t errlen);
void vs_server_free(struct vs_server *s);
const char *vs_server_name(const struct vs_server *s);
const char *vs_server_host(const struct vs_server *s); /* host part of the URL, no port */
const char *vs_server_hostport(const struct vs_server *s);
int vs_server_timeout(const struct vs_server *s);
void vs_server_stats(struct vs_server *s, struct vs_stats *st);

/* Learn the ServiceContent and log in when needed. The result is owned by s. */
const struct vs_content *vs_session(struct vs_server *s, int timeout_ms, struct hv_err *err);
/* Send one request built with vs_env_begin/vs_env_end. A NotAuthenticated answer causes
 * one re-login and one retry. SOAP faults become err codes. timeout_ms <= 0: the server's
 * call timeout. */
int vs_call(struct vs_server *s, const char *method, const struct vs_buf *req, int timeout_ms,
            struct vs_reply *out, struct hv_err *err);
void vs_reply_free(struct vs_reply *r);

/* Monotonic milliseconds. */
int64_t vs_now_ms(void);
/* Milliseconds left until deadline (at least 1 while time remains, else 0). */
int vs_left_ms(int64_t deadline);

#endif
