/* plan.c: decide which differences between current and desired hvupdater covers, and how.
 * Every difference is either a profile field (live, cold or not coverable, with a reason) or
 * something hvupdater never changes (Machine, bootstrap, other infra fields). Messages are
 * built in a fixed order (field order, then sorted JSON keys) so they are deterministic. */
#include "plan.h"
#include "jsonpatch.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REASON_NOT_HARDWARE HV_MSG("hvupdater changes hypervisor hardware only")
#define REASON_NOT_A_FIELD  HV_MSG("not a field hvupdater can change")

const char *hv_class_suffix(enum hv_class cls)
{
    switch (cls) {
    case HV_CLASS_LIVE:
        return HV_MSG(" live");
    case HV_CLASS_HAVE:
        return HV_MSG(" already on the VM");
    default:
        return HV_MSG(" with a power cycle");
    }
}

bool hv_reason_is_generic(const char *reason)
{
    return !reason[0] || !strcmp(reason, REASON_NOT_HARDWARE) ||
           !strcmp(reason, REASON_NOT_A_FIELD);
}

static void add_uncovered(struct hv_coverage *c, const char *where, const char *reason)
{
    c->n_uncovered_all++;
    if (c->n_uncovered >= HV_MAX_ITEMS)
        return;
    struct hv_item *it = &c->uncovered[c->n_uncovered++];
    snprintf(it->where, sizeof(it->where), "%s", where);
    snprintf(it->reason, sizeof(it->reason), "%s", reason ? reason : "");
}

typedef void (*diff_fn)(void *ctx, const char *pointer, const hj *a, const hj *b);

/* Walk a and b together; call fn for each pointer where they differ (objects recurse, in
 * sorted key order; anything else is compared whole). */
static void diff(const char *prefix, const hj *a, const hj *b, diff_fn fn, void *ctx)
{
    /* Equal subtrees have nothing to report: most of a spec is unchanged, and comparing is
     * much cheaper than walking it key by key with pointers. */
    if (hj_equal(a, b))
        return;
    if (a && b && a->type == HJ_OBJECT && b->type == HJ_OBJECT) {
        size_t n;
        const char **keys = hj_keys_union(a, b, &n);
        char sub[512];
        size_t plen = strlen(prefix);
        if (plen >= sizeof(sub))
            plen = sizeof(sub) - 1; /* cannot happen: prefixes are built in such buffers */
        memcpy(sub, prefix, plen);
        for (size_t k = 0; k < n; k++) {
            sub[plen] = '\0';
            if (!hj_ptr_append(sub, sizeof(sub), keys[k])) {
                /* a difference under a path too long to name: report it at the object */
                if (hj_equal(hj_get(a, keys[k]), hj_get(b, keys[k])))
                    continue;
                free(keys);
                fn(ctx, prefix, a, b);
                return;
            }
            diff(sub, hj_get(a, keys[k]), hj_get(b, keys[k]), fn, ctx);
        }
        free(keys);
        return;
    }
    if (!hj_equal(a, b))
        fn(ctx, prefix, a, b);
}

/* ---- non-infra objects: any difference is something hvupdater never changes ------------- */

struct other_ctx {
    struct hv_coverage *c;
    const char *obj;
};

static void other_diff(void *vctx, const char *pointer, const hj *a, const hj *b)
{
    struct other_ctx *o = vctx;
    char where[160];
    hj_ptr_dotted(where, sizeof(where), o->obj, pointer);
    add_uncovered(o->c, where, REASON_NOT_HARDWARE);
}

static const char *const clean_drop[] = {"clusterName",
                                         "bootstrap",
                                         "infrastructureRef",
                                         "providerID",
                                         "minReadySeconds",
                                         "readinessGates",
                                         "taints",
                                         NULL};
static const char *const clean_timeouts[] = {"nodeDrainTimeoutSeconds",
                                             "nodeVolumeDetachTimeoutSeconds",
                                             "nodeDeletionTimeoutSeconds", NULL};

/* The Machine spec as CAPI compares it (internal/util/inplace.CleanupMachineSpecForDiff). */
hj *hv_clean_machine_spec(const hj *spec)
{
    if (!spec || spec->type != HJ_OBJECT)
        return spec ? hj_clone(spec) : NULL;
    hj *m = hj_clone(spec);
    for (const char *const *k = clean_drop; *k; k++)
        hj_obj_del(m, *k);
    hj *del = hj_get(m, "deletion");
    if (del && del->type == HJ_OBJECT) {
        for (const char *const *k = clean_timeouts; *k; k++)
            hj_obj_del(del, *k);
        if (del->n == 0)
            hj_obj_del(m, "deletion");
    }
    return m;
}

static bool in_list(const char *const *list, const char *k)
{
    for (; *list; list++)
        if (!strcmp(*list, k))
            return true;
    return false;
}

/* Whether hv_clean_machine_spec drops the member k (value v) of a spec object: a member
 * CAPI does not compare, or a deletion object of timeouts only (left empty). */
