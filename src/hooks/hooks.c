/* hooks.c: request checks and response building for discovery and the three in-place hooks.
 * Every Failure message here is fixed text plus names from the request, so CAPI shows the
 * same condition on every retry. Patches go out as base64 of their JSON text (Go []byte). */
#include "hooks.h"
#include "base64.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hj *hv_hook_response(enum hv_hook h, bool failure, const char *message)
{
    char kind[64];
    hj *r = hj_new_object();
    snprintf(kind, sizeof(kind), "%sResponse", hv_hook_name(h));
    hj_obj_set_take(r, "apiVersion", hj_new_string(HV_HOOKS_API));
    hj_obj_set_take(r, "kind", hj_new_string(kind));
    hj_obj_set_take(r, "status", hj_new_string(failure ? "Failure" : "Success"));
    if (message && message[0])
        hj_obj_set_take(r, "message", hj_new_text(message));
    return r;
}

static hj *discovery(const struct hv_hooks_ctx *ctx)
{
    hj *r = hv_hook_response(HV_HOOK_DISCOVERY, false, NULL);
    hj *hs = hj_new_array();
    for (int h = HV_HOOK_CAN_UPDATE_MACHINE; h < HV_HOOK_COUNT; h++) {
        hj *e = hj_new_object(), *rh = hj_new_object();
        hj_obj_set_take(e, "name", hj_new_string(hv_hook_handler_name(h)));
        hj_obj_set_take(rh, "apiVersion", hj_new_string(HV_HOOKS_API));
        hj_obj_set_take(rh, "hook", hj_new_string(hv_hook_name(h)));
        hj_obj_set_take(e, "requestHook", rh);
        hj_obj_set_take(e, "timeoutSeconds", hj_new_int(ctx->timeout_s));
        bool ignore = ctx->can_update_ignore && h != HV_HOOK_UPDATE_MACHINE;
        hj_obj_set_take(e, "failurePolicy", hj_new_string(ignore ? "Ignore" : "Fail"));
        hj_arr_push_take(hs, e);
    }
    hj_obj_set_take(r, "handlers", hs);
    return r;
}

/* Check apiVersion/kind of the request; NULL when fine, else the Failure message. */
static const char *check_envelope(enum hv_hook h, const hj *req, char *buf, size_t cap)
{
    const char *av = hj_get_str(req, "apiVersion"), *kind = hj_get_str(req, "kind");
    char want[64];
    snprintf(want, sizeof(want), "%sRequest", hv_hook_name(h));
    if (!kind) {
        snprintf(buf, cap, HV_MSG("request has no kind (want %s)"), want);
        return buf;
    }
    if (strcmp(kind, want)) {
        snprintf(buf, cap, HV_MSG("request kind is not %s"), want);
        return buf;
    }
    if (av && strcmp(av, HV_HOOKS_API)) {
        snprintf(buf, cap, HV_MSG("request apiVersion is not %s"), HV_HOOKS_API);
        return buf;
    }
    return NULL;
}

/* The object at req.<side>.<name>, or a message naming what is missing. */
static const hj *need_obj(const hj *req, const char *side, const char *name, bool need_spec,
                          char *buf, size_t cap, const char **msg)
{
    if (*msg)
        return NULL;
    const hj *s = hj_get(req, side);
    if (!s || s->type != HJ_OBJECT) {
        snprintf(buf, cap, HV_MSG("request has no %s"), side);
        *msg = buf;
        return NULL;
    }
    const hj *o = hj_get(s, name);
    if (!o || o->type != HJ_OBJECT) {
        snprintf(buf, cap, HV_MSG("request has no %s.%s"), side, name);
        *msg = buf;
        return NULL;
    }
    if (!hj_get_str(o, "kind") || !hj_get_str(o, "apiVersion")) {
        snprintf(buf, cap, HV_MSG("%s.%s has no %s"), side, name,
                 hj_get_str(o, "kind") ? "apiVersion" : "kind");
        *msg = buf;
        return NULL;
    }
    const hj *spec = hj_get(o, "spec");
    if (need_spec && (!spec || spec->type != HJ_OBJECT)) {
        snprintf(buf, cap, HV_MSG("%s.%s has no spec"), side, name);
        *msg = buf;
        return NULL;
    }
    return o;
}

static const hj *opt_obj(const hj *req, const char *side, const char *name)
{
    const hj *o = hj_get(hj_get(req, side), name);
    return o && o->type == HJ_OBJECT ? o : NULL;
}

