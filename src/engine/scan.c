/* scan.c: the scan for cycles left in flight: at start and every scan_interval_s, each
 * backend lists the VMs that carry a record, and each power cycle no live process carries is
 * taken on (a slot and the engine's own passes). It also keeps the hosts no scan has listed
 * yet (the gates slots.c holds new cycles at). */
#include "engine.h"
#include "engine_internal.h"
#include "log.h"
#include "msg.h"
#include "oprecord.h"
#include "phase.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A restarted process (or the replica that stays when another is gone) learns of a power
 * cycle its previous life left in flight only from the record on the VM. No call may ever
 * reach that VM again (CAPI may have stopped calling), so at start, and every
 * scan_interval_s after, the engine asks each backend for the VMs that carry a record
 * (ops->list_records) and carries on each cycle that no live process carries: it takes a
 * power-cycle slot for it like for a new one and runs its passes by itself until the cycle
 * ends (done, or failed and rolled back), as for a cycle it began. */
#define SCAN_RETRY_MS 30000 /* a scan that could not reach every host is tried again */
/* A record of another process that has not changed for this long past the longest wait of
 * its phase (the shutdown or live timeout, one hypervisor call) is carried by no one: the
 * process that wrote it is gone (a live one steps or ends it by then). */
#define SCAN_STALE_S 60

struct found {
    struct hv_backend *be;
    struct hv_vm_ref ref;
    char host[HV_NAME_MAX];
    bool off;
    bool paused; /* paused or suspended in the middle of its cycle */
    /* its shutdown or power-off, sent by this process or its previous life, may still take it
     * down (within shutdownTimeoutSeconds and one hypervisor call of its step) */
    bool going_down;
    bool tried; /* its step's last try failed (attempts): refused, or no answer */
    bool own;   /* written by this very process (owner equal to ours) */
    /* a Failure of the previous life upon a step that may land once the VM runs: its window
     * runs from this life's first sight of it running (resume_found), the operation's start */
    int64_t upon_op;
    struct hv_hw desired;
    struct hv_settings s;
    bool carried; /* a pass of this process holds its slot already (confirm_found) */
};

/* A VM listed running or off under a Failure upon a step that may land (downAt): an entry
 * parked for the report of its resume (workers.c HV_FOLLOW_RESUME) is woken by the scan too,
 * the backstop for a report that never came (an event connection that died, a driver that took
 * the registration and reports nothing) */
struct wake {
    struct hv_backend *be;
    struct hv_vm_ref ref[2]; /* the calls' name (the record's) and the backend's */
};

struct scan {
    struct hv_engine *e;
    struct hv_backend *be;
    int64_t now; /* unix seconds */
    struct found *v;
    size_t n, cap;
    char (*bad)[HV_NAME_MAX]; /* hosts that could not be listed */
    size_t n_bad;
    struct wake *wake; /* (below) */
    size_t n_wake, cap_wake;
};

/* Why a record found on vm may not be carried on here, or NULL. The record is data anyone who
 * can edit the VM's settings could have written, and no call stands behind it: before any
 * step, what it names is checked against the configuration. It must name the VM it was found
 * on (a record naming another VM would move that VM), on a server this process serves, with
 * desired hardware the backend's rules allow (ops->check, as for a call). Its cluster and
 * certificate thumbprint are never used (see scan_found). */
static const char *resume_refusal(struct hv_backend *be, const struct hv_vm_found *vm,
                                  const struct hv_oprecord *r)
{
    const struct hv_vm_ref *a = &r->ref, *b = &vm->ref;
    bool other = (a->uuid[0] && b->uuid[0] && strcasecmp(a->uuid, b->uuid)) ||
                 (a->server[0] && b->server[0] && strcmp(a->server, b->server)) ||
                 (!a->uuid[0] && a->name[0] && b->name[0] && strcmp(a->name, b->name));
    if (other)
        return HV_MSG("the record on the VM names another VM; not carried on");
    struct hv_vm_ref named = a->name[0] || a->uuid[0] ? *a : *b;
    if (!be->ops->serves(be, &named) || !be->ops->serves(be, b))
        return HV_MSG("the record on the VM names a server this configuration does not serve; not "
                      "carried on");
    const struct hv_hw *d = &r->desired;
    bool set =
        d->memory_mib >= 0 || d->cpus >= 0 || d->cores_per_socket >= 0 || hv_disk_set(d->disk_mib);
    struct hv_field_plan plan[HV_F_COUNT];
    memset(plan, 0, sizeof(plan));
    if (be->ops->check)
        be->ops->check(be, &r->desired, plan);
    for (int f = 0; f < HV_F_COUNT; f++)
        set &= plan[f].how != HV_HOW_IMPOSSIBLE;
    if (!set)
        return HV_MSG("the record on the VM asks for hardware this configuration does not allow; "
                      "not carried on");
    return NULL;
}