static bool clean_drops(const char *k, const hj *v)
{
    if (in_list(clean_drop, k))
        return true;
    if (strcmp(k, "deletion") || v->type != HJ_OBJECT)
        return false;
    for (size_t i = 0; i < v->n; i++)
        if (!in_list(clean_timeouts, v->keys[i]))
            return false;
    return true;
}

/* A deletion object's member hv_clean_machine_spec drops. */
static bool timeout_member(const char *k, const hj *v)
{
    (void)v;
    return in_list(clean_timeouts, k);
}

/* hj_equal of two objects with the members of each that skip() drops left out (a deletion
 * object kept on both sides: compared without its timeouts). */
static bool equal_without(const hj *a, const hj *b, bool (*skip)(const char *k, const hj *v))
{
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < b->n; i++)
        nb += !skip(b->keys[i], b->items[i]);
    for (size_t i = 0; i < a->n; i++) {
        if (skip(a->keys[i], a->items[i]))
            continue;
        na++;
        const hj *va = a->items[i], *vb = hj_get(b, a->keys[i]);
        if (!vb || skip(a->keys[i], vb))
            return false;
        if (skip == clean_drops && !strcmp(a->keys[i], "deletion") && va->type == HJ_OBJECT &&
            vb->type == HJ_OBJECT) {
            if (!equal_without(va, vb, timeout_member))
                return false;
        } else if (!hj_equal(va, vb)) {
            return false;
        }
    }
    return na == nb;
}

/* hj_equal(hv_clean_machine_spec(a), hv_clean_machine_spec(b)), without the copies: the
 * Machine specs of nearly every call are equal so. */
static bool clean_specs_equal(const hj *a, const hj *b)
{
    if (!a || !b || a->type != HJ_OBJECT || b->type != HJ_OBJECT)
        return hj_equal(a, b);
    return equal_without(a, b, clean_drops);
}

static void diff_machine(struct hv_coverage *c, const struct hv_plan_input *in)
{
    if (!in->cur_machine && !in->des_machine)
        return;
    const char *ptr = in->machine_set ? "/spec/template/spec" : "/spec";
    const char *name = in->machine_set ? "machineSet" : "machine";
    if (clean_specs_equal(hj_ptr(in->cur_machine, ptr), hj_ptr(in->des_machine, ptr)))
        return; /* what diff below would find: nothing */
    hj *a = hv_clean_machine_spec(hj_ptr(in->cur_machine, ptr));
    hj *b = hv_clean_machine_spec(hj_ptr(in->des_machine, ptr));
    struct other_ctx o = {c, name};
    diff(ptr, a, b, other_diff, &o);
    hj_free(a);
    hj_free(b);
}

static void diff_boot(struct hv_coverage *c, const struct hv_plan_input *in)
{
    if (!in->cur_boot && !in->des_boot)
        return;
    struct other_ctx o = {c, in->machine_set ? "bootstrapConfigTemplate" : "bootstrapConfig"};
    diff("/spec", hj_ptr(in->cur_boot, "/spec"), hj_ptr(in->des_boot, "/spec"), other_diff, &o);
}

/* ---- infra object ------------------------------------------------------------------------ */

struct infra_ctx {
    struct hv_coverage *c;
    const struct hv_profile *p;
    const char *obj;
    bool field_diff[HV_F_COUNT];
};

static void infra_diff(void *vctx, const char *pointer, const hj *a, const hj *b)
{
    struct infra_ctx *x = vctx;
    const char *root = hv_profile_spec_root(x->p);
    size_t rl = strlen(root);
    for (int f = 0; f < HV_F_COUNT; f++) {
        if (!x->p->field[f].set)
            continue;
        if (!strncmp(pointer, root, rl) && !strcmp(pointer + rl, x->p->field[f].path)) {
            x->field_diff[f] = true;
            return;
        }
    }
    char where[160];
    hj_ptr_dotted(where, sizeof(where), x->obj, pointer);
    add_uncovered(x->c, where, REASON_NOT_A_FIELD);
}

static void value_text(char *out, size_t cap, const hj *v)
{
    if (!v)
        snprintf(out, cap, "unset");
    else if (v->type == HJ_INT || v->type == HJ_FLOAT || v->type == HJ_STRING)
        snprintf(out, cap, "%.*s", (int)(v->slen < cap - 1 ? v->slen : cap - 1), v->s);
    else
        snprintf(out, cap, HV_MSG("(not a number)"));
}

/* A hardware value in MiB (memory) or a count; -1 when not a whole positive number. */
static int64_t hw_value(const struct hv_profile *p, enum hv_field f, const hj *v)
{
    if (f == HV_F_MEMORY || f == HV_F_DISK)
        return hv_unit_to_mib(v, p->field[f].unit);
    int64_t n = hv_unit_to_mib(v, HV_UNIT_MIB);
    return n > 0 && n <= INT32_MAX ? n : -1; /* maxima are the backend's (hooks->check) */
}

