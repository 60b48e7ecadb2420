/* vsphere_backend.c: the hv_backend for vCenter: picks the configured server for a
 * machine, observes VMs (FindByUuid + one RetrievePropertiesEx), plans with vs_plan, acts one
 * step at a time and stores the operation record in extraConfig.
 *
 * Owns its vs_servers and a small cache of the last private observation per VM (moref,
 * changeVersion, hot-plug settings) so plan() and act() work from what observe() saw; the
 * cache is guarded by cache_mu and refreshed after each of our own reconfigurations.
 * A configured server also gets one session of its own per cluster when its credentials come
 * per cluster (cfg.creds) and per request thumbprint when its entry pins none and allows
 * one (cfg.allow_request_thumbprint); those sessions
 * (struct session, guarded by sess_mu) are counted while an op uses them and are logged out and
 * freed once nobody used them for session_idle_ms.
 */
#include "vsphere_backend.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>
#include <libxml/parser.h>

#include "vs_plan.h"
#include "vs_props.h"
#include "vs_soap.h"
#include "vs_test.h"
#include "vs_vmops.h"

#define CACHE_MAX       1024 /* VMs whose moref and last read are kept (a 1,000-VM rollout) */
#define DEFAULT_STEP_MS 60000
#define CACHE_FRESH_MS  30000
#define SESSIONS_MAX    4096 /* per-cluster / per-thumbprint sessions over all servers */
#define SESSION_IDLE_MS (10 * 60 * 1000) /* session_idle_ms's default */
#define HINTS_MAX       65536            /* VMs whose moref the last scan left (4.5 MiB at most) */

struct cache_entry {
    bool used;
    size_t server;
    char uuid[64];
    int64_t at_ms;
    struct vs_vm vm;
};

/* A VM's moref as the last scan (list_records) read it with its BIOS UUID (lower case). */
struct hint {
    size_t server;
    char uuid[40];
    char moref[24];
};

/* One session beyond a server's own: the cluster whose credentials it logs in with and the
 * thumbprint it pins ("" = the server entry's). */
struct session {
    struct session *next;
    size_t idx;
    char identity[HV_NAME_MAX];
    char thumbprint[100];
    struct vs_server *s;
    unsigned refs;   /* ops using s now: never freed while > 0 */
    int64_t used_ms; /* when the last of them let go */
};

struct vs_backend {
    struct hv_backend base;
    struct vs_server **servers;
    struct hv_vsphere_server *cfg; /* owned copies (strings strdup'd) for new sessions */
    size_t n, n_cfg;
    pthread_mutex_t sess_mu;
    struct session *sessions;
    size_t n_sessions;
    int idle_ms;      /* < 0: some server frees its sessions as soon as unused */
    int64_t swept_ms; /* last look for idle sessions */
    pthread_mutex_t cache_mu;
    struct cache_entry cache[CACHE_MAX];
    size_t next;        /* round-robin victim */
    struct hint *hints; /* sorted by server and uuid; under cache_mu */
    size_t n_hints;
};

/* A scan in progress (list_records): what it reports to, and the morefs it saw. */
struct vs_list_ctx {
    struct vs_backend *vb;
    size_t idx;
    const struct vs_server *s;
    hv_vm_found_fn fn;
    void *ctx;
    struct hv_vm_found *f;
    struct hint *seen;
    size_t n_seen, cap_seen;
};

static struct vs_backend *vsb(struct hv_backend *b)
{
    return (struct vs_backend *)b;
}

/* ---- server choice ---- */

/* Index of the server for ref, or -1. */
static long pick_server(const struct vs_backend *vb, const struct hv_vm_ref *ref)
{
    if (!ref->server[0])
        return vb->n == 1 ? 0 : -1;
    /* Accept "vc.example.com", "vc.example.com:443" or "https://vc.example.com/sdk". */
    const char *h = ref->server;
    const char *scheme = strstr(h, "://");
    if (scheme)
        h = scheme + 3;
    size_t hl = strcspn(h, "/?#");
    for (size_t i = 0; i < vb->n; i++) {
        const struct vs_server *s = vb->servers[i];
        const char *host = vs_server_host(s), *hostport = vs_server_hostport(s);
        if (strcasecmp(vs_server_name(s), ref->server) == 0 ||
            (strlen(host) == hl && strncasecmp(host, h, hl) == 0) ||
            (strlen(hostport) == hl && strncasecmp(hostport, h, hl) == 0))
            return (long)i;
    }
    return -1;
}

/* Take the sessions nobody used for idle_ms out of the list (sess_mu held) and return them, to
 * be logged out and freed without the lock (Logout is a round trip). */
