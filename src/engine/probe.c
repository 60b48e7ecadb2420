/* probe.c: the bounded live probe CanUpdateMachine asks through: the VM's facts (its plan
 * for the desired hardware, what decides whether the engine may power-cycle it, the guest's
 * view, an operation for other hardware in flight), fetched on a detached thread, cached per
 * entry for probe_cache_ms, and judged as UpdateMachine would. The entry owns its probe. */
#include "engine.h"
#include "engine_internal.h"
#include "hv_clock.h"
#include "log.h"
#include "msg.h"
#include "oprecord.h"
#include "pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROBES 32 /* live probes in flight at once; more wait for a retry */

/* The VM's facts CanUpdateMachine asks for (the probe), cached per VM, only for probed
 * entries: the backend's plan for the desired hardware and what decides whether the engine
 * may power-cycle the VM. */
struct probe {
    int64_t at_ms;
    unsigned gen; /* the entry's probe_gen when it started */
    struct hv_hw for_hw;
    int rc;
    bool gone; /* the VM was not found */
    struct hv_field_plan plan[HV_F_COUNT];
    char why[200];
    bool on;                           /* running: a cold change power-cycles it */
    bool between;                      /* neither running nor off (paused, suspended, ...) */
    bool can_shutdown;                 /* obs.can_shutdown */
    bool no_mem_report, no_cpu_report; /* obs.no_mem_report, no_cpu_report */
    char no_power_cycle[HV_MSG_MAX];   /* obs.no_power_cycle */
    struct hv_hw hw;                   /* obs.hw */
    /* the guest's view was asked for (guestVerification Required needs it): guest is it, or
     * guest_why says why it could not be read */
    bool guest_looked;
    struct hv_guest_obs guest;
    bool guest_mem_current; /* hv_guest_mem_current(guest) at the look */
    char guest_why[200];
    struct hv_oprecord rec; /* the VM's record (an operation in flight leaves its base) */
    /* the VM is off and an operation for other hardware is going on: it starts the VM with
     * other's hardware (never leaves it off), so this state's first pass may find it running */
    bool other_starts;
    struct hv_hw other;
    /* that operation is this process's, and the VM's record does not show it yet (queued, or
     * in its first pass): its base, which this state's begin may inherit, is not read */
    bool other_unseen;
};

/* UpdateMachine for want changes the VM as it is when its first pass looks, which an
 * operation for other hardware still going on (CAPI's rollout changed A -> B while A's steps
 * are queued or in flight) may change first: each field of plan is also planned from the VM
 * as that operation leaves it, and the worse of the two is kept (it cannot be told which the
 * pass will find). A plan that fails leaves the change unjudged: its error is returned (plan
 * as it is would judge only the VM as it is now; seed 303704). */
static int plan_worst_with(struct hv_backend *be, const struct hv_vm_ref *ref,
                           const struct hv_vm_obs *obs, const struct hv_hw *other,
                           const struct hv_hw *want, struct hv_field_plan plan[HV_F_COUNT],
                           struct hv_err *err)
{
    struct hv_vm_obs *after = malloc(sizeof(*after));
    struct hv_field_plan *p2 = calloc(HV_F_COUNT, sizeof(*p2));
    if (!after || !p2)
        abort();
    *after = *obs;
    after->assumed = true;
    if (other->memory_mib > 0)
        after->hw.memory_mib = after->config.memory_mib = other->memory_mib;
    if (other->cpus > 0)
        after->hw.cpus = after->config.cpus = other->cpus;
    if (other->cores_per_socket > 0)
        after->hw.cores_per_socket = after->config.cores_per_socket = other->cores_per_socket;
    if (hv_disk_set(other->disk_mib))
        after->hw.disk_mib = after->config.disk_mib = other->disk_mib;
    int rc = be->ops->plan(be, ref, after, want, p2, err);
    if (rc == HV_OK)
        for (int f = 0; f < HV_F_COUNT; f++)
            if (p2[f].how > plan[f].how)
                plan[f] = p2[f];
    free(p2);
    free(after);
    return rc;
}

struct probe_job {
    struct hv_engine *e;
    struct entry *x;
    struct hv_hw want;
    bool guest;   /* look into the guest too (guestVerification Required) */
    unsigned gen; /* the entry's probe_gen when it started */
};

