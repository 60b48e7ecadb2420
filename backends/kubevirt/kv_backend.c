/* kv_backend.c: hv_kubevirt_new() and the ops of backends/backend.h over the Kubernetes API:
 * finding a VirtualMachine (ref->server: the configured cluster; ref->name: "namespace/name"),
 * reading it with its VMI and the KubeVirt CR, one JSON patch per step, the record as an
 * annotation, and the list of VMs that carry one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "kv_internal.h"

#define KV_LIST_PAGE 200

#define KV_INFRA_TTL_S 30   /* how long a machine's infraClusterSecretRef lookup answers */
#define KV_INFRA_MAX   1024 /* machines whose lookup is cached */

/* The cluster of one kubeconfig Secret at one resourceVersion. refs: the calls using it now;
 * a connection no longer current (the Secret moved on) is freed by its last user. */
struct kv_conn {
    struct kv_cluster c;
    struct kv_kubeconfig kc;
    char secret[HV_NAME_MAX], rv[64];
    char ns[KV_NS_MAX]; /* CAPK's infra namespace: data.namespace, the context's, "default" */
    int refs;
    bool current;
    struct kv_conn *next;
};

/* One KubevirtMachine's lookup: its Secret (and resourceVersion), or none. */
struct kv_res {
    char key[2 * HV_NAME_MAX]; /* "namespace/cluster|machine" */
    int64_t at;
    char secret[HV_NAME_MAX], rv[64];
    char template_ns[KV_NS_MAX];
};

struct kv_backend {
    struct hv_backend pub;
    struct kv_cluster *clusters;
    size_t n;
    int timeout_ms;
    hv_kubevirt_infra_fn infra;
    void *infra_ctx;
    pthread_mutex_t mu; /* conns, res */
    struct kv_conn *conns;
    struct kv_res *res;
    size_t n_res;
};

/* Where one call's VM is: the cluster (configured, or a Secret's conn held by this call) and
 * the VM's namespace and name there. */
struct kv_target {
    struct kv_cluster *c;
    struct kv_conn *conn;
    char ns[KV_NS_MAX], name[KV_VMNAME_MAX];
};

static char *dup_str(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

/* a DNS-1123 name or namespace, safe in a path as it is */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < KV_VMNAME_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == n;
}

static struct kv_cluster *cluster_of(struct kv_backend *be, const struct hv_vm_ref *ref)
{
    if (!ref->server[0])
        return &be->clusters[0];
    for (size_t k = 0; k < be->n; k++)
        if (!strcmp(be->clusters[k].name, ref->server))
            return &be->clusters[k];
    return NULL;
}

static bool kv_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    return cluster_of(b->priv, ref) != NULL;
}

/* ref->name "ns/name" (or "name": namespace default) split and checked */
static int split_ref(const struct hv_vm_ref *ref, char ns[KV_NS_MAX], char name[KV_VMNAME_MAX],
                     struct hv_err *err)
{
    const char *slash = strchr(ref->name, '/');
    if (slash) {
        size_t n = (size_t)(slash - ref->name);
        if (n >= KV_NS_MAX)
            n = 0;
        memcpy(ns, ref->name, n);
        ns[n] = '\0';
        snprintf(name, KV_VMNAME_MAX, "%s", slash + 1);
    } else {
        snprintf(ns, KV_NS_MAX, "default");
        snprintf(name, KV_VMNAME_MAX, "%s", ref->name);
    }
    if (!name_ok(ns) || !name_ok(name))
        return kv_seterr(err, HV_E_NOT_FOUND, "not a VirtualMachine reference: \"%s\"", ref->name);
    return HV_OK;
}

static int64_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

/* The KubeVirt CR's rollout strategy and limits, cached for KV_CR_TTL_S. A CR that cannot be
 * read (none, or no right to list it) leaves cr_read false: every change is then planned cold
 * (see kv_plan.c); an unreachable server is an error like any other read. */
