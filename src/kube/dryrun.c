/* dryrun.c: the dry-run claims of dryrun.h: a cache of verdicts per question, a worker
 * thread that asks the API server, and the pure judge of its answers. */
#include "dryrun.h"
#include "log.h"
#include "msg.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WHY_MAX 400

struct entry {
    char *key;
    /* the question, copied */
    bool machine_set;
    char ns[254], owner[254], api_version[254], kind[128], cur[254], des[254];
    char *patch;
    /* the answer */
    bool have;
    enum hv_dryrun_verdict v;
    char why[WHY_MAX];
    int64_t at_ms;   /* when the answer came */
    int64_t used_ms; /* last asked */
    bool queued, running;
    int waiters;
};

struct hv_dryrun {
    struct hv_dryrun_cfg cfg;
    char no_client[256];
    pthread_mutex_t mu;
    pthread_cond_t work; /* a dry run is queued, or stop */
    pthread_cond_t done; /* an answer came */
    pthread_t thread;
    bool started, stop;
    struct entry **e;
    size_t n;
};

/* ---- the API server through hv_kube ---- */

static int kio_list(void *ctx, const char *path, const char *cont, hj **out, char *err,
                    size_t errlen)
{
    return hv_kube_list(ctx, path, 100, cont, 0, out, err, errlen);
}

static int kio_dry_patch(void *ctx, const char *path, const char *patch, hj **status, char *err,
                         size_t errlen)
{
    return hv_kube_dry_run_merge_patch(ctx, path, patch, 0, status, err, errlen);
}

void hv_dryrun_kube_io(struct hv_kube *k, struct hv_dryrun_io *io)
{
    io->ctx = k;
    io->list = kio_list;
    io->dry_patch = kio_dry_patch;
}

/* ---- pure parts ---- */

void hv_dryrun_plural(const char *kind, char *out, size_t cap)
{
    size_t n = kind ? strlen(kind) : 0;
    out[0] = '\0';
    if (!n || n + 2 > cap)
        return;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)kind[i])) {
            out[0] = '\0';
            return;
        }
        out[i] = (char)tolower((unsigned char)kind[i]);
    }
    out[n] = 's';
    out[n + 1] = '\0';
}

/* The reason a Status gives, made fit for a hook's message: the object's name (another
 * machine would give another name) replaced by "*", control characters by spaces, runs of
 * spaces made one, at most 240 bytes (not cut inside a UTF-8 sequence). */
