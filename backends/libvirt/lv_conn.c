/* lv_conn.c: the fleet of libvirt hosts: connections per URI, opened lazily, shared by all
 * threads (one, and up to LV_LANES while that many callers need them), reopened when they
 * die; domain lookup by UUID or name with a key -> host cache.
 * Owns lv_backend.hosts (URIs, connections) and the cache; a struct lv_dom holds its own
 * connection reference and domain handle until lv_dom_release. Also runs the one event loop
 * thread libvirt needs for keepalive (remote URIs) and for domain events: every connection
 * listens to the domain events that may end a wait of the engine and reports them to the
 * backend's watcher (ops->watch).
 * Connections open on detached threads (struct lv_opener, reference-counted between the host,
 * the thread and waiting callers): a caller waits a bounded time and never holds a lock while
 * libvirt connects; an attempt stuck forever keeps only its own thread and opener.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libvirt/virterror.h>

#include "hv_clock.h"
#include "lv_internal.h"

#define LV_CACHE_MAX 4096

/* ---- the shared event loop (keepalive needs one running) ---- */

static pthread_mutex_t lv_ev_mu = PTHREAD_MUTEX_INITIALIZER;
static int lv_ev_users;
static bool lv_ev_registered;
static pthread_t lv_ev_thread;
static atomic_bool lv_ev_quit;

static void *lv_ev_run(void *arg)
{
    (void)arg;
    while (!atomic_load(&lv_ev_quit)) {
        if (virEventRunDefaultImpl() < 0)
            break;
    }
    return NULL;
}

static void lv_ev_wake(int timer, void *opaque)
{
    (void)opaque;
    virEventRemoveTimeout(timer);
}

static int lv_evloop_acquire(char *err, size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&lv_ev_mu);
    if (!lv_ev_registered) {
        if (virEventRegisterDefaultImpl() < 0) {
            struct lv_lasterr e;
            lv_error_capture(&e);
            snprintf(err, errlen, "libvirt event loop: %s", e.msg);
            rc = -1;
            goto out;
        }
        lv_ev_registered = true;
    }
    if (lv_ev_users == 0) {
        atomic_store(&lv_ev_quit, false);
        if (pthread_create(&lv_ev_thread, NULL, lv_ev_run, NULL) != 0) {
            snprintf(err, errlen, "libvirt event loop: cannot start its thread");
            rc = -1;
            goto out;
        }
    }
    lv_ev_users++;
out:
    pthread_mutex_unlock(&lv_ev_mu);
    return rc;
}

static void lv_evloop_release(void)
{
    pthread_mutex_lock(&lv_ev_mu);
    if (lv_ev_users > 0 && --lv_ev_users == 0) {
        atomic_store(&lv_ev_quit, true);
        /* a timer that fires at once wakes the loop from poll(); it removes itself */
        virEventAddTimeout(0, lv_ev_wake, NULL, NULL);
        pthread_join(lv_ev_thread, NULL);
    }
    pthread_mutex_unlock(&lv_ev_mu);
}

/* ---- domain events: hints for the engine that a VM changed ---- */

void lv_watch(struct hv_backend *b, hv_vm_changed_fn fn, void *ctx)
{
    struct lv_backend *be = b->priv;
    pthread_mutex_lock(&be->watch_mu);
    if (fn) {
        be->watch_fn = fn;
        be->watch_ctx = ctx;
    } else if (be->watch_ctx == ctx) {
        be->watch_fn = NULL;
        be->watch_ctx = NULL;
    }
    pthread_mutex_unlock(&be->watch_mu);
}

/* A host's event callbacks point here, not at the host: libvirt may still be running one when
 * the backend is freed (it drops a callback only once its dispatch ends), so the sink is
 * reference-counted (the host's, one per registered callback: freed by libvirt's free
 * function) and forgets the backend when the backend goes. */
struct lv_ev_sink {
    pthread_mutex_t mu;
    int refs;
    struct lv_backend *be; /* NULL once the backend is freed */
    char uri[HV_NAME_MAX];
};

static struct lv_ev_sink *lv_sink_new(struct lv_backend *be, const char *uri)
{
    struct lv_ev_sink *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    pthread_mutex_init(&k->mu, NULL);
    k->refs = 1;
    k->be = be;
    snprintf(k->uri, sizeof(k->uri), "%s", uri);
    return k;
}

