/* kv_patch.c: the JSON patches (RFC 6902) hvupdater sends to a VirtualMachine, one per step,
 * each beginning with a test of metadata.resourceVersion: the API server applies the patch
 * only to the object the step was decided on, else it refuses (the step is then BUSY and the
 * engine looks again). Pure: built from struct kv_state with yajl_gen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "kv_internal.h"

#define DOMAIN_PTR "/spec/template/spec/domain"

struct kv_patch {
    yajl_gen g;
    int ops;
};

static void ystr(yajl_gen g, const char *s)
{
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static void begin(struct kv_patch *p, const struct kv_state *st)
{
    p->g = yajl_gen_alloc(NULL);
    if (!p->g)
        abort();
    p->ops = 0;
    yajl_gen_array_open(p->g);
    yajl_gen_map_open(p->g);
    ystr(p->g, "op");
    ystr(p->g, "test");
    ystr(p->g, "path");
    ystr(p->g, "/metadata/resourceVersion");
    ystr(p->g, "value");
    ystr(p->g, st->rv);
    yajl_gen_map_close(p->g);
}

static void op_head(struct kv_patch *p, const char *op, const char *path)
{
    yajl_gen_map_open(p->g);
    ystr(p->g, "op");
    ystr(p->g, op);
    ystr(p->g, "path");
    ystr(p->g, path);
    p->ops++;
}

static void op_str(struct kv_patch *p, const char *op, const char *path, const char *v)
{
    op_head(p, op, path);
    ystr(p->g, "value");
    ystr(p->g, v);
    yajl_gen_map_close(p->g);
}

static void op_int(struct kv_patch *p, const char *op, const char *path, long long v)
{
    op_head(p, op, path);
    ystr(p->g, "value");
    yajl_gen_integer(p->g, v);
    yajl_gen_map_close(p->g);
}

static void op_bool(struct kv_patch *p, const char *path, bool v)
{
    op_head(p, "add", path);
    ystr(p->g, "value");
    yajl_gen_bool(p->g, v);
    yajl_gen_map_close(p->g);
}

static void op_remove(struct kv_patch *p, const char *path)
{
    op_head(p, "remove", path);
    yajl_gen_map_close(p->g);
}

/* add an empty object at path (its parent exists) */
static void op_obj(struct kv_patch *p, const char *path)
{
    op_head(p, "add", path);
    ystr(p->g, "value");
    yajl_gen_map_open(p->g);
    yajl_gen_map_close(p->g);
    yajl_gen_map_close(p->g);
}

/* the patch's text, or NULL when it has no op beyond the test */
static char *finish(struct kv_patch *p)
{
    yajl_gen_array_close(p->g);
    char *out = NULL;
    if (p->ops) {
        const unsigned char *buf;
        size_t len;
        yajl_gen_get_buf(p->g, &buf, &len);
        out = malloc(len + 1);
        if (!out)
            abort();
        memcpy(out, buf, len);
        out[len] = '\0';
    }
    yajl_gen_free(p->g);
    return out;
}

static void mib_text(char *out, size_t cap, int64_t mib)
{
    if (mib % 1024 == 0)
        snprintf(out, cap, "%lldGi", (long long)(mib / 1024));
    else
        snprintf(out, cap, "%lldMi", (long long)mib);
}

static void set_memory(struct kv_patch *p, const struct kv_state *st, int64_t mib, bool raise_max)
{
    char q[32];
    mib_text(q, sizeof(q), mib);
    if (!st->has_memory_obj)
        op_obj(p, DOMAIN_PTR "/memory");
    op_str(p, "add", DOMAIN_PTR "/memory/guest", q);
    if (raise_max && st->max_guest_mib > 0 && st->max_guest_mib < mib)
        op_str(p, "add", DOMAIN_PTR "/memory/maxGuest", q);
}

static void ensure_cpu(struct kv_patch *p, const struct kv_state *st, bool *made)
{
    if (!st->has_cpu_obj && !*made) {
        op_obj(p, DOMAIN_PTR "/cpu");
        *made = true;
    }
}

static void ensure_annotations(struct kv_patch *p, const struct kv_state *st, bool *made)
{
    if (!st->has_annotations && !*made) {
        op_obj(p, "/metadata/annotations");
        *made = true;
    }
}