bool hv_hook_put_patch(hj *r, const char *field, const hj *ops)
{
    size_t len = 0;
    char *text = hj_dump(ops, &len);
    char *b64 = text ? hv_b64_encode(text, len) : NULL;
    if (!b64) { /* out of memory: no patch rather than a broken one */
        free(text);
        return false;
    }
    hj *p = hj_new_object();
    hj_obj_set_take(p, "patchType", hj_new_string("JSONPatch"));
    hj_obj_set_take(p, "patch", hj_new_string(b64));
    hj_obj_set_take(r, field, p);
    free(b64);
    free(text);
    return true;
}

bool hv_affects_availability(const struct hv_settings *s)
{
    /* Under powerCycle: Never, UpdateMachine never powers a running VM off: a change is live
     * or fails with the VM running. Under IfNeeded any covered change may take a power cycle
     * (a shrink, a VM without room, a live change that does not show in time). */
    return s->power_cycle != HV_PC_NEVER;
}

void hv_hook_put_affects(hj *r, bool affects)
{
    hj_obj_set_take(r, "affectsAvailability", hj_new_bool(affects));
}

int hv_hooks_own_plan(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                      const struct hv_settings *s, struct hv_coverage *c, char *buf, size_t cap)
{
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const char *infra = set ? "infrastructureMachineTemplate" : "infrastructureMachine";
    const char *mach = set ? "machineSet" : "machine";
    const char *boot = set ? "bootstrapConfigTemplate" : "bootstrapConfig";
    const char *msg = NULL;
    const hj *des = need_obj(req, "desired", infra, true, buf, cap, &msg);
    const hj *cur = need_obj(req, "current", infra, true, buf, cap, &msg);
    if (msg)
        return -1;
    struct hv_plan_input in = {
        .profiles = ctx->profiles,
        .settings = s,
        .machine_set = set,
        .cur_machine = opt_obj(req, "current", mach),
        .des_machine = opt_obj(req, "desired", mach),
        .cur_infra = cur,
        .des_infra = des,
        .cur_boot = opt_obj(req, "current", boot),
        .des_boot = opt_obj(req, "desired", boot),
        .hooks = ctx->plan_hooks,
    };
    hv_plan_coverage(&in, c);
    return 0;
}

static hj *can_update(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                      const struct hv_settings *s)
{
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    char buf[300];
    struct hv_coverage c;
    if (hv_hooks_own_plan(ctx, h, req, s, &c, buf, sizeof(buf)) < 0)
        return hv_hook_response(h, true, buf);
    hj *r = hv_hook_response(h, c.failure, c.message);
    if (c.infra_patch) {
        if (!hv_hook_put_patch(
                r, set ? "infrastructureMachineTemplatePatch" : "infrastructureMachinePatch",
                c.infra_patch)) {
            hj_free(r); /* covered without its patch would be a lie */
            r = hv_hook_response(h, true, HV_MSG("out of memory"));
        } else {
            hv_hook_put_affects(r, hv_affects_availability(s));
        }
    }
    hv_coverage_free(&c);
    return r;
}

/* The Machine and infra machine of a call the machine check passed (the request is then the
 * API server's word: its Machine's uid is the stored one's), for the operation record. */
static void checked_machine(const hj *machine, const hj *infra, struct hv_machine_id *m)
{
    const hj *md = hj_get(machine, "metadata"), *imd = hj_get(infra, "metadata");
    const struct {
        char *dst;
        size_t cap;
        const char *v;
    } f[] = {{m->ns, sizeof(m->ns), hj_get_str(md, "namespace")},
             {m->name, sizeof(m->name), hj_get_str(md, "name")},
             {m->uid, sizeof(m->uid), hj_get_str(md, "uid")},
             {m->infra_api_version, sizeof(m->infra_api_version), hj_get_str(infra, "apiVersion")},
             {m->infra_kind, sizeof(m->infra_kind), hj_get_str(infra, "kind")},
             {m->infra_name, sizeof(m->infra_name), hj_get_str(imd, "name")}};
    memset(m, 0, sizeof(*m));
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
        if (f[k].v && strlen(f[k].v) < f[k].cap)
            memcpy(f[k].dst, f[k].v, strlen(f[k].v) + 1);
}

