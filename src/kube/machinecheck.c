/* machinecheck.c: the checks of machinecheck.h over a table of cached API reads (mu guards it)
 * filled by reader threads. An entry is one object's API path with the last read of it
 * (stripped to metadata and spec), when that read started, whether a read is wanted or running,
 * and "doubt": when a check first failed on it (a refusal needs a read started after that). */
#include "machinecheck.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"
#include "msg.h"

#define CAPI_V1B2 "/apis/cluster.x-k8s.io/v1beta2/namespaces/"
#define PATH_MAX_ 640

struct entry {
    char path[PATH_MAX_];
    hj *obj;         /* the last read on 200 (malloc'd, stripped); NULL otherwise */
    int status;      /* its HTTP status, -1 no answer, 0 never read */
    int64_t read_at; /* when that read started (ms) */
    int64_t doubt;   /* when a check first failed on it and is waiting for a new read; 0 none */
    int64_t used;    /* last check that looked at it */
    bool want;       /* a read is queued */
    bool busy;       /* a read is running */
};

struct hv_mc {
    struct hv_mc_cfg cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* work queued, or stop */
    pthread_t threads[8];
    int n_threads;
    bool stop;
    struct entry *e;
    size_t n, cap;
    /* index of e by path: open addressing, linear probing; slot k holds an entry's index + 1
     * (0: empty); n_slots a power of two at least twice cap, rebuilt when e grows or loses
     * entries (a linear search cost a check some 16,000 string compares at the table's 8,192,
     * under mu, which every hook thread takes) */
    uint32_t *slot;
    size_t n_slots;
    unsigned long reads, passes, waits, fails;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(const struct hv_mc *mc)
{
    return mc->cfg.clock_ms ? mc->cfg.clock_ms() : mono_ms();
}

static int kio_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    return hv_kube_get(ctx, path, 0, out, err, errlen);
}

void hv_mc_kube_io(struct hv_kube *k, struct hv_mc_io *io)
{
    io->ctx = k;
    io->get = kio_get;
}

bool hv_mc_resource(const char *kind, char *out, size_t cap)
{
    size_t n = kind ? strlen(kind) : 0;
    if (n == 0 || n + 4 > cap)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = kind[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return false;
        out[i] = c;
    }
    out[n] = '\0';
    if (out[n - 1] == 'y' && n > 1 && !strchr("aeiou", out[n - 2]))
        snprintf(out + n - 1, cap - (n - 1), "ies");
    else if (out[n - 1] == 's' || out[n - 1] == 'x')
        snprintf(out + n, cap - n, "es");
    else
        snprintf(out + n, cap - n, "s");
    return true;
}

/* ---- the table ---- */

static size_t path_hash(const char *path)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    return (size_t)(h ^ h >> 29);
}

static struct entry *find(struct hv_mc *mc, const char *path)
{
    if (!mc->n_slots)
        return NULL;
    size_t mask = mc->n_slots - 1;
    for (size_t k = path_hash(path) & mask;; k = (k + 1) & mask) {
        uint32_t i = mc->slot[k];
        if (!i)
            return NULL;
        if (!strcmp(mc->e[i - 1].path, path))
            return &mc->e[i - 1];
    }
}

static void index_put(struct hv_mc *mc, size_t i)
{
    size_t mask = mc->n_slots - 1, k = path_hash(mc->e[i].path) & mask;
    while (mc->slot[k])
        k = (k + 1) & mask;
    mc->slot[k] = (uint32_t)i + 1;
}

/* The index anew, for at least want entries. */
static void reindex(struct hv_mc *mc, size_t want)
{
    size_t n = mc->n_slots ? mc->n_slots : 128;
    while (n < 2 * want)
        n *= 2;
    if (n != mc->n_slots) {
        free(mc->slot);
        mc->slot = malloc(n * sizeof(*mc->slot));
        if (!mc->slot)
            abort();
        mc->n_slots = n;
    }
    memset(mc->slot, 0, n * sizeof(*mc->slot));
    for (size_t i = 0; i < mc->n; i++)
        index_put(mc, i);
}

