/* engine.c: the engine's plumbing: per-VM entries (latest answer, queued/running flags),
 * a worker pool that runs reconcile passes, the power-cycle slot table, and the bounded
 * live probe used by CanUpdateMachine. The engine owns its entries and threads; it borrows
 * the backends. Entries live until hv_engine_free (one per VM ever seen). */
#include "engine_int.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 64
#define MAX_PROBES  32 /* live probes in flight at once; more wait for a retry */

struct entry {
    char key[HV_KEY_MAX];
    struct hv_backend *be;
    struct hv_vm_ref ref;
    struct hv_hw desired;
    struct hv_settings s;
    bool queued, running, again;
    bool have_answer;
    struct hv_hw answer_for;
    struct hv_update_result answer;
    /* live probe cache (CanUpdateMachine under powerCycle=Never) */
    int64_t probe_at_ms;
    struct hv_hw probe_for;
    int probe_rc;
    struct hv_field_plan probe_plan[HV_F_COUNT];
    char probe_why[200];
    bool probe_running;
    struct hv_hw probe_want;
    /* the operation (by its start time) this process has already acted on */
    int64_t seen_op;
    /* power-cycle slot */
    bool slot;
    char slot_host[HV_NAME_MAX];
    struct entry *next, *next_q;
};

struct hv_engine {
    struct hv_engine_cfg cfg;
    struct hv_backend **bes;
    size_t n_bes;
    char owner[96];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct entry *entries;
    struct entry *q_head, *q_tail;
    bool stopping;
    pthread_t workers[MAX_WORKERS];
    int n_workers;
    int slots_used;
    int probes_running;
    pthread_cond_t probe_cond;
};

void hv_engine_cfg_default(struct hv_engine_cfg *c)
{
    c->workers = 4;
    c->max_power_cycles = 4;
    c->max_power_cycles_per_host = 1;
    c->step_timeout_s = 300;
    c->max_step_attempts = 3;
    c->probe_cache_ms = 5000;
    c->probe_wait_ms = 300;
}

const struct hv_engine_cfg *hv_engine_cfg(const struct hv_engine *e)
{
    return &e->cfg;
}

const char *hv_engine_owner(const struct hv_engine *e)
{
    return e->owner;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void make_key(char *out, size_t cap, const struct hv_backend *be,
                     const struct hv_vm_ref *ref)
{
    snprintf(out, cap, "%s|%s|%s|%s", be->ops->name, ref->server, ref->uuid, ref->name);
}

/* Find or create the entry for key; caller holds the lock. */
static struct entry *entry_for(struct hv_engine *e, const char *key, struct hv_backend *be,
                               const struct hv_vm_ref *ref)
{
    for (struct entry *x = e->entries; x; x = x->next)
        if (!strcmp(x->key, key))
            return x;
    struct entry *x = calloc(1, sizeof(*x));
    if (!x)
        abort();
    snprintf(x->key, sizeof(x->key), "%s", key);
    x->be = be;
    x->ref = *ref;
    x->next = e->entries;
    e->entries = x;
    return x;
}

/* Queue x for a reconcile pass and wake a worker; caller holds the lock. */
static void enqueue(struct hv_engine *e, struct entry *x)
{
    x->queued = true;
    x->next_q = NULL;
    if (e->q_tail)
        e->q_tail->next_q = x;
    else
        e->q_head = x;
    e->q_tail = x;
    pthread_cond_signal(&e->cond);
}

static void *worker(void *arg)
{
    struct hv_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->q_head && !e->stopping)
            pthread_cond_wait(&e->cond, &e->lock);
        if (e->stopping)
            break;
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
        pthread_mutex_unlock(&e->lock);

        struct hv_update_result res;
        memset(&res, 0, sizeof(res));
        hv_engine_reconcile_key(e, x->key, x->be, &ref, &desired, &s, &res);

        pthread_mutex_lock(&e->lock);
        x->running = false;
        x->have_answer = true;
        x->answer_for = desired;
        x->answer = res;
        if (x->again && !x->queued)
            enqueue(e, x);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
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
    snprintf(e->owner, sizeof(e->owner), "%s:%d", host, (int)getpid());
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    pthread_cond_init(&e->probe_cond, NULL);
    int nw = cfg->workers < 1 ? 1 : cfg->workers > MAX_WORKERS ? MAX_WORKERS : cfg->workers;
    for (int k = 0; k < nw; k++)
        if (pthread_create(&e->workers[e->n_workers], NULL, worker, e) == 0)
            e->n_workers++;
    return e;
}