static void lv_sink_unref(void *opaque)
{
    struct lv_ev_sink *k = opaque;
    pthread_mutex_lock(&k->mu);
    bool last = --k->refs == 0;
    pthread_mutex_unlock(&k->mu);
    if (last) {
        pthread_mutex_destroy(&k->mu);
        free(k);
    }
}

/* On the event loop thread: tell the watcher. Only local calls on dom (no RPC). */
static void lv_ev_report(void *opaque, virDomainPtr dom)
{
    struct lv_ev_sink *k = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0) {
        uuid[0] = '\0';
        virResetLastError();
    }
    const char *name = virDomainGetName(dom);
    pthread_mutex_lock(&k->mu);
    struct lv_backend *be = k->be;
    if (be) {
        pthread_mutex_lock(&be->watch_mu);
        if (be->watch_fn)
            be->watch_fn(be->watch_ctx, &be->pub, k->uri, uuid, name ? name : "");
        pthread_mutex_unlock(&be->watch_mu);
    }
    pthread_mutex_unlock(&k->mu);
}

static void lv_ev_lifecycle(virConnectPtr c, virDomainPtr dom, int event, int detail, void *op)
{
    (void)c, (void)event, (void)detail;
    lv_ev_report(op, dom);
}

static void lv_ev_device(virConnectPtr c, virDomainPtr dom, const char *alias, void *op)
{
    (void)c, (void)alias;
    lv_ev_report(op, dom);
}

static void lv_ev_balloon(virConnectPtr c, virDomainPtr dom, unsigned long long actual, void *op)
{
    (void)c, (void)actual;
    lv_ev_report(op, dom);
}

static void lv_ev_memdev(virConnectPtr c, virDomainPtr dom, const char *alias,
                         unsigned long long size, void *op)
{
    (void)c, (void)alias, (void)size;
    lv_ev_report(op, dom);
}

static void lv_ev_agent(virConnectPtr c, virDomainPtr dom, int state, int reason, void *op)
{
    (void)c, (void)state, (void)reason;
    lv_ev_report(op, dom);
}

static void lv_ev_block(virConnectPtr c, virDomainPtr dom, const char *target,
                        unsigned long long threshold, unsigned long long excess, void *op)
{
    (void)c, (void)target, (void)threshold, (void)excess;
    lv_ev_report(op, dom);
}

/* Listen to h's new connection (h->mu held). A driver without events (or no event loop)
 * refuses: the engine then learns only by observing. */
static void lv_host_listen(struct lv_host *h)
{
    static const struct {
        int id;
        virConnectDomainEventGenericCallback cb;
    } kinds[LV_EV_IDS] = {
        {VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_lifecycle)},
        {VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_device)},
        {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_device)},
        {VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_balloon)},
        {VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_memdev)},
        {VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_agent)},
        {VIR_DOMAIN_EVENT_ID_BLOCK_THRESHOLD, VIR_DOMAIN_EVENT_CALLBACK(lv_ev_block)},
    };
    h->n_ev = 0;
    if (!h->sink)
        return;
    for (int k = 0; k < LV_EV_IDS; k++) {
        pthread_mutex_lock(&h->sink->mu);
        h->sink->refs++; /* the callback's, dropped by libvirt through lv_sink_unref */
        pthread_mutex_unlock(&h->sink->mu);
        int id = virConnectDomainEventRegisterAny(h->lane[0].conn, NULL, kinds[k].id, kinds[k].cb,
                                                  h->sink, lv_sink_unref);
        if (id < 0) {
            virResetLastError();
            lv_sink_unref(h->sink); /* not registered: libvirt did not keep it */
        } else {
            h->ev_ids[h->n_ev++] = id;
        }
    }
}

/* Close h's lane k (h->mu held); its users keep their own references. */
static void lv_lane_close(struct lv_host *h, int k)
{
    if (h->lane[k].conn)
        virConnectClose(h->lane[k].conn);
    h->lane[k].conn = NULL;
    h->lane[k].users = 0;
}

/* Stop listening on lane[0] and close every lane (h->mu held): lane[0] dies with the daemon,
 * and so do the others. The callbacks hold references on the connection: deregistered first,
 * or it would never be freed. On a dead connection the deregistration is local and cannot
 * fail in a way that matters. */