static struct session *take_idle(struct vs_backend *vb, int64_t now)
{
    struct session *idle = NULL, **p = &vb->sessions;
    if (vb->idle_ms >= 0 && now - vb->swept_ms < 1000)
        return NULL; /* at most one walk a second when sessions live minutes */
    vb->swept_ms = now;
    while (*p) {
        struct session *x = *p;
        int idle_ms = vb->cfg[x->idx].session_idle_ms;
        if (idle_ms == 0)
            idle_ms = SESSION_IDLE_MS;
        if (x->refs == 0 && (idle_ms < 0 || now - x->used_ms >= idle_ms)) {
            *p = x->next;
            x->next = idle;
            idle = x;
            vb->n_sessions--;
        } else {
            p = &x->next;
        }
    }
    return idle;
}

static void free_sessions(struct session *x)
{
    while (x) {
        struct session *next = x->next;
        vs_server_free(x->s);
        free(x);
        x = next;
    }
}

/* The session that serves ref on server idx: the server's own, or the one of ref's cluster
 * (credentials per cluster) and of ref's thumbprint (when the entry pins none), made on first
 * use. *held is that session (NULL for the server's own): the caller hands it back with
 * session_done when its op ends. NULL with err filled when it cannot be made. */
static struct vs_server *session_for(struct vs_backend *vb, size_t idx, const struct hv_vm_ref *ref,
                                     struct session **held, struct hv_err *err)
{
    const struct hv_vsphere_server *c = &vb->cfg[idx];
    const char *identity = c->creds && ref->cluster[0] ? ref->cluster : "";
    const char *thumb = ref->thumbprint[0] && c->allow_request_thumbprint &&
                                !(c->thumbprint && *c->thumbprint) &&
                                !(c->ca_file && *c->ca_file) && !c->insecure_skip_verify
                            ? ref->thumbprint
                            : "";
    *held = NULL;
    if (!identity[0] && !thumb[0])
        return vb->servers[idx];
    pthread_mutex_lock(&vb->sess_mu);
    struct session *idle = take_idle(vb, vs_now_ms());
    struct session *x = vb->sessions;
    while (x && !(x->idx == idx && strcmp(x->identity, identity) == 0 &&
                  strcasecmp(x->thumbprint, thumb) == 0))
        x = x->next;
    if (!x && vb->n_sessions >= SESSIONS_MAX) {
        pthread_mutex_unlock(&vb->sess_mu);
        free_sessions(idle);
        vs_err(err, HV_E_INTERNAL, "more than %d vCenter sessions in use", SESSIONS_MAX);
        return NULL;
    }
    if (!x) {
        struct hv_vsphere_server one = *c;
        char why[256];
        one.identity = identity[0] ? identity : NULL;
        if (thumb[0])
            one.thumbprint = thumb;
        struct vs_server *s = vs_server_new(&one, why, sizeof(why));
        x = s ? calloc(1, sizeof(*x)) : NULL;
        if (!x) {
            pthread_mutex_unlock(&vb->sess_mu);
            free_sessions(idle);
            if (s)
                vs_server_free(s);
            /* vs_server_new refuses only what the request's thumbprint brought in */
            vs_err(err, s ? HV_E_INTERNAL : HV_E_TLS, "%s", s ? "out of memory" : why);
            return NULL;
        }
        x->idx = idx;
        snprintf(x->identity, sizeof(x->identity), "%s", identity);
        snprintf(x->thumbprint, sizeof(x->thumbprint), "%s", thumb);
        x->s = s;
        x->next = vb->sessions;
        vb->sessions = x;
        vb->n_sessions++;
    }
    x->refs++;
    *held = x;
    pthread_mutex_unlock(&vb->sess_mu);
    free_sessions(idle);
    return x->s;
}

static void session_done(struct vs_backend *vb, struct session *held)
{
    if (!held)
        return;
    pthread_mutex_lock(&vb->sess_mu);
    held->refs--;
    held->used_ms = vs_now_ms();
    pthread_mutex_unlock(&vb->sess_mu);
}

size_t vs_backend_sessions(struct hv_backend *b)
{
    struct vs_backend *vb = vsb(b);
    pthread_mutex_lock(&vb->sess_mu);
    size_t n = vb->n_sessions;
    pthread_mutex_unlock(&vb->sess_mu);
    return n;
}

static int no_server(const struct hv_vm_ref *ref, struct hv_err *err)
{
    if (!ref->server[0])
        return vs_err(err, HV_E_NOT_FOUND,
                      "the machine names no vCenter and several are configured");
    return vs_err(err, HV_E_NOT_FOUND, "no configured vCenter matches server '%s'", ref->server);
}

static bool vs_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    return pick_server(vsb(b), ref) >= 0;
}

/* ---- observation cache ---- */

