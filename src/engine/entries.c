/* entries.c: the per-VM entries: a hash table keyed by VM (backend, server, UUID, name),
 * found or created under the engine's lock. An entry that has nothing in flight (no pass
 * queued, running or timed, no slot, no probe) and has not been used for entry_idle_ms is
 * evicted, and at most cfg.max_entries are held (the least recently used with nothing in
 * flight make room for a new one; with none, the new one is refused): what must survive is on the
 * VM's own record, an evicted entry only costs the next call an "observing the VM". The table owns
 * its entries (and each entry its probe). */
#include "engine.h"
#include "engine_internal.h"
#include "metrics.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eng_make_key(char *out, size_t cap, const struct hv_backend *be, const struct hv_vm_ref *ref)
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
struct entry *eng_find(struct hv_engine *e, const char *key)
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

void eng_entry_free(struct entry *x)
{
    free(x->probe);
    free(x->key);
    free(x);
}

struct aged {
    int64_t used_ms;
    struct entry *x;
};

static int by_age(const void *a, const void *b)
{
    const struct aged *p = a, *q = b;
    return (p->used_ms > q->used_ms) - (p->used_ms < q->used_ms);
}

/* The table is full: evict the least recently used entries with nothing in flight, up to a
 * sixteenth of the cap at once (so a flood of new names walks the table once per that many
 * calls, not once per call). An entry with a pass, a slot, a probe or a waiting call is never
 * evicted. Returns whether there is room now; caller holds the lock. */
static bool make_room(struct hv_engine *e)
{
    size_t cap = (size_t)e->cfg.max_entries;
    if (e->n_entries < cap)
        return true;
    struct aged *v = malloc(e->n_entries * sizeof(*v));
    size_t n = 0;
    if (!v)
        return false;
    for (size_t k = 0; k < e->n_buckets; k++)
        for (struct entry *x = e->buckets[k]; x; x = x->hnext)
            if (eng_evictable(x))
                v[n++] = (struct aged){x->used_ms, x};
    size_t want = e->n_entries - cap + 1 + cap / 16;
    if (n > want)
        qsort(v, n, sizeof(*v), by_age);
    for (size_t k = 0; k < n && k < want; k++) {
        eng_unlink_entry(e, v[k].x);
        eng_entry_free(v[k].x);
    }
    free(v);
    return e->n_entries < cap;
}

/* Find or create the entry for key; caller holds the lock. A new entry beyond
 * cfg.max_entries: NULL when no entry could be evicted for it (the call is refused,
 * retryably), unless force (a cycle found in flight on a VM: it must be carried on). */
struct entry *eng_entry_for(struct hv_engine *e, const char *key, struct hv_backend *be,
                            const struct hv_vm_ref *ref, bool force)
{
    struct entry *x = eng_find(e, key);
    if (x) {
        x->used_ms = eng_now_ms(e);
        /* whose credentials and which certificate: as the latest request says (workers copy
         * the ref under the lock) */
        memcpy(x->ref.cluster, ref->cluster, sizeof(x->ref.cluster));
        memcpy(x->ref.thumbprint, ref->thumbprint, sizeof(x->ref.thumbprint));
        return x;
    }
    if (!make_room(e) && !force) {
        e->refused++;
        hv_metrics_engine_refused();
        return NULL;
    }
    x = calloc(1, sizeof(*x));
    if (!x || !(x->key = strdup(key)))
        abort();
    x->hash = hash_key(key);
    x->be = be;
    x->ref = *ref;
    x->used_ms = eng_now_ms(e);
    if (e->n_entries + 1 > e->n_buckets * 2)
        rehash(e, e->n_buckets * 2);
    x->hnext = e->buckets[x->hash & (e->n_buckets - 1)];
    e->buckets[x->hash & (e->n_buckets - 1)] = x;
    e->n_entries++;
    return x;
}

bool eng_evictable(const struct entry *x)
{
    return !x->queued && !x->running && !x->timed && !x->slot && !x->probe_running && !x->waiters &&
           !x->on_resume;
}

void eng_unlink_entry(struct hv_engine *e, struct entry *x)
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
void eng_sweep(struct hv_engine *e, bool force)
{
    int64_t now = eng_now_ms(e);
    if (!force && now - e->swept_ms < 1000)
        return;
    e->swept_ms = now;
    size_t evicted = 0;
    for (size_t k = 0; k < e->n_buckets; k++) {
        for (struct entry **pp = &e->buckets[k]; *pp;) {
            struct entry *x = *pp;
            if (eng_evictable(x) && now - x->used_ms >= e->cfg.entry_idle_ms) {
                *pp = x->hnext;
                e->n_entries--;
                eng_entry_free(x);
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
    eng_sweep(e, true);
    size_t n = e->n_entries;
    pthread_mutex_unlock(&e->lock);
    return n;
}

bool hv_engine_scanned(struct hv_engine *e)
{
    pthread_mutex_lock(&e->lock);
    bool done = e->scanned && !e->scanning;
    pthread_mutex_unlock(&e->lock);
    return done;
}

uint64_t hv_engine_refused(struct hv_engine *e)
{
    pthread_mutex_lock(&e->lock);
    uint64_t n = e->refused;
    pthread_mutex_unlock(&e->lock);
    return n;
}
