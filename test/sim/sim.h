/* sim.h: the deterministic simulation of hvupdater's engine (issue 18).
 *
 * The REAL engine (src/engine) and hook/planning code (src/hooks) run against a simulated
 * hypervisor (a backend behind backends/backend.h, sim_world.c), simulated CAPI callers and a
 * simulated clock (sim_run.c). The engine is driven (hv_engine_cfg.drive): no worker thread,
 * no sleep; the run loop decides, from one seeded generator, which call, pass, fault or
 * passage of time comes next, so a run is reproducible from its seed. Six invariants are
 * checked after every step; a broken one prints the seed and the run's step history.
 * Nothing here is shared between runs: one struct sim per run, freed at its end. */
#ifndef HV_SIM_H
#define HV_SIM_H

#include "backend.h"
#include "engine.h"
#include "hooks.h"
#include "oprecord.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_VMS      8
#define SIM_MAX_HOSTS    3
#define SIM_MAX_REPLICAS 2
#define SIM_ROOM_SPANS   32
#define SIM_HIST         64 /* steps of history kept for a report */
#define SIM_STEP_KINDS   8  /* enum hv_step_kind values (1..7) */
/* The causes a Failure of a covered change is excused by (sim_run.c failure_cause) */
#define SIM_CAUSES 15
enum { SIM_CALL_OBSERVE = 0, SIM_CALL_PLAN, SIM_CALL_WRITE, SIM_CALL_ACT, SIM_CALL_KINDS };

enum sim_inv {
    INV_DONE_SHOWS = 1, /* 1: "done" only when the VM (and the guest, when it can tell) shows it */
    INV_CYCLES,         /* 2: power cycles within the cap; none under Never, of a transient
                           domain, or when the live change shows */
    INV_ENDS,           /* 3: every operation ends within its deadline plus a bound; no slot
                           held by an operation that cannot progress */
    INV_COVERED,        /* 4: a change CanUpdateMachine covered ends done, or fails for a reason
                           that arose after the CanUpdate */
    INV_NO_LOSS,        /* 5: every VM exists at the end, powered as before, old or new
                           configuration, never a mix */
    INV_IDLE,           /* 6: the engine's memory (entries, slots, timers) returns to idle */
    INV_LEGAL,          /* 7: every record write of a VM moves its operation's phase as the
                           engine's table allows (hv_phase_move_allowed) */
    INV_COUNT
};

const char *sim_inv_name(enum sim_inv i);
const char *sim_cause_name(int cause);

/* A VM as the simulated hypervisor holds it. */
#define SIM_STEPS_SEEN 16
#define SIM_PLUGS      16