static int read_cr(struct kv_backend *be, struct kv_cluster *c, struct kv_state *st,
                   struct hv_err *err)
{
    int64_t now = mono_s();
    pthread_mutex_lock(&c->mu);
    bool fresh = c->cr_at && now - c->cr_at < KV_CR_TTL_S;
    struct kv_state cached = c->cr;
    pthread_mutex_unlock(&c->mu);
    if (!fresh) {
        yajl_val v = NULL;
        long status;
        char *body;
        int rc = kv_http(c, "GET", "/apis/kubevirt.io/v1/kubevirts", NULL, NULL, be->timeout_ms,
                         &status, &body, err);
        if (rc != HV_OK)
            return rc;
        if (status == 200)
            v = yajl_tree_parse(body, NULL, 0);
        else if (status >= 500 || status == 429)
            rc = kv_status_err(status, body, "list kubevirts", err);
        free(body);
        if (rc != HV_OK)
            return rc;
        kv_state_init(&cached);
        kv_parse_kubevirt(v, &cached);
        yajl_tree_free(v);
        pthread_mutex_lock(&c->mu);
        c->cr = cached;
        c->cr_at = now;
        pthread_mutex_unlock(&c->mu);
    }
    st->cr_read = cached.cr_read;
    memcpy(st->rollout, cached.rollout, sizeof(st->rollout));
    st->cr_max_guest_mib = cached.cr_max_guest_mib;
    st->cr_max_sockets = cached.cr_max_sockets;
    st->cr_ratio = cached.cr_ratio;
    return HV_OK;
}

static void conn_release_locked(struct kv_backend *be, struct kv_conn *cn)
{
    if (--cn->refs > 0 || cn->current)
        return;
    for (struct kv_conn **pp = &be->conns; *pp; pp = &(*pp)->next)
        if (*pp == cn) {
            *pp = cn->next;
            break;
        }
    kv_kubeconfig_free(&cn->kc);
    free(cn->c.name);
    free(cn->c.server);
    pthread_mutex_destroy(&cn->c.mu);
    free(cn);
}

static void target_done(struct kv_backend *be, struct kv_target *t)
{
    if (!t->conn)
        return;
    pthread_mutex_lock(&be->mu);
    conn_release_locked(be, t->conn);
    pthread_mutex_unlock(&be->mu);
    t->conn = NULL;
}

/* the current connection of secret at rv (a new one made from in, which is consumed), held
 * for the caller; NULL with err when the kubeconfig cannot be used */