/* out = a then b, truncated to cap as snprintf("%s%s") would (without its cost: this is on
 * every hook call's path). */
static void join2(char *out, size_t cap, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na >= cap)
        na = cap - 1;
    memcpy(out, a, na);
    if (nb >= cap - na)
        nb = cap - na - 1;
    memcpy(out + na, b, nb);
    out[na + nb] = '\0';
}

void hv_desired_hw(const struct hv_profile *p, const hj *infra, struct hv_hw *hw)
{
    const char *root = hv_profile_spec_root(p);
    int64_t v[HV_F_COUNT];
    for (int f = 0; f < HV_F_COUNT; f++) {
        if (!p->field[f].set) {
            v[f] = -1;
            continue;
        }
        char path[300];
        join2(path, sizeof(path), root, p->field[f].path);
        v[f] = hw_value(p, (enum hv_field)f, hj_ptr(infra, path));
    }
    hw->memory_mib = v[HV_F_MEMORY];
    hw->cpus = (int32_t)v[HV_F_CPUS];
    hw->cores_per_socket = (int32_t)v[HV_F_CORES];
    hw->disk_mib = v[HV_F_DISK];
}

/* The disk's static rule, the same UpdateMachine's backends apply: growth only, from a size
 * the current spec states. NULL when covered (live: disks grow online). */
static const char *disk_rule(int64_t from_mib, int64_t to_mib)
{
    if (from_mib <= 0)
        return HV_MSG("the current spec has no disk size to grow from");
    if (to_mib < from_mib)
        return HV_REASON_DISK_SHRINK;
    if (to_mib > HV_DISK_MAX_MIB) /* its size in bytes must fit the hypervisors' 64 bits */
        return HV_REASON_DISK_MAX;
    return NULL;
}

/* A Kubernetes object name or namespace (DNS-1123 subdomain, at most 253). */
static bool kube_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 0 && n <= 253 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == n;
}

/* hv_vm_ref.name "namespace/name" of a namespaced VM (KubeVirt, see profile.h). */
static int namespaced_identity(const struct hv_profile *p, const hj *infra, const char *pid,
                               struct hv_vm_ref *ref, char *why, size_t whylen)
{
    char path[300];
    const char *ns = NULL;
    if (p->namespace_path[0]) {
        snprintf(path, sizeof(path), "%s%s", hv_profile_spec_root(p), p->namespace_path);
        const hj *v = hj_ptr(infra, path);
        ns = v && v->type == HJ_STRING && v->s[0] ? v->s : NULL;
    }
    if (!ns)
        ns = hj_get_str(hj_get(infra, "metadata"), "namespace");
    size_t pl = strlen(p->providerid_prefix);
    const char *name = NULL;
    if (pl && pid && !strncmp(pid, p->providerid_prefix, pl) && pid[pl]) {
        name = pid + pl;
        if (!kube_name(name)) {
            snprintf(why, whylen, HV_MSG("providerID is not %s<name>"), p->providerid_prefix);
            return -1;
        }
    } else if (p->by_name) {
        name = hj_get_str(hj_get(infra, "metadata"), "name");
    }
    if (!kube_name(name)) {
        snprintf(why, whylen, HV_MSG("no providerID of the form %s<name> and no metadata.name"),
                 p->providerid_prefix);
        return -1;
    }
    if (!kube_name(ns)) {
        snprintf(why, whylen, HV_MSG("no namespace to find the VM in"));
        return -1;
    }
    if (strlen(ns) + strlen(name) + 1 >= sizeof(ref->name)) {
        snprintf(why, whylen, HV_MSG("namespace and name too long"));
        return -1;
    }
    snprintf(ref->name, sizeof(ref->name), "%s/%s", ns, name);
    return 0;
}

