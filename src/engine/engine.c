/* engine.c: the engine's plumbing: per-VM entries (latest answer, queued/running flags),
 * a worker pool that runs reconcile passes, the power-cycle slot table, and the bounded
 * live probe used by CanUpdateMachine. The engine owns its entries and threads; it borrows
 * the backends. Entries sit in a hash table keyed by VM; one that has nothing in flight (no
 * pass queued, running or timed, no slot, no probe) and has not been used for
 * entry_idle_ms is evicted: what must survive is on the VM's own record, an evicted entry
 * only costs the next call an "observing the VM". */
#include "engine.h"
#include "hv_clock.h"
#include "log.h"
#include "metrics.h"
#include "oprecord.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 64
#define MAX_PROBES  32 /* live probes in flight at once; more wait for a retry */
/* A call for the same hardware that comes this much or more after the wait CAPI was asked for
 * (after this process's previous answer) begins a new series: what this process saw before it
 * confirms nothing. Another replica can take the VM to other hardware and back to a state
 * CAPI then asks here again (A -> B -> A) only while CAPI calls elsewhere: it must take that
 * replica's done for A, then wait at least the 1 s its first answer for B asks ("observing
 * the VM"), then its done for B; a call here less than 1 s late leaves no room for that. */
#define LATE_CALL_MS 1000

/* The VM's facts CanUpdateMachine asks for (the probe), cached per VM, only for probed
 * entries: the backend's plan for the desired hardware and what decides whether the engine
 * may power-cycle the VM. */
struct probe {
    int64_t at_ms;
    struct hv_hw for_hw;
    int rc;
    bool gone; /* the VM was not found */
    struct hv_field_plan plan[HV_F_COUNT];
    char why[200];
    bool on;                           /* running: a cold change power-cycles it */
    bool between;                      /* neither running nor off (paused, suspended, ...) */
    bool can_shutdown;                 /* obs.can_shutdown */
    bool no_mem_report, no_cpu_report; /* obs.no_mem_report, no_cpu_report */
    char no_power_cycle[HV_MSG_MAX];   /* obs.no_power_cycle */
    struct hv_hw hw;                   /* obs.hw */
    /* the guest's view was asked for (guestVerification Required needs it): guest is it, or
     * guest_why says why it could not be read */
    bool guest_looked;
    struct hv_guest_obs guest;
    bool guest_mem_current; /* hv_guest_mem_current(guest) at the look */
    char guest_why[200];
    struct hv_oprecord rec; /* the VM's record (an operation in flight leaves its base) */
    /* the VM is off and an operation for other hardware is going on: it starts the VM with
     * other's hardware (never leaves it off), so this state's first pass may find it running */
    bool other_starts;
    struct hv_hw other;
    /* that operation is this process's, and the VM's record does not show it yet (queued, or
     * in its first pass): its base, which this state's begin may inherit, is not read */
    bool other_unseen;
};

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
    int waiters;            /* hook calls waiting for this entry's probe (they hold a pointer) */
    int64_t used_ms;        /* last hook call or pass */
    /* the operation (by its start time) this process has already acted on */
    int64_t seen_op;
    /* when the hypervisor was first found unreachable in the current run of failed looks
     * (seconds, 0: it answered last time) */
    int64_t unreach_since;
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
    int64_t pass_ms;   /* how long the last pass took */
    int64_t call_ms;   /* when the last hook call came */
    int64_t expect_ms; /* how long CAPI was asked to wait after the last answer given */
    /* a pass the engine queues by itself at wake_ms (a power cycle in flight, or the look
     * timed to end just before CAPI's next call while a change settles) */
    bool timed;
    int64_t wake_ms;
    uint64_t woken; /* passes queued because the backend reported a change of this VM */
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

static bool slot_acquire(void *ctx, const char *key, const char *host, bool force);
static bool slot_take(struct hv_engine *e, struct entry *x, const char *host, bool force);
static bool scan_due(const struct hv_engine *e);
static void run_scan(struct hv_engine *e);
static void slot_release(void *ctx, const char *key);
static bool first_sight(void *ctx, const char *key, int64_t op_started_at);
static int64_t unreachable_since(void *ctx, const char *key, int64_t now, bool unreachable);

void hv_engine_cfg_default(struct hv_engine_cfg *c)
{
    c->workers = 4;
    c->max_power_cycles = 4;
    c->max_power_cycles_per_host = 1;
    c->step_timeout_s = 300;
    c->max_step_attempts = 3;
    c->probe_cache_ms = 5000;
    c->probe_wait_ms = 300;
    c->entry_idle_ms = 600000;
    c->scan_interval_s = 300;
    c->drive = NULL;
}

/* The engine's monotonic ms: the system's, or the driver's (cfg.drive). */
static int64_t now_ms(const struct hv_engine *e)
{
    return e->cfg.drive ? e->cfg.drive->mono_ms(e->cfg.drive->ctx) : hv_mono_ms();
}

/* hv_books.unix_s: unix seconds, the system's or the driver's. */
static int64_t unix_s(void *ctx)
{
    const struct hv_engine *e = ctx;
    return e->cfg.drive ? e->cfg.drive->unix_s(e->cfg.drive->ctx) : (int64_t)time(NULL);
}

static void make_key(char *out, size_t cap, const struct hv_backend *be,
                     const struct hv_vm_ref *ref)
{
    snprintf(out, cap, "%s|%s|%s|%s", be->ops->name, ref->server, ref->uuid, ref->name);
}

static uint64_t hash_key(const char *k)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    return h;
}

/* The entry for key, or NULL; caller holds the lock. */
static struct entry *find(struct hv_engine *e, const char *key)
{
    uint64_t h = hash_key(key);
    for (struct entry *x = e->buckets[h & (e->n_buckets - 1)]; x; x = x->hnext)
        if (x->hash == h && !strcmp(x->key, key))
            return x;
    return NULL;
}

static void rehash(struct hv_engine *e, size_t n)
{
    struct entry **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* keep the old table: longer chains, still correct */
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry *x = e->buckets[k], *nx; x; x = nx) {
            nx = x->hnext;
            x->hnext = b[x->hash & (n - 1)];
            b[x->hash & (n - 1)] = x;
        }
    }
    free(e->buckets);
    e->buckets = b;
    e->n_buckets = n;
}

static void entry_free(struct entry *x)
{
    free(x->probe);
    free(x->key);
    free(x);
}

