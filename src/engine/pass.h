/* pass.h: what the files of one reconcile pass share, private to src/engine (reconcile.h is
 * the interface): the pass itself (struct pass: what one call of hv_reconcile_key knows), the
 * answers' pacing, and the functions each concern offers the others: pass_say.c (texts and
 * answers), pass_steps.c (the record, steps, sticky Failures, rollback), pass_guest.c (done and
 * the guest's own view), pass_paths.c (begin and the paths that carry an operation on),
 * reconcile.c (classify each round, decide, act; the slots at the end). */
#ifndef HV_PASS_H
#define HV_PASS_H

#include "backend.h"
#include "books.h"
#include "errclass.h"
#include "hooks.h"
#include "judge.h"
#include "oprecord.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RETRY_LIVE        2
#define RETRY_LIVE_SOON   1  /* within LIVE_SOON_S of a live step: the change shows soon */
#define LIVE_SOON_S       30 /* a DIMM or a vCPU shows at once, a guest's view in seconds */
#define RETRY_COLD        5
#define RETRY_SLOT        10
#define RETRY_UNREACHABLE 3 /* a restarting daemon or vCenter is back in seconds */
#define MAX_RECYCLES      3
/* Starts with the new configuration after which a VM that went off again each time (a guest
 * that panics at boot, with on_crash=destroy) is given up on; a cycle needs one, plus one per
 * time the VM was started by someone else before it was reconfigured (recycles). */
#define MAX_STARTS 3

struct pass {
    const struct hv_books *b;
    struct hv_backend *be;
    const struct hv_vm_ref *ref;
    const struct hv_hw *desired;
    const struct hv_settings *s;
    struct hv_vm_obs obs;
    struct hv_oprecord rec;
    char key[HV_KEY_MAX];
    char what[160]; /* rc_describe(desired) */
    int64_t now;
    struct hv_update_result *out;
    /* a hook call asked for this pass, at these unix seconds (0: the engine's own carry-on) */
    int64_t called_at;
    bool chain; /* the step just taken can be followed at once */
    bool seen;  /* the last round read the VM's record */
    /* the VM's record, as read or last stored, shows a power cycle of this process in flight
     * (for any hardware): its slot stays, whatever else failed in this pass */
    bool vm_cycle;
    bool ours; /* p->rec is this operation's record (for these desired hardware) */
    /* the operation rc_begin() began (its start time; 0: none), noted as seen by this
     * process (first_sight) once its record is stored: a begin whose record is never stored
     * leaves the VM's record, and what this process knows of its steps, as they were */
    int64_t sight_new;
    bool store_no_answer; /* the last failed rc_store got no answer: it may have landed */
    /* a failed operation's start of the VM (as it is, or rolled back) failed: it is off */
    bool left_off;
    /* the VM's record is another hardware's sticky Failure, or its operation open before its
     * cycle (rc_class) */
    bool other_failed, other_open;
    bool own_cycle_off; /* its class's (rc_class), for the begin refusals (pass_paths.c) */
    /* the VM was seen paused or suspended in the middle of this operation's cycle: the cycle
     * cannot progress, its slot goes back */
    bool stalled;
    /* while rc_begin() runs: when the shutdown or power-off of a cycle of an older operation,
     * which this one takes over, was sent (0: none); a Failure of rc_begin() records it */
    int64_t down_at;
    /* a failed operation's VM may still go down from a cycle's shutdown or power-off: it
     * keeps a slot (see hv_reconcile_key) */
    bool going_down;
    /* the VM is paused or suspended under a step of this process that may land once it runs
     * (a deadline Failure stored upon a shutdown or power-off sent before the pause, or a
     * cycle of this process for other hardware past its deadline): no pass is timed for it,
     * the backend's change report of its resume wakes one (HV_FOLLOW_RESUME) */
    bool parked;
    bool gone; /* the look found no such VM (HV_FOLLOW_GONE) */
    /* the VM runs and its record, as read, shows a shutdown or power-off of this process's
     * previous life (for any hardware) sent recently enough to take it down yet: a slot held
     * for it stays (no live process holds one for it) */
    bool record_down;
    int64_t record_down_at; /* ... when that step was sent (0: none) */
    /* another process's shutdown or power-off of this operation, sent with no failed try
     * within the time it may still take the VM down: when it was sent (0: none) */
    int64_t other_down_at;
    /* the VM is off and its record, as read, shows a cycle of this process's previous life
     * (for any hardware): the VM is down, no live process holds a slot for it, and this
     * process brings it back; a slot held for it stays until a pass of this process does */
    bool previous_off;
    /* The live step about to be taken is the last one: with ops->record_in_step it carries
     * the waiting record (carried: it did, so no separate write follows). */
    bool carry, carried;
    /* The VM as the backend read it when the last step finished (after.found): the next
     * round's observation, a look taken after that step. */
    struct hv_vm_obs after;
    /* The record the VM holds as this pass knows it: as read by its look, then as it stored
     * it. A store is conditional on it (ops->write_record's expected): another writer since,
     * e.g. another replica that began the same operation at the same moment, makes the store
     * a lost race, and no step follows it. Unknown (on_vm_known false) after a step that
     * carried the record failed: it may have landed (e.g. a reconfiguration that did not
     * answer in time); the next store is then unconditional. */
    char on_vm[HV_RECORD_MAX];
    bool on_vm_known;
};