static struct cache_entry *cache_find(struct vs_backend *vb, size_t server, const char *uuid)
{
    for (size_t i = 0; i < CACHE_MAX; i++) {
        struct cache_entry *e = &vb->cache[i];
        if (e->used && e->server == server && strcmp(e->uuid, uuid) == 0)
            return e;
    }
    return NULL;
}

static void cache_put(struct vs_backend *vb, size_t server, const char *uuid,
                      const struct vs_vm *vm)
{
    pthread_mutex_lock(&vb->cache_mu);
    struct cache_entry *e = cache_find(vb, server, uuid);
    if (!e) {
        e = &vb->cache[vb->next];
        vb->next = (vb->next + 1) % CACHE_MAX;
    }
    e->used = true;
    e->server = server;
    snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
    e->at_ms = vs_now_ms();
    e->vm = *vm;
    pthread_mutex_unlock(&vb->cache_mu);
}

static bool cache_get(struct vs_backend *vb, size_t server, const char *uuid, struct vs_vm *vm)
{
    pthread_mutex_lock(&vb->cache_mu);
    struct cache_entry *e = cache_find(vb, server, uuid);
    bool hit = e && vs_now_ms() - e->at_ms < CACHE_FRESH_MS;
    if (hit)
        *vm = e->vm;
    pthread_mutex_unlock(&vb->cache_mu);
    return hit;
}

static void cache_drop(struct vs_backend *vb, size_t server, const char *uuid)
{
    pthread_mutex_lock(&vb->cache_mu);
    struct cache_entry *e = cache_find(vb, server, uuid);
    if (e)
        e->used = false;
    pthread_mutex_unlock(&vb->cache_mu);
}

/* ---- morefs from the last scan ---- */

static int hint_cmp(const void *a, const void *b)
{
    const struct hint *p = a, *q = b;
    if (p->server != q->server)
        return p->server < q->server ? -1 : 1;
    return strcmp(p->uuid, q->uuid);
}

/* uuid lower-cased into out (cap 40); false when it does not fit. */
static bool hint_key(const char *uuid, char out[40])
{
    size_t n = strlen(uuid);
    if (n == 0 || n >= 40)
        return false;
    for (size_t i = 0; i <= n; i++)
        out[i] = (char)tolower((unsigned char)uuid[i]);
    return true;
}

/* The scan's moref of the VM with this BIOS UUID on server, into moref (64); false when the
 * scan saw none, or more than one VM with it. */
static bool hint_get(struct vs_backend *vb, size_t server, const char *uuid, char *moref)
{
    struct hint key = {.server = server};
    if (!hint_key(uuid, key.uuid))
        return false;
    pthread_mutex_lock(&vb->cache_mu);
    const struct hint *h =
        vb->n_hints ? bsearch(&key, vb->hints, vb->n_hints, sizeof(key), hint_cmp) : NULL;
    if (h)
        snprintf(moref, 64, "%s", h->moref);
    pthread_mutex_unlock(&vb->cache_mu);
    return h != NULL;
}

/* A VM the scan listed: kept for the table the scan's end puts in place. */
static void hint_add(struct vs_list_ctx *l, const char *uuid, const char *moref)
{
    struct hint h = {.server = l->idx};
    if (!hint_key(uuid, h.uuid) || strlen(moref) >= sizeof(h.moref) || l->n_seen >= HINTS_MAX)
        return;
    snprintf(h.moref, sizeof(h.moref), "%s", moref);
    if (l->n_seen == l->cap_seen) {
        size_t cap = l->cap_seen ? l->cap_seen * 2 : 256;
        struct hint *v = realloc(l->seen, cap * sizeof(*v));
        if (!v)
            return;
        l->seen = v;
        l->cap_seen = cap;
    }
    l->seen[l->n_seen++] = h;
}

/* The scan ended: its VMs (sorted, a BIOS UUID that more than one VM carries left out: which
 * one FindByUuid answers is vCenter's choice) replace the last scan's. */
static void hints_publish(struct vs_backend *vb, struct vs_list_ctx *l)
{
    struct hint *v = l->seen;
    size_t n = l->n_seen, kept = 0;
    if (n)
        qsort(v, n, sizeof(*v), hint_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && hint_cmp(&v[i], &v[j]) == 0)
            j++;
        if (j == i + 1)
            v[kept++] = v[i];
        i = j;
    }
    l->seen = NULL;
    l->n_seen = l->cap_seen = 0;
    if (kept == 0) {
        free(v);
        v = NULL;
    }
    pthread_mutex_lock(&vb->cache_mu);
    struct hint *old = vb->hints;
    vb->hints = v;
    vb->n_hints = kept;
    pthread_mutex_unlock(&vb->cache_mu);
    free(old);
}

/* ---- lookups ---- */

/* Read the VM at moref, a moref remembered for ref's BIOS UUID: HV_E_NOT_FOUND when it is
 * gone or now carries another BIOS UUID. */
