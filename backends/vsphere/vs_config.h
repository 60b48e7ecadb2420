/* vs_config.h: how one vCenter is configured (struct hv_vsphere_server) and the extraConfig key
 * of the operation record: what the backend's constructor (vsphere_backend.h) and its parts
 * (vs_soap, vs_props, vs_vmops) share, so the parts need not include the constructor. */
#ifndef HV_VS_CONFIG_H
#define HV_VS_CONFIG_H

#include <stddef.h>

struct hv_err;

/* Credentials looked up per identity (identityFrom "capv"): fill user and pass (NUL-terminated,
 * at most ulen/plen bytes) for the server named server and the identity key (the machine's
 * "namespace/cluster"), or return an hv_errcode with err->detail for logs (never the
 * credentials). Called at each vCenter login of that identity's session, on a worker or probe
 * thread, never on a hook's thread; it must answer within timeout_ms. */
typedef int (*hv_vs_creds_fn)(void *ctx, const char *server, const char *identity, char *user,
                              size_t ulen, char *pass, size_t plen, int timeout_ms,
                              struct hv_err *err);

struct hv_vsphere_server {
    const char *name;          /* matched against the infra spec's `server` (CAPV
                                  VSphereMachine.spec.server); "" = host part of url */
    const char *url;           /* https://host[:port]/sdk */
    const char *username_file; /* files from a mounted Secret; contents trimmed of trailing
                                  newline, read at every login */
    const char *password_file;
    const char *username;     /* alternative to username_file (lab CLI) */
    const char *thumbprint;   /* SHA-1 or SHA-256 hex, colons optional, case-insensitive */
    const char *ca_file;      /* PEM bundle */
    int insecure_skip_verify; /* only when explicitly set; logged loudly by the caller */
    /* A request's VSphereMachine.spec.thumbprint may pin this server's certificate (when the
     * entry sets no thumbprint, CA file or insecure_skip_verify); 0: it is never used, the
     * system CAs verify the server (issue 28: the request's word replaced CA and name checks) */
    int allow_request_thumbprint;
    int call_timeout_ms; /* per SOAP call, default 10000 */
    /* Optional: credentials per cluster instead of username(_file)/password_file. Each
     * machine's cluster then gets a session of its own; the files, when also given, serve
     * machines whose cluster names no identity (creds returns HV_E_NOT_FOUND). */
    hv_vs_creds_fn creds;
    void *creds_ctx;
    const char *identity; /* set by the backend on a per-identity session; NULL otherwise */
};

/* The extraConfig key holding hvupdater's operation record. */
#define HV_VSPHERE_RECORD_KEY "hvupdater.operation"

#endif
