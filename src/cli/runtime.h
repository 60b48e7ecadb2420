/* runtime.h: the serving process's wiring: from a config, the backends, the engine and the
 * hooks context that the server answers with. Owns everything it creates; borrows cfg. */
#ifndef HV_RUNTIME_H
#define HV_RUNTIME_H

#include "config.h"
#include "engine.h" /* enum hv_resume_verdict (books.h), struct hv_vm_ref, struct hv_hw */
#include "hooks.h"

struct hv_runtime;
struct hv_engine;

struct hv_runtime *hv_runtime_new(const struct hv_config *cfg, char *err, size_t errlen);
const struct hv_hooks_ctx *hv_runtime_hooks(const struct hv_runtime *rt);
/* The runtime's engine (tests: hv_engine_scanned). */
struct hv_engine *hv_runtime_engine(const struct hv_runtime *rt);
void hv_runtime_free(struct hv_runtime *rt);

/* The engine's confirm_resume as this wiring answers it (engine/books.h hv_resume_confirm_fn):
 * the API server's Machine and infra machine of a power cycle the scan found in flight (mc,
 * read on the caller's thread), then the profile's reading of its desired hardware from them
 * (profiles). Exposed so the tests drive this very composition. */
struct hv_mc;
enum hv_resume_verdict hv_runtime_confirm_resume(struct hv_mc *mc,
                                                 const struct hv_profiles *profiles,
                                                 const char *backend, const struct hv_vm_ref *vm,
                                                 const struct hv_hw *desired, char *msg,
                                                 size_t msglen);

/* The KubeVirt backend's infra function (hv_kubevirt_infra_fn) as this wiring answers it for
 * kubevirt.followInfraClusterSecretRef: CAPK's infraClusterSecretRef of the machine, read with
 * the management cluster's client kube (struct hv_kube *). Exposed so the tests drive this
 * very composition. */
struct hv_kubevirt_infra;
int hv_runtime_capk_infra(void *kube, const char *cluster, const char *machine, int timeout_ms,
                          struct hv_kubevirt_infra *out, struct hv_err *err);

#endif