/* Find or create the entry for key; caller holds the lock. */
static struct entry *entry_for(struct hv_engine *e, const char *key, struct hv_backend *be,
                               const struct hv_vm_ref *ref)
{
    struct entry *x = find(e, key);
    if (x) {
        x->used_ms = now_ms(e);
        /* whose credentials and which certificate: as the latest request says (workers copy
         * the ref under the lock) */
        memcpy(x->ref.cluster, ref->cluster, sizeof(x->ref.cluster));
        memcpy(x->ref.thumbprint, ref->thumbprint, sizeof(x->ref.thumbprint));
        return x;
    }
    x = calloc(1, sizeof(*x));
    if (!x || !(x->key = strdup(key)))
        abort();
    x->hash = hash_key(key);
    x->be = be;
    x->ref = *ref;
    x->used_ms = now_ms(e);
    if (e->n_entries + 1 > e->n_buckets * 2)
        rehash(e, e->n_buckets * 2);
    x->hnext = e->buckets[x->hash & (e->n_buckets - 1)];
    e->buckets[x->hash & (e->n_buckets - 1)] = x;
    e->n_entries++;
    return x;
}

static bool evictable(const struct entry *x)
{
    return !x->queued && !x->running && !x->timed && !x->slot && !x->probe_running && !x->waiters;
}

static void unlink_entry(struct hv_engine *e, struct entry *x)
{
    for (struct entry **pp = &e->buckets[x->hash & (e->n_buckets - 1)]; *pp; pp = &(*pp)->hnext) {
        if (*pp == x) {
            *pp = x->hnext;
            e->n_entries--;
            return;
        }
    }
}

/* Evict entries unused for entry_idle_ms with nothing in flight; at most once a second (a
 * sweep walks the whole table, so its cost is spread over the calls of that second). Caller
 * holds the lock. */
static void sweep(struct hv_engine *e, bool force)
{
    int64_t now = now_ms(e);
    if (!force && now - e->swept_ms < 1000)
        return;
    e->swept_ms = now;
    size_t evicted = 0;
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry **pp = &e->buckets[k]; *pp;) {
            struct entry *x = *pp;
            if (evictable(x) && now - x->used_ms >= e->cfg.entry_idle_ms) {
                *pp = x->hnext;
                e->n_entries--;
                entry_free(x);
                evicted++;
                continue;
            }
            pp = &x->hnext;
        }
    }
    size_t n = e->n_buckets;
    while (n > 64 && e->n_entries * 2 < n / 2)
        n /= 2;
    if (n != e->n_buckets)
        rehash(e, n);
    if (evicted)
        malloc_trim(0); /* give the freed pages back to the system */
}

size_t hv_engine_entries(struct hv_engine *e)
{
    pthread_mutex_lock(&e->lock);
    sweep(e, true);
    size_t n = e->n_entries;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* Queue x for a reconcile pass and wake a worker; caller holds the lock. */
static void enqueue(struct hv_engine *e, struct entry *x)
{
    if (!x->running)
        hv_metrics_passes_pending(1);
    x->queued = true;
    x->next_q = NULL;
    if (e->q_tail)
        e->q_tail->next_q = x;
    else
        e->q_head = x;
    e->q_tail = x;
    pthread_cond_signal(&e->cond);
}

/* Queue a pass for x after delay_ms even if no hook call comes (a started power cycle must
 * finish on its own); caller holds the lock. */
static void schedule(struct hv_engine *e, struct entry *x, int64_t delay_ms)
{
    int64_t at = now_ms(e) + delay_ms;
    if (x->timed) {
        if (x->wake_ms > at)
            x->wake_ms = at;
        return;
    }
    x->timed = true;
    x->wake_ms = at;
    x->next_t = e->timed;
    e->timed = x;
    pthread_cond_broadcast(&e->cond);
}

/* Drop x's pending timed pass, if any; caller holds the lock. */
static void unschedule(struct hv_engine *e, struct entry *x)
{
    if (!x->timed)
        return;
    for (struct entry **pp = &e->timed; *pp; pp = &(*pp)->next_t) {
        if (*pp == x) {
            *pp = x->next_t;
            break;
        }
    }
    x->timed = false;
}

/* Move due timed entries to the queue; returns the earliest wake time left (0: none). Caller
 * holds the lock. */
static int64_t run_timers(struct hv_engine *e)
{
    int64_t now = now_ms(e), next = 0;
    for (struct entry **pp = &e->timed; *pp;) {
        struct entry *x = *pp;
        if (x->wake_ms <= now) {
            *pp = x->next_t;
            x->timed = false;
            if (x->running)
                x->again = true;
            else if (!x->queued)
                enqueue(e, x);
            continue;
        }
        if (!next || x->wake_ms < next)
            next = x->wake_ms;
        pp = &x->next_t;
    }
    return next;
}

/* x's answer is a "done" that the next call will return (see hv_engine_update): for the
 * hardware and settings asked last, concluded by a pass that began after the first call
 * not yet answered done. Caller holds the lock. */
static bool concludes(const struct entry *x)
{
    return x->have_answer && x->have_desired && hv_hw_equal(&x->answer_for, &x->desired) &&
           hv_settings_equal(&x->answer_s, &x->s) && !x->answer.failure &&
           x->answer.retry_after_s == 0 && x->confirm_seq && x->answer_seq >= x->confirm_seq;
}

/* Run the pass at the head of the queue (there is one); caller holds the lock, which is
 * released during the pass. */
static void run_head(struct hv_engine *e)
{
    struct entry *x = e->q_head;
    e->q_head = x->next_q;
    if (!e->q_head)
        e->q_tail = NULL;
    x->queued = false;
    x->running = true;
    x->again = false;
    struct hv_hw desired = x->desired;
    struct hv_settings s = x->s;
    struct hv_vm_ref ref = x->ref;
    uint64_t seq = x->call_seq;
    /* A pass that runs after CAPI's next call was due, with no call since, follows a call CAPI
     * may have left behind (the rollout changed or went back and another replica serves it,
     * the Machine went): it begins nothing. A call that comes queues a pass that may. */
    int64_t wait = x->expect_ms > 1000 ? x->expect_ms : 1000;
    bool called = x->called && now_ms(e) - x->call_ms <= wait;
    x->called = false;
    pthread_mutex_unlock(&e->lock);

    struct hv_update_result res;
    memset(&res, 0, sizeof(res));
    int64_t began = now_ms(e);
    bool cycling = hv_reconcile_key(&e->books, x->key, x->be, &ref, &desired, &s, called, &res);
    hv_metrics_pass();

    pthread_mutex_lock(&e->lock);
    x->running = false;
    x->used_ms = now_ms(e);
    if (x->probe) /* the pass may have changed the VM: CanUpdateMachine looks again */
        x->probe->at_ms = x->used_ms - e->cfg.probe_cache_ms;
    x->pass_ms = x->used_ms - began;
    x->have_answer = true;
    x->answer_for = desired;
    x->answer_s = s;
    x->answer = res;
    x->answer_seq = seq;
    if (x->again && concludes(x)) {
        /* The pass answered "done" for what was asked since, from a look that began
         * after the call that asked: the next call uses it, one more pass adds nothing. */
        x->again = false;
    }
    if (x->again && !x->queued) {
        x->running = true; /* still pending: enqueue must not count it twice */
        enqueue(e, x);
        x->running = false;
    } else {
        hv_metrics_passes_pending(-1);
    }
    /* A look timed for a settling wait that this pass ended (done, failed, or a step to
     * take next) would only look again after CAPI was answered: dropped. */
    if (x->timed && !x->slot && !cycling && !res.settling)
        unschedule(e, x);
    /* A power cycle is in flight (this process holds its slot, or the VM's record shows
     * one this process has met: begun by a process that is gone or another replica, and
     * waiting for a slot, or the VM paused): the engine carries it on by itself at the
     * pace it would ask CAPI to call, so a cycle that CAPI stops calling for still ends
     * with the VM on. The slot goes when the cycle ends. */
    if ((x->slot || cycling) && !x->queued) {
        int retry = res.failure ? 5 : res.retry_after_s;
        schedule(e, x, (int64_t)(retry < 1 ? 1 : retry > 5 ? 5 : retry) * 1000);
    }
}

static void *worker(void *arg)
{
    struct hv_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        for (;;) {
            int64_t next = run_timers(e);
            if (scan_due(e)) {
                run_scan(e);
                continue;
            }
            if (e->q_head || e->stopping)
                break;
            if (e->scan_on && !e->scanning && (!next || e->scan_due_ms < next))
                next = e->scan_due_ms;
            if (next)
                hv_cond_wait_until(&e->cond, &e->lock, next);
            else
                pthread_cond_wait(&e->cond, &e->lock);
        }
        if (e->stopping)
            break;
        run_head(e);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

int hv_engine_run(struct hv_engine *e, int max, int64_t *next_ms)
{
    int n = 0;
    pthread_mutex_lock(&e->lock);
    if (max > 0 && scan_due(e)) /* (max 0: only asks when something is due) */
        run_scan(e);
    int64_t next = run_timers(e);
    for (; n < max && e->q_head; n++)
        run_head(e);
    if (next_ms) {
        *next_ms = n ? run_timers(e) : next;
        /* (a rescan that came due during the passes: the next run, a moment later; the
         * first scan runs with the first passes anyway) */
        int64_t scan_at =
            e->scan_due_ms > now_ms(e) || !e->scanned ? e->scan_due_ms : now_ms(e) + 1;
        if (e->scan_on && (!*next_ms || scan_at < *next_ms))
            *next_ms = scan_at;
    }
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* A backend reports that a VM changed (ops->watch; libvirt: a domain event). A VM whose
 * operation waits for a change already made to show (settling) gets a pass now, not at
 * CAPI's next call or the engine's next timed look: a wait this change ends (the device
 * shows, the guest agent connected, the guest shut down) is concluded before that call, which
 * answers from it. Other VMs are left alone. The pass observes as any other: the report is
 * only a hint. Linear in the entries: reports come when VMs change, not per call. */
static void vm_changed(void *ctx, struct hv_backend *b, const char *server, const char *uuid,
                       const char *name)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry *x = e->buckets[k]; x; x = x->hnext) {
            if (x->be != b || !x->have_desired)
                continue;
            if (x->ref.server[0] && strcmp(x->ref.server, server) != 0)
                continue;
            if (x->ref.uuid[0] ? strcasecmp(x->ref.uuid, uuid) != 0
                               : strcmp(x->ref.name, name) != 0)
                continue;
            /* only a wait for a change already made (never a step to retry: retries keep
             * their pace, whatever events a failed step causes) */
            if (!x->have_answer || x->answer.failure || x->answer.retry_after_s <= 0 ||
                !x->answer.settling)
                continue;
            x->woken++;
            if (x->running)
                x->again = true;
            else if (!x->queued)
                enqueue(e, x);
        }
    }
    pthread_mutex_unlock(&e->lock);
}