struct sim_vm {
    char name[32];
    int host;
    bool exists, transient;
    enum hv_power power; /* HV_POWER_PAUSED also stands for suspended */
    struct hv_hw config; /* next boot */
    struct hv_hw live;   /* running values (== config while off) */
    char record[HV_RECORD_MAX];
    bool rec_parsed; /* rec holds record parsed (cleared whenever record changes) */
    bool rec_ok;
    struct hv_oprecord *rec;
    int64_t max_live_mem; /* hot-plug room: live memory may grow up to this */
    int max_live_cpus;
    bool disk_grows; /* false: the disk cannot grow (live or off) */
    /* the guest */
    bool agent;                /* guest agent present (vCPUs online visible) */
    int stats;                 /* 0 fresh balloon statistics, 1 stale, 2 absent */
    struct hv_guest_obs stale; /* what stale statistics keep reporting */
    int64_t boot_at;           /* guest boot completes at this ms (0: booted) */
    int64_t guest_mem;         /* memory the guest kernel has online (MiB, before its reserve) */
    int guest_cpus;            /* vCPUs online in the guest */
    int64_t reserve;           /* what the guest kernel keeps at boot (MiB) */
    int64_t reserve_own;       /* what it keeps without fault 11's reservation (MiB) */
    bool onlines;              /* false: hot-plugged memory is never onlined */
    int64_t online_at; /* hot-plugged memory/vCPUs are onlined at this ms (0: none pending) */
    /* scripted worlds only (0 in seeded ones): the guest onlines hot-plugged memory one block
     * of this many MiB every online_pace_ms, as a kernel's udev rule does, not all at once */
    int64_t online_block;
    int64_t online_pace_ms;
    /* the live memory steps the hypervisor took since the guest last booted (power_on forgets
     * them): when, the memory it had after each, ascending (live memory only grows; a step
     * past SIM_PLUGS overwrites the last, dating it later), and when since then something in
     * the world first ended every base from before it (0: nothing yet): the operator cleared
     * the record, a shutdown reached the VM (a cycle began: a cold Failure keeps no base), a
     * done was stored. With the guest's own memory (guest_mem) and its onlining (onlines) this
     * is the world's fact of a live step the hypervisor took and the guest never did, no boot
     * since (sim_unonlined_before) */
    int64_t plug_ms[SIM_PLUGS];
    int64_t plug_mem[SIM_PLUGS];
    int64_t plug_lost_ms[SIM_PLUGS];
    /* the operation that took each step had no view of the guest's memory from before it, by
     * the world's facts at its begin (guestVerification Off, statistics absent, a boot the
     * operator started still under way, or a base it kept from such an operation): no base
     * from before that step can tell the guest lacks its memory (sim_blind_plug_on_its_way) */
    bool plug_blind[SIM_PLUGS];
    int n_plugs;
    /* the last record write on the VM (world ms), and how long before the write that began
     * the record's operation (begun_at) the one before it came: a record untouched for longer
     * than deadlineSeconds is no base to an operation begun over it (hv_begin_base) */
    int64_t rec_write_ms;
    int64_t begun_quiet_ms;
    /* the write that began the record's operation (world ms), and at that begin the one that
     * had begun the record it replaced (-1: it replaced none): an operation begun longer than
     * deadlineSeconds before is no base to one begun over it, however recently its record was
     * written since (its Failure; docs/messages.md "Clearing a sticky failure": "within
     * deadlineSeconds of the failed operation's start"; held-out seed 5745438) */
    int64_t rec_begun_ms;
    int64_t begun_over_ms;
    bool ignores_acpi;
    bool no_acpi; /* no ACPI button at all: the hypervisor cannot ask its guest to shut down */
    /* the last shutdown asked of the running guest came while it ignored ACPI: that press is
     * lost (a guest that heeds the button later does not act on an old one) */
    bool acpi_missed;
    /* ... when that last shutdown was accepted, and until when the engine may hold that it can
     * still take the VM down: its record's shutdownTimeoutSeconds + the step timeout from then
     * (docs/how-it-works.md "Slots while a VM may go down"; 0: no shutdown asked) */
    int64_t press_ms, press_may_land_ms;
    /* the last shutdown asked of the guest landed and the operator started the VM again (it
     * was off from the engine's cycle): that press is spent */
    bool press_undone;
    /* ... the operator's power-on that spent it (0: none), and which life of each replica had
     * looked at the VM (in a pass) while it was off from that press (0: none; check_cycle_start:
     * a re-send of a spent press that no look saw land) */
    int64_t undone_on_ms;
    int undone_seen_gen[SIM_MAX_REPLICAS];
    int64_t off_at;  /* a shutdown the guest accepted completes at this ms (0: none) */
    int halts;       /* power-ons left that halt right after (-1: every one) */
    int pauses;      /* power-ons left that pause right after */
    int refuses;     /* power-ons left that the hypervisor refuses (-1: every one) */
    int64_t halt_at; /* a halt or pause after power-on happens at this ms */
    /* the last power-on the hypervisor refused or that failed (busy, call failure) */
    int64_t start_failed_ms;
    bool halt_pauses;
    bool restore_fails; /* a reconfigure back to the configuration it had fails */
    int64_t busy_until;
    /* scripted scenarios only (never drawn, so no seed's schedule moves): the outcomes of
     * the next acts on the VM, in order, one letter each: 'f' its call fails before it reaches
     * the hypervisor (unreachable), 'r' the hypervisor refuses it (an internal error: a try),
     * 'l' taken, its answer lost, 'o' as the world has it */
    char acts_next[16];
    int plans_fail;       /* its next plan calls that fail (script only: `plans K N`) */
    int plans_pass;       /* ... after this many let through (script only: `plans K N after=M`) */
    char writes_next[16]; /* the outcomes of its next record writes (script only: `writes`) */
    /* bookkeeping for the invariants (not visible to the engine) */
    bool cycling;          /* off (or going off) because of the engine's shutdown/power-off */
    int cycle_owner;       /* replica that issued it */
    int cycle_gen;         /* ... in its life (restarts count up) */
    int64_t cycle_ms;      /* ... when (its shutdown or power-off was accepted) */
    int64_t cycle_step_at; /* ... the stepAt of the record it was sent under (0: none) */
    uint64_t cycle_seq;    /* ... in the order of the world's events (world_seq) */
    int64_t cycle_op;      /* ... for the operation its record then began (startedAt; 0: none) */
    /* ... and what that life of cycle_owner had listed by then: when it began (the replica's
     * last restart before, s->restart_ms) and when its scans first listed each host
     * (sim_replica.listed_ms; 0: not yet). A restart since starts the replica's listings
     * anew, while the wait before the cycle was that life's (held-out seed 5732500:
     * begun_late_behind_unlisted_hosts reads these) */
    int64_t cycle_life_ms;
    int64_t cycle_listed_ms[SIM_MAX_HOSTS];
    /* a process other than cycle_owner's life that sent the cycle's shutdown or power-off
     * again (replica, life; life 0: none), and when (its latest such step), e.g. a restarted
     * process carrying its cycle on, or another replica that took the cycle over and sent
     * its shutdown again (held-out seed 1634553) */
    int resent_rep;
    int resent_gen;
    int64_t resent_ms;
    /* the configuration the VM had when the record of operation found_op (startedAt) was
     * first written: what that operation found, the world's fact a rollback is judged
     * against (never the record's own `previous`) */
    int64_t found_op;
    struct hv_hw found_config;
    /* the process (replica, life; life 0: none) that took the cycle over from another one
     * while the VM was off, its record written over the other's: carrying it on to start the
     * VM again brings no VM down */
    int off_taker, off_taker_gen;
    int64_t off_taken_ms;   /* ... when (its record written over the other's) */
    uint64_t off_taken_seq; /* ... in the order of the world's events (sim.world_seq) */
    /* when a new operation (another startedAt) first wrote its record while the VM was off
     * after a failed cold operation had given up starting it (its step timeout spent on
     * refused starts, or its window lost to a host or to the step loop: it counted against no
     * cap then), the VM off since (0: none): that operation's reconfigure and power-on bring
     * no VM down (how-it-works `off` row) */
    int64_t off_anew_ms;
    int64_t off_anew_op; /* ... that operation (startedAt): the excuse ends with its record */
    /* the process (replica, life) whose record write the world took last, and when: the
     * world's own log of who carries the VM's operation, never the record's owner field */
    int writer_rep, writer_gen;
    int64_t writer_ms;
    /* the process (replica, life; life 0: none) that wrote the VM's current record in phase
     * shutdown or power-off with no failed try (stored before its step is sent), and when; kept
     * through a Failure a later life of the same replica writes over it and through a clear,
     * reset by any other write (also the first after a clear) */
    int step_rec_rep, step_rec_gen;
    int64_t step_rec_ms;
    /* this VM's last shutdown or power-off whose call got no answer (HV_E_TIMEOUT) and that
     * the hypervisor did not take: the process (replica, life) that sent it, when, and the
     * operation (its record's startedAt) it was for; the engine cannot tell it from one
     * taken (it may land until rc_may_land_until) and holds the cycle's slot (0: none) */
    int unans_rep, unans_gen;
    int64_t unans_ms, unans_op;
    uint64_t unans_seq; /* ... in the order of the world's events (sim.world_seq) */
    /* this VM's last shutdown or power-off sent again by a process (replica, life) over another
     * process's stored step record (phase shutdown or power-off, no try recorded) whose call
     * failed (refused, or not reached): the engine cannot tell whether that other process sent
     * the step and holds it as one that may land (pass_steps.c step_failed, other_down_at); when,
     * and when that record was written (0: none) */
    int rr_rep, rr_gen;
    int64_t rr_ms, rr_rec_ms, rr_step_at; /* (rr_step_at: that other record's stepAt) */
    /* ... the step record another process stored with no try that a write of a process (replica,
     * life) carried over, the same operation still in its step (a takeover, to send it again):
     * who, the stepAt it wrote, and when that other record was written (co_gen 0: none) */
    int co_rep, co_gen;
    int64_t co_step_at, co_rec_ms, co_other_step_at; /* (the other record's stepAt) */
    /* ... the step record another process stored with no try that a write of a process
     * (replica, life) took over for another operation (another startedAt) needing a cycle of its
     * own, its stepAt kept (how-it-works `takeover`: the step is that operation's now, held as
     * one that may land, nothing sent): who, when, and when that other record was written
     * (to_gen 0: none) */
    int to_rep, to_gen;
    int64_t to_ms, to_rec_ms, to_step_at; /* (the stepAt kept) */
    int64_t touched_ms;                   /* last change not made by the engine (fault, operator) */
    int64_t host_fault_ms;                /* last time its host died, stalled or came back */
    int64_t stall_wait_ms;                /* the clock its calls to a stalled host waited, summed */
    int64_t resumed_ms;                   /* last time the operator resumed it (0: never) */
    int64_t look_ms[SIM_MAX_REPLICAS];    /* when each replica's passes last observed it */
    /* ... in the order of the world's events (sim.world_seq): a look and a step in one
     * millisecond told apart */
    uint64_t look_seq[SIM_MAX_REPLICAS];
    /* ... and each replica's last pass look that found it running */
    int64_t look_on_ms[SIM_MAX_REPLICAS];
    /* ... and each replica's last look outside a pass (a CanUpdateMachine probe) */
    uint64_t probe_seq[SIM_MAX_REPLICAS];
    /* when the hypervisor's change reports (ops->watch) last told the replicas of it */
    int64_t reported_ms;
    /* 5's excuse of a VM whose own pass is queued (check_off_mid_cycle): the carrier's pass
     * count and the VM's last look when the excuse began, and the check that last used it */
    int64_t wait_passes, wait_look, wait_check;
    /* each replica's pass of it due since (0: none): its timed pass that came due, or one seen
     * waiting in the queue (sim_note_due, sim_note_queues), which the step loop may leave for
     * later: real workers run a due pass at once */
    int64_t queued_ms[SIM_MAX_REPLICAS];
    /* the step loop's delay of the give-up starts of the failed cold operation that began at
     * late_op and failed at late_step_at, its Failure stored at late_from_ms
     * (sim_start_window_lost_to_the_loop): the carrier's passes of it, queued since, waited
     * late_ms in all; late_cost: a pass that would have come late_ms earlier, before the
     * retry window's end, ran after it */
    int64_t late_op, late_step_at, late_from_ms, late_ms;
    bool late_cost;
    bool operator_power;  /* the operator set its power at some time: end power exempt */
    bool operator_config; /* the operator changed its configuration: end config exempt */
    bool halted_for_good; /* a fault keeps it from running */
    bool halted;          /* off because its guest halted after a power-on */
    /* when the operator last cleared its record, and its statistics last went stale,
     * absent or fresh (0: never) */
    int64_t record_cleared_ms;
    int64_t stats_changed_ms;
    /* ... when they last stopped (went stale or absent), in the order of the world's events
     * (sim.world_seq): told apart from a look in the same millisecond */
    uint64_t stats_stopped_seq;
    /* when its fresh statistics last stopped (went stale or absent), and when its guest last
     * finished booting (0: never, or booted from the start) */
    int64_t fresh_until_ms;
    int64_t booted_ms;
    /* the operation (startedAt; 0: none) whose done record was last written, and whether the
     * guest had a view of its memory (statistics of the booted guest, fresh or reported after
     * the last step) and of its vCPUs (an agent of the booted guest) at that moment, by world
     * facts: a done concluded with the view may be answered again as stored after a halt or
     * a boot took it away */
    int64_t done_view_op;
    bool done_view_mem, done_view_cpus;
    /* what the VM and its guest showed at the last done under guestVerification Off (the
     * hardware taken unverified): a later operation's guest compares with itself */
    struct hv_hw off_done_hw;
    int64_t off_done_guest_mem;
    int off_done_guest_cpus;
    /* memory (vCPUs) of the operation for off_blind_for has no guest view from before it: it
     * began over an operation under guestVerification Off in flight whose live step of that
     * field may be on its way into the guest (the engine keeps that one's base, which holds no
     * guest view, reconcile.c hv_begin_base), or over one that stepped it live and began
     * longer than deadlineSeconds before, or whose record the operator cleared (no base kept
     * at all): set when its record replaces the older one */
    struct hv_hw off_blind_for;
    bool off_blind_mem, off_blind_cpus;
    /* the record the operator cleared last, until a record replaces it (cleared_pending): the
     * engine keeps no base of it, as of one begun longer than deadlineSeconds before, so the
     * next operation's record is noted begun over it (note_begun_over) */
    struct hv_oprecord cleared_rec;
    bool cleared_pending;
    /* the last failed record a record for other hardware replaced (an operation begun over
     * that Failure), and whether there is one: a replica that concluded that Failure before
     * may still answer it (sim_run.c call_update dates it from its operation) */
    struct hv_oprecord replaced_failed;
    bool have_replaced_failed;
    /* the world's order (sim.world_seq) when the failed record on the VM was stored, and, for
     * replaced_failed, when it was stored and when it was replaced: a replica whose last pass
     * looked in between read that Failure (a look after the store has a greater seq, one
     * before the replacement no greater) */
    uint64_t failed_seq, replaced_failed_seq, replaced_failed_gone_seq;
    /* cleared_rec stepped memory (vCPUs) live, or had begun over another operation's live
     * step of it in flight, keeping its base from before that step (sim_set_record) */
    bool cleared_live_mem, cleared_live_cpus;
    /* when the guest of the operator's last power-on finished booting, or of the engine's
     * when the operator cleared the record during that boot (0: the last power-on was the
     * engine's and its record stayed, or none) */
    int64_t foreign_boot_ms;
    /* when the guest that was booting as the operator last cleared the record finished
     * booting (0: none was booting then); unlike foreign_boot_ms, a later power-on of the
     * engine's does not reset it: a pass that began afresh during that boot, since the clear,
     * stays the clear's (held-out seed 2968860: r1 began anew and power-cycled the VM after
     * the clear, resetting foreign_boot_ms before r0's refusal from that boot was answered) */
    int64_t cleared_boot_ms;
    /* when the operator last cleared the record in the middle of a power cycle (the world's
     * cycle under way then; 0: never) */
    int64_t cleared_cycle_ms;
    /* the operator's last clear took a record of a cold operation in a power cycle (a step
     * under way, or a Failure upon one: downAt) while the VM's host was down or stalled, and no
     * record was written since: no engine could see that clear */
    bool cleared_out_cycle;
    enum hv_power power0;
    struct hv_hw config0;
    /* The world's own log of what happened to the VM, for the cause of a Failure (sim_run.c
     * failure_cause: each Failure is excused only by a fault that hit the step it is about,
     * in time; never by the engine's own account) */
    int act_fails[SIM_STEP_KINDS];       /* failed acts of each step kind in a row */
    int64_t act_fail_ms[SIM_STEP_KINDS]; /* ... the last one */
    /* when failures in a row of each step kind last reached the engine's configured
     * max_step_attempts (the retry window its policy allows) */
    int64_t act_spent_ms[SIM_STEP_KINDS];
    /* A retry that got through is noted on the record by the write after it (pass_steps.c
     * rc_step: its tries are over); when that write fails, the record keeps the tries before
     * it and the step's next failure counts on from them (held-out seed 5101829: power-on
     * refused twice, accepted, the write after it failed, the VM halted, the retry's call
     * failed: "failed 3 times"). The step kind whose accepted retry's write is due (0: none),
     * and its failures in a row before it. */
    int retry_write_due;
    int retry_fails_before;
    int64_t lost_ms[SIM_STEP_KINDS]; /* last step of each kind taken whose answer was lost */
    int64_t step_ok_ms;              /* last step the hypervisor took (any kind) */
    /* ... the record on the VM then (0 started: none): its operation's hardware, when it
     * began (unix seconds) and the replica that carried it (-1: none) */
    struct hv_hw step_ok_want;
    int64_t step_ok_started;
    int step_ok_rep;
    /* the steps the hypervisor took lately (a ring, [n_steps_seen % SIM_STEPS_SEEN]): when, for
     * which hardware (the record's desired then) and by which replica (-1: none) */
    struct sim_step_seen {
        int64_t ms;
        uint64_t seq; /* sim.world_seq then */
        struct hv_hw want;
        int rep;
    } steps_seen[SIM_STEPS_SEEN];
    unsigned n_steps_seen;
    /* last reconfigure the hypervisor took (its answer lost or not): the configuration
     * written whole (0: none) */
    int64_t reconf_ms;
    uint64_t reconf_seq; /* ... in the order of the world's events (sim.world_seq) */
    int reconf_rep;      /* ... by which replica's act */
    /* what the VM showed (running: live, off: its configuration) when the operation its
     * record holds now began (the first record of that start and desired hardware) */
    struct hv_hw begun_hw, begun_for;
    int64_t begun_at;
    bool begun_mem_blind, begun_cpus_blind; /* no guest view of that field at begun_at */
    /* ... of memory for want of statistics (absent, or stale past a view) */
    bool begun_stats_blind;
    int64_t call_fail_ms[SIM_CALL_KINDS]; /* last failed call of each kind (SIM_CALL_*) */
    int64_t delay_ms;     /* last fault that can hold an operation back (host died or stalled,
                             paused, busy, a failed or lost call, a halt, a refused start) */
    int64_t host_down_ms; /* last time its host died or stalled ("is back" is none) */
    /* the world's event sequence of each replica's last record write on the VM when that
     * record showed a power cycle under way (cold, shutdown to power-on; 0: its last write did
     * not), and the life that wrote it: the replica's own last word on the VM's cycle */
    uint64_t wrote_cycle_seq[SIM_MAX_REPLICAS];
    int wrote_cycle_gen[SIM_MAX_REPLICAS];
    int64_t paused_ms;    /* last time it was paused or suspended */
    int64_t op_change_ms; /* last operator change of its configuration or power */
    int64_t op_on_ms;     /* last operator power-on */
    int64_t op_off_ms;    /* last operator power-off of a running VM */
    /* ... the same, when it ended a cycle whose shutdown could no longer take the VM down
     * (press_spent at that moment: the engine holds no slot for it by design), 0 otherwise */
    int64_t op_off_spent_ms;
    int64_t power_on_ms;   /* last power-on (anyone's) */
    uint64_t power_on_seq; /* ... in the order of the world's events (sim.world_seq) */
    int power_on_rep;      /* ... by which replica's act (-1: the operator's, op_on_ms) */
    int64_t went_off_ms;   /* last time it went off (any cause) */
    int64_t halt_seen_ms;  /* last halt or pause right after a power-on */
    int64_t paused_on_ms;  /* last pause right after a power-on (fault 6's pausing kind) */
    int64_t gone_ms;       /* when a transient domain stopped and was gone */
    /* fault 6, second form: every power-on with a configuration other than good halts right
     * after (the new configuration does not boot; the old one does) */
    bool halts_new;
    struct hv_hw good;
    int64_t reserve_next;    /* fault 11: the guest reserves this much at every boot from its
                              * next one on, where it fits (boot_reserve) */
    int64_t reserve_boot_ms; /* when a boot last changed the reservation */
    int64_t reserve_grew_ms; /* when a boot last grew it (the guest then shows less than before) */
    int64_t stats_bad_ms;    /* last time its statistics went stale or absent */
};

