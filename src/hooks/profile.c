/* profile.c: built-in infra kind profiles and loading more from the config file.
 * Adding an infra kind is data: a new entry here or in the config, never a new code path. */
#include "profile.h"
#include "hv_quantity.h"
#include "pattern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define INFRA_GROUP "infrastructure.cluster.x-k8s.io"

static void set_field(struct hv_profile *p, enum hv_field f, const char *path, enum hv_unit u)
{
    p->field[f].set = true;
    p->field[f].unit_number = -1;
    snprintf(p->field[f].path, sizeof(p->field[f].path), "%s", path);
    p->field[f].unit = u;
}

static struct hv_profile vsphere(bool tmpl)
{
    struct hv_profile p;
    memset(&p, 0, sizeof(p));
    snprintf(p.kind, sizeof(p.kind), "%s", tmpl ? "VSphereMachineTemplate" : "VSphereMachine");
    snprintf(p.api_group, sizeof(p.api_group), INFRA_GROUP);
    snprintf(p.versions[0], sizeof(p.versions[0]), "v1beta1");
    snprintf(p.versions[1], sizeof(p.versions[1]), "v1beta2");
    p.n_versions = 2;
    p.is_template = tmpl;
    snprintf(p.backend, sizeof(p.backend), "vsphere");
    set_field(&p, HV_F_MEMORY, "/memoryMiB", HV_UNIT_MIB);
    set_field(&p, HV_F_CPUS, "/numCPUs", HV_UNIT_MIB);
    set_field(&p, HV_F_CORES, "/numCoresPerSocket", HV_UNIT_MIB);
    set_field(&p, HV_F_DISK, "/diskGiB", HV_UNIT_GIB); /* the first virtual disk */
    snprintf(p.providerid_prefix, sizeof(p.providerid_prefix), "vsphere://");
    snprintf(p.server_path, sizeof(p.server_path), "/server");
    snprintf(p.thumbprint_path, sizeof(p.thumbprint_path), "/thumbprint");
    return p;
}

static struct hv_profile libvirt(bool tmpl)
{
    struct hv_profile p;
    memset(&p, 0, sizeof(p));
    snprintf(p.kind, sizeof(p.kind), "%s", tmpl ? "LibvirtMachineTemplate" : "LibvirtMachine");
    snprintf(p.api_group, sizeof(p.api_group), INFRA_GROUP);
    p.is_template = tmpl;
    snprintf(p.backend, sizeof(p.backend), "libvirt");
    set_field(&p, HV_F_MEMORY, "/memoryMiB", HV_UNIT_MIB);
    set_field(&p, HV_F_CPUS, "/vcpu", HV_UNIT_MIB);
    set_field(&p, HV_F_DISK, "/diskGiB", HV_UNIT_GIB);
    snprintf(p.field[HV_F_DISK].target, sizeof(p.field[HV_F_DISK].target), "vda");
    snprintf(p.providerid_prefix, sizeof(p.providerid_prefix), "libvirt://");
    p.by_name = true;
    return p;
}

/* CAPK (cluster-api-provider-kubevirt): the KubeVirt VirtualMachine's template inside the
 * KubevirtMachine. memory.guest and cpu.sockets are what KubeVirt's LiveUpdate hot-plugs;
 * cpu.cores the backend always plans with a restart. The VM is named after the
 * KubevirtMachine (providerID kubevirt://NAME) in its namespace, or in the template's. */
#define KV_DOMAIN "/virtualMachineTemplate/spec/template/spec/domain"
static struct hv_profile kubevirt(bool tmpl)
{
    struct hv_profile p;
    memset(&p, 0, sizeof(p));
    snprintf(p.kind, sizeof(p.kind), "%s", tmpl ? "KubevirtMachineTemplate" : "KubevirtMachine");
    snprintf(p.api_group, sizeof(p.api_group), INFRA_GROUP);
    snprintf(p.versions[0], sizeof(p.versions[0]), "v1alpha1");
    p.n_versions = 1;
    p.is_template = tmpl;
    snprintf(p.backend, sizeof(p.backend), "kubevirt");
    set_field(&p, HV_F_MEMORY, KV_DOMAIN "/memory/guest", HV_UNIT_QUANTITY);
    set_field(&p, HV_F_CPUS, KV_DOMAIN "/cpu/sockets", HV_UNIT_MIB);
    set_field(&p, HV_F_CORES, KV_DOMAIN "/cpu/cores", HV_UNIT_MIB);
    snprintf(p.providerid_prefix, sizeof(p.providerid_prefix), "kubevirt://");
    p.by_name = true;
    p.namespaced = true;
    snprintf(p.namespace_path, sizeof(p.namespace_path),
             "/virtualMachineTemplate/metadata/namespace");
    return p;
}

