/* compose.c: chaining downstream in-place extensions behind hvupdater, the way CAPI would
 * chain several if it allowed them (controlplane/kubeadm .../inplace_canupdatemachine.go:
 * call, apply the answer's patches to the request's current objects, call the next).
 * Every downstream is called in config order with the request as patched so far, and the
 * answer is one JSON Patch per object from the original current spec to the combined one.
 * UpdateMachine goes to hvupdater's engine and then to each downstream that is not done yet
 * for these desired objects; those done are remembered per Machine (bounded, in memory) only
 * while that Machine's update is in flight here: another desired state for the Machine, the
 * whole answer being done, or the Machine's calls no longer reaching this process forget
 * them, so A -> B -> A asks every downstream again. */
#include "compose.h"
#include "hv_clock.h"
#include "capipatch.h"
#include "json.h"
#include "log.h"
#include "msg.h"
#include "plan.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DONE_MAX 1024
/* A Machine's remembered dones hold while its next call comes within twice the retry this
 * process last answered it plus this much; later, another replica may have seen other
 * desired states for it in between. */
#define DONE_SLACK_MS 15000

/* One Machine's update as this process follows it: the desired state (a hash of the request)
 * and which downstreams answered done for exactly that state. */
struct done_entry {
    uint64_t m1, m2;    /* the Machine: namespace/name (0, 0 = a free slot) */
    uint64_t h1, h2;    /* the request text */
    unsigned done_mask; /* bit k: downstream k answered done for it */
    int64_t seen_ms;    /* last call for this Machine */
    int retry_s;        /* what this process answered it last */
    char message[HV_DOWNSTREAM_MAX][160];
};

struct hv_compose {
    struct hv_downstream *ds[HV_DOWNSTREAM_MAX];
    size_t n;
    pthread_mutex_t mu;
    struct done_entry done[DONE_MAX]; /* a ring: the oldest is overwritten */
    size_t done_next, done_n;
    pthread_t starter; /* discovery at start, in the background */
    bool starting;
    int start_timeout_s;
    hv_compose_call_fn call; /* hv_downstream_call, or a test's */
    int64_t (*now_ms)(void); /* hv_mono_ms, or a test's */
};

struct hv_compose *hv_compose_new(const struct hv_downstream_list *l)
{
    if (!l || l->n == 0)
        return NULL;
    struct hv_compose *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    pthread_mutex_init(&c->mu, NULL);
    for (size_t k = 0; k < l->n && k < HV_DOWNSTREAM_MAX; k++)
        c->ds[c->n++] = hv_downstream_new(&l->items[k]);
    c->call = hv_downstream_call;
    c->now_ms = hv_mono_ms;
    return c;
}

void hv_compose_set_test_hooks(struct hv_compose *c, hv_compose_call_fn call,
                               int64_t (*now_ms)(void))
{
    c->call = call ? call : hv_downstream_call;
    c->now_ms = now_ms ? now_ms : hv_mono_ms;
}

static void *discover_all(void *arg)
{
    struct hv_compose *c = arg;
    for (size_t k = 0; k < c->n; k++) {
        char why[300];
        (void)hv_downstream_discover(c->ds[k], hv_mono_ms() + (int64_t)c->start_timeout_s * 1000,
                                     why, sizeof(why));
    }
    return NULL;
}

void hv_compose_discover_all(struct hv_compose *c, int timeout_s)
{
    if (!c || c->starting)
        return;
    c->start_timeout_s = timeout_s;
    c->starting = pthread_create(&c->starter, NULL, discover_all, c) == 0;
    if (!c->starting)
        discover_all(c);
}