uint64_t hv_engine_woken(struct hv_engine *e)
{
    uint64_t n = 0;
    pthread_mutex_lock(&e->lock);
    for (size_t k = 0; k < e->n_buckets; k++)
        for (struct entry *x = e->buckets[k]; x; x = x->hnext)
            n += x->woken;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* ---- the scan for cycles left in flight --------------------------------------------------- */

/* A restarted process (or the replica that stays when another is gone) learns of a power
 * cycle its previous life left in flight only from the record on the VM. No call may ever
 * reach that VM again (CAPI may have stopped calling), so at start, and every
 * scan_interval_s after, the engine asks each backend for the VMs that carry a record
 * (ops->list_records) and carries on each cycle that no live process carries: it takes a
 * power-cycle slot for it like for a new one and runs its passes by itself until the cycle
 * ends (done, or failed and rolled back), as for a cycle it began. */
#define SCAN_RETRY_MS 30000 /* a scan that could not reach every host is tried again */
#define SCAN_AGAIN_MS 5000  /* ... sooner when a cycle waits for a host it could not list */
/* A record of another process that has not changed for this long past the longest wait of
 * its phase (the shutdown or live timeout, one hypervisor call) is carried by no one: the
 * process that wrote it is gone (a live one steps or ends it by then). */
#define SCAN_STALE_S 60

struct found {
    struct hv_backend *be;
    struct hv_vm_ref ref;
    char host[HV_NAME_MAX];
    bool off;
    bool own; /* written by this very process (owner equal to ours) */
    struct hv_hw desired;
    struct hv_settings s;
};

struct scan {
    struct hv_engine *e;
    struct hv_backend *be;
    int64_t now; /* unix seconds */
    struct found *v;
    size_t n, cap;
    char (*bad)[HV_NAME_MAX]; /* hosts that could not be listed */
    size_t n_bad;
};

/* The settings a record's policy names ("IfNeeded/TrySoft/120/300/1800/IfAvailable", see
 * reconcile.c's policy_of); false when it names none. */
static bool settings_of(const char *policy, struct hv_settings *s)
{
    char pc[32], pom[32], gc[32];
    int live, shut, dl;
    hv_settings_default(s);
    if (sscanf(policy, "%31[^/]/%31[^/]/%d/%d/%d/%31s", pc, pom, &live, &shut, &dl, gc) != 6)
        return false;
    bool ok = false;
    for (int k = HV_PC_IF_NEEDED; k <= HV_PC_NEVER; k++)
        if (!strcmp(pc, hv_power_cycle_name((enum hv_power_cycle)k)))
            s->power_cycle = (enum hv_power_cycle)k, ok = true;
    for (int k = HV_POM_TRY_SOFT; k <= HV_POM_HARD; k++)
        if (!strcmp(pom, hv_power_off_mode_name((enum hv_power_off_mode)k)))
            s->power_off_mode = (enum hv_power_off_mode)k;
    for (int k = HV_GC_IF_AVAILABLE; k <= HV_GC_OFF; k++)
        if (!strcmp(gc, hv_guest_check_name((enum hv_guest_check)k)))
            s->guest_check = (enum hv_guest_check)k;
    s->live_timeout_s = live;
    s->shutdown_timeout_s = shut;
    s->deadline_s = dl;
    return ok;
}

/* hv_vm_found_fn: keep the VMs whose record shows a power cycle no live process carries. */
static void scan_found(void *ctx, const struct hv_vm_found *vm)
{
    struct scan *sc = ctx;
    struct hv_engine *e = sc->e;
    if (vm->unlisted) {
        char(*bad)[HV_NAME_MAX] = realloc(sc->bad, (sc->n_bad + 1) * sizeof(*sc->bad));
        if (!bad)
            abort();
        sc->bad = bad;
        snprintf(sc->bad[sc->n_bad++], HV_NAME_MAX, "%s", vm->host);
        return;
    }
    struct hv_oprecord *r = malloc(sizeof(*r));
    if (!r)
        abort();
    struct found f;
    memset(&f, 0, sizeof(f));

    /* (a VM paused or suspended mid-cycle cannot go on: the scan after it runs or is off,
     * or a call, carries it on) */
    bool keep = (vm->power == HV_POWER_ON || vm->power == HV_POWER_OFF) &&
                hv_oprecord_read(r, vm->record) && r->cold && r->phase >= HV_PH_SHUTDOWN &&
                r->phase <= HV_PH_POWER_ON && settings_of(r->policy, &f.s);
    if (keep) {
        f.own = !strcmp(r->owner, e->owner);
        /* this process's previous life (same host, another pid) is gone; another process is
         * taken to be gone when its record has not moved past the longest wait of its phase */
        bool previous = hv_owner_previous(r->owner, e->owner);
        int64_t wait = f.s.shutdown_timeout_s > f.s.live_timeout_s ? f.s.shutdown_timeout_s
                                                                   : f.s.live_timeout_s;
        if (e->cfg.step_timeout_s > wait)
            wait = e->cfg.step_timeout_s;
        bool stale = sc->now - r->step_at > wait + SCAN_STALE_S;
        keep = f.own || previous || stale;
    }
    if (keep) {
        f.be = sc->be;
        /* the name the calls used (newer records keep it), else the backend's */
        f.ref = r->ref.name[0] || r->ref.uuid[0] ? r->ref : vm->ref;
        snprintf(f.host, sizeof(f.host), "%s", vm->host);
        f.off = vm->power == HV_POWER_OFF;
        f.desired = r->desired;
        if (sc->n == sc->cap) {
            sc->cap = sc->cap ? sc->cap * 2 : 8;
            sc->v = realloc(sc->v, sc->cap * sizeof(*sc->v));
            if (!sc->v)
                abort();
        }
        sc->v[sc->n++] = f;
    }
    free(r);
}

/* Carry on the cycle of f, unless a call or a pass of this process already does; caller holds
 * the lock. */
static void resume_found(struct hv_engine *e, const struct found *f)
{
    char key[HV_KEY_MAX];
    make_key(key, sizeof(key), f->be, &f->ref);
    struct entry *x = find(e, key);
    if ((x && x->slot) || !f->be->ops->serves(f->be, &f->ref))
        return; /* carried here already, with its slot */
    x = entry_for(e, key, f->be, &f->ref);
    if (!x->have_desired) { /* else what the calls asked last: a pass for it takes the cycle
                               over (reconcile.c), as when a call comes */
        x->desired = f->desired;
        x->have_desired = true;
        x->s = f->s;
    }
    /* a slot like a new cycle's (also for a pass already queued: before any new cycle's),
     * within the caps while the VM still runs; an off VM is down already and takes one over
     * them (as a pass that finds it off does) */
    slot_take(e, x, f->host, f->off);
    hv_log(HV_LOG_INFO, "resume", "vm", key, "why", f->own ? "own" : "owner gone", (char *)NULL);
    if (!x->queued && !x->running) {
        x->called = false; /* the engine's own pass: it carries this cycle on, begins none */
        enqueue(e, x);
    }
}

/* Whether a scan is due now; caller holds the lock. */
static bool scan_due(const struct hv_engine *e)
{
    return e->scan_on && !e->scanning && !e->stopping && now_ms(e) >= e->scan_due_ms;
}

/* Run the scan (scan_due); caller holds the lock, which is released while backends list. */
static void run_scan(struct hv_engine *e)
{
    e->scanning = true;
    pthread_mutex_unlock(&e->lock);
    struct scan sc = {.e = e, .now = unix_s(e)};
    bool failed = false;
    for (size_t k = 0; k < e->n_bes; k++) {
        struct hv_backend *be = e->bes[k];
        struct hv_err err = {0};
        if (!be->ops->list_records)
            continue;
        sc.be = be;
        if (be->ops->list_records(be, scan_found, &sc, &err) != HV_OK) {
            failed = true;
            hv_log(HV_LOG_WARN, "scan-error", "backend", be->ops->name, "detail", err.detail,
                   (char *)NULL);
        }
    }
    pthread_mutex_lock(&e->lock);
    /* the hosts no scan has listed yet: those this one could not, of those before */
    size_t keep = 0;
    for (size_t k = 0; k < sc.n_bad; k++) {
        bool before = !e->scanned;
        for (size_t j = 0; j < e->n_gates && !before; j++)
            before = !strcmp(e->gates[j], sc.bad[k]);
        if (before)
            memmove(sc.bad[keep++], sc.bad[k], HV_NAME_MAX);
    }
    free(e->gates);
    e->gates = sc.bad;
    e->n_gates = keep;
    e->scanned = true;
    /* (after the gates: a host listed now no longer counts as unlisted) */
    for (size_t k = 0; k < sc.n; k++)
        resume_found(e, &sc.v[k]);
    free(sc.v);
    e->scanning = false;
    int64_t now = now_ms(e);
    e->scan_end_ms = now;
    e->scan_on = failed || e->cfg.scan_interval_s > 0;
    e->scan_due_ms = now + (failed ? SCAN_RETRY_MS : (int64_t)e->cfg.scan_interval_s * 1000);
    pthread_cond_broadcast(&e->cond);
}

struct hv_engine *hv_engine_new(const struct hv_engine_cfg *cfg, struct hv_backend *const *bes,
                                size_t n)
{
    struct hv_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->cfg = *cfg;
    if (e->cfg.max_step_attempts < 1)
        e->cfg.max_step_attempts = 3;
    e->bes = calloc(n ? n : 1, sizeof(*e->bes));
    if (!e->bes)
        abort();
    memcpy(e->bes, bes, n * sizeof(*bes));
    e->n_bes = n;
    char host[64] = "unknown";
    gethostname(host, sizeof(host) - 1);
    if (cfg->drive && cfg->drive->owner)
        snprintf(e->owner, sizeof(e->owner), "%s", cfg->drive->owner);
    else
        snprintf(e->owner, sizeof(e->owner), "%s:%d", host, (int)getpid());
    e->books = (struct hv_books){.ctx = e,
                                 .cfg = &e->cfg,
                                 .owner = e->owner,
                                 .slot_acquire = slot_acquire,
                                 .slot_release = slot_release,
                                 .first_sight = first_sight,
                                 .unreachable_since = unreachable_since,
                                 .unix_s = unix_s};
    e->n_buckets = 64;
    e->buckets = calloc(e->n_buckets, sizeof(*e->buckets));
    if (!e->buckets)
        abort();
    if (e->cfg.entry_idle_ms < 1)
        e->cfg.entry_idle_ms = 600000;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    pthread_cond_init(&e->probe_cond, NULL);
    for (size_t k = 0; k < n && e->cfg.scan_interval_s >= 0; k++) /* the first scan, at once */
        if (e->bes[k]->ops->list_records)
            e->scan_on = true;
    e->scan_due_ms = now_ms(e);
    e->scanned = !e->scan_on;
    int nw = cfg->workers < 1 ? 1 : cfg->workers > MAX_WORKERS ? MAX_WORKERS : cfg->workers;
    if (cfg->drive)
        nw = 0; /* the driver runs the passes (hv_engine_run) */
    for (int k = 0; k < nw; k++) {
        if (pthread_create(&e->workers[e->n_workers], NULL, worker, e) != 0) {
            /* fail at start: fewer workers than configured would be a silent slowdown, none
             * an engine that answers "in progress" forever */
            hv_log(HV_LOG_ERROR, "engine", "detail", "cannot start a worker thread", (char *)NULL);
            hv_engine_free(e);
            return NULL;
        }
        e->n_workers++;
    }
    for (size_t k = 0; k < n; k++)
        if (e->bes[k]->ops->watch)
            e->bes[k]->ops->watch(e->bes[k], vm_changed, e);
    return e;
}

void hv_engine_free(struct hv_engine *e)
{
    if (!e)
        return;
    for (size_t k = 0; k < e->n_bes; k++) /* no report reaches this engine after this */
        if (e->bes[k]->ops->watch)
            e->bes[k]->ops->watch(e->bes[k], NULL, e);
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    for (int k = 0; k < e->n_workers; k++)
        pthread_join(e->workers[k], NULL);
    pthread_mutex_lock(&e->lock); /* probes run detached: wait for the last one */
    while (e->probes_running)
        pthread_cond_wait(&e->probe_cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry *x = e->buckets[k], *nx; x; x = nx) {
            nx = x->hnext;
            entry_free(x);
        }
    }
    free(e->buckets);
    free(e->gates);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    pthread_cond_destroy(&e->probe_cond);
    free(e->bes);
    free(e);
}

