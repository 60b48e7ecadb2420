/* kv_internal.h: what the KubeVirt backend's files share: the parsed state of one
 * VirtualMachine (kv_parse.c), the pure plan over it (kv_plan.c), the JSON patches of the steps
 * (kv_patch.c) and the HTTPS client (kv_http.c). The pure parts are what test/kvbackend tests
 * on captured KubeVirt JSON. Nothing here is public API.
 */
#ifndef HV_KV_INTERNAL_H
#define HV_KV_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "backend.h"
#include "kubevirt_backend.h"

#define KV_ANN_RECORD    "hvupdater.io/operation"
#define KV_ANN_STRATEGY  "hvupdater.io/run-strategy"
#define KV_NS_MAX        64
#define KV_VMNAME_MAX    254
#define KV_HOTPLUG_RATIO 4 /* KubeVirt's default maxHotplugRatio */

/* One VirtualMachine, its VMI and the cluster's KubeVirt CR as the backend reads them.
 * Numbers < 0 are "not set / not known". */
struct kv_state {
    bool found;
    char ns[KV_NS_MAX], name[KV_VMNAME_MAX];
    char rv[64]; /* metadata.resourceVersion */
    bool has_annotations;
    char record[HV_RECORD_MAX];
    char saved_strategy[24]; /* annotation KV_ANN_STRATEGY ("" = none) */
    /* spec */
    bool has_memory_obj, has_cpu_obj; /* spec.template.spec.domain.memory / .cpu exist */
    int64_t mem_mib, max_guest_mib;
    int32_t sockets, cores, threads, max_sockets;
    char run_strategy[24]; /* "" when the VM uses spec.running */
    int running;           /* spec.running: -1 absent, 0 false, 1 true */
    /* status */
    bool restart_required;
    char printable[32];
    /* VMI */
    bool vmi;
    char vmi_uid[64], vmi_phase[24], node[HV_NAME_MAX];
    int64_t vmi_mem_mib, vmi_max_guest_mib; /* VMI spec */
    int32_t vmi_sockets, vmi_max_sockets;
    int64_t guest_current_mib, guest_requested_mib;
    int32_t cur_sockets, cur_cores;
    bool hot_mem, hot_cpu, agent, not_migratable, migrating;
    /* KubeVirt CR */
    bool cr_read;             /* the CR was read (else the rollout strategy is unknown) */
    char rollout[24];         /* spec.configuration.vmRolloutStrategy ("" = unset) */
    int64_t cr_max_guest_mib; /* liveUpdateConfiguration.maxGuest */
    int32_t cr_max_sockets;   /* liveUpdateConfiguration.maxCpuSockets */
    int32_t cr_ratio;         /* liveUpdateConfiguration.maxHotplugRatio */
};

/* kv_parse.c */
void kv_state_init(struct kv_state *st);
yajl_val kv_get(yajl_val v, const char *dotted);    /* "a.b.c" through objects; NULL if absent */
const char *kv_str(yajl_val v, const char *dotted); /* a string member, else NULL */
/* a quantity (string) or a number of bytes at dotted, in MiB rounded down; -1 when absent */
int64_t kv_mib(yajl_val v, const char *dotted);
void kv_parse_vm(yajl_val vm, struct kv_state *st);
void kv_parse_vmi(yajl_val vmi, struct kv_state *st);
/* the KubeVirt CR, or a KubeVirtList (its first item) */
void kv_parse_kubevirt(yajl_val cr, struct kv_state *st);
/* The effective hot-plug limits: the VM's, else the VMI's, else the CR's, else ratio * boot. */
int64_t kv_max_guest(const struct kv_state *st);
int32_t kv_max_sockets(const struct kv_state *st);
bool kv_running(const struct kv_state *st);
void kv_fill_obs(const struct kv_state *st, const char *cluster, struct hv_vm_obs *obs);