static void put(struct hv_profiles *ps, const struct hv_profile *p)
{
    for (size_t k = 0; k < ps->n; k++) {
        if (!strcmp(ps->v[k].kind, p->kind) && !strcmp(ps->v[k].api_group, p->api_group)) {
            ps->v[k] = *p;
            return;
        }
    }
    struct hv_profile *nv = realloc(ps->v, (ps->n + 1) * sizeof(*nv));
    if (!nv)
        abort();
    ps->v = nv;
    ps->v[ps->n++] = *p;
}

void hv_profiles_builtin(struct hv_profiles *ps)
{
    struct hv_profile p;
    ps->v = NULL;
    ps->n = 0;
    p = vsphere(false);
    put(ps, &p);
    p = vsphere(true);
    put(ps, &p);
    p = libvirt(false);
    put(ps, &p);
    p = libvirt(true);
    put(ps, &p);
    p = kubevirt(false);
    put(ps, &p);
    p = kubevirt(true);
    put(ps, &p);
}

void hv_profiles_free(struct hv_profiles *ps)
{
    free(ps->v);
    ps->v = NULL;
    ps->n = 0;
}

static bool valid_pointer(const char *s)
{
    char **t;
    size_t n;
    if (!s[0] || hj_ptr_split(s, &t, &n) < 0)
        return false;
    hj_ptr_tokens_free(t, n);
    return true;
}

/* Copy a string member into dst; absent is fine (keeps dst), wrong type or too long fails. */
static int str_member(const hj *o, const char *key, char *dst, size_t cap, bool pointer,
                      const char *where, char *err, size_t errlen)
{
    const hj *v = hj_get(o, key);
    if (!v)
        return 0;
    if (v->type != HJ_STRING || v->slen >= cap || strlen(v->s) != v->slen ||
        (pointer && (!valid_pointer(v->s) || !hv_re_match(HV_RE_JSON_POINTER, v->s)))) {
        snprintf(err, errlen, "%s: \"%s\" must be a %s of at most %zu bytes", where, key,
                 pointer ? "JSON pointer" : "string", cap - 1);
        return -1;
    }
    memcpy(dst, v->s, v->slen + 1);
    return 0;
}

static int only_keys(const hj *o, const char *const *allowed, const char *where, char *err,
                     size_t errlen)
{
    for (size_t k = 0; k < o->n; k++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(*a, o->keys[k]);
        if (!ok) {
            snprintf(err, errlen, "%s: unknown key \"%s\"", where, o->keys[k]);
            return -1;
        }
    }
    return 0;
}