static void lv_host_close(struct lv_host *h)
{
    for (int k = 0; k < h->n_ev; k++)
        if (virConnectDomainEventDeregisterAny(h->lane[0].conn, h->ev_ids[k]) < 0)
            virResetLastError();
    h->n_ev = 0;
    for (int k = 0; k < LV_LANES; k++)
        lv_lane_close(h, k);
}

/* ---- hosts ---- */

static void lv_opener_unref(struct lv_opener *op);

bool lv_uri_is_remote(const char *uri)
{
    const char *sep = strstr(uri, "://");
    if (!sep)
        return false;
    if (memchr(uri, '+', (size_t)(sep - uri)))
        return true; /* qemu+ssh, qemu+tcp, qemu+tls, qemu+unix, ... */
    const char *host = sep + 3;
    return *host != '\0' && *host != '/'; /* qemu://host/system */
}

int lv_fleet_init(struct lv_backend *be, const struct hv_libvirt_opts *o, char *err, size_t errlen)
{
    pthread_mutex_init(&be->cache_mu, NULL);
    pthread_mutex_init(&be->watch_mu, NULL);
    be->hosts = calloc(o->n_uris, sizeof(*be->hosts));
    if (!be->hosts) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < o->n_uris; i++) {
        struct lv_host *h = &be->hosts[i];
        pthread_mutex_init(&h->mu, NULL);
        be->n_hosts = i + 1;
        h->uri = strdup(o->uris[i]);
        h->sink = h->uri ? lv_sink_new(be, h->uri) : NULL;
        if (!h->uri || !h->sink) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        h->remote = lv_uri_is_remote(h->uri);
    }
    /* keepalive (remote URIs) and domain events (every URI) need the loop running */
    if (lv_evloop_acquire(err, errlen) < 0)
        return -1;
    be->evloop = true;
    return 0;
}

void lv_fleet_free(struct lv_backend *be)
{
    for (size_t i = 0; i < be->n_hosts; i++) {
        struct lv_host *h = &be->hosts[i];
        if (h->lane[0].conn)
            lv_host_close(h);
        if (h->sink) {
            pthread_mutex_lock(&h->sink->mu); /* waits for a report in progress */
            h->sink->be = NULL;
            pthread_mutex_unlock(&h->sink->mu);
            lv_sink_unref(h->sink);
            h->sink = NULL;
        }
        for (int k = 0; k < h->n_opening; k++)
            lv_opener_unref(h->opening[k]); /* a stuck thread frees its attempt when it ends */
        h->n_opening = 0;
        pthread_mutex_destroy(&h->mu);
        free(h->uri);
    }
    free(be->hosts);
    be->hosts = NULL;
    be->n_hosts = 0;
    if (be->evloop) {
        lv_evloop_release();
        be->evloop = false;
    }
    pthread_mutex_destroy(&be->cache_mu);
    pthread_mutex_destroy(&be->watch_mu);
    free(be->cache);
    be->cache = NULL;
}

/* ---- opening connections: on a thread of their own, waited for with a bound ---- */

#define LV_REOPEN_MS 30000 /* a stuck attempt is joined by a new one after this long */

struct lv_opener {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the host's, the thread's, and each waiting caller's */
    bool done;
    char *uri;             /* owned */
    virConnectPtr conn;    /* the result when done (NULL on failure), until taken */
    struct lv_lasterr err; /* the failure when done without conn */
    long long started_ms;  /* CLOCK_MONOTONIC */
};

static void lv_opener_unref(struct lv_opener *op)
{
    pthread_mutex_lock(&op->mu);
    bool last = --op->refs == 0;
    pthread_mutex_unlock(&op->mu);
    if (!last)
        return;
    if (op->conn)
        virConnectClose(op->conn); /* a late connection nobody took */
    pthread_mutex_destroy(&op->mu);
    pthread_cond_destroy(&op->cv);
    free(op->uri);
    free(op);
}

static void *lv_opener_run(void *arg)
{
    struct lv_opener *op = arg;
    virConnectPtr c = virConnectOpen(op->uri);
    struct lv_lasterr e;
    memset(&e, 0, sizeof(e));
    if (!c)
        lv_error_capture(&e);
    pthread_mutex_lock(&op->mu);
    op->conn = c;
    op->err = e;
    op->done = true;
    pthread_cond_broadcast(&op->cv);
    pthread_mutex_unlock(&op->mu);
    lv_opener_unref(op);
    return NULL;
}