static struct kv_conn *conn_get(struct kv_backend *be, const struct hv_kubevirt_infra *in,
                                struct hv_err *err)
{
    pthread_mutex_lock(&be->mu);
    for (struct kv_conn *cn = be->conns; cn; cn = cn->next)
        if (cn->current && !strcmp(cn->secret, in->secret) && !strcmp(cn->rv, in->rv)) {
            cn->refs++;
            pthread_mutex_unlock(&be->mu);
            return cn;
        }
    pthread_mutex_unlock(&be->mu);
    if (!in->kubeconfig) {
        kv_seterr(err, HV_E_INFRA_SECRET, "Secret %s: no data.kubeconfig", in->secret);
        return NULL;
    }
    struct kv_conn *cn = calloc(1, sizeof(*cn));
    if (!cn)
        abort();
    char why[200];
    if (kv_kubeconfig_parse(in->kubeconfig, in->kubeconfig_len, &cn->kc, why, sizeof(why)) < 0) {
        free(cn);
        kv_seterr(err, HV_E_INFRA_SECRET, "Secret %s: %s", in->secret, why);
        return NULL;
    }
    snprintf(cn->secret, sizeof(cn->secret), "%s", in->secret);
    snprintf(cn->rv, sizeof(cn->rv), "%s", in->rv);
    /* CAPK pkg/infracluster: data.namespace (trimmed) over the context's namespace, whose
     * default (clientcmd) is "default" */
    snprintf(cn->ns, sizeof(cn->ns), "%s",
             in->secret_ns[0] ? in->secret_ns
             : cn->kc.ns[0]   ? cn->kc.ns
                              : "default");
    if (!name_ok(cn->ns)) {
        kv_kubeconfig_free(&cn->kc);
        free(cn);
        kv_seterr(err, HV_E_INFRA_SECRET, "Secret %s: data.namespace is not a namespace",
                  in->secret);
        return NULL;
    }
    char name[HV_NAME_MAX + 8];
    snprintf(name, sizeof(name), "capk:%s", in->secret);
    cn->c.name = dup_str(name);
    cn->c.server = dup_str(cn->kc.server);
    cn->c.kc = &cn->kc;
    pthread_mutex_init(&cn->c.mu, NULL);
    cn->refs = 1;
    cn->current = true;
    pthread_mutex_lock(&be->mu);
    /* another call may have made the same one meanwhile: either serves; older
     * resourceVersions of this Secret are no longer current */
    for (struct kv_conn *o = be->conns, *next; o; o = next) {
        next = o->next;
        if (o->current && !strcmp(o->secret, cn->secret)) {
            o->current = false;
            o->refs++;
            conn_release_locked(be, o);
        }
    }
    cn->next = be->conns;
    be->conns = cn;
    pthread_mutex_unlock(&be->mu);
    return cn;
}

/* the cached lookup of key, fresh; false when none */
static bool res_find(struct kv_backend *be, const char *key, struct kv_res *out)
{
    int64_t now = mono_s();
    bool found = false;
    pthread_mutex_lock(&be->mu);
    for (size_t k = 0; k < be->n_res; k++)
        if (!strcmp(be->res[k].key, key) && now - be->res[k].at < KV_INFRA_TTL_S) {
            *out = be->res[k];
            found = true;
            break;
        }
    pthread_mutex_unlock(&be->mu);
    return found;
}

static void res_store(struct kv_backend *be, const struct kv_res *r)
{
    int64_t now = mono_s();
    pthread_mutex_lock(&be->mu);
    size_t slot = be->n_res, oldest = 0;
    for (size_t k = 0; k < be->n_res; k++) {
        if (!strcmp(be->res[k].key, r->key) || now - be->res[k].at >= KV_INFRA_TTL_S) {
            slot = k;
            break;
        }
        if (be->res[k].at < be->res[oldest].at)
            oldest = k;
    }
    if (slot == be->n_res) {
        if (be->n_res == KV_INFRA_MAX) {
            slot = oldest;
        } else {
            struct kv_res *n = realloc(be->res, (be->n_res + 1) * sizeof(*n));
            if (!n)
                abort();
            be->res = n;
            be->n_res++;
        }
    }
    be->res[slot] = *r;
    be->res[slot].at = now;
    pthread_mutex_unlock(&be->mu);
}

/* Where ref's VM is. With infra and a known cluster: the KubevirtMachine's
 * infraClusterSecretRef (cached KV_INFRA_TTL_S), else the configured cluster. Release the
 * target with target_done. */
