/* engine_internal.h: what the engine's files share, private to src/engine (engine.h is the
 * interface): the per-VM entry, the engine itself, and the functions one concern offers the
 * others. Locking: every field of struct entry and struct hv_engine is guarded by
 * hv_engine.lock unless said otherwise; "caller holds the lock" marks the functions that need
 * it. Ownership: the engine owns its entries (and each entry its probe); it borrows the
 * backends. */
#ifndef HV_ENGINE_INTERNAL_H
#define HV_ENGINE_INTERNAL_H

#include "backend.h"
#include "hooks.h"
#include "profile.h"
#include "reconcile.h"
#include "settings.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_WORKERS 64
/* a scan is tried again this soon when a new cycle waits for a host no scan has listed */
#define SCAN_AGAIN_MS 5000

struct probe; /* probe.c: the VM's facts CanUpdateMachine asks for */

/* A value this process keeps about one operation of a VM (the operation named by its start
 * time, the record's startedAt): memo_for gives the value for op, reset to 0 when the memo
 * held another operation's. The entry's per-operation books (first sight, paused, untaken
 * starts) are such memos. */
struct op_memo {
    int64_t op;
    int64_t v;
};

static inline int64_t *memo_for(struct op_memo *m, int64_t op)
{
    if (m->op != op) {
        m->op = op;
        m->v = 0;
    }
    return &m->v;
}

struct entry {
    char *key;
    uint64_t hash;
    struct hv_backend *be;
    struct hv_vm_ref ref;
    struct hv_hw desired;
    struct hv_settings s;
    bool queued, running, again;
    bool called; /* the next pass follows a hook call (not only the engine's own timer) */
    bool have_answer;
    struct hv_hw answer_for;
    struct hv_settings answer_s; /* the settings answer_for was concluded under */
    struct hv_update_result answer;
    struct probe *probe;
    bool probe_running;
    int64_t probe_began_ms; /* when the running probe started */
    struct hv_hw probe_for; /* ... for which hardware */
    /* bumped by each expiry of the probe (eng_probe_expire: a pass, a change report, a call
     * for other hardware): a probe started before an expiry answers no call that came after
     * it, even when it ends after it (its look may predate what expired it) */
    unsigned probe_gen;
    int waiters;     /* hook calls waiting for this entry's probe (they hold a pointer) */
    int64_t used_ms; /* last hook call or pass */
    /* the operation (by its start time) this process has already acted on (first_sight;
     * seen.v unused): its record is on the VM, stored or read */
    struct op_memo seen;
    /* the operation this process handled last: the one of seen, or one it began whose record
     * is not stored (yet); a bound on waiting for the hypervisor starts no later (bound_since) */
    int64_t handled_op;
    /* an operation whose record (a takeover of a step sent) may have landed though its write
     * got no answer: noted as seen once a look finds it (landing) */
    int64_t landing_op;
    /* when a pass last saw the VM of operation paused.op paused in the middle of its cycle
     * (unix seconds; 0: never): a step sent before may land from then on (paused_seen) */
    struct op_memo paused;
    /* last_sighting.v: the last sighting of the VM of operation last_sighting.op by this
     * process was paused (1: no pass has seen it running since, running_seen; also the scan's
     * take-up of a Failure upon a step) or running (-1); 0: none (paused_open, sighted) */
    struct op_memo last_sighting;
    /* when the latest try of a shutdown or power-off of operation unanswered.op that got no
     * answer was sent (unix seconds; 0: none) (unanswered_sent) */
    struct op_memo unanswered;
    /* power-ons of operation untaken.op not taken that its record still counts
     * (starts_untaken) */
    struct op_memo untaken;
    /* when the hypervisor was first found unreachable in the current run of failed looks
     * (seconds, 0: it answered last time) */
    int64_t unreach_since;
    /* when a record write first lost a race with another writer in the current run of lost
     * races (seconds, 0: the last write was stored) */
    int64_t race_since;
    /* "done" is only answered from an observation taken after the desired hardware was
     * asked for: calls are numbered (call_seq); a pass remembers the number current when it
     * began (answer_seq); confirm_seq is the first call since the last "done" answer or
     * since a call that came late (LATE_CALL_MS), which the next "done" must postdate. */
    uint64_t call_seq, confirm_seq, answer_seq;
    bool have_desired;
    bool told_failure; /* the last answer given to a call was a Failure */
    /* the call answered "observing the VM" instead of a Failure concluded before it (see
     * hv_engine_update): a Failure from a pass begun since is answered */
    uint64_t fail_check_seq;
    int64_t pass_ms;     /* how long the last pass took */
    int64_t call_ms;     /* when the last hook call came */
    int64_t call_unix_s; /* ... in unix seconds (the clock of the VM's records) */
    int64_t expect_ms;   /* how long CAPI was asked to wait after the last answer given */
    /* a pass the engine queues by itself at wake_ms (a power cycle in flight, or the look
     * timed to end just before CAPI's next call while a change settles) */
    bool timed;
    int64_t wake_ms;
    uint64_t woken; /* passes queued because the backend reported a change of this VM, or the
                     * scan found a parked one running or off (scan.c wake_parked) */
    /* the last pass that read the VM's record found a power cycle in flight (hv_follow) */
    bool following;
    /* ... this process's, its VM paused mid-cycle (HV_FOLLOW_PAUSED: its slot went back), or
     * paused under a step of this process that may land once it runs (HV_FOLLOW_RESUME) */
    bool paused_cycle;
    /* HV_FOLLOW_RESUME: no timed pass; a change report of the VM (its resume) queues one, and
     * the entry is kept (not evicted) until a pass no longer finds it so */
    bool on_resume;
    /* change reports of the VM (eng_vm_changed), counted: a pass that parks the entry compares
     * it with the count at its start, so a resume reported while it ran is not lost */
    uint64_t change_seq;
    /* the timed look came due and its pass has not begun yet (run_timers, run_head) */
    bool look_due;
    /* power-cycle slot */
    bool slot;
    bool slot_forced; /* taken over the caps (force): only to finish a cycle under way */
    char slot_host[HV_NAME_MAX];
    struct entry *hnext, *next_q, *next_t, *next_slot;
};