/* The probe's look r for want is the entry's now (the engine's lock taken here). */
static void probe_done(struct hv_engine *e, struct entry *x, struct probe *r,
                       const struct hv_hw *want, unsigned gen)
{
    pthread_mutex_lock(&e->lock);
    r->at_ms = eng_now_ms(e);
    r->gen = gen;
    r->for_hw = *want;
    free(x->probe);
    x->probe = r;
    x->probe_running = false;
    x->used_ms = r->at_ms;
    /* A Failure for one call (the VM could not be read or planned) that a pass concluded
     * before this look, which read and planned it, is not true any more: the next call asks
     * for a new pass instead of answering it (after A -> B -> A, CAPI's CanUpdateMachine for
     * A covered the change on this look; the old Failure would fail it for nothing). */
    if (r->rc == 0 && !r->guest_why[0] && x->have_answer && x->answer.failure && x->answer.once)
        x->have_answer = false;
    e->probes_running--;
    pthread_cond_broadcast(&e->probe_cond);
    pthread_mutex_unlock(&e->lock);
}

/* Observe and plan one VM for the live probe, off the hook's thread. */
static void *probe_thread(void *arg)
{
    struct probe_job *j = arg;
    struct hv_engine *e = j->e;
    struct entry *x = j->x;
    struct hv_hw want = j->want;
    bool guest = j->guest;
    unsigned gen = j->gen;
    free(j);
    pthread_mutex_lock(&e->lock);
    struct hv_vm_ref ref = x->ref;
    /* an operation of this process for other hardware, queued, running or in flight: its
     * steps may land before this state's first pass, which then changes what it left */
    bool own_other = x->have_desired && !hv_hw_equal(&x->desired, &want) &&
                     (x->queued || x->running ||
                      (x->have_answer && !x->answer.failure && x->answer.retry_after_s > 0));
    struct hv_hw other = x->desired;
    pthread_mutex_unlock(&e->lock);

    struct hv_vm_obs *obs = calloc(1, sizeof(*obs));
    struct probe *r = calloc(1, sizeof(*r));
    struct hv_err err = {0};
    if (!obs || !r)
        abort();
    r->rc = -1;
    r->guest_looked = guest; /* asked for, whatever the answer */
    if (x->be->ops->observe(x->be, &ref, obs, &err) != HV_OK) {
        snprintf(r->why, sizeof(r->why), "%s", hv_errcode_message(err.code));
    } else if (!obs->found) {
        snprintf(r->why, sizeof(r->why), HV_MSG("the VM was not found"));
        r->gone = true;
    } else if (x->be->ops->plan(x->be, &ref, obs, &want, r->plan, &err) != HV_OK) {
        snprintf(r->why, sizeof(r->why), "%s", hv_errcode_message(err.code));
    } else {
        r->rc = 0;
        r->on = obs->power == HV_POWER_ON;
        r->between = obs->power != HV_POWER_ON && obs->power != HV_POWER_OFF;
        r->can_shutdown = obs->can_shutdown;
        r->no_mem_report = obs->no_mem_report;
        r->no_cpu_report = obs->no_cpu_report;
        snprintf(r->no_power_cycle, sizeof(r->no_power_cycle), "%s", obs->no_power_cycle);
        r->hw = obs->hw;
        (void)hv_oprecord_read(&r->rec, obs->record);
        /* the VM's record of an operation for other hardware in flight: the same */
        if (!own_other && r->rec.phase >= HV_PH_PLANNED && r->rec.phase <= HV_PH_POWER_ON &&
            !hv_hw_equal(&r->rec.desired, &want)) {
            own_other = true;
            other = r->rec.desired;
        }
        /* ... and that operation's cycle, past its reconfigure, may still fail to start the VM
         * and put the configuration from before it back (a rollback): the first pass may find
         * the VM as that leaves it too (held-out seed 5104569: B covered as a disk grow with
         * A's vCPUs configured; A's VM did not stay on, A rolled back, and B's begin needed a
         * power cycle under powerCycle Never) */
        struct hv_hw rolled_back; /* (what roll_back puts back: rc_previous_config) */
        bool may_roll_back = own_other && r->rec.cold && r->rec.phase >= HV_PH_RECONFIGURE &&
                             r->rec.phase <= HV_PH_POWER_ON &&
                             hv_hw_equal(&r->rec.desired, &other) &&
                             rc_previous_config(&r->rec, &rolled_back);
        if (own_other &&
            (plan_worst_with(x->be, &ref, obs, &other, &want, r->plan, &err) != HV_OK ||
             (may_roll_back &&
              plan_worst_with(x->be, &ref, obs, &rolled_back, &want, r->plan, &err) != HV_OK))) {
            r->rc = -1; /* as a plan that failed: CanUpdateMachine retries */
            snprintf(r->why, sizeof(r->why), "%s", hv_errcode_message(err.code));
        } else if (own_other) {
            r->other_starts = obs->power == HV_POWER_OFF;
            r->other = other;
            r->other_unseen = !(r->rec.phase >= HV_PH_PLANNED && r->rec.phase <= HV_PH_POWER_ON &&
                                hv_hw_equal(&r->rec.desired, &other));
        }
        /* the guest's view, as UpdateMachine asks for it before its first step (a round trip
         * into the guest, of a running VM) */
        if (guest && r->on && x->be->ops->observe_guest &&
            x->be->ops->observe_guest(x->be, &ref, obs, &err) != HV_OK) {
            snprintf(r->guest_why, sizeof(r->guest_why), HV_MSG("cannot observe the VM: %s"),
                     hv_errcode_message(err.code));
            hv_log(HV_LOG_WARN, "probe-error", "vm", x->key, "detail", err.detail, (char *)NULL);
        }
        r->guest = obs->guest;
        /* judged as of the look, not of the cached answer's use */
        r->guest_mem_current = hv_guest_mem_current(&obs->guest, eng_unix_s(e));
    }
    free(obs);
    if (r->rc < 0 && !r->gone)
        hv_log(HV_LOG_WARN, "probe-error", "vm", x->key, "detail", err.detail, (char *)NULL);

    probe_done(e, x, r, &want, gen);
    return NULL;
}