/* Start an attempt for h (h->mu held); NULL when no thread could be started. */
static struct lv_opener *lv_opener_start(struct lv_host *h)
{
    h->tried = true;
    struct lv_opener *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->uri = strdup(h->uri);
    if (!op->uri) {
        free(op);
        return NULL;
    }
    pthread_mutex_init(&op->mu, NULL);
    pthread_cond_init(&op->cv, NULL);
    op->refs = 2; /* the host's and the thread's */
    op->started_ms = hv_mono_ms();
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, lv_opener_run, op);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        op->refs = 1;
        lv_opener_unref(op);
        return NULL;
    }
    h->opening[h->n_opening++] = op;
    return op;
}

/* The lane a finished attempt's connection goes to (h->mu held): lane[0] when closed, else a
 * closed one of the others; -1 when every lane is open. */
static int lv_lane_free(const struct lv_host *h)
{
    for (int k = 0; k < LV_LANES; k++)
        if (!h->lane[k].conn)
            return k;
    return -1;
}

/* Take what finished attempts of h brought (h->mu held): a connection goes to the first closed
 * lane (lane[0] first, which then listens to events), or is closed when all are open; finished
 * attempts are forgotten. */
static void lv_host_reap(struct lv_backend *be, struct lv_host *h)
{
    int keep = 0;
    for (int i = 0; i < h->n_opening; i++) {
        struct lv_opener *op = h->opening[i];
        pthread_mutex_lock(&op->mu);
        bool done = op->done;
        virConnectPtr c = done ? op->conn : NULL;
        if (done)
            op->conn = NULL;
        pthread_mutex_unlock(&op->mu);
        if (!done) {
            h->opening[keep++] = op;
            continue;
        }
        int k = c ? lv_lane_free(h) : -1;
        if (k >= 0) {
            if (h->remote) {
                /* -1 without an event loop, 1 when the server cannot: both leave us working */
                int interval = be->ka_interval > 0 ? be->ka_interval : 5;
                int count = be->ka_count > 0 ? be->ka_count : 3;
                (void)virConnectSetKeepAlive(c, interval, (unsigned)count);
            }
            h->lane[k].conn = c;
            h->lane[k].users = 0;
            if (k == 0)
                lv_host_listen(h);
        } else if (c) {
            virConnectClose(c);
        }
        lv_opener_unref(op);
    }
    h->n_opening = keep;
}

/* A new reference on the open lane of h with the fewest users, counted as one more of them
 * (h->mu held; lane[0] open). A lane whose connection died is closed first. When every open
 * lane carries LV_LANE_USERS users, another connection starts opening for the callers after
 * this one (nobody waits for it: this caller shares the least busy lane). */
static virConnectPtr lv_lane_take(struct lv_host *h)
{
    int best = 0, open = 1;
    for (int k = 1; k < LV_LANES; k++) {
        if (h->lane[k].conn && virConnectIsAlive(h->lane[k].conn) != 1)
            lv_lane_close(h, k);
        if (!h->lane[k].conn)
            continue;
        open++;
        if (h->lane[k].users < h->lane[best].users)
            best = k;
    }
    if (h->lane[best].users >= LV_LANE_USERS && open < LV_LANES && h->n_opening == 0)
        (void)lv_opener_start(h); /* NULL (no thread): this lane carries on */
    h->lane[best].users++;
    virConnectRef(h->lane[best].conn);
    return h->lane[best].conn;
}

/* Give back a reference lv_host_get handed out: one user less on its lane (when the lane still
 * holds that connection), and the reference dropped. */