struct hv_backend *hv_engine_backend(struct hv_engine *e, const char *name)
{
    for (size_t k = 0; k < e->n_bes; k++)
        if (!strcmp(e->bes[k]->ops->name, name))
            return e->bes[k];
    return NULL;
}

/* ---- power-cycle slots --------------------------------------------------------------------- */

static bool slot_acquire(void *ctx, const char *key, const char *host, bool force)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = find(e, key);
    /* A cycle left in flight on a host no scan has listed may hold a slot this process does
     * not know of: no new cycle there (nor anywhere before the first scan) until a scan lists
     * it, which a pass that reached the host asks for now. */
    bool gated = false;
    if (!force && !(x && x->slot)) {
        gated = !e->scanned;
        for (size_t k = 0; k < e->n_gates && !gated; k++)
            gated = !strcmp(e->gates[k], host);
        if (gated && e->scanned && !e->scanning) {
            int64_t at = e->scan_end_ms + SCAN_AGAIN_MS;
            if (!e->scan_on || e->scan_due_ms > at) {
                e->scan_on = true;
                e->scan_due_ms = at;
                pthread_cond_broadcast(&e->cond);
            }
        }
    }
    bool ok = !gated && slot_take(e, x, host, force);
    pthread_mutex_unlock(&e->lock);
    return ok;
}

