/* engine.c: the engine's life and the parts shared by every concern: its configuration,
 * its clocks (the system's, or the driver's), its start (workers, the first scan, the
 * backends' change reports) and stop, which backend serves a hook call, the bookkeeping a
 * reconcile pass borrows (struct hv_books: slots, first sight of an operation, unreachable
 * since), the pass on the caller's thread, and the gauges. The engine borrows the backends.
 * The other concerns: entries.c, workers.c, scan.c, slots.c, answer.c, probe.c. */
#include "engine.h"
#include "engine_internal.h"
#include "hv_clock.h"
#include "json.h"
#include "log.h"
#include "msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    c->max_entries = HV_ENGINE_MAX_ENTRIES;
    c->scan_interval_s = 300;
    c->drive = NULL;
    c->confirm_resume = NULL; /* no machine check */
    c->confirm_ctx = NULL;
}

/* The engine's monotonic ms: the system's, or the driver's (cfg.drive). */
int64_t eng_now_ms(const struct hv_engine *e)
{
    return e->cfg.drive ? e->cfg.drive->mono_ms(e->cfg.drive->ctx) : hv_mono_ms();
}

/* hv_books.unix_s: unix seconds, the system's or the driver's. */
int64_t eng_unix_s(void *ctx)
{
    const struct hv_engine *e = ctx;
    return e->cfg.drive ? e->cfg.drive->unix_s(e->cfg.drive->ctx) : (int64_t)time(NULL);
}

struct hv_backend *eng_backend_for(struct hv_engine *e, const struct hv_profile *p,
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

int hv_engine_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        char *why, size_t whylen)
{
    return eng_backend_for(ctx, p, ref, why, whylen) ? 1 : 0;
}

static bool first_sight(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    bool first = false;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x) {
        bool landed = x->landing_op && x->landing_op == op_started_at;
        x->landing_op = 0;
        first = x->seen.op != op_started_at && !landed;
        memo_for(&x->seen, op_started_at);
        x->handled_op = op_started_at;
    }
    pthread_mutex_unlock(&e->lock);
    return first;
}

static void landing(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x)
        x->landing_op = op_started_at;
    pthread_mutex_unlock(&e->lock);
}

static void began(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x)
        x->handled_op = op_started_at;
    pthread_mutex_unlock(&e->lock);
}

static bool seen(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    bool was =
        x && (x->seen.op == op_started_at || (x->landing_op && x->landing_op == op_started_at));
    pthread_mutex_unlock(&e->lock);
    return was;
}

/* The latest time noted in x's memo *which for this operation: at, or a later one noted
 * before (paused sightings, unanswered shutdown tries). */
static int64_t latest_at(struct hv_engine *e, const char *key, size_t which, int64_t op_started_at,
                         int64_t at)
{
    int64_t latest = 0;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x) {
        int64_t *v = memo_for((struct op_memo *)((char *)x + which), op_started_at);
        if (at > *v)
            *v = at;
        latest = *v;
    }
    pthread_mutex_unlock(&e->lock);
    return latest;
}

static int64_t paused_seen(void *ctx, const char *key, int64_t op_started_at, int64_t at)
{
    if (at > 0) {
        struct hv_engine *e = ctx;
        pthread_mutex_lock(&e->lock);
        struct entry *x = eng_find(e, key);
        if (x)
            *memo_for(&x->last_sighting, op_started_at) = 1;
        pthread_mutex_unlock(&e->lock);
    }
    return latest_at(ctx, key, offsetof(struct entry, paused), op_started_at, at);
}

/* (seed 1718023: a Soft shutdown sent 5 s before the VM was suspended, no pass while it was,
 * the first pass after the operator resumed it 346 s later failed "the guest did not shut
 * down within 39 s" from the last pass that saw it suspended, and the guest shut down 4 s
 * after as a new cycle of its host began) */
static int64_t running_seen(void *ctx, const char *key, int64_t op_started_at, int64_t now)
{
    struct hv_engine *e = ctx;
    bool open = false;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x) {
        int64_t *v = memo_for(&x->last_sighting, op_started_at);
        open = *v > 0;
        *v = -1; /* (seen running: sighted) */
    }
    pthread_mutex_unlock(&e->lock);
    return latest_at(ctx, key, offsetof(struct entry, paused), op_started_at, open ? now : 0);
}

/* The last sighting by this process of the VM of that operation, noting nothing: 1 paused
 * (or the scan's take-up), -1 running, 0 none (the last_sighting memo). */
static int64_t last_sight(void *ctx, const char *key, int64_t op_started_at)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    int64_t v = x && x->last_sighting.op == op_started_at ? x->last_sighting.v : 0;
    pthread_mutex_unlock(&e->lock);
    return v;
}

static bool paused_open(void *ctx, const char *key, int64_t op_started_at)
{
    return last_sight(ctx, key, op_started_at) > 0;
}

static bool sighted(void *ctx, const char *key, int64_t op_started_at)
{
    return last_sight(ctx, key, op_started_at) != 0;
}

static int64_t unanswered_sent(void *ctx, const char *key, int64_t op_started_at, int64_t at)
{
    return latest_at(ctx, key, offsetof(struct entry, unanswered), op_started_at, at);
}