static int target_of(struct kv_backend *be, const struct hv_vm_ref *ref, struct kv_target *t,
                     struct hv_err *err)
{
    memset(t, 0, sizeof(*t));
    int rc = split_ref(ref, t->ns, t->name, err);
    if (rc != HV_OK)
        return rc;
    if (be->infra && ref->cluster[0]) {
        struct kv_res r;
        memset(&r, 0, sizeof(r));
        snprintf(r.key, sizeof(r.key), "%s|%s", ref->cluster, t->name);
        bool cached = res_find(be, r.key, &r);
        for (int round = 0; round < 2; round++) {
            struct hv_kubevirt_infra in;
            memset(&in, 0, sizeof(in));
            if (!cached) {
                rc = be->infra(be->infra_ctx, ref->cluster, t->name, be->timeout_ms, &in, err);
                if (rc == HV_OK) {
                    snprintf(r.secret, sizeof(r.secret), "%s", in.secret);
                    snprintf(r.rv, sizeof(r.rv), "%s", in.rv);
                    snprintf(r.template_ns, sizeof(r.template_ns), "%s", in.template_ns);
                }
            } else {
                snprintf(in.secret, sizeof(in.secret), "%s", r.secret);
                snprintf(in.rv, sizeof(in.rv), "%s", r.rv);
            }
            if (rc == HV_OK && r.secret[0])
                t->conn = conn_get(be, &in, err);
            if (in.kubeconfig) {
                kv_wipe(in.kubeconfig, in.kubeconfig_len);
                free(in.kubeconfig);
            }
            if (rc != HV_OK)
                return rc;
            if (r.secret[0] && !t->conn && cached) {
                cached = false; /* the Secret moved on since: look the machine up again */
                continue;
            }
            if (r.secret[0] && !t->conn)
                return err ? err->code : HV_E_INFRA_SECRET;
            if (!cached)
                res_store(be, &r);
            break;
        }
        if (t->conn) {
            t->c = &t->conn->c;
            snprintf(t->ns, sizeof(t->ns), "%s", r.template_ns[0] ? r.template_ns : t->conn->ns);
            return HV_OK;
        }
    }
    t->c = cluster_of(be, ref);
    if (!t->c)
        return kv_seterr(err, HV_E_NOT_FOUND, "no configured KubeVirt cluster named \"%s\"",
                         ref->server);
    return HV_OK;
}

/* Read the VM and its VMI (and with_cr: the KubeVirt CR) into st. */
static int read_vm(struct kv_backend *be, const struct kv_target *t, bool with_cr,
                   struct kv_state *st, struct hv_err *err)
{
    kv_state_init(st);
    struct kv_cluster *c = t->c;
    const char *ns = t->ns, *name = t->name;
    char path[512];
    int rc;
    yajl_val vm = NULL, vmi = NULL;
    snprintf(path, sizeof(path), "/apis/kubevirt.io/v1/namespaces/%s/virtualmachines/%s", ns, name);
    rc = kv_get_json(c, path, be->timeout_ms, &vm, err);
    if (rc != HV_OK)
        return rc;
    kv_parse_vm(vm, st);
    yajl_tree_free(vm);
    if (!st->found)
        return HV_OK;
    snprintf(path, sizeof(path), "/apis/kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s",
             ns, name);
    rc = kv_get_json(c, path, be->timeout_ms, &vmi, err);
    if (rc != HV_OK)
        return rc;
    kv_parse_vmi(vmi, st);
    yajl_tree_free(vmi);
    return with_cr ? read_cr(be, c, st, err) : HV_OK;
}

static struct hv_err *err_start(struct hv_err *err, struct hv_err *dummy)
{
    if (!err)
        err = dummy;
    err->code = HV_OK;
    err->detail[0] = '\0';
    return err;
}

static int kv_observe(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                      struct hv_err *err)
{
    struct hv_err dummy;
    err = err_start(err, &dummy);
    struct kv_state st;
    struct kv_target t;
    memset(obs, 0, sizeof(*obs));
    int rc = target_of(b->priv, ref, &t, err);
    if (rc == HV_OK)
        rc = read_vm(b->priv, &t, false, &st, err);
    if (rc == HV_OK)
        kv_fill_obs(&st, t.c->name, obs);
    target_done(b->priv, &t);
    return rc;
}