/* Disk selector: "target" (libvirt device, e.g. "vda") or "unitNumber" (vSphere). */
static int load_disk_selector(struct hv_profile *p, const hj *v, const char *where, char *err,
                              size_t errlen)
{
    struct hv_field_def *fd = &p->field[HV_F_DISK];
    const hj *t = hj_get(v, "target"), *u = hj_get(v, "unitNumber");
    bool libvirt = !strcmp(p->backend, "libvirt");
    if (t && !libvirt) {
        snprintf(err, errlen, "%s: \"target\" applies to the libvirt backend only", where);
        return -1;
    }
    if (u && libvirt) {
        snprintf(err, errlen, "%s: \"unitNumber\" applies to the vsphere backend only", where);
        return -1;
    }
    if (str_member(v, "target", fd->target, sizeof(fd->target), false, where, err, errlen) < 0)
        return -1;
    if (t && (!fd->target[0] ||
              strspn(fd->target, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(fd->target))) {
        snprintf(err, errlen, "%s: \"target\" must be a device name such as vda", where);
        return -1;
    }
    if (u) {
        if (u->type != HJ_INT || u->i < 0 || u->i > 63) {
            snprintf(err, errlen, "%s: \"unitNumber\" must be an integer from 0 to 63", where);
            return -1;
        }
        fd->unit_number = (int)u->i;
    }
    if (libvirt && !fd->target[0]) {
        snprintf(err, errlen, "%s: \"target\" is required (the disk's target device, e.g. vda)",
                 where);
        return -1;
    }
    return 0;
}

static int load_field(struct hv_profile *p, enum hv_field f, const hj *v, const char *where,
                      char *err, size_t errlen)
{
    static const char *const keys[] = {"path", "unit", NULL};
    static const char *const disk_keys[] = {"path", "unit", "target", "unitNumber", NULL};
    if (v->type != HJ_OBJECT ||
        only_keys(v, f == HV_F_DISK ? disk_keys : keys, where, err, errlen) < 0) {
        if (v->type != HJ_OBJECT)
            snprintf(err, errlen, "%s: must be an object", where);
        return -1;
    }
    memset(&p->field[f], 0, sizeof(p->field[f]));
    p->field[f].unit_number = -1;
    if (f == HV_F_DISK)
        p->field[f].unit = HV_UNIT_GIB;
    if (str_member(v, "path", p->field[f].path, sizeof(p->field[f].path), true, where, err,
                   errlen) < 0)
        return -1;
    if (!p->field[f].path[0]) {
        snprintf(err, errlen, "%s: \"path\" is required", where);
        return -1;
    }
    const char *unit = hj_get_str(v, "unit");
    if (hj_get(v, "unit") && (!unit || (f != HV_F_MEMORY && f != HV_F_DISK))) {
        snprintf(err, errlen, "%s: \"unit\" applies to memory and disk only, as a string", where);
        return -1;
    }
    if (f == HV_F_MEMORY && !unit) {
        snprintf(err, errlen, "%s: \"unit\" is required (KiB, MiB, GiB, bytes or quantity)", where);
        return -1;
    }
    if (unit) {
        static const char *const names[] = {"MiB", "KiB", "GiB", "bytes", "quantity"};
        size_t k;
        for (k = 0; k < 5 && strcmp(unit, names[k]); k++)
            ;
        if (k == 5) {
            snprintf(err, errlen, "%s: unit must be KiB, MiB, GiB, bytes or quantity", where);
            return -1;
        }
        p->field[f].unit = (enum hv_unit)k;
    }
    if (f == HV_F_DISK && load_disk_selector(p, v, where, err, errlen) < 0)
        return -1;
    p->field[f].set = true;
    return 0;
}

static int load_one(struct hv_profile *p, const hj *o, size_t idx, char *err, size_t errlen)
{
    static const char *const top[] = {"kind",    "apiGroup", "apiVersions", "template",
                                      "backend", "fields",   "identity",    NULL};
    static const char *const fkeys[] = {"memory", "cpus", "coresPerSocket", "disk", NULL};
    static const char *const ikeys[] = {"providerIDPrefix", "byName", "serverPath", "namespacePath",
                                        NULL};
    char where[96];
    snprintf(where, sizeof(where), "profiles[%zu]", idx);
    if (o->type != HJ_OBJECT) {
        snprintf(err, errlen, "%s: must be an object", where);
        return -1;
    }
    if (only_keys(o, top, where, err, errlen) < 0)
        return -1;
    memset(p, 0, sizeof(*p));
    snprintf(p->api_group, sizeof(p->api_group), INFRA_GROUP);
    if (str_member(o, "kind", p->kind, sizeof(p->kind), false, where, err, errlen) < 0 ||
        str_member(o, "apiGroup", p->api_group, sizeof(p->api_group), false, where, err, errlen) <
            0 ||
        str_member(o, "backend", p->backend, sizeof(p->backend), false, where, err, errlen) < 0)
        return -1;
    if (!p->kind[0] || !p->backend[0]) {
        snprintf(err, errlen, "%s: \"kind\" and \"backend\" are required", where);
        return -1;
    }
    if (!hv_re_match(HV_RE_KUBE_KIND, p->kind)) {
        snprintf(err, errlen, "%s: \"kind\" must be a Kubernetes kind (e.g. VSphereMachine)",
                 where);
        return -1;
    }
    if (!hv_re_match(HV_RE_DNS1123_SUB, p->api_group)) {
        snprintf(err, errlen, "%s: \"apiGroup\" must be a DNS-1123 subdomain", where);
        return -1;
    }
    if (strcmp(p->backend, "libvirt") && strcmp(p->backend, "vsphere") &&
        strcmp(p->backend, "kubevirt")) {
        snprintf(err, errlen, "%s: backend must be libvirt, vsphere or kubevirt", where);
        return -1;
    }
    const hj *vers = hj_get(o, "apiVersions");
    if (vers) {
        if (vers->type != HJ_ARRAY || vers->n == 0 || vers->n > 8) {
            snprintf(err, errlen,
                     "%s: \"apiVersions\" must be an array of 1 to 8 versions (leave it out for "
                     "any version)",
                     where);
            return -1;
        }
        for (size_t k = 0; k < vers->n; k++) {
            const hj *s = vers->items[k];
            if (s->type != HJ_STRING || s->slen == 0 || s->slen >= sizeof(p->versions[0]) ||
                strlen(s->s) != s->slen || !hv_re_match(HV_RE_KUBE_VERSION, s->s)) {
                snprintf(err, errlen,
                         "%s: apiVersions[%zu] must be an API version such as v1beta1 (at most "
                         "%zu characters)",
                         where, k, sizeof(p->versions[0]) - 1);
                return -1;
            }
            for (size_t j = 0; j < k; j++) {
                if (!strcmp(p->versions[j], s->s)) {
                    snprintf(err, errlen, "%s: apiVersions[%zu] repeats apiVersions[%zu]", where, k,
                             j);
                    return -1;
                }
            }
            memcpy(p->versions[p->n_versions++], s->s, s->slen + 1);
        }
    }
    const hj *t = hj_get(o, "template");
    if (t && t->type != HJ_BOOL) {
        snprintf(err, errlen, "%s: \"template\" must be a boolean", where);
        return -1;
    }
    p->is_template = t && t->b;
    const hj *fields = hj_get(o, "fields");
    if (!fields || fields->type != HJ_OBJECT || fields->n == 0) {
        snprintf(err, errlen, "%s: \"fields\" must be an object with at least one field", where);
        return -1;
    }
    char fwhere[128];
    snprintf(fwhere, sizeof(fwhere), "%s.fields", where);
    if (only_keys(fields, fkeys, fwhere, err, errlen) < 0)
        return -1;
    for (int f = 0; f < HV_F_COUNT; f++) {
        const hj *fv = hj_get(fields, fkeys[f]);
        char fw[160];
        snprintf(fw, sizeof(fw), "%s.fields.%s", where, fkeys[f]);
        if (fv && load_field(p, (enum hv_field)f, fv, fw, err, errlen) < 0)
            return -1;
    }
    const hj *id = hj_get(o, "identity");
    if (!id) {
        snprintf(err, errlen, "%s: \"identity\" is required", where);
        return -1;
    }
    {
        char iw[128];
        snprintf(iw, sizeof(iw), "%s.identity", where);
        if (id->type != HJ_OBJECT || only_keys(id, ikeys, iw, err, errlen) < 0) {
            if (id->type != HJ_OBJECT)
                snprintf(err, errlen, "%s: must be an object", iw);
            return -1;
        }
        if (str_member(id, "providerIDPrefix", p->providerid_prefix, sizeof(p->providerid_prefix),
                       false, iw, err, errlen) < 0 ||
            str_member(id, "serverPath", p->server_path, sizeof(p->server_path), true, iw, err,
                       errlen) < 0)
            return -1;
        if (hj_get(id, "providerIDPrefix") &&
            !hv_re_match(HV_RE_PROVIDER_ID, p->providerid_prefix)) {
            snprintf(err, errlen,
                     "%s: \"providerIDPrefix\" must be scheme:// and more, e.g. vsphere://", iw);
            return -1;
        }
        const hj *bn = hj_get(id, "byName");
        if (bn && bn->type != HJ_BOOL) {
            snprintf(err, errlen, "%s: \"byName\" must be a boolean", iw);
            return -1;
        }
        p->by_name = bn && bn->b;
        /* a kubevirt profile's VM lives in a namespace: the infra object's, or the string at
         * namespacePath */
        p->namespaced = !strcmp(p->backend, "kubevirt");
        if (str_member(id, "namespacePath", p->namespace_path, sizeof(p->namespace_path), true, iw,
                       err, errlen) < 0)
            return -1;
        if (p->namespace_path[0] && !p->namespaced) {
            snprintf(err, errlen, "%s: \"namespacePath\" applies to the kubevirt backend only", iw);
            return -1;
        }
    }
    if (!p->providerid_prefix[0] && !p->by_name) {
        snprintf(err, errlen, "%s: identity needs providerIDPrefix or byName", where);
        return -1;
    }
    return 0;
}

int hv_profiles_load(struct hv_profiles *ps, const hj *arr, char *err, size_t errlen)
{
    if (!arr || arr->type != HJ_ARRAY) {
        snprintf(err, errlen, "profiles: must be an array");
        return -1;
    }
    for (size_t k = 0; k < arr->n; k++) {
        struct hv_profile p;
        if (load_one(&p, arr->items[k], k, err, errlen) < 0)
            return -1;
        put(ps, &p);
    }
    return 0;
}

const struct hv_profile *hv_profile_find(const struct hv_profiles *ps, const char *api_version,
                                         const char *kind)
{
    if (!api_version || !kind)
        return NULL;
    const char *slash = strchr(api_version, '/');
    if (!slash)
        return NULL;
    size_t glen = (size_t)(slash - api_version);
    for (size_t k = 0; k < ps->n; k++) {
        const struct hv_profile *p = &ps->v[k];
        if (strcmp(p->kind, kind) || strlen(p->api_group) != glen ||
            strncmp(p->api_group, api_version, glen))
            continue;
        if (p->n_versions == 0)
            return p;
        for (size_t v = 0; v < p->n_versions; v++)
            if (!strcmp(p->versions[v], slash + 1))
                return p;
    }
    return NULL;
}

const char *hv_field_name(const struct hv_profile *p, enum hv_field f)
{
    const char *s = strrchr(p->field[f].path, '/');
    return s ? s + 1 : p->field[f].path;
}

void hv_profile_disk_ref(const struct hv_profile *p, char *out, size_t cap)
{
    const struct hv_field_def *fd = &p->field[HV_F_DISK];
    if (!fd->set)
        snprintf(out, cap, "%s", "");
    else if (fd->target[0])
        snprintf(out, cap, "%s", fd->target);
    else if (fd->unit_number >= 0)
        snprintf(out, cap, "%d", fd->unit_number);
    else
        snprintf(out, cap, "%s", "");
}

const char *hv_profile_spec_root(const struct hv_profile *p)
{
    return p->is_template ? "/spec/template/spec" : "/spec";
}

int64_t hv_unit_to_mib(const hj *v, enum hv_unit u)
{
    if (v && u == HV_UNIT_QUANTITY) {
        /* a quantity string, or a whole number of bytes as an integer */
        int64_t b = v->type == HJ_STRING && strlen(v->s) == v->slen ? hv_quantity_bytes(v->s)
                    : v->type == HJ_INT                             ? v->i
                                                                    : -1;
        return b > 0 && b % (1024 * 1024) == 0 ? b / (1024 * 1024) : -1;
    }
    if (!v || (v->type != HJ_INT && v->type != HJ_FLOAT))
        return -1;
    double x = v->type == HJ_INT ? (double)v->i : v->f;
    if (v->type == HJ_FLOAT && u == HV_UNIT_GIB) { /* 8.5 GiB is a whole 8704 MiB */
        double m = x * 1024.0;
        return m > 0 && m == floor(m) && m <= 9.0e15 ? (int64_t)m : -1;
    }
    if (!(x > 0) || x != floor(x) || x > 9.0e15)
        return -1;
    int64_t n = v->type == HJ_INT ? v->i : (int64_t)x;
    switch (u) {
    case HV_UNIT_MIB:
        return n;
    case HV_UNIT_GIB:
        return n > INT64_MAX / 1024 ? -1 : n * 1024;
    case HV_UNIT_KIB:
        return n % 1024 ? -1 : n / 1024;
    case HV_UNIT_BYTES:
        return n % (1024 * 1024) ? -1 : n / (1024 * 1024);
    case HV_UNIT_QUANTITY:
        break; /* above */
    }
    return -1;
}