/* slot_acquire for the entry x (NULL: a pass outside the entry table); caller holds the lock. */
static bool slot_take(struct hv_engine *e, struct entry *x, const char *host, bool force)
{
    bool ok = false;
    if (x && x->slot && (force || !x->slot_forced)) {
        ok = true;
    } else if (x) {
        /* the caps, counting the others (a slot forced over them to finish a cycle does not
         * start another cycle unless the caps allow it now) */
        int on_host = 0;
        for (struct entry *y = e->slots; y; y = y->next_slot)
            on_host += y != x && !strcmp(y->slot_host, host);
        /* a host no scan has listed may hold as many cycles of a previous life as a host
         * can: they count against the overall cap until a scan lists it */
        int64_t unlisted = (int64_t)e->n_gates * e->cfg.max_power_cycles_per_host;
        bool within = e->slots_used - (x->slot ? 1 : 0) + unlisted < e->cfg.max_power_cycles &&
                      on_host < e->cfg.max_power_cycles_per_host;
        if (force || within) {
            if (!x->slot) {
                x->slot = true;
                snprintf(x->slot_host, sizeof(x->slot_host), "%s", host);
                x->next_slot = e->slots;
                e->slots = x;
                e->slots_used++;
            }
            x->slot_forced = !within;
            ok = true;
        }
    } else {
        ok = true; /* a pass outside the entry table (no other VM can be tracked): allow */
    }
    return ok;
}

static void slot_release(void *ctx, const char *key)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = find(e, key);
    if (x && x->slot) {
        x->slot = false;
        e->slots_used--;
        for (struct entry **pp = &e->slots; *pp; pp = &(*pp)->next_slot) {
            if (*pp == x) {
                *pp = x->next_slot;
                break;
            }
        }
    }
    pthread_mutex_unlock(&e->lock);
}

/* ---- hooks side ---------------------------------------------------------------------------- */

static struct hv_backend *backend_for(struct hv_engine *e, const struct hv_profile *p,
                                      const struct hv_vm_ref *ref, char *why, size_t whylen)
{
    struct hv_backend *be = hv_engine_backend(e, p->backend);
    if (!be) {
        snprintf(why, whylen, HV_MSG("no %s backend is configured in hvupdater"), p->backend);
        return NULL;
    }
    if (!be->ops->serves(be, ref)) {
        snprintf(why, whylen, HV_MSG("hvupdater holds no %s connection for server %s"), p->backend,
                 ref->server[0] ? ref->server : HV_MSG("(none given)"));
        return NULL;
    }
    return be;
}

/* The answer being given only waits for a change already made to show: nothing to act on
 * before CAPI's next call, retry_after_s from now. A look taken now would be a whole interval
 * old by then, so the pass this call asks for starts late enough to end just before that call
 * (the last pass's duration and 200 ms ahead of it): its conclusion is then the freshest
 * possible, and a "done" is not held back one interval. A pass slower than the interval
 * starts at once. Still one pass per call. */