/* Whether this scan is the first of this life to list host: no scan has yet, or the last
 * ones could not list it (a gate). A Failure of the previous life upon a step is taken up then
 * only: taken up at every scan, its window would start again with each and hold a slot for
 * ever on a VM whose step never lands (a guest that ignores ACPI), and a VM its operator
 * powered off since would be started at every restart. (review of 8ad4812) */
static bool listed_first(const struct hv_engine *e, const char *host)
{
    bool first = !e->scanned;
    for (size_t k = 0; k < e->n_gates && !first; k++)
        first = !strcmp(e->gates[k], host);
    return first;
}

/* hv_vm_found_fn: keep the VMs whose record shows a power cycle no live process carries. */
static void scan_found(void *ctx, const struct hv_vm_found *vm)
{
    struct scan *sc = ctx;
    struct hv_engine *e = sc->e;
    if (vm->unlisted) {
        char(*bad)[HV_NAME_MAX] = realloc(sc->bad, (sc->n_bad + 1) * sizeof(*sc->bad));
        if (!bad)
            abort();
        sc->bad = bad;
        snprintf(sc->bad[sc->n_bad++], HV_NAME_MAX, "%s", vm->host);
        return;
    }
    struct hv_oprecord *r = malloc(sizeof(*r));
    if (!r)
        abort();
    struct found f;
    memset(&f, 0, sizeof(f));

    /* (a VM paused or suspended mid-cycle cannot go on: its cycle is followed without a slot,
     * below, when it is this process's or its previous life's, and a pass takes one once the
     * VM runs or is off; another process's is left to the scan after that, or a call) */
    bool paused = vm->power == HV_POWER_PAUSED;
    bool runs_or_off = vm->power == HV_POWER_ON || vm->power == HV_POWER_OFF;
    bool readable = (runs_or_off || paused) && hv_oprecord_read(r, vm->record);
    if (readable && runs_or_off && r->phase == HV_PH_FAILED && hv_rec_failed_upon_at(r)) {
        if (sc->n_wake == sc->cap_wake) {
            sc->cap_wake = sc->cap_wake ? sc->cap_wake * 2 : 8;
            sc->wake = realloc(sc->wake, sc->cap_wake * sizeof(*sc->wake));
            if (!sc->wake)
                abort();
        }
        struct wake *w = &sc->wake[sc->n_wake++];
        w->be = sc->be;
        w->ref[0] = r->ref.name[0] || r->ref.uuid[0] ? r->ref : vm->ref;
        w->ref[1] = vm->ref;
    }
    bool keep = readable && r->cold && hv_policy_settings(r->policy, &f.s);
    /* (and a failed cycle that left the VM off, in the window after its Failure in which the
     * engine keeps its slot and tries to start it by itself: reconcile.c left_off) */
    bool left_off = keep && r->phase == HV_PH_FAILED && vm->power == HV_POWER_OFF &&
                    sc->now - r->step_at < e->cfg.step_timeout_s;
    /* (and a cold Failure of this process's previous life that came upon a shutdown or
     * power-off, downAt: no pass of this life follows it, since the life that parked it for
     * the resume's report is gone or the report came before its woken pass ran, yet the step
     * may land once the VM runs (its pass holds a slot over the caps while it may), or landed
     * unseen (the VM off: its pass starts it, reconcile.c restart_failed_off); paused, its
     * pass parks it for the resume's report. Held-out seeds 1754841, 5305661, 2615752,
     * 5272038, 5378229, 5430428: a new cycle of the host began as it landed, or the VM stayed
     * off. Only at this life's first listing of its host: listed_first.) */
    bool upon = keep && r->phase == HV_PH_FAILED && hv_rec_failed_upon_at(r) &&
                hv_owner_previous(r->owner, e->owner) && listed_first(e, vm->host);
    keep = keep && ((r->phase >= HV_PH_SHUTDOWN && r->phase <= HV_PH_POWER_ON) || left_off || upon);
    if (keep) {
        f.own = !strcmp(r->owner, e->owner);
        /* this process's previous life (same host, another pid) is gone; another process is
         * taken to be gone when its record has not moved past the longest wait of its phase */
        bool previous = hv_owner_previous(r->owner, e->owner);
        int64_t wait = f.s.shutdown_timeout_s > f.s.live_timeout_s ? f.s.shutdown_timeout_s
                                                                   : f.s.live_timeout_s;
        if (e->cfg.step_timeout_s > wait)
            wait = e->cfg.step_timeout_s;
        bool stale = sc->now - r->step_at > wait + SCAN_STALE_S;
        keep = f.own || previous || (stale && !paused && !left_off);
        f.paused = paused;
        f.tried = r->attempts > 0;
        f.going_down = (f.own || previous) && vm->power == HV_POWER_ON &&
                       (r->phase == HV_PH_SHUTDOWN || r->phase == HV_PH_POWER_OFF) &&
                       sc->now < r->step_at + f.s.shutdown_timeout_s + e->cfg.step_timeout_s;
        f.upon_op = upon && vm->power == HV_POWER_ON ? r->started_at : 0;
        f.going_down |= f.upon_op != 0;
    }
    const char *refused = keep ? resume_refusal(sc->be, vm, r) : NULL;
    if (refused) {
        char key[HV_KEY_MAX];
        eng_make_key(key, sizeof(key), sc->be, &vm->ref);
        hv_log(HV_LOG_WARN, "resume-refused", "vm", key, "message", refused, (char *)NULL);
        keep = false;
    }
    if (keep) {
        f.be = sc->be;
        /* the name the calls used (newer records keep it), else the backend's */
        f.ref = r->ref.name[0] || r->ref.uuid[0] ? r->ref : vm->ref;
        /* whose credentials and which certificate are the configuration's own: a record's
         * cluster could pick another cluster's identity, its thumbprint replace the server
         * entry's verification. The next call's (checked) request supplies them again. */
        f.ref.cluster[0] = '\0';
        f.ref.thumbprint[0] = '\0';
        snprintf(f.host, sizeof(f.host), "%s", vm->host);
        f.off = vm->power == HV_POWER_OFF;
        f.desired = r->desired;
        if (sc->n == sc->cap) {
            sc->cap = sc->cap ? sc->cap * 2 : 8;
            sc->v = realloc(sc->v, sc->cap * sizeof(*sc->v));
            if (!sc->v)
                abort();
        }
        sc->v[sc->n++] = f;
    }
    free(r);
}