static int read_known(struct vs_server *s, const char *moref, const struct hv_vm_ref *ref,
                      int timeout_ms, struct vs_vm *vm, struct hv_err *err)
{
    int rc = vs_read_vm(s, moref, ref->disk, timeout_ms, vm, err);
    if (rc == HV_OK && vm->uuid[0] && strcasecmp(vm->uuid, ref->uuid) != 0)
        rc = vs_err(err, HV_E_NOT_FOUND, "VM %s carries another BIOS UUID now", moref);
    return rc;
}

/* Find and read the VM through s; *found = false (HV_OK) when it does not exist. */
static int lookup_on(struct vs_backend *vb, struct vs_server *s, size_t idx,
                     const struct hv_vm_ref *ref, int timeout_ms, struct vs_vm *vm, bool *found,
                     struct hv_err *err)
{
    if (!ref->uuid[0])
        return vs_err(err, HV_E_UNSUPPORTED,
                      "vSphere finds VMs by BIOS UUID (providerID) and the machine has none");
    char moref[64] = "";
    int rc;
    /* A VM keeps its moref for life: read it directly when we know it (from our last read,
     * else from the last scan), and search by UUID only when that moref is gone or carries
     * another BIOS UUID (one round trip per observation instead of two). */
    bool known = cache_get(vb, idx, ref->uuid, vm) && vm->moref[0];
    if (known)
        snprintf(moref, sizeof(moref), "%s", vm->moref);
    else
        known = hint_get(vb, idx, ref->uuid, moref);
    if (known) {
        rc = read_known(s, moref, ref, timeout_ms, vm, err);
        if (rc == HV_OK) {
            *found = true;
            cache_put(vb, idx, ref->uuid, vm);
            return HV_OK;
        }
        if (rc != HV_E_NOT_FOUND)
            return rc;
    }
    rc = vs_find_vm(s, ref->uuid, timeout_ms, moref, sizeof(moref), err);
    if (rc == HV_OK && moref[0])
        rc = vs_read_vm(s, moref, ref->disk, timeout_ms, vm, err);
    if (rc == HV_E_NOT_FOUND || (rc == HV_OK && !moref[0])) {
        cache_drop(vb, idx, ref->uuid);
        return HV_OK;
    }
    if (rc != HV_OK)
        return rc;
    *found = true;
    cache_put(vb, idx, ref->uuid, vm);
    return HV_OK;
}

/* Find and read the VM; *found = false (HV_OK) when it does not exist. */
static int lookup(struct vs_backend *vb, size_t idx, const struct hv_vm_ref *ref, int timeout_ms,
                  struct vs_vm *vm, bool *found, struct hv_err *err)
{
    struct session *held;
    struct vs_server *s = session_for(vb, idx, ref, &held, err);
    *found = false;
    if (!s)
        return err->code;
    int rc = lookup_on(vb, s, idx, ref, timeout_ms, vm, found, err);
    session_done(vb, held);
    return rc;
}

/* The VM as last observed (for act), or a fresh lookup; HV_E_NOT_FOUND when gone. */
static int target(struct vs_backend *vb, size_t idx, const struct hv_vm_ref *ref, int64_t deadline,
                  bool fresh, struct vs_vm *vm, struct hv_err *err)
{
    if (!fresh && cache_get(vb, idx, ref->uuid, vm))
        return HV_OK;
    int left = vs_left_ms(deadline);
    if (left == 0)
        return vs_err(err, HV_E_TIMEOUT, "no time left to find the VM");
    bool found;
    int rc = lookup(vb, idx, ref, left, vm, &found, err);
    if (rc == HV_OK && !found)
        rc = vs_err(err, HV_E_NOT_FOUND, "no VM with BIOS UUID %s on %s", ref->uuid,
                    vs_server_name(vb->servers[idx]));
    return rc;
}

/* ---- ops ---- */

/* Ops accept a NULL err and always start from HV_OK. */
static struct hv_err *err_start(struct hv_err *err, struct hv_err *local)
{
    if (!err)
        err = local;
    err->code = HV_OK;
    err->detail[0] = '\0';
    return err;
}

/* What the engine sees of vm (found). */
static void fill_obs(const struct vs_server *s, const struct vs_vm *vm, struct hv_vm_obs *obs)
{
    memset(obs, 0, sizeof(*obs));
    obs->found = true;
    obs->power = vm->power;
    if (vm->power == HV_POWER_PAUSED)
        snprintf(obs->power_state, sizeof(obs->power_state), "suspended");
    obs->hw = (struct hv_hw){vm->memory_mb, vm->cpus, vm->cores_per_socket, vs_disk_mib(vm)};
    obs->config = obs->hw;
    snprintf(obs->id, sizeof(obs->id), "%s", vm->moref);
    snprintf(obs->host, sizeof(obs->host), "%s", vs_server_name(s));
    memcpy(obs->record, vm->record, sizeof(obs->record));
    obs->tools_running = vm->tools_running;
    obs->can_shutdown = vm->tools_running && vm->power == HV_POWER_ON;
    obs->busy = vm->busy;
}