/* Find or add under mu; NULL when the table is full of live entries. It may move entries:
 * pointers into the table from before it are stale (find them again). */
static struct entry *get_entry(struct hv_mc *mc, const char *path, int64_t now)
{
    struct entry *e = find(mc, path);
    if (e)
        return e;
    if (mc->n == HV_MC_MAX) { /* drop what no check looked at within two TTLs */
        for (size_t i = 0; i < mc->n;) {
            struct entry *x = &mc->e[i];
            if (!x->want && !x->busy && now - x->used > 2 * (int64_t)mc->cfg.ttl_ms) {
                hj_free(x->obj);
                *x = mc->e[--mc->n];
            } else {
                i++;
            }
        }
        reindex(mc, mc->cap);
        if (mc->n == HV_MC_MAX)
            return NULL;
    }
    if (mc->n == mc->cap) {
        size_t cap = mc->cap ? mc->cap * 2 : 64;
        struct entry *grown = realloc(mc->e, cap * sizeof(*grown));
        if (!grown)
            abort();
        mc->e = grown;
        mc->cap = cap;
        reindex(mc, cap);
    }
    e = &mc->e[mc->n++];
    memset(e, 0, sizeof(*e));
    snprintf(e->path, sizeof(e->path), "%s", path);
    index_put(mc, mc->n - 1);
    return e;
}

static void want(struct hv_mc *mc, struct entry *e)
{
    if (!e->want) {
        e->want = true;
        pthread_cond_signal(&mc->cond);
    }
}

/* An entry a check may use now: read, and the read is younger than the TTL. */
static bool usable(const struct hv_mc *mc, const struct entry *e, int64_t now)
{
    return e->status != 0 && now - e->read_at < mc->cfg.ttl_ms;
}

/* An entry a check uses this long after its read is read again in the background, so that
 * the objects of calls that keep coming (CAPI retrying, many replicas, a bench) never expire
 * under them: each expiry would answer every call "reading ...; retry" until the new read came
 * (2,402 of 154,000 CanUpdateMachine calls of an 8-second hook-bench-checked.py run). An entry
 * no check looks at in the TTL's last fifth is not read again until a check wants it. */
static int64_t refresh_after(const struct hv_mc *mc)
{
    return mc->cfg.ttl_ms - mc->cfg.ttl_ms / 5;
}

/* What a check keeps of an object: metadata's name, namespace, uid, annotations and
 * deletionTimestamp, and spec. */
static hj *strip(const hj *o)
{
    static const char *const keep[] = {"name",        "namespace",         "uid",
                                       "annotations", "deletionTimestamp", NULL};
    hj *r = hj_new_object(), *md = hj_new_object();
    const hj *omd = hj_get(o, "metadata");
    for (size_t i = 0; keep[i]; i++) {
        const hj *v = hj_get(omd, keep[i]);
        if (v)
            hj_obj_set_take(md, keep[i], hj_clone(v));
    }
    hj_obj_set_take(r, "metadata", md);
    const hj *spec = hj_get(o, "spec");
    if (spec)
        hj_obj_set_take(r, "spec", hj_clone(spec));
    return r;
}

/* One queued read, if any (under mu on entry and return). Returns false when none. */
static bool read_one(struct hv_mc *mc)
{
    struct entry *e = NULL;
    for (size_t i = 0; i < mc->n && !e; i++)
        if (mc->e[i].want && !mc->e[i].busy)
            e = &mc->e[i];
    if (!e)
        return false;
    char path[PATH_MAX_];
    snprintf(path, sizeof(path), "%s", e->path);
    e->want = false;
    e->busy = true;
    int64_t started = now_ms(mc);
    mc->reads++;
    pthread_mutex_unlock(&mc->mu);
    hv_metrics_machine_check_read();
    hj *o = NULL;
    char err[300] = "";
    int st = mc->cfg.io.get(mc->cfg.io.ctx, path, &o, err, sizeof(err));
    hj *kept = st == 200 && o && o->type == HJ_OBJECT ? strip(o) : NULL;
    hj_free(o);
    if (st != 200 && st != 404)
        hv_log(HV_LOG_WARN, "machine-check-read-error", "path", path, "detail",
               err[0] ? err : "unexpected HTTP status", (char *)NULL);
    pthread_mutex_lock(&mc->mu);
    e = find(mc, path); /* the table may have moved */
    if (e) {
        hj_free(e->obj);
        e->obj = kept;
        e->status = st == 200 && !kept ? -1 : st;
        e->read_at = started;
        e->busy = false;
    } else {
        hj_free(kept);
    }
    return true;
}