static void sanitise(const char *in, const char *name, char *out, size_t cap)
{
    size_t nl = name ? strlen(name) : 0, o = 0, lim = cap - 1 < 240 ? cap - 1 : 240;
    for (const char *s = in; *s && o < lim;) {
        if (nl && !strncmp(s, name, nl)) {
            out[o++] = '*';
            s += nl;
            continue;
        }
        unsigned char c = (unsigned char)*s++;
        if (c < 0x20 || c == 0x7f)
            c = ' ';
        if (c == ' ' && (o == 0 || out[o - 1] == ' '))
            continue;
        out[o++] = (char)c;
    }
    /* a UTF-8 sequence cut at the limit: drop what is left of it (a whole one stays) */
    size_t b = o; /* the first of the continuation bytes at the end */
    while (b && o - b < 4 && ((unsigned char)out[b - 1] & 0xC0) == 0x80)
        b--;
    unsigned char lead = b ? (unsigned char)out[b - 1] : 0;
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (b < o && need == 1) /* continuation bytes without a lead byte */
        o = b;
    else if (b && need > 1 && o - b + 1 < need)
        o = b - 1;
    while (o && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

enum hv_dryrun_verdict hv_dryrun_judge(int http, const hj *status, const char *resource,
                                       const char *name, char *why, size_t whylen)
{
    why[0] = '\0';
    if (http >= 200 && http <= 299)
        return HV_DRYRUN_ACCEPTED;
    if (http < 0) {
        snprintf(why, whylen, HV_MSG("no answer from the API server"));
        return HV_DRYRUN_ERROR;
    }
    const char *msg = hj_get_str(status, "message"), *reason = hj_get_str(status, "reason");
    if (!msg || !msg[0])
        msg = reason;
    /* An admission webhook's denial is answered with the code it chose, 403 included
     * (controller-runtime's admission.Denied); the API server's message then begins so
     * (k8s.io/apiserver webhook errors.ToStatusErr). A 403 without it is RBAC's. */
    bool webhook = msg && !strncmp(msg, "admission webhook ", 18);
    if (http == 401) {
        snprintf(why, whylen,
                 HV_MSG("the API server does not accept hvupdater's token (HTTP 401)"));
        return HV_DRYRUN_UNCHECKED;
    }
    if (http == 403 && !webhook) {
        snprintf(why, whylen, HV_MSG("hvupdater may not patch %s (HTTP 403)"), resource);
        return HV_DRYRUN_UNCHECKED;
    }
    if (http == 404) {
        snprintf(why, whylen, HV_MSG("no such %s to try it on (HTTP 404)"), resource);
        return HV_DRYRUN_UNCHECKED;
    }
    if (http == 400 || http == 403 || http == 422) {
        /* the message, else the reason, else none: a message of spaces and control characters
         * alone leaves nothing (fuzz_kube) */
        char s[260] = "";
        sanitise(msg ? msg : "", name, s, sizeof(s));
        if (!s[0] && reason && msg != reason)
            sanitise(reason, name, s, sizeof(s));
        if (!s[0])
            snprintf(s, sizeof(s), HV_MSG("no reason given"));
        snprintf(why, whylen, "%s", s);
        return HV_DRYRUN_REFUSED;
    }
    if (http == 409 || http == 429 || http >= 500) {
        snprintf(why, whylen, HV_MSG("the API server answered HTTP %d"), http);
        return HV_DRYRUN_ERROR;
    }
    snprintf(why, whylen, HV_MSG("the API server refused the dry run (HTTP %d)"), http);
    return HV_DRYRUN_UNCHECKED;
}

/* ---- the worker's question ---- */

static bool path_part_ok(const char *s)
{
    if (!s || !s[0])
        return false;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' || *s == '.' ||
              *s == '/'))
            return false;
    return true;
}

/* The name of the infra machine of the MachineSet's Machine that comes first by name, of
 * the kind kind: 0 found, 1 none, else the verdict (why set). */
static int pick_machine(struct hv_dryrun *d, const char *ns, const char *owner, const char *kind,
                        char *name, size_t cap, enum hv_dryrun_verdict *v, char *why, size_t whylen)
{
    char path[600], cont[1024] = "", err[300];
    char best_m[254] = "";
    name[0] = '\0';
    snprintf(path, sizeof(path), "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/machines", ns);
    for (int page = 0; page < HV_DRYRUN_LIST_PAGES; page++) {
        hj *list = NULL;
        int st =
            d->cfg.io.list(d->cfg.io.ctx, path, cont[0] ? cont : NULL, &list, err, sizeof(err));
        if (st != 200 || !list) {
            hj_free(list);
            if (st == 401 || st == 403) {
                snprintf(why, whylen, HV_MSG("hvupdater may not list Machines (HTTP %d)"), st);
                *v = HV_DRYRUN_UNCHECKED;
            } else {
                if (st < 0)
                    snprintf(why, whylen, HV_MSG("no answer from the API server"));
                else
                    snprintf(why, whylen, HV_MSG("the API server answered HTTP %d"), st);
                *v = HV_DRYRUN_ERROR;
            }
            return -1;
        }
        const hj *items = hj_get(list, "items");
        for (size_t i = 0; items && items->type == HJ_ARRAY && i < items->n; i++) {
            const hj *m = items->items[i], *md = hj_get(m, "metadata");
            const char *set = hj_get_str(hj_get(md, "labels"), "cluster.x-k8s.io/set-name");
            const char *mname = hj_get_str(md, "name");
            const hj *ref = hj_get(hj_get(m, "spec"), "infrastructureRef");
            const char *rk = hj_get_str(ref, "kind"), *rn = hj_get_str(ref, "name");
            /* the set's Machine: its label (CAPI hashes names over 63 characters there) or
             * its MachineSet owner reference */
            bool ours = set && !strcmp(set, owner);
            const hj *owners = hj_get(md, "ownerReferences");
            for (size_t o = 0; !ours && owners && owners->type == HJ_ARRAY && o < owners->n; o++) {
                const char *ok = hj_get_str(owners->items[o], "kind");
                const char *on = hj_get_str(owners->items[o], "name");
                ours = ok && on && !strcmp(ok, "MachineSet") && !strcmp(on, owner);
            }
            if (!ours || !mname || hj_get(md, "deletionTimestamp") || !rk || strcmp(rk, kind) ||
                !rn || !hv_kube_name_ok(rn))
                continue;
            if (!best_m[0] || strcmp(mname, best_m) < 0) {
                snprintf(best_m, sizeof(best_m), "%s", mname);
                snprintf(name, cap, "%s", rn);
            }
        }
        const char *next = hj_get_str(hj_get(list, "metadata"), "continue");
        snprintf(cont, sizeof(cont), "%s", next ? next : "");
        hj_free(list);
        if (!cont[0])
            break;
    }
    return name[0] ? 0 : 1;
}