#define SIM_HOST_OUTAGES 32

struct sim_host {
    char name[32];
    bool down;
    bool stalled;
    /* its outages, oldest first (the world's log, read by sim_start_window_lost_to_host):
     * each from its first fault (dies or stalls; a stall that turns into a death is one
     * outage) to the host's return (back_ms 0: not back; the end phase heals it without a
     * fault). Past SIM_HOST_OUTAGES the oldest is dropped: an outage no longer logged
     * excuses nothing. */
    int n_out;
    int64_t out_ms[SIM_HOST_OUTAGES], back_ms[SIM_HOST_OUTAGES];
    /* the last time (a step's check) one of its VMs was in a power cycle while it was down
     * or stalled: that cycle held its slot then (sim_run.c cycle_on_a_host_in_trouble) */
    int64_t cycle_out_ms;
};

/* One simulated CAPI caller: the Machine of one VM. */
enum sim_cstate { C_IDLE = 0, C_UPDATING, C_STOPPED };

struct sim_op {
    struct hv_hw want;
    /* what the VM showed at the CanUpdateMachine (on: live, off: config), or after the
     * operator's last change of it before the operation stored a record (sim_world.c
     * operator_moved_from) */
    struct hv_hw from;
    struct hv_settings s;
    char settings_json[256];
    bool covered;     /* CanUpdateMachine covered every changed field */
    bool vm_differed; /* ... while the VM did not show CAPI's current objects */
    int can_rep;      /* the replica that answered that CanUpdateMachine */
    int64_t can_ms;   /* when CanUpdateMachine covered it */
    /* then: can_rep's last probe of the VM (sim_vm.probe_seq), and the VM's last change
     * report (sim_vm.reported_ms) */
    uint64_t can_probe_seq;
    int64_t can_reported_ms;
    int64_t start_ms; /* first UpdateMachine call */
    int64_t last_ms;  /* last UpdateMachine call */
    /* the clock other VMs' calls to a stalled host waited before it began (sim.stall_wait_ms
     * less the VM's own then) */
    int64_t others_stall_ms;
    int64_t last_rep_ms[SIM_MAX_REPLICAS]; /* ... to each replica */
    int calls;
    /* a call of this operation found its VM paused outside a cycle with no record written
     * since the operation began (the engine began nothing, and takes no step on a paused VM),
     * and CAPI's first UpdateMachine call after the VM ran again (0: none): the engine begins
     * the operation on that call, its deadline counted from then (docs/messages.md "resume or
     * stop the VM and the next call continues"; held-out seed 3942475) */
    bool held_unbegun;
    int64_t resumed_call_ms;
    bool failed; /* the last answer was a Failure */
    /* begun while the previous operation was in flight (the rollout changed, A -> B, or went
     * back, A -> B -> A): CONTRACT.md says CAPI never does that; the sim's CAPI does, to try
     * the engine on it */
    bool changed_in_flight;
    /* each replica's last answer to this operation, when a Failure: its message and the cause
     * that excused it (a replica answers the same one again to a call it takes for CAPI
     * retrying it) */
    char fail_msg[SIM_MAX_REPLICAS][HV_MSG_MAX];
    int fail_cause[SIM_MAX_REPLICAS];
    int observing; /* "observing the VM" answers in a row since that Failure */
    int backoff;   /* CAPI's back-off after a Failure, s */
    /* each replica's last call whose answer, after that Failure, was one of a pass that read
     * nothing (a look or record write it waits on failed: sim_run.c `unread`), 0: none */
    int64_t unread_ms[SIM_MAX_REPLICAS];
    /* memory (vCPUs) as the last done answered it, unchanged since and not changed by this
     * operation: what the guest shows of it is that done's claim, not this one's */
    bool kept_mem, kept_cpus;
    /* each replica's first look at the VM within the operation's deadline that found room
     * for its cycle within that replica's caps (sim_caps_room; 0: none) */
    int64_t room_look_ms[SIM_MAX_REPLICAS];
    /* the shortest retryAfterSeconds CAPI was given with "waiting for a power-cycle slot" in
     * this operation, ms (0: no such answer): a span of room shorter than it falls between two
     * of the VM's passes, whenever it came */
    int64_t slot_retry_ms;
};