static int vs_observe(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                      struct hv_err *err)
{
    struct vs_backend *vb = vsb(b);
    struct hv_err local;
    err = err_start(err, &local);
    memset(obs, 0, sizeof(*obs));
    obs->hw = obs->config = (struct hv_hw){-1, -1, -1, -1};
    long idx = pick_server(vb, ref);
    if (idx < 0)
        return no_server(ref, err);
    struct vs_vm *vm = malloc(sizeof(*vm));
    if (!vm)
        return vs_err(err, HV_E_INTERNAL, "out of memory");
    bool found;
    int rc = lookup(vb, (size_t)idx, ref, vs_server_timeout(vb->servers[idx]), vm, &found, err);
    if (rc == HV_OK && found)
        fill_obs(vb->servers[idx], vm, obs);
    free(vm);
    return rc;
}

/* The cached observation still describes obs (same VM, same hardware and power). */
static bool matches(const struct vs_vm *vm, const struct hv_vm_obs *obs)
{
    return strcmp(vm->moref, obs->id) == 0 && vm->power == obs->power &&
           vm->memory_mb == obs->hw.memory_mib && vm->cpus == obs->hw.cpus &&
           vm->cores_per_socket == obs->hw.cores_per_socket && vs_disk_mib(vm) == obs->hw.disk_mib;
}

static int vs_plan_op(struct hv_backend *b, const struct hv_vm_ref *ref,
                      const struct hv_vm_obs *obs, const struct hv_hw *desired,
                      struct hv_field_plan plan[HV_F_COUNT], struct hv_err *err)
{
    struct vs_backend *vb = vsb(b);
    struct hv_err local;
    err = err_start(err, &local);
    long idx = pick_server(vb, ref);
    if (idx < 0)
        return no_server(ref, err);
    struct vs_vm *vm = malloc(sizeof(*vm));
    if (!vm)
        return vs_err(err, HV_E_INTERNAL, "out of memory");
    int rc = HV_OK;
    /* (an assumed obs never matches the VM: the cache, which the plan of the same probe
     * just checked against its observation, gives the limits) */
    if (!cache_get(vb, (size_t)idx, ref->uuid, vm) ||
        (!(obs && obs->assumed) && !matches(vm, obs))) {
        bool found;
        rc = lookup(vb, (size_t)idx, ref, vs_server_timeout(vb->servers[idx]), vm, &found, err);
        if (rc == HV_OK && !found)
            rc = vs_err(err, HV_E_NOT_FOUND, "no VM with BIOS UUID %s", ref->uuid);
    }
    if (rc == HV_OK) {
        if (obs && obs->assumed) /* (hv_vm_obs.assumed: as an operation in flight leaves it) */
            vs_assume(vm, &obs->hw);
        vs_plan(vm, desired, plan);
    }
    free(vm);
    return rc;
}

/* Re-read after our own reconfiguration so the cached changeVersion stays current. */
static void refresh(struct vs_backend *vb, size_t idx, const struct hv_vm_ref *ref)
{
    struct vs_vm *vm = malloc(sizeof(*vm));
    struct hv_err ignored;
    bool found;
    if (!vm ||
        lookup(vb, idx, ref, vs_server_timeout(vb->servers[idx]), vm, &found, &ignored) != HV_OK)
        cache_drop(vb, idx, ref->uuid);
    free(vm);
}