/* "~1" is "/" inside a JSON pointer token */
#define PTR_RECORD   "/metadata/annotations/hvupdater.io~1operation"
#define PTR_STRATEGY "/metadata/annotations/hvupdater.io~1run-strategy"

static bool halted(const struct kv_state *st)
{
    return st->run_strategy[0] ? !strcmp(st->run_strategy, "Halted") : st->running == 0;
}

int kv_step_patch(const struct kv_state *st, const struct hv_step *s, char **out,
                  struct hv_err *err)
{
    struct kv_patch p;
    bool cpu_made = false, ann_made = false;
    *out = NULL;
    const struct hv_hw *d = &s->desired;
    switch (s->kind) {
    case HV_STEP_LIVE_MEMORY:
        if (d->memory_mib < 0)
            return kv_seterr(err, HV_E_INTERNAL, "live memory step without a desired memory");
        begin(&p, st);
        if (st->mem_mib != d->memory_mib)
            set_memory(&p, st, d->memory_mib, false);
        break;
    case HV_STEP_LIVE_CPUS:
        if (d->cpus < 0)
            return kv_seterr(err, HV_E_INTERNAL, "live vCPU step without desired sockets");
        begin(&p, st);
        if (st->sockets != d->cpus) {
            ensure_cpu(&p, st, &cpu_made);
            op_int(&p, "add", DOMAIN_PTR "/cpu/sockets", d->cpus);
        }
        break;
    case HV_STEP_SHUTDOWN:
    case HV_STEP_POWER_OFF:
        begin(&p, st);
        if (!halted(st)) {
            if (st->run_strategy[0]) {
                if (!st->saved_strategy[0]) {
                    ensure_annotations(&p, st, &ann_made);
                    op_str(&p, "add", PTR_STRATEGY, st->run_strategy);
                }
                op_str(&p, "add", "/spec/runStrategy", "Halted");
            } else {
                op_bool(&p, "/spec/running", false);
            }
        }
        break;
    case HV_STEP_RECONFIGURE:
        if (kv_running(st) || st->vmi)
            return kv_seterr(err, HV_E_INVALID_STATE, "reconfigure of a running VirtualMachine");
        begin(&p, st);
        if (d->memory_mib >= 0 && d->memory_mib != st->mem_mib)
            set_memory(&p, st, d->memory_mib, true);
        if (d->cpus >= 0 && d->cpus != st->sockets) {
            ensure_cpu(&p, st, &cpu_made);
            op_int(&p, "add", DOMAIN_PTR "/cpu/sockets", d->cpus);
            if (st->max_sockets > 0 && st->max_sockets < d->cpus)
                op_int(&p, "add", DOMAIN_PTR "/cpu/maxSockets", d->cpus);
        }
        if (d->cores_per_socket >= 0 && d->cores_per_socket != st->cores) {
            ensure_cpu(&p, st, &cpu_made);
            op_int(&p, "add", DOMAIN_PTR "/cpu/cores", d->cores_per_socket);
        }
        break;
    case HV_STEP_POWER_ON:
        begin(&p, st);
        if (halted(st)) {
            if (st->run_strategy[0]) {
                bool keep = !strcmp(st->saved_strategy, "Always") ||
                            !strcmp(st->saved_strategy, "RerunOnFailure");
                op_str(&p, "add", "/spec/runStrategy", keep ? st->saved_strategy : "Always");
            } else {
                op_bool(&p, "/spec/running", true);
            }
        }
        if (st->saved_strategy[0])
            op_remove(&p, PTR_STRATEGY);
        break;
    case HV_STEP_LIVE_DISK:
        return kv_seterr(err, HV_E_UNSUPPORTED, "the KubeVirt backend does not resize disks");
    default:
        return kv_seterr(err, HV_E_INTERNAL, "unknown step kind %d", (int)s->kind);
    }
    *out = finish(&p);
    return HV_OK;
}

int kv_record_patch(const struct kv_state *st, const char *record, char **out)
{
    struct kv_patch p;
    bool ann_made = false;
    begin(&p, st);
    if (record[0] && strcmp(record, st->record)) {
        ensure_annotations(&p, st, &ann_made);
        op_str(&p, "add", PTR_RECORD, record);
    } else if (!record[0] && st->record[0]) {
        op_remove(&p, PTR_RECORD);
    }
    *out = finish(&p);
    return HV_OK;
}
