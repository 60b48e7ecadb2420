/* vsphere_backend.h: the vSphere (vCenter vim25 SOAP) backend's constructor.
 *
 * hv_vsphere_new copies everything it needs from servers[]; the caller keeps ownership of
 * the array and its strings. The returned backend is freed with b->ops->free (which logs
 * out of every vCenter). One session per server is shared by all threads.
 */
#ifndef HV_VSPHERE_BACKEND_H
#define HV_VSPHERE_BACKEND_H

#include <stddef.h>

#include "backend.h"

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
    int call_timeout_ms;      /* per SOAP call, default 10000 */
};

/* NULL on a bad configuration, with a reason in err. Never contacts a server. */
struct hv_backend *hv_vsphere_new(const struct hv_vsphere_server *servers, size_t n, char *err,
                                  size_t errlen);

/* The extraConfig key holding hvupdater's operation record. */
#define HV_VSPHERE_RECORD_KEY "hvupdater.operation"

#endif
