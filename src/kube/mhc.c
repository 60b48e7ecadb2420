/* mhc.c: the remediation hold of mhc.h: a table of tracked Machines (mu guards it), one
 * worker thread that runs hv_mhc_pass every interval, and the decision table. A pass copies
 * the table, asks about each VM and Machine without the lock, and writes back what it saw. */
#include "mhc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define MACHINES "/apis/cluster.x-k8s.io/v1beta2"

struct entry {
    char ns[254], name[254], backend[32], ref[HV_MHC_REF_MAX];
    unsigned calls;      /* hv_mhc_track calls so far */
    unsigned seen_calls; /* calls when a pass last looked */
    int64_t touched;     /* the pass that first saw the latest call (or the list) */
    int64_t cycling_at;  /* last pass that saw the VM cycling, or when the mark was found */
    bool ours;           /* the last read of the Machine showed HV_MHC_OWNED */
    bool read;           /* the Machine was read at least once */
};

struct hv_mhc {
    struct hv_mhc_cfg cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* stop */
    pthread_t thread;
    bool has_thread, stop;
    struct entry *e;
    size_t n, cap;
    int64_t listed_at; /* 0: never */
};

enum hv_mhc_act hv_mhc_decide(enum hv_mhc_vm vm, const struct hv_mhc_seen *s, int64_t quiet_s,
                              int ready_wait_s)
{
    if (!s->exists)
        return HV_MHC_FORGET;
    if (s->deleting) /* nothing to protect: leave nothing of ours behind */
        return s->ours ? HV_MHC_UNMARK : HV_MHC_FORGET;
    if (vm == HV_MHC_VM_CYCLING)
        /* a skip-remediation without our annotation is the user's (or a removed one was
         * removed on purpose): never ours to set or take */
        return !s->ours && !s->skip ? HV_MHC_MARK : HV_MHC_NOTHING;
    if (!s->ours)
        return HV_MHC_NOTHING;
    /* the cycle is over (or the VM cannot be read): the mark goes once the Node is back, or
     * after ready_wait_s at most, so a VM that does not come back is remediated after all */
    if ((vm == HV_MHC_VM_QUIET && s->node_ready) || quiet_s >= ready_wait_s)
        return HV_MHC_UNMARK;
    return HV_MHC_NOTHING;
}

const char *hv_mhc_act_name(enum hv_mhc_act a)
{
    static const char *const names[] = {"nothing", "mark", "unmark", "forget"};
    return a <= HV_MHC_FORGET ? names[a] : "nothing";
}

void hv_mhc_read_machine(const hj *m, struct hv_mhc_seen *s)
{
    memset(s, 0, sizeof(*s));
    if (!m || m->type != HJ_OBJECT)
        return;
    s->exists = true;
    const hj *md = hj_get(m, "metadata");
    s->deleting = hj_get_str(md, "deletionTimestamp") != NULL;
    const hj *ann = hj_get(md, "annotations");
    s->ours = hj_get_str(ann, HV_MHC_OWNED) != NULL;
    const char *skip = hj_get_str(ann, HV_MHC_SKIP);
    s->skip = skip != NULL;
    s->skip_ours = skip && !strcmp(skip, HV_MHC_SKIP_VALUE);
    const hj *conds = hj_get(hj_get(m, "status"), "conditions");
    for (size_t i = 0; conds && conds->type == HJ_ARRAY && i < conds->n; i++) {
        const char *t = hj_get_str(conds->items[i], "type");
        const char *st = hj_get_str(conds->items[i], "status");
        if (t && st && !strcmp(t, "NodeReady"))
            s->node_ready = !strcmp(st, "True");
    }
}

/* ---- the kube io ---- */

static int kio_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    return hv_kube_get(ctx, path, 0, out, err, errlen);
}

static int kio_patch(void *ctx, const char *path, const char *patch, char *err, size_t errlen)
{
    return hv_kube_merge_patch(ctx, path, patch, 0, err, errlen);
}