static void *reader(void *arg)
{
    struct hv_mc *mc = arg;
    pthread_mutex_lock(&mc->mu);
    while (!mc->stop) {
        if (!read_one(mc))
            pthread_cond_wait(&mc->cond, &mc->mu);
    }
    pthread_mutex_unlock(&mc->mu);
    return NULL;
}

size_t hv_mc_work(struct hv_mc *mc)
{
    size_t n = 0;
    pthread_mutex_lock(&mc->mu);
    while (read_one(mc))
        n++;
    pthread_mutex_unlock(&mc->mu);
    return n;
}

struct hv_mc *hv_mc_new(const struct hv_mc_cfg *cfg)
{
    struct hv_mc *mc = calloc(1, sizeof(*mc));
    if (!mc)
        return NULL;
    mc->cfg = *cfg;
    if (mc->cfg.ttl_ms <= 0)
        mc->cfg.ttl_ms = HV_MC_TTL_MS;
    if (mc->cfg.threads <= 0)
        mc->cfg.threads = HV_MC_THREADS;
    if (mc->cfg.threads > 8)
        mc->cfg.threads = 8;
    pthread_mutex_init(&mc->mu, NULL);
    pthread_cond_init(&mc->cond, NULL);
    if (!mc->cfg.drive) {
        for (int i = 0; i < mc->cfg.threads; i++) {
            if (pthread_create(&mc->threads[i], NULL, reader, mc) != 0) {
                hv_mc_free(mc);
                return NULL;
            }
            mc->n_threads++;
        }
    }
    return mc;
}

void hv_mc_free(struct hv_mc *mc)
{
    if (!mc)
        return;
    pthread_mutex_lock(&mc->mu);
    mc->stop = true;
    pthread_cond_broadcast(&mc->cond);
    pthread_mutex_unlock(&mc->mu);
    for (int i = 0; i < mc->n_threads; i++)
        pthread_join(mc->threads[i], NULL);
    for (size_t i = 0; i < mc->n; i++)
        hj_free(mc->e[i].obj);
    free(mc->e);
    free(mc->slot);
    pthread_cond_destroy(&mc->cond);
    pthread_mutex_destroy(&mc->mu);
    free(mc);
}

void hv_mc_get_stats(struct hv_mc *mc, struct hv_mc_stats *st)
{
    pthread_mutex_lock(&mc->mu);
    st->reads = mc->reads;
    st->passes = mc->passes;
    st->waits = mc->waits;
    st->fails = mc->fails;
    st->cached = mc->n;
    pthread_mutex_unlock(&mc->mu);
}

/* ---- the checks (pure: objects in, a message out) ---- */

static const char *md_str(const hj *o, const char *key)
{
    return hj_get_str(hj_get(o, "metadata"), key);
}

/* "group" of "group/version"; false for the core group or a malformed apiVersion. */
static bool api_group(const char *av, char *out, size_t cap)
{
    const char *sl = av ? strchr(av, '/') : NULL;
    if (!sl || sl == av || !sl[1] || strchr(sl + 1, '/') || (size_t)(sl - av) >= cap)
        return false;
    snprintf(out, cap, "%.*s", (int)(sl - av), av);
    return true;
}

/* Whether ref (an infrastructureRef: apiGroup, kind, name) names obj (apiVersion, kind,
 * metadata.name). */
static bool ref_names(const hj *ref, const hj *obj)
{
    char group[256];
    const char *rg = hj_get_str(ref, "apiGroup"), *rk = hj_get_str(ref, "kind"),
               *rn = hj_get_str(ref, "name");
    const char *ok = hj_get_str(obj, "kind"), *on = md_str(obj, "name");
    return rg && rk && rn && ok && on &&
           api_group(hj_get_str(obj, "apiVersion"), group, sizeof(group)) && !strcmp(rg, group) &&
           !strcmp(rk, ok) && !strcmp(rn, on);
}