static int starts_untaken(void *ctx, const char *key, int64_t op_started_at, int add)
{
    struct hv_engine *e = ctx;
    int n = 0;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x) {
        int64_t *untaken = memo_for(&x->untaken, op_started_at);
        if (add < 0)
            *untaken = 0; /* (stored since) */
        else
            *untaken += add;
        n = (int)*untaken;
    }
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* The outage bound's start (errclass.h HV_TAKE_WAIT) in a run of failures (race: of lost
 * races on record writes, kept in race_since; otherwise of calls that did not reach the
 * hypervisor or got no answer, in unreach_since): failing at now, or ended (the call
 * answered, the record was stored). */
static int64_t bound_since(struct hv_engine *e, const char *key, int64_t now, bool failing,
                           bool race)
{
    int64_t since = now;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    if (x) {
        int64_t *first = race ? &x->race_since : &x->unreach_since;
        if (!failing)
            *first = 0;
        else if (!*first)
            *first = now;
        if (*first)
            since = *first;
        /* an operation in flight that this process handled: its own start is the bound's
         * start (the operation's deadline), when earlier */
        bool inflight = x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0;
        if (failing && inflight && x->handled_op > 0 && x->handled_op < since)
            since = x->handled_op;
    }
    pthread_mutex_unlock(&e->lock);
    return since;
}

static int64_t unreachable_since(void *ctx, const char *key, int64_t now, bool unreachable)
{
    return bound_since(ctx, key, now, unreachable, false);
}

static int64_t lost_race_since(void *ctx, const char *key, int64_t now, bool lost)
{
    return bound_since(ctx, key, now, lost, true);
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
    hj_text_cut(host); /* (a long host name cut where a character begins) */
    if (cfg->drive && cfg->drive->owner)
        hj_text_copy(e->owner, sizeof(e->owner), cfg->drive->owner); /* (as a record reads it) */
    else {
        /* host:pid.start: one life of this process. The start (realtime, ns) tells a restart
         * in place from the life before it: in a container the process is PID 1 in every life
         * and a restarted container keeps its pod's host name, so host:pid alone named both
         * lives the same, and the new life took its previous life's records for its own */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        snprintf(e->owner, sizeof(e->owner), "%s:%d.%llx", host, (int)getpid(),
                 (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec);
    }
    e->books = (struct hv_books){.ctx = e,
                                 .cfg = &e->cfg,
                                 .owner = e->owner,
                                 .slot_acquire = eng_slot_acquire,
                                 .slot_release = eng_slot_release,
                                 .slot_held = eng_slot_held,
                                 .first_sight = first_sight,
                                 .seen = seen,
                                 .began = began,
                                 .landing = landing,
                                 .paused_seen = paused_seen,
                                 .running_seen = running_seen,
                                 .paused_open = paused_open,
                                 .sighted = sighted,
                                 .unanswered_sent = unanswered_sent,
                                 .starts_untaken = starts_untaken,
                                 .unreachable_since = unreachable_since,
                                 .lost_race_since = lost_race_since,
                                 .unix_s = eng_unix_s};
    e->n_buckets = 64;
    e->buckets = calloc(e->n_buckets, sizeof(*e->buckets));
    if (!e->buckets)
        abort();
    if (e->cfg.entry_idle_ms < 1)
        e->cfg.entry_idle_ms = 600000;
    if (e->cfg.max_entries < 1)
        e->cfg.max_entries = HV_ENGINE_MAX_ENTRIES;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    pthread_cond_init(&e->probe_cond, NULL);
    pthread_cond_init(&e->pass_cond, NULL);
    for (size_t k = 0; k < n && e->cfg.scan_interval_s >= 0; k++) /* the first scan, at once */
        if (e->bes[k]->ops->list_records)
            e->scan_on = true;
    e->scan_due_ms = eng_now_ms(e);
    e->scanned = !e->scan_on;
    int nw = cfg->workers < 1 ? 1 : cfg->workers > MAX_WORKERS ? MAX_WORKERS : cfg->workers;
    if (cfg->drive)
        nw = 0; /* the driver runs the passes (hv_engine_run) */
    for (int k = 0; k < nw; k++) {
        if (pthread_create(&e->workers[e->n_workers], NULL, eng_worker, e) != 0) {
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
            e->bes[k]->ops->watch(e->bes[k], eng_vm_changed, e);
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
    pthread_cond_broadcast(&e->pass_cond);
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
            eng_entry_free(x);
        }
    }
    free(e->buckets);
    free(e->gates);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    pthread_cond_destroy(&e->probe_cond);
    pthread_cond_destroy(&e->pass_cond);
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

void hv_engine_reconcile(struct hv_engine *e, struct hv_backend *be, const struct hv_vm_ref *ref,
                         const struct hv_hw *desired, const struct hv_settings *s,
                         struct hv_update_result *out)
{
    char key[HV_KEY_MAX];
    eng_make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    eng_entry_for(e, key, be, ref, true); /* one call on the caller's thread: never refused */
    pthread_mutex_unlock(&e->lock);
    memset(out, 0, sizeof(*out));
    hv_reconcile_key(&e->books, key, be, ref, desired, s, eng_unix_s(e), out);
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