static int kio_list(void *ctx, const char *path, const char *cont, hj **out, char *err,
                    size_t errlen)
{
    return hv_kube_list(ctx, path, 100, cont, 0, out, err, errlen);
}

void hv_mhc_kube_io(struct hv_kube *k, struct hv_mhc_io *io)
{
    io->ctx = k;
    io->get = kio_get;
    io->patch = kio_patch;
    io->list = kio_list;
}

/* ---- the table ---- */

static struct entry *find(struct hv_mhc *m, const char *ns, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].ns, ns) && !strcmp(m->e[i].name, name))
            return &m->e[i];
    return NULL;
}

/* Add or refresh under mu; NULL when the table is full. */
static struct entry *put(struct hv_mhc *m, const char *ns, const char *name, const char *backend,
                         const char *ref)
{
    struct entry *e = find(m, ns, name);
    if (!e) {
        if (m->n == HV_MHC_MAX)
            return NULL;
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 16;
            struct entry *grown = realloc(m->e, cap * sizeof(*grown));
            if (!grown)
                abort();
            m->e = grown;
            m->cap = cap;
        }
        e = &m->e[m->n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->ns, sizeof(e->ns), "%s", ns);
        snprintf(e->name, sizeof(e->name), "%s", name);
    }
    snprintf(e->backend, sizeof(e->backend), "%s", backend);
    snprintf(e->ref, sizeof(e->ref), "%s", ref);
    return e;
}

static void drop(struct hv_mhc *m, const char *ns, const char *name)
{
    struct entry *e = find(m, ns, name);
    if (e)
        *e = m->e[--m->n];
}

void hv_mhc_track(struct hv_mhc *m, const char *ns, const char *name, const char *backend,
                  const char *ref)
{
    if (!m || !hv_kube_name_ok(ns) || !hv_kube_name_ok(name) || !backend || !ref ||
        strlen(backend) >= 32 || strlen(ref) >= HV_MHC_REF_MAX || strchr(backend, ' '))
        return;
    pthread_mutex_lock(&m->mu);
    struct entry *e = put(m, ns, name, backend, ref);
    if (e)
        e->calls++;
    pthread_mutex_unlock(&m->mu);
    if (!e)
        hv_log(HV_LOG_WARN, "mhc-hold-full", "detail", "too many Machines tracked: not held",
               (char *)NULL);
}