static bool in_list(const char *csv, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = csv; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        while (l && *p == ' ')
            p++, l--;
        while (l && p[l - 1] == ' ')
            l--;
        if (l == wl && !strncmp(p, word, wl))
            return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

/* CAPI's marks of an in-place update (v1.14.2): on the Machine, update-in-progress and
 * UpdateMachine among its pending hooks; on the infra machine, update-in-progress. One rule
 * for the hook's check and for a resumed cycle's. */
static bool machine_marked(const hj *machine)
{
    const hj *ann = hj_get(hj_get(machine, "metadata"), "annotations");
    return hj_get_str(ann, HV_MC_IN_PROGRESS) &&
           in_list(hj_get_str(ann, HV_MC_PENDING_HOOKS), "UpdateMachine");
}

static bool infra_marked(const hj *infra)
{
    return hj_get_str(hj_get(hj_get(infra, "metadata"), "annotations"), HV_MC_IN_PROGRESS);
}

/* Why a read cannot answer a check ("" when it can: 200). */
static bool read_failed(const struct entry *e, const char *what, const char *ns, const char *name,
                        char *msg, size_t cap)
{
    if (e->status == 200)
        return false;
    if (e->status == 404)
        snprintf(msg, cap, HV_MSG("machine check: %s %s/%s does not exist in the API server"), what,
                 ns, name);
    else if (e->status == 403 || e->status == 401)
        snprintf(msg, cap,
                 HV_MSG("machine check: hvupdater may not read %s %s/%s from the API server "
                        "(HTTP %d; see the RBAC in docs/operations.md)"),
                 what, ns, name, e->status);
    else
        snprintf(msg, cap, HV_MSG("machine check: cannot read %s %s/%s from the API server"), what,
                 ns, name);
    return true;
}

struct names {
    const char *ns, *name, *uid;
    const char *ikind, *iname;
    char mpath[PATH_MAX_], ipath[PATH_MAX_];
};

/* The request's Machine (MachineSet) and infra object; false with msg when it lacks them. */
static bool request_names(enum hv_hook h, const hj *req, struct names *n, char *msg, size_t cap)
{
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const char *side = h == HV_HOOK_UPDATE_MACHINE ? "desired" : "current";
    const char *mkey = set ? "machineSet" : "machine";
    const char *ikey = set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    /* the Machine: desired (UpdateMachine, CanUpdateMachine: same object, desired state); the
     * MachineSet: current (the desired one does not exist yet) */
    const hj *m = hj_get(hj_get(req, set ? "current" : "desired"), mkey);
    const hj *im = hj_get(hj_get(req, side), ikey);
    memset(n, 0, sizeof(*n));
    n->ns = md_str(m, "namespace");
    n->name = md_str(m, "name");
    n->uid = md_str(m, "uid");
    if (!hv_kube_name_ok(n->ns) || !hv_kube_name_ok(n->name) ||
        (n->uid && (!n->uid[0] || strlen(n->uid) > 64))) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the request's %s has no valid namespace and name"), mkey);
        return false;
    }
    char group[256], res[128];
    const char *iav = hj_get_str(im, "apiVersion"), *ins = md_str(im, "namespace");
    n->ikind = hj_get_str(im, "kind");
    n->iname = md_str(im, "name");
    if (!api_group(iav, group, sizeof(group)) || !hv_mc_resource(n->ikind, res, sizeof(res)) ||
        !hv_kube_name_ok(n->iname) || (ins && strcmp(ins, n->ns)) ||
        strspn(iav, "abcdefghijklmnopqrstuvwxyz0123456789.-/") != strlen(iav)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the request's %s.%s has no valid apiVersion, kind and "
                        "name in the %s's namespace"),
                 side, ikey, mkey);
        return false;
    }
    snprintf(n->mpath, sizeof(n->mpath), CAPI_V1B2 "%s/%s/%s", n->ns,
             set ? "machinesets" : "machines", n->name);
    snprintf(n->ipath, sizeof(n->ipath), "/apis/%s/namespaces/%s/%s/%s", iav, n->ns, res, n->iname);
    return true;
}