/* kv_plan.c */
void kv_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT]);
/* HV_OK, or HV_E_BUSY when a hot-plug of a field to change is still in flight */
/* Take the VM as an operation in flight leaves it (hv_vm_obs.assumed): its spec, its VMI and
 * the guest's memory at hw's values where set (vCPUs are sockets here); the limits as read. */
void kv_assume(struct kv_state *st, const struct hv_hw *hw);
int kv_plan_compute(const struct kv_state *st, const struct hv_hw *desired,
                    struct hv_field_plan plan[HV_F_COUNT]);

/* kv_patch.c: the JSON patch (malloc'd, caller frees) of one step or of the record, its first
 * op the resourceVersion test; *out NULL when the VM already is as the step wants it.
 * HV_OK, or an error (e.g. RECONFIGURE of a running VM). */
int kv_step_patch(const struct kv_state *st, const struct hv_step *s, char **out,
                  struct hv_err *err);
int kv_record_patch(const struct kv_state *st, const char *record, char **out);

/* kv_kubeconfig.c: a kubeconfig's current context, credentials in memory only */
#define KV_KUBECONFIG_MAX (1 << 20) /* a Secret holds at most 1 MiB */
struct kv_kubeconfig {
    char server[256];      /* https://host[:port], no trailing slash */
    char ns[KV_NS_MAX];    /* the current context's namespace ("" = none) */
    char *ca, *cert, *key; /* PEM, decoded from the *-data keys; NULL = none (ca: system CAs) */
    size_t ca_len, cert_len, key_len;
    char *token; /* bearer token; NULL = none */
};
/* 0, or -1 with why (names keys and contexts, never a value) on malformed or hostile input
 * (over KV_KUBECONFIG_MAX, nested deeper than 32, aliases) and on what hvupdater does not do:
 * exec / auth-provider plugins, file paths, basic auth, proxies, insecure-skip-tls-verify. */
int kv_kubeconfig_parse(const char *text, size_t len, struct kv_kubeconfig *kc, char *why,
                        size_t whylen);
void kv_kubeconfig_free(struct kv_kubeconfig *kc); /* wipes the credentials */
/* standard base64 (whitespace skipped); malloc'd, NUL-terminated; NULL when not base64 */
char *kv_b64_decode(const char *in, size_t len, size_t *out_len);
void kv_wipe(void *p, size_t n);

/* kv_http.c */
struct kv_cluster {
    char *name, *server, *token_file, *ca_file;
    /* a cluster read from a kubeconfig Secret: its credentials, in memory (token_file and
     * ca_file unused); NULL for a configured cluster */
    struct kv_kubeconfig *kc;
    char **namespaces;
    size_t n_namespaces;
    /* the KubeVirt CR, cached for KV_CR_TTL_S */
    pthread_mutex_t mu;
    int64_t cr_at;
    struct kv_state cr;
};
#define KV_CR_TTL_S 30
/* One request: HV_OK when the server answered (*status its HTTP status, *body its body,
 * NUL-terminated, caller frees), else HV_E_UNREACHABLE / HV_E_TIMEOUT / HV_E_CREDENTIALS /
 * HV_E_TLS with err->detail (never the token). ctype: the body's Content-Type (NULL: none). */
int kv_http(const struct kv_cluster *c, const char *method, const char *path, const char *ctype,
            const char *body, int timeout_ms, long *status, char **resp, struct hv_err *err);
/* GET path and parse: HV_OK with *out (yajl_tree_free it) on 200, *out NULL on 404; any other
 * answer is an error mapped by kv_status_err. */
int kv_get_json(const struct kv_cluster *c, const char *path, int timeout_ms, yajl_val *out,
                struct hv_err *err);
/* An HTTP status that is not success, as an hv_errcode (401/403 auth, 404 not found, 409 and
 * a failed test op busy, 429/5xx unreachable: the API server or a webhook is down). */
int kv_status_err(long status, const char *body, const char *what, struct hv_err *err);
int kv_seterr(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
