/* oprecord.c: JSON form of the operation record. Unknown or malformed records read as "no
 * record", so a damaged record restarts the operation from what the VM shows instead of
 * wedging it. */
#include "oprecord.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The live steps by their names in the record ("triesOf"). */
static const struct {
    enum hv_step_kind kind;
    const char *name;
} live_steps[3] = {{HV_STEP_LIVE_MEMORY, "live-memory"},
                   {HV_STEP_LIVE_CPUS, "live-cpus"},
                   {HV_STEP_LIVE_DISK, "live-disk"}};

static const char *const phase_names[HV_PH_COUNT] = {
    "none",      "planned",     "live",     "wait-live", "shutdown",
    "power-off", "reconfigure", "power-on", "done",      "failed"};

const char *hv_phase_name(enum hv_phase p)
{
    return p < HV_PH_COUNT ? phase_names[p] : "none";
}

bool hv_hw_equal(const struct hv_hw *a, const struct hv_hw *b)
{
    int64_t da = hv_disk_set(a->disk_mib) ? a->disk_mib : -1;
    int64_t db = hv_disk_set(b->disk_mib) ? b->disk_mib : -1;
    return a->memory_mib == b->memory_mib && a->cpus == b->cpus &&
           a->cores_per_socket == b->cores_per_socket && da == db;
}

/* A string of the record goes into its field with hj_text_copy: what does not fit is cut where
 * a UTF-8 character begins, so the field writes back as text a record reads again
 * (fuzz_oprecord: an owner cut inside a 2-byte character wrote a record no reader took, and the
 * operation it held read as none). The writer cuts the same way (hj_new_text) whatever the
 * engine's own snprintf did. */

/* The ref's fields as JSON: "" fields are left out, so records stay short. */
hj *hv_vm_ref_to_json(const struct hv_vm_ref *ref)
{
    const struct {
        const char *key, *val;
    } f[] = {{"server", ref->server}, {"uuid", ref->uuid},       {"name", ref->name},
             {"disk", ref->disk},     {"cluster", ref->cluster}, {"thumbprint", ref->thumbprint}};
    hj *o = hj_new_object();
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
        if (f[k].val[0])
            hj_obj_set_take(o, f[k].key, hj_new_text(f[k].val));
    return o;
}

void hv_vm_ref_from_json(const hj *o, struct hv_vm_ref *ref)
{
    const struct {
        const char *key;
        char *dst;
        size_t cap;
    } f[] = {{"server", ref->server, sizeof(ref->server)},
             {"uuid", ref->uuid, sizeof(ref->uuid)},
             {"name", ref->name, sizeof(ref->name)},
             {"disk", ref->disk, sizeof(ref->disk)},
             {"cluster", ref->cluster, sizeof(ref->cluster)},
             {"thumbprint", ref->thumbprint, sizeof(ref->thumbprint)}};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
        const char *v = hj_get_str(o, f[k].key);
        if (v)
            hj_text_copy(f[k].dst, f[k].cap, v);
    }
}

/* The Machine of a checked call as the record's "machine" object (its non-empty fields),
 * and back (absent from records of unchecked calls and of older versions: all "" then). */
struct machine_field {
    const char *key;
    char *val;
    size_t cap;
};

static size_t machine_fields(struct hv_machine_id *m, struct machine_field f[6])
{
    f[0] = (struct machine_field){"namespace", m->ns, sizeof(m->ns)};
    f[1] = (struct machine_field){"name", m->name, sizeof(m->name)};
    f[2] = (struct machine_field){"uid", m->uid, sizeof(m->uid)};
    f[3] = (struct machine_field){"infraApiVersion", m->infra_api_version,
                                  sizeof(m->infra_api_version)};
    f[4] = (struct machine_field){"infraKind", m->infra_kind, sizeof(m->infra_kind)};
    f[5] = (struct machine_field){"infraName", m->infra_name, sizeof(m->infra_name)};
    return 6;
}

static hj *machine_to_json(const struct hv_machine_id *m)
{
    struct hv_machine_id copy = *m;
    struct machine_field f[6];
    hj *o = hj_new_object();
    for (size_t k = 0, n = machine_fields(&copy, f); k < n; k++)
        if (f[k].val[0])
            hj_obj_set_take(o, f[k].key, hj_new_text(f[k].val));
    return o;
}

static void machine_from_json(const hj *o, struct hv_machine_id *m)
{
    struct machine_field f[6];
    for (size_t k = 0, n = machine_fields(m, f); k < n; k++) {
        const char *v = hj_get_str(o, f[k].key);
        if (v)
            hj_text_copy(f[k].val, f[k].cap, v);
    }
}