void hv_engine_free(struct hv_engine *e)
{
    if (!e)
        return;
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
    for (struct entry *x = e->entries, *nx; x; x = nx) {
        nx = x->next;
        free(x);
    }
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

bool hv_engine_slot_acquire(struct hv_engine *e, const char *key, const char *host, bool force)
{
    pthread_mutex_lock(&e->lock);
    struct entry *x = NULL;
    for (struct entry *y = e->entries; y; y = y->next)
        if (!strcmp(y->key, key))
            x = y;
    bool ok = false;
    if (x && x->slot) {
        ok = true;
    } else if (x) {
        int on_host = 0;
        for (struct entry *y = e->entries; y; y = y->next)
            on_host += y->slot && !strcmp(y->slot_host, host);
        if (force || (e->slots_used < e->cfg.max_power_cycles &&
                      on_host < e->cfg.max_power_cycles_per_host)) {
            x->slot = true;
            snprintf(x->slot_host, sizeof(x->slot_host), "%s", host);
            e->slots_used++;
            ok = true;
        }
    } else {
        ok = true; /* a pass outside the entry table (no other VM can be tracked): allow */
    }
    pthread_mutex_unlock(&e->lock);
    return ok;
}

void hv_engine_slot_release(struct hv_engine *e, const char *key)
{
    pthread_mutex_lock(&e->lock);
    for (struct entry *x = e->entries; x; x = x->next) {
        if (!strcmp(x->key, key) && x->slot) {
            x->slot = false;
            e->slots_used--;
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
    struct entry *x = entry_for(e, key, be, ref);
    if (x->have_answer && hv_hw_equal(&x->answer_for, desired)) {
        *out = x->answer;
    } else {
        out->failure = false;
        out->retry_after_s = 1;
        snprintf(out->message, sizeof(out->message), HV_MSG("in progress: observing the VM"));
    }
    x->desired = *desired;
    x->s = *s;
    if (x->running) {
        x->again = true;
    } else if (!x->queued) {
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
    hv_engine_reconcile_key(e, key, be, ref, desired, s, out);
}

int hv_engine_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        char *why, size_t whylen)
{
    return backend_for(ctx, p, ref, why, whylen) ? 1 : 0;
}

bool hv_engine_first_sight(struct hv_engine *e, const char *key, int64_t op_started_at)
{
    bool first = false;
    pthread_mutex_lock(&e->lock);
    for (struct entry *x = e->entries; x; x = x->next) {
        if (!strcmp(x->key, key)) {
            first = x->seen_op != op_started_at;
            x->seen_op = op_started_at;
        }
    }
    pthread_mutex_unlock(&e->lock);
    return first;
}

struct probe_job {
    struct hv_engine *e;
    struct entry *x;
};

/* Observe and plan one VM for the live probe, off the hook's thread. */
static void *probe_thread(void *arg)
{
    struct probe_job *j = arg;
    struct hv_engine *e = j->e;
    struct entry *x = j->x;
    free(j);
    pthread_mutex_lock(&e->lock);
    struct hv_vm_ref ref = x->ref;
    struct hv_hw want = x->probe_want;
    pthread_mutex_unlock(&e->lock);

    struct hv_vm_obs *obs = calloc(1, sizeof(*obs));
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_err err = {0};
    int rc = -1;
    char w[200] = "";
    if (!obs)
        abort();
    memset(plan, 0, sizeof(plan));
    if (x->be->ops->observe(x->be, &ref, obs, &err) != HV_OK)
        snprintf(w, sizeof(w), "%s", hv_errcode_message(err.code));
    else if (!obs->found)
        snprintf(w, sizeof(w), HV_MSG("the VM was not found"));
    else if (x->be->ops->plan(x->be, &ref, obs, &want, plan, &err) != HV_OK)
        snprintf(w, sizeof(w), "%s", hv_errcode_message(err.code));
    else
        rc = 0;
    free(obs);
    if (rc < 0)
        hv_log(HV_LOG_WARN, "probe-error", "vm", x->key, "detail", err.detail, (char *)NULL);

    pthread_mutex_lock(&e->lock);
    x->probe_at_ms = now_ms();
    x->probe_for = want;
    x->probe_rc = rc;
    memcpy(x->probe_plan, plan, sizeof(plan));
    snprintf(x->probe_why, sizeof(x->probe_why), "%s", w);
    x->probe_running = false;
    e->probes_running--;
    pthread_cond_broadcast(&e->probe_cond);
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

int hv_engine_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                    const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT], char *why,
                    size_t whylen)
{
    struct hv_engine *e = ctx;
    struct hv_backend *be = backend_for(e, p, ref, why, whylen);
    if (!be)
        return -1;
    char key[HV_KEY_MAX];
    make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    struct entry *x = entry_for(e, key, be, ref);
    int64_t limit = now_ms() + e->cfg.probe_wait_ms;
    for (;;) {
        bool fresh = x->probe_at_ms && now_ms() - x->probe_at_ms < e->cfg.probe_cache_ms &&
                     hv_hw_equal(&x->probe_for, desired);
        if (fresh) {
            int rc = x->probe_rc;
            memcpy(plan, x->probe_plan, sizeof(x->probe_plan));
            snprintf(why, whylen, "%s", x->probe_why);
            pthread_mutex_unlock(&e->lock);
            return rc;
        }
        if (!x->probe_running && e->probes_running < MAX_PROBES) {
            struct probe_job *j = malloc(sizeof(*j));
            pthread_t t;
            pthread_attr_t attr;
            if (!j)
                abort();
            j->e = e;
            j->x = x;
            x->probe_want = *desired;
            x->probe_running = true;
            e->probes_running++;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&t, &attr, probe_thread, j) != 0) {
                x->probe_running = false;
                e->probes_running--;
                free(j);
            }
            pthread_attr_destroy(&attr);
        }
        int64_t left = limit - now_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->probe_cond, &e->lock, &ts);
    }
    pthread_mutex_unlock(&e->lock);
    snprintf(why, whylen, HV_MSG("still asking the hypervisor"));
    return -2; /* not known yet: the hook answers a retryable Failure */
}

void hv_engine_gauges(void *engine, int *operations, int *power_cycles)
{
    struct hv_engine *e = engine;
    int ops = 0;
    pthread_mutex_lock(&e->lock);
    for (struct entry *x = e->entries; x; x = x->next)
        ops += x->queued || x->running ||
               (x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0);
    *operations = ops;
    *power_cycles = e->slots_used;
    pthread_mutex_unlock(&e->lock);
}