static enum hv_dryrun_verdict run(struct hv_dryrun *d, const struct entry *q, char *why,
                                  size_t whylen)
{
    char kind[128], plural[140], name[254], path[1200], err[300];
    snprintf(kind, sizeof(kind), "%s", q->kind);
    if (q->machine_set) {
        size_t n = strlen(kind), t = strlen("Template");
        if (n <= t || strcmp(kind + n - t, "Template")) {
            snprintf(why, whylen, HV_MSG("the template kind %s does not end in Template"), q->kind);
            return HV_DRYRUN_UNCHECKED;
        }
        kind[n - t] = '\0';
    }
    hv_dryrun_plural(kind, plural, sizeof(plural));
    if (!plural[0] || !path_part_ok(q->api_version) || !strchr(q->api_version, '/') ||
        !hv_kube_name_ok(q->ns) || (q->machine_set && !hv_kube_name_ok(q->owner)) ||
        (!q->machine_set && !hv_kube_name_ok(q->cur))) {
        snprintf(why, whylen, HV_MSG("the request does not name an object to try it on"));
        return HV_DRYRUN_UNCHECKED;
    }
    if (q->machine_set) {
        enum hv_dryrun_verdict v = HV_DRYRUN_ERROR;
        int rc = pick_machine(d, q->ns, q->owner, kind, name, sizeof(name), &v, why, whylen);
        if (rc < 0)
            return v;
        if (rc > 0) {
            snprintf(why, whylen, HV_MSG("the MachineSet has no %s to try it on"), kind);
            return HV_DRYRUN_UNCHECKED;
        }
    } else {
        snprintf(name, sizeof(name), "%s", q->cur);
    }
    snprintf(path, sizeof(path), "/apis/%s/namespaces/%s/%s/%s", q->api_version, q->ns, plural,
             name);
    hj *status = NULL;
    int st = d->cfg.io.dry_patch(d->cfg.io.ctx, path, q->patch, &status, err, sizeof(err));
    enum hv_dryrun_verdict v = hv_dryrun_judge(st, status, plural, name, why, whylen);
    hj_free(status);
    hv_log(v == HV_DRYRUN_ACCEPTED ? HV_LOG_DEBUG : HV_LOG_INFO, "dry-run", "object", path,
           "verdict",
           v == HV_DRYRUN_ACCEPTED  ? "accepted"
           : v == HV_DRYRUN_REFUSED ? "refused"
           : v == HV_DRYRUN_ERROR   ? "error"
                                    : "unchecked",
           "detail", why, (char *)NULL);
    return v;
}