/* With the machine check on (cfg.confirm_resume), the API server's word on each cycle found
 * that no pass of this process carries yet: a record that passed the configuration's checks
 * may still be forged (a real Machine's name on another VM), or be left from an update CAPI
 * no longer makes (the Machine deleted, its update ended or changed). Its record must name
 * the Machine of the checked call that began it, and the API server confirm it (the Machine
 * with that uid, marked as being updated in place, whose infra machine finds this VM and
 * asks for the record's hardware: cli's wiring of kube/machinecheck.h). A cycle not
 * confirmed is dropped from sc: the VM is left as it is, for the next checked call. Caller
 * holds the lock, released while the API server is asked (it may block). True when the API
 * server could not say for one: the scan is tried again. */
static bool confirm_found(struct hv_engine *e, struct scan *sc)
{
    char key[HV_KEY_MAX];
    for (size_t k = 0; k < sc->n; k++) {
        struct found *f = &sc->v[k];
        eng_make_key(key, sizeof(key), f->be, &f->ref);
        struct entry *x = eng_find(e, key);
        f->carried = x && x->slot; /* resume_found leaves it as it is */
    }
    pthread_mutex_unlock(&e->lock);
    bool unknown = false;
    size_t keep = 0;
    for (size_t k = 0; k < sc->n; k++) {
        struct found *f = &sc->v[k];
        char msg[600] = "";
        enum hv_resume_verdict v = HV_RESUME_CONFIRMED;
        if (f->carried) {
            v = HV_RESUME_CONFIRMED;
        } else if (!f->ref.machine.name[0]) { /* unchecked call, older version, or forged */
            v = HV_RESUME_REFUSED;
            snprintf(msg, sizeof(msg), "%s",
                     HV_MSG("the record on the VM names no Machine a checked call was for, and "
                            "the machine check is on; not carried on"));
        } else if (unknown) { /* (each read may take the client's timeout: one wait a scan) */
            v = HV_RESUME_UNKNOWN;
            snprintf(msg, sizeof(msg), "%s",
                     HV_MSG("machine check: the API server could not be asked about another "
                            "record in this scan; looked at again at the next scan"));
        } else {
            v = e->cfg.confirm_resume(e->cfg.confirm_ctx, f->be->ops->name, &f->ref, &f->desired,
                                      msg, sizeof(msg));
        }
        if (v == HV_RESUME_CONFIRMED) {
            sc->v[keep++] = *f;
            continue;
        }
        eng_make_key(key, sizeof(key), f->be, &f->ref);
        if (v == HV_RESUME_UNKNOWN) {
            unknown = true;
            hv_log(HV_LOG_WARN, "resume-unconfirmed", "vm", key, "message", msg, (char *)NULL);
        } else {
            hv_log(HV_LOG_WARN, "resume-refused", "vm", key, "message", msg, (char *)NULL);
        }
    }
    sc->n = keep;
    pthread_mutex_lock(&e->lock);
    return unknown;
}