static int kv_plan(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *obs,
                   const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT],
                   struct hv_err *err)
{
    /* the plan follows a fresh read; of an assumed obs it takes the values an operation in
     * flight will leave (hv_vm_obs.assumed) */
    struct hv_err dummy;
    err = err_start(err, &dummy);
    memset(plan, 0, sizeof(*plan) * HV_F_COUNT);
    struct kv_state st;
    struct kv_target t;
    int rc = target_of(b->priv, ref, &t, err);
    if (rc == HV_OK)
        rc = read_vm(b->priv, &t, true, &st, err);
    target_done(b->priv, &t);
    if (rc != HV_OK)
        return rc;
    if (!st.found)
        return kv_seterr(err, HV_E_NOT_FOUND, "VirtualMachine %s not found", ref->name);
    if (obs && obs->assumed)
        kv_assume(&st, &obs->hw);
    rc = kv_plan_compute(&st, desired, plan);
    if (rc != HV_OK)
        return kv_seterr(err, rc, "a hot-plug of %s is still in progress", ref->name);
    return HV_OK;
}

/* PATCH the VM with a JSON patch; HV_OK on 200 */
static int send_patch(struct kv_backend *be, const struct kv_cluster *c, const struct kv_state *st,
                      const char *patch, int timeout_ms, long *status_out, struct hv_err *err)
{
    char path[512];
    snprintf(path, sizeof(path), "/apis/kubevirt.io/v1/namespaces/%s/virtualmachines/%s", st->ns,
             st->name);
    long status;
    char *body;
    int rc = kv_http(c, "PATCH", path, "application/json-patch+json", patch,
                     timeout_ms > 0 ? timeout_ms : be->timeout_ms, &status, &body, err);
    *status_out = status;
    if (rc != HV_OK)
        return rc;
    if (status != 200)
        rc = kv_status_err(status, body, "patch virtualmachine", err);
    free(body);
    return rc;
}

/* The patch for what the VM shows now (*patch NULL: nothing to change). */
typedef int (*kv_patch_fn)(const struct kv_state *st, const void *arg, char **patch,
                           struct hv_err *err);

static int step_patch(const struct kv_state *st, const void *arg, char **patch, struct hv_err *err)
{
    return kv_step_patch(st, arg, patch, err);
}

struct record_swap {
    const char *expected; /* NULL: unconditional */
    const char *record;
};

/* Decided on the read the patch tests the resourceVersion of: a compare-and-swap. */
static int record_patch(const struct kv_state *st, const void *arg, char **patch,
                        struct hv_err *err)
{
    const struct record_swap *w = arg;
    if (w->expected && strcmp(st->record, w->expected))
        return kv_seterr(err, HV_E_BUSY, "the VM's record changed since it was read");
    kv_record_patch(st, w->record, patch); /* *patch NULL: the VM carries that record already */
    return HV_OK;
}

/* Read the VM, build a patch from what it shows and send it with its resourceVersion test.
 * A writer between the read and the patch (KubeVirt's controllers update the VM's status;
 * anyone may annotate) makes it BUSY: decided again on a fresh read, three rounds at most.
 * kube-apiserver (k8s.io/apiserver v0.37) answers a failed test op with a bare 422 "the
 * server rejected our request due to an error in our request", no cause kept: a 422 is a
 * lost race exactly when the next read shows another resourceVersion than the one tested
 * (the patch was built from that very object, so none of its other ops can miss); the same
 * resourceVersion means the patch itself was refused. */
static int patch_target(struct kv_backend *be, const struct hv_vm_ref *ref,
                        const struct kv_target *t, kv_patch_fn make, const void *arg,
                        int timeout_ms, struct hv_err *err);

static int patch_fresh(struct kv_backend *be, const struct hv_vm_ref *ref, kv_patch_fn make,
                       const void *arg, int timeout_ms, struct hv_err *err)
{
    struct kv_target t;
    int rc = target_of(be, ref, &t, err);
    if (rc == HV_OK)
        rc = patch_target(be, ref, &t, make, arg, timeout_ms, err);
    target_done(be, &t);
    return rc;
}

