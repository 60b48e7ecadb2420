/* workers.c: scheduling and workers: the queue of reconcile passes, the passes the engine
 * times for itself (a power cycle in flight, a settling wait), the worker threads that run
 * them (or hv_engine_run, for a driven engine), and the backends' change reports that wake a
 * settling VM. A pass runs with the lock released; its answer is kept on the entry. */
#include "engine.h"
#include "engine_internal.h"
#include "hv_clock.h"
#include "metrics.h"

#include <string.h>
#include <strings.h>

/* Queue x for a reconcile pass and wake a worker; caller holds the lock. */
void eng_enqueue(struct hv_engine *e, struct entry *x)
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
void eng_schedule(struct hv_engine *e, struct entry *x, int64_t delay_ms)
{
    int64_t at = eng_now_ms(e) + delay_ms;
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
    int64_t now = eng_now_ms(e), next = 0;
    for (struct entry **pp = &e->timed; *pp;) {
        struct entry *x = *pp;
        if (x->wake_ms <= now) {
            *pp = x->next_t;
            x->timed = false;
            x->look_due = true;
            if (x->running)
                x->again = true;
            else if (!x->queued)
                eng_enqueue(e, x);
            continue;
        }
        if (!next || x->wake_ms < next)
            next = x->wake_ms;
        pp = &x->next_t;
    }
    return next;
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
    x->look_due = false;
    struct hv_hw desired = x->desired;
    struct hv_settings s = x->s;
    struct hv_vm_ref ref = x->ref;
    uint64_t seq = x->call_seq;
    uint64_t changes = x->change_seq; /* (a resume reported during the pass, below) */
    /* A pass that runs after CAPI's next call was due, with no call since, follows a call CAPI
     * may have left behind (the rollout changed or went back and another replica serves it,
     * the Machine went): it begins nothing. A call that comes queues a pass that may. */
    int64_t wait = x->expect_ms > 1000 ? x->expect_ms : 1000;
    bool called = x->called && eng_now_ms(e) - x->call_ms <= wait;
    int64_t called_at = called ? x->call_unix_s : 0;
    x->called = false;
    pthread_mutex_unlock(&e->lock);

    struct hv_update_result res;
    memset(&res, 0, sizeof(res));
    int64_t began = eng_now_ms(e);
    enum hv_follow follow =
        hv_reconcile_key(&e->books, x->key, x->be, &ref, &desired, &s, called_at, &res);
    hv_metrics_pass();

    pthread_mutex_lock(&e->lock);
    /* A pass that could not read the VM's record (the hypervisor did not answer) knows
     * nothing new of its cycle: a cycle this process carries stays followed (its VM may be
     * paused or its host down for a while; seed 11852), else CAPI stopping its calls would
     * leave it half done, its sent shutdown landing later outside any slot. */
    /* (so does one this process parked paused under a step of its own that may land, whose
     * pass, woken by a change report of the VM, could not read it: it may run again now; not
     * one whose VM the look found gone: no resume will come, HV_FOLLOW_GONE) */
    bool blind = follow == HV_FOLLOW_UNSEEN || follow == HV_FOLLOW_GONE;
    bool blind_own = blind && (x->following || (follow == HV_FOLLOW_UNSEEN && x->on_resume));
    bool cycling = follow == HV_FOLLOW_CYCLE || follow == HV_FOLLOW_OWN ||
                   follow == HV_FOLLOW_PAUSED || blind_own;
    if (!blind) {
        x->following = follow == HV_FOLLOW_OWN || follow == HV_FOLLOW_PAUSED;
        x->paused_cycle = follow == HV_FOLLOW_PAUSED || follow == HV_FOLLOW_RESUME;
        /* (a backend that reports no changes could never wake it: the entry goes as any) */
        x->on_resume = follow == HV_FOLLOW_RESUME && x->be->ops->watch;
    } else if (follow == HV_FOLLOW_GONE && x->on_resume) {
        x->on_resume = false;
        x->paused_cycle = x->paused_cycle && x->following;
    }
    /* ... and, blind to it, the cycle counts against the caps again: its shutdown may land at
     * any time (a VM paused mid-cycle gave its slot back, and may have been resumed since;
     * seed 12023), so no new cycle of its host begins until a pass sees the VM again. */
    if (blind_own && !x->slot && x->slot_host[0])
        eng_slot_take(e, x, x->slot_host, true);
    x->running = false;
    x->used_ms = eng_now_ms(e);
    eng_probe_expire(x); /* the pass may have changed the VM: CanUpdateMachine looks again */
    x->pass_ms = x->used_ms - began;
    x->have_answer = true;
    x->answer_for = desired;
    x->answer_s = s;
    x->answer = res;
    x->answer_seq = seq;
    if (x->again && eng_concludes(x)) {
        /* The pass answered "done" for what was asked since, from a look that began
         * after the call that asked: the next call uses it, one more pass adds nothing. */
        x->again = false;
    }
    if (x->again && !x->queued) {
        x->running = true; /* still pending: enqueue must not count it twice */
        eng_enqueue(e, x);
        x->running = false;
    } else {
        hv_metrics_passes_pending(-1);
    }
    /* A change report of the VM (its resume, say) that came while this pass ran, before it
     * parked the entry (eng_vm_changed wakes parked entries only): a pass looks again. */
    if (x->on_resume && x->change_seq != changes && !x->queued) {
        x->look_due = true;
        x->woken++;
        eng_enqueue(e, x);
    }
    pthread_cond_broadcast(&e->pass_cond);
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
        eng_schedule(e, x, (int64_t)(retry < 1 ? 1 : retry > 5 ? 5 : retry) * 1000);
    }
}