/* pass_say.c */
/* "memory 2048 MiB, 3 vCPUs, 2 cores per socket" for the fields that are set. */
void rc_describe(char *out, size_t cap, const struct hv_hw *h);
/* Every desired field (>= 0) equals what the VM shows. */
bool rc_matches(const struct hv_hw *have, const struct hv_hw *want);
void rc_answer(struct hv_update_result *out, bool failure, int retry, const char *msg);
/* The Failure recorded on the VM, answered on every call for its desired hardware. */
void rc_answer_sticky(struct hv_update_result *out, const char *msg);
void rc_log_err(const struct pass *p, const char *what, const struct hv_err *err);
/* The settings an operation's outcome depends on, as recorded with it. */
void rc_policy_of(const struct hv_settings *s, char *out, size_t cap);
/* "in progress: <fmt>", CAPI asked back in retry seconds */
void rc_progress(struct pass *p, int retry, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ... waiting for a change already made to show */
void rc_settle(struct pass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ... waiting for the VM to go off after a shutdown or power-off was sent */
void rc_going_off(struct pass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ... another task holds the VM (a lost race, a busy VM): the next pass tries again soon */
void rc_progress_busy(struct pass *p);
/* A call of kind k to the hypervisor failed: true (answered in progress) when errclass.h's
 * table says to wait (HV_TAKE_WAIT) and the outage bound, the operation's deadline, has not
 * passed; false: the caller takes it as the table's other cells say. */
bool rc_wait_for_hypervisor(struct pass *p, enum hv_err_call k, const struct hv_err *err);

/* pass_steps.c */
/* Store p->rec on the VM; false (answered) when it could not be. */
bool rc_store(struct pass *p);
/* The pass's first_sight of operation op: false for the operation it began (sight_new). */
bool rc_first_sight(struct pass *p, int64_t op);
/* This process forgets its sight of the VM's operation (a step it knows it did not send):
 * the next pass sends it again. */
void rc_forget_sight(struct pass *p);
/* A sticky Failure, recorded on the VM; why is its reason code. */
bool rc_fail_sticky(struct pass *p, enum hv_failure_reason why, const char *msg);
/* Best-effort start of a VM an operation gives up on. */
bool rc_power_on_anyway(struct pass *p);
/* The configuration from before the operation, for the fields it changes. */
bool rc_previous_config(const struct hv_oprecord *r, struct hv_hw *out);
/* A later pass found the rolled-back VM off and rolled back again. */
void rc_roll_back_again(struct pass *p);
/* A pass found the rolled-back VM running: its stored message says which configuration it
 * was started with, as the VM shows it. */
void rc_rollback_note_follows_vm(struct pass *p);
/* Record the phase, then act. True when the step was accepted. */
bool rc_step(struct pass *p, enum hv_phase phase, enum hv_step_kind kind, const char *method);
/* The VM may be started with the new configuration once more (else a sticky Failure). */
bool rc_may_start(struct pass *p);

/* pass_guest.c */
/* Done: the answer, and the record when there is one (note: what it says of the guest). */
void rc_done(struct pass *p, bool had_record, const char *note);
/* The hypervisor shows the desired hardware and the VM runs: true when answered. */
bool rc_done_in_guest(struct pass *p, bool had, bool inflight);
/* Ask for the guest's own view now; false (answered) when the VM cannot be read. */
bool rc_look_into_guest(struct pass *p, bool had);
/* The guest shows the change without the power cycle under way (its own view, newer than
 * the step): 1, 0, or -1 when the look failed (answered). */
int rc_shows_without_cycle(struct pass *p);

/* pass_paths.c */
/* A new operation (judged by hv_begin_judge): true when begun (p->rec is its record). */
bool rc_begin(struct pass *p);
void rc_off_path(struct pass *p);
void rc_cold_on_path(struct pass *p);
void rc_live_path(struct pass *p);
void rc_neither_on_nor_off(struct pass *p);

/* reconcile.c: the classes of a round (rc_classify, pure), what they are computed from */
struct rc_call {
    const struct hv_hw *desired;
    const struct hv_settings *s;
    char policy[96];   /* rc_policy_of(s) */
    const char *owner; /* this process life, host:pid.start */
    int64_t now;
    int step_timeout_s;
    bool on; /* the VM runs (else it is off) */
    /* unix seconds of the hook call this round's pass follows (0: the engine's own pass) */
    int64_t called_at;
    /* when the VM of the record's operation ran again after this process saw it paused in the
     * middle of its shutdown or power-off (rc_step_run_at's pause end; 0: none) */
    int64_t run_at;
};
/* How the VM's record relates to this call. */
enum rc_rel {
    REL_NONE,          /* no record (or one that does not parse) */
    REL_OTHER,         /* an operation for other desired hardware (an older one) */
    REL_THIS,          /* this hardware's operation, open (none to power-on) */
    REL_THIS_DONE,     /* this hardware's, done */
    REL_THIS_FAILED,   /* this hardware's sticky Failure under these settings */
    REL_THIS_REFAILED, /* this hardware's Failure under other settings: a new operation */
};
/* Who wrote the record last. */
enum rc_owner {
    OWN_SELF,     /* this process */
    OWN_PREVIOUS, /* a previous life of it (same host, another pid: its slots went with it) */
    OWN_OTHER,    /* another process (another replica) */
};
/* Who wrote the record whose owner is owner, as this process (mine) tells it: the one test
 * of "this process's previous life" the passes and their classification share. */
static inline enum rc_owner rc_owner_of(const char *owner, const char *mine)
{
    return !strcmp(owner, mine)             ? OWN_SELF
           : hv_owner_previous(owner, mine) ? OWN_PREVIOUS
                                            : OWN_OTHER;
}
/* Whether the running VM may still go down from a shutdown or power-off already sent (until
 * rc_may_land_until of hazard_sent). */
enum rc_hazard {
    HZ_NONE,
    HZ_STEP_SENT,   /* a cycle's shutdown or power-off, sent within the time it can take */
    HZ_FAILED_UPON, /* a Failure that came upon such a step (downAt), within that time */
};
struct rc_class {
    enum rc_rel rel;
    enum rc_owner owner;
    enum rc_hazard hazard;
    int64_t hazard_sent; /* when the step that may still land was sent */
    int hazard_tries;    /* its failed tries (the record's attempts): the last one not sent */
    bool on;             /* power: the VM runs (else off) */
    enum hv_phase phase; /* the record's phase */
    bool off_first;      /* ... power-off, TrySoft's with no shutdown before it (offFirst) */
    bool cycle; /* the record shows a cycle in flight (shutdown to power-on), any hardware */
    /* ... of other hardware, while the VM runs and no step of it may still take it down (its
     * shutdown or power-off past the time it could land, or its power-on done): it holds the
     * VM neither down nor going down, and no pass of this hardware carries it */
    bool other_cycle_spent;
    bool left_off; /* a Failure in a cycle that left the VM off, any hardware */
    /* the VM is off in the middle of a cycle of this process or its previous life (any
     * hardware): a new operation refused over it starts it as it is first (seed 805796) */
    bool own_cycle_off;
    bool other_inflight; /* another process carries out an operation for other hardware */
    bool other_open;     /* an operation for other hardware still open before its cycle */
    bool other_failed;   /* the record is another hardware's sticky Failure */
    bool takeover;       /* other hardware's step may still take the VM down: taken over */
    /* another process began an operation for other hardware at or after the call this pass
     * follows: CAPI asked it for that hardware since (this call's may be wanted no more) */
    bool superseded;
};
void rc_classify(const struct hv_oprecord *r, bool had, const struct rc_call *c,
                 struct rc_class *k);
/* The record holds this call's operation (open, done or failed): p->ours. */
static inline bool rc_ours(const struct rc_class *k)
{
    return k->rel == REL_THIS || k->rel == REL_THIS_DONE || k->rel == REL_THIS_FAILED;
}
/* Until when (unix seconds, exclusive) a shutdown or power-off sent at sent may still take the
 * VM down: shutdownTimeoutSeconds plus the step timeout. The one window of "a sent step may
 * still land" (the classes, a step taken over, this process's own step after a pause). */
int64_t rc_may_land_until(const struct hv_settings *s, int step_timeout_s, int64_t sent);
/* When the step in flight of p's record (its shutdown or power-off) began to have its time:
 * when it was sent, or, when this process saw the VM paused in the middle of the cycle since,
 * when the pause ended: the first pass that sees the VM running again after it saw it paused
 * (p->now then; the resume itself is seen by no look; seed 1718023), else the last time it
 * saw it paused (a paused guest acts on nothing; seed 15744). Call it only with the VM
 * running. */
int64_t rc_step_run_at(struct pass *p);

/* What a pass needs of its VM's power-cycle slot: the one rule (rc_slot_need, pure), applied
 * where the pass gates a cycle's step and at the end of the pass (rc_slot applies it). */
enum rc_slot {
    SLOT_AS_IS, /* keep what is held (or not) */
    SLOT_TAKE,  /* take one within the caps (a new cycle, or one in flight held by none) */
    SLOT_RENEW, /* give back what is held, then take one within the caps as they are now */
    SLOT_FORCE, /* take one over the caps: a cycle under way must finish */
    SLOT_FREE,  /* give it back: no cycle, no step that may land, no VM left off, no VM */
};
/* Where a pass asks for the slot, and for what kind of cycle. */
enum rc_gate {
    GATE_NONE = 0, /* at the end of the pass (no gate) */
    GATE_NEW,      /* a cycle's gate: a new cycle, within the caps (a slot held is kept) */
    /* a cycle under way, which must finish: this process's own step sent that may still take
     * the VM down, a step taken over, the VM off mid-operation (over the caps) */
    GATE_UNDER_WAY,
    /* a cycle this pass begins anew (a new cycle, or a first step sent again as one): a slot
     * held from before (a cycle that ended, one taken over the caps for a step that did not
     * go out) is no claim on the caps as they are now */
    GATE_ANEW,
    /* the operation ends in this pass (done, or its sticky Failure met again): no cycle of it
     * is in flight, and the slot goes back; what the end of the pass still needs (a VM the
     * Failure left off, a step it came upon that may land) it takes again there */
    GATE_ENDED,
};
struct rc_slot_facts {
    enum rc_gate gate;
    /* at the end: the look found no VM (nothing of it can go down) */
    bool gone;
    /* at the end: the pass read the record (seen); this operation's cycle is in flight
     * (cycling); the VM's record shows a cycle of this process (vm_cycle) or a step of its
     * previous life that may still land (record_down) or that left the VM off mid-cycle
     * (previous_off); the cycle cannot progress (stalled: paused); a Failure left the VM off
     * just now (left_off); a Failure came upon a step that may still take the VM down
     * (going_down) */
    bool seen, cycling, vm_cycle, record_down, previous_off, stalled, left_off, going_down;
};
enum rc_slot rc_slot_need(const struct rc_slot_facts *f);
/* Apply need to p's VM: false when a slot was asked for and none is free. */
bool rc_slot(struct pass *p, enum rc_slot need);
/* The need at a cycle's gate of kind g (not GATE_NONE), applied. */
bool rc_slot_gate(struct pass *p, enum rc_gate g);

/* The cycle-step row with the cycle's shutdown or power-off in flight (docs/how-it-works.md
 * `cycle-step`): what a pass does, decided from these facts alone (rc_step_decide, pure), then
 * done by step_in_flight (pass_paths.c). */
enum rc_step_act {
    STEP_WAIT_OFF,        /* power-off: wait for the VM to power off */
    STEP_POWER_OFF_AGAIN, /* power-off: send it again (first sight or a failed try, or its
                             window over) */
    STEP_LOOK,            /* shutdown: look into the guest first, then decide with what it shows */
    STEP_WAIT_SHOWN,      /* the guest shows the change; the shutdown sent may still land: wait */
    STEP_GO_LIVE,         /* the guest shows the change and nothing sent can land: no cycle */
    STEP_SEND_AGAIN,      /* send the shutdown again (first sight or a failed try) */
    STEP_WAIT_BUSY,       /* one to send again that a task holding the VM keeps from being sent */
    STEP_WAIT_SHUTDOWN,   /* wait for the guest to shut down */
    STEP_FAIL,            /* the window is over under powerOffMode Soft: a Failure */
    STEP_POWER_OFF,       /* the window is over (TrySoft): power the VM off */
};
enum rc_shows {
    SHOWS_UNASKED = 0, /* the guest not looked into by this pass yet */
    SHOWS_NO,          /* it does not show the change, or cannot tell, or the VM does not
                          run with the desired hardware live and next-boot */
    SHOWS_YES,         /* it shows the change (rc_shows_without_cycle) */
};
struct rc_step_facts {
    bool power_off;   /* the step is a power-off (else a shutdown) */
    bool first;       /* this process's first sight of the operation's step */
    bool failed_try;  /* the last try of the step failed (the record's attempts) */
    bool busy;        /* a task holds the VM */
    bool can_ask;     /* a guest can be asked to shut down */
    bool unanswered;  /* a try of the step got no answer: it may be under way */
    bool off_late;    /* power-off: stepTimeoutSeconds passed since the step */
    bool window_over; /* shutdown: shutdownTimeoutSeconds passed since the step */
    bool may_land;    /* a step sent may still take the VM down (rc_may_land_until) */
    bool soft;        /* powerOffMode Soft: never a power-off */
    enum rc_shows shows;
};
enum rc_step_act rc_step_decide(const struct rc_step_facts *f);
/* Whether the pass that decided act forgets this process's sight of the step (rc_forget_sight),
 * so that the next pass is a first sight again and sends it: decided from the same facts. */
bool rc_step_forgets_sight(const struct rc_step_facts *f, enum rc_step_act act);

#endif