static int act_step_on(struct vs_backend *vb, struct vs_server *s, size_t idx,
                       const struct hv_vm_ref *ref, const struct hv_step *step, int64_t deadline,
                       struct vs_vm *vm, bool *fresh, bool *sent, struct hv_err *err)
{
    const struct hv_hw *d = &step->desired;
    bool cold =
        step->kind == HV_STEP_RECONFIGURE || step->kind == HV_STEP_LIVE_DISK; /* fresh read */
    int rc = target(vb, idx, ref, deadline, cold, vm, err);
    if (rc != HV_OK)
        return rc;
    /* A live step stores the engine's record in the same ReconfigVM_Task (record_in_step). */
    bool live = step->kind == HV_STEP_LIVE_MEMORY || step->kind == HV_STEP_LIVE_CPUS ||
                step->kind == HV_STEP_LIVE_DISK;
    if (step->record && strlen(step->record) >= HV_RECORD_MAX)
        return vs_err(err, HV_E_INTERNAL, "record longer than %d bytes", HV_RECORD_MAX - 1);
    if (d->disk_mib > HV_DISK_MAX_MIB) /* its bytes would not fit 64 bits */
        return vs_err(err, HV_E_UNSUPPORTED, "%s", HV_REASON_DISK_MAX);
    struct vs_spec spec = {vm->change_version, -1, -1, -1, live ? step->record : NULL, NULL, 0};
    /* The disk grows (never shrinks: plan() refuses that) with the same reconfiguration. */
    bool grow_disk = hv_disk_set(d->disk_mib) && vm->disk.found &&
                     d->disk_mib * 1024 * 1024 > vm->disk.capacity_bytes;
    switch (step->kind) {
    case HV_STEP_LIVE_MEMORY:
        if (d->memory_mib < 0)
            return vs_err(err, HV_E_INTERNAL, "live memory step without a memory size");
        spec.memory_mb = d->memory_mib;
        *sent = true;
        return vs_reconfigure(s, vm->moref, &spec, deadline, ref->disk, vm, fresh, err);
    case HV_STEP_LIVE_CPUS:
        if (d->cpus < 0)
            return vs_err(err, HV_E_INTERNAL, "live cpu step without a cpu count");
        spec.cpus = d->cpus;
        *sent = true;
        return vs_reconfigure(s, vm->moref, &spec, deadline, ref->disk, vm, fresh, err);
    case HV_STEP_LIVE_DISK:
        if (!hv_disk_set(d->disk_mib))
            return vs_err(err, HV_E_INTERNAL, "live disk step without a disk size");
        if (!vm->disk.found)
            return vs_err(err, HV_E_UNSUPPORTED, "the VM has no disk %s", ref->disk);
        if (d->disk_mib * 1024 * 1024 < vm->disk.capacity_bytes)
            return vs_err(err, HV_E_UNSUPPORTED, "disks cannot shrink");
        if (!grow_disk)
            return HV_OK; /* already that size */
        spec.disk = &vm->disk;
        spec.disk_bytes = d->disk_mib * 1024 * 1024;
        *sent = true;
        return vs_reconfigure(s, vm->moref, &spec, deadline, ref->disk, vm, fresh, err);
    case HV_STEP_RECONFIGURE:
        if (vm->power != HV_POWER_OFF)
            return vs_err(err, HV_E_INVALID_STATE, "VM %s must be powered off to reconfigure",
                          vm->moref);
        spec.memory_mb = d->memory_mib;
        spec.cpus = d->cpus;
        spec.cores_per_socket = d->cores_per_socket;
        if (grow_disk) {
            spec.disk = &vm->disk;
            spec.disk_bytes = d->disk_mib * 1024 * 1024;
        }
        return vs_reconfigure(s, vm->moref, &spec, deadline, ref->disk, vm, fresh, err);
    case HV_STEP_SHUTDOWN:
        if (!vm->tools_running)
            return vs_err(err, HV_E_UNSUPPORTED,
                          "VMware Tools are not running: no graceful shutdown possible");
        return vs_shutdown_guest(s, vm->moref, deadline, err);
    case HV_STEP_POWER_OFF:
        return vs_power(s, vm->moref, "PowerOffVM_Task", deadline, err);
    case HV_STEP_POWER_ON:
        return vs_power(s, vm->moref, "PowerOnVM_Task", deadline, err);
    }
    return vs_err(err, HV_E_INTERNAL, "unknown step kind %d", (int)step->kind);
}

static int act_step(struct vs_backend *vb, size_t idx, const struct hv_vm_ref *ref,
                    const struct hv_step *step, int64_t deadline, struct vs_vm *vm, bool *fresh,
                    bool *sent, struct hv_err *err)
{
    struct session *held;
    struct vs_server *s = session_for(vb, idx, ref, &held, err);
    if (!s)
        return err->code;
    int rc = act_step_on(vb, s, idx, ref, step, deadline, vm, fresh, sent, err);
    session_done(vb, held);
    return rc;
}

static int vs_act(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *step,
                  struct hv_err *err)
{
    struct vs_backend *vb = vsb(b);
    struct hv_err local;
    err = err_start(err, &local);
    long idx = pick_server(vb, ref);
    if (idx < 0)
        return no_server(ref, err);
    int64_t deadline = vs_now_ms() + (step->timeout_ms > 0 ? step->timeout_ms : DEFAULT_STEP_MS);
    struct vs_vm *vm = malloc(sizeof(*vm));
    if (!vm)
        return vs_err(err, HV_E_INTERNAL, "out of memory");
    bool fresh = false, sent = false;
    int rc = act_step(vb, (size_t)idx, ref, step, deadline, vm, &fresh, &sent, err);
    /* The record rides only in a ReconfigVM_Task of a live step that was sent (a disk
     * already that size sends none). */
    if (step->record_stored)
        *step->record_stored = rc == HV_OK && sent && step->record;
    bool reconfig = step->kind == HV_STEP_LIVE_MEMORY || step->kind == HV_STEP_LIVE_CPUS ||
                    step->kind == HV_STEP_LIVE_DISK || step->kind == HV_STEP_RECONFIGURE;
    if (rc != HV_OK)
        cache_drop(vb, (size_t)idx, ref->uuid); /* next act looks again */
    else if (reconfig && fresh) {
        cache_put(vb, (size_t)idx, ref->uuid, vm); /* read with the task's end */
        if (step->seen_after)
            fill_obs(vb->servers[idx], vm, step->seen_after);
    } else if (reconfig)
        refresh(vb, (size_t)idx, ref);
    free(vm);
    return rc;
}

