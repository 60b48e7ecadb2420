/* vs_config.h: how one vCenter is configured (struct hv_vsphere_server) and the extraConfig key
 * of the operation record: what the backend's constructor (vsphere_backend.h) and its parts
 * (vs_soap, vs_props, vs_vmops) share, so the parts need not include the constructor. */
#ifndef HV_VS_CONFIG_H
#define HV_VS_CONFIG_H

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

/* The extraConfig key holding hvupdater's operation record. */
#define HV_VSPHERE_RECORD_KEY "hvupdater.operation"

#endif
