/* entries.c: the per-VM entries: a hash table keyed by VM (backend, server, UUID, name),
 * found or created under the engine's lock. An entry that has nothing in flight (no pass
 * queued, running or timed, no slot, no probe) and has not been used for entry_idle_ms is
 * evicted: what must survive is on the VM's own record, an evicted entry only costs the next
 * call an "observing the VM". The table owns its entries (and each entry its probe). */
#include "engine.h"
#include "engine_internal.h"

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

/* Find or create the entry for key; caller holds the lock. */
struct entry *eng_entry_for(struct hv_engine *e, const char *key, struct hv_backend *be,
                            const struct hv_vm_ref *ref)
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
    return !x->queued && !x->running && !x->timed && !x->slot && !x->probe_running && !x->waiters;
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
