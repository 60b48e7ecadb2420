/* books.h: what one reconcile pass borrows from whoever runs it (the engine, engine.c): its
 * configuration and its slot and owner bookkeeping (struct hv_books), so the pass never calls
 * back into the engine by name. Declared apart from reconcile.h so the files of a pass
 * (pass.h) can name them without including the pass's own interface. */
#ifndef HV_BOOKS_H
#define HV_BOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HV_KEY_MAX 600

/* A driven engine (the deterministic simulation, test/sim): time comes from these functions
 * instead of the system clocks, no worker thread starts, and the driver runs the engine's
 * passes itself with hv_engine_run. Production leaves hv_engine_cfg.drive NULL. */
struct hv_engine_drive {
    int64_t (*mono_ms)(void *ctx); /* replaces CLOCK_MONOTONIC, in ms */
    int64_t (*unix_s)(void *ctx);  /* replaces time(NULL), in the records */
    void *ctx;
    const char *owner; /* written into records instead of "hostname:pid" (NULL: that) */
};

struct hv_vm_ref;
struct hv_hw;

/* The management cluster's word on a power cycle the scan found in flight (scan.c), whose
 * record names the Machine of the checked call that began it (vm->machine): confirmed (carry
 * it on), refused (leave the VM as it is, for the next checked call) or unknown (the API
 * server did not answer: ask again at the next scan); msg says why when not confirmed. May
 * block: called on the scan's thread without the engine's lock. */
enum hv_resume_verdict { HV_RESUME_CONFIRMED = 0, HV_RESUME_REFUSED, HV_RESUME_UNKNOWN };
typedef enum hv_resume_verdict (*hv_resume_confirm_fn)(void *ctx, const char *backend,
                                                       const struct hv_vm_ref *vm,
                                                       const struct hv_hw *desired, char *msg,
                                                       size_t msglen);

struct hv_engine_cfg {
    int workers;          /* reconcile threads */
    int max_power_cycles; /* VMs in a power cycle at once, overall */
    int max_power_cycles_per_host;
    int step_timeout_s;    /* bound for one hypervisor call */
    int max_step_attempts; /* transient failures of one step before a Failure */
    int probe_cache_ms;    /* CanUpdateMachine live probes are cached this long */
    int probe_wait_ms;     /* a hook waits at most this long for a probe */
    int entry_idle_ms;     /* an entry with nothing in flight is evicted after this long unused */
    /* most entries held: a new VM beyond it first evicts the least recently used entries with
     * nothing in flight; with none, its call is refused (a retryable Failure). < 1: default */
    int max_entries;
    /* look for power cycles left in flight (ops->list_records) at start and then this often;
     * 0: only at start (and again while a scan could not reach every host); < 0: never (a
     * one-shot engine, e.g. the lab CLI's, carries on no other VM's cycle) */
    int scan_interval_s;
    const struct hv_engine_drive *drive; /* NULL (production): system clocks, worker threads */
    /* The machine check (kubernetes.checkMachines, wired by cli over kube/machinecheck.h):
     * NULL, none: a cycle found in flight that passes the configuration's checks is carried
     * on. Set: it is carried on only when its record names a Machine and this confirms it. */
    hv_resume_confirm_fn confirm_resume;
    void *confirm_ctx;
};

/* The engine's slot and owner bookkeeping as a pass sees it; ctx is the engine. */
struct hv_books {
    void *ctx;
    const struct hv_engine_cfg *cfg;
    const char *owner; /* "hostname:pid" of this process, written into records */
    /* Take a power-cycle slot for key on host (true if held now). force: take it even over
     * the caps (a VM already mid-cycle must finish). */
    bool (*slot_acquire)(void *ctx, const char *key, const char *host, bool force);
    void (*slot_release)(void *ctx, const char *key);
    /* Whether key holds a slot now (for the pass's own check; may be NULL). */
    bool (*slot_held)(void *ctx, const char *key);
    /* True the first time this process handles the operation that started at op_started_at
     * on this VM (e.g. after a restart, or an operation another replica began). */
    bool (*first_sight)(void *ctx, const char *key, int64_t op_started_at);
    /* Whether this process has noted that operation as seen (first_sight), noting nothing. */
    bool (*seen)(void *ctx, const char *key, int64_t op_started_at);
    /* This process began that operation (its record is not stored yet): the operation it
     * handles, for unreachable_since and lost_race_since, not yet seen (first_sight). */
    void (*began)(void *ctx, const char *key, int64_t op_started_at);
    /* A record of that operation taking over a step already sent, whose write got no answer
     * (it may be on the VM): the next first_sight of it notes it as seen (not first), as if
     * stored; a first_sight of another operation, or forgetting (0), drops it. seen() counts
     * it as noted meanwhile. */
    void (*landing)(void *ctx, const char *key, int64_t op_started_at);
    /* The last time (unix seconds) a pass of this process saw the VM of the operation that
     * started at op_started_at paused or suspended in the middle of its power cycle; at > 0
     * records that a pass saw it so at at. 0: never (or not by this process). */
    int64_t (*paused_seen)(void *ctx, const char *key, int64_t op_started_at, int64_t at);
    /* A pass of this process sees the VM of that operation running at now. When the last
     * sighting of it was paused, it ran again at some time up to now, which no look tells:
     * the pause is taken to end now (a step sent before it has its time from then). Returns
     * paused_seen's time after that. */
    int64_t (*running_seen)(void *ctx, const char *key, int64_t op_started_at, int64_t now);
    /* Whether the last sighting of the VM of that operation by this process was paused (no
     * pass has seen it running since; also a running VM the scan took up under a previous
     * life's Failure upon a step, no pass having looked yet), noting nothing. */
    bool (*paused_open)(void *ctx, const char *key, int64_t op_started_at);
    /* Whether a pass of this process saw the VM of that operation, paused or running (or the
     * scan took it up as paused), noting nothing. */
    bool (*sighted)(void *ctx, const char *key, int64_t op_started_at);
    /* The last time (unix seconds) a try of a shutdown or power-off of the operation that
     * started at op_started_at, sent by this process, got no answer in time (it may have
     * been taken); at > 0 records one sent at at. 0: none. */
    int64_t (*unanswered_sent)(void *ctx, const char *key, int64_t op_started_at, int64_t at);
    /* Power-ons of the operation that started at op_started_at that this process stored as
     * sent (the record's starts count a start with its step, before it is made) but that
     * were not taken (the call did not reach the hypervisor, lost a race or was refused),
     * while the record on the VM still counts them (its take-back not stored yet): add is
     * added; add < 0: a record of that operation was stored since, its count true (0 again).
     * Returns the count. */
    int (*starts_untaken)(void *ctx, const char *key, int64_t op_started_at, int add);
    /* Unix seconds now (the driver's clock when the engine is driven). */
    int64_t (*unix_s)(void *ctx);
    /* The VM's hypervisor was found unreachable at now (unreachable) or reachable: returns
     * when it was first found unreachable in the run going on (now when none is), or the
     * start of the operation in flight this process handled, when earlier. */
    int64_t (*unreachable_since)(void *ctx, const char *key, int64_t now, bool unreachable);
    /* The same bound for a steady lost race: a record write of key lost a race with another
     * writer at now (lost) or one was stored: returns when the first of the lost races in a
     * row was (now when none is), or the start of the operation in flight this process
     * handled, when earlier. */
    int64_t (*lost_race_since)(void *ctx, const char *key, int64_t now, bool lost);
};

#endif