void hv_hooks_own_update(const struct hv_hooks_ctx *ctx, const hj *req, const struct hv_settings *s,
                         struct hv_update_result *res, bool *no_profile)
{
    char buf[300];
    const char *msg = NULL;
    memset(res, 0, sizeof(*res));
    *no_profile = false;
    const hj *infra =
        need_obj(req, "desired", "infrastructureMachine", true, buf, sizeof(buf), &msg);
    const hj *machine = opt_obj(req, "desired", "machine");
    const struct hv_profile *p = NULL;
    struct hv_vm_ref ref;
    struct hv_hw hw;
    if (!msg) {
        const char *av = hj_get_str(infra, "apiVersion"), *kind = hj_get_str(infra, "kind");
        p = hv_profile_find(ctx->profiles, av, kind);
        if (!p || p->is_template) {
            snprintf(buf, sizeof(buf), HV_MSG("no hvupdater profile for %s %s"), kind, av);
            msg = buf;
            *no_profile = true;
        }
    }
    if (!msg) {
        char why[200];
        if (hv_identity(p, machine, infra, &ref, why, sizeof(why)) < 0) {
            snprintf(buf, sizeof(buf), HV_MSG("cannot find the VM: %s"), why);
            msg = buf;
        } else if (ctx->gate && machine) {
            checked_machine(machine, infra, &ref.machine); /* the gate passed this call */
        }
    }
    if (!msg && !ctx->update) {
        snprintf(buf, sizeof(buf), HV_MSG("no %s backend is configured in hvupdater"), p->backend);
        msg = buf;
    }
    if (msg) {
        res->failure = true;
        snprintf(res->message, sizeof(res->message), "%s", msg);
    } else {
        if (ctx->machine_vm && machine)
            ctx->machine_vm(ctx->machine_vm_ctx, machine, p->backend, &ref);
        hv_desired_hw(p, infra, &hw);
        ctx->update(ctx->update_ctx, p, &ref, &hw, s, res);
    }
}

static hj *update_machine(const struct hv_hooks_ctx *ctx, const hj *req,
                          const struct hv_settings *s)
{
    struct hv_update_result res;
    bool no_profile;
    hv_hooks_own_update(ctx, req, s, &res, &no_profile);
    hj *r = hv_hook_response(HV_HOOK_UPDATE_MACHINE, res.failure, res.message);
    hj_obj_set_take(r, "retryAfterSeconds", hj_new_int(res.failure ? 0 : res.retry_after_s));
    return r;
}

static const char *meta_str(const hj *obj, const char *key)
{
    const char *v = hj_get_str(hj_get(obj, "metadata"), key);
    return v ? v : "";
}

static void describe(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                     struct hv_hook_who *w)
{
    memset(w, 0, sizeof(*w));
    if (h == HV_HOOK_DISCOVERY || !req || req->type != HJ_OBJECT)
        return;
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const hj *des = hj_get(req, "desired");
    const hj *m = hj_get(des, set ? "machineSet" : "machine");
    const hj *infra = hj_get(des, set ? "infrastructureMachineTemplate" : "infrastructureMachine");
    if (m && m->type == HJ_OBJECT) {
        snprintf(w->machine, sizeof(w->machine), "%s/%s", meta_str(m, "namespace"),
                 meta_str(m, "name"));
        const char *cl = hj_get_str(hj_get(m, "spec"), "clusterName");
        if (!cl)
            cl = hj_get_str(hj_get(hj_get(m, "metadata"), "labels"),
                            "cluster.x-k8s.io/cluster-name");
        snprintf(w->cluster, sizeof(w->cluster), "%s", cl ? cl : "");
    }
    if (!infra || infra->type != HJ_OBJECT)
        return;
    const char *kind = hj_get_str(infra, "kind");
    snprintf(w->infra, sizeof(w->infra), "%s/%s", kind ? kind : "", meta_str(infra, "name"));
    if (!w->cluster[0]) {
        const char *cl = hj_get_str(hj_get(hj_get(infra, "metadata"), "labels"),
                                    "cluster.x-k8s.io/cluster-name");
        snprintf(w->cluster, sizeof(w->cluster), "%s", cl ? cl : "");
    }
    if (set)
        return; /* a template: no VM */
    const struct hv_profile *p =
        hv_profile_find(ctx->profiles, hj_get_str(infra, "apiVersion"), kind);
    struct hv_vm_ref ref;
    char why[200];
    if (!p || p->is_template || hv_identity(p, m, infra, &ref, why, sizeof(why)) < 0)
        return;
    const char *where = ref.server;
    char several[64];
    bool libvirt = !strcmp(p->backend, "libvirt");
    size_t hosts = libvirt ? ctx->n_libvirt_uris : ctx->only_vcenter ? 1 : 0;
    if (!where[0] && hosts == 1)
        where = libvirt ? ctx->libvirt_uris[0] : ctx->only_vcenter;
    if (!where[0]) {
        snprintf(several, sizeof(several), "(one of %zu %s hosts)", hosts, p->backend);
        where = hosts > 1 ? several : "(no host)";
    }
    snprintf(w->vm, sizeof(w->vm), "%s %s %s", where, ref.uuid[0] ? "uuid" : "name",
             ref.uuid[0] ? ref.uuid : ref.name);
}

