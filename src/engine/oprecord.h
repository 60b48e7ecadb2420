/* oprecord.h: the operation record hvupdater stores on the VM (libvirt metadata, vSphere
 * extraConfig) so that a restarted process or another replica continues the same operation.
 * Plain value; (de)serialised as compact JSON of at most HV_RECORD_MAX bytes. */
#ifndef HV_OPRECORD_H
#define HV_OPRECORD_H

#include "backend.h"
#include "json.h"

#include <stdbool.h>
#include <stdint.h>

enum hv_phase {
    HV_PH_NONE = 0,
    HV_PH_PLANNED,     /* planned, waiting (e.g. for a power-cycle slot) */
    HV_PH_LIVE,        /* live steps being issued */
    HV_PH_WAIT_LIVE,   /* live steps issued at step_at; waiting for the hypervisor to show them */
    HV_PH_SHUTDOWN,    /* graceful shutdown requested at step_at */
    HV_PH_POWER_OFF,   /* hard power-off requested at step_at */
    HV_PH_RECONFIGURE, /* VM off; configuration being written */
    HV_PH_POWER_ON,    /* start requested at step_at */
    HV_PH_DONE,
    HV_PH_FAILED,
    HV_PH_COUNT
};

/* What the VM had before an operation's first step, for guest verification: "the guest shows
 * the change" means its own view moved from guest_* by what the hypervisor's moved from hv_*
 * (the guest is compared with itself, whatever its kernel keeps for itself at boot). */
struct hv_guest_base {
    int64_t hv_memory_mib;    /* the hypervisor's live memory then (-1: unknown) */
    int32_t hv_cpus;          /* the hypervisor's live vCPUs then (-1: unknown) */
    int64_t guest_memory_mib; /* the guest's memory total then (-1: it could not tell) */
    int32_t guest_cpus;       /* vCPUs online in the guest then (-1: it could not tell) */
};

struct hv_oprecord {
    struct hv_hw desired;
    struct hv_hw prev; /* the configuration before the operation, for the fields it changes
                          (-1 = not changed or not known), restored when the VM cannot start */
    bool has_base;     /* base was taken (records of older versions have none) */
    struct hv_guest_base base;
    enum hv_phase phase;
    bool cold;                   /* the operation goes through a power cycle */
    bool rollback;               /* failed: the VM did not start with the new configuration,
                                    so the previous one is put back and the VM started */
    char plan[HV_F_COUNT][48];   /* per field: "none", "live:dimm", "cold", ... */
    int attempts;                /* transient failures of the current step */
    int recycles;                /* times the VM came back on before it was reconfigured */
    int starts;                  /* power-ons of this operation the hypervisor accepted */
    int64_t started_at, step_at; /* unix seconds */
    /* phase failed: when a shutdown or power-off sent for a power cycle that the Failure
     * came upon in flight was sent (unix seconds; 0: none): the VM may still go down.
     * Phase shutdown or power-off: that step is an older operation's, taken over by this one,
     * which needs no power cycle itself (it sends none of its own). Read it by its two
     * names, hv_rec_failed_upon_at and hv_rec_taken_over_at (phase.h); write it only with
     * hv_rec_move */
    int64_t down_at;
    /* phase live: the live step (HV_STEP_LIVE_*) the attempts are failures of, "triesOf"
     * (the live steps share the phase; 0: not recorded, as in records of older versions) */
    enum hv_step_kind tries_of;
    /* the engine's own power-on (unix seconds) of a guest that was still booting when this
     * operation began, carried on from the record it began over ("bootAt"; 0: none): a later
     * operation waits for that guest's first report as it would right after the power-on */
    int64_t boot_at;
    /* phase power-off under powerOffMode TrySoft: the cycle's first step, no shutdown of it
     * sent before (the guest could not be asked), "offFirst" (false in records of older
     * versions: a TrySoft power-off is taken to follow a shutdown that may still land). Kept
     * while the phase stays power-off; hv_rec_move clears it on any other phase */
    bool off_first;
    char owner[96];    /* host:pid.start of the process life that wrote it */
    char policy[96];   /* settings the outcome depends on (see reconcile.c) */
    char message[512]; /* Failure message (phase FAILED) */
    /* How the calls name the VM (server, uuid, name, disk, cluster, thumbprint as the
     * request gave them; all "" in records of older versions): a process that finds the
     * record by itself (ops->list_records) carries the operation on under the same name as
     * the calls that began it. ref.machine: the Machine of the checked call (machine check
     * on; stored as "machine"), which the API server confirms before a process that finds
     * the record carries its power cycle on (scan.c). */
    struct hv_vm_ref ref;
};

const char *hv_phase_name(enum hv_phase p);
/* Serialise into buf (cap bytes); false when it does not fit. */
/* A VM reference as the record's "ref" object (its non-empty fields), and back: fields absent
 * from o are left as they are in ref. */
hj *hv_vm_ref_to_json(const struct hv_vm_ref *ref);
void hv_vm_ref_from_json(const hj *o, struct hv_vm_ref *ref);
bool hv_oprecord_write(const struct hv_oprecord *r, char *buf, size_t cap);
/* Parse; false (and *r zeroed) when text is empty or not a record of ours. */
bool hv_oprecord_read(struct hv_oprecord *r, const char *text);
bool hv_hw_equal(const struct hv_hw *a, const struct hv_hw *b);
/* owner (host:pid.start) is a previous life of the process mine: the same host, another pid
 * or start (that process is gone: its power-cycle slots went with it) */
bool hv_owner_previous(const char *owner, const char *mine);

#endif
