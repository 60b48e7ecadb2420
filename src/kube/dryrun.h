/* dryrun.h: claim only what the provider accepts (kubernetes.dryRunClaims, serve
 * --dry-run-claims; docs/operations.md). Before CanUpdateMachine(Set) covers an infra field,
 * the desired values of the covered fields are sent as a JSON merge patch with
 * `?dryRun=All` to one existing infra machine: the Machine's own (CanUpdateMachine), or the
 * first by name of the MachineSet's Machines (label cluster.x-k8s.io/set-name or owner
 * reference) through its
 * spec.infrastructureRef (CanUpdateMachineSet). The API server runs the provider's admission
 * webhooks and the CRD's validation on the result and stores nothing: a refusal (e.g. CAPV's
 * `spec: Forbidden: cannot be modified`) means CAPI's own write of that spec would be
 * refused too, and the hook does not claim the change.
 *
 * Answers are cached per template pair (namespace, kind, current and desired name, patch),
 * as CAPI caches its CanUpdateMachineSet answers: the hook's thread only reads the cache
 * and queues a dry run for a worker thread of its own, waiting at most wait_ms for the
 * first answer (as the engine's live probe: hv_engine_probe); not known by then: PENDING,
 * which the hook answers with a retryable Failure. Every API call runs on the worker.
 * hv_dryrun owns its thread and cache; hv_dryrun_free stops the thread. */
#ifndef HV_DRYRUN_H
#define HV_DRYRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "kube.h"

/* What the provider says about a change. */
enum hv_dryrun_verdict {
    HV_DRYRUN_ACCEPTED = 0, /* the dry run passed: the claim stands */
    HV_DRYRUN_REFUSED,      /* refused (webhook or validation): why is the reason */
    HV_DRYRUN_UNCHECKED,    /* could not be asked (no access, no client, no machine): why */
    HV_DRYRUN_PENDING,      /* not known yet: a retryable Failure */
    HV_DRYRUN_ERROR,        /* the API server did not answer usably: a retryable Failure */
};

/* The API calls the worker makes (hv_dryrun_kube_io: through hv_kube; tests: a fake). Each
 * returns the HTTP status or -1 (no answer). */
struct hv_dryrun_io {
    void *ctx;
    /* one page of a list; cont NULL: the first */
    int (*list)(void *ctx, const char *path, const char *cont, hj **out, char *err, size_t errlen);
    /* PATCH path?dryRun=All (merge patch); *status: the Status of an error answer, or NULL */
    int (*dry_patch)(void *ctx, const char *path, const char *patch, hj **status, char *err,
                     size_t errlen);
};

/* io through k (borrowed; must outlive the worker). */
void hv_dryrun_kube_io(struct hv_kube *k, struct hv_dryrun_io *io);

struct hv_dryrun_cfg {
    struct hv_dryrun_io io;
    /* no Kubernetes client: every answer is UNCHECKED with this reason (io unused) */
    const char *no_client;
    int wait_ms;                  /* a hook waits at most this long for a first answer; < 0: 0 */
    int ttl_s;                    /* ACCEPTED and REFUSED kept this long; <= 0: HV_DRYRUN_TTL_S */
    int unchecked_ttl_s;          /* UNCHECKED kept this long (RBAC may be fixed); <= 0: default */
    bool drive;                   /* no thread: the caller runs hv_dryrun_pass (tests) */
    int64_t (*now_ms)(void *ctx); /* NULL: CLOCK_MONOTONIC (tests: a fake clock) */
    void *now_ctx;
};

#define HV_DRYRUN_WAIT_MS     300
#define HV_DRYRUN_TTL_S       600
#define HV_DRYRUN_UNCHECKED_S 60
#define HV_DRYRUN_MAX         1024 /* cache entries; the oldest go first */
#define HV_DRYRUN_LIST_PAGES  20   /* Machines listed at most 20 pages of 100 per answer */

/* One question: change an infra machine (or the Machines of a MachineSet) so. Strings are
 * copied. */
struct hv_dryrun_req {
    bool machine_set;        /* CanUpdateMachineSet: the infra objects are templates */
    const char *ns;          /* the namespace of the objects */
    const char *owner;       /* CanUpdateMachineSet: the current MachineSet's name */
    const char *api_version; /* of the infra machine (template): group/version */
    const char *kind;        /* of the infra machine (template) */
    const char *cur_name;    /* current infra machine (template) */
    const char *des_name;    /* desired infra machine (template) */
    const hj *patch;         /* merge patch for an infra machine: {"spec": {...}} */
};

struct hv_dryrun;

/* NULL when the thread cannot start. */
struct hv_dryrun *hv_dryrun_new(const struct hv_dryrun_cfg *cfg);
void hv_dryrun_free(struct hv_dryrun *d);

/* The verdict for r, from the cache or a dry run begun now (waiting at most wait_ms); why
 * receives the reason of REFUSED, UNCHECKED and ERROR (deterministic text). */
enum hv_dryrun_verdict hv_dryrun_ask(struct hv_dryrun *d, const struct hv_dryrun_req *r, char *why,
                                     size_t whylen);

/* Driven (cfg.drive): run the queued dry runs on the calling thread; returns how many ran. */
int hv_dryrun_pass(struct hv_dryrun *d);
size_t hv_dryrun_cached(struct hv_dryrun *d);

/* ---- pure parts ---- */

/* The verdict of a dry run's answer: HTTP status (or -1), the Status object of an error
 * answer (may be NULL), the resource (plural) patched and the name of the object, which is
 * left out of the reason (another machine would give another name). */
enum hv_dryrun_verdict hv_dryrun_judge(int http, const hj *status, const char *resource,
                                       const char *name, char *why, size_t whylen);

/* The lower-case plural resource of an infra machine kind (Kubernetes' CRD convention:
 * VSphereMachine -> vspheremachines); "" when the kind is not a name. */
void hv_dryrun_plural(const char *kind, char *out, size_t cap);

#endif