static void lv_host_put(struct lv_host *h, virConnectPtr conn)
{
    if (!conn)
        return;
    pthread_mutex_lock(&h->mu);
    for (int k = 0; k < LV_LANES; k++) {
        if (h->lane[k].conn == conn) {
            if (h->lane[k].users > 0)
                h->lane[k].users--;
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    virConnectClose(conn);
}

/* A new reference on a connection to h (lv_lane_take), opening h's first when needed; NULL
 * with err set; give it back with lv_host_put. The open runs on its own thread: this waits for
 * it at most be->connect_timeout_ms and holds no lock meanwhile, so a host that never answers
 * delays only calls that need that host, once. */
static virConnectPtr lv_host_get(struct lv_backend *be, struct lv_host *h, struct hv_err *err)
{
    pthread_mutex_lock(&h->mu);
    lv_host_reap(be, h);
    if (h->lane[0].conn && virConnectIsAlive(h->lane[0].conn) != 1)
        lv_host_close(h);
    struct lv_opener *op = NULL;
    if (!h->lane[0].conn) {
        long long now = hv_mono_ms();
        struct lv_opener *last = h->n_opening ? h->opening[h->n_opening - 1] : NULL;
        if (last && now < last->started_ms + be->connect_timeout_ms)
            op = last; /* an attempt still within its bound: wait for it */
        else if (!last || (now >= last->started_ms + LV_REOPEN_MS && h->n_opening < LV_MAX_OPENERS))
            op = lv_opener_start(h);
        if (op) {
            pthread_mutex_lock(&op->mu);
            op->refs++;
            pthread_mutex_unlock(&op->mu);
        }
    }
    pthread_mutex_unlock(&h->mu);

    if (op) {
        long long until = op->started_ms + be->connect_timeout_ms;
        pthread_mutex_lock(&op->mu);
        while (!op->done && until > hv_mono_ms())
            hv_cond_wait_until(&op->cv, &op->mu, until);
        pthread_mutex_unlock(&op->mu);
        pthread_mutex_lock(&h->mu);
        lv_host_reap(be, h);
    } else {
        pthread_mutex_lock(&h->mu);
    }
    virConnectPtr ret = h->lane[0].conn ? lv_lane_take(h) : NULL;
    pthread_mutex_unlock(&h->mu);
    if (ret) {
        if (op)
            lv_opener_unref(op);
        return ret;
    }
    bool failed = false;
    struct lv_lasterr e;
    if (op) {
        pthread_mutex_lock(&op->mu);
        failed = op->done;
        e = op->err;
        pthread_mutex_unlock(&op->mu);
        lv_opener_unref(op);
    }
    if (failed) {
        lv_seterr_virt(err, &e, h->uri);
        if (err->code != HV_E_AUTH)
            err->code = HV_E_UNREACHABLE;
    } else {
        lv_seterr(err, HV_E_UNREACHABLE, "%s: connecting did not finish within %d ms", h->uri,
                  be->connect_timeout_ms);
    }
    return NULL;
}

/* Forget the connection `used` died on if a lane still holds it (another thread may have
 * replaced it): lane[0] takes every lane with it (lv_host_close), another lane only itself. */
static void lv_host_reset(struct lv_host *h, virConnectPtr used)
{
    pthread_mutex_lock(&h->mu);
    if (used && h->lane[0].conn == used) {
        lv_host_close(h);
    } else {
        for (int k = 1; used && k < LV_LANES; k++)
            if (h->lane[k].conn == used)
                lv_lane_close(h, k);
    }
    pthread_mutex_unlock(&h->mu);
}

bool lv_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    struct lv_backend *be = b->priv;
    if (!ref || ref->server[0] == '\0')
        return be->n_hosts > 0;
    for (size_t i = 0; i < be->n_hosts; i++) {
        if (strcmp(be->hosts[i].uri, ref->server) == 0)
            return true;
    }
    return false;
}

/* ---- cache: key -> host index; an answer stays until it stops being true ---- */

static long lv_cache_get(struct lv_backend *be, const char *key)
{
    long ret = -1;
    pthread_mutex_lock(&be->cache_mu);
    for (size_t i = 0; i < be->n_cache; i++) {
        if (strcmp(be->cache[i].key, key) == 0) {
            ret = (long)be->cache[i].host;
            break;
        }
    }
    pthread_mutex_unlock(&be->cache_mu);
    return ret;
}

static void lv_cache_del_locked(struct lv_backend *be, const char *key)
{
    for (size_t i = 0; i < be->n_cache; i++) {
        if (strcmp(be->cache[i].key, key) == 0) {
            memmove(&be->cache[i], &be->cache[i + 1], (be->n_cache - i - 1) * sizeof(be->cache[0]));
            be->n_cache--;
            return;
        }
    }
}

static void lv_cache_del(struct lv_backend *be, const char *key)
{
    pthread_mutex_lock(&be->cache_mu);
    lv_cache_del_locked(be, key);
    pthread_mutex_unlock(&be->cache_mu);
}

static void lv_cache_put(struct lv_backend *be, const char *key, size_t host)
{
    pthread_mutex_lock(&be->cache_mu);
    lv_cache_del_locked(be, key);
    if (be->n_cache == LV_CACHE_MAX) {
        memmove(&be->cache[0], &be->cache[1], (be->n_cache - 1) * sizeof(be->cache[0]));
        be->n_cache--;
    }
    if (!be->cache) {
        be->cache = calloc(LV_CACHE_MAX, sizeof(*be->cache));
        if (!be->cache) {
            pthread_mutex_unlock(&be->cache_mu);
            return; /* no cache: every find searches the fleet */
        }
    }
    snprintf(be->cache[be->n_cache].key, sizeof(be->cache[0].key), "%s", key);
    be->cache[be->n_cache].host = host;
    be->n_cache++;
    pthread_mutex_unlock(&be->cache_mu);
}

/* ---- lookup ---- */

static bool lv_uuid_plausible(const char *u)
{
    int hex = 0;
    for (const char *p = u; *p; p++) {
        if (isxdigit((unsigned char)*p))
            hex++;
        else if (*p != '-')
            return false;
    }
    return hex == 32;
}

/* 1 found (d filled), 0 missing on h, -1 error (err set). */
static int lv_lookup_on(struct lv_backend *be, struct lv_host *h, const struct hv_vm_ref *ref,
                        struct lv_dom *d, struct hv_err *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        virConnectPtr conn = lv_host_get(be, h, err);
        if (!conn)
            return -1;
        virDomainPtr dom = ref->uuid[0] ? virDomainLookupByUUIDString(conn, ref->uuid)
                                        : virDomainLookupByName(conn, ref->name);
        if (dom) {
            d->host = h;
            d->conn = conn;
            d->dom = dom;
            return 1;
        }
        struct lv_lasterr e;
        lv_error_capture(&e);
        if (e.code == VIR_ERR_NO_DOMAIN) {
            lv_host_put(h, conn);
            return 0;
        }
        bool dead = lv_error_is_dead_conn(&e) || virConnectIsAlive(conn) == 0;
        if (dead)
            lv_host_reset(h, conn);
        lv_host_put(h, conn);
        if (dead && attempt == 0)
            continue; /* libvirtd restarted under us: reopen once */
        char what[HV_NAME_MAX + 32];
        snprintf(what, sizeof(what), "lookup on %s", h->uri);
        lv_seterr_virt(err, &e, what);
        if (dead)
            err->code = HV_E_UNREACHABLE;
        return -1;
    }
    return -1;
}