static int patch_target(struct kv_backend *be, const struct hv_vm_ref *ref,
                        const struct kv_target *t, kv_patch_fn make, const void *arg,
                        int timeout_ms, struct hv_err *err)
{
    int rc = HV_OK;
    char tested[sizeof(((struct kv_state *)0)->rv)] = "";
    struct hv_err refused = {0};
    for (int attempt = 0;; attempt++) {
        struct kv_state st;
        struct kv_cluster *c = t->c;
        int rrc = read_vm(be, t, false, &st, err);
        if (rrc != HV_OK)
            return rrc;
        if (!st.found)
            return kv_seterr(err, HV_E_NOT_FOUND, "VirtualMachine %s not found", ref->name);
        if (tested[0]) {
            if (!strcmp(tested, st.rv)) { /* the object we tested: our patch was refused */
                *err = refused;
                return refused.code;
            }
            tested[0] = '\0'; /* another writer won the race: decided again on this read */
        }
        if (attempt == 3) /* three rounds lost: BUSY, the engine looks again */
            return rc;
        char *patch = NULL;
        rc = make(&st, arg, &patch, err);
        if (rc != HV_OK || !patch)
            return rc;
        long status = 0;
        rc = send_patch(be, c, &st, patch, timeout_ms, &status, err);
        free(patch);
        if (rc == HV_E_INTERNAL && status == 422) {
            snprintf(tested, sizeof(tested), "%s", st.rv);
            refused = *err;
            rc =
                kv_seterr(err, HV_E_BUSY, "patch virtualmachine: the VM changed since it was read");
            continue;
        }
        if (rc != HV_E_BUSY)
            return rc;
    }
}

static int kv_act(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *s,
                  struct hv_err *err)
{
    struct hv_err dummy;
    err = err_start(err, &dummy);
    if (!ref || !s)
        return kv_seterr(err, HV_E_INTERNAL, "act: missing ref or step");
    struct kv_backend *be = b->priv;
    /* KubeVirt's controllers write the VM's status between our read and our patch (a new
     * resourceVersion): the step is decided again on a fresh read, a few times, before it
     * is BUSY for the engine */
    return patch_fresh(be, ref, step_patch, s, s->timeout_ms, err);
}

static int kv_write_record(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                           const char *record, struct hv_err *err)
{
    struct hv_err dummy;
    err = err_start(err, &dummy);
    struct kv_backend *be = b->priv;
    if (!record || strlen(record) >= HV_RECORD_MAX)
        return kv_seterr(err, HV_E_INTERNAL, "record missing or too long");
    /* a writer between our read and our patch (KubeVirt's controller updates status, not
     * metadata, but anyone may annotate) costs one more round, not a failure */
    struct record_swap w = {expected, record};
    return patch_fresh(be, ref, record_patch, &w, 0, err);
}

struct list_ctx {
    hv_vm_found_fn fn;
    void *ctx;
};

static void report_items(const struct kv_cluster *c, yajl_val list, const struct list_ctx *lc)
{
    yajl_val items = kv_get(list, "items");
    if (!YAJL_IS_ARRAY(items))
        return;
    for (size_t k = 0; k < items->u.array.len; k++) {
        struct kv_state st;
        kv_state_init(&st);
        kv_parse_vm(items->u.array.values[k], &st);
        if (!st.found || !st.record[0])
            continue;
        struct hv_vm_found f;
        memset(&f, 0, sizeof(f));
        snprintf(f.ref.server, sizeof(f.ref.server), "%s", c->name);
        snprintf(f.ref.name, sizeof(f.ref.name), "%s/%s", st.ns, st.name);
        snprintf(f.host, sizeof(f.host), "%s", c->name);
        /* the list has no VMIs: the power as the VM's own status tells it */
        struct hv_vm_obs obs;
        kv_fill_obs(&st, c->name, &obs);
        f.power = obs.power;
        snprintf(f.record, sizeof(f.record), "%s", st.record);
        lc->fn(lc->ctx, &f);
    }
}