struct sim_caller {
    enum sim_cstate st;
    struct hv_hw spec; /* the infra machine's spec as CAPI last saw it done */
    struct sim_op op, prev_op;
    bool have_prev;
    int64_t rep_call_ms[SIM_MAX_REPLICAS]; /* the last UpdateMachine to each replica, any op */
    int rep_retry_s[SIM_MAX_REPLICAS];     /* ... the retryAfterSeconds its answer asked */
    /* each replica's last answer to this Machine, any op, when a Failure: its message, the
     * hardware asked and the cause that excused it (the engine answers that Failure again to
     * a call for the same hardware: to it, CAPI retrying; after A -> B -> A served elsewhere
     * alike, answer.c) */
    char rep_fail_msg[SIM_MAX_REPLICAS][HV_MSG_MAX];
    struct hv_hw rep_fail_want[SIM_MAX_REPLICAS];
    int rep_fail_cause[SIM_MAX_REPLICAS];
    int64_t next_ms;
    int replica;      /* -1: any */
    bool stopped_mid; /* stopped calling with an operation in flight */
    int64_t stopped_ms;
    struct hv_hw wants[64]; /* every desired state asked so far (for invariant 5) */
    /* the last answer was done (no CanUpdateMachine since), at done_ms (invariant 5) */
    bool done_last;
    /* ... and invariant 1 excused it (the VM did not show it: A -> B -> A mid-update served
     * elsewhere, stepped_for_a_state_left_in_flight): the VM never showed that done */
    bool done_excused;
    int64_t done_ms;
    int n_wants;
    /* every covered CanUpdateMachine: its desired state and when (invariant 4 dates the
     * Failure of an operation begun before the current one by the one that began it) */
    struct hv_hw cover_want[64];
    int64_t cover_ms[64];
    int n_covers;
};