/* Is a domain of this name also on host j? Asked only over a connection the host has open
 * now, or that it has never tried to open (the first search of a name asks every host):
 * a host that cannot be reached is not waited for again, so a dead host never stalls the
 * others. */
static bool lv_name_also_on(struct lv_backend *be, struct lv_host *h, const char *name)
{
    pthread_mutex_lock(&h->mu);
    bool open = h->lane[0].conn && virConnectIsAlive(h->lane[0].conn) == 1;
    bool untried = !h->lane[0].conn && !h->n_opening && !h->tried;
    pthread_mutex_unlock(&h->mu);
    if (!open && !untried)
        return false;
    struct hv_err herr = {HV_OK, ""};
    virConnectPtr conn = lv_host_get(be, h, &herr);
    if (!conn)
        return false;
    virDomainPtr dom = virDomainLookupByName(conn, name);
    if (dom)
        virDomainFree(dom);
    else
        virResetLastError();
    lv_host_put(h, conn);
    return dom != NULL;
}

/* d was found by name on one host: when the name is on other hosts too, release d and fail
 * naming them all (reconfiguring or power-cycling a same-named domain of another host would
 * be a disaster). searched[j]: host j was already asked in this search. */
static int lv_check_unique(struct lv_backend *be, const struct hv_vm_ref *ref, struct lv_dom *d,
                           const bool *searched, struct hv_err *err)
{
    size_t at = (size_t)(d->host - be->hosts);
    char hosts[sizeof(err->detail)];
    int n = snprintf(hosts, sizeof(hosts), "%s", d->host->uri);
    bool ambiguous = false;
    for (size_t j = 0; j < be->n_hosts; j++) {
        if (j == at || searched[j] || !lv_name_also_on(be, &be->hosts[j], ref->name))
            continue;
        ambiguous = true;
        if (n >= 0 && (size_t)n < sizeof(hosts))
            n += snprintf(hosts + n, sizeof(hosts) - (size_t)n, ", %s", be->hosts[j].uri);
    }
    if (!ambiguous)
        return HV_OK;
    lv_dom_release(d);
    memset(d, 0, sizeof(*d));
    d->be = be;
    return lv_seterr(err, HV_E_AMBIGUOUS, "%s", hosts);
}