int hv_identity(const struct hv_profile *p, const hj *machine, const hj *infra,
                struct hv_vm_ref *ref, char *why, size_t whylen)
{
    memset(ref, 0, sizeof(*ref));
    hv_profile_disk_ref(p, ref->disk, sizeof(ref->disk));
    const char *root = hv_profile_spec_root(p);
    char path[300];
    if (p->server_path[0]) {
        snprintf(path, sizeof(path), "%s%s", root, p->server_path);
        const hj *s = hj_ptr(infra, path);
        if (s && s->type == HJ_STRING && strlen(s->s) < sizeof(ref->server))
            snprintf(ref->server, sizeof(ref->server), "%s", s->s);
    }
    if (p->thumbprint_path[0]) {
        snprintf(path, sizeof(path), "%s%s", root, p->thumbprint_path);
        const hj *t = hj_ptr(infra, path);
        if (t && t->type == HJ_STRING && strlen(t->s) < sizeof(ref->thumbprint))
            snprintf(ref->thumbprint, sizeof(ref->thumbprint), "%s", t->s);
    }
    const char *ns = hj_get_str(hj_get(machine, "metadata"), "namespace");
    const char *cluster = hj_get_str(hj_get(machine, "spec"), "clusterName");
    if (ns && ns[0] && cluster && cluster[0] &&
        strlen(ns) + strlen(cluster) + 1 < sizeof(ref->cluster))
        snprintf(ref->cluster, sizeof(ref->cluster), "%s/%s", ns, cluster);
    size_t pl = strlen(p->providerid_prefix);
    const char *pid = hj_get_str(hj_get(machine, "spec"), "providerID");
    if (!pid)
        pid = hj_get_str(hj_get(infra, "spec"), "providerID");
    if (p->namespaced)
        return namespaced_identity(p, infra, pid, ref, why, whylen);
    if (pl && pid && !strncmp(pid, p->providerid_prefix, pl) && pid[pl]) {
        const char *u = pid + pl;
        size_t n = strspn(u, "0123456789abcdefABCDEF-");
        if (u[n] == '\0' && n >= 32 && n < sizeof(ref->uuid)) {
            memcpy(ref->uuid, u, n + 1);
            return 0;
        }
        snprintf(why, whylen, HV_MSG("providerID is not %s<UUID>"), p->providerid_prefix);
        return -1;
    }
    const char *name = hj_get_str(hj_get(infra, "metadata"), "name");
    if (p->by_name && name && name[0] && strlen(name) < sizeof(ref->name)) {
        snprintf(ref->name, sizeof(ref->name), "%s", name);
        return 0;
    }
    if (pl)
        snprintf(why, whylen, HV_MSG("no providerID of the form %s<UUID>%s"), p->providerid_prefix,
                 p->by_name ? HV_MSG(" and no metadata.name") : "");
    else
        snprintf(why, whylen, HV_MSG("no metadata.name to find the VM by"));
    return -1;
}

/* Whether two names of a VM name the same one: the same server when both say, and the same
 * UUID when either has one, else the same name. */
static bool same_vm(const struct hv_vm_ref *a, const struct hv_vm_ref *b)
{
    if (a->server[0] && b->server[0] && strcmp(a->server, b->server))
        return false;
    if (a->uuid[0] || b->uuid[0])
        return a->uuid[0] && b->uuid[0] && !strcasecmp(a->uuid, b->uuid);
    return a->name[0] && !strcmp(a->name, b->name);
}

static bool same_hw(const struct hv_hw *a, const struct hv_hw *b)
{
    int64_t da = hv_disk_set(a->disk_mib) ? a->disk_mib : -1;
    int64_t db = hv_disk_set(b->disk_mib) ? b->disk_mib : -1;
    return a->memory_mib == b->memory_mib && a->cpus == b->cpus &&
           a->cores_per_socket == b->cores_per_socket && da == db;
}

int hv_resume_matches(const struct hv_profiles *ps, const char *backend, const hj *machine,
                      const hj *infra, const struct hv_vm_ref *vm, const struct hv_hw *desired,
                      char *msg, size_t msglen)
{
    const char *av = hj_get_str(infra, "apiVersion"), *kind = hj_get_str(infra, "kind");
    const hj *md = hj_get(infra, "metadata");
    const char *ns = hj_get_str(md, "namespace"), *name = hj_get_str(md, "name");
    ns = ns ? ns : "";
    name = name ? name : "";
    const struct hv_profile *p = hv_profile_find(ps, av, kind);
    if (!p || p->is_template || strcmp(p->backend, backend)) {
        snprintf(msg, msglen,
                 HV_MSG("machine check: no hvupdater profile of the %s backend for %s %s; not "
                        "carried on"),
                 backend, kind ? kind : "", av ? av : "");
        return -1;
    }
    struct hv_vm_ref found;
    char why[200];
    if (hv_identity(p, machine, infra, &found, why, sizeof(why)) < 0 || !same_vm(&found, vm)) {
        snprintf(msg, msglen,
                 HV_MSG("machine check: %s %s/%s in the API server names another VM than the one "
                        "the record is on; not carried on"),
                 kind, ns, name);
        return -1;
    }
    struct hv_hw hw;
    hv_desired_hw(p, infra, &hw);
    if (!same_hw(&hw, desired)) {
        snprintf(msg, msglen,
                 HV_MSG("machine check: the spec of %s %s/%s in the API server asks for other "
                        "hardware than the record on the VM; not carried on"),
                 kind, ns, name);
        return -1;
    }
    return 0;
}

/* ---- the provider's word (hv_plan_hooks.admit) ------------------------------------------ */

/* Set value at the path's tokens under o, making objects on the way. */
static void put_path(hj *o, const char *path, const hj *value)
{
    char **tok;
    size_t n;
    if (!value || hj_ptr_split(path, &tok, &n) < 0)
        return;
    for (size_t i = 0; i + 1 < n; i++) {
        hj *sub = hj_get(o, tok[i]);
        if (!sub || sub->type != HJ_OBJECT) {
            sub = hj_new_object();
            hj_obj_set_take(o, tok[i], sub);
        }
        o = sub;
    }
    if (n)
        hj_obj_set_take(o, tok[n - 1], hj_clone(value));
    hj_ptr_tokens_free(tok, n);
}