void hv_compose_free(struct hv_compose *c)
{
    if (!c)
        return;
    if (c->starting)
        pthread_join(c->starter, NULL);
    for (size_t k = 0; k < c->n; k++)
        hv_downstream_free(c->ds[k]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- small helpers ----------------------------------------------------------------------- */

static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t at = strlen(buf);
    if (at + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + at, cap - at, fmt, ap);
    va_end(ap);
}

/* The slot holding obj.key, so the value can be replaced; NULL when absent. */
static hj **slot(hj *obj, const char *key)
{
    if (!obj || obj->type != HJ_OBJECT)
        return NULL;
    for (size_t k = 0; k < obj->n; k++)
        if (!strcmp(obj->keys[k], key))
            return &obj->items[k];
    return NULL;
}

static hj *failure(enum hv_hook h, const char *msg)
{
    hj *r = hv_hook_response(h, true, msg);
    if (h == HV_HOOK_UPDATE_MACHINE)
        hj_obj_set_take(r, "retryAfterSeconds", hj_new_int(0));
    return r;
}

/* A downstream's own message, bounded (it goes inside ours). */
static const char *their(const hj *answer, char *buf, size_t cap)
{
    const char *m = hj_get_str(answer, "message");
    snprintf(buf, cap, "%.300s", m ? m : "");
    hj_text_cut(buf); /* (cut where a character begins: it goes inside ours) */
    return buf;
}

/* The three objects of a CanUpdate* request, in CAPI's order, with their patch fields. */
struct objdef {
    const char *name, *patch_field;
};

static void objdefs(bool set, struct objdef o[3])
{
    if (set) {
        o[0] = (struct objdef){"machineSet", "machineSetPatch"};
        o[1] = (struct objdef){"bootstrapConfigTemplate", "bootstrapConfigTemplatePatch"};
        o[2] =
            (struct objdef){"infrastructureMachineTemplate", "infrastructureMachineTemplatePatch"};
    } else {
        o[0] = (struct objdef){"machine", "machinePatch"};
        o[1] = (struct objdef){"bootstrapConfig", "bootstrapConfigPatch"};
        o[2] = (struct objdef){"infrastructureMachine", "infrastructureMachinePatch"};
    }
}

/* ---- CanUpdateMachine / CanUpdateMachineSet ---------------------------------------------- */

/* What still differs after every extension, as CAPI compares (Machine spec cleaned up,
 * the others whole spec), as a list "machine.spec.version, ..." with hvupdater's specific
 * reasons where it had one. Returns the number of differences. */
static size_t remaining(bool set, const hj *work, const struct objdef o[3],
                        const struct hv_coverage *own, char *out, size_t cap)
{
    size_t count = 0;
    out[0] = '\0';
    for (int k = 0; k < 3; k++) {
        const hj *cur = hj_get(hj_get(work, "current"), o[k].name);
        const hj *des = hj_get(hj_get(work, "desired"), o[k].name);
        if (!cur && !des)
            continue;
        hj *ops = hj_new_array();
        if (k == 0) {
            const char *p = set ? "/spec/template/spec" : "/spec";
            hj *a = hv_clean_machine_spec(hj_ptr(cur, p));
            hj *b = hv_clean_machine_spec(hj_ptr(des, p));
            hv_json_diff(a, b, p, ops);
            hj_free(a);
            hj_free(b);
        } else {
            hv_json_diff(hj_ptr(cur, "/spec"), hj_ptr(des, "/spec"), "/spec", ops);
        }
        for (size_t j = 0; j < ops->n; j++) {
            char where[200];
            hj_ptr_dotted(where, sizeof(where), o[k].name, hj_get_str(ops->items[j], "path"));
            append(out, cap, "%s%s", count ? ", " : "", where);
            for (size_t u = 0; u < own->n_uncovered; u++)
                if (!strcmp(own->uncovered[u].where, where) &&
                    !hv_reason_is_generic(own->uncovered[u].reason))
                    append(out, cap, " (%s)", own->uncovered[u].reason);
            count++;
        }
        hj_free(ops);
    }
    return count;
}

static void own_summary(const struct hv_coverage *c, char *out, size_t cap)
{
    size_t covered = 0;
    out[0] = '\0';
    for (size_t k = 0; k < c->n_fields; k++) {
        const struct hv_field_result *r = &c->fields[k];
        if (r->cls == HV_CLASS_NO)
            continue;
        append(out, cap, "%s%s %s->%s%s", covered ? "; " : "", r->name, r->from, r->to,
               hv_class_suffix(r->cls));
        covered++;
    }
    if (!covered)
        append(out, cap, "%s", HV_MSG("nothing hvupdater can change in place"));
}

/* Apply one downstream answer's patches to work.current; -1 with the Failure text. */
static int apply_answer(const struct hv_downstream *d, hj *work, const hj *answer,
                        const struct objdef o[3], const char *spec_path, char *patched, size_t pcap,
                        char *msg, size_t cap)
{
    patched[0] = '\0';
    for (int k = 0; k < 3; k++) {
        const hj *field = hj_get(answer, o[k].patch_field);
        if (field && field->type != HJ_OBJECT && field->type != HJ_NULL) {
            snprintf(msg, cap, HV_MSG("downstream %s returned a %s that cannot be applied: %s"),
                     hv_downstream_name(d), o[k].patch_field, "not an object");
            return -1;
        }
        if (!hv_capi_patch_defined(field))
            continue;
        hj **obj = slot(hj_get(work, "current"), o[k].name);
        char err[200];
        if (!obj || (*obj)->type != HJ_OBJECT) {
            snprintf(msg, cap,
                     HV_MSG("downstream %s returned %s for an object the request does not "
                            "hold"),
                     hv_downstream_name(d), o[k].patch_field);
            return -1;
        }
        hj *before = hj_clone(*obj);
        if (hv_capi_apply(obj, field, spec_path, err, sizeof(err)) < 0) {
            hj_free(before);
            snprintf(msg, cap, HV_MSG("downstream %s returned a %s that cannot be applied: %s"),
                     hv_downstream_name(d), o[k].patch_field, err);
            return -1;
        }
        if (!hj_equal(before, *obj))
            append(patched, pcap, "%s%s", patched[0] ? ", " : "", o[k].name);
        hj_free(before);
    }
    return 0;
}

static hj *can_update(struct hv_compose *cp, const struct hv_hooks_ctx *ctx, enum hv_hook h,
                      const hj *req, const struct hv_settings *s)
{
    int64_t deadline = hv_mono_ms() + (int64_t)ctx->timeout_s * 1000 - 500;
    bool set = h == HV_HOOK_CAN_UPDATE_MACHINE_SET;
    const char *spec_path = set ? "/spec/template/spec" : "/spec";
    struct objdef o[3];
    objdefs(set, o);
    char buf[1024], msg[1024] = "", part[1024];
    /* hvupdater's own part: onUncoverable is judged on the combined result, below. */
    struct hv_settings own = *s;
    own.on_uncoverable = HV_UNC_FALLBACK;
    struct hv_coverage c;
    if (hv_hooks_own_plan(ctx, h, req, &own, &c, buf, sizeof(buf)) < 0)
        return failure(h, buf);
    if (c.failure) { /* the live probe asks for a retry */
        hj *r = failure(h, c.message);
        hv_coverage_free(&c);
        return r;
    }
    hj *work = hj_clone(req);
    hj *r = NULL;
    if (c.infra_patch) {
        hj *tmp = hj_new_object();
        if (!hv_hook_put_patch(tmp, "p", c.infra_patch)) {
            hj_free(tmp);
            hj_free(work);
            hv_coverage_free(&c);
            return failure(h, HV_MSG("out of memory"));
        }
        hj **infra = slot(hj_get(work, "current"), o[2].name);
        if (!infra || hv_capi_apply(infra, hj_get(tmp, "p"), spec_path, buf, sizeof(buf)) < 0)
            hv_log(HV_LOG_ERROR, "compose", "detail", "hvupdater's own patch did not apply",
                   (char *)NULL);
        hj_free(tmp);
    }
    bool affects = c.infra_patch && hv_affects_availability(s);
    own_summary(&c, part, sizeof(part));
    append(msg, sizeof(msg), "%s", part);
    for (size_t k = 0; k < cp->n && !r; k++) {
        struct hv_downstream *d = cp->ds[k];
        hj *a = NULL;
        enum hv_ds_result res = cp->call(d, h, work, deadline, &a, buf, sizeof(buf));
        if (res == HV_DS_ERROR) {
            r = failure(h, buf);
        } else if (res == HV_DS_OK && !strcmp(hj_get_str(a, "status"), "Failure")) {
            char t[320];
            snprintf(buf, sizeof(buf), HV_MSG("downstream %s answered Failure: %s"),
                     hv_downstream_name(d), their(a, t, sizeof(t)));
            r = failure(h, buf);
        } else if (res == HV_DS_OK) {
            char patched[200], t[320];
            if (apply_answer(d, work, a, o, spec_path, patched, sizeof(patched), buf, sizeof(buf)) <
                0) {
                r = failure(h, buf);
            } else {
                /* a downstream's change counts as disruptive unless it says false */
                const hj *av = hj_get(a, "affectsAvailability");
                if (patched[0] && !(av && av->type == HJ_BOOL && !av->b))
                    affects = true;
                their(a, t, sizeof(t));
                if (t[0])
                    append(msg, sizeof(msg), "; downstream %s: %s", hv_downstream_name(d), t);
                else if (patched[0])
                    append(msg, sizeof(msg), HV_MSG("; downstream %s: patched %s"),
                           hv_downstream_name(d), patched);
                else
                    append(msg, sizeof(msg), HV_MSG("; downstream %s: no patch"),
                           hv_downstream_name(d));
            }
        }
        hj_free(a);
    }
    if (!r) {
        char rest[700];
        size_t left = remaining(set, work, o, &c, rest, sizeof(rest));
        if (left && s->on_uncoverable == HV_UNC_BLOCK) {
            snprintf(buf, sizeof(buf),
                     HV_MSG("cannot update in place (onUncoverable=Block): not covered by "
                            "hvupdater or its downstream extensions: %s"),
                     rest);
            r = failure(h, buf);
        } else {
            if (left)
                append(msg, sizeof(msg), HV_MSG("; not covered, left to CAPI: %s"), rest);
            r = hv_hook_response(h, false, msg);
            bool patch = false, lost = false;
            for (int k = 0; k < 3 && !lost; k++) {
                const hj *before = hj_get(hj_get(req, "current"), o[k].name);
                const hj *after = hj_get(hj_get(work, "current"), o[k].name);
                if (!before || !after)
                    continue;
                hj *ops = hj_new_array();
                hv_json_diff(hj_ptr(before, spec_path), hj_ptr(after, spec_path), spec_path, ops);
                lost = ops->n && !hv_hook_put_patch(r, o[k].patch_field, ops);
                patch |= ops->n && !lost;
                hj_free(ops);
                if (lost) { /* covered without its patch would be a lie */
                    hj_free(r);
                    r = failure(h, HV_MSG("out of memory"));
                }
            }
            if (patch && !lost)
                hv_hook_put_affects(r, affects);
        }
    }
    hj_free(work);
    hv_coverage_free(&c);
    return r;
}

/* ---- UpdateMachine ----------------------------------------------------------------------- */

static void hash2(const char *text, size_t len, uint64_t *h1, uint64_t *h2)
{
    uint64_t a = 1469598103934665603ULL, b = 5381;
    for (size_t k = 0; k < len; k++) {
        a = (a ^ (unsigned char)text[k]) * 1099511628211ULL;
        b = b * 33 + (unsigned char)text[k];
    }
    *h1 = a;
    *h2 = b | 1; /* never 0, 0: that marks a free slot */
}

/* Which Machine a request is about: the desired Machine's namespace/name, else the infra
 * machine's (a request naming neither shares one slot, so any other such request forgets). */
static void machine_key(const hj *req, uint64_t *m1, uint64_t *m2)
{
    const hj *des = hj_get(req, "desired");
    const hj *meta = hj_get(hj_get(des, "machine"), "metadata");
    if (!hj_get_str(meta, "name"))
        meta = hj_get(hj_get(des, "infrastructureMachine"), "metadata");
    const char *ns = hj_get_str(meta, "namespace"), *name = hj_get_str(meta, "name");
    char key[600];
    int n = snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "");
    hash2(key, n < 0 ? 0 : (size_t)n >= sizeof(key) ? sizeof(key) - 1 : (size_t)n, m1, m2);
}