size_t hv_mhc_tracked(struct hv_mhc *m)
{
    pthread_mutex_lock(&m->mu);
    size_t n = m->n;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- a pass ---- */

/* Every Machine that carries HV_MHC_OWNED: tracked (a restarted process, or a replica that
 * marked it and is gone). Returns 0 when the whole list was read. */
static int adopt(struct hv_mhc *m, int64_t now)
{
    char cont[1024] = "", err[300] = "";
    int pages = 0;
    do {
        hj *list = NULL;
        int st = m->cfg.io.list(m->cfg.io.ctx, MACHINES "/machines", cont[0] ? cont : NULL, &list,
                                err, sizeof(err));
        if (st != 200) {
            hj_free(list);
            hv_log(HV_LOG_WARN, "mhc-list-error", "detail", err, (char *)NULL);
            return -1;
        }
        const hj *items = hj_get(list, "items");
        for (size_t i = 0; items && items->type == HJ_ARRAY && i < items->n; i++) {
            const hj *md = hj_get(items->items[i], "metadata");
            const char *v = hj_get_str(hj_get(md, "annotations"), HV_MHC_OWNED);
            const char *ns = hj_get_str(md, "namespace"), *name = hj_get_str(md, "name");
            const char *sp = v ? strchr(v, ' ') : NULL;
            if (!sp || !ns || !name || (size_t)(sp - v) >= 32)
                continue;
            char backend[32];
            snprintf(backend, sizeof(backend), "%.*s", (int)(sp - v), v);
            pthread_mutex_lock(&m->mu);
            bool known = find(m, ns, name) != NULL;
            struct entry *e = known ? NULL : put(m, ns, name, backend, sp + 1);
            if (e) {
                e->cycling_at = now; /* its wait for NodeReady counts from now */
                e->touched = now;
                e->ours = true;
            }
            pthread_mutex_unlock(&m->mu);
            if (e) {
                char key[520];
                snprintf(key, sizeof(key), "%s/%s", ns, name);
                hv_log(HV_LOG_INFO, "mhc-adopted", "@Machine", key, (char *)NULL);
            }
        }
        const char *c = hj_get_str(hj_get(list, "metadata"), "continue");
        snprintf(cont, sizeof(cont), "%s", c ? c : "");
        hj_free(list);
    } while (cont[0] && ++pages < 1000);
    return 0;
}

static void machine_path(const struct entry *e, char *buf, size_t cap)
{
    snprintf(buf, cap, MACHINES "/namespaces/%s/machines/%s", e->ns, e->name);
}

/* The merge patch of act on a Machine read at resourceVersion rv (the patch fails with 409
 * if it changed since: read again on the next pass). */
static char *patch_for(enum hv_mhc_act act, const struct entry *e, const struct hv_mhc_seen *s,
                       const char *rv)
{
    hj *p = hj_new_object(), *md = hj_new_object(), *ann = hj_new_object();
    if (act == HV_MHC_MARK) {
        char v[32 + 1 + HV_MHC_REF_MAX];
        snprintf(v, sizeof(v), "%s %s", e->backend, e->ref);
        hj_obj_set_take(ann, HV_MHC_SKIP, hj_new_string(HV_MHC_SKIP_VALUE));
        hj_obj_set_take(ann, HV_MHC_OWNED, hj_new_string(v));
    } else {
        hj_obj_set_take(ann, HV_MHC_OWNED, hj_new_null());
        if (s->skip_ours)
            hj_obj_set_take(ann, HV_MHC_SKIP, hj_new_null());
    }
    hj_obj_set_take(md, "annotations", ann);
    if (rv)
        hj_obj_set_take(md, "resourceVersion", hj_new_string(rv));
    hj_obj_set_take(p, "metadata", md);
    char *text = hj_dump(p, NULL);
    hj_free(p);
    return text;
}

/* One tracked Machine; *forget when it is to leave the table. Updates e (a copy). */
static void step(struct hv_mhc *m, struct entry *e, int64_t now, bool *forget)
{
    *forget = false;
    enum hv_mhc_vm vm = m->cfg.vm_state(m->cfg.vm_ctx, e->backend, e->ref);
    if (vm == HV_MHC_VM_CYCLING)
        e->cycling_at = now;
    if (vm != HV_MHC_VM_CYCLING && e->read && !e->ours) {
        /* nothing of ours on it and nothing to hold: no need to read it */
        *forget = now - e->touched > HV_MHC_IDLE_S;
        return;
    }
    char path[600], err[400] = "", key[520];
    machine_path(e, path, sizeof(path));
    snprintf(key, sizeof(key), "%s/%s", e->ns, e->name);
    hj *obj = NULL;
    int st = m->cfg.io.get(m->cfg.io.ctx, path, &obj, err, sizeof(err));
    if (st != 200 && st != 404) {
        hj_free(obj);
        hv_log(HV_LOG_WARN, "mhc-read-error", "@Machine", key, "detail", err, (char *)NULL);
        return;
    }
    struct hv_mhc_seen s;
    hv_mhc_read_machine(st == 200 ? obj : NULL, &s);
    e->read = true;
    e->ours = s.ours;
    if (!e->cycling_at)
        e->cycling_at = now;
    enum hv_mhc_act act = hv_mhc_decide(vm, &s, now - e->cycling_at, m->cfg.ready_wait_s);
    if (act == HV_MHC_MARK || act == HV_MHC_UNMARK) {
        const char *rv = hj_get_str(hj_get(obj, "metadata"), "resourceVersion");
        char *body = patch_for(act, e, &s, rv);
        int pst = m->cfg.io.patch(m->cfg.io.ctx, path, body, err, sizeof(err));
        free(body);
        if (pst == 200) {
            e->ours = act == HV_MHC_MARK;
            if (act == HV_MHC_MARK)
                hv_log(HV_LOG_INFO, "mhc-hold", "@Machine", key, "detail",
                       "power cycle: " HV_MHC_SKIP " set", (char *)NULL);
            else
                hv_log(HV_LOG_INFO, "mhc-release", "@Machine", key, "detail",
                       s.skip_ours ? HV_MHC_SKIP " removed"
                                   : HV_MHC_SKIP " left as the user set it",
                       (char *)NULL);
        } else {
            hv_log(HV_LOG_WARN, "mhc-patch-error", "@Machine", key, "detail", err, (char *)NULL);
        }
        if (pst == 404)
            *forget = true;
    } else if (act == HV_MHC_FORGET) {
        *forget = true;
    } else if (!e->ours && vm != HV_MHC_VM_CYCLING) {
        *forget = now - e->touched > HV_MHC_IDLE_S;
    }
    hj_free(obj);
}

void hv_mhc_pass(struct hv_mhc *m, int64_t now)
{
    int adopt_s = m->cfg.adopt_s > 0 ? m->cfg.adopt_s : HV_MHC_ADOPT_S;
    if (!m->listed_at || now - m->listed_at >= adopt_s) {
        if (adopt(m, now) == 0)
            m->listed_at = now;
    }
    pthread_mutex_lock(&m->mu);
    size_t n = m->n;
    struct entry *copy = n ? malloc(n * sizeof(*copy)) : NULL;
    if (n && !copy)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (m->e[i].calls != m->e[i].seen_calls) { /* called about since the last pass */
            m->e[i].seen_calls = m->e[i].calls;
            m->e[i].touched = now;
        }
        copy[i] = m->e[i];
    }
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        bool forget;
        step(m, &copy[i], now, &forget);
        pthread_mutex_lock(&m->mu);
        struct entry *e = find(m, copy[i].ns, copy[i].name);
        if (e && forget && e->calls == copy[i].calls) { /* not called about meanwhile */
            drop(m, copy[i].ns, copy[i].name);
        } else if (e) {
            e->cycling_at = copy[i].cycling_at;
            e->ours = copy[i].ours;
            e->read = copy[i].read;
        }
        pthread_mutex_unlock(&m->mu);
    }
    free(copy);
}