/* Before the covered fields are claimed: ask whether the provider lets an infra machine of
 * this request take their desired values. Refused: none is covered (the dry run tried them
 * together), each with the provider's reason; unchecked: covered, the message says so. */
static void admit(struct hv_coverage *c, const struct hv_plan_input *in, const struct hv_profile *p,
                  const char *obj)
{
    if (!in->hooks || !in->hooks->admit || c->pending || c->unreadable)
        return;
    const char *root = hv_profile_spec_root(p);
    hj *spec = NULL;
    for (size_t k = 0; k < c->n_fields; k++) {
        const struct hv_field_result *r = &c->fields[k];
        char path[300];
        if (r->cls == HV_CLASS_NO)
            continue;
        snprintf(path, sizeof(path), "%s%s", root, p->field[r->f].path);
        if (!spec)
            spec = hj_new_object();
        put_path(spec, p->field[r->f].path, hj_ptr(in->des_infra, path));
    }
    if (!spec)
        return;
    hj *patch = hj_new_object();
    hj_obj_set_take(patch, "spec", spec);
    const hj *cmd = hj_get(in->cur_infra, "metadata"), *dmd = hj_get(in->des_infra, "metadata");
    const char *ns = hj_get_str(cmd, "namespace");
    if (!ns)
        ns = hj_get_str(hj_get(in->cur_machine, "metadata"), "namespace");
    struct hv_admit_ask a = {
        .machine_set = in->machine_set,
        .ns = ns,
        .owner = hj_get_str(hj_get(in->cur_machine, "metadata"), "name"),
        .api_version = hj_get_str(in->cur_infra, "apiVersion"),
        .kind = hj_get_str(in->cur_infra, "kind"),
        .cur_name = hj_get_str(cmd, "name"),
        .des_name = hj_get_str(dmd, "name"),
        .patch = patch,
    };
    char why[400] = "";
    int v = in->hooks->admit(in->hooks->admit_ctx, &a, why, sizeof(why));
    hj_free(patch);
    if (v == HV_ADMIT_REFUSED) {
        char reason[400];
        snprintf(reason, sizeof(reason), HV_MSG("the provider refuses the change: %s"), why);
        for (size_t k = 0; k < c->n_fields; k++) {
            struct hv_field_result *r = &c->fields[k];
            char where[160], path[300];
            if (r->cls == HV_CLASS_NO)
                continue;
            r->cls = HV_CLASS_NO;
            snprintf(path, sizeof(path), "%s%s", root, p->field[r->f].path);
            hj_ptr_dotted(where, sizeof(where), obj, path);
            add_uncovered(c, where, reason);
        }
    } else if (v == HV_ADMIT_UNCHECKED) {
        snprintf(c->unchecked, sizeof(c->unchecked), "%s", why);
    } else if (v == HV_ADMIT_PENDING) {
        c->admit_pending = true;
        snprintf(c->admit_why, sizeof(c->admit_why),
                 HV_MSG("still asking the API server whether the provider accepts the change; "
                        "retry"));
    } else if (v != HV_ADMIT_ACCEPTED) {
        c->admit_pending = true;
        snprintf(c->admit_why, sizeof(c->admit_why),
                 HV_MSG("cannot ask the API server whether the provider accepts the change: %s; "
                        "retry"),
                 why);
    }
}