/* The checks on what was read; true when they pass (else msg). */
static bool judge(enum hv_hook h, const hj *req, const struct names *n, const struct entry *me,
                  const struct entry *ie, char *msg, size_t cap)
{
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const char *what = set ? "MachineSet" : "Machine";
    if (read_failed(me, what, n->ns, n->name, msg, cap))
        return false;
    const hj *m = me->obj;
    const char *uid = md_str(m, "uid");
    if (n->uid && (!uid || strcmp(uid, n->uid))) {
        snprintf(msg, cap,
                 HV_MSG("machine check: %s %s/%s in the API server has another uid than the "
                        "request's"),
                 what, n->ns, n->name);
        return false;
    }
    const hj *ref = set ? hj_ptr(m, "/spec/template/spec/infrastructureRef")
                        : hj_ptr(m, "/spec/infrastructureRef");
    const hj *rim = hj_get(hj_get(req, h == HV_HOOK_UPDATE_MACHINE ? "desired" : "current"),
                           set ? "infrastructureMachineTemplate" : "infrastructureMachine");
    if (!ref_names(ref, rim)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the infrastructureRef of %s %s/%s is not the request's "
                        "%s %s"),
                 what, n->ns, n->name, n->ikind, n->iname);
        return false;
    }
    if (h == HV_HOOK_UPDATE_MACHINE) {
        if (!machine_marked(m)) {
            snprintf(msg, cap,
                     HV_MSG("machine check: Machine %s/%s is not being updated in place by "
                            "Cluster API (no " HV_MC_IN_PROGRESS " annotation or no pending "
                            "UpdateMachine hook)"),
                     n->ns, n->name);
            return false;
        }
    }
    if (read_failed(ie, n->ikind, n->ns, n->iname, msg, cap))
        return false;
    if (h != HV_HOOK_UPDATE_MACHINE)
        return true;
    if (!infra_marked(ie->obj)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: %s %s/%s is not being updated in place by Cluster API "
                        "(no " HV_MC_IN_PROGRESS " annotation)"),
                 n->ikind, n->ns, n->iname);
        return false;
    }
    if (!hj_equal(hj_get(rim, "spec"), hj_get(ie->obj, "spec"))) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the request's desired spec of %s %s/%s is not the one "
                        "in the API server"),
                 n->ikind, n->ns, n->iname);
        return false;
    }
    return true;
}

/* req with desired.machine.spec and desired.infrastructureMachine.spec from the API server,
 * and the Machine's metadata.uid (CAPI sends none; the operation record keeps it). */
static hj *rewrite(const hj *req, const struct entry *me, const struct entry *ie)
{
    hj *r = hj_clone(req);
    hj *des = hj_get(r, "desired");
    hj *m = hj_get(des, "machine"), *im = hj_get(des, "infrastructureMachine");
    const hj *ms = hj_get(me->obj, "spec"), *is = hj_get(ie->obj, "spec");
    const char *uid = md_str(me->obj, "uid");
    hj *mmd = hj_get(m, "metadata");
    if (mmd && mmd->type == HJ_OBJECT && uid)
        hj_obj_set_take(mmd, "uid", hj_new_string(uid));
    if (m && m->type == HJ_OBJECT && ms)
        hj_obj_set_take(m, "spec", hj_clone(ms));
    if (im && im->type == HJ_OBJECT && is)
        hj_obj_set_take(im, "spec", hj_clone(is));
    return r;
}