static int vs_write_record(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                           const char *record, struct hv_err *err)
{
    struct vs_backend *vb = vsb(b);
    struct hv_err local;
    err = err_start(err, &local);
    long idx = pick_server(vb, ref);
    if (idx < 0)
        return no_server(ref, err);
    if (strlen(record) >= HV_RECORD_MAX)
        return vs_err(err, HV_E_INTERNAL, "record longer than %d bytes", HV_RECORD_MAX - 1);
    int64_t deadline = vs_now_ms() + 2 * (int64_t)vs_server_timeout(vb->servers[idx]);
    struct vs_vm *vm = malloc(sizeof(*vm));
    if (!vm)
        return vs_err(err, HV_E_INTERNAL, "out of memory");
    /* With expected, a compare-and-swap in one request: the ReconfigVM_Task names the
     * changeVersion of a read that showed that record, and vCenter refuses it
     * (ConcurrentAccess, BUSY) when anything changed the configuration since. The cached
     * read (the caller's look, or our last write) first; when it no longer shows the record,
     * or its changeVersion is stale (a change that left the record alone), a fresh read
     * decides again, once. */
    int rc;
    bool fresh = false;
    for (int round = 0;; round++) {
        rc = target(vb, (size_t)idx, ref, deadline, round > 0, vm, err);
        if (rc != HV_OK)
            break;
        if (expected && strcmp(vm->record, expected)) {
            if (round == 0)
                continue;
            rc = vs_err(err, HV_E_BUSY, "the VM's record changed since it was read");
            break;
        }
        struct vs_spec spec = {expected ? vm->change_version : NULL, -1, -1, -1, record, NULL, 0};
        struct session *held;
        struct vs_server *s = session_for(vb, (size_t)idx, ref, &held, err);
        rc = s ? vs_reconfigure(s, vm->moref, &spec, deadline, ref->disk, vm, &fresh, err)
               : (int)err->code;
        session_done(vb, held);
        if (!(rc == HV_E_BUSY && expected && round == 0))
            break;
    }
    if (rc == HV_OK && fresh)
        cache_put(vb, (size_t)idx, ref->uuid, vm);
    else if (rc == HV_OK)
        refresh(vb, (size_t)idx, ref);
    else
        cache_drop(vb, (size_t)idx, ref->uuid);
    free(vm);
    return rc;
}

static char *dup0(const char *v)
{
    char *d = v ? strdup(v) : NULL;
    if (v && !d)
        abort();
    return d;
}

static void cfg_copy(struct hv_vsphere_server *d, const struct hv_vsphere_server *c)
{
    *d = *c;
    d->name = dup0(c->name);
    d->url = dup0(c->url);
    d->username_file = dup0(c->username_file);
    d->password_file = dup0(c->password_file);
    d->username = dup0(c->username);
    d->thumbprint = dup0(c->thumbprint);
    d->ca_file = dup0(c->ca_file);
    d->identity = NULL;
}

static void cfg_free(struct hv_vsphere_server *d)
{
    free((char *)d->name);
    free((char *)d->url);
    free((char *)d->username_file);
    free((char *)d->password_file);
    free((char *)d->username);
    free((char *)d->thumbprint);
    free((char *)d->ca_file);
}

static void vs_free(struct hv_backend *b)
{
    struct vs_backend *vb = vsb(b);
    if (!vb)
        return;
    for (size_t i = 0; i < vb->n; i++)
        vs_server_free(vb->servers[i]);
    free(vb->servers);
    while (vb->sessions) {
        struct session *x = vb->sessions;
        vb->sessions = x->next;
        vs_server_free(x->s);
        free(x);
    }
    for (size_t i = 0; vb->cfg && i < vb->n_cfg; i++)
        cfg_free(&vb->cfg[i]);
    free(vb->cfg);
    pthread_mutex_destroy(&vb->sess_mu);
    pthread_mutex_destroy(&vb->cache_mu);
    free(vb->hints);
    free(vb);
    curl_global_cleanup();
}