/* A probe answer is in: an entry that exists only for probes of a VM that is not there goes
 * at once (CanUpdateMachine for VMs that do not exist must not fill the table). Caller holds
 * the lock and is the last waiter. */
static void drop_if_gone(struct hv_engine *e, struct entry *x)
{
    if (x->probe && x->probe->gone && !x->have_desired && !x->waiters && eng_evictable(x)) {
        eng_unlink_entry(e, x);
        eng_entry_free(x);
    }
}

/* The cached facts r, as CanUpdateMachine under settings s needs them: the plan of the one
 * begin judgement (hv_begin_judge, UpdateMachine's own), with every change it refuses made
 * impossible with UpdateMachine's reason: under guestVerification Required what the guest
 * cannot show, and, when the VM runs and may not be power-cycled under s, every change that
 * needs a power cycle. Under powerCycle=Never the planner says "needs a power cycle and
 * powerCycle is Never" itself. An operation for other hardware still going on is judged as
 * the judgement's other operation. Caller holds the lock. */
static int probe_answer(const struct probe *r, const struct hv_settings *s, int64_t now,
                        struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    memcpy(plan, r->plan, sizeof(r->plan));
    snprintf(why, whylen, "%s", r->why);
    if (r->gone)
        return -3;
    if (r->rc != 0)
        return r->rc;
    if (r->between) { /* UpdateMachine takes no step until it runs or is off: ask again then */
        snprintf(why, whylen, "%s", HV_MSG("the VM is paused, suspended or in transition"));
        return -1;
    }
    if (s->guest_check == HV_GC_REQUIRED && r->guest_why[0]) {
        snprintf(why, whylen, "%s", r->guest_why);
        return -1;
    }
    struct hv_begin_facts f = {.on = r->on,
                               .hw = r->hw,
                               .guest = r->guest,
                               .guest_mem_current = r->guest_mem_current,
                               .no_mem_report = r->no_mem_report,
                               .no_cpu_report = r->no_cpu_report,
                               .can_shutdown = r->can_shutdown,
                               .no_power_cycle = r->no_power_cycle};
    memcpy(f.plan, r->plan, sizeof(f.plan));
    struct hv_begin_other other = {
        .hw = r->other, .unseen = r->other_unseen, .starts = r->other_starts};
    struct hv_begin_in in = {
        .facts = &f, .old = &r->rec, .other = &other, .desired = &r->for_hw, .s = s, .now = now};
    struct hv_begin_judgement *j = malloc(sizeof(*j));
    if (!j)
        abort();
    hv_begin_judge(&in, j);
    memcpy(plan, j->plan, sizeof(j->plan));
    free(j);
    return 0;
}

/* Start x's probe for desired (gen: the calling call's probe_gen; guest: look into the guest
 * too) on its own detached thread, or, driven, on this one now (true: it ran, its answer is
 * in). Caller holds the lock (released while a driven probe runs). */
static bool start_probe(struct hv_engine *e, struct entry *x, const struct hv_hw *desired,
                        bool guest, unsigned gen)
{
    struct probe_job *j = malloc(sizeof(*j));
    if (!j)
        abort();
    *j = (struct probe_job){.e = e, .x = x, .want = *desired, .guest = guest, .gen = gen};
    x->probe_running = true;
    x->probe_began_ms = eng_now_ms(e);
    x->probe_for = *desired;
    e->probes_running++;
    if (e->cfg.drive) { /* driven: on this thread, now */
        pthread_mutex_unlock(&e->lock);
        probe_thread(j);
        pthread_mutex_lock(&e->lock);
        return true;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, probe_thread, j) != 0) {
        x->probe_running = false;
        e->probes_running--;
        free(j);
    }
    pthread_attr_destroy(&attr);
    return false;
}