/* A Failure answer that operators should see on the object: settings that fail to parse, a
 * Block, or UpdateMachine's failure (CAPI calls again with back-off: the Event is deduplicated).
 * For CanUpdateMachineSet the object is the current MachineSet: CAPI's desired one does not exist
 * until the call succeeds, and its name is drawn anew on every retry (seen in test/capi). */
static void warn_event(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                       bool bad_settings, const char *message)
{
    const char *reason = NULL;
    if (!message)
        return;
    if (bad_settings)
        reason = "InvalidSettings";
    else if (h == HV_HOOK_UPDATE_MACHINE)
        reason = "UpdateFailed";
    else if (strncmp(message, HV_MSG_BLOCKED, strlen(HV_MSG_BLOCKED)) == 0)
        reason = "UpdateBlocked";
    const hj *obj = h == HV_HOOK_CAN_UPDATE_MACHINE_SET
                        ? hj_get(hj_get(req, "current"), "machineSet")
                        : hj_get(hj_get(req, "desired"), "machine");
    if (reason && obj && obj->type == HJ_OBJECT)
        ctx->event(ctx->event_ctx, obj, reason, message);
}

/* ---- machine check ---- */
/* The answer when the machine check stops the call (NULL: it passes; *checked then may hold
 * the request to answer instead). */
static hj *gate(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req, hj **checked)
{
    char m[600] = "";
    if (!ctx->gate)
        return NULL;
    enum hv_gate g = ctx->gate(ctx->gate_ctx, h, req, checked, m, sizeof(m));
    if (g == HV_GATE_PASS)
        return NULL;
    hj_free(*checked);
    *checked = NULL;
    bool retry = g == HV_GATE_WAIT && h == HV_HOOK_UPDATE_MACHINE;
    hj *r = hv_hook_response(h, !retry, m);
    if (h == HV_HOOK_UPDATE_MACHINE)
        hj_obj_set_take(r, "retryAfterSeconds", hj_new_int(retry ? HV_GATE_RETRY_S : 0));
    return r;
}
/* ---- end machine check ---- */

char *hv_hook_handle(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                     bool *failure_out, char *msg_out, size_t msglen, size_t *len_out)
{
    return hv_hook_handle_who(ctx, h, req, failure_out, msg_out, msglen, len_out, NULL);
}

char *hv_hook_handle_who(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                         bool *failure_out, char *msg_out, size_t msglen, size_t *len_out,
                         struct hv_hook_who *who)
{
    if (who)
        describe(ctx, h, req, who);
    char buf[300];
    const char *msg = NULL;
    struct hv_settings s = ctx->defaults;
    bool bad_settings = false, gated = false;
    hj *r, *checked = NULL;
    if (h == HV_HOOK_DISCOVERY) {
        r = discovery(ctx);
    } else if ((msg = check_envelope(h, req, buf, sizeof(buf))) ||
               (bad_settings =
                    hv_settings_apply(&s, hj_get(req, "settings"), buf, sizeof(buf)) < 0)) {
        r = hv_hook_response(h, true, msg ? msg : buf);
        if (h == HV_HOOK_UPDATE_MACHINE)
            hj_obj_set_take(r, "retryAfterSeconds", hj_new_int(0));
    } else if ((r = gate(ctx, h, req, &checked)) != NULL) {
        gated = true; /* machine check: wait or fail, nothing touched */
    } else if (ctx->compose) {
        r = ctx->chain(ctx, h, checked ? checked : req, &s);
    } else if (h == HV_HOOK_UPDATE_MACHINE) {
        r = update_machine(ctx, checked ? checked : req, &s);
    } else {
        r = can_update(ctx, h, req, &s);
    }
    hj_free(checked);
    const char *st = hj_get_str(r, "status");
    *failure_out = st && !strcmp(st, "Failure");
    /* a refused request's objects are the caller's word: no Event about them */
    if (*failure_out && ctx->event && !gated)
        warn_event(ctx, h, req, bad_settings, hj_get_str(r, "message"));
    if (msg_out && msglen)
        snprintf(msg_out, msglen, "%s", hj_get_str(r, "message") ? hj_get_str(r, "message") : "");
    char *out = hj_dump(r, len_out);
    hj_free(r);
    return out;
}