int lv_find(struct lv_backend *be, const struct hv_vm_ref *ref, struct lv_dom *d,
            struct hv_err *err)
{
    memset(d, 0, sizeof(*d));
    d->be = be;
    char key[sizeof(be->cache[0].key)];
    if (ref->uuid[0]) {
        if (!lv_uuid_plausible(ref->uuid))
            return HV_OK; /* no domain can have it */
        size_t i = 0;
        for (; ref->uuid[i] && i + 1 < sizeof(key); i++)
            key[i] = (char)tolower((unsigned char)ref->uuid[i]);
        key[i] = '\0';
    } else if (ref->name[0]) {
        snprintf(key, sizeof(key), "name:%s", ref->name);
    } else {
        return lv_seterr(err, HV_E_NOT_FOUND, "vm ref has neither uuid nor name");
    }

    long only = -1;
    if (ref->server[0]) {
        for (size_t i = 0; i < be->n_hosts; i++) {
            if (strcmp(be->hosts[i].uri, ref->server) == 0)
                only = (long)i;
        }
        if (only < 0)
            return lv_seterr(err, HV_E_UNREACHABLE, "server %s is not a configured libvirt URI",
                             ref->server);
    }
    long cached = lv_cache_get(be, key);
    if (only >= 0 && cached != only)
        cached = -1;

    /* by name alone on a fleet: the name must be on one host only */
    bool by_name = !ref->uuid[0] && only < 0 && be->n_hosts > 1;
    bool *searched = by_name ? calloc(be->n_hosts, sizeof(*searched)) : NULL;
    if (by_name && !searched)
        return lv_seterr(err, HV_E_INTERNAL, "out of memory");
    struct hv_err first = {HV_OK, ""};
    for (long n = -1; n < (long)be->n_hosts; n++) {
        long i = n < 0 ? cached : n; /* the cached host first, then the fleet in order */
        if (i < 0 || (n >= 0 && i == cached) || (only >= 0 && i != only))
            continue;
        struct hv_err herr = {HV_OK, ""};
        int rc = lv_lookup_on(be, &be->hosts[i], ref, d, &herr);
        if (searched)
            searched[i] = true;
        if (rc == 1) {
            if (i != cached)
                lv_cache_put(be, key, (size_t)i);
            int urc = searched ? lv_check_unique(be, ref, d, searched, err) : HV_OK;
            free(searched);
            return urc;
        }
        if (i == cached && rc < 0) {
            /* the VM's host is known and cannot be asked now: its answer, no other host's
             * (the VM is there; searching a dead host elsewhere would only stall) */
            if (err)
                *err = herr;
            free(searched);
            return herr.code;
        }
        if (i == cached)
            lv_cache_del(be, key); /* gone from there: search the fleet */
        if (rc < 0 && first.code == HV_OK)
            first = herr;
    }
    free(searched);
    if (first.code != HV_OK) {
        if (err)
            *err = first;
        return first.code;
    }
    return HV_OK;
}

void lv_dom_release(struct lv_dom *d)
{
    if (d->dom)
        virDomainFree(d->dom);
    if (d->conn)
        lv_host_put(d->host, d->conn);
    d->dom = NULL;
    d->conn = NULL;
}

int lv_fail(struct lv_dom *d, const char *what, struct hv_err *err)
{
    struct lv_lasterr e;
    lv_error_capture(&e);
    return lv_fail_err(d, &e, what, err);
}

int lv_fail_err(struct lv_dom *d, const struct lv_lasterr *e, const char *what, struct hv_err *err)
{
    bool dead = lv_error_is_dead_conn(e) || (d->conn && virConnectIsAlive(d->conn) == 0);
    lv_seterr_virt(err, e, what);
    if (dead) {
        lv_host_reset(d->host, d->conn);
        d->dead = true;
        if (err)
            err->code = HV_E_UNREACHABLE;
    }
    return err ? (int)err->code : HV_E_INTERNAL;
}