bool hv_oprecord_write(const struct hv_oprecord *r, char *buf, size_t cap)
{
    static const char *const fnames[HV_F_COUNT] = {"memory", "cpus", "cores", "disk"};
    hj *o = hj_new_object(), *d = hj_new_object(), *p = hj_new_object();
    hj_obj_set_take(o, "v", hj_new_int(1));
    hj_obj_set_take(d, "memoryMiB", hj_new_int(r->desired.memory_mib));
    hj_obj_set_take(d, "cpus", hj_new_int(r->desired.cpus));
    hj_obj_set_take(d, "coresPerSocket", hj_new_int(r->desired.cores_per_socket));
    if (hv_disk_set(r->desired.disk_mib)) /* absent: records stay as they were without disks */
        hj_obj_set_take(d, "diskMiB", hj_new_int(r->desired.disk_mib));
    hj_obj_set_take(o, "desired", d);
    if (r->prev.memory_mib > 0 || r->prev.cpus > 0 || r->prev.cores_per_socket > 0) {
        hj *pv = hj_new_object();
        hj_obj_set_take(pv, "memoryMiB", hj_new_int(r->prev.memory_mib));
        hj_obj_set_take(pv, "cpus", hj_new_int(r->prev.cpus));
        hj_obj_set_take(pv, "coresPerSocket", hj_new_int(r->prev.cores_per_socket));
        hj_obj_set_take(o, "previous", pv);
    }
    if (r->has_base) { /* absent: a record as older versions wrote it (they ignore it) */
        hj *b = hj_new_object();
        hj_obj_set_take(b, "memoryMiB", hj_new_int(r->base.hv_memory_mib));
        hj_obj_set_take(b, "cpus", hj_new_int(r->base.hv_cpus));
        hj_obj_set_take(b, "guestMemoryMiB", hj_new_int(r->base.guest_memory_mib));
        hj_obj_set_take(b, "guestCpus", hj_new_int(r->base.guest_cpus));
        hj_obj_set_take(o, "before", b);
    }
    hj_obj_set_take(o, "phase", hj_new_string(hv_phase_name(r->phase)));
    hj_obj_set_take(o, "cold", hj_new_bool(r->cold));
    if (r->rollback)
        hj_obj_set_take(o, "rollback", hj_new_bool(true));
    for (int f = 0; f < HV_F_COUNT; f++) {
        bool none = !r->plan[f][0] || !strcmp(r->plan[f], "none");
        if (f == HV_F_DISK && none)
            continue; /* like diskMiB: only in operations that change a disk */
        hj_obj_set_take(p, fnames[f], hj_new_text(none ? "none" : r->plan[f]));
    }
    hj_obj_set_take(o, "plan", p);
    hj_obj_set_take(o, "attempts", hj_new_int(r->attempts));
    for (int k = 0; k < 3 && r->attempts; k++)
        if (r->tries_of == live_steps[k].kind)
            hj_obj_set_take(o, "triesOf", hj_new_string(live_steps[k].name));
    hj_obj_set_take(o, "recycles", hj_new_int(r->recycles));
    if (r->starts)
        hj_obj_set_take(o, "starts", hj_new_int(r->starts));
    hj_obj_set_take(o, "startedAt", hj_new_int(r->started_at));
    hj_obj_set_take(o, "stepAt", hj_new_int(r->step_at));
    if (r->down_at)
        hj_obj_set_take(o, "downAt", hj_new_int(r->down_at));
    if (r->boot_at)
        hj_obj_set_take(o, "bootAt", hj_new_int(r->boot_at));
    if (r->off_first && r->phase == HV_PH_POWER_OFF)
        hj_obj_set_take(o, "offFirst", hj_new_bool(true));
    hj_obj_set_take(o, "owner", hj_new_text(r->owner));
    hj_obj_set_take(o, "policy", hj_new_text(r->policy));
    if (r->message[0])
        hj_obj_set_take(o, "message", hj_new_text(r->message));
    hj *rf = hv_vm_ref_to_json(&r->ref);
    if (rf->n)
        hj_obj_set_take(o, "ref", rf);
    else
        hj_free(rf);
    if (r->ref.machine.name[0])
        hj_obj_set_take(o, "machine", machine_to_json(&r->ref.machine));
    size_t len;
    char *text = hj_dump(o, &len);
    hj_free(o);
    bool ok = text && len < cap;
    if (ok)
        memcpy(buf, text, len + 1);
    free(text);
    return ok;
}

static int64_t int_at(const hj *o, const char *key, int64_t dflt)
{
    const hj *v = hj_get(o, key);
    return v && v->type == HJ_INT ? v->i : dflt;
}

