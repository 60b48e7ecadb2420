/* capk.h: the infrastructure cluster of a KubevirtMachine where Cluster API Provider KubeVirt
 * (CAPK) finds it (kubevirt.followInfraClusterSecretRef).
 *
 * As CAPK's KubevirtMachine controller does (controllers/kubevirtmachine_controller.go: the
 * machine's spec.infraClusterSecretRef, defaulted to its KubevirtCluster's; then
 * pkg/infracluster GenerateInfraClusterClient): the KubevirtMachine namespace/machine (the
 * Machine's namespace, the VM's name) names a Secret in its spec.infraClusterSecretRef, else
 * the Cluster namespace/cluster's spec.infrastructureRef names a KubevirtCluster whose
 * spec.infraClusterSecretRef does. The Secret is in the ref's namespace, else the
 * KubevirtMachine's; its data.kubeconfig is the infrastructure cluster and its data.namespace
 * (trimmed), when present, the namespace CAPK puts VMs in (over the kubeconfig context's). No
 * ref anywhere: no Secret (the VM is on the configured cluster, as CAPK uses its own).
 * Needs get on kubevirtmachines, clusters, kubevirtclusters and secrets.
 */
#ifndef HV_CAPK_H
#define HV_CAPK_H

#include <stddef.h>

#include "kube.h"

struct hv_capk_infra {
    char secret[256]; /* "namespace/name" of the kubeconfig Secret; "" = no infraClusterSecretRef */
    char rv[64];      /* the Secret's metadata.resourceVersion */
    char *kubeconfig; /* data.kubeconfig decoded, NUL-terminated (malloc'd: wipe and free) */
    size_t kubeconfig_len;
    char secret_ns[64];   /* data.namespace, trimmed; "" = none */
    char template_ns[64]; /* the KubevirtMachine's virtualMachineTemplate.metadata.namespace */
};

/* 0 with *out filled (out->secret "" when no ref names a Secret), or -1 with why (the object
 * that could not be read or used, by name; never a value of the Secret). Blocks for at most
 * timeout_ms (> 0) over all its requests: never on a hook's thread. */
int hv_capk_infra_io(const struct hv_kube_io *io, const char *cluster, const char *machine,
                     int timeout_ms, struct hv_capk_infra *out, char *why, size_t whylen);

#endif