int lv_with_dom(struct lv_backend *be, const struct hv_vm_ref *ref, lv_body_fn fn, void *arg,
                bool *found, struct hv_err *err)
{
    *found = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct lv_dom d;
        int rc = lv_find(be, ref, &d, err);
        if (rc != HV_OK || !d.dom)
            return rc;
        *found = true;
        rc = fn(&d, arg, err);
        bool retry = rc != HV_OK && d.dead && !d.mutated && attempt == 0;
        lv_dom_release(&d);
        if (!retry)
            return rc;
        if (err) {
            err->code = HV_OK;
            err->detail[0] = '\0';
        }
    }
    return HV_E_INTERNAL; /* not reached */
}

int lv_with_dom_settled(struct lv_backend *be, const struct hv_vm_ref *ref, lv_body_fn fn,
                        void *arg, bool *found, struct hv_err *err)
{
    int rc = HV_E_INVALID_STATE;
    for (int attempt = 0; attempt < 3 && rc == HV_E_INVALID_STATE; attempt++) {
        err->code = HV_OK;
        err->detail[0] = '\0';
        rc = lv_with_dom(be, ref, fn, arg, found, err);
    }
    return rc;
}

/* ops->list_records: every domain of every configured host that carries our record. A host
 * that cannot be listed fails the scan (its error is returned after the others were listed);
 * a domain that goes away meanwhile is left out. */
int lv_list_records(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err)
{
    struct lv_backend *be = b->priv;
    struct hv_vm_found *f = malloc(sizeof(*f));
    if (!f)
        return lv_seterr(err, HV_E_INTERNAL, "out of memory");
    int rc = HV_OK;
    for (size_t i = 0; i < be->n_hosts; i++) {
        struct lv_host *h = &be->hosts[i];
        struct hv_err herr = {HV_OK, ""};
        virConnectPtr conn = lv_host_get(be, h, &herr);
        virDomainPtr *doms = NULL;
        int n = conn ? virConnectListAllDomains(conn, &doms, 0) : -1;
        if (conn && n < 0) {
            struct lv_lasterr e;
            lv_error_capture(&e);
            char what[HV_NAME_MAX + 32];
            snprintf(what, sizeof(what), "list domains on %s", h->uri);
            lv_seterr_virt(&herr, &e, what);
            if (lv_error_is_dead_conn(&e) || virConnectIsAlive(conn) == 0) {
                lv_host_reset(h, conn);
                herr.code = HV_E_UNREACHABLE;
            }
        }
        for (int k = 0; k < n; k++) {
            struct lv_dom d = {.be = be, .host = h, .conn = conn, .dom = doms[k]};
            int state = VIR_DOMAIN_NOSTATE, reason = 0;
            int active = virDomainIsActive(doms[k]);
            struct hv_err derr = {HV_OK, ""};
            memset(f, 0, sizeof(*f));
            bool ok =
                active >= 0 && virDomainGetState(doms[k], &state, &reason, 0) == 0 &&
                lv_record_read(&d, active == 1, f->record, sizeof(f->record), &derr) == HV_OK &&
                f->record[0] && virDomainGetUUIDString(doms[k], f->ref.uuid) == 0;
            const char *name = ok ? virDomainGetName(doms[k]) : NULL;
            if (name) {
                snprintf(f->ref.server, sizeof(f->ref.server), "%s", h->uri);
                snprintf(f->ref.name, sizeof(f->ref.name), "%s", name);
                snprintf(f->host, sizeof(f->host), "%s", h->uri);
                f->power = lv_power_of(state, active == 1);
                fn(ctx, f);
            }
            virDomainFree(doms[k]);
        }
        free(doms);
        lv_host_put(h, conn);
        if (herr.code != HV_OK) {
            memset(f, 0, sizeof(*f));
            f->unlisted = true;
            snprintf(f->host, sizeof(f->host), "%s", h->uri);
            fn(ctx, f);
        }
        if (herr.code != HV_OK && rc == HV_OK) {
            rc = herr.code;
            if (err)
                *err = herr;
        }
    }
    free(f);
    return rc;
}