/* ---- the cache ---- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(const struct hv_dryrun *d)
{
    return d->cfg.now_ms ? d->cfg.now_ms(d->cfg.now_ctx) : mono_ms();
}

static void entry_free(struct entry *x)
{
    if (!x)
        return;
    free(x->key);
    free(x->patch);
    free(x);
}

/* Whether x's answer is still good (else it is asked again). */
static bool fresh(const struct hv_dryrun *d, const struct entry *x, int64_t now)
{
    if (!x->have || x->v == HV_DRYRUN_ERROR)
        return false;
    int ttl = x->v == HV_DRYRUN_UNCHECKED
                  ? (d->cfg.unchecked_ttl_s > 0 ? d->cfg.unchecked_ttl_s : HV_DRYRUN_UNCHECKED_S)
                  : (d->cfg.ttl_s > 0 ? d->cfg.ttl_s : HV_DRYRUN_TTL_S);
    return now - x->at_ms < (int64_t)ttl * 1000;
}

static struct entry *find(struct hv_dryrun *d, const char *key)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->e[i]->key, key))
            return d->e[i];
    return NULL;
}

/* A new entry under mu; NULL when the cache is full of entries in use. */
static struct entry *insert(struct hv_dryrun *d, const char *key, const struct hv_dryrun_req *r,
                            const char *patch)
{
    if (d->n == HV_DRYRUN_MAX) {
        size_t old = d->n;
        for (size_t i = 0; i < d->n; i++) {
            const struct entry *x = d->e[i];
            if (x->queued || x->running || x->waiters)
                continue;
            if (old == d->n || x->used_ms < d->e[old]->used_ms)
                old = i;
        }
        if (old == d->n)
            return NULL;
        entry_free(d->e[old]);
        d->e[old] = d->e[--d->n];
    }
    if (!d->e) {
        d->e = calloc(HV_DRYRUN_MAX, sizeof(*d->e));
        if (!d->e)
            abort();
    }
    struct entry *x = calloc(1, sizeof(*x));
    if (!x || !(x->key = strdup(key)) || !(x->patch = strdup(patch)))
        abort();
    x->machine_set = r->machine_set;
    snprintf(x->ns, sizeof(x->ns), "%s", r->ns ? r->ns : "");
    snprintf(x->owner, sizeof(x->owner), "%s", r->owner ? r->owner : "");
    snprintf(x->api_version, sizeof(x->api_version), "%s", r->api_version ? r->api_version : "");
    snprintf(x->kind, sizeof(x->kind), "%s", r->kind ? r->kind : "");
    snprintf(x->cur, sizeof(x->cur), "%s", r->cur_name ? r->cur_name : "");
    snprintf(x->des, sizeof(x->des), "%s", r->des_name ? r->des_name : "");
    d->e[d->n++] = x;
    return x;
}

/* Take a queued entry and run it (mu held on entry and return). */
static bool run_one(struct hv_dryrun *d)
{
    struct entry *x = NULL;
    for (size_t i = 0; i < d->n && !x; i++)
        if (d->e[i]->queued)
            x = d->e[i];
    if (!x)
        return false;
    x->queued = false;
    x->running = true;
    x->waiters++; /* not evicted while its question runs */
    pthread_mutex_unlock(&d->mu);
    char why[WHY_MAX];
    enum hv_dryrun_verdict v = run(d, x, why, sizeof(why));
    pthread_mutex_lock(&d->mu);
    x->waiters--;
    x->running = false;
    x->have = true;
    x->v = v;
    snprintf(x->why, sizeof(x->why), "%s", why);
    x->at_ms = now_ms(d);
    pthread_cond_broadcast(&d->done);
    return true;
}