static void classify(struct hv_coverage *c, const struct hv_plan_input *in,
                     const struct hv_profile *p, const char *obj, bool field_diff[HV_F_COUNT])
{
    const char *root = hv_profile_spec_root(p);
    struct hv_hw desired = {-1, -1, -1, -1};
    char why_na[200] = "";
    int avail = 1;
    struct hv_vm_ref ref;
    bool have_ref = false;
    bool any = false;
    for (int f = 0; f < HV_F_COUNT; f++)
        any |= field_diff[f];
    if (!any)
        return;
    if (!in->machine_set) {
        char why[200];
        have_ref = hv_identity(p, in->des_machine, in->des_infra, &ref, why, sizeof(why)) == 0;
        if (!have_ref) {
            avail = 0;
            snprintf(why_na, sizeof(why_na), HV_MSG("cannot find the VM: %s"), why);
        }
    }
    if (avail && in->hooks && in->hooks->available) {
        struct hv_vm_ref none;
        memset(&none, 0, sizeof(none));
        if (in->machine_set) {
            char path[300];
            snprintf(path, sizeof(path), "%s%s", root, p->server_path);
            const hj *s = p->server_path[0] ? hj_ptr(in->des_infra, path) : NULL;
            if (s && s->type == HJ_STRING)
                snprintf(none.server, sizeof(none.server), "%s", s->s);
        }
        avail = in->hooks->available(in->hooks->ctx, p, have_ref ? &ref : &none, why_na,
                                     sizeof(why_na));
    }
    /* The backend's rules that no VM escapes, on the whole desired hardware (a cross-field
     * rule such as cpus % coresPerSocket needs the unchanged field too). */
    struct hv_field_plan fixed[HV_F_COUNT];
    memset(fixed, 0, sizeof(fixed));
    /* the whole desired hardware, for the backend's rules and the probe (read once) */
    struct hv_hw full;
    bool have_full = false;
    if (in->hooks && in->hooks->check) {
        hv_desired_hw(p, in->des_infra, &full);
        have_full = true;
        in->hooks->check(in->hooks->ctx, p, &full, fixed);
    }
    for (int f = 0; f < HV_F_COUNT; f++) {
        if (!field_diff[f])
            continue;
        char path[300];
        join2(path, sizeof(path), root, p->field[f].path);
        const hj *a = hj_ptr(in->cur_infra, path), *b = hj_ptr(in->des_infra, path);
        struct hv_field_result *r = &c->fields[c->n_fields++];
        r->f = (enum hv_field)f;
        snprintf(r->name, sizeof(r->name), "%s", hv_field_name(p, (enum hv_field)f));
        value_text(r->from, sizeof(r->from), a);
        value_text(r->to, sizeof(r->to), b);
        int64_t va = hw_value(p, (enum hv_field)f, a), vb = hw_value(p, (enum hv_field)f, b);
        const char *reason = NULL;
        /* The patch's parent must exist in current, or CAPI cannot apply an "add". */
        char parent[300];
        snprintf(parent, sizeof(parent), "%s", path);
        *strrchr(parent, '/') = '\0';
        const hj *par = hj_ptr(in->cur_infra, parent);
        if (!b)
            reason = HV_MSG("removed from the desired spec");
        else if (vb < 0)
            reason = f == HV_F_MEMORY || f == HV_F_DISK
                         ? HV_MSG("not a whole positive number of MiB")
                         : HV_MSG("not a whole positive number");
        else if (!par || par->type != HJ_OBJECT)
            reason = HV_MSG("its parent object is missing from the current spec");
        else if (fixed[f].how == HV_HOW_IMPOSSIBLE)
            reason = fixed[f].reason;
        else if (!avail)
            reason = why_na;
        else if (f == HV_F_DISK)
            reason = disk_rule(va, vb);
        else if ((f == HV_F_MEMORY || f == HV_F_CPUS) &&
                 in->settings->guest_check == HV_GC_REQUIRED && !strcmp(p->backend, "vsphere"))
            reason = HV_MSG("guestVerification is Required and vSphere gives no guest view");
        if (!reason && (f == HV_F_DISK || f == HV_F_CORES) &&
            in->settings->guest_check == HV_GC_REQUIRED)
            reason = HV_MSG("guestVerification is Required and no guest shows this field");
        if (reason) {
            r->cls = HV_CLASS_NO;
        } else if (f == HV_F_DISK) {
            r->cls = HV_CLASS_LIVE;
            snprintf(r->how, sizeof(r->how), "online");
        } else if (f != HV_F_CORES && va > 0 && vb > va) {
            r->cls = HV_CLASS_LIVE;
            snprintf(r->how, sizeof(r->how), "hot-add");
        } else {
            r->cls = HV_CLASS_COLD;
        }
        if (f == HV_F_MEMORY)
            desired.memory_mib = vb;
        else if (f == HV_F_CPUS)
            desired.cpus = (int32_t)vb;
        else if (f == HV_F_CORES)
            desired.cores_per_socket = (int32_t)vb;
        else
            desired.disk_mib = vb;
        if (r->cls != HV_CLASS_NO || !reason)
            continue;
        char where[160];
        hj_ptr_dotted(where, sizeof(where), obj, path);
        add_uncovered(c, where, reason);
    }
    /* CanUpdateMachine: what this VM cannot take is not covered, by the rules UpdateMachine
     * applies (the probe runs the backend's plan on what the VM shows now, with the engine's
     * power-cycle refusals), under every powerCycle. powerCycle=Never: besides, only what
     * this VM can take live now, or already has, is covered. */
    bool never = in->settings->power_cycle == HV_PC_NEVER;
    struct hv_field_plan fp[HV_F_COUNT];
    char why[200] = "", blocker[300] = "";
    int probed = -99; /* not asked */
    bool ask = false;
    memset(fp, 0, sizeof(fp));
    for (size_t k = 0; k < c->n_fields; k++)
        ask |= c->fields[k].cls != HV_CLASS_NO;
    if (ask && have_ref && in->hooks && in->hooks->probe) {
        /* what UpdateMachine would plan with: the whole desired spec */
        if (!have_full)
            hv_desired_hw(p, in->des_infra, &full);
        probed =
            in->hooks->probe(in->hooks->ctx, p, &ref, &full, in->settings, fp, why, sizeof(why));
    }
    if (probed == -1) {
        c->unreadable = true;
        snprintf(c->unreadable_why, sizeof(c->unreadable_why), "%s", why);
    }
    /* A field the spec does not change but the VM does not show yet is changed too, so one
     * this VM cannot take fails the whole update: impossible, or under powerCycle=Never one
     * that needs a power cycle (UpdateMachine fails the whole change for it). */
    for (int f = 0; f < HV_F_COUNT && probed == 0 && !blocker[0]; f++) {
        bool listed = false;
        for (size_t k = 0; k < c->n_fields; k++)
            listed |= c->fields[k].f == (enum hv_field)f;
        if (!listed && fp[f].how == HV_HOW_IMPOSSIBLE)
            snprintf(blocker, sizeof(blocker), HV_MSG("the VM cannot take %s as desired: %s"),
                     hv_field_name(p, (enum hv_field)f), fp[f].reason);
        else if (!listed && never && fp[f].how == HV_HOW_COLD)
            snprintf(blocker, sizeof(blocker), HV_MSG("the VM cannot take %s as desired: %s"),
                     hv_field_name(p, (enum hv_field)f),
                     HV_MSG("needs a power cycle and powerCycle is Never"));
    }
    for (size_t k = 0; k < c->n_fields; k++) {
        struct hv_field_result *r = &c->fields[k];
        const struct hv_field_plan *q = &fp[r->f];
        const char *reason = NULL;
        char buf[400];
        if (r->cls == HV_CLASS_NO || probed == -1)
            continue;
        if (probed == -2) {
            c->pending = true; /* the hypervisor has not answered yet: ask CAPI to retry */
            continue;
        }
        if (probed == -3) {
            reason = HV_MSG("the VM was not found");
        } else if (probed == 0 && q->how == HV_HOW_IMPOSSIBLE) {
            snprintf(buf, sizeof(buf), "%s", q->reason);
            reason = buf;
        } else if (probed == 0 && blocker[0]) {
            reason = blocker;
        } else if (!never) {
            /* covered as the numbers say (live or with a power cycle) */
        } else if (probed == 0 && q->how == HV_HOW_NONE) {
            r->cls = HV_CLASS_HAVE; /* the spec lags behind the VM: nothing to do */
            r->how[0] = '\0';
        } else if (probed == 0 && q->how == HV_HOW_LIVE) {
            r->cls = HV_CLASS_LIVE;
            if (q->method[0])
                snprintf(r->how, sizeof(r->how), "%s", q->method);
        } else if (r->cls == HV_CLASS_COLD) {
            reason = HV_MSG("needs a power cycle and powerCycle is Never");
        } else if (probed == 0) {
            snprintf(buf, sizeof(buf), HV_MSG("not possible live on this VM now: %s"),
                     q->reason[0] ? q->reason : HV_MSG("needs a power cycle"));
            reason = buf;
        } /* else not asked (no VM to ask, no probe): live by the numbers */
        if (!reason)
            continue;
        r->cls = HV_CLASS_NO;
        char where[160], path[300];
        snprintf(path, sizeof(path), "%s%s", root, p->field[r->f].path);
        hj_ptr_dotted(where, sizeof(where), obj, path);
        add_uncovered(c, where, reason);
    }
    admit(c, in, p, obj);
    for (size_t k = 0; k < c->n_fields; k++) {
        struct hv_field_result *r = &c->fields[k];
        if (r->cls == HV_CLASS_NO)
            continue;
        char path[300];
        snprintf(path, sizeof(path), "%s%s", root, p->field[r->f].path);
        if (!c->infra_patch)
            c->infra_patch = hj_new_array();
        hv_jsonpatch_add_op(c->infra_patch, hj_ptr(in->cur_infra, path) ? "replace" : "add", path,
                            hj_ptr(in->des_infra, path));
        if (r->f == HV_F_MEMORY)
            c->desired.memory_mib = desired.memory_mib;
        else if (r->f == HV_F_CPUS)
            c->desired.cpus = desired.cpus;
        else if (r->f == HV_F_CORES)
            c->desired.cores_per_socket = desired.cores_per_socket;
        else
            c->desired.disk_mib = desired.disk_mib;
    }
}