enum hv_mc_verdict hv_mc_check(struct hv_mc *mc, enum hv_hook h, const hj *req, hj **req_out,
                               char *msg, size_t msglen)
{
    *req_out = NULL;
    if (h == HV_HOOK_DISCOVERY || h >= HV_HOOK_COUNT)
        return HV_MC_PASS;
    struct names n;
    if (!request_names(h, req, &n, msg, msglen)) {
        pthread_mutex_lock(&mc->mu);
        mc->fails++;
        pthread_mutex_unlock(&mc->mu);
        hv_metrics_machine_check(HV_MC_FAIL);
        return HV_MC_FAIL;
    }
    enum hv_mc_verdict v;
    int64_t now = now_ms(mc);
    pthread_mutex_lock(&mc->mu);
    struct entry *me = get_entry(mc, n.mpath, now);
    if (me)
        me->used = now; /* so that getting ie does not drop it for room */
    struct entry *ie = me ? get_entry(mc, n.ipath, now) : NULL;
    me = ie ? find(mc, n.mpath) : NULL; /* getting ie may have moved it */
    if (!me || !ie) {
        v = HV_MC_WAIT;
        snprintf(msg, msglen,
                 HV_MSG("machine check: too many objects being read from the API server; "
                        "retry"));
        goto out;
    }
    me->used = ie->used = now;
    bool ready = true;
    struct entry *both[2] = {me, ie};
    for (int k = 0; k < 2; k++) {
        if (!usable(mc, both[k], now)) {
            if (!both[k]->doubt || both[k]->read_at >= both[k]->doubt)
                both[k]->doubt = now; /* the read it gets now may refuse */
            want(mc, both[k]);
            ready = false;
        } else if (!both[k]->busy && now - both[k]->read_at >= refresh_after(mc)) {
            want(mc, both[k]); /* in use near its end: read again before it expires (once: not
                                * while that read runs) */
        }
    }
    if (!ready) {
        v = HV_MC_WAIT;
        snprintf(msg, msglen, HV_MSG("machine check: reading the %s from the API server; retry"),
                 h == HV_HOOK_CAN_UPDATE_MACHINE_SET ? "MachineSet" : "Machine");
        goto out;
    }
    if (judge(h, req, &n, me, ie, msg, msglen)) {
        me->doubt = ie->doubt = 0;
        v = HV_MC_PASS;
        if (h == HV_HOOK_UPDATE_MACHINE)
            *req_out = rewrite(req, me, ie);
        goto out;
    }
    bool trusted = true;
    for (int k = 0; k < 2; k++)
        trusted &= both[k]->doubt != 0 && both[k]->read_at >= both[k]->doubt;
    if (trusted) {
        me->doubt = ie->doubt = 0; /* the next failing call reads again */
        v = HV_MC_FAIL;
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        if (!both[k]->doubt || both[k]->read_at >= both[k]->doubt)
            both[k]->doubt = now;
        want(mc, both[k]);
    }
    v = HV_MC_WAIT;
    snprintf(msg, msglen, HV_MSG("machine check: reading the %s from the API server; retry"),
             h == HV_HOOK_CAN_UPDATE_MACHINE_SET ? "MachineSet" : "Machine");
out:
    if (v == HV_MC_PASS)
        mc->passes++;
    else if (v == HV_MC_WAIT)
        mc->waits++;
    else
        mc->fails++;
    pthread_mutex_unlock(&mc->mu);
    hv_metrics_machine_check((int)v);
    return v;
}

/* ---- a power cycle found in flight ---- */

/* One read now, on the calling thread; the status (-1: no answer, nor an object on 200). */
static int read_now(struct hv_mc *mc, const char *path, hj **out)
{
    char err[300] = "";
    hj *o = NULL;
    pthread_mutex_lock(&mc->mu);
    mc->reads++;
    pthread_mutex_unlock(&mc->mu);
    hv_metrics_machine_check_read();
    int st = mc->cfg.io.get(mc->cfg.io.ctx, path, &o, err, sizeof(err));
    if (st == 200 && (!o || o->type != HJ_OBJECT))
        st = -1;
    if (st != 200 && st != 404)
        hv_log(HV_LOG_WARN, "machine-check-read-error", "path", path, "detail",
               err[0] ? err : "unexpected HTTP status", (char *)NULL);
    if (st != 200) {
        hj_free(o);
        o = NULL;
    }
    *out = o;
    return st;
}