/* every page of one list path; HV_OK or the first error */
static int list_path(struct kv_backend *be, const struct kv_cluster *c, const char *base,
                     const struct list_ctx *lc, struct hv_err *err)
{
    char cont[1024] = "";
    do {
        char path[1600];
        char *esc = cont[0] ? curl_easy_escape(NULL, cont, 0) : NULL;
        snprintf(path, sizeof(path), "%s?limit=%d%s%s", base, KV_LIST_PAGE, esc ? "&continue=" : "",
                 esc ? esc : "");
        curl_free(esc);
        yajl_val v = NULL;
        int rc = kv_get_json(c, path, be->timeout_ms, &v, err);
        if (rc != HV_OK)
            return rc;
        if (!v)
            return kv_seterr(err, HV_E_NOT_FOUND, "%s: not served (is KubeVirt installed?)", base);
        report_items(c, v, lc);
        const char *next = kv_str(v, "metadata.continue");
        snprintf(cont, sizeof(cont), "%s", next && strlen(next) < sizeof(cont) ? next : "");
        yajl_tree_free(v);
    } while (cont[0]);
    return HV_OK;
}

static int kv_list_records(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err)
{
    struct hv_err dummy;
    err = err_start(err, &dummy);
    struct kv_backend *be = b->priv;
    struct list_ctx lc = {fn, ctx};
    int first = HV_OK;
    for (size_t k = 0; k < be->n; k++) {
        const struct kv_cluster *c = &be->clusters[k];
        int rc = HV_OK;
        struct hv_err e = {0};
        if (!c->n_namespaces) {
            rc = list_path(be, c, "/apis/kubevirt.io/v1/virtualmachines", &lc, &e);
        } else {
            for (size_t j = 0; j < c->n_namespaces && rc == HV_OK; j++) {
                char base[256];
                snprintf(base, sizeof(base), "/apis/kubevirt.io/v1/namespaces/%s/virtualmachines",
                         c->namespaces[j]);
                rc = list_path(be, c, base, &lc, &e);
            }
        }
        if (rc != HV_OK) {
            struct hv_vm_found f;
            memset(&f, 0, sizeof(f));
            f.unlisted = true;
            snprintf(f.host, sizeof(f.host), "%s", c->name);
            fn(ctx, &f);
            if (first == HV_OK) {
                first = rc;
                *err = e;
            }
        }
    }
    return first;
}

static void kv_check_op(struct hv_backend *b, const struct hv_hw *desired,
                        struct hv_field_plan plan[HV_F_COUNT])
{
    (void)b;
    kv_check(desired, plan);
}

static void kv_free(struct hv_backend *b)
{
    if (!b)
        return;
    struct kv_backend *be = b->priv;
    while (be->conns) {
        struct kv_conn *cn = be->conns;
        cn->current = false;
        cn->refs = 1;
        conn_release_locked(be, cn);
    }
    free(be->res);
    pthread_mutex_destroy(&be->mu);
    for (size_t k = 0; k < be->n; k++) {
        struct kv_cluster *c = &be->clusters[k];
        free(c->name);
        free(c->server);
        free(c->token_file);
        free(c->ca_file);
        for (size_t j = 0; j < c->n_namespaces; j++)
            free(c->namespaces[j]);
        free(c->namespaces);
        pthread_mutex_destroy(&c->mu);
    }
    free(be->clusters);
    free(be);
}

static const struct hv_backend_ops kv_ops = {
    .name = "kubevirt",
    .serves = kv_serves,
    .observe = kv_observe,
    .plan = kv_plan,
    .act = kv_act,
    .write_record = kv_write_record,
    .free = kv_free,
    .check = kv_check_op,
    .list_records = kv_list_records,
};