struct hv_engine {
    struct hv_engine_cfg cfg;
    struct hv_books books; /* what a reconcile pass borrows: slots, owner, first sight */
    struct hv_backend **bes;
    size_t n_bes;
    char owner[96];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct entry **buckets; /* hash table of entries, n_buckets a power of two */
    size_t n_buckets, n_entries;
    uint64_t refused; /* new entries refused over cfg.max_entries */
    int64_t swept_ms;
    struct entry *slots; /* entries holding a power-cycle slot */
    struct entry *q_head, *q_tail;
    struct entry *timed; /* entries with a pass of their own due at wake_ms */
    bool stopping;
    pthread_t workers[MAX_WORKERS];
    int n_workers;
    int slots_used;
    int probes_running;
    pthread_cond_t probe_cond;
    pthread_cond_t pass_cond; /* a pass ended (a late call waits for the one it queued) */
    /* the scan for cycles left in flight (run_scan): when it is due next (0: never), and
     * whether one runs now */
    bool scan_on; /* a scan is due at scan_due_ms */
    int64_t scan_due_ms;
    bool scanning;
    /* New cycles wait for the first scan, and on a host it could not list (gates, n_gates:
     * hosts no scan has listed yet) until one does. */
    bool scanned;
    char (*gates)[HV_NAME_MAX];
    size_t n_gates;
    int64_t scan_end_ms;
};

/* engine.c: the clocks (the system's, or the driver's: cfg.drive), and which backend serves a
 * hook call (NULL, with why, when none does) */
int64_t eng_now_ms(const struct hv_engine *e);
int64_t eng_unix_s(void *ctx);
struct hv_backend *eng_backend_for(struct hv_engine *e, const struct hv_profile *p,
                                   const struct hv_vm_ref *ref, char *why, size_t whylen);

/* entries.c: the table of per-VM entries (caller holds the lock) */
void eng_make_key(char *out, size_t cap, const struct hv_backend *be, const struct hv_vm_ref *ref);
struct entry *eng_find(struct hv_engine *e, const char *key);
struct entry *eng_entry_for(struct hv_engine *e, const char *key, struct hv_backend *be,
                            const struct hv_vm_ref *ref, bool force);