static void *worker(void *arg)
{
    struct hv_mhc *m = arg;
    int every = m->cfg.interval_ms > 0 ? m->cfg.interval_ms : HV_MHC_INTERVAL_MS;
    pthread_mutex_lock(&m->mu);
    for (;;) { /* an interval first: serve --check-config starts and stops it at once */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += every / 1000;
        until.tv_nsec += (long)(every % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!m->stop && pthread_cond_timedwait(&m->cond, &m->mu, &until) == 0)
            ;
        if (m->stop)
            break;
        pthread_mutex_unlock(&m->mu);
        hv_mhc_pass(m, (int64_t)time(NULL));
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

struct hv_mhc *hv_mhc_new(const struct hv_mhc_cfg *cfg)
{
    struct hv_mhc *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->cfg = *cfg;
    if (m->cfg.ready_wait_s <= 0)
        m->cfg.ready_wait_s = HV_MHC_READY_WAIT_S;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cond, NULL);
    if (!cfg->drive) {
        if (pthread_create(&m->thread, NULL, worker, m) != 0) {
            hv_mhc_free(m);
            return NULL;
        }
        m->has_thread = true;
    }
    return m;
}

void hv_mhc_free(struct hv_mhc *m)
{
    if (!m)
        return;
    if (m->has_thread) {
        pthread_mutex_lock(&m->mu);
        m->stop = true;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
    }
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->mu);
    free(m->e);
    free(m);
}