bool hv_oprecord_read(struct hv_oprecord *r, const char *text)
{
    static const char *const fnames[HV_F_COUNT] = {"memory", "cpus", "cores", "disk"};
    char err[128];
    memset(r, 0, sizeof(*r));
    if (!text || !text[0])
        return false;
    hj *o = hj_parse(text, strlen(text), err, sizeof(err));
    const hj *d = hj_get(o, "desired");
    const char *ph = hj_get_str(o, "phase");
    bool ok = o && int_at(o, "v", 0) == 1 && d && d->type == HJ_OBJECT && ph;
    if (ok) {
        r->desired.memory_mib = int_at(d, "memoryMiB", -1);
        r->desired.cpus = (int32_t)int_at(d, "cpus", -1);
        r->desired.cores_per_socket = (int32_t)int_at(d, "coresPerSocket", -1);
        r->desired.disk_mib = int_at(d, "diskMiB", -1);
        const hj *pv = hj_get(o, "previous");
        bool pv_ok = pv && pv->type == HJ_OBJECT;
        r->prev.memory_mib = pv_ok ? int_at(pv, "memoryMiB", -1) : -1;
        r->prev.cpus = pv_ok ? (int32_t)int_at(pv, "cpus", -1) : -1;
        r->prev.cores_per_socket = pv_ok ? (int32_t)int_at(pv, "coresPerSocket", -1) : -1;
        const hj *b = hj_get(o, "before");
        r->has_base = b && b->type == HJ_OBJECT;
        r->base.hv_memory_mib = r->has_base ? int_at(b, "memoryMiB", -1) : -1;
        r->base.hv_cpus = r->has_base ? (int32_t)int_at(b, "cpus", -1) : -1;
        r->base.guest_memory_mib = r->has_base ? int_at(b, "guestMemoryMiB", -1) : -1;
        r->base.guest_cpus = r->has_base ? (int32_t)int_at(b, "guestCpus", -1) : -1;
        const hj *rb = hj_get(o, "rollback");
        r->rollback = rb && rb->type == HJ_BOOL && rb->b;
        r->prev.disk_mib = -1; /* disks only grow: a rollback leaves them as they are */
        r->phase = HV_PH_NONE;
        for (int k = 0; k < HV_PH_COUNT; k++)
            if (!strcmp(ph, phase_names[k]))
                r->phase = (enum hv_phase)k;
        const hj *c = hj_get(o, "cold");
        r->cold = c && c->type == HJ_BOOL && c->b;
        const hj *p = hj_get(o, "plan");
        for (int f = 0; f < HV_F_COUNT; f++) {
            const char *s = hj_get_str(p, fnames[f]);
            hj_text_copy(r->plan[f], sizeof(r->plan[f]), s ? s : "none");
        }
        r->attempts = (int)int_at(o, "attempts", 0);
        const char *tries_of = hj_get_str(o, "triesOf");
        for (int k = 0; k < 3 && tries_of; k++)
            if (!strcmp(tries_of, live_steps[k].name))
                r->tries_of = live_steps[k].kind;
        r->recycles = (int)int_at(o, "recycles", 0);
        r->starts = (int)int_at(o, "starts", 0);
        r->started_at = int_at(o, "startedAt", 0);
        r->step_at = int_at(o, "stepAt", 0);
        r->down_at = int_at(o, "downAt", 0);
        r->boot_at = int_at(o, "bootAt", 0);
        const hj *of = hj_get(o, "offFirst");
        r->off_first = r->phase == HV_PH_POWER_OFF && of && of->type == HJ_BOOL && of->b;
        const char *ow = hj_get_str(o, "owner"), *m = hj_get_str(o, "message");
        const char *pol = hj_get_str(o, "policy");
        hj_text_copy(r->policy, sizeof(r->policy), pol ? pol : "");
        hj_text_copy(r->owner, sizeof(r->owner), ow ? ow : "");
        hj_text_copy(r->message, sizeof(r->message), m ? m : "");
        hv_vm_ref_from_json(hj_get(o, "ref"), &r->ref);
        machine_from_json(hj_get(o, "machine"), &r->ref.machine);
        ok = r->phase != HV_PH_NONE;
    }
    hj_free(o);
    if (!ok)
        memset(r, 0, sizeof(*r));
    return ok;
}

/* "host" of an owner "host:pid.start" (or "host:pid", written before 2026-12-06). */
static size_t owner_host_len(const char *owner)
{
    const char *c = strrchr(owner, ':');
    return c ? (size_t)(c - owner) : strlen(owner);
}

bool hv_owner_previous(const char *owner, const char *mine)
{
    size_t hl = owner_host_len(owner);
    return strcmp(owner, mine) != 0 && hl == owner_host_len(mine) && !strncmp(owner, mine, hl);
}