struct sim_replica {
    struct hv_engine *e;
    struct hv_backend be;
    struct hv_plan_hooks ph;
    struct hv_hooks_ctx hooks;
    char owner[64];
    int gen;
    hv_vm_changed_fn watch_fn;
    void *watch_ctx;
    struct sim *sim;
    int idx;
    int64_t passes; /* passes its engine ran (run_engines) */
    /* the hosts this life's scans (list_records) have listed, a bit each: a host none of them
     * could list (down or stalled at each) counts as full against the caps (slots.c) */
    unsigned listed_hosts;
    /* ... and when this life's scans first listed each (0: not yet): the scan takes up a
     * previous life's Failure upon a step at that listing only (scan.c listed_first) */
    int64_t listed_ms[SIM_MAX_HOSTS];
    /* the spans in which this replica's caps, as its life counts them from the world's facts
     * (sim_caps_room), had room for a new cycle on each host: the last SIM_ROOM_SPANS of
     * them (room_to 0: still open), n_room counting all */
    int64_t room_from[SIM_MAX_HOSTS][SIM_ROOM_SPANS];
    int64_t room_to[SIM_MAX_HOSTS][SIM_ROOM_SPANS];
    int n_room[SIM_MAX_HOSTS];
};

struct sim_opts {
    uint64_t seed;
    int steps;       /* steps per run */
    bool quiet;      /* no report on stdout when an invariant breaks */
    FILE *report;    /* where a broken invariant is printed (stderr when NULL) */
    bool trace;      /* print every step as it happens */
    bool strict;     /* breaks an open issue already names count as failures too */
    bool trace_hash; /* fold every trace line into r.trace_hash (trace-identity.sh) */
    /* a scripted scenario (sim_run.c "scripted scenarios"): its world and a table of calls,
     * faults and engine runs at fixed times instead of the seeded choices */
    const char *script;
    /* CAPI as CONTRACT.md has it, "never changes the desired spec while an update is in
     * flight": a rollout does not change (A -> B) or go back (A -> B -> A) while a caller's
     * update is in flight, nor does a caller that got a Failure (still in flight: CAPI
     * keeps calling) begin a new one; it may stop calling (a Machine deleted). The world's
     * other choices are drawn the same way (a run parts from the seeded world's at the first
     * dropped choice, whose draws are not made). Off: the seeded world of every regression
     * seed and mutation guard, which also changes its mind mid-update (test/sim/README.md) */
    bool honest_capi;
};