/* Append the NULL-terminated strings to buf, truncating at cap. */
static void append(char *buf, size_t cap, ...) __attribute__((sentinel));
static void append(char *buf, size_t cap, ...)
{
    va_list ap;
    va_start(ap, cap);
    const char *s;
    size_t at = strlen(buf);
    while ((s = va_arg(ap, const char *)) != NULL) {
        size_t n = strlen(s);
        if (at + n >= cap)
            n = cap - at - 1;
        memcpy(buf + at, s, n);
        at += n;
        buf[at] = '\0';
    }
    va_end(ap);
}

static void build_message(struct hv_coverage *c)
{
    char *m = c->message;
    size_t cap = sizeof(c->message);
    m[0] = '\0';
    if (c->failure) {
        append(m, cap, HV_MSG_BLOCKED, (char *)NULL);
        for (size_t k = 0; k < c->n_uncovered; k++)
            append(m, cap, k ? "; " : " ", c->uncovered[k].where, " (", c->uncovered[k].reason, ")",
                   (char *)NULL);
        if (c->n_uncovered_all > c->n_uncovered)
            append(m, cap, HV_MSG("; and more"), (char *)NULL);
        return;
    }
    size_t covered = 0;
    for (size_t k = 0; k < c->n_fields; k++) {
        const struct hv_field_result *r = &c->fields[k];
        if (r->cls == HV_CLASS_NO)
            continue;
        append(m, cap, covered ? "; " : "", r->name, " ", r->from, "->", r->to,
               hv_class_suffix(r->cls), (char *)NULL);
        covered++;
    }
    if (!covered)
        append(m, cap, HV_MSG("nothing hvupdater can change in place"), (char *)NULL);
    else if (c->unchecked[0]) {
        char note[sizeof(c->unchecked) + 64];
        snprintf(note, sizeof(note), HV_MSG(" (not checked with the provider: %s)"), c->unchecked);
        append(m, cap, note, (char *)NULL);
    }
    if (c->n_uncovered) {
        append(m, cap, HV_MSG("; not covered, left to CAPI:"), (char *)NULL);
        for (size_t k = 0; k < c->n_uncovered; k++) {
            const struct hv_item *it = &c->uncovered[k];
            append(m, cap, k ? ", " : " ", it->where, (char *)NULL);
            /* A hardware field's reason says why; the generic ones would only repeat. */
            if (it->reason[0] && strcmp(it->reason, REASON_NOT_HARDWARE) &&
                strcmp(it->reason, REASON_NOT_A_FIELD))
                append(m, cap, " (", it->reason, ")", (char *)NULL);
        }
        if (c->n_uncovered_all > c->n_uncovered)
            append(m, cap, HV_MSG(", and more"), (char *)NULL);
    }
}