/* the in-cluster API server's URL from the environment, or -1 */
static int in_cluster_url(char *url, size_t cap)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host)
        return -1;
    snprintf(url, cap, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
             port && *port ? port : "443");
    return 0;
}

struct hv_backend *hv_kubevirt_new(const struct hv_kubevirt_opts *o, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    if (!o || !o->clusters || !o->n_clusters) {
        snprintf(err, errlen, "kubevirt backend: no cluster configured");
        return NULL;
    }
    for (size_t k = 0; k < o->n_clusters; k++) {
        const struct hv_kubevirt_cluster *c = &o->clusters[k];
        const char *name = c->name && *c->name ? c->name : "in-cluster";
        if (strlen(name) >= HV_NAME_MAX) {
            snprintf(err, errlen, "kubevirt backend: cluster %zu: name too long", k);
            return NULL;
        }
        for (size_t j = 0; j < k; j++) {
            const char *other =
                o->clusters[j].name && *o->clusters[j].name ? o->clusters[j].name : "in-cluster";
            if (!strcmp(name, other)) {
                snprintf(err, errlen, "kubevirt backend: cluster name \"%s\" repeated", name);
                return NULL;
            }
        }
        if (c->server && *c->server &&
            (strncmp(c->server, "https://", 8) || strlen(c->server) > 250)) {
            snprintf(err, errlen, "kubevirt backend: cluster \"%s\": server must be https://...",
                     name);
            return NULL;
        }
        char url[300];
        if ((!c->server || !*c->server) && in_cluster_url(url, sizeof(url)) < 0) {
            snprintf(err, errlen,
                     "kubevirt backend: cluster \"%s\": no server and no KUBERNETES_SERVICE_HOST "
                     "(not in a pod)",
                     name);
            return NULL;
        }
        for (size_t j = 0; j < c->n_namespaces; j++) {
            if (!c->namespaces[j] || !name_ok(c->namespaces[j]) ||
                strlen(c->namespaces[j]) >= KV_NS_MAX) {
                snprintf(err, errlen, "kubevirt backend: cluster \"%s\": namespace %zu invalid",
                         name, j);
                return NULL;
            }
        }
    }
    struct kv_backend *be = calloc(1, sizeof(*be));
    if (!be)
        abort();
    be->clusters = calloc(o->n_clusters, sizeof(*be->clusters));
    if (!be->clusters)
        abort();
    be->n = o->n_clusters;
    be->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    be->infra = o->infra;
    be->infra_ctx = o->infra_ctx;
    pthread_mutex_init(&be->mu, NULL);
    for (size_t k = 0; k < o->n_clusters; k++) {
        const struct hv_kubevirt_cluster *c = &o->clusters[k];
        struct kv_cluster *d = &be->clusters[k];
        char url[300];
        if (c->server && *c->server)
            snprintf(url, sizeof(url), "%s", c->server);
        else
            in_cluster_url(url, sizeof(url));
        size_t n = strlen(url);
        while (n > 8 && url[n - 1] == '/')
            url[--n] = '\0';
        d->name = dup_str(c->name && *c->name ? c->name : "in-cluster");
        d->server = dup_str(url);
        d->token_file = dup_str(c->token_file && *c->token_file
                                    ? c->token_file
                                    : "/var/run/secrets/kubernetes.io/serviceaccount/token");
        d->ca_file = dup_str(c->ca_file && *c->ca_file
                                 ? c->ca_file
                                 : "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
        if (c->n_namespaces) {
            d->namespaces = calloc(c->n_namespaces, sizeof(char *));
            if (!d->namespaces)
                abort();
            for (size_t j = 0; j < c->n_namespaces; j++)
                d->namespaces[j] = dup_str(c->namespaces[j]);
            d->n_namespaces = c->n_namespaces;
        }
        pthread_mutex_init(&d->mu, NULL);
    }
    be->pub.ops = &kv_ops;
    be->pub.priv = be;
    return &be->pub;
}
