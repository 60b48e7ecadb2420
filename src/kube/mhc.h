/* mhc.h: keeps MachineHealthCheck from remediating a Machine while hvupdater power-cycles its
 * VM (kubernetes.holdRemediation, serve --mhc-hold; docs/operations.md).
 *
 * CAPI's MHC leaves out every Machine that carries cluster.x-k8s.io/skip-remediation (v1.14.2
 * core/reconcilers/machinehealthcheck/machinehealthcheck_targets.go:309-313, :457-466). A
 * worker thread of its own marks a Machine with it while the VM's operation record is in a
 * power-cycle phase, beside hvupdater's own annotation HV_MHC_OWNED (the VM it holds for), and
 * removes both once the cycle is over and the Machine's NodeReady condition is True again (or
 * ready_wait_s after the cycle ended). A Machine it did not mark is never changed: a
 * skip-remediation that is not its own value stays. After a restart it finds its marks again
 * by listing Machines. Hook threads only queue (hv_mhc_track); every API call and every look
 * at a VM runs on the worker. hv_mhc owns its thread and table; hv_mhc_free stops the thread.
 */
#ifndef HV_MHC_H
#define HV_MHC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "kube.h"

#define HV_MHC_SKIP       "cluster.x-k8s.io/skip-remediation"
#define HV_MHC_SKIP_VALUE "hvupdater" /* the value hvupdater gives HV_MHC_SKIP */
/* hvupdater marked this Machine; value: "<backend> <VM reference>" */
#define HV_MHC_OWNED   "hvupdater.io/remediation-held-for"
#define HV_MHC_REF_MAX 1024

/* What the VM serving a Machine is doing. */
enum hv_mhc_vm {
    HV_MHC_VM_UNKNOWN = 0, /* cannot be read now */
    HV_MHC_VM_QUIET,       /* no power cycle: no record, live, done, failed, or no such VM */
    HV_MHC_VM_CYCLING,     /* the record is in a power-cycle phase: the VM is or may go down */
};

/* Asks the backend named backend about the VM that ref (text from hv_mhc_track) names. Runs on
 * the worker; may block for a backend call. */
typedef enum hv_mhc_vm (*hv_mhc_vm_fn)(void *ctx, const char *backend, const char *ref);

/* The API calls the worker makes (hv_mhc_kube_io: through hv_kube; tests: a fake). Each
 * returns the HTTP status or -1. */
struct hv_mhc_io {
    void *ctx;
    int (*get)(void *ctx, const char *path, hj **out, char *err, size_t errlen);
    int (*patch)(void *ctx, const char *path, const char *merge_patch, char *err, size_t errlen);
    /* one page of a list; cont NULL: the first */
    int (*list)(void *ctx, const char *path, const char *cont, hj **out, char *err, size_t errlen);
};

/* io through k (borrowed; must outlive the worker). */
void hv_mhc_kube_io(struct hv_kube *k, struct hv_mhc_io *io);

struct hv_mhc_cfg {
    struct hv_mhc_io io;
    hv_mhc_vm_fn vm_state;
    void *vm_ctx;
    int interval_ms;  /* between passes; <= 0: HV_MHC_INTERVAL_MS */
    int ready_wait_s; /* after a cycle: how long a mark waits for NodeReady; <= 0: default */
    int adopt_s;      /* between two lists of Machines; <= 0: HV_MHC_ADOPT_S */
    bool drive;       /* no thread: the caller runs hv_mhc_pass (tests) */
};

#define HV_MHC_INTERVAL_MS  2000
#define HV_MHC_READY_WAIT_S 300
#define HV_MHC_ADOPT_S      60
#define HV_MHC_IDLE_S       900 /* a Machine not marked and not called about is forgotten */
#define HV_MHC_MAX          4096

struct hv_mhc;

/* NULL when the thread cannot start. */
struct hv_mhc *hv_mhc_new(const struct hv_mhc_cfg *cfg);
void hv_mhc_free(struct hv_mhc *m);

/* An UpdateMachine call: Machine ns/name is served by backend's VM ref. Copies and returns;
 * never blocks on the network. */
void hv_mhc_track(struct hv_mhc *m, const char *ns, const char *name, const char *backend,
                  const char *ref);

/* One pass at unix time now: list Machines when due (the first pass always), then decide and
 * act for each tracked Machine. The worker's loop; tests call it (cfg.drive). */
void hv_mhc_pass(struct hv_mhc *m, int64_t now);
size_t hv_mhc_tracked(struct hv_mhc *m);

/* ---- the decision (pure) ---- */

struct hv_mhc_seen {
    bool exists;     /* the Machine was read (false: it is gone) */
    bool deleting;   /* metadata.deletionTimestamp is set */
    bool ours;       /* it carries HV_MHC_OWNED */
    bool skip;       /* it carries HV_MHC_SKIP */
    bool skip_ours;  /* ... with the value HV_MHC_SKIP_VALUE */
    bool node_ready; /* its condition NodeReady is True */
};

enum hv_mhc_act {
    HV_MHC_NOTHING = 0,
    HV_MHC_MARK,   /* add HV_MHC_SKIP and HV_MHC_OWNED */
    HV_MHC_UNMARK, /* remove HV_MHC_OWNED, and HV_MHC_SKIP if it still has hvupdater's value */
    HV_MHC_FORGET, /* stop tracking the Machine */
};

/* quiet_s: seconds since the VM was last seen cycling (or since the mark was found). */
enum hv_mhc_act hv_mhc_decide(enum hv_mhc_vm vm, const struct hv_mhc_seen *s, int64_t quiet_s,
                              int ready_wait_s);
const char *hv_mhc_act_name(enum hv_mhc_act a);
/* What a Machine object shows (s->exists set when m is an object). */
void hv_mhc_read_machine(const hj *m, struct hv_mhc_seen *s);

#endif