struct sim_result {
    int steps;
    long checks;         /* invariant checks made */
    enum sim_inv broken; /* 0: none */
    int broken_step;
    char why[512];
    int known; /* breaks an open issue names (see knowns in sim_run.c) */
    char known_what[600];
    long calls, passes, faults, dones, failures;
    /* Failures judged (no cause the checker accepts: a break of 4-covered-ends-done) and
     * excused, by cause (sim_cause_name) */
    long fail_judged, fail_excused[SIM_CAUSES];
    /* dones the VM did not show, excused: another replica's step for the state CAPI left
     * while this update was in flight came after the answering replica's look (see
     * stepped_for_a_state_left_in_flight in sim_run.c) */
    long done_excused;
    uint64_t trace_hash; /* with o.trace_hash: FNV-1a 64 of every trace line */
    long trace_lines;
};

struct sim {
    struct sim_opts o;
    uint64_t rng;
    int64_t now_ms;
    int64_t unix0;
    /* the clock that calls to stalled hosts waited for their timeout, summed: the one clock
     * runs through every replica's passes and probes in turn, so each wait delays them all */
    int64_t stall_wait_ms;
    uint64_t world_seq; /* counts the looks and steps of the engines, in order */
    int step;
    /* the world */
    struct sim_host hosts[SIM_MAX_HOSTS];
    int n_hosts;
    struct sim_vm vms[SIM_MAX_VMS];
    int n_vms;
    int fail_permille;    /* a backend call fails */
    int timeout_permille; /* a step is taken but its call reports a timeout */
    bool record_in_step;
    int events[32]; /* VMs changed since the last delivery (ops->watch) */
    int n_events;
    /* the service */
    struct sim_replica reps[SIM_MAX_REPLICAS];
    int n_reps;
    struct hv_profiles profiles;
    struct hv_engine_drive drive[SIM_MAX_REPLICAS];
    struct hv_engine_cfg ecfg;
    /* the callers */
    struct sim_caller callers[SIM_MAX_VMS];
    /* history and result */
    char hist[SIM_HIST][200];
    int n_hist;
    struct sim_result r;
    bool in_pass; /* a backend call comes from an engine pass (not a hook's probe) */
    int pass_rep;
    int64_t restart_ms[SIM_MAX_REPLICAS]; /* when each replica last restarted */
    /* when each replica's next own pass falls due, as of its last run (0: none) */
    int64_t due_ms[SIM_MAX_REPLICAS];
    int64_t off_checks; /* check_off_mid_cycle runs so far */
};