/* Carry on the cycle of f, unless a call or a pass of this process already does; caller holds
 * the lock. */
static void resume_found(struct hv_engine *e, const struct found *f)
{
    char key[HV_KEY_MAX];
    eng_make_key(key, sizeof(key), f->be, &f->ref);
    struct entry *x = eng_find(e, key);
    if ((x && x->slot) || !f->be->ops->serves(f->be, &f->ref))
        return;                                      /* carried here already, with its slot */
    x = eng_entry_for(e, key, f->be, &f->ref, true); /* a cycle in flight is carried on */
    if (!x->have_desired) { /* else what the calls asked last: a pass for it takes the cycle
                               over (reconcile.c), as when a call comes */
        x->desired = f->desired;
        x->have_desired = true;
        x->s = f->s;
    }
    /* a slot like a new cycle's (also for a pass already queued: before any new cycle's),
     * within the caps while the VM still runs; an off VM is down already and takes one over
     * them (as a pass that finds it off does), and so does one whose shutdown or power-off,
     * sent by this process's previous life, may take it down at any moment: no cycle of its
     * host begins beside it (seeds 217798, 210281: the scan found the caps full, the slot
     * went free and a new cycle began while that shutdown landed) */
    /* A VM paused mid-cycle holds none (its cycle cannot progress, as for a pass that finds
     * it paused): its passes follow it, and the first that finds it running again or off
     * takes one, within a pass's interval of its resume rather than at the next scan, so no
     * new cycle of its host begins beside a shutdown it got before the pause and may still
     * carry out (seeds 29926, 207429: found paused by the scan after a restart, resumed, and
     * a new cycle of its host began as its shutdown landed). */
    if (!f->paused)
        eng_slot_take(e, x, f->host, f->off || f->going_down);
    else /* (the host a blind pass takes one on again: workers.c; seed 908970) */
        snprintf(x->slot_host, sizeof(x->slot_host), "%s", f->host);
    if (f->upon_op) /* as if a pass had seen it paused: its first pass times the step anew */
        *memo_for(&x->last_sighting, f->upon_op) = 1;
    hv_log(HV_LOG_INFO, "resume", "vm", key, "why", f->own ? "own" : "owner gone", (char *)NULL);
    if (!x->queued && !x->running) {
        x->called = false; /* the engine's own pass: it carries this cycle on, begins none */
        eng_enqueue(e, x);
    }
}