static int64_t settle_delay_ms(const struct entry *x)
{
    int64_t delay = (int64_t)x->answer.retry_after_s * 1000 - (x->pass_ms + 200);
    return delay > 0 ? delay : 0;
}

void hv_engine_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      struct hv_update_result *out)
{
    struct hv_engine *e = ctx;
    char why[300];
    struct hv_backend *be = backend_for(e, p, ref, why, sizeof(why));
    if (!be) {
        out->failure = true;
        out->retry_after_s = 0;
        snprintf(out->message, sizeof(out->message), "%s", why);
        return;
    }
    char key[HV_KEY_MAX];
    make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    sweep(e, false);
    struct entry *x = entry_for(e, key, be, ref);
    int64_t now = now_ms(e);
    x->call_seq++;
    /* CAPI retries a Failure at its own back-off, at no pace this process asked for */
    bool retried = x->have_desired && hv_hw_equal(&x->desired, desired) && x->told_failure;
    if (!x->have_desired || !hv_hw_equal(&x->desired, desired))
        x->confirm_seq = 0; /* other hardware: nothing seen so far confirms it */
    else if (now - x->call_ms >= x->expect_ms + LATE_CALL_MS)
        x->confirm_seq = 0; /* late: CAPI may have been through other states elsewhere */
    /* a conclusion holds for the hardware and the settings it was reached under */
    bool known = x->have_answer && hv_hw_equal(&x->answer_for, desired) &&
                 hv_settings_equal(&x->answer_s, s);
    bool done = known && !x->answer.failure && x->answer.retry_after_s == 0;
    bool answered_done = done && x->confirm_seq && x->answer_seq >= x->confirm_seq;
    if (answered_done) {
        /* concluded by a pass that began after a call for this hardware found it not yet
         * confirmed: what CAPI is told is what the VM showed since. Each "done" is used up,
         * so a later call (another replica may have changed the VM meanwhile) looks again. */
        *out = x->answer;
        x->confirm_seq = 0;
    } else {
        /* In progress, or a Failure of one look: an older conclusion is safe. The sticky
         * Failure recorded on the VM is final for this hardware: like a done, not from a pass
         * begun before a call that came late or for other hardware (CAPI may have been
         * through other states elsewhere: after A -> B -> A another replica may have begun
         * this hardware anew over that record), unless it is what this process answered
         * CAPI's last call (CAPI retrying it) or a pass began since the call answered this
         * way for it (a caller late every time still gets it). */
        bool checked = x->fail_check_seq && x->answer_seq >= x->fail_check_seq;
        bool sticky = x->answer.failure && !x->answer.once;
        if (known && !done && (!sticky || x->confirm_seq || retried || checked)) {
            *out = x->answer;
        } else {
            if (known && !done)
                x->fail_check_seq = x->call_seq;
            out->failure = false;
            out->retry_after_s = 1;
            out->settling = false;
            snprintf(out->message, sizeof(out->message), HV_MSG("in progress: observing the VM"));
        }
        if (!x->confirm_seq)
            x->confirm_seq = x->call_seq;
    }
    x->expect_ms = out->failure ? 0 : (int64_t)out->retry_after_s * 1000;
    x->told_failure = out->failure;
    x->call_ms = now;
    x->desired = *desired;
    x->have_desired = true;
    x->s = *s;
    x->ref = *ref; /* same VM (the key), but the profile's disk selector may have changed */
    if (!answered_done)
        x->called = true;
    /* After a "done" no pass is queued: its answer could not be used, as the next call
     * (confirm_seq is 0 again) asks for a new look anyway and queues that one. */
    if (!answered_done && x->running)
        x->again = true;
    else if (!answered_done && !x->queued) {
        if (known && !done && !x->answer.failure && x->answer.settling)
            schedule(e, x, settle_delay_ms(x));
        else
            enqueue(e, x);
    }
    pthread_mutex_unlock(&e->lock);
}

void hv_engine_reconcile(struct hv_engine *e, struct hv_backend *be, const struct hv_vm_ref *ref,
                         const struct hv_hw *desired, const struct hv_settings *s,
                         struct hv_update_result *out)
{
    char key[HV_KEY_MAX];
    make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    entry_for(e, key, be, ref);
    pthread_mutex_unlock(&e->lock);
    memset(out, 0, sizeof(*out));
    hv_reconcile_key(&e->books, key, be, ref, desired, s, true, out);
}

int hv_engine_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        char *why, size_t whylen)
{
    return backend_for(ctx, p, ref, why, whylen) ? 1 : 0;
}

static bool first_sight(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    bool first = false;
    pthread_mutex_lock(&e->lock);
    struct entry *x = find(e, key);
    if (x) {
        first = x->seen_op != op_started_at;
        x->seen_op = op_started_at;
    }
    pthread_mutex_unlock(&e->lock);
    return first;
}

static int64_t unreachable_since(void *ctx, const char *key, int64_t now, bool unreachable)
{
    struct hv_engine *e = ctx;
    int64_t since = now;
    pthread_mutex_lock(&e->lock);
    struct entry *x = find(e, key);
    if (x) {
        if (!unreachable)
            x->unreach_since = 0;
        else if (!x->unreach_since)
            x->unreach_since = now;
        if (x->unreach_since)
            since = x->unreach_since;
        /* an operation in flight that this process handled: its own start is the bound's
         * start (the operation's deadline), when earlier */
        bool inflight = x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0;
        if (unreachable && inflight && x->seen_op > 0 && x->seen_op < since)
            since = x->seen_op;
    }
    pthread_mutex_unlock(&e->lock);
    return since;
}

/* UpdateMachine for want changes the VM as it is when its first pass looks, which an
 * operation for other hardware still going on (CAPI's rollout changed A -> B while A's steps
 * are queued or in flight) may change first: each field of plan is also planned from the VM
 * as that operation leaves it, and the worse of the two is kept (it cannot be told which the
 * pass will find). Errors keep plan as it is. */
static void plan_worst_with(struct hv_backend *be, const struct hv_vm_ref *ref,
                            const struct hv_vm_obs *obs, const struct hv_hw *other,
                            const struct hv_hw *want, struct hv_field_plan plan[HV_F_COUNT])
{
    struct hv_vm_obs *after = malloc(sizeof(*after));
    struct hv_field_plan *p2 = calloc(HV_F_COUNT, sizeof(*p2));
    struct hv_err err = {0};
    if (!after || !p2)
        abort();
    *after = *obs;
    if (other->memory_mib > 0)
        after->hw.memory_mib = after->config.memory_mib = other->memory_mib;
    if (other->cpus > 0)
        after->hw.cpus = after->config.cpus = other->cpus;
    if (other->cores_per_socket > 0)
        after->hw.cores_per_socket = after->config.cores_per_socket = other->cores_per_socket;
    if (hv_disk_set(other->disk_mib))
        after->hw.disk_mib = after->config.disk_mib = other->disk_mib;
    if (be->ops->plan(be, ref, after, want, p2, &err) == HV_OK)
        for (int f = 0; f < HV_F_COUNT; f++)
            if (p2[f].how > plan[f].how)
                plan[f] = p2[f];
    free(p2);
    free(after);
}