void hv_plan_coverage(const struct hv_plan_input *in, struct hv_coverage *c)
{
    /* all of c but its uncovered items, which come last (plan.h) */
    _Static_assert(sizeof(struct hv_coverage) - offsetof(struct hv_coverage, uncovered) <
                       sizeof(((struct hv_coverage *)0)->uncovered) + _Alignof(struct hv_coverage),
                   "hv_coverage's uncovered items come last");
    memset(c, 0, offsetof(struct hv_coverage, uncovered));
    c->desired.memory_mib = c->desired.cpus = c->desired.cores_per_socket = -1;
    c->desired.disk_mib = -1;
    const char *obj = in->machine_set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    const char *av = hj_get_str(in->des_infra, "apiVersion");
    const char *kind = hj_get_str(in->des_infra, "kind");
    const struct hv_profile *p = hv_profile_find(in->profiles, av, kind);
    if (p && p->is_template != in->machine_set)
        p = NULL;
    if (!p) {
        c->declined = true;
        snprintf(c->message, sizeof(c->message),
                 HV_MSG("declined: no hvupdater profile for %s %s; CAPI decides without hvupdater"),
                 kind ? kind : HV_MSG("(no kind)"), av ? av : HV_MSG("(no apiVersion)"));
        return;
    }
    const char *ckind = hj_get_str(in->cur_infra, "kind");
    const char *cav = hj_get_str(in->cur_infra, "apiVersion");
    struct infra_ctx x;
    memset(&x, 0, sizeof(x));
    x.c = c;
    x.p = p;
    x.obj = obj;
    if (!ckind || !cav || strcmp(ckind, kind) || strcmp(cav, av)) {
        char where[160];
        snprintf(where, sizeof(where), "%s.kind", obj);
        add_uncovered(c, where, HV_MSG("the infrastructure kind or apiVersion changes"));
    } else {
        diff("/spec", hj_get(in->cur_infra, "spec"), hj_get(in->des_infra, "spec"), infra_diff, &x);
        classify(c, in, p, obj, x.field_diff);
    }
    diff_machine(c, in);
    diff_boot(c, in);
    if (c->admit_pending && !c->pending && !c->unreadable) {
        c->failure = true;
        hj_free(c->infra_patch);
        c->infra_patch = NULL;
        snprintf(c->message, sizeof(c->message), "%s", c->admit_why);
        return;
    }
    if (c->pending || c->unreadable) {
        c->failure = true;
        hj_free(c->infra_patch);
        c->infra_patch = NULL;
        if (c->unreadable)
            snprintf(c->message, sizeof(c->message),
                     HV_MSG("cannot check the change on this VM: %s; retry"), c->unreadable_why);
        else if (in->settings->power_cycle == HV_PC_NEVER)
            snprintf(c->message, sizeof(c->message),
                     HV_MSG("still asking the hypervisor whether the change can be done live on "
                            "this VM; retry"));
        else
            snprintf(c->message, sizeof(c->message),
                     HV_MSG("still asking the hypervisor whether this VM can take the change; "
                            "retry"));
        return;
    }
    if (c->n_uncovered_all && in->settings->on_uncoverable == HV_UNC_BLOCK) {
        c->failure = true;
        hj_free(c->infra_patch);
        c->infra_patch = NULL;
    }
    build_message(c);
}

void hv_coverage_free(struct hv_coverage *c)
{
    hj_free(c->infra_patch);
    c->infra_patch = NULL;
}
