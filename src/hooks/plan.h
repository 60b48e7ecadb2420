/* plan.h: coverage planning for CanUpdateMachine / CanUpdateMachineSet.
 * Diffs current vs desired, decides per field live / cold / not coverable, and builds the
 * JSON Patch that copies exactly the desired values hvupdater can change.
 * Ownership: inputs are borrowed; hv_coverage owns its patch (free with hv_coverage_free). */
#ifndef HV_PLAN_H
#define HV_PLAN_H

#include "json.h"
#include "profile.h"
#include "settings.h"

/* How a Block answer (onUncoverable=Block) begins. */
#define HV_MSG_BLOCKED HV_MSG("cannot update in place (onUncoverable=Block):")

/* HV_CLASS_HAVE: the VM already shows the desired value (asked under powerCycle=Never):
 * covered, nothing to do. */
enum hv_class { HV_CLASS_LIVE = 1, HV_CLASS_COLD, HV_CLASS_NO, HV_CLASS_HAVE };

#define HV_MAX_ITEMS 32

struct hv_item {
    char where[160];  /* e.g. "infrastructureMachine.spec.memoryMiB" */
    char reason[400]; /* stable text, "" when none (a provider's refusal can be long) */
};

struct hv_field_result {
    enum hv_field f;
    enum hv_class cls;
    char name[64];         /* display name, e.g. "memoryMiB" */
    char from[32], to[32]; /* value texts, "unset" when absent */
    char how[64];          /* live method when known ("hot-add") */
};

struct hv_coverage {
    bool failure;    /* answer status Failure (Block, bad settings, bad request) */
    bool declined;   /* an unknown kind: nothing covered, never a Failure */
    bool pending;    /* the probe has not answered in time: a retryable Failure */
    bool unreadable; /* the probe could not read the VM (e.g. the hypervisor cannot be reached):
                        a retryable Failure, never a cover */
    char unreadable_why[200];
    char message[1024];
    hj *infra_patch; /* JSON Patch ops array, NULL when nothing is covered */
    struct hv_field_result fields[HV_F_COUNT];
    size_t n_fields;
    size_t n_uncovered;     /* stored in uncovered */
    size_t n_uncovered_all; /* counted, may exceed HV_MAX_ITEMS */
    struct hv_hw desired;   /* desired hardware in MiB / counts (-1 = not covered) */
    /* hv_plan_hooks.admit (the provider's dry run): not known yet, or the API server did not
     * answer usably: a retryable Failure with admit_why; or the claim stands unchecked, said
     * in the message (unchecked: why) */
    bool admit_pending;
    char admit_why[420];
    char unchecked[420];
    /* Last, and left unzeroed by hv_plan_coverage (18 KB of the struct's 21, zeroed on every
     * hook call before): an item is written whole before it is counted in n_uncovered, and
     * only the first n_uncovered are read. */
    struct hv_item uncovered[HV_MAX_ITEMS];
};

/* ---- dry-run claims (hv_plan_hooks.admit; kube/dryrun.h does the asking) ---- */
enum hv_admit {
    HV_ADMIT_ACCEPTED = 0, /* the provider accepts the covered change */
    HV_ADMIT_REFUSED,      /* it refuses it: why is its reason; nothing is covered */
    HV_ADMIT_UNCHECKED,    /* it could not be asked (no access, no client): covered, said so */
    HV_ADMIT_PENDING,      /* not known yet: a retryable Failure */
    HV_ADMIT_ERROR,        /* the API server did not answer usably: a retryable Failure */
};

/* The question: may an infra machine of this request take patch (a JSON merge patch of the
 * covered fields' desired values, {"spec": {...}} in an infra machine's shape)? All
 * borrowed for the call. */
struct hv_admit_ask {
    bool machine_set;
    const char *ns;
    const char *owner;       /* CanUpdateMachineSet: the current MachineSet's name */
    const char *api_version; /* of the current infra machine (template) */
    const char *kind;
    const char *cur_name, *des_name; /* the infra machines (templates) */
    const hj *patch;
};

