/* kubevirt_backend.h: the KubeVirt backend's constructor, the only public entry point of
 * backends/kubevirt/. The returned struct hv_backend implements backends/backend.h over the
 * Kubernetes API of one or more infrastructure clusters that run KubeVirt (the VMs CAPK
 * creates); free it with ops->free. hv_kubevirt_new copies everything it needs.
 *
 * Behaviour the engine can rely on (details in the .c files named in brackets; the user's
 * view is docs/kubevirt.md):
 * - Identity [kv_backend.c]: ref->name is "namespace/name" of the VirtualMachine (a bare
 *   "name" means the namespace "default"); ref->server names a configured cluster ("" = the
 *   first). ref->uuid is not used (CAPK's providerID is kubevirt://NAME, no UUID).
 * - Observation [kv_parse.c]: config = the VM's spec (memory.guest, cpu.sockets, cpu.cores);
 *   hw = the VMI's status while it runs (memory.guestCurrent, currentCPUTopology), the spec
 *   while it is off. hw.cpus counts SOCKETS (KubeVirt hot-plugs whole sockets; the profile's
 *   cpus field is cpu.sockets), hw.cores_per_socket cpu.cores. While a hot-plug is in flight
 *   (guestCurrent != guestRequested, or a HotMemoryChange / HotVCPUChange condition) that
 *   field of hw is -1: never "done" then, whatever a migration reports (kubevirt #12101).
 *   id = the VMI's uid (new on every start). guest = the VMI status too: KubeVirt's view of
 *   what the guest plugged (virt-handler), not a guest agent read.
 * - Planning [kv_plan.c]: live only when the KubeVirt CR's vmRolloutStrategy is LiveUpdate
 *   (unset counts as LiveUpdate), the VM runs without RestartRequired, the change grows memory
 *   up to maxGuest or sockets up to maxSockets; everything else is COLD with a stable reason.
 * - Steps [kv_backend.c, kv_patch.c]: each is one JSON patch of the VirtualMachine whose
 *   first op tests metadata.resourceVersion (a concurrent writer makes it HV_E_BUSY). Live
 *   steps set memory.guest / cpu.sockets; SHUTDOWN and POWER_OFF set runStrategy Halted
 *   (spec.running false on VMs that use it), keeping the strategy it had in an annotation;
 *   RECONFIGURE writes the desired memory, sockets and cores (raising maxGuest/maxSockets
 *   when they would be below); POWER_ON restores the kept strategy (Always when none).
 * - Record [kv_backend.c]: the annotation hvupdater.io/operation on the VirtualMachine;
 *   list_records lists VirtualMachines of the configured namespaces (all when none).
 * - Infra clusters [kv_backend.c, kv_kubeconfig.c]: with opts.infra, a ref whose cluster is
 *   known and whose KubevirtMachine (or its KubevirtCluster) names an infraClusterSecretRef
 *   is served by the cluster of that Secret's kubeconfig, in the namespace CAPK uses:
 *   virtualMachineTemplate.metadata.namespace, else the Secret's data.namespace, else the
 *   kubeconfig context's namespace, else "default". list_records covers configured clusters
 *   only.
 */
#ifndef HV_KUBEVIRT_BACKEND_H
#define HV_KUBEVIRT_BACKEND_H

#include <stddef.h>

#include "backend.h"

struct hv_kubevirt_cluster {
    const char *name;       /* what ref->server names; NULL/"" = "in-cluster" */
    const char *server;     /* "https://host:port"; NULL/"": in-cluster from the environment */
    const char *token_file; /* bearer token, read at every request; NULL: the service account's */
    const char *ca_file;    /* NULL: the service account's */
    const char *const *namespaces; /* list_records scope; none: every namespace */
    size_t n_namespaces;
};

/* CAPK's infraClusterSecretRef of one KubevirtMachine, as src/ reads it from the management
 * cluster (src/kube/capk.h). secret "" means the KubevirtMachine and its KubevirtCluster name
 * none: the VM is on the configured cluster (ref->server), as without infra. */
struct hv_kubevirt_infra {
    char secret[HV_NAME_MAX]; /* "namespace/name" of the kubeconfig Secret; "" = none */
    char rv[64];              /* the Secret's metadata.resourceVersion */
    char *kubeconfig;         /* data.kubeconfig decoded (malloc'd; the backend wipes, frees) */
    size_t kubeconfig_len;
    char secret_ns[64];   /* data.namespace, trimmed ("" = none): CAPK's infra namespace */
    char template_ns[64]; /* virtualMachineTemplate.metadata.namespace ("" = none) */
};
/* Called on a worker or probe thread (never a hook's) with ref->cluster ("namespace/cluster")
 * and the KubevirtMachine's name; blocks for at most timeout_ms. HV_OK with *out filled, or
 * HV_E_INFRA_SECRET (err->detail: which object, names only, never a credential). */
typedef int (*hv_kubevirt_infra_fn)(void *ctx, const char *cluster, const char *machine,
                                    int timeout_ms, struct hv_kubevirt_infra *out,
                                    struct hv_err *err);

struct hv_kubevirt_opts {
    const struct hv_kubevirt_cluster *clusters;
    size_t n_clusters;
    int timeout_ms; /* per request; <= 0: 10000 */
    /* kubevirt.followInfraClusterSecretRef: a VM whose ref names its cluster is looked up
     * through infra first (cached KV_INFRA_TTL_S per machine; the connection per Secret and
     * resourceVersion). NULL: every VM is on the configured clusters. */
    hv_kubevirt_infra_fn infra;
    void *infra_ctx;
};

/* NULL with a reason in err when opts are unusable. Never contacts a server. */
struct hv_backend *hv_kubevirt_new(const struct hv_kubevirt_opts *o, char *err, size_t errlen);

#endif