static void vs_list_one(void *ctx, const char *moref, const char *name, const char *uuid,
                        enum hv_power power, const char *record)
{
    struct vs_list_ctx *l = ctx;
    struct hv_vm_found *f = l->f;
    hint_add(l, uuid, moref);
    if (!record[0])
        return;
    memset(f, 0, sizeof(*f));
    snprintf(f->ref.server, sizeof(f->ref.server), "%s", vs_server_name(l->s));
    snprintf(f->ref.uuid, sizeof(f->ref.uuid), "%s", uuid);
    snprintf(f->ref.name, sizeof(f->ref.name), "%s", name);
    snprintf(f->host, sizeof(f->host), "%s", vs_server_name(l->s));
    f->power = power;
    snprintf(f->record, sizeof(f->record), "%s", record);
    l->fn(l->ctx, f);
}

/* ops->list_records: each configured vCenter that hvupdater logs in to with its own
 * credentials (one whose credentials come per cluster has no session to list with). */
static int vs_list_records_op(struct hv_backend *b, hv_vm_found_fn fn, void *ctx,
                              struct hv_err *err)
{
    struct vs_backend *vb = vsb(b);
    struct vs_list_ctx l = {
        .vb = vb, .fn = fn, .ctx = ctx, .f = malloc(sizeof(struct hv_vm_found))};
    if (!l.f)
        return vs_err(err, HV_E_INTERNAL, "out of memory");
    int rc = HV_OK;
    for (size_t i = 0; i < vb->n; i++) {
        if (vb->cfg[i].creds)
            continue;
        struct hv_err e = {0};
        l.s = vb->servers[i];
        l.idx = i;
        int r =
            vs_list_records(vb->servers[i], vs_server_timeout(vb->servers[i]), vs_list_one, &l, &e);
        if (r != HV_OK) {
            memset(l.f, 0, sizeof(*l.f));
            l.f->unlisted = true;
            snprintf(l.f->host, sizeof(l.f->host), "%s", vs_server_name(l.s));
            fn(ctx, l.f);
        }
        if (r != HV_OK && rc == HV_OK) {
            rc = r;
            if (err)
                *err = e;
        }
    }
    free(l.f);
    hints_publish(vb, &l);
    return rc;
}

static void vs_check_op(struct hv_backend *b, const struct hv_hw *desired,
                        struct hv_field_plan plan[HV_F_COUNT])
{
    (void)b;
    vs_check(desired, plan);
}

static const struct hv_backend_ops vs_ops = {
    .name = "vsphere",
    .record_in_step = true,
    .list_records = vs_list_records_op,
    .serves = vs_serves,
    .observe = vs_observe,
    .plan = vs_plan_op,
    .act = vs_act,
    .write_record = vs_write_record,
    .free = vs_free,
    .check = vs_check_op,
};

struct hv_backend *hv_vsphere_new(const struct hv_vsphere_server *servers, size_t n, char *err,
                                  size_t errlen)
{
    if (!servers || n == 0) {
        snprintf(err, errlen, "no vSphere server configured");
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl failed to initialise");
        return NULL;
    }
    xmlInitParser();
    struct vs_backend *vb = calloc(1, sizeof(*vb));
    if (vb) {
        vb->servers = calloc(n, sizeof(*vb->servers));
        vb->cfg = calloc(n, sizeof(*vb->cfg));
    }
    if (!vb || !vb->servers || !vb->cfg) {
        if (vb) {
            free(vb->servers);
            free(vb->cfg);
        }
        free(vb);
        curl_global_cleanup();
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    vb->base.ops = &vs_ops;
    vb->base.priv = vb;
    pthread_mutex_init(&vb->cache_mu, NULL);
    pthread_mutex_init(&vb->sess_mu, NULL);
    vb->idle_ms = SESSION_IDLE_MS;
    for (size_t i = 0; i < n; i++) {
        cfg_copy(&vb->cfg[i], &servers[i]);
        if (servers[i].session_idle_ms < 0)
            vb->idle_ms = -1;
    }
    vb->n_cfg = n;
    for (size_t i = 0; i < n; i++) {
        vb->servers[i] = vs_server_new(&servers[i], err, errlen);
        if (!vb->servers[i]) {
            vs_free(&vb->base);
            return NULL;
        }
        vb->n = i + 1;
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(vs_server_name(vb->servers[j]), vs_server_name(vb->servers[i])) == 0) {
                snprintf(err, errlen, "vSphere server name '%s' is configured twice",
                         vs_server_name(vb->servers[i]));
                vs_free(&vb->base);
                return NULL;
            }
        }
    }
    return &vb->base;
}

struct vs_server *vs_backend_server(struct hv_backend *b, size_t i)
{
    struct vs_backend *vb = vsb(b);
    return i < vb->n ? vb->servers[i] : NULL;
}