void eng_run_first(struct hv_engine *e, struct entry *x)
{
    if (!x->queued || x->running)
        return;
    if (e->q_head != x) {
        struct entry *prev = e->q_head;
        while (prev->next_q != x)
            prev = prev->next_q;
        prev->next_q = x->next_q;
        if (e->q_tail == x)
            e->q_tail = prev;
        x->next_q = e->q_head;
        e->q_head = x;
    }
    if (e->cfg.drive)
        run_head(e);
}

void *eng_worker(void *arg)
{
    struct hv_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        for (;;) {
            int64_t next = run_timers(e);
            if (eng_scan_due(e)) {
                eng_run_scan(e);
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
    if (max > 0 && eng_scan_due(e)) /* (max 0: only asks when something is due) */
        eng_run_scan(e);
    int64_t next = run_timers(e);
    for (; n < max && e->q_head; n++)
        run_head(e);
    if (next_ms) {
        *next_ms = n ? run_timers(e) : next;
        /* (a rescan that came due during the passes: the next run, a moment later; the
         * first scan runs with the first passes anyway) */
        int64_t scan_at =
            e->scan_due_ms > eng_now_ms(e) || !e->scanned ? e->scan_due_ms : eng_now_ms(e) + 1;
        if (e->scan_on && (!*next_ms || scan_at < *next_ms))
            *next_ms = scan_at;
    }
    pthread_mutex_unlock(&e->lock);
    return n;
}

bool hv_engine_pass_waiting(struct hv_engine *e, const char *vm_name)
{
    bool waiting = false;
    pthread_mutex_lock(&e->lock);
    for (struct entry *x = e->q_head; x && !waiting; x = x->next_q)
        waiting = !strcmp(x->ref.name, vm_name);
    pthread_mutex_unlock(&e->lock);
    return waiting;
}

int64_t hv_engine_pass_timed(struct hv_engine *e, const char *vm_name)
{
    int64_t at = 0;
    pthread_mutex_lock(&e->lock);
    for (struct entry *x = e->timed; x && !at; x = x->next_t)
        if (!strcmp(x->ref.name, vm_name))
            at = x->wake_ms;
    pthread_mutex_unlock(&e->lock);
    return at;
}

bool hv_engine_pass_pending(struct hv_engine *e, const char *vm_name)
{
    bool pending = false;
    pthread_mutex_lock(&e->lock);
    for (size_t k = 0; k < e->n_buckets && !pending; k++)
        for (struct entry *x = e->buckets[k]; x && !pending; x = x->hnext)
            pending = !strcmp(x->ref.name, vm_name) && (x->queued || x->running || x->again);
    pthread_mutex_unlock(&e->lock);
    return pending;
}

/* A backend reports that a VM changed (ops->watch; libvirt: a domain event). Its cached
 * CanUpdateMachine probe is dropped: the VM it judged may be gone (another replica's step,
 * the operator), and the next CanUpdateMachine looks again (held-out seed 1638681: A -> B ->
 * A, B hot-plugged by the other replica, A answered covered from the look before it, and A's
 * UpdateMachine then refused the memory decrease on a transient domain). A VM whose
 * operation waits for a change already made to show (settling) gets a pass now, not at
 * CAPI's next call or the engine's next timed look: a wait this change ends (the device
 * shows, the guest agent connected, the guest shut down) is concluded before that call, which
 * answers from it. Other VMs are left alone. The pass observes as any other: the report is
 * only a hint. Linear in the entries: reports come when VMs change, not per call. */
void eng_vm_changed(void *ctx, struct hv_backend *b, const char *server, const char *uuid,
                    const char *name)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry *x = e->buckets[k]; x; x = x->hnext) {
            if (x->be != b)
                continue;
            if (x->ref.server[0] && strcmp(x->ref.server, server) != 0)
                continue;
            if (x->ref.uuid[0] ? strcasecmp(x->ref.uuid, uuid) != 0
                               : strcmp(x->ref.name, name) != 0)
                continue;
            eng_probe_expire(x);
            x->change_seq++;
            if (!x->have_desired)
                continue;
            /* only a wait for a change already made (never a step to retry: retries keep
             * their pace, whatever events a failed step causes), or a VM paused under a step
             * of this process that may land once it runs (HV_FOLLOW_RESUME): no timer looks
             * at it, the report of its resume does; from the report until that look it counts
             * against the caps (slots.c paused_due), as a paused cycle's due look does */
            bool settle = x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0 &&
                          x->answer.settling;
            if (!settle && !x->on_resume)
                continue;
            if (x->on_resume)
                x->look_due = true;
            x->woken++;
            if (x->running)
                x->again = true;
            else if (!x->queued)
                eng_enqueue(e, x);
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