/* sim_world.c */
uint64_t sim_rand(struct sim *s);
int sim_range(struct sim *s, int lo, int hi); /* lo..hi inclusive */
bool sim_chance(struct sim *s, int permille);
void sim_note(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_world_init(struct sim *s);
void sim_world_tick(struct sim *s);  /* VM transitions now due */
void sim_world_fault(struct sim *s); /* inject one random fault or operator change */
/* fault or operator change kind (0..21, sim_world.c) on VM k (a scripted scenario's) */
void sim_world_fault_on(struct sim *s, int k, int kind);
void sim_deliver_events(struct sim *s); /* ops->watch reports */
void sim_backend_init(struct sim *s, struct sim_replica *r);
bool sim_guest_shows(const struct sim_vm *v, const struct hv_hw *want);
bool sim_hw_shows(const struct sim_vm *v, const struct hv_hw *want);
bool sim_blind_plug_on_its_way(const struct sim_vm *v, int64_t t_ms, int64_t want_mib);
bool sim_unonlined_before(const struct sim_vm *v, int64_t t_ms, int64_t want_mib,
                          int64_t deadline_ms, bool begun_here);
/* v's record, parsed (NULL when it holds none); cached until the record changes */
const struct hv_oprecord *sim_record(struct sim_vm *v);
/* v's record is a Failure upon the step stored with stepAt step_at, or still that step */
bool sim_record_upon_step(const struct sim_vm *v, int64_t step_at);
void sim_set_record(const struct sim *s, struct sim_vm *v, const char *text);
int sim_vm_by_name(struct sim *s, const char *name);
/* v's cycle was begun by process owner (replica index) in its life gen, which has ended, and
 * no pass of any process has observed v since that replica restarted: no process knows it. */
bool sim_unseen_since_restart(const struct sim *s, const struct sim_vm *v, int owner, int gen);
/* v is off, its record a failed cold operation's, and the hypervisor refused or failed the
 * engine's starts through the retry window after that Failure (step_timeout_s, reconcile.c
 * left_off; the last one at or after its end): the engine gave the VM up, bounded */
bool sim_start_given_up(struct sim *s, struct sim_vm *v);
bool sim_start_window_lost_to_the_loop(struct sim_vm *v);
void sim_note_due(struct sim *s, int r);
void sim_note_queues(struct sim *s, int r);
void sim_drop_queues(struct sim *s, int r);
/* A failed cold operation left v off, a start the engine tried after it failed, and v's host
 * was down or stalled from before the end of the Failure's retry window (step_timeout_s)
 * through that end: the outage, not the engine, used the window up. */
bool sim_start_window_lost_to_host(struct sim *s, struct sim_vm *v);
/* w's cycle counts against the caps now (as seen when v's begins): it is under way, not
 * paused mid-cycle, not given up, not resumed unseen by its process yet */
bool sim_cycle_counts(struct sim *s, struct sim_vm *w, const struct sim_vm *v);
/* Invariant 2 after every step: the cycles each process carries stay within its caps */
void sim_check_carried(struct sim *s);
bool sim_caps_room(struct sim *s, int r, int h);
void sim_note_room(struct sim *s); /* (at each step, scan and record write) */
void sim_break(struct sim *s, enum sim_inv inv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* sim_run.c */
void sim_opts_default(struct sim_opts *o);
/* One run from o->seed; returns true when every invariant held. */
bool sim_run(const struct sim_opts *o, struct sim_result *out);

#endif
