/* machinecheck.h: the management cluster is the truth (kubernetes.checkMachines, serve
 * --check-machines; docs/operations.md "Who can make hvupdater act").
 *
 * Before a hook acts, the objects its request names are read from the API server and checked:
 *
 * UpdateMachine: the Machine desired.machine names (namespace, name) exists (with the request's
 * metadata.uid when it has one: CAPI v1.14.2 sends none, cleanupMachine keeps only name,
 * namespace, labels, annotations and spec); CAPI marks it for an in-place update as CAPI v1.14.2
 * does before it calls (the annotation HV_MC_IN_PROGRESS and "UpdateMachine" in
 * HV_MC_PENDING_HOOKS: core/reconcilers/ machine/machine_controller_inplace_update.go:50-67; the
 * infra machine carries HV_MC_IN_PROGRESS too, :89-93, :121-124); its spec.infrastructureRef is the
 * request's infra machine (apiGroup, kind, name); that infra machine exists and its spec equals the
 * request's desired spec (CAPI writes it before it calls). On a pass the request's desired Machine
 * spec and infra machine spec are replaced by the API server's (hv_mc_check's *req_out), so the VM
 * is found from what the API server holds.
 * CanUpdateMachine: the Machine exists (uid as above) and its infrastructureRef is the
 * request's current infra machine, which exists. CanUpdateMachineSet: the current MachineSet
 * exists (uid as above) and its template's infrastructureRef is the request's current
 * template. Neither needs the in-place marks (they come later).
 *
 * The Machine's Updating condition is not required: CAPI sets it at the end of the reconcile
 * that makes the first UpdateMachine call (machine_controller_status.go setUpdatingCondition),
 * so the first call would find it False; the annotation and the pending hook it is computed
 * from (internal/util/inplace IsUpdateInProgress) are checked instead.
 *
 * Reads are cached for ttl_ms, keyed by the object's API path, and made by threads of their
 * own: a hook thread never waits for the API server. A check whose objects are not cached (or
 * not fresh enough to refuse on) answers HV_MC_WAIT and queues the reads; the hook answers "in
 * progress, retry" (UpdateMachine) or a retryable Failure (CanUpdate*). A refusal is only
 * given on objects read after that refusal was first seen, so an object cached just before
 * CAPI marked it never refuses a true call. A read that fails (no answer, 403, 5xx) refuses:
 * the check fails closed. hv_mc owns its threads and table; hv_mc_free stops the threads.
 */
#ifndef HV_MACHINECHECK_H
#define HV_MACHINECHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hookname.h"
#include "json.h"
#include "kube.h"

#define HV_MC_IN_PROGRESS   "in-place-updates.internal.cluster.x-k8s.io/update-in-progress"
#define HV_MC_PENDING_HOOKS "runtime.cluster.x-k8s.io/pending-hooks"

#define HV_MC_TTL_MS  5000 /* how long a read answers checks */
#define HV_MC_MAX     8192 /* objects cached (or being read) at once */
#define HV_MC_THREADS 2
#define HV_MC_RETRY_S 1 /* retryAfterSeconds while the objects are read */

/* The one API call the readers make (hv_mc_kube_io: through hv_kube; tests: a fake). Returns
 * the HTTP status or -1; on 200 *out is the object. */
struct hv_mc_io {
    void *ctx;
    int (*get)(void *ctx, const char *path, hj **out, char *err, size_t errlen);
};

/* io through k (borrowed; must outlive the readers). */
void hv_mc_kube_io(struct hv_kube *k, struct hv_mc_io *io);

struct hv_mc_cfg {
    struct hv_mc_io io;
    int ttl_ms;                /* <= 0: HV_MC_TTL_MS */
    int threads;               /* <= 0: HV_MC_THREADS */
    bool drive;                /* no threads: the caller runs hv_mc_work (tests) */
    int64_t (*clock_ms)(void); /* NULL: CLOCK_MONOTONIC */
};

struct hv_mc;

/* NULL when a thread cannot start. */
struct hv_mc *hv_mc_new(const struct hv_mc_cfg *cfg);
void hv_mc_free(struct hv_mc *mc);

/* Drive mode: make every queued read now; returns how many were made. */
size_t hv_mc_work(struct hv_mc *mc);

enum hv_mc_verdict { HV_MC_PASS = 0, HV_MC_WAIT, HV_MC_FAIL };

/* Check a hook call (already parsed, envelope checked) against the API server's objects,
 * without blocking. HV_MC_FAIL and HV_MC_WAIT put a stable message in msg. For UpdateMachine
 * a pass sets *req_out to a copy of req whose desired.machine.spec and
 * desired.infrastructureMachine.spec are the API server's (made on the calling thread: in its
 * arena, if any; free with hj_free); otherwise *req_out is NULL. Discovery always passes. */
enum hv_mc_verdict hv_mc_check(struct hv_mc *mc, enum hv_hook h, const hj *req, hj **req_out,
                               char *msg, size_t msglen);

/* ---- a power cycle found in flight (engine/scan.c asks through cli's wiring) ----
 * A restarted process finds a power cycle in flight from the record on the VM alone, with no
 * call behind it; the record keeps the Machine and infra machine of the checked call that
 * began it. Before the cycle is carried on, the API server must still stand behind it: the
 * Machine ns/name exists with uid, carries both in-place marks (as UpdateMachine's check), and
 * its spec.infrastructureRef names the record's infra machine, which exists and carries
 * HV_MC_IN_PROGRESS. */
struct hv_mc_resume_ask {
    const char *ns, *name, *uid;                             /* the record's Machine */
    const char *infra_api_version, *infra_kind, *infra_name; /* the record's infra machine */
};
enum hv_mc_resume {
    HV_MC_RESUME_OK = 0,  /* confirmed so far: the caller checks the VM and hardware */
    HV_MC_RESUME_REFUSED, /* gone, another uid, not being updated, another infra machine */
    HV_MC_RESUME_UNKNOWN, /* a read got no answer or a status other than 200 and 404 */
};
/* Reads on the calling thread, past the cache (blocking, bounded by the client's timeout:
 * the engine's scan calls it, never a hook's thread): two GETs. OK: *machine and *infra are
 * the objects as read (free with hj_free); otherwise both NULL and msg says why. */
enum hv_mc_resume hv_mc_resume_read(struct hv_mc *mc, const struct hv_mc_resume_ask *a,
                                    hj **machine, hj **infra, char *msg, size_t msglen);

struct hv_mc_stats {
    unsigned long reads; /* API requests made */
    unsigned long passes, waits, fails;
    size_t cached; /* objects in the table now */
};
void hv_mc_get_stats(struct hv_mc *mc, struct hv_mc_stats *st);

/* The resource of an infrastructure kind as kubebuilder names it: lower case, plural
 * (VSphereMachine -> vspheremachines, ...y -> ...ies, ...s -> ...ses). false when it does not
 * fit. */
bool hv_mc_resource(const char *kind, char *out, size_t cap);

#endif