/* The Machine's slot (a new one, overwriting the oldest, when it has none); caller holds mu. */
static struct done_entry *done_slot(struct hv_compose *cp, uint64_t m1, uint64_t m2)
{
    for (size_t k = 0; k < cp->done_n; k++)
        if (cp->done[k].m1 == m1 && cp->done[k].m2 == m2)
            return &cp->done[k];
    struct done_entry *e = &cp->done[cp->done_next];
    cp->done_next = (cp->done_next + 1) % DONE_MAX;
    if (cp->done_n < DONE_MAX)
        cp->done_n++;
    memset(e, 0, sizeof(*e));
    e->m1 = m1;
    e->m2 = m2;
    return e;
}

/* A call for the Machine with this desired state: the dones remembered for it, copied to
 * mask/msgs. They hold only for the same desired state, seen without a gap. */
static unsigned done_begin(struct hv_compose *cp, uint64_t m1, uint64_t m2, uint64_t h1,
                           uint64_t h2, char msgs[HV_DOWNSTREAM_MAX][160])
{
    int64_t now = cp->now_ms();
    pthread_mutex_lock(&cp->mu);
    struct done_entry *e = done_slot(cp, m1, m2);
    int64_t window = (int64_t)e->retry_s * 2000 + DONE_SLACK_MS;
    if (e->h1 != h1 || e->h2 != h2 || now - e->seen_ms > window) {
        e->h1 = h1; /* another desired state (or a gap): nothing done for this one yet */
        e->h2 = h2;
        e->done_mask = 0;
    }
    e->seen_ms = now;
    unsigned mask = e->done_mask;
    memcpy(msgs, e->message, sizeof(e->message));
    pthread_mutex_unlock(&cp->mu);
    return mask;
}