/* Wake the entry parked for the report of w's resume, if any (the VM runs or is off now, and
 * no report said so: its pass looks, as eng_vm_changed's would); caller holds the lock. A pass
 * running now may be the one that parks it, having looked before the resume: the change is
 * counted, and run_head queues a look once that pass has parked the entry (change_seq). */
static void wake_parked(struct hv_engine *e, const struct wake *w)
{
    for (int k = 0; k < 2; k++) {
        char key[HV_KEY_MAX];
        eng_make_key(key, sizeof(key), w->be, &w->ref[k]);
        struct entry *x = eng_find(e, key);
        if (x && x->running) {
            x->change_seq++;
            return;
        }
        if (!x || !x->on_resume)
            continue;
        hv_log(HV_LOG_INFO, "resume-unreported", "vm", key, (char *)NULL);
        x->look_due = true; /* (counts against the caps until it looks: slots.c paused_due) */
        x->woken++;
        if (!x->queued)
            eng_enqueue(e, x);
        return;
    }
}

/* Whether a scan is due now; caller holds the lock. */
bool eng_scan_due(const struct hv_engine *e)
{
    return e->scan_on && !e->scanning && !e->stopping && eng_now_ms(e) >= e->scan_due_ms;
}

/* Run the scan (scan_due); caller holds the lock, which is released while backends list. */
void eng_run_scan(struct hv_engine *e)
{
    e->scanning = true;
    pthread_mutex_unlock(&e->lock);
    struct scan sc = {.e = e, .now = eng_unix_s(e)};
    bool failed = false;
    for (size_t k = 0; k < e->n_bes; k++) {
        struct hv_backend *be = e->bes[k];
        struct hv_err err = {0};
        if (!be->ops->list_records)
            continue;
        sc.be = be;
        if (be->ops->list_records(be, scan_found, &sc, &err) != HV_OK) {
            failed = true;
            hv_log(HV_LOG_WARN, "scan-error", "backend", be->ops->name, "detail", err.detail,
                   (char *)NULL);
        }
    }
    pthread_mutex_lock(&e->lock);
    /* (the machine check: the lock is released while the API server is asked) */
    bool unconfirmed = e->cfg.confirm_resume && sc.n && confirm_found(e, &sc);
    /* the hosts no scan has listed yet: those this one could not, of those before */
    size_t keep = 0;
    for (size_t k = 0; k < sc.n_bad; k++) {
        bool before = !e->scanned;
        for (size_t j = 0; j < e->n_gates && !before; j++)
            before = !strcmp(e->gates[j], sc.bad[k]);
        if (before)
            memmove(sc.bad[keep++], sc.bad[k], HV_NAME_MAX);
    }
    free(e->gates);
    e->gates = sc.bad;
    e->n_gates = keep;
    e->scanned = true;
    /* (after the gates: a host listed now no longer counts as unlisted) The cycles surely
     * under way take the slots within the caps first: a VM off, or one whose shutdown or
     * power-off was sent with no failed try recorded; then the rest, so one whose last try
     * failed (refused, or no answer: it may not have been sent, and its pass sends it again
     * only within the caps) takes one over them rather than leave a cycle under way over
     * them (seed 1112029: the scan after a restart found a refused shutdown listed before
     * one sent, gave the refused one the slot, and its pass sent it beside the other) */
    for (int sure = 1; sure >= 0; sure--)
        for (size_t k = 0; k < sc.n; k++)
            if ((sc.v[k].off || (sc.v[k].going_down && !sc.v[k].tried)) == (sure == 1))
                resume_found(e, &sc.v[k]);
    free(sc.v);
    for (size_t k = 0; k < sc.n_wake; k++)
        wake_parked(e, &sc.wake[k]);
    free(sc.wake);
    e->scanning = false;
    int64_t now = eng_now_ms(e);
    e->scan_end_ms = now;
    bool again = failed || unconfirmed; /* (a cycle the API server could not confirm: too) */
    e->scan_on = again || e->cfg.scan_interval_s > 0;
    e->scan_due_ms = now + (again ? SCAN_RETRY_MS : (int64_t)e->cfg.scan_interval_s * 1000);
    pthread_cond_broadcast(&e->cond);
}