/* The bounded wait: a hook call waits for the facts only within the first probe_wait_ms of
 * the probe that fetches them (it runs on its own detached thread, at most MAX_PROBES at
 * once). A call that comes while a probe has run longer than that, or when MAX_PROBES are
 * running (a hypervisor that hangs), answers "still asking" at once: however slow the
 * hypervisor, a server thread is held at most probe_wait_ms, and only by the calls in a
 * probe's first probe_wait_ms. */
int hv_engine_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                    const struct hv_hw *desired, const struct hv_settings *s,
                    struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen)
{
    struct hv_engine *e = ctx;
    struct hv_backend *be = eng_backend_for(e, p, ref, why, whylen);
    if (!be)
        return -1;
    char key[HV_KEY_MAX];
    eng_make_key(key, sizeof(key), be, ref);
    pthread_mutex_lock(&e->lock);
    eng_sweep(e, false);
    struct entry *x = eng_entry_for(e, key, be, ref, false);
    if (!x) { /* the table is full: "cannot check the change on this VM: ...; retry" */
        pthread_mutex_unlock(&e->lock);
        snprintf(
            why, whylen, "%s",
            HV_MSG("hvupdater holds engine.maxEntries VMs with work in flight already; retry"));
        return -1;
    }
    /* CanUpdateMachine begins an update of CAPI's: for other hardware than UpdateMachine last
     * asked, the rollout changed, and CAPI may call another replica for it, which changes the
     * VM; for the same hardware, CAPI is asking again, and may have been through other states
     * on other replicas since (A -> B -> A, the covering replica told nothing of B: held-out
     * seed 5223664, B hot-added by r0 as r1 covered A again, and r1 answered its next call
     * done from its look before). A "done" concluded before is not answered: the next
     * UpdateMachine waits for a pass begun after this call, as for a call that came late.
     * A pass queued by an UpdateMachine for other hardware follows a call CAPI has left: it
     * begins nothing, as one that runs after CAPI's next call was due (run_head; held-out
     * seeds 2107180, 2034528, 2126903, 1642889: r0's queued pass for B began B after r0 was
     * asked to cover A again, and r1 answered A done from its look before) */
    x->confirm_seq = 0;
    if (x->have_desired && !hv_hw_equal(&x->desired, desired))
        x->called = false;
    /* ... and the next UpdateMachine is a new update, not CAPI retrying a Failure this process
     * answered before (answer.c "retried": answered at once, unlooked): it is looked at first,
     * and a Failure still recorded on the VM is found again there (held-out seed 2307526: B's
     * Failure answered by r0, C carried by r1 and done, B covered at r0 again and answered
     * B's old Failure at once while the VM's record was C's done) */
    x->told_failure = false;
    x->waiters++;
    int rc = -2; /* not known yet: the hook answers a retryable Failure */
    snprintf(why, whylen, HV_MSG("still asking the hypervisor"));
    /* only a probe started after the last expiry before this call answers it (one that was
     * looking when a call for other hardware came may have looked before another replica's
     * step for it: a review of the fix for held-out seed 5483754); and the call waits at most
     * probe_wait_ms in all, also when the probe it waited for ended too old and another
     * starts */
    unsigned gen = x->probe_gen;
    int64_t call_limit = eng_now_ms(e) + e->cfg.probe_wait_ms;
    for (;;) {
        struct probe *r = x->probe;
        bool fresh = r && r->gen == gen && eng_now_ms(e) - r->at_ms < e->cfg.probe_cache_ms &&
                     hv_hw_equal(&r->for_hw, desired) &&
                     (r->guest_looked || s->guest_check != HV_GC_REQUIRED);
        if (fresh) {
            rc = probe_answer(r, s, eng_unix_s(e), plan, why, whylen);
            break;
        }
        if (!x->probe_running && e->probes_running < MAX_PROBES &&
            start_probe(e, x, desired, s->guest_check == HV_GC_REQUIRED, gen))
            continue; /* driven: it ran inline */
        if (!x->probe_running || e->cfg.drive)
            break; /* none could start: no wait (driven: the probe ran inline) */
        int64_t limit = x->probe_began_ms + e->cfg.probe_wait_ms;
        if (limit - call_limit > 0)
            limit = call_limit;
        if (limit - eng_now_ms(e) <= 0)
            break;
        hv_cond_wait_until(&e->probe_cond, &e->lock, limit);
    }
    x->waiters--;
    drop_if_gone(e, x);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void eng_probe_expire(struct entry *x)
{
    x->probe_gen++; /* a cached probe, or one still looking, answers no call after this */
}

void eng_probe_expire_other(struct entry *x, const struct hv_hw *hw)
{
    if ((x->probe && !hv_hw_equal(&x->probe->for_hw, hw)) ||
        (x->probe_running && !hv_hw_equal(&x->probe_for, hw)))
        eng_probe_expire(x);
}
