/* judge.h: the one begin judgement (issue 27 step 2): how an operation beginning now would
 * change this VM, from what a look saw, the VM's record (or an operation for other hardware
 * the look could not see yet), the desired hardware, the settings and the time. Pure: the
 * same input, the same judgement. UpdateMachine's begin (reconcile) acts on it; the
 * CanUpdateMachine probe (probe.c) answers from it, so what CanUpdateMachine covers is what
 * UpdateMachine begins by construction. */
#ifndef HV_JUDGE_H
#define HV_JUDGE_H

#include "backend.h"
#include "hooks.h"
#include "metrics.h"
#include "oprecord.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A guest that reports statistics on a period (libvirt: 2 s) has a report newer than a step
 * within a few periods; one whose last report is older than this has stopped reporting (or
 * never did: a driver with no guest): it cannot tell. */
#define GUEST_REPORT_S 6

/* What a look saw of the VM (hv_vm_obs, and the backend's plan of the desired hardware). */
struct hv_begin_facts {
    bool on;                               /* running: a cold change power-cycles it */
    struct hv_hw hw;                       /* obs.hw: what the hypervisor runs it with */
    struct hv_guest_obs guest;             /* the guest's own view (a running VM's) */
    bool guest_mem_current;                /* hv_guest_mem_current(guest) at the look */
    bool no_mem_report, no_cpu_report;     /* obs.no_mem_report, no_cpu_report */
    bool can_shutdown;                     /* obs.can_shutdown */
    const char *no_power_cycle;            /* obs.no_power_cycle ("" when it may be cycled) */
    struct hv_field_plan plan[HV_F_COUNT]; /* the backend's plan for the desired hardware */
};

/* An operation of this process for other hardware that the look may not see on the VM's
 * record yet (the probe's: queued, or in its first pass), which may change the VM before the
 * judged operation begins. */
struct hv_begin_other {
    struct hv_hw hw; /* its desired hardware */
    bool unseen;     /* its record is not on the VM yet: its base cannot be read */
    bool starts;     /* the VM is off: it starts it with hw before this operation's look */
};

struct hv_begin_in {
    const struct hv_begin_facts *facts;
    const struct hv_oprecord *old;      /* the VM's record as read (NULL or zeroed: none) */
    const struct hv_begin_other *other; /* NULL: none */
    const struct hv_hw *desired;
    const struct hv_settings *s;
    int64_t now; /* unix seconds */
    /* the engine's bound for one hypervisor call: within it after a cold Failure that left
     * the VM off, the engine's own passes start it again (reconcile.c restart_failed_off) */
    int step_timeout_s;
};

/* The judgement: the plan per field, the base, and the refusals with their codes in the
 * order UpdateMachine names them. */
struct hv_begin_judgement {
    /* per field: the backend's plan with every refusal made impossible with its reason (what
     * CanUpdateMachine covers) */
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_guest_base base; /* what the operation verifies the guest against */
    bool cold;                 /* it goes through a power cycle (a field needs one, or off) */
    int cold_field;            /* the first field that needs a power cycle (-1: none) */
    /* base is an operation in flight's (hv_begin_base), whose live step may still be on its
     * way into the guest: a Failure refused before any step keeps it for the next operation
     * (else it keeps none: it took no step, the guest never moved, pass_paths.c refuse) */
    bool base_inherited;
    /* wait, refuse nothing: a guest an operation started has not reported since it booted */
    bool wait_boot;
    /* the power-on of a guest still booting that the operation begins on (unix seconds; 0:
     * none), which its record carries on (bootAt) */
    int64_t boot_at;
    /* refusals, in the order begin applies them (-1 / false: none) */
    int impossible;      /* the first field the backend cannot change on this VM */
    bool unshown;        /* guestVerification Required: fields the guest cannot show */
    bool unshown_sticky; /* ... for good (else the guest may still report by itself) */
    bool never;          /* a power cycle of a running VM under powerCycle Never */
    bool cycle_refused;  /* a power cycle this running VM may not take (hv_cycle_refused) */
    enum hv_failure_reason cycle_code;
    char unshown_msg[HV_MSG_MAX + 400];
    char never_msg[HV_MSG_MAX + 200];
    char cycle_msg[HV_MSG_MAX + 64];
};

void hv_begin_judge(const struct hv_begin_in *in, struct hv_begin_judgement *j);

/* The message of j's refusal of field f as begin answers it ("cannot change memory: ..."),
 * for impossible. */
void hv_begin_impossible_msg(const struct hv_begin_judgement *j, char *m, size_t cap);

/* The fields of want the guest can show that an operation whose record is r changes:
 * against the record's base, or for a record of an older version, against the configuration
 * it recorded as previous. */
void hv_guest_fields(const struct hv_oprecord *r, const struct hv_hw *want, bool *mem, bool *cpus);

/* Whether a VM that runs may not be power-cycled under s, and why (m, a stable message; why,
 * when not NULL, its reason code): it must never be powered off (no_power_cycle, e.g. a
 * transient domain), or it cannot be asked to shut down while powerOffMode is Soft. The one
 * rule UpdateMachine applies before it shuts a VM down, and the judgement. */
bool hv_cycle_refused(const char *no_power_cycle, bool can_shutdown, const struct hv_settings *s,
                      char *m, size_t cap, enum hv_failure_reason *why);

/* Whether a power cycle that field (HV_F_*; -1: the change as a whole) needs, for reason (NULL
 * or "": not possible live), is refused under s: powerCycle Never, with its stable message (m).
 * The one Never rule of the begin judgement and of a cycle an operation begins later. */
bool hv_never_refused(const struct hv_settings *s, int field, const char *reason, char *m,
                      size_t cap);

/* Whether the guest's memory view g, looked at unix second now, is a report it still makes:
 * seen, and read just now (mem_at 0) or stamped within a few of its periods. An older one
 * (its statistics stopped) tells what it had then, not now: no base to compare a change
 * with. */
bool hv_guest_mem_current(const struct hv_guest_obs *g, int64_t now);

/* The base (what the hypervisor and the guest showed before the first step, for guest
 * verification) an operation beginning now at unix second now takes: fresh, what it sees now
 * (guest views -1 when the guest shows none or the VM is off), or, while the VM's record old
 * (may be NULL) shows an operation of other hardware in flight, that operation's base, with
 * fresh's pair for a field that base has no guest view of when no live step of it can still
 * be on its way into the guest. out may be fresh. True when it is that operation's (inherited). */
bool hv_begin_base(const struct hv_oprecord *old, const struct hv_settings *s, int64_t now,
                   const struct hv_guest_base *fresh, struct hv_guest_base *out);

/* The engine's power-on an operation begun over old now carries on (its bootAt); 0: none. */
int64_t hv_boot_passed_on(const struct hv_oprecord *old, const struct hv_settings *s, int64_t now,
                          int step_timeout_s);

/* guestVerification Required: whether field f of desired cannot be shown by the guest of
 * this VM (running: on), and why (m, a stable message naming the one field). Memory and
 * vCPUs: they differ from the base and the base has no guest view of them (running), or its
 * definition gives the guest no way to report the field (no_report: hv_vm_obs.no_mem_report,
 * no_cpu_report; running or off); cores per socket and disks: whenever they change (plan:
 * how the backend would change f, HV_HOW_NONE when the VM has it). */
bool hv_guest_cannot_show(enum hv_field f, bool on, bool no_report,
                          const struct hv_guest_base *base, const struct hv_hw *desired,
                          enum hv_how plan, const struct hv_settings *s, char *m, size_t cap);

#endif