/* Asked by the planner; either may be NULL (then: always available / no live probe). */
struct hv_plan_hooks {
    void *ctx;
    /* 1 when a configured backend can reach the VM's host/server; 0 with why otherwise. */
    int (*available)(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref, char *why,
                     size_t whylen);
    /* CanUpdateMachine only (it names one VM), under every powerCycle: how this VM would take
     * the desired hardware (the whole of it, as UpdateMachine plans it) now: the backend's
     * plan (ops->plan) on what the VM shows, with a change that needs a power cycle made
     * HV_HOW_IMPOSSIBLE when UpdateMachine would refuse to power-cycle this running VM under
     * s (not under powerCycle=Never, where the planner says so itself). Bounded and cached
     * (hv_engine_probe). Returns 0 and fills plan; -1 with why when the VM cannot be read
     * (e.g. the hypervisor cannot be reached); -2 when the hypervisor has not answered yet;
     * -3 when the VM was not found. The hook answers -1 and -2 with a retryable Failure. */
    int (*probe)(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                 const struct hv_hw *desired, const struct hv_settings *s,
                 struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen);
    /* The profile's backend's rules that hold whatever the VM's state (backend ops->check):
     * HV_HOW_IMPOSSIBLE with the reason UpdateMachine would give for each set field of
     * desired that no VM can take. No I/O. May be NULL (then: no such rules). */
    void (*check)(void *ctx, const struct hv_profile *p, const struct hv_hw *desired,
                  struct hv_field_plan plan[HV_F_COUNT]);
    /* Whether the provider accepts the change of the fields about to be covered (a dry run
     * on the API server, answered from a cache, never blocking long): an enum hv_admit, why
     * the reason of REFUSED, UNCHECKED, PENDING and ERROR. May be NULL (then: not asked). */
    int (*admit)(void *admit_ctx, const struct hv_admit_ask *a, char *why, size_t whylen);
    void *admit_ctx;
};

struct hv_plan_input {
    const struct hv_profiles *profiles;
    const struct hv_settings *settings;
    bool machine_set;                    /* CanUpdateMachineSet: objects are templates */
    const hj *cur_machine, *des_machine; /* Machine or MachineSet (may be NULL) */
    const hj *cur_infra, *des_infra;     /* required */
    const hj *cur_boot, *des_boot;       /* may be NULL */
    const struct hv_plan_hooks *hooks;
};

void hv_plan_coverage(const struct hv_plan_input *in, struct hv_coverage *out);
void hv_coverage_free(struct hv_coverage *c);

/* VM identity from a profile's rule: providerID (machine spec, then infra spec) with the
 * profile's prefix, else metadata.name; server from the profile's serverPath. Returns 0, or
 * -1 with a stable reason when the object does not identify a VM. */
int hv_identity(const struct hv_profile *p, const hj *machine, const hj *infra,
                struct hv_vm_ref *ref, char *why, size_t whylen);

/* Desired hardware (MiB, counts) read from an infra object by the profile; fields absent or
 * invalid are -1. */
void hv_desired_hw(const struct hv_profile *p, const hj *infra, struct hv_hw *hw);

/* A power cycle found in flight with no call behind it (engine/scan.c), against the Machine
 * and infra machine the API server holds now (read by kube/machinecheck.h
 * hv_mc_resume_read): 0 when the profile of the infra machine's apiVersion and kind (one of
 * backend's) finds in them the VM the record is on (vm: the record's name of it) and reads
 * from the infra machine's spec the record's desired hardware; else -1 with a stable message
 * in msg. */
int hv_resume_matches(const struct hv_profiles *ps, const char *backend, const hj *machine,
                      const hj *infra, const struct hv_vm_ref *vm, const struct hv_hw *desired,
                      char *msg, size_t msglen);

/* A copy of a Machine spec as CAPI compares it (internal/util/inplace
 * CleanupMachineSpecForDiff): without clusterName, bootstrap, infrastructureRef, providerID,
 * minReadySeconds, readinessGates, taints and the deletion timeouts. NULL for NULL. */
hj *hv_clean_machine_spec(const hj *spec);

/* How a covered field is shown after "<field> <from>-><to>": " live", " with a power
 * cycle" or " already on the VM". */
const char *hv_class_suffix(enum hv_class cls);

/* Whether an uncovered item's reason is one of the generic ones (not hardware / not a profile
 * field) rather than a reason specific to that field. */
bool hv_reason_is_generic(const char *reason);

#endif