struct probe_job {
    struct hv_engine *e;
    struct entry *x;
    struct hv_hw want;
    bool guest; /* look into the guest too (guestVerification Required) */
};

/* Observe and plan one VM for the live probe, off the hook's thread. */
static void *probe_thread(void *arg)
{
    struct probe_job *j = arg;
    struct hv_engine *e = j->e;
    struct entry *x = j->x;
    struct hv_hw want = j->want;
    bool guest = j->guest;
    free(j);
    pthread_mutex_lock(&e->lock);
    struct hv_vm_ref ref = x->ref;
    /* an operation of this process for other hardware, queued, running or in flight: its
     * steps may land before this state's first pass, which then changes what it left */
    bool own_other = x->have_desired && !hv_hw_equal(&x->desired, &want) &&
                     (x->queued || x->running ||
                      (x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0));
    struct hv_hw other = x->desired;
    pthread_mutex_unlock(&e->lock);

    struct hv_vm_obs *obs = calloc(1, sizeof(*obs));
    struct probe *r = calloc(1, sizeof(*r));
    struct hv_err err = {0};
    if (!obs || !r)
        abort();
    r->rc = -1;
    r->guest_looked = guest; /* asked for, whatever the answer */
    if (x->be->ops->observe(x->be, &ref, obs, &err) != HV_OK) {
        snprintf(r->why, sizeof(r->why), "%s", hv_errcode_message(err.code));
    } else if (!obs->found) {
        snprintf(r->why, sizeof(r->why), HV_MSG("the VM was not found"));
        r->gone = true;
    } else if (x->be->ops->plan(x->be, &ref, obs, &want, r->plan, &err) != HV_OK) {
        snprintf(r->why, sizeof(r->why), "%s", hv_errcode_message(err.code));
    } else {
        r->rc = 0;
        r->on = obs->power == HV_POWER_ON;
        r->between = obs->power != HV_POWER_ON && obs->power != HV_POWER_OFF;
        r->can_shutdown = obs->can_shutdown;
        r->no_mem_report = obs->no_mem_report;
        r->no_cpu_report = obs->no_cpu_report;
        snprintf(r->no_power_cycle, sizeof(r->no_power_cycle), "%s", obs->no_power_cycle);
        r->hw = obs->hw;
        (void)hv_oprecord_read(&r->rec, obs->record);
        /* the VM's record of an operation for other hardware in flight: the same */
        if (!own_other && r->rec.phase >= HV_PH_PLANNED && r->rec.phase <= HV_PH_POWER_ON &&
            !hv_hw_equal(&r->rec.desired, &want)) {
            own_other = true;
            other = r->rec.desired;
        }
        if (own_other) {
            plan_worst_with(x->be, &ref, obs, &other, &want, r->plan);
            r->other_starts = obs->power == HV_POWER_OFF;
            r->other = other;
            r->other_unseen = !(r->rec.phase >= HV_PH_PLANNED && r->rec.phase <= HV_PH_POWER_ON &&
                                hv_hw_equal(&r->rec.desired, &other));
        }
        /* the guest's view, as UpdateMachine asks for it before its first step (a round trip
         * into the guest, of a running VM) */
        if (guest && r->on && x->be->ops->observe_guest &&
            x->be->ops->observe_guest(x->be, &ref, obs, &err) != HV_OK) {
            snprintf(r->guest_why, sizeof(r->guest_why), HV_MSG("cannot observe the VM: %s"),
                     hv_errcode_message(err.code));
            hv_log(HV_LOG_WARN, "probe-error", "vm", x->key, "detail", err.detail, (char *)NULL);
        }
        r->guest = obs->guest;
        /* judged as of the look, not of the cached answer's use */
        r->guest_mem_current = hv_guest_mem_current(&obs->guest, unix_s(e));
    }
    free(obs);
    if (r->rc < 0 && !r->gone)
        hv_log(HV_LOG_WARN, "probe-error", "vm", x->key, "detail", err.detail, (char *)NULL);

    pthread_mutex_lock(&e->lock);
    r->at_ms = now_ms(e);
    r->for_hw = want;
    free(x->probe);
    x->probe = r;
    x->probe_running = false;
    x->used_ms = r->at_ms;
    /* A Failure for one call (the VM could not be read or planned) that a pass concluded
     * before this look, which read and planned it, is not true any more: the next call asks
     * for a new pass instead of answering it (after A -> B -> A, CAPI's CanUpdateMachine for
     * A covered the change on this look; the old Failure would fail it for nothing). */
    if (r->rc == 0 && !r->guest_why[0] && x->have_answer && x->answer.failure && x->answer.once)
        x->have_answer = false;
    e->probes_running--;
    pthread_cond_broadcast(&e->probe_cond);
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* A probe answer is in: an entry that exists only for probes of a VM that is not there goes
 * at once (CanUpdateMachine for VMs that do not exist must not fill the table). Caller holds
 * the lock and is the last waiter. */
static void drop_if_gone(struct hv_engine *e, struct entry *x)
{
    if (x->probe && x->probe->gone && !x->have_desired && !x->waiters && evictable(x)) {
        unlink_entry(e, x);
        entry_free(x);
    }
}

/* The cached facts r, as CanUpdateMachine under settings s needs them: the backend's plan;
 * under guestVerification Required, every change the guest cannot show made impossible with
 * UpdateMachine's reason (hv_guest_cannot_show); and, when the VM runs and may not be
 * power-cycled under s (the rule UpdateMachine applies before it shuts a VM down:
 * hv_cycle_refused), every change that needs a power cycle made impossible with that reason.
 * Under powerCycle=Never the planner says "needs a power cycle and powerCycle is Never"
 * itself. Caller holds the lock. */
static int probe_answer(const struct probe *r, const struct hv_settings *s, int64_t now,
                        struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    memcpy(plan, r->plan, sizeof(r->plan));
    snprintf(why, whylen, "%s", r->why);
    if (r->gone)
        return -3;
    if (r->rc != 0)
        return r->rc;
    if (r->between) { /* UpdateMachine takes no step until it runs or is off: ask again then */
        snprintf(why, whylen, "%s", HV_MSG("the VM is paused, suspended or in transition"));
        return -1;
    }
    if (s->guest_check == HV_GC_REQUIRED && r->guest_why[0]) {
        snprintf(why, whylen, "%s", r->guest_why);
        return -1;
    }
    struct hv_guest_base base = {
        .hv_memory_mib = r->hw.memory_mib,
        .hv_cpus = r->hw.cpus,
        .guest_memory_mib = r->guest_mem_current ? r->guest.memory_mib : -1,
        .guest_cpus = r->guest.cpu_view == HV_GV_SEEN ? r->guest.cpus : -1};
    hv_begin_base(&r->rec, s, now, &base, &base);
    /* An operation of this process for other hardware whose record the look did not find yet
     * stores one before this state's first pass, which inherits its base (hv_begin_base):
     * without a guest view of a field it changes when it began without one (the VM off,
     * guestVerification Off, the guest not reported yet) and may step live. The probe cannot
     * read that base: it takes none for those fields, as begin may (seed 4654: A under Off
     * planned a cycle, CanUpdateMachine for B under Required covered the vCPUs by the guest's
     * view, then B's begin, on A's base, refused them). */
    if (r->other_unseen) {
        if (r->other.memory_mib >= 0 && r->other.memory_mib != r->hw.memory_mib)
            base.guest_memory_mib = -1;
        if (r->other.cpus >= 0 && r->other.cpus != r->hw.cpus)
            base.guest_cpus = -1;
    }
    /* an operation for other hardware starts the off VM first: this state then changes a
     * running VM from other's hardware, whose freshly booted guest has shown nothing yet */
    struct hv_guest_base started = {.hv_memory_mib = r->other.memory_mib >= 0 ? r->other.memory_mib
                                                                              : r->hw.memory_mib,
                                    .hv_cpus = r->other.cpus >= 0 ? r->other.cpus : r->hw.cpus,
                                    .guest_memory_mib = -1,
                                    .guest_cpus = -1};
    bool no_report[HV_F_COUNT] = {[HV_F_MEMORY] = r->no_mem_report, [HV_F_CPUS] = r->no_cpu_report};
    for (int f = 0; f < HV_F_COUNT; f++) {
        char m[HV_MSG_MAX];
        if (plan[f].how != HV_HOW_IMPOSSIBLE &&
            (hv_guest_cannot_show((enum hv_field)f, r->on, no_report[f], &base, &r->for_hw,
                                  plan[f].how, s, m, sizeof(m)) ||
             (r->other_starts &&
              hv_guest_cannot_show((enum hv_field)f, true, no_report[f], &started, &r->for_hw,
                                   plan[f].how, s, m, sizeof(m))))) {
            plan[f].how = HV_HOW_IMPOSSIBLE;
            snprintf(plan[f].reason, sizeof(plan[f].reason), "%s", m);
        }
    }
    char refused[HV_MSG_MAX + 64];
    if (r->on && s->power_cycle != HV_PC_NEVER &&
        hv_cycle_refused(r->no_power_cycle, r->can_shutdown, s, refused, sizeof(refused))) {
        for (int f = 0; f < HV_F_COUNT; f++) {
            if (plan[f].how != HV_HOW_COLD)
                continue;
            plan[f].how = HV_HOW_IMPOSSIBLE;
            snprintf(plan[f].reason, sizeof(plan[f].reason), "%s", refused);
        }
    }
    return 0;
}

/* The bounded wait: a hook call waits for the facts only within the first probe_wait_ms of
 * the probe that fetches them (it runs on its own detached thread, at most MAX_PROBES at
 * once). A call that comes while a probe has run longer than that, or when MAX_PROBES are
 * running (a hypervisor that hangs), answers "still asking" at once: however slow the
 * hypervisor, a server thread is held at most probe_wait_ms, and only by the calls in a
 * probe's first probe_wait_ms. */
int hv_engine_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                    const struct hv_hw *desired, const struct hv_settings *s,
                    struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    struct hv_engine *e = ctx;
    struct hv_backend *be = backend_for(e, p, ref, why, whylen);
    if (!be)
        return -1;
    char key[HV_KEY_MAX];
    make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    sweep(e, false);
    struct entry *x = entry_for(e, key, be, ref);
    /* CanUpdateMachine for other hardware than UpdateMachine last asked: the rollout changed,
     * and CAPI may call another replica for it, which changes the VM. A "done" for the older
     * hardware concluded before (A -> B -> A) is not answered: the next UpdateMachine for it
     * waits for a pass begun after that call, as for a call that came late. */
    if (x->have_desired && !hv_hw_equal(&x->desired, desired))
        x->confirm_seq = 0;
    x->waiters++;
    int rc = -2; /* not known yet: the hook answers a retryable Failure */
    snprintf(why, whylen, HV_MSG("still asking the hypervisor"));
    for (;;) {
        struct probe *r = x->probe;
        bool fresh = r && now_ms(e) - r->at_ms < e->cfg.probe_cache_ms &&
                     hv_hw_equal(&r->for_hw, desired) &&
                     (r->guest_looked || s->guest_check != HV_GC_REQUIRED);
        if (fresh) {
            rc = probe_answer(r, s, unix_s(e), plan, why, whylen);
            break;
        }
        if (!x->probe_running && e->probes_running < MAX_PROBES) {
            struct probe_job *j = malloc(sizeof(*j));
            pthread_t t;
            pthread_attr_t attr;
            if (!j)
                abort();
            j->e = e;
            j->x = x;
            j->want = *desired;
            j->guest = s->guest_check == HV_GC_REQUIRED;
            x->probe_running = true;
            x->probe_began_ms = now_ms(e);
            e->probes_running++;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            if (e->cfg.drive) { /* driven: on this thread, now */
                pthread_mutex_unlock(&e->lock);
                probe_thread(j);
                pthread_mutex_lock(&e->lock);
                pthread_attr_destroy(&attr);
                continue;
            }
            if (pthread_create(&t, &attr, probe_thread, j) != 0) {
                x->probe_running = false;
                e->probes_running--;
                free(j);
            }
            pthread_attr_destroy(&attr);
        }
        if (!x->probe_running || e->cfg.drive)
            break; /* none could start: no wait (driven: the probe ran inline) */
        int64_t limit = x->probe_began_ms + e->cfg.probe_wait_ms;
        if (limit - now_ms(e) <= 0)
            break;
        hv_cond_wait_until(&e->probe_cond, &e->lock, limit);
    }
    x->waiters--;
    drop_if_gone(e, x);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void hv_engine_gauges(void *engine, int *operations, int *power_cycles)
{
    struct hv_engine *e = engine;
    int ops = 0;
    pthread_mutex_lock(&e->lock);
    for (size_t k = 0; k < e->n_buckets; k++)
        for (struct entry *x = e->buckets[k]; x; x = x->hnext)
            ops += x->queued || x->running ||
                   (x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0);
    *operations = ops;
    *power_cycles = e->slots_used;
    pthread_mutex_unlock(&e->lock);
}