void eng_entry_free(struct entry *x);
bool eng_evictable(const struct entry *x);
void eng_unlink_entry(struct hv_engine *e, struct entry *x);
void eng_sweep(struct hv_engine *e, bool force);

/* workers.c: the queue, the timed passes and the workers that run them (caller holds the
 * lock, except eng_worker, the thread's body, and eng_vm_changed, the backends' report) */
void eng_enqueue(struct hv_engine *e, struct entry *x);
/* x's queued pass goes first; a driven engine runs it now, on the caller's thread. Caller
 * holds the lock (released while a driven pass runs). */
void eng_run_first(struct hv_engine *e, struct entry *x);
void eng_schedule(struct hv_engine *e, struct entry *x, int64_t delay_ms);
void *eng_worker(void *arg);
void eng_vm_changed(void *ctx, struct hv_backend *b, const char *server, const char *uuid,
                    const char *name);

/* scan.c: the scan for cycles left in flight (caller holds the lock) */
bool eng_scan_due(const struct hv_engine *e);
void eng_run_scan(struct hv_engine *e);

/* slots.c: the power-cycle slots (hv_books.slot_acquire, slot_release take the lock;
 * eng_slot_take needs it held) */
bool eng_slot_acquire(void *ctx, const char *key, const char *host, bool force);
bool eng_slot_take(struct hv_engine *e, struct entry *x, const char *host, bool force);
void eng_slot_release(void *ctx, const char *key);
bool eng_slot_held(void *ctx, const char *key);

/* answer.c: the answer gate. Its facts of the conclusion x holds (x->answer, reached for
 * x->answer_for under x->answer_s by a pass begun when x->call_seq was x->answer_seq) as an
 * UpdateMachine call sees them: */
struct eng_gate_in {
    bool known;      /* concluded for the hardware and the settings this call asks for */
    bool failure;    /* ... a Failure */
    bool once;       /* ... for one call only (nothing recorded on the VM; else sticky) */
    bool waiting;    /* ... asking CAPI to call again (retryAfterSeconds set: in progress) */
    bool confirming; /* a call for this hardware waits for a "done" (x->confirm_seq set:
                        none answered since it, and it came neither late nor for other
                        hardware) */
    bool fresh;      /* the conclusion's pass began at or after that call */
    bool recent;     /* ... at or after the previous call to this process for this VM (of any
                        hardware): no call was answered since it */
    bool retried;    /* CAPI retries the Failure this process answered its last call */
    bool checked;    /* a pass began since a call answered "observing the VM" instead of this
                        Failure (x->fail_check_seq) */
    bool late;       /* this call came LATE_CALL_MS or more after the wait CAPI was asked for,
                        for the hardware asked last */
};
enum eng_gate {
    ENG_GATE_DONE,    /* answer the "done" (used up: the next call waits for a new one) */
    ENG_GATE_KNOWN,   /* answer the conclusion as it is (in progress, or a Failure) */
    ENG_GATE_OBSERVE, /* answer "in progress: observing the VM" */
    ENG_GATE_RECHECK, /* the same, instead of a Failure to be concluded again */
    /* a "done" held back only because the call came late: the pass this call queues goes
     * first and the call waits for it (at most probe_wait_ms); "done" if that pass concludes
     * it, else "in progress: observing the VM" */
    ENG_GATE_LOOK_FIRST,
};
/* Pure: the same facts, the same answer (test/unit/test_answer_gate.c: every combination). */
enum eng_gate eng_answer_gate(const struct eng_gate_in *g);
/* x's conclusion is a "done" the next call for what it asked last will answer (caller holds
 * the lock) */
bool eng_concludes(const struct entry *x);

/* probe.c: a pass may have changed the VM: CanUpdateMachine looks again (caller holds the
 * lock) */
void eng_probe_expire(struct entry *x);

/* probe.c: UpdateMachine asked for hw: a probe for other hardware, cached or still looking,
 * is expired (CAPI moved on since it was taken; caller holds the lock) */
void eng_probe_expire_other(struct entry *x, const struct hv_hw *hw);

#endif