/* Why a read stops a resume (REFUSED: 404; UNKNOWN: anything else but 200), or OK. */
static enum hv_mc_resume resume_read_failed(int st, const char *what, const char *ns,
                                            const char *name, char *msg, size_t cap)
{
    if (st == 200)
        return HV_MC_RESUME_OK;
    if (st == 404) {
        snprintf(msg, cap,
                 HV_MSG("machine check: %s %s/%s does not exist in the API server; not carried "
                        "on"),
                 what, ns, name);
        return HV_MC_RESUME_REFUSED;
    }
    snprintf(msg, cap,
             HV_MSG("machine check: cannot read %s %s/%s from the API server; looked at again at "
                    "the next scan"),
             what, ns, name);
    return HV_MC_RESUME_UNKNOWN;
}

static enum hv_mc_resume resume_judge(struct hv_mc *mc, const struct hv_mc_resume_ask *a,
                                      hj **machine, hj **infra, char *msg, size_t cap)
{
    char group[256], res[128], path[PATH_MAX_];
    const char *iav = a->infra_api_version;
    if (!hv_kube_name_ok(a->ns) || !hv_kube_name_ok(a->name) || !a->uid || !a->uid[0] ||
        strlen(a->uid) > 64 || !api_group(iav, group, sizeof(group)) ||
        strspn(iav, "abcdefghijklmnopqrstuvwxyz0123456789.-/") != strlen(iav) ||
        !hv_mc_resource(a->infra_kind, res, sizeof(res)) || !hv_kube_name_ok(a->infra_name)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the record on the VM names no valid Machine and infra "
                        "machine; not carried on"));
        return HV_MC_RESUME_REFUSED;
    }
    snprintf(path, sizeof(path), CAPI_V1B2 "%s/machines/%s", a->ns, a->name);
    enum hv_mc_resume v =
        resume_read_failed(read_now(mc, path, machine), "Machine", a->ns, a->name, msg, cap);
    if (v != HV_MC_RESUME_OK)
        return v;
    const char *uid = md_str(*machine, "uid");
    if (!uid || strcmp(uid, a->uid)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: Machine %s/%s in the API server has another uid than the "
                        "record's; not carried on"),
                 a->ns, a->name);
        return HV_MC_RESUME_REFUSED;
    }
    if (!machine_marked(*machine)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: %s %s/%s is not being updated in place by Cluster API; "
                        "not carried on"),
                 "Machine", a->ns, a->name);
        return HV_MC_RESUME_REFUSED;
    }
    const hj *ref = hj_ptr(*machine, "/spec/infrastructureRef");
    const char *rg = hj_get_str(ref, "apiGroup"), *rk = hj_get_str(ref, "kind"),
               *rn = hj_get_str(ref, "name");
    if (!rg || !rk || !rn || strcmp(rg, group) || strcmp(rk, a->infra_kind) ||
        strcmp(rn, a->infra_name)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: the infrastructureRef of Machine %s/%s is not the "
                        "record's %s %s; not carried on"),
                 a->ns, a->name, a->infra_kind, a->infra_name);
        return HV_MC_RESUME_REFUSED;
    }
    snprintf(path, sizeof(path), "/apis/%s/namespaces/%s/%s/%s", iav, a->ns, res, a->infra_name);
    v = resume_read_failed(read_now(mc, path, infra), a->infra_kind, a->ns, a->infra_name, msg,
                           cap);
    if (v != HV_MC_RESUME_OK)
        return v;
    if (!infra_marked(*infra)) {
        snprintf(msg, cap,
                 HV_MSG("machine check: %s %s/%s is not being updated in place by Cluster API; "
                        "not carried on"),
                 a->infra_kind, a->ns, a->infra_name);
        return HV_MC_RESUME_REFUSED;
    }
    return HV_MC_RESUME_OK;
}

enum hv_mc_resume hv_mc_resume_read(struct hv_mc *mc, const struct hv_mc_resume_ask *a,
                                    hj **machine, hj **infra, char *msg, size_t msglen)
{
    *machine = *infra = NULL;
    enum hv_mc_resume v = resume_judge(mc, a, machine, infra, msg, msglen);
    if (v != HV_MC_RESUME_OK) {
        hj_free(*machine);
        hj_free(*infra);
        *machine = *infra = NULL;
    }
    return v;
}
