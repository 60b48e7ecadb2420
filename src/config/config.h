/* config.h: hvupdater's config file (JSON, shape in schemas/config.json) and the embedded
 * default used when no file is given. hv_config owns every string and array it holds. */
#ifndef HV_CONFIG_H
#define HV_CONFIG_H

#include "downstream.h"
#include "profile.h"
#include "settings.h"

#include <stdbool.h>
#include <stddef.h>

struct hv_engine_opts {
    int workers;
    int max_power_cycles; /* overall */
    int max_power_cycles_per_host;
    int step_timeout_s; /* one hypervisor call */
    int max_entries;    /* VMs the engine keeps in hand (engine.maxEntries) */
};

struct hv_vsphere_cfg {
    char *name, *url, *username_file, *password_file, *thumbprint, *ca_file;
    bool insecure_skip_verify;
    bool allow_request_thumbprint; /* allowRequestThumbprint: a VSphereMachine's may pin */
    bool identity_capv; /* identityFrom "capv": credentials per cluster from CAPV's identity */
};

/* One cluster of the "kubevirt" section: an API server whose KubeVirt runs the VMs (CAPK's
 * infrastructure cluster). server NULL: in-cluster. */
struct hv_kubevirt_cfg {
    char *name, *server, *token_file, *ca_file;
    char **namespaces; /* where list_records looks (none: every namespace) */
    size_t n_namespaces;
};

/* The "kubernetes" section: how hvupdater reaches the management cluster's API server, used
 * only by what needs it (identityFrom capv, events, holdRemediation). */
struct hv_kube_opts {
    char *server;         /* NULL: in-cluster (KUBERNETES_SERVICE_HOST and the SA's files) */
    char *token_file;     /* NULL: the service account's */
    char *ca_file;        /* NULL: the service account's */
    char *capv_namespace; /* where VSphereClusterIdentity Secrets live; default capv-system */
    int timeout_s;        /* per request, default 5 */
    bool events;          /* post Warning Events on Machines (off by default) */
    bool mhc_hold;        /* holdRemediation: skip-remediation while a VM is power-cycled */
    int check_machines;   /* checkMachines: 1 on, 0 off, -1 unset (hv_config_checks_machines) */
    bool dry_run_claims;  /* dryRunClaims: CanUpdate* claims only what a dry run accepts */
};

/* The "log" section: the log format and level when no --log-format / --log-level is given. */
struct hv_log_opts {
    int format; /* enum hv_log_format, -1: not set */
    int level;  /* enum hv_log_level, -1: not set */
};

struct hv_config {
    char *listen;         /* NULL: the CLI default */
    char *metrics_listen; /* NULL: /metrics on the hooks listener */
    char *client_ca_file; /* NULL: no client certificate asked for */
    size_t max_body;
    int handler_timeout_s;
    bool can_update_ignore; /* canUpdateFailurePolicy "Ignore" (default "Fail") */
    struct hv_settings defaults;
    struct hv_engine_opts engine;
    char **libvirt_uris;
    size_t n_libvirt_uris;
    int keepalive_interval_s, keepalive_count;
    int connect_timeout_s; /* a call waits this long for a libvirt connection to open */
    struct hv_vsphere_cfg *vsphere;
    size_t n_vsphere;
    struct hv_kubevirt_cfg *kubevirt; /* the "kubevirt" section's clusters (none: no backend) */
    size_t n_kubevirt;
    int kubevirt_timeout_s; /* per request, default 10 */
    /* kubevirt.followInfraClusterSecretRef: a VM's infra cluster from CAPK's
     * infraClusterSecretRef kubeconfig Secret, read through the management cluster's API */
    bool kubevirt_follow_secret;
    struct hv_kube_opts kube;
    struct hv_log_opts log;
    struct hv_profiles profiles;
    struct hv_downstream_list downstream; /* extensions chained after hvupdater (compose.h) */
};

/* The embedded default: built-in profiles, libvirt's in-process test:///default driver. */
void hv_config_default(struct hv_config *c);
/* Parse a config document over the defaults (but with no libvirt host unless the document
 * lists some). Returns 0, or -1 with a message naming the key. On failure *c is left valid
 * (free it). */
int hv_config_parse(struct hv_config *c, const char *text, size_t len, char *err, size_t errlen);
int hv_config_load_file(struct hv_config *c, const char *path, char *err, size_t errlen);
void hv_config_free(struct hv_config *c);
/* Whether hook calls are checked against the API server (kube/machinecheck.h):
 * kubernetes.checkMachines when set, else on whenever hvupdater has a Kubernetes client
 * (kubernetes.server is set, or events, holdRemediation or identityFrom capv use the API
 * server). In a pod the chart says so itself (serve --check-machines): a pod's
 * KUBERNETES_SERVICE_HOST alone does not turn it on. */
bool hv_config_checks_machines(const struct hv_config *c);
/* "Fail" -> *ignore false, "Ignore" -> true; anything else -1 (*ignore unchanged). */
int hv_failure_policy_parse(const char *s, bool *ignore);

#endif