static void *worker(void *arg)
{
    struct hv_dryrun *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        if (!run_one(d))
            pthread_cond_wait(&d->work, &d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

struct hv_dryrun *hv_dryrun_new(const struct hv_dryrun_cfg *cfg)
{
    struct hv_dryrun *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->cfg = *cfg;
    if (cfg->no_client) {
        snprintf(d->no_client, sizeof(d->no_client), "%s", cfg->no_client);
        d->cfg.no_client = d->no_client;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->done, &ca);
    pthread_condattr_destroy(&ca);
    if (!cfg->drive && !cfg->no_client) {
        if (pthread_create(&d->thread, NULL, worker, d) != 0) {
            hv_dryrun_free(d);
            return NULL;
        }
        d->started = true;
    }
    return d;
}

void hv_dryrun_free(struct hv_dryrun *d)
{
    if (!d)
        return;
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    for (size_t i = 0; i < d->n; i++)
        entry_free(d->e[i]);
    free(d->e);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->done);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

int hv_dryrun_pass(struct hv_dryrun *d)
{
    int n = 0;
    pthread_mutex_lock(&d->mu);
    while (run_one(d))
        n++;
    pthread_mutex_unlock(&d->mu);
    return n;
}

size_t hv_dryrun_cached(struct hv_dryrun *d)
{
    pthread_mutex_lock(&d->mu);
    size_t n = d->n;
    pthread_mutex_unlock(&d->mu);
    return n;
}

static void wait_until(struct hv_dryrun *d, int64_t limit_mono_ms)
{
    struct timespec ts = {.tv_sec = limit_mono_ms / 1000,
                          .tv_nsec = (long)(limit_mono_ms % 1000) * 1000000};
    pthread_cond_timedwait(&d->done, &d->mu, &ts);
}

enum hv_dryrun_verdict hv_dryrun_ask(struct hv_dryrun *d, const struct hv_dryrun_req *r, char *why,
                                     size_t whylen)
{
    why[0] = '\0';
    if (d->cfg.no_client) {
        snprintf(why, whylen, HV_MSG("no Kubernetes client: %s"), d->cfg.no_client);
        return HV_DRYRUN_UNCHECKED;
    }
    char *patch = hj_dump(r->patch, NULL);
    if (!patch) {
        snprintf(why, whylen, HV_MSG("out of memory"));
        return HV_DRYRUN_ERROR;
    }
    size_t klen = strlen(patch) + 1400;
    char *key = malloc(klen);
    if (!key)
        abort();
    snprintf(key, klen, "%c|%s|%s|%s|%s|%s|%s|%s", r->machine_set ? 'S' : 'M', r->ns ? r->ns : "",
             r->owner && r->machine_set ? r->owner : "", r->api_version ? r->api_version : "",
             r->kind ? r->kind : "", r->cur_name ? r->cur_name : "", r->des_name ? r->des_name : "",
             patch);
    enum hv_dryrun_verdict v = HV_DRYRUN_PENDING;
    pthread_mutex_lock(&d->mu);
    int64_t now = now_ms(d);
    struct entry *x = find(d, key);
    if (!x)
        x = insert(d, key, r, patch);
    free(key);
    free(patch);
    if (!x) { /* every entry in use: ask again later */
        pthread_mutex_unlock(&d->mu);
        return HV_DRYRUN_PENDING;
    }
    x->used_ms = now;
    if (!fresh(d, x, now) && !x->queued && !x->running) {
        x->queued = true;
        pthread_cond_signal(&d->work);
        /* the first answer is waited for a little (a later one is the cached answer's
         * refresh: the old answer stands meanwhile, except an ERROR, which is waited for) */
        if (!d->cfg.drive && d->cfg.wait_ms > 0 && (!x->have || x->v == HV_DRYRUN_ERROR)) {
            int64_t limit = mono_ms() + d->cfg.wait_ms;
            int64_t seen = x->at_ms;
            bool had = x->have;
            x->waiters++;
            while ((x->queued || x->running || (had && x->at_ms == seen)) && mono_ms() < limit)
                wait_until(d, limit);
            x->waiters--;
        }
    }
    if (x->have) {
        v = x->v;
        snprintf(why, whylen, "%s", x->why);
    }
    pthread_mutex_unlock(&d->mu);
    return v;
}