/* Downstream k answered done for this desired state: remembered, unless the Machine moved on
 * to another desired state since the call began. */
static void done_put(struct hv_compose *cp, uint64_t m1, uint64_t m2, uint64_t h1, uint64_t h2,
                     size_t k, const char *msg)
{
    pthread_mutex_lock(&cp->mu);
    struct done_entry *e = done_slot(cp, m1, m2);
    if (e->h1 == h1 && e->h2 == h2) {
        e->done_mask |= 1u << k;
        hj_text_copy(e->message[k], sizeof(e->message[k]), msg);
    }
    pthread_mutex_unlock(&cp->mu);
}

/* The call's answer: done forgets the Machine (CAPI stops calling; a later call with the
 * same objects is a new update and asks every part again), else the retry is kept. */
static void done_end(struct hv_compose *cp, uint64_t m1, uint64_t m2, uint64_t h1, uint64_t h2,
                     bool all_done, int retry_s)
{
    pthread_mutex_lock(&cp->mu);
    struct done_entry *e = done_slot(cp, m1, m2);
    if (e->h1 == h1 && e->h2 == h2) {
        if (all_done)
            e->done_mask = 0;
        e->retry_s = retry_s;
    }
    pthread_mutex_unlock(&cp->mu);
}

static hj *update_machine(struct hv_compose *cp, const struct hv_hooks_ctx *ctx, const hj *req,
                          const struct hv_settings *s)
{
    int64_t deadline = hv_mono_ms() + (int64_t)ctx->timeout_s * 1000 - 500;
    enum hv_hook h = HV_HOOK_UPDATE_MACHINE;
    struct hv_update_result own;
    bool no_profile;
    char msg[1024] = "", buf[1024];
    hv_hooks_own_update(ctx, req, s, &own, &no_profile);
    if (own.failure && !no_profile)
        return failure(h, own.message);
    int retry = 0;
    if (!no_profile) { /* a kind hvupdater has no profile for: nothing for it to do */
        append(msg, sizeof(msg), "%s", own.message);
        retry = own.retry_after_s;
    }
    size_t len;
    char *text = hj_dump(req, &len);
    if (!text)
        abort();
    uint64_t m1, m2, h1, h2;
    machine_key(req, &m1, &m2);
    hash2(text, len, &h1, &h2);
    free(text);
    char remembered[HV_DOWNSTREAM_MAX][160];
    unsigned mask = done_begin(cp, m1, m2, h1, h2, remembered);
    hj *r = NULL;
    for (size_t k = 0; k < cp->n && !r; k++) {
        struct hv_downstream *d = cp->ds[k];
        const char *name = hv_downstream_name(d);
        char t[320];
        if (mask & (1u << k)) {
            append(msg, sizeof(msg), "%sdownstream %s: %s", msg[0] ? "; " : "", name,
                   remembered[k]);
            continue;
        }
        hj *a = NULL;
        enum hv_ds_result res = cp->call(d, h, req, deadline, &a, buf, sizeof(buf));
        const hj *ra = res == HV_DS_OK ? hj_get(a, "retryAfterSeconds") : NULL;
        if (res == HV_DS_ERROR) {
            r = failure(h, buf);
        } else if (res == HV_DS_OK && !strcmp(hj_get_str(a, "status"), "Failure")) {
            snprintf(buf, sizeof(buf), HV_MSG("downstream %s answered Failure: %s"), name,
                     their(a, t, sizeof(t)));
            r = failure(h, buf);
        } else if (res == HV_DS_OK && ra && (ra->type != HJ_INT || ra->i < 0 || ra->i > 86400)) {
            snprintf(buf, sizeof(buf), HV_MSG("downstream %s answered something that is not a %s"),
                     name, HV_MSG("retryAfterSeconds from 0 to 86400"));
            r = failure(h, buf);
        } else if (res == HV_DS_OK) {
            int ds_retry = ra ? (int)ra->i : 0;
            their(a, t, sizeof(t));
            append(msg, sizeof(msg), "%sdownstream %s: %s", msg[0] ? "; " : "", name,
                   t[0] ? t : (ds_retry ? HV_MSG("in progress") : HV_MSG("done")));
            if (ds_retry == 0)
                done_put(cp, m1, m2, h1, h2, k, t[0] ? t : HV_MSG("done"));
            else if (retry == 0 || ds_retry < retry)
                retry = ds_retry;
        }
        hj_free(a);
    }
    done_end(cp, m1, m2, h1, h2, !r && retry == 0, r ? 0 : retry);
    if (r)
        return r;
    if (!msg[0])
        snprintf(msg, sizeof(msg), "%s", HV_MSG("done: nothing to change"));
    r = hv_hook_response(h, false, msg);
    hj_obj_set_take(r, "retryAfterSeconds", hj_new_int(retry));
    return r;
}

hj *hv_compose_handle(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                      const struct hv_settings *s)
{
    if (h == HV_HOOK_UPDATE_MACHINE)
        return update_machine(ctx->compose, ctx, req, s);
    return can_update(ctx->compose, ctx, h, req, s);
}
