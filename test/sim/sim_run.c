/* sim_run.c: one seeded run of the simulation: the replicas (real engines, driven), the
 * simulated CAPI callers (through the real hook code: hv_hooks_own_plan for
 * CanUpdateMachine, hv_hooks_own_update for UpdateMachine, on requests parsed from JSON), the
 * step loop on the simulated clock, and the seven invariants (7-legal-transition: sim_world.c). */
#include "sim.h"
#include "engine.h"
#include "json.h"
#include "log.h"
#include "oprecord.h"
#include "phase.h"
#include "plan.h"
#include "profile.h"
#include "settings.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOUND_MS         (180 * 1000) /* an operation ends within its deadline plus this */
#define OBSERVING_MAX    10           /* "observing the VM" answers after a Failure that keep it */
#define STUCK_MS         (90 * 1000)  /* a slot may be held this long for a VM that cannot go on */
#define QUIESCE_MS       (3600 * 1000)
#define IDLE_MS          (120 * 1000) /* the engine's entry_idle_ms in the simulation */
#define OFF_MID_CYCLE_MS (60 * 1000)  /* a VM off mid-cycle, nothing holding it back: back on */
/* statistics that stopped this soon before a cover may have been reported fresh to the look it
 * was answered from: the engine tolerates a report 6 s old (GUEST_REPORT_S, libvirt's
 * whole-second last-update), and the world's clock is in ms (unlike STALE_VIEW_MS, sim_world.c:
 * how long stale statistics are a view of the guest at a begin) */
#define STATS_STOP_UNSEEN_MS 7000

static const char *const inv_names[INV_COUNT] = {
    "none",         "1-done-shows",  "2-power-cycles",    "3-operations-end", "4-covered-ends-done",
    "5-no-vm-lost", "6-engine-idle", "7-legal-transition"};

const char *sim_inv_name(enum sim_inv i)
{
    return i > 0 && i < INV_COUNT ? inv_names[i] : "none";
}

/* The causes that excuse a Failure of a covered change (failure_cause): each a fault of the
 * world that hit the step the Failure is about, in time, where the engine's policy (docs:
 * retries, deadlineSeconds, guestVerification, powerOffMode) says such a fault ends it. */
enum {
    CAUSE_CALL = 0,   /* the look, plan or record write it names failed in this call's window */
    CAUSE_STEP,       /* that step failed max_step_attempts times in a row */
    CAUSE_PAUSED,     /* the VM was paused or suspended during the operation */
    CAUSE_HALT,       /* it halted or paused right after a power-on during the operation */
    CAUSE_ACPI,       /* a Soft shutdown the guest ignored, or whose press the operator undid */
    CAUSE_GUEST,      /* Required: the guest's statistics went stale or absent */
    CAUSE_NOT_TAKEN,  /* the guest did not take the change: memory never onlined, a boot-time
                         reservation that grew at a boot, statistics that stopped */
    CAUSE_OPERATOR,   /* the operator changed the VM's power or configuration */
    CAUSE_DELAYED,    /* deadline: a fault held this VM back (host down or stalled, paused,
                         busy, failed or lost calls, halts, refused starts) */
    CAUSE_SLOTS,      /* deadline waiting for a slot that cycles held back by faults kept */
    CAUSE_NO_TOOLS,   /* Soft with no guest tools: no agent, or a guest still booting */
    CAUSE_STATS_SOON, /* Required: statistics stopped at most 7 s before the CanUpdateMachine */
    CAUSE_OLDER_CALL, /* a begin refused over what the previous state's operation did since:
                         its call came before the CanUpdateMachine, its pass after it, on a
                         replica the probe could not see */
    CAUSE_UNREPORTED, /* a begin refused over another replica's step for the state CAPI left
                         in flight (A -> B -> A), taken after the covering replica's probe and
                         reported by no change event before the CanUpdateMachine */
    CAUSE_BEGUN_LATE, /* the deadline: a power cycle begun, within one slot-wait retry of the
                         first listing that freed its slot, with less deadline left than it
                         may take, after hosts the replica's life could not list held the slot
                         (begun_late_behind_unlisted_hosts) */
};

static const char *const cause_names[SIM_CAUSES] = {"call-failed",
                                                    "step-failed-3x",
                                                    "paused",
                                                    "halted",
                                                    "acpi-ignored",
                                                    "guest-silent",
                                                    "guest-did-not-take",
                                                    "operator",
                                                    "delayed",
                                                    "slots-held",
                                                    "no-guest-tools",
                                                    "stats-just-stopped",
                                                    "older-call-landed",
                                                    "step-unreported",
                                                    "begun-late-behind-unlisted"};

const char *sim_cause_name(int cause)
{
    return cause >= 0 && cause < SIM_CAUSES ? cause_names[cause] : "?";
}

void sim_opts_default(struct sim_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->seed = 1;
    o->steps = 400;
}

/* Breaks of an invariant that an open issue already names, recognised by their invariant
 * and text: counted and reported as known (the run goes on), not failures, unless --strict.
 * Remove an entry when its fix lands: the seeds that found it then fail until it holds. */
static const struct known {
    enum sim_inv inv;
    const char *text;
    const char *issue;
} knowns[] = {
    /* No open finding is listed now. This entry matches no break (no invariant is 0): C has
     * no empty arrays. */
    {(enum sim_inv)0, "", "none"},
};

void sim_break(struct sim *s, enum sim_inv inv, const char *fmt, ...)
{
    if (s->r.broken)
        return;
    char why[sizeof(s->r.why)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    for (size_t k = 0; !s->o.strict && k < sizeof(knowns) / sizeof(knowns[0]); k++) {
        if (knowns[k].inv == inv && strstr(why, knowns[k].text)) {
            if (!s->r.known)
                snprintf(s->r.known_what, sizeof(s->r.known_what), "%s (%s) at step %d: %s",
                         sim_inv_name(inv), knowns[k].issue, s->step, why);
            s->r.known++;
            return;
        }
    }
    s->r.broken = inv;
    s->r.broken_step = s->step;
    snprintf(s->r.why, sizeof(s->r.why), "%s", why);
    if (s->o.quiet)
        return;
    FILE *f = s->o.report ? s->o.report : stderr;
    fprintf(f, "INVARIANT BROKEN: %s at step %d, seed %llu\n  %s\n  history (last %d):\n",
            sim_inv_name(inv), s->step, (unsigned long long)s->o.seed, s->r.why,
            s->n_hist < SIM_HIST ? s->n_hist : SIM_HIST);
    int from = s->n_hist > SIM_HIST ? s->n_hist - SIM_HIST : 0;
    for (int k = from; k < s->n_hist; k++)
        fprintf(f, "    %s\n", s->hist[k % SIM_HIST]);
    if (s->o.script)
        fprintf(f, "  replay: sim_main --script %s --trace\n", s->o.script);
    else
        fprintf(f, "  replay: sim_main --seed %llu --steps %d --trace\n",
                (unsigned long long)s->o.seed, s->o.steps);
}

/* ---- the clock the engines run on ------------------------------------------------------- */

static int64_t clk_mono(void *ctx)
{
    return ((struct sim *)ctx)->now_ms;
}

static int64_t clk_unix(void *ctx)
{
    struct sim *s = ctx;
    return s->unix0 + s->now_ms / 1000;
}

/* ---- replicas ------------------------------------------------------------------------------ */

static void check_rules(void *ctx, const struct hv_profile *p, const struct hv_hw *desired,
                        struct hv_field_plan plan[HV_F_COUNT])
{
    struct hv_backend *be = hv_engine_backend(ctx, p->backend);
    memset(plan, 0, sizeof(plan[0]) * HV_F_COUNT);
    if (be && be->ops->check)
        be->ops->check(be, desired, plan);
}

static void rep_start(struct sim *s, int r)
{
    struct sim_replica *rep = &s->reps[r];
    rep->idx = r;
    rep->gen++;
    rep->listed_hosts = 0; /* (a new life lists every host anew) */
    memset(rep->listed_ms, 0, sizeof(rep->listed_ms));
    snprintf(rep->owner, sizeof(rep->owner), "sim-r%d:%d", r, rep->gen);
    s->drive[r] = (struct hv_engine_drive){
        .mono_ms = clk_mono, .unix_s = clk_unix, .ctx = s, .owner = rep->owner};
    struct hv_engine_cfg c = s->ecfg;
    c.drive = &s->drive[r];
    sim_backend_init(s, rep);
    struct hv_backend *bp = &rep->be;
    rep->e = hv_engine_new(&c, &bp, 1);
    if (!rep->e)
        abort();
    rep->ph = (struct hv_plan_hooks){.ctx = rep->e,
                                     .available = hv_engine_available,
                                     .probe = hv_engine_probe,
                                     .check = check_rules};
    memset(&rep->hooks, 0, sizeof(rep->hooks));
    rep->hooks.profiles = &s->profiles;
    hv_settings_default(&rep->hooks.defaults);
    rep->hooks.plan_hooks = &rep->ph;
    rep->hooks.update = hv_engine_update;
    rep->hooks.update_ctx = rep->e;
    rep->hooks.timeout_s = 10;
}

static void rep_restart(struct sim *s, int r)
{
    sim_drop_queues(s, r);
    hv_engine_free(s->reps[r].e);
    s->reps[r].e = NULL;
    rep_start(s, r);
    s->restart_ms[r] = s->now_ms;
    sim_note_room(s);
    sim_note(s, "hvupdater r%d restarts (memory lost)", r);
}

/* ---- requests ------------------------------------------------------------------------------ */

static int infra_json(char *out, size_t cap, const char *name, const struct hv_hw *h)
{
    return snprintf(out, cap,
                    "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1alpha1\","
                    "\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"%s\","
                    "\"namespace\":\"default\"},\"spec\":{\"memoryMiB\":%lld,\"vcpu\":%d,"
                    "\"diskGiB\":%lld}}",
                    name, (long long)h->memory_mib, h->cpus, (long long)(h->disk_mib / 1024));
}

static int machine_json(char *out, size_t cap, const char *name)
{
    return snprintf(out, cap,
                    "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
                    "\"metadata\":{\"name\":\"m-%s\",\"namespace\":\"default\"},\"spec\":{"
                    "\"clusterName\":\"c1\",\"version\":\"v1.31.0\",\"infrastructureRef\":{"
                    "\"apiGroup\":\"infrastructure.cluster.x-k8s.io\",\"kind\":\"LibvirtMachine\","
                    "\"name\":\"%s\"}}}",
                    name, name);
}

static hj *request(const char *kind, const char *settings, const char *name,
                   const struct hv_hw *cur, const struct hv_hw *want)
{
    char m[512], ic[512], id[512], buf[2600];
    machine_json(m, sizeof(m), name);
    infra_json(id, sizeof(id), name, want);
    if (cur) {
        infra_json(ic, sizeof(ic), name, cur);
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"" HV_HOOKS_API "\",\"kind\":\"%s\",\"settings\":%s,"
                 "\"current\":{\"machine\":%s,\"infrastructureMachine\":%s},"
                 "\"desired\":{\"machine\":%s,\"infrastructureMachine\":%s}}",
                 kind, settings, m, ic, m, id);
    } else {
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"" HV_HOOKS_API "\",\"kind\":\"%s\",\"settings\":%s,"
                 "\"desired\":{\"machine\":%s,\"infrastructureMachine\":%s}}",
                 kind, settings, m, id);
    }
    char err[200];
    hj *r = hj_parse(buf, strlen(buf), err, sizeof(err));
    if (!r) {
        fprintf(stderr, "sim: bad request JSON (%s): %s\n", err, buf);
        abort();
    }
    return r;
}

/* ---- callers -------------------------------------------------------------------------------- */

static void pick_settings(struct sim *s, struct sim_op *op)
{
    static const char *const pc[] = {"IfNeeded", "IfNeeded", "IfNeeded", "Never"};
    static const char *const pom[] = {"TrySoft", "TrySoft", "Soft", "Hard"};
    static const char *const gc[] = {"IfAvailable", "IfAvailable", "Required", "Off"};
    const char *p = pc[sim_rand(s) % 4], *m = pom[sim_rand(s) % 4], *g = gc[sim_rand(s) % 4];
    int live = sim_range(s, 30, 150), shut = sim_range(s, 20, 120), dl = sim_range(s, 300, 1200);
    snprintf(op->settings_json, sizeof(op->settings_json),
             "{\"powerCycle\":\"%s\",\"powerOffMode\":\"%s\",\"guestVerification\":\"%s\","
             "\"liveTimeoutSeconds\":\"%d\",\"shutdownTimeoutSeconds\":\"%d\","
             "\"deadlineSeconds\":\"%d\"}",
             p, m, g, live, shut, dl);
}

static struct hv_hw pick_want(struct sim *s, const struct hv_hw *spec)
{
    struct hv_hw w = *spec;
    w.cores_per_socket = -1; /* the libvirt profile has no such field */
    do {
        if (sim_chance(s, 600))
            w.memory_mib = spec->memory_mib + 512 * sim_range(s, -2, 6);
        if (w.memory_mib < 512)
            w.memory_mib = 512;
        if (sim_chance(s, 500))
            w.cpus = spec->cpus + sim_range(s, -1, 3);
        if (w.cpus < 1)
            w.cpus = 1;
        if (sim_chance(s, 200))
            w.disk_mib = spec->disk_mib + 1024 * sim_range(s, -1, 2);
    } while (w.memory_mib == spec->memory_mib && w.cpus == spec->cpus &&
             w.disk_mib == spec->disk_mib);
    return w;
}

static int pick_rep(struct sim *s, struct sim_caller *c)
{
    return c->replica >= 0 ? c->replica : sim_range(s, 0, s->n_reps - 1);
}

static void remember_want(struct sim_caller *c, const struct hv_hw *w)
{
    for (int k = 0; k < c->n_wants; k++)
        if (hv_hw_equal(&c->wants[k], w))
            return;
    if (c->n_wants < (int)(sizeof(c->wants) / sizeof(c->wants[0])))
        c->wants[c->n_wants++] = *w;
}

/* CanUpdateMachine for want; when every change is covered, UpdateMachine calls begin. */
static void start_op(struct sim *s, int m, struct hv_hw want, bool same_settings)
{
    struct sim_caller *c = &s->callers[m];
    struct sim_vm *v = &s->vms[m];
    if (!v->exists) /* the Machine of a deleted VM is replaced, not updated */
        return;
    if (c->st == C_UPDATING) {
        c->prev_op = c->op;
        c->have_prev = true;
    }
    struct sim_op op;
    memset(&op, 0, sizeof(op));
    op.want = want;
    if (same_settings && c->op.settings_json[0])
        snprintf(op.settings_json, sizeof(op.settings_json), "%s", c->op.settings_json);
    else
        pick_settings(s, &op);
    hj *req = request("CanUpdateMachineRequest", op.settings_json, v->name, &c->spec, &want);
    hv_settings_default(&op.s);
    char err[300];
    if (hv_settings_apply(&op.s, hj_get(req, "settings"), err, sizeof(err)) < 0)
        abort();
    int r = pick_rep(s, c);
    struct hv_coverage cov;
    char buf[300];
    s->r.calls++;
    int rc = hv_hooks_own_plan(&s->reps[r].hooks, HV_HOOK_CAN_UPDATE_MACHINE, req, &op.s, &cov, buf,
                               sizeof(buf));
    hj_free(req);
    bool covered = rc == 0 && !cov.failure && !cov.pending && !cov.declined &&
                   cov.n_uncovered_all == 0 && cov.infra_patch;
    sim_note(s, "capi %s: CanUpdateMachine(r%d) %lld MiB %d vCPUs %lld GiB [%s]: %s", v->name, r,
             (long long)want.memory_mib, want.cpus, (long long)(want.disk_mib / 1024),
             op.settings_json + 15,
             covered ? "covered"
             : rc    ? buf
                     : cov.message);
    if (rc == 0)
        hv_coverage_free(&cov);
    if (!covered) {                /* CAPI rolls out a new Machine instead: not ours */
        if (c->st == C_UPDATING) { /* the rollout changed to something we do not cover */
            c->st = C_STOPPED;
            c->stopped_mid = true;
            c->stopped_ms = s->now_ms;
        } else {
            c->next_ms = s->now_ms + 1000 * sim_range(s, 5, 120);
        }
        return;
    }
    bool on = v->power == HV_POWER_ON;
    /* (also through an operation begun over one in flight that kept it: held-out seed
     * 5366788, B done with memory not verified, C covered and in flight keeping B's memory,
     * D begun over C keeping it too; C's CanUpdateMachine had used up done_last) */
    const struct sim_step_seen *last_step =
        v->n_steps_seen ? &v->steps_seen[(v->n_steps_seen - 1) % SIM_STEPS_SEEN] : NULL;
    bool flight = c->st == C_UPDATING && v->op_change_ms < c->op.can_ms &&
                  (!last_step || last_step->ms < c->op.can_ms); /* (nothing changed it since) */
    op.kept_mem =
        (c->done_last || (flight && c->op.kept_mem)) && c->op.want.memory_mib == want.memory_mib &&
        v->config.memory_mib == want.memory_mib && (!on || v->live.memory_mib == want.memory_mib);
    op.kept_cpus = (c->done_last || (flight && c->op.kept_cpus)) && c->op.want.cpus == want.cpus &&
                   v->config.cpus == want.cpus && (!on || v->live.cpus == want.cpus);
    c->done_last = false;
    c->stopped_mid = false; /* (a caller that gave up calls again: see call_update) */
    op.covered = true;
    op.vm_differed = !sim_hw_shows(v, &c->spec) && v->power != HV_POWER_OFF;
    op.can_rep = r;
    op.can_probe_seq = v->probe_seq[r];
    op.can_reported_ms = v->reported_ms;
    op.changed_in_flight = c->st == C_UPDATING;
    op.from = v->power == HV_POWER_OFF ? v->config : v->live;
    op.can_ms = op.start_ms = op.last_ms = s->now_ms;
    op.others_stall_ms = s->stall_wait_ms - v->stall_wait_ms;
    c->spec = want; /* CAPI writes the desired objects, then calls UpdateMachine */
    c->op = op;
    c->st = C_UPDATING;
    c->next_ms = s->now_ms;
    remember_want(c, &want);
    if (c->n_covers < (int)(sizeof(c->cover_ms) / sizeof(c->cover_ms[0]))) {
        c->cover_want[c->n_covers] = want;
        c->cover_ms[c->n_covers++] = s->now_ms;
    }
}

static bool cycle_on_a_host_in_trouble(struct sim *s, int64_t since_ms);
static bool own_cycle_behind_a_host_in_trouble(const struct sim *s, int r);
static bool in_cycle(struct sim_vm *v);

/* A life of a replica, begun at life_ms, at or before the CanUpdateMachine at can_ms, had by
 * at_ms listed neither VM m's host nor enough hosts to leave the overall cap room (listed_ms:
 * each host's first listing in the life, 0 none, a listing at at_ms counting as made): the
 * hosts its scans could not list (down or stalled at each: a fault) held m's slot at at_ms,
 * and from can_ms on (a host once listed stays listed in the life). */
static bool unlisted_hold_in(const struct sim *s, int64_t life_ms, const int64_t *listed_ms, int m,
                             int64_t can_ms, int64_t at_ms)
{
    int h = s->vms[m].host;
    if (life_ms > can_ms)
        return false;
    int unlisted = 0;
    for (int g = 0; g < s->n_hosts; g++)
        unlisted += !listed_ms[g] || listed_ms[g] > at_ms;
    bool own = !listed_ms[h] || listed_ms[h] > at_ms;
    return own || unlisted * s->ecfg.max_power_cycles_per_host >= s->ecfg.max_power_cycles;
}

/* ... by replica r's present life (rep->listed_ms, s->restart_ms): caps_held_over_the_wait.
 * begun_late_behind_unlisted_hosts asks it of the life that sent the cycle. */
static bool unlisted_hold_at(const struct sim *s, int r, int m, int64_t can_ms, int64_t at_ms)
{
    return unlisted_hold_in(s, s->restart_ms[r], s->reps[r].listed_ms, m, can_ms, at_ms);
}

/* Replica r holds no slot for VM m's cycle while a host none of its life's scans could list
 * (down or stalled at each: a fault) counts as full against the caps (slots.c: a cycle of a
 * previous life may be in flight there): m's own host, or enough of them to fill the overall
 * cap by themselves. */
/* ... judged over VM m's wait for a slot (held-out seed 5648695): replica r's present life,
 * begun before the CanUpdateMachine at can_ms, had not listed m's host by then, or enough
 * unlisted hosts to fill the overall cap (rep->listed_ms: when each host was first listed), and
 * from then to the deadline its caps had room for m's cycle (the world's facts, sim_caps_room)
 * only in spans shorter than the retry CAPI was given with the slot wait (op->slot_retry_ms,
 * the shortest the answers said, not the engine's constant), none of them met by a look of r at m:
 * the slot the host's listing freed went to another VM's cycle before m's next retry (no order
 * among the VMs waiting for a slot, test/sim/open/README.md row 5103997), and that cycle held
 * it to the deadline. */
static bool caps_held_over_the_wait(const struct sim *s, int r, int m, int64_t can_ms)
{
    const struct sim_replica *rep = &s->reps[r];
    const struct sim_op *op = &s->callers[m].op;
    int h = s->vms[m].host;
    if (op->room_look_ms[r] || !op->slot_retry_ms || !unlisted_hold_at(s, r, m, can_ms, can_ms))
        return false;
    int64_t end = can_ms + 1000LL * (op->s.deadline_s + 1);
    int n = rep->n_room[h];
    for (int k = 0; k < n && k < SIM_ROOM_SPANS; k++) {
        int at = (n - 1 - k) % SIM_ROOM_SPANS;
        int64_t from = rep->room_from[h][at];
        int64_t to = rep->room_to[h][at] ? rep->room_to[h][at] : s->now_ms;
        if (to <= can_ms)
            return true;
        if (k == SIM_ROOM_SPANS - 1 && from > can_ms)
            return false; /* (older spans lost from the ring) */
        int64_t a = from > can_ms ? from : can_ms, b = to < end ? to : end;
        if (b - a >= op->slot_retry_ms)
            return false;
    }
    return true;
}

/* VM m's deadline Failure ("did not complete within", msg) names a step of a power cycle that
 * began late because hosts replica r's life had not listed held its slot (test/sim/open/README.md
 * row 5360292, its begun-late form: held-out seed 3645636: host1 died at 0.3 s and r0's scans
 * first listed it at 486.9 s, which freed the overall cap of 1; vm0, covered at 169.7 s with
 * 329 s, waited for a slot from 170.8 s and began its TrySoft cycle at 486.9 s, 11.8 s before its
 * deadline, with shutdownTimeoutSeconds 45; the guest shut down at 500.9 s and the give-up's
 * power-on made the Failure "(last step: power-on)"). By the world's facts, each of:
 * - the cycle of the Failure's operation (the VM's record: its start, v->cycle_op) was sent by
 *   a life of replica r (v->cycle_owner, cycle_gen), after the CanUpdateMachine at can_ms, and
 *   CAPI was told the operation waits for a power-cycle slot (op->slot_retry_ms: the shortest
 *   retry it was given with that wait, an observed fact);
 * - the hold's end: the span of room for m's cycle within r's caps (sim_caps_room) that held the
 *   cycle's begin opened at a first listing of a host by that life (its listings when it sent
 *   the cycle, v->cycle_listed_ms) after can_ms, and until just before it the hosts not listed
 *   held m's slot (unlisted_hold_in, that life begun before can_ms, v->cycle_life_ms: the wait
 *   from the CanUpdateMachine was held that way throughout, with no room before it);
 * - the cycle began within one observed slot-wait retry of that listing (CAPI's next call after
 *   it, whenever the VM's pass came);
 * - it began with less of the deadline left (from the record's start, the end of its whole
 *   second) than the cycle may take by the operation's settings (docs/settings.md): the guest's
 *   shutdownTimeoutSeconds (TrySoft, Soft; none under Hard) and, after the power-on,
 *   liveTimeoutSeconds for the guest to show the change (none under guestVerification Off); the
 *   reconfigure and the power-on themselves count as no time.
 * A cycle begun with enough left, or later than one retry after the hold's end, is judged.
 * The life that sent the cycle need not be the present one: a restart after the begin (a fault
 * of its own) only hands the cycle to the next life, which carries it on (held-out seed
 * 5732500 @1000: cap 1 overall; host2 stalled from 91.2 s to 530.8 s, r0 restarted at 139.6 s
 * and its life r0:2 first listed host2 at 539.5 s; vm7, covered at 252.2 s with 335 s (Soft,
 * liveTimeoutSeconds 105, shutdownTimeoutSeconds 107), waited for a slot from 254.4 s and
 * began its cycle at 541.0 s, 49 s before its deadline; r0 restarted at 562.0 s, r0:3 sent the
 * shutdown again, the guest ignoring ACPI, and failed at the deadline "(last step:
 * shutdown)"). */
static bool begun_late_behind_unlisted_hosts(struct sim *s, int m, const char *msg, int64_t can_ms)
{
    struct sim_vm *v = &s->vms[m];
    const struct sim_op *op = &s->callers[m].op;
    const struct hv_oprecord *rec = sim_record(v);
    int r = v->cycle_owner, h = v->host;
    if (!strstr(msg, "did not complete within") ||
        (!strstr(msg, "(last step: shutdown)") && !strstr(msg, "(last step: power-off)") &&
         !strstr(msg, "(last step: reconfigure)") && !strstr(msg, "(last step: power-on)")))
        return false;
    if (!rec || rec->phase != HV_PH_FAILED || !hv_hw_equal(&rec->desired, &op->want) ||
        !v->cycle_gen || v->cycle_op != rec->started_at || v->cycle_ms < can_ms || r < 0 ||
        r >= s->n_reps || !op->slot_retry_ms)
        return false;
    const struct sim_replica *rep = &s->reps[r];
    int64_t hold_end = 0;
    int n = rep->n_room[h];
    for (int k = 0; k < n && k < SIM_ROOM_SPANS; k++) {
        int at = (n - 1 - k) % SIM_ROOM_SPANS;
        if (rep->room_from[h][at] <= v->cycle_ms) {
            hold_end = rep->room_from[h][at];
            break;
        }
    }
    bool listing = false;
    for (int g = 0; g < s->n_hosts; g++)
        listing = listing || (v->cycle_listed_ms[g] == hold_end && hold_end > can_ms);
    if (!listing ||
        !unlisted_hold_in(s, v->cycle_life_ms, v->cycle_listed_ms, m, can_ms, hold_end - 1) ||
        v->cycle_ms - hold_end > op->slot_retry_ms)
        return false;
    int64_t need_s = (op->s.power_off_mode == HV_POM_HARD ? 0 : op->s.shutdown_timeout_s) +
                     (op->s.guest_check == HV_GC_OFF ? 0 : op->s.live_timeout_s);
    int64_t deadline_ms = (rec->started_at - s->unix0 + 1 + op->s.deadline_s) * 1000;
    return deadline_ms - v->cycle_ms < 1000 * need_s;
}

static bool caps_held_by_unlisted_hosts(const struct sim *s, int r, int m)
{
    unsigned listed = s->reps[r].listed_hosts;
    int unlisted = 0;
    for (int h = 0; h < s->n_hosts; h++)
        unlisted += !(listed & (1u << h));
    return !(listed & (1u << s->vms[m].host)) ||
           unlisted * s->ecfg.max_power_cycles_per_host >= s->ecfg.max_power_cycles;
}

/* VM m's begin is refused over what an operation for CAPI's previous state did to the VM
 * since the CanUpdateMachine at can_ms: the caller had called UpdateMachine for that state
 * before it, on another replica than the one that answered it, and that replica's pass began
 * the operation (its record, which the probe reads, starts) after it; the VM showed the
 * asked-for value then, which the probe covers by design (test_coverage
 * test_never_covers_a_value_the_vm_already_has: "already on the VM"), and nothing on the VM
 * told of a call queued elsewhere (seed 804050: A hot-plugged on r1 just after r0 covered
 * B, the VM's own memory; B's begin needed a cycle a transient domain cannot have). The
 * refusal is "cannot change ..." or, under powerCycle Never, "... needs a power cycle (...)
 * and powerCycle is Never" (seed 1434335: r1 covered B, 2048 MiB, as a grow from the VM's
 * 1024 MiB; r0's pass for A's call before it hot-plugged 3072 MiB, and B became a shrink). */
static bool older_call_landed(const struct sim *s, int m, int64_t can_ms)
{
    const struct sim_vm *v = &s->vms[m];
    const struct sim_caller *c = &s->callers[m];
    int r = v->step_ok_rep;
    if (!c->have_prev || v->step_ok_ms < can_ms || !v->step_ok_started || r < 0 || r >= s->n_reps ||
        r == c->op.can_rep || !hv_hw_equal(&v->step_ok_want, &c->prev_op.want))
        return false;
    int64_t began_ms = (v->step_ok_started - s->unix0) * 1000; /* (whole seconds) */
    /* (at or before: that call is answered before the CanUpdateMachine in the step order, also
     * in the same millisecond; held-out seed 2045444) */
    return c->prev_op.last_rep_ms[r] && c->prev_op.last_rep_ms[r] <= can_ms &&
           began_ms + 1000 > can_ms;
}

/* Another replica's step for CAPI's previous state of VM m (B, the state it left in flight when
 * it went back, A -> B -> A, outside CONTRACT.md), taken while B was CAPI's desired state (after
 * B's CanUpdateMachine), before before_ms and after world sequence since_seq, with replica r
 * told nothing of B (neither its CanUpdateMachine nor an UpdateMachine for it): the newest
 * such step, or NULL. The one shape of the A -> B -> A excuses below. */
static const struct sim_step_seen *left_state_step(const struct sim *s, int m, int r,
                                                   uint64_t since_seq, int64_t before_ms)
{
    const struct sim_vm *v = &s->vms[m];
    const struct sim_caller *c = &s->callers[m];
    if (!c->op.changed_in_flight || !c->have_prev || hv_hw_equal(&c->prev_op.want, &c->op.want) ||
        r < 0 || r >= s->n_reps || c->prev_op.can_rep == r || c->prev_op.last_rep_ms[r])
        return NULL;
    unsigned n = v->n_steps_seen < SIM_STEPS_SEEN ? v->n_steps_seen : SIM_STEPS_SEEN;
    for (unsigned k = 0; k < n; k++) {
        const struct sim_step_seen *seen =
            &v->steps_seen[(v->n_steps_seen - 1 - k) % SIM_STEPS_SEEN];
        if (seen->ms >= before_ms)
            continue;
        if (seen->seq < since_seq)
            break;
        if (seen->rep >= 0 && seen->rep != r && seen->ms >= c->prev_op.can_ms &&
            hv_hw_equal(&seen->want, &c->prev_op.want))
            return seen;
    }
    return NULL;
}

/* VM m's begin is refused over what another replica's step for CAPI's previous state did to the
 * VM (left_state_step): the replica that covered this state was told nothing of B, and the
 * step came after that replica's last probe of the VM and before the CanUpdateMachine, with no
 * change report (ops->watch) between: no look the covering replica took and nothing it was told
 * shows the step (held-out seed 1638681: B hot-plugged 5120 MiB on r1, A covered on r0 from its
 * look before, A's begin then a memory shrink a transient domain cannot have). A report
 * delivered in between makes the engine look again (workers.c eng_vm_changed): then the
 * Failure is judged. (The newest such step is the one to check: a report after it covers
 * every older one.) */
static bool covered_over_an_unreported_step(const struct sim *s, int m)
{
    const struct sim_caller *c = &s->callers[m];
    const struct sim_step_seen *seen =
        left_state_step(s, m, c->op.can_rep, c->op.can_probe_seq, c->op.can_ms);
    return seen && c->op.can_reported_ms < seen->ms;
}

/* A done for the hardware of VM m's operation that the VM does not show, answered by replica r
 * from its last look, is excused only for this cause: CAPI began that operation while the one
 * before was in flight (A -> B -> A: the rollout went back before B was done), and another
 * replica's step for B, taken while B was CAPI's desired state (after B's CanUpdateMachine,
 * before A's again: a pass that acts on a call CAPI has left behind is judged), came after
 * r's look. CONTRACT.md: CAPI "never changes
 * the desired spec while an update is in flight"; the engine answers a call on time from the
 * pass the call before it asked for (docs/limits.md "CAPI changing its mind mid-update"), and
 * no call told r of B (seed 901675). Any other done the VM does not show is judged. */
static bool stepped_for_a_state_left_in_flight(const struct sim *s, int m, int r)
{
    return left_state_step(s, m, r, s->vms[m].look_seq[r], s->callers[m].op.can_ms) != NULL;
}

/* The field a refusal at an operation's begin names (docs/messages.md): "cannot change
 * <field>: ...", "<field> needs a power cycle (...) and powerCycle is Never" or
 * "guestVerification is Required but the guest cannot show <field> (...)" (one field); -1 for any
 * other message, and for a cycle refused because the VM was started again before it was
 * reconfigured (pass_paths.c new_cycle: a refusal of the cycle, not of a field). */
static int refused_field(const char *msg)
{
    static const char *const names[] = {"memory", "vCPUs", "cores per socket", "disk"};
    static const char never[] = " and powerCycle is Never";
    static const char req[] = "guestVerification is Required but the guest cannot show ";
    bool cannot = !strncmp(msg, "cannot change ", 14);
    bool unshown = !strncmp(msg, req, sizeof(req) - 1);
    const char *at = cannot ? msg + 14 : unshown ? msg + sizeof(req) - 1 : msg;
    const char *after = cannot ? ":" : unshown ? " (" : " needs a power cycle (";
    if (!cannot && !unshown &&
        (!strstr(msg, never) || strstr(msg, "started again before it was reconfigured")))
        return -1;
    for (int f = 0; f < (int)(sizeof(names) / sizeof(names[0])); f++) {
        size_t n = strlen(names[f]);
        if (!strncmp(at, names[f], n) && !strncmp(at + n, after, strlen(after)))
            return f;
    }
    return -1;
}

/* Whether b asks field f of the hardware (set) and asks another value than a. */
static bool field_differs(const struct hv_hw *b, const struct hv_hw *a, int f)
{
    switch (f) {
    case HV_F_MEMORY:
        return b->memory_mib >= 0 && b->memory_mib != a->memory_mib;
    case HV_F_CPUS:
        return b->cpus > 0 && b->cpus != a->cpus;
    case HV_F_CORES:
        return b->cores_per_socket > 0 && b->cores_per_socket != a->cores_per_socket;
    case HV_F_DISK:
        return hv_disk_set(b->disk_mib) && b->disk_mib != a->disk_mib;
    default:
        return false;
    }
}

/* VM m's Failure msg is a refusal at its operation's begin (no step for this operation's
 * hardware since its CanUpdateMachine: a step of it would have begun it) of a field CAPI's
 * previous state asks another value of: what a step of that state may leave and this one's
 * begin cannot undo. The older-call and unreported-step excuses explain only such a refusal
 * (before, any "cannot change" or Never message, of any field, at any point of the operation:
 * review of stop 56). */
static bool refused_by_the_left_state(const struct sim *s, int m, const char *msg)
{
    const struct sim_vm *v = &s->vms[m];
    const struct sim_caller *c = &s->callers[m];
    int f = refused_field(msg);
    if (f < 0 || !c->have_prev || !field_differs(&c->prev_op.want, &c->op.want, f))
        return false;
    unsigned n = v->n_steps_seen < SIM_STEPS_SEEN ? v->n_steps_seen : SIM_STEPS_SEEN;
    for (unsigned k = 0; k < n; k++) {
        const struct sim_step_seen *seen =
            &v->steps_seen[(v->n_steps_seen - 1 - k) % SIM_STEPS_SEEN];
        if (seen->ms < c->op.can_ms)
            break;
        if (hv_hw_equal(&seen->want, &c->op.want))
            return false;
    }
    return true;
}

/* The step a "step X failed" message names (the engine's step names, docs/messages.md). */
static int step_named(const char *msg)
{
    static const struct {
        const char *name;
        enum hv_step_kind kind;
    } names[] = {
        {"step live-memory ", HV_STEP_LIVE_MEMORY}, {"step live-vcpus ", HV_STEP_LIVE_CPUS},
        {"step live-cpus ", HV_STEP_LIVE_CPUS},     {"step live-disk ", HV_STEP_LIVE_DISK},
        {"step shutdown ", HV_STEP_SHUTDOWN},       {"step power-off ", HV_STEP_POWER_OFF},
        {"step reconfigure ", HV_STEP_RECONFIGURE}, {"step power-on ", HV_STEP_POWER_ON}};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (strstr(msg, names[k].name))
            return names[k].kind;
    return 0;
}

/* An operation that never began its cycle, though its deadline Failure names a later step: the
 * operator powered the VM off after the CanUpdateMachine and the engine's one step since was a
 * power-on with no reconfigure before it, past the deadline (reconcile.c carry_on: "start an
 * off VM, then fail"): the give-up's power-on, not a step of the change; judged as "(last
 * step: planned)" (seed 5338997) */
static bool gave_up_unbegun(const struct sim *s, int m, const char *msg, int64_t can_ms)
{
    const struct sim_vm *v = &s->vms[m];
    if (strstr(msg, "(last step: planned)"))
        return true;
    if (!strstr(msg, "(last step: power-on)") || v->op_off_ms < can_ms || v->reconf_ms >= can_ms)
        return false;
    unsigned n = v->n_steps_seen < SIM_STEPS_SEEN ? v->n_steps_seen : SIM_STEPS_SEEN, since = 0;
    int64_t last = 0;
    for (unsigned k = 0; k < n; k++) {
        const struct sim_step_seen *st = &v->steps_seen[(v->n_steps_seen - 1 - k) % SIM_STEPS_SEEN];
        if (st->ms >= can_ms) {
            since++;
            if (st->ms > last)
                last = st->ms;
        }
    }
    return since == 1 && last == v->power_on_ms && last >= v->op_off_ms &&
           last >= can_ms + 1000LL * s->callers[m].op.s.deadline_s;
}

/* An operation whose deadline Failure names a shutdown or power-off that a previous life of
 * the replica that wrote the Failure sent after the CanUpdateMachine (the world's step; no
 * process sent it again), which did not take the VM down (running, not paused since) and whose
 * window (shutdownTimeoutSeconds and the step timeout) ended before the deadline: nothing it
 * sent may land, so the new life's next step (TrySoft's power-off, or the step sent again)
 * takes a slot within the caps (docs/how-it-works.md "Slots while a VM may go down": the slot
 * of a previous life's spent step is given back), and the rest of the operation waited for a
 * slot as an unbegun one does (held-out seed 5549676: r0:1's TrySoft shutdown at 894.0 s, the
 * guest ignoring ACPI, r0 restarted at 983.4 s, its new life never listed host0, stalled
 * throughout, which filled the overall cap of 1). The replica that carried it: *carrier. */
static bool spent_previous_life_step(const struct sim *s, int m, const char *msg, int64_t can_ms,
                                     int *carrier)
{
    const struct sim_vm *v = &s->vms[m];
    const struct sim_caller *c = &s->callers[m];
    if (!strstr(msg, "(last step: shutdown)") && !strstr(msg, "(last step: power-off)"))
        return false;
    if (!v->cycle_gen || v->cycle_ms < can_ms || v->resent_gen || v->writer_rep != v->cycle_owner ||
        v->writer_gen <= v->cycle_gen || v->power != HV_POWER_ON || v->went_off_ms >= v->cycle_ms ||
        v->paused_ms >= v->cycle_ms)
        return false;
    int64_t window_end =
        v->cycle_ms + 1000LL * (c->op.s.shutdown_timeout_s + s->ecfg.step_timeout_s);
    if (window_end >= can_ms + 1000LL * c->op.s.deadline_s)
        return false;
    *carrier = v->writer_rep;
    return true;
}

/* Invariant 4's judge: the cause (CAUSE_*) that excuses this Failure of VM m's covered
 * change, or -1: none, the Failure is judged. A cause is a fault of the world's own log
 * (never the engine's account of it) that hit the step the Failure names, within the
 * operation (since can_ms, the covering CanUpdateMachine) or, for a Failure of one look,
 * since the previous call (prev_ms), where the engine's documented policy says such a fault
 * ends the operation: a step fails after max_step_attempts tries, not one; Required fails
 * when the guest cannot tell, IfAvailable and Off do not; the deadline only when something
 * held the operation back. Anything else is judged. */
static int failure_cause(struct sim *s, int m, const char *msg, int64_t can_ms, int64_t prev_ms,
                         bool acpi, bool capped, bool unseen_stale)
{
    struct sim_vm *v = &s->vms[m];
    const struct sim_caller *c = &s->callers[m];
    bool required = c->op.s.guest_check == HV_GC_REQUIRED;
    /* a Failure of one look: the call it names failed since the last call, or the VM was
     * busy with another task then */
    if (strstr(msg, "another task is changing the VM") && !strstr(msg, " times: ") &&
        v->busy_until >= prev_ms)
        return CAUSE_CALL;
    if (strstr(msg, "cannot observe the VM"))
        return v->call_fail_ms[SIM_CALL_OBSERVE] >= prev_ms ? CAUSE_CALL : -1;
    if (strstr(msg, "cannot plan the change"))
        return v->call_fail_ms[SIM_CALL_PLAN] >= prev_ms ? CAUSE_CALL : -1;
    if (strstr(msg, "cannot store the operation record"))
        return v->call_fail_ms[SIM_CALL_WRITE] >= prev_ms ? CAUSE_CALL : -1;
    /* a transient domain gone since the CanUpdateMachine: it halted right after a power-on
     * (the guest crashed) or the operator stopped it (the engine never stops one) */
    if (strstr(msg, "not found on any configured"))
        return v->exists || v->gone_ms < can_ms                     ? -1
               : v->halt_seen_ms == v->gone_ms                      ? CAUSE_HALT
               : v->op_change_ms == v->gone_ms && v->operator_power ? CAUSE_OPERATOR
                                                                    : -1;
    if (strstr(msg, "the VM is paused, suspended or in transition") ||
        strstr(msg, "in the middle of its power cycle"))
        /* (also a pause right after one of the operation's power-ons: the operator may have
         * resumed it since this replica's pass saw it paused) */
        return v->power == HV_POWER_PAUSED || v->paused_ms >= can_ms || v->paused_on_ms >= can_ms
                   ? CAUSE_PAUSED
                   : -1;
    /* a step that failed as many times in a row as the engine is configured to try it */
    if (strstr(msg, "the VM could not start with"))
        return v->act_spent_ms[HV_STEP_POWER_ON] >= can_ms ? CAUSE_STEP : -1;
    int kind = step_named(msg);
    if (kind && strstr(msg, " times: "))
        return v->act_spent_ms[kind] >= can_ms ? CAUSE_STEP : -1;
    /* (a running VM the operator powered off after the CanUpdateMachine went off as a halted
     * one does, as far as any engine can tell: held-out seeds 1821991, 2015265, each start
     * followed by the operator's power-off until the rollback) */
    if (strstr(msg, "the VM did not stay on"))
        return v->halt_seen_ms >= can_ms ? CAUSE_HALT
               : v->op_off_ms >= can_ms  ? CAUSE_OPERATOR
                                         : -1;
    if (strstr(msg, "did not shut down within"))
        return acpi ? CAUSE_ACPI : -1;
    if (strstr(msg, "guestVerification is Required")) {
        bool mem_msg = strstr(msg, "cannot show memory") != NULL;
        if (!required)
            return -1;
        if (unseen_stale)
            return CAUSE_STATS_SOON;
        /* (the operator powered the VM on or off: what a guest can show is another matter) */
        if (strstr(msg, "cannot show") && v->op_change_ms >= can_ms)
            return CAUSE_OPERATOR;
        /* (... or powered it on after the CanUpdateMachine and the pass that failed may have
         * run while the guest booted from that power-on: the engine judged the guest of the
         * operator's boot past liveTimeoutSeconds from its own power-on, which no look tells
         * apart; held-out seed 5254042) */
        if (strstr(msg, "did not report") && v->op_on_ms >= can_ms && v->foreign_boot_ms &&
            prev_ms < v->foreign_boot_ms)
            return CAUSE_OPERATOR;
        /* (... or cleared the record while the guest booted from the engine's power-on: the
         * record was all that told the engine to wait for that guest before judging what it
         * can show (judge.c judge_boot), and the pass may have run before the guest reported,
         * since the clear; seed 118257; that boot, not the last foreign one: an engine's
         * power-on after the clear does not end the excuse of a pass run before it, seed
         * 2968860) */
        if (strstr(msg, "cannot show") && v->record_cleared_ms >= can_ms &&
            v->cleared_boot_ms > v->record_cleared_ms && prev_ms < v->cleared_boot_ms)
            return CAUSE_OPERATOR;
        /* (... or cleared it in the middle of a power cycle, the VM down by that cycle's step
         * and off since, and its guest has no memory statistics (absent): the operation the
         * record held had planned from the VM running; begun afresh on the VM off, the engine
         * plans from its configuration, where a memory the operator set (pending while it ran,
         * operator_config, other than CAPI's) is a change the guest cannot show (review of
         * 9efcea7: without the operator's memory it hid an engine refusing any VM off). Held-out
         * seed 1968364: the operator configured vm4 to 3584 MiB at 1.6 s, running 4096; B covered
         * at 4096 MiB under Required at 28.4 s (vCPUs only), the clear at 35.3 s, the guest shut
         * down at 36.9 s) */
        if (mem_msg && v->stats == 2 && v->operator_config && c->op.want.memory_mib >= 0 &&
            v->config.memory_mib != c->op.want.memory_mib && v->cleared_cycle_ms >= can_ms &&
            v->cleared_cycle_ms == v->record_cleared_ms && v->power == HV_POWER_OFF &&
            v->power_on_ms < v->cleared_cycle_ms)
            return CAUSE_OPERATOR;
        /* (... or the begin came over the previous state's operation, called before the
         * CanUpdateMachine and begun after it on a replica the probe could not see
         * (older_call_landed), and kept that operation's base, which has no guest view of the
         * field (note_begun_over: begun under Off or during a foreign boot): nothing from
         * before the change to compare with, docs/settings.md; held-out seed 1845563: r1
         * covered B from the guest's view, r0's pass for A's earlier call hot-added under Off
         * just after, B's begin over it was refused under Required) */
        if (strstr(msg, "cannot show") && older_call_landed(s, m, can_ms) &&
            hv_hw_equal(&v->off_blind_for, &c->op.want) &&
            (mem_msg ? v->off_blind_mem : v->off_blind_cpus))
            return CAUSE_OLDER_CALL;
        /* (... or the older call's step changed the field this begin must now have the guest
         * show, a value CAPI's previous state asks and this one does not (refused_by_the_left_
         * state): the cover saw the VM before that step; held-out seed 3485251: B covered at
         * r0 under Required from the VM off at 2 vCPUs (only memory to change), r1's pass for
         * A's call before it reconfigured to 3 vCPUs and started the VM, no guest agent, and
         * B's begin had to take a vCPU away the guest cannot show) */
        if (strstr(msg, "cannot show") && older_call_landed(s, m, can_ms) &&
            refused_by_the_left_state(s, m, msg))
            return CAUSE_OLDER_CALL;
        return v->stats_bad_ms >= can_ms ||
                       (strstr(msg, "memory") && v->stats != 0 && v->stats_changed_ms >= can_ms)
                   ? CAUSE_GUEST
                   : -1;
    }
    if (strstr(msg, "the guest did not show") || strstr(msg, "did not take it")) {
        bool mem = c->op.want.memory_mib >= 0;
        /* (statistics that stopped are no cause: the guest cannot tell then, and only
         * Required fails for that, with its own message) */
        return (mem && (!v->onlines || v->reserve_boot_ms >= can_ms)) ? CAUSE_NOT_TAKEN : -1;
    }
    /* a live change the guest did not take, whose fallback power cycle the VM cannot have (a
     * transient domain): the guest's fault, named by the refusal */
    if (strstr(msg, "cannot power-cycle the VM"))
        return c->op.want.memory_mib >= 0 && !v->onlines ? CAUSE_NOT_TAKEN : -1;
    if (strstr(msg, "powered on again before hvupdater could reconfigure"))
        return v->op_on_ms >= can_ms ? CAUSE_OPERATOR : -1;
    if (strstr(msg, "no guest tools running")) {
        /* (the tools stopped since the CanUpdateMachine: a guest booting after a power-on, or
         * the operator's doing; a VM without them then was CanUpdateMachine's to refuse) */
        if (v->power_on_ms >= can_ms || v->op_change_ms >= can_ms)
            return CAUSE_NO_TOOLS;
        /* ... or another replica's power-on for CAPI's previous state (A -> B -> A, outside
         * CONTRACT.md) after the look the covering replica answered from (its 5 s cache, told
         * nothing of B, no change report before the CanUpdateMachine): that look found the VM
         * off, where a cold change asks no shutdown; as step-unreported for a field refusal
         * (held-out seed 4931567: r1 covered A at 89.9 s from its look of 87.3 s, r0's power-on
         * for B at 88.6 s, reported at 97.3 s) */
        if (v->power_on_rep >= 0 && v->power_on_rep != c->op.can_rep &&
            v->power_on_seq > c->op.can_probe_seq && v->power_on_ms < can_ms &&
            covered_over_an_unreported_step(s, m))
            return CAUSE_UNREPORTED;
        /* ... or a live memory change the guest did not take (hot-plugged memory never
         * onlined: no look shows that before the hot-plug), whose fallback power cycle
         * (IfNeeded: its live plan's record went through none to its cycle, which was refused
         * before it began, a Failure left not cold since seed 800269) Soft cannot ask of a
         * guest without tools: the guest's fault, as for a transient domain's refusal below
         * (seeds 25679, 218724) */
        const struct hv_oprecord *r = sim_record(v);
        bool fallback = r && r->phase == HV_PH_FAILED && !strncmp(r->plan[HV_F_MEMORY], "live:", 5);
        if (fallback && c->op.want.memory_mib >= 0 && !v->onlines)
            return CAUSE_NOT_TAKEN;
        /* ... or a begin refused because an older call's step landed after the
         * CanUpdateMachine (made a power cycle of what it covered as a live change: A -> B ->
         * A, another replica's pass for B's call hot-added after A was covered again), as the
         * "cannot change" refusals below (held-out seed 2299778) */
        return older_call_landed(s, m, can_ms) ? CAUSE_OLDER_CALL : -1;
    }
    if (strstr(msg, "did not complete within")) {
        if (v->delay_ms >= can_ms || v->host_down_ms >= can_ms)
            return CAUSE_DELAYED;
        if (capped)
            return CAUSE_SLOTS;
        if (begun_late_behind_unlisted_hosts(s, m, msg, can_ms))
            return CAUSE_BEGUN_LATE;
        if (gave_up_unbegun(s, m, msg, can_ms)) {
            for (int k = 0; k < s->n_vms; k++)
                if (k != m && s->vms[k].delay_ms >= can_ms &&
                    (s->vms[k].cycling || in_cycle(&s->vms[k])))
                    return CAUSE_SLOTS;
        }
        return -1;
    }
    if (v->op_change_ms >= can_ms)
        return CAUSE_OPERATOR;
    /* (the two causes below explain a begin's refusal of a field the previous state's step
     * changed, and nothing else: refused_by_the_left_state) */
    if (refused_by_the_left_state(s, m, msg) && older_call_landed(s, m, can_ms))
        return CAUSE_OLDER_CALL;
    if (refused_by_the_left_state(s, m, msg) && covered_over_an_unreported_step(s, m))
        return CAUSE_UNREPORTED;
    return -1;
}

/* The length of a Failure's cause: the text before the note of what its rollback did
 * ("<why it failed>; <what the rollback did>", pass_steps.c rollback_note), or all of it. */
static size_t failure_cause_len(const char *m)
{
    static const char *const notes[] = {"; its previous configuration (",
                                        "; restoring its previous configuration ("};
    for (size_t k = 0; k < sizeof(notes) / sizeof(notes[0]); k++) {
        const char *x = strstr(m, notes[k]);
        if (x)
            return (size_t)(x - m);
    }
    return strlen(m);
}

/* A stored Failure and an answer are the same Failure: the same cause, whatever note of its
 * rollback each carries. A pass that starts the VM a rollback left off rewrites the note to
 * what it did (pass_steps.c rc_rollback_note_follows_vm) and answers it, also when its record
 * write fails (held-out seed 3323154: the note "... was restored and it was started" answered,
 * the record still "... but starting it failed too, so the VM is off"). The dating of a
 * sticky Failure reads it, and so do invariant 5's note checks: an answered note is checked
 * against the VM whichever note the record holds (before, only one equal to the record's
 * whole message was, so a rewritten note whose write failed went unchecked: stop 55's
 * review), with the excuse of an answer from a look older than another replica's start
 * (held-out seed 740). */
static bool same_failure(const char *stored, const char *answered)
{
    size_t n = failure_cause_len(stored);
    return n == failure_cause_len(answered) && !strncmp(stored, answered, n);
}

/* The VM's record is one for the hardware c's operation asks for (begun, carried on, failed or
 * done: an operation of the engine, whenever it began). */
static bool op_recorded(struct sim_vm *v, const struct sim_caller *c)
{
    const struct hv_oprecord *r = sim_record(v);
    return r && hv_hw_equal(&r->desired, &c->op.want);
}

static void call_update(struct sim *s, int m)
{
    struct sim_caller *c = &s->callers[m];
    struct sim_vm *v = &s->vms[m];
    int r = pick_rep(s, c);
    /* (the VM paused outside a cycle with no record of this operation's hardware, and running
     * or off again at this call: the first call after the pause, on which the engine begins;
     * an engine that writes such a record while the VM is paused loses the excuse, below) */
    if (v->power == HV_POWER_PAUSED && !in_cycle(v) && !op_recorded(v, c)) {
        c->op.held_unbegun = true;
    } else if (c->op.held_unbegun && v->power != HV_POWER_PAUSED) {
        c->op.held_unbegun = false;
        c->op.resumed_call_ms = s->now_ms;
    }
    hj *req = request("UpdateMachineRequest", c->op.settings_json, v->name, NULL, &c->op.want);
    struct hv_update_result res;
    bool np;
    s->r.calls++;
    hv_hooks_own_update(&s->reps[r].hooks, req, &c->op.s, &res, &np);
    hj_free(req);
    int64_t prev_call = c->op.calls ? c->op.last_ms : c->op.can_ms;
    /* a Failure of one look comes from this replica's last pass, run at most since its
     * last call for this operation (or the CanUpdateMachine) */
    int64_t prev_rep = c->op.last_rep_ms[r] ? c->op.last_rep_ms[r] : c->op.can_ms;
    /* ... or since its last call before it (another replica served the CanUpdateMachine: this
     * one's pass from its last call, for the same VM, may have run before it) */
    if (!c->op.last_rep_ms[r] && c->rep_call_ms[r] && c->rep_call_ms[r] < prev_rep)
        prev_rep = c->rep_call_ms[r];
    /* (this call came within the wait this replica's last answer for the VM asked, a second
     * of slack: CAPI on time, not back from elsewhere) */
    bool on_time =
        c->rep_call_ms[r] && s->now_ms - c->rep_call_ms[r] <= 1000LL * c->rep_retry_s[r] + 1000;
    c->rep_call_ms[r] = s->now_ms;
    c->rep_retry_s[r] = res.retry_after_s;
    (void)prev_call;
    c->op.calls++;
    c->op.last_ms = c->op.last_rep_ms[r] = s->now_ms;
    sim_note(s, "capi %s: UpdateMachine(r%d) -> %s %d \"%.90s\"", v->name, r,
             res.failure ? "Failure" : "Success", res.retry_after_s, res.message);
    if (res.failure) {
        s->r.failures++;
        s->r.checks++;
        /* Invariant 4: a covered change fails only for a reason that arose since */
        bool blind =
            c->op.s.guest_check == HV_GC_REQUIRED &&
            ((c->op.want.memory_mib >= 0 && v->stats != 0) || (c->op.want.cpus >= 0 && !v->agent));
        /* A guest that ignores the ACPI button shows it to no one before a shutdown is
         * asked of it: CanUpdateMachine cannot know, whenever the fault arose. That holds of
         * the guest when the shutdown was asked (a press it ignored is lost, as on a real
         * hypervisor: a guest that heeds the button later does not act on an old one), also
         * when it heeds the button by the time of the Failure (acpi_missed). */
        bool deaf = (v->ignores_acpi || v->acpi_missed) &&
                    strstr(res.message, "did not shut down within") &&
                    strstr(res.message, "powerOffMode is Soft");
        /* A guest that shut down as asked and that the operator started again before any
         * look saw it off: libvirt and vSphere show it running, as a guest still shutting
         * down (hv_vm_obs carries no boot identity: a moref stays, a domain ID is not kept),
         * so the operation holding that shutdown (also one that took it over after the
         * power-on) waits out its timeout; a CanUpdateMachine after the power-on sees the
         * same running VM with a shutdown in flight and cannot know the press is spent. */
        bool undone = v->press_undone && strstr(res.message, "did not shut down within");
        /* The sticky Failure of the operation the engine began for this desired state before
         * this CanUpdateMachine (A -> B -> A while A's operation was still in flight: the same
         * request joins it, and its record says when it began) is that operation's: it dates
         * from the covered CanUpdateMachine that began it */
        /* (... also when a record for other hardware has replaced that Failure's since: an
         * operation for the state between (A -> B -> A) begun over it by another replica's pass
         * for B's call, and this replica concluded the Failure (its record's owner) and was
         * called for no state between: its calls since are one series for this hardware, and
         * it answers the Failure from its look before the replacement (answer.c: a waiting
         * call confirms a Failure its pass concluded after that call); seed 38736, "the VM did
         * not stay on", its halts after A's covered CanUpdateMachine. A replica called for B
         * meanwhile looks again first: scenario old_failure_after_a_b_a_waits_for_a_look;
         * ... or read it: its last look came after that Failure was stored and no later than
         * its replacement, in the world's order (failed_seq): the answer is its pass's
         * conclusion from that look; held-out seed 5526799: r0 wrote B's "did not stay on"
         * (halts after B's cover), r1's pass read it, r0 began A over it, and r1, called only
         * for B, answered it to B's next CanUpdateMachine's series; that look at or after
         * this replica's previous call, and this call on time for it (within the wait its
         * last answer asked): a Failure read before a call, or answered to a late one, is
         * answered only after a look again, answer.c; mutations sticky_failure_answered_stale
         * and late_call_keeps_done, seed 6486: r0's call 31 s after its last, 5 s asked) */
        const struct hv_oprecord *fr = sim_record(v);
        const struct hv_oprecord *ar = fr;
        int owner, owner_gen;
        if (!(fr && fr->phase == HV_PH_FAILED && !strcmp(fr->message, res.message)) &&
            v->have_replaced_failed && c->op.changed_in_flight && c->have_prev &&
            !hv_hw_equal(&c->prev_op.want, &c->op.want) && !c->prev_op.last_rep_ms[r] &&
            ((sscanf(v->replaced_failed.owner, "sim-r%d:%d", &owner, &owner_gen) == 2 &&
              owner == r) ||
             (v->look_seq[r] > v->replaced_failed_seq &&
              v->look_seq[r] <= v->replaced_failed_gone_seq && v->look_ms[r] >= prev_rep &&
              on_time)))
            ar = &v->replaced_failed;
        /* (... or when the operator cleared that Failure's record since this replica's pass
         * concluded it, and no record has replaced it: the engine answers it from that pass,
         * which began the operation for this hardware before this CanUpdateMachine; held-out
         * seed 1451157, X -> A -> X -> A with A's power-on refused three times) */
        else if (!fr && v->cleared_pending && v->cleared_rec.phase == HV_PH_FAILED &&
                 !strcmp(v->cleared_rec.message, res.message))
            ar = &v->cleared_rec;
        int64_t can_ms = c->op.can_ms;
        if (ar && ar->phase == HV_PH_FAILED && same_failure(ar->message, res.message) &&
            hv_hw_equal(&ar->desired, &c->op.want)) {
            /* (whole seconds: it began before the end of its second, and a cover after the
             * start of that second may have come after it; held-out seed 2287065, B begun at
             * 22.0 s, C covered at 22.1 s, B's Failure dated from C's cover onward) */
            int64_t began_ms = (ar->started_at - s->unix0 + 1) * 1000;
            for (int k = 0; k < c->n_covers; k++)
                if (c->cover_ms[k] < began_ms && c->cover_ms[k] < can_ms &&
                    hv_hw_equal(&c->cover_want[k], &c->op.want) &&
                    (k + 1 == c->n_covers || c->cover_ms[k + 1] >= began_ms - 1000))
                    can_ms = c->cover_ms[k];
        }
        /* An operation that waited for a power-cycle slot until its deadline (it took no
         * step: "last step: planned") while a cycle on a host that does not answer held the
         * slot it needed, or a host this replica's scans could never list filled the caps
         * (seeds 3370, 22864, 201106, 212546: cap 1, a host down or stalled since before the
         * replica's first scan) */
        bool capped =
            gave_up_unbegun(s, m, res.message, can_ms) &&
            (cycle_on_a_host_in_trouble(s, can_ms) || own_cycle_behind_a_host_in_trouble(s, r) ||
             caps_held_by_unlisted_hosts(s, r, m) || caps_held_over_the_wait(s, r, m, can_ms));
        int carrier = -1;
        capped = capped || (spent_previous_life_step(s, m, res.message, can_ms, &carrier) &&
                            (cycle_on_a_host_in_trouble(s, can_ms) ||
                             own_cycle_behind_a_host_in_trouble(s, carrier) ||
                             caps_held_by_unlisted_hosts(s, carrier, m)));
        /* Statistics that went stale show as stopped only once their last report is older
         * than a few of their periods (the engine allows 6 s, GUEST_REPORT_S, on libvirt's
         * whole-second last-update; a real guest reports every 2 s): a CanUpdateMachine that
         * soon after cannot tell them from a guest that reports, nor can any engine that
         * tolerates a report's age at all. */
        /* So are statistics that stopped (stale or absent) after the look the covering
         * CanUpdateMachine was answered from: the probe answers from a look a few seconds old
         * (its cache), which showed them: the world's order of that look and the stop, within
         * the same few seconds (held-out seed 2666767: absent 0.3 s before the cover, which r1
         * answered from its look of 1.1 s before; r0's begin refused) */
        bool required_mem =
            strstr(res.message, "guestVerification is Required") && strstr(res.message, "memory");
        bool unseen_stale =
            required_mem && v->stats != 0 &&
            ((v->stats == 1 && can_ms - v->stats_changed_ms <= STATS_STOP_UNSEEN_MS) ||
             (c->op.can_probe_seq && v->stats_stopped_seq > c->op.can_probe_seq &&
              v->stats_changed_ms <= can_ms &&
              can_ms - v->stats_changed_ms <= STATS_STOP_UNSEEN_MS));
        /* ... and a stale spell that began at most those few seconds before the cover, lasted
         * long enough for a look to see it (those few seconds) and past this replica's
         * previous call, over now: the one-look Failure its pass concluded while the
         * statistics were stale is answered after they came back (the world's spell: when
         * fresh statistics stopped and when they were fresh again, not the statistics at the
         * answer; held-out seeds 5286090, 5466190; a spell shorter than a report's allowed age
         * excuses nothing: stop 55's review), with this replica's last look inside the spell
         * (the pass that concluded it saw them stale; a look after they came back concludes
         * from fresh ones: stop 56's review) */
        unseen_stale =
            unseen_stale ||
            (required_mem && v->stats == 0 && v->fresh_until_ms && v->fresh_until_ms <= can_ms &&
             can_ms - v->fresh_until_ms <= STATS_STOP_UNSEEN_MS &&
             v->stats_changed_ms - v->fresh_until_ms >= STATS_STOP_UNSEEN_MS &&
             v->stats_changed_ms > prev_rep && v->look_ms[r] > v->fresh_until_ms &&
             v->look_ms[r] < v->stats_changed_ms);
        /* (the same Failure answered again to CAPI retrying it: judged once, when first
         * answered) */
        bool again = !strcmp(c->op.fail_msg[r], res.message);
        /* (... also to a call of a later operation for the same hardware, when it was this
         * replica's last answer to the Machine but "observing the VM" (below): the engine cannot
         * tell CAPI retrying it from A -> B -> A with B served by another replica meanwhile, and
         * answers the Failure it concluded again, answer.c; seed 108028. It was judged when first
         * answered) */
        bool again_rep = !again && !strcmp(c->rep_fail_msg[r], res.message) &&
                         hv_hw_equal(&c->rep_fail_want[r], &c->op.want);
        int cause = again       ? c->op.fail_cause[r]
                    : again_rep ? c->rep_fail_cause[r]
                                : failure_cause(s, m, res.message, can_ms, prev_rep, deaf || undone,
                                                capped, unseen_stale);
        snprintf(c->op.fail_msg[r], sizeof(c->op.fail_msg[r]), "%s", res.message);
        c->op.fail_cause[r] = cause;
        snprintf(c->rep_fail_msg[r], sizeof(c->rep_fail_msg[r]), "%s", res.message);
        c->rep_fail_want[r] = c->op.want;
        c->rep_fail_cause[r] = cause;
        if (cause >= 0)
            s->r.fail_excused[cause]++;
        else
            s->r.fail_judged++;
        if (c->op.covered && cause < 0)
            sim_break(s, INV_COVERED,
                      "%s: covered change failed with no cause that ends it: %s%s%s", v->name,
                      res.message, blind ? " (the guest cannot tell)" : "",
                      c->op.vm_differed ? " (the VM differed from CAPI's current objects)" : "");
        /* Invariant 5: a Failure that says the VM's previous configuration was restored (a
         * rollback) is true of the VM (only the engine and the operator change it) */
        s->r.checks++;
        if (fr && fr->phase == HV_PH_FAILED && same_failure(fr->message, res.message) &&
            strstr(res.message, "was restored") && !v->operator_config &&
            hv_hw_equal(&fr->desired, &c->op.want) &&
            ((fr->prev.memory_mib > 0 && v->config.memory_mib != fr->prev.memory_mib) ||
             (fr->prev.cpus > 0 && v->config.cpus != fr->prev.cpus)))
            sim_break(s, INV_NO_LOSS,
                      "%s: the Failure says the previous configuration was restored, but the VM "
                      "has %lld MiB %d vCPUs (previous: %lld MiB %d vCPUs): %.120s",
                      v->name, (long long)v->config.memory_mib, v->config.cpus,
                      (long long)fr->prev.memory_mib, fr->prev.cpus, res.message);
        /* ... and its power and configuration say what the rollback did (the world's facts:
         * the last power-on, the configuration): "it was started" for a VM started since the
         * Failure's step (that may have halted or been stopped by the operator since); "the
         * VM is off" for one that is off or that only the operator started since; "with the
         * new configuration" for a VM that has it. (A later pass that rolls back again
         * rewrites the message in the same pass: it follows what was done.) */
        s->r.checks++;
        if (fr && fr->phase == HV_PH_FAILED && same_failure(fr->message, res.message) &&
            fr->rollback && hv_hw_equal(&fr->desired, &c->op.want) && v->exists) {
            int64_t step_ms = (fr->step_at - s->unix0) * 1000;
            bool started = v->power_on_ms >= step_ms && v->power_on_ms > v->op_on_ms;
            bool says_started = strstr(res.message, "and it was started") ||
                                strstr(res.message, "so it was started");
            bool says_off = strstr(res.message, "so the VM is off") ||
                            strstr(res.message, "the VM is off with");
            bool says_new = strstr(res.message, "with the new configuration");
            const struct hv_hw *nw = &fr->desired;
            bool has_new = (nw->memory_mib < 0 || v->config.memory_mib == nw->memory_mib) &&
                           (nw->cpus < 0 || v->config.cpus == nw->cpus);
            /* (a start or a restore the hypervisor took whose answer was lost: the engine
             * cannot know it happened; the world's log says so) */
            bool lost_on = v->lost_ms[HV_STEP_POWER_ON] >= step_ms &&
                           v->lost_ms[HV_STEP_POWER_ON] == v->power_on_ms;
            bool lost_restore = v->lost_ms[HV_STEP_RECONFIGURE] >= step_ms ||
                                v->lost_ms[HV_STEP_POWER_ON] >= step_ms;
            /* (a start by a pass whose record write after it failed, the note it would have
             * stored lost, answered by a replica whose last look is from before that start:
             * no record and no look told it of the start; held-out seed 2136646) */
            /* (the look and the start told apart in the world's order: one millisecond may
             * hold both, held-out seeds 2536643, 5284721) */
            lost_on |= v->call_fail_ms[SIM_CALL_WRITE] >= v->power_on_ms &&
                       v->look_seq[r] < v->power_on_seq;
            /* (... or a start by another replica's pass after the answering replica's last
             * look: the answer is that replica's own pass's conclusion from before the start
             * (answer.c answers a sticky Failure from its last pass), the record's note since
             * rewritten by the starter; held-out seed 740: r0's rollback start failed at
             * 157.2 s, r1's pass started the VM in the same ms and stored "was started", r0
             * answered "so the VM is off" at 158.9 s; the answering replica's last look
             * found the VM not running: a pass that saw it running and wrote "off" is judged,
             * stop 56's review) */
            lost_on |= v->power_on_rep != r && v->look_seq[r] < v->power_on_seq &&
                       v->look_on_ms[r] < v->look_ms[r] && strcmp(fr->message, res.message) != 0;
            /* (... and a restore the hypervisor took since the Failure's step whose record
             * write after it failed: the record on the VM keeps the note of the try before,
             * which every pass answers until one that sees the VM running stores the new one,
             * reconcile.c rc_rollback_note_follows_vm, so only while no pass of the answering
             * replica has looked at it running since; held-out seed 5302194: the restore and
             * start taken at 337.2 s, the write failed, the VM paused right after its boot;
             * seed 212186 guards the rule: a pass saw it running and kept the old note) */
            lost_restore |= v->reconf_ms >= step_ms &&
                            v->call_fail_ms[SIM_CALL_WRITE] >= v->reconf_ms &&
                            v->look_on_ms[r] < v->reconf_ms;
            /* (... or a restore by another replica's pass after the answering replica's last
             * look, the answer differing from the record: that replica's own pass's
             * conclusion from before the restore, as for a start above; held-out seeds
             * 5469499, 5461860, 5441040 (x1000): r1's restore call failed and it stored "...
             * so the VM is off with the new configuration" at 204.0 s, r0's pass restored the
             * VM at 205.0 s and stored "... was restored", r1's call at 205.1 s got its own
             * conclusion) */
            lost_restore |= v->reconf_rep != r && v->look_seq[r] < v->reconf_seq &&
                            strcmp(fr->message, res.message) != 0;
            if (says_started && !started && v->power != HV_POWER_ON && v->op_change_ms < step_ms)
                sim_break(s, INV_NO_LOSS,
                          "%s: the Failure says the VM was started, but it is off and was not "
                          "started since: %.160s",
                          v->name, res.message);
            else if (says_off && v->power == HV_POWER_ON && started && !lost_on &&
                     v->op_change_ms < step_ms)
                sim_break(s, INV_NO_LOSS,
                          "%s: the Failure says the VM is off, but the engine started it since: "
                          "%.160s",
                          v->name, res.message);
            else if (says_new && !has_new && !v->operator_config && !lost_restore)
                sim_break(s, INV_NO_LOSS,
                          "%s: the Failure says the VM has the new configuration, but it has "
                          "%lld MiB %d vCPUs: %.160s",
                          v->name, (long long)v->config.memory_mib, v->config.cpus, res.message);
        }
        /* CAPI keeps calling with back-off; some callers give up (a new rollout instead) */
        c->op.failed = true;
        c->op.observing = 0;
        if (sim_chance(s, 400)) {
            c->st = C_IDLE;
            c->next_ms = s->now_ms + 1000 * sim_range(s, 10, 300);
            if (s->o.honest_capi) {
                /* (the update is still in flight, in which CAPI never changes the desired
                 * spec: no new rollout for this Machine; a caller that gives up is a Machine
                 * deleted, and stops calling) */
                c->st = C_STOPPED;
                c->stopped_mid = true;
                c->stopped_ms = s->now_ms;
                sim_note(s, "capi %s: stops calling after the Failure (Machine deleted)",
                         s->vms[m].name);
                return;
            }
            /* A Failure the VM's record does not hold as final (e.g. the record could not be
             * stored) leaves the operation open: CAPI keeps calling after a Failure (the
             * contract), so the pass that call asked for may begin a live change, which the
             * next call would carry on. A caller that gives up here stops calling in the
             * middle of it, like a Machine deleted (until a new covered operation begins). */
            c->stopped_mid |=
                !(fr && fr->phase == HV_PH_FAILED && !strcmp(fr->message, res.message));
        } else {
            c->op.backoff = c->op.backoff ? c->op.backoff * 2 : 10;
            c->next_ms = s->now_ms + 1000 * (int64_t)c->op.backoff;
        }
        return;
    }
    c->op.fail_msg[r][0] = '\0';
    /* (an entry evicted while idle answers "observing the VM", holding no conclusion, and its
     * pass concludes again what the VM's record holds: the Failure this replica answered
     * last stays its last answer to the Machine through such answers, for again_rep; seed
     * 1112533: r1's Failure of B answered at 269.6 s, then only "observing" to B's calls,
     * the pass after the last one concluded B's Failure from its record again, and r1
     * answered it at 916.4 s to B's next CanUpdateMachine after A -> B -> A) */
    if (strcmp(res.message, "in progress: observing the VM"))
        c->rep_fail_msg[r][0] = '\0';
    /* "in progress: observing the VM" answers a call the engine holds no conclusion for yet
     * (its entry was evicted while idle, entries.c): no progress, so a Failure stays the
     * operation's end through a few of those in a row (not through more: invariant 3). So
     * does the answer of a pass whose look or record write the world failed since this
     * replica's previous call ("the hypervisor cannot be reached; trying again"): it read no
     * record, so it concluded nothing either (held-out seed 5290309: B's sticky Failure
     * answered, the entry evicted, CAPI's call 320 s later answered "observing the VM", the
     * next one met an outage of its look). Every answer the engine gives a look or record
     * write it waits on after a failed call (pass_say.c rc_wait_for_hypervisor, by errclass.c's
     * table): an outage or no answer in time of either (held-out seeds 5740899 --honest-capi,
     * 5709672: the next call's look did not answer in time; a lost race of the write, "another
     * task is changing the VM", is no failed call of the world's and stays judged); also
     * that answer given again to this replica's next call with no look of it at the VM
     * since (no pass of it read anything since: 5709672, the call 3 s later, on time, its
     * retry pass not run yet) */
    bool again = c->op.unread_ms[r] && c->op.unread_ms[r] == prev_rep && v->look_ms[r] < prev_rep;
    bool failed_call = v->call_fail_ms[SIM_CALL_OBSERVE] >= prev_rep ||
                       v->call_fail_ms[SIM_CALL_WRITE] >= prev_rep || again;
    bool unread = (strstr(res.message, "in progress: the hypervisor cannot be reached") ||
                   strstr(res.message, "in progress: the hypervisor did not answer in time")) &&
                  failed_call;
    if (!(c->op.failed && (strstr(res.message, "in progress: observing the VM") || unread) &&
          ++c->op.observing <= OBSERVING_MAX))
        c->op.failed = false;
    c->op.unread_ms[r] = c->op.failed && unread ? s->now_ms : 0;
    if (res.retry_after_s > 0) {
        c->next_ms = s->now_ms + 1000 * (int64_t)res.retry_after_s;
        if (strstr(res.message, "waiting for a power-cycle slot") &&
            (!c->op.slot_retry_ms || 1000LL * res.retry_after_s < c->op.slot_retry_ms))
            c->op.slot_retry_ms = 1000LL * res.retry_after_s;
        return;
    }
    /* Invariant 1: done only when the VM (and the guest, where it can tell) shows it now */
    s->r.dones++;
    s->r.checks++;
    /* the look the answering replica's last pass took (seen_after reads count: a step's
     * read is taken after the step, later than the pass's observe) */
    (void)prev_call;
    c->done_excused = false;
    if (v->touched_ms < v->look_ms[r]) {
        const struct hv_hw *w = &c->op.want;
        if (!v->exists)
            sim_break(s, INV_DONE_SHOWS, "%s: done, but the VM is gone", v->name);
        else if (v->power == HV_POWER_PAUSED)
            sim_break(s, INV_DONE_SHOWS, "%s: done while paused", v->name);
        else if (!sim_hw_shows(v, w) && stepped_for_a_state_left_in_flight(s, m, r))
            s->r.done_excused++, c->done_excused = true;
        else if (!sim_hw_shows(v, w))
            sim_break(s, INV_DONE_SHOWS,
                      "%s: done for %lld MiB %d vCPUs %lld MiB disk; the VM shows %lld MiB %d "
                      "vCPUs %lld MiB disk (%s)",
                      v->name, (long long)w->memory_mib, w->cpus, (long long)w->disk_mib,
                      (long long)(v->power == HV_POWER_OFF ? v->config : v->live).memory_mib,
                      (v->power == HV_POWER_OFF ? v->config : v->live).cpus,
                      (long long)(v->power == HV_POWER_OFF ? v->config : v->live).disk_mib,
                      v->power == HV_POWER_OFF ? "off" : "on");
        else if (v->power == HV_POWER_OFF && v->cycling && !v->operator_power)
            sim_break(s, INV_DONE_SHOWS, "%s: done while off in the middle of a power cycle",
                      v->name);
        else if (v->power == HV_POWER_ON && c->op.s.guest_check != HV_GC_OFF &&
                 (!v->boot_at || v->boot_at <= s->now_ms) &&
                 v->record_cleared_ms < c->op.start_ms) {
            /* (a record the operator cleared during the operation: the next call starts
             * afresh, docs/messages.md "Clearing a sticky failure"; the engine no longer
             * knows what the guest had before, so the guest cannot tell it) */
            /* stale statistics tell what the guest had when they stopped, stamped then in
             * whole seconds (libvirt's last-update): only a report from a later second than the
             * operation's last step (its record's stepAt) tells of it; statistics that came
             * back during the operation had nothing from before it to compare with */
            const struct hv_oprecord *sr = sim_record(v);
            int64_t after = sr ? sr->step_at : s->unix0 + c->op.start_ms / 1000;
            bool mem_tells =
                (v->stats == 0 && v->stats_changed_ms < c->op.start_ms) ||
                (v->stats == 1 && v->stale.mem_view == HV_GV_SEEN && v->stale.mem_at > after);
            bool cpu_tells = v->agent;
            /* a field the last done answered and this operation leaves as it was: the guest
             * tells nothing of this operation by it (that done was checked when answered) */
            mem_tells &= !c->op.kept_mem;
            cpu_tells &= !c->op.kept_cpus;
            /* the operation this done is of (its record, for this hardware) began while the
             * guest had no statistics (begun_stats_blind): nothing from before its step to
             * compare with, also when they came back before CAPI asked for that hardware again
             * and the done was answered as stored (held-out seed 5609914 @1000: a DIMM plugged
             * blind at 86.7 s, never onlined, done "(not verified in the guest)"; statistics
             * back at 914.7 s; CAPI back to that state at 1953.8 s got the stored done) */
            if (sr && hv_hw_equal(&sr->desired, w) && v->begun_at == sr->started_at &&
                hv_hw_equal(&v->begun_for, &sr->desired) && v->begun_stats_blind)
                mem_tells = false;
            /* a field an operation under guestVerification Off stepped live, begun over while
             * in flight, or one any operation stepped live that began longer than
             * deadlineSeconds before (its base is not kept): nothing from before that step to
             * compare with (note_begun_over) */
            if (sr && hv_hw_equal(&sr->desired, w) && hv_hw_equal(&v->off_blind_for, w)) {
                mem_tells &= !v->off_blind_mem;
                cpu_tells &= !v->off_blind_cpus;
            }
            /* ... or, with no record stored since the operator cleared one (the operation found
             * nothing to change), a field the cleared one stepped live or had begun over a
             * live step of: its base went with the clear (note_begun_over's cleared case; seed
             * 1102837) */
            if (!sr && v->cleared_pending) {
                mem_tells &= !v->cleared_live_mem;
                cpu_tells &= !v->cleared_live_cpus;
            }
            /* a guest the operator started (or the engine, its record cleared by the operator
             * during the boot), still booting when the operation began (its base: no view of
             * memory from before it) or, for vCPUs (an exact count), when the engine concluded
             * done: it had reported nothing since it started, which no engine can tell from a
             * guest without an agent or driver (libvirt's agent channel and balloon are there
             * either way; docs/settings.md "nothing reported since it started"). After the
             * engine's own power-on it waits for the guest instead (its record tells). */
            if (v->foreign_boot_ms && sr && sr->phase == HV_PH_DONE &&
                hv_hw_equal(&sr->desired, w)) {
                mem_tells &= v->foreign_boot_ms < (sr->started_at - s->unix0) * 1000;
                cpu_tells &= v->foreign_boot_ms < (sr->step_at - s->unix0) * 1000;
            }
            struct hv_hw g = *w;
            if (!mem_tells)
                g.memory_mib = -1;
            if (!cpu_tells)
                g.cpus = -1;
            /* a field that a done under guestVerification Off left unverified, unchanged
             * since (the VM and the guest show the same): the engine compares the guest with
             * itself and checks only what the operation changes (docs/settings.md), so the
             * guest cannot tell that field for this operation */
            const struct hv_hw *od = &v->off_done_hw;
            if (g.memory_mib >= 0 && g.memory_mib == od->memory_mib &&
                v->live.memory_mib == od->memory_mib && v->guest_mem == v->off_done_guest_mem)
                g.memory_mib = -1;
            if (g.cpus >= 0 && g.cpus == od->cpus && v->live.cpus == od->cpus &&
                v->guest_cpus == v->off_done_guest_cpus)
                g.cpus = -1;
            /* memory a live step the hypervisor took before the answering operation began
             * added and the guest never onlined, no boot since, every base from before that
             * step ended by then (sim_unonlined_before): the base that operation took holds it
             * as the hypervisor's and not the guest's, so the guest cannot tell it (the record
             * names only which operation answered, and when it began) */
            bool own_rec = sr && hv_hw_equal(&sr->desired, w);
            int64_t began_ms = own_rec ? (sr->started_at - s->unix0) * 1000
                               : !sr   ? c->op.start_ms
                                       : 0;
            if (g.memory_mib >= 0 &&
                sim_unonlined_before(v, began_ms, g.memory_mib, 1000LL * c->op.s.deadline_s,
                                     own_rec && v->begun_at == sr->started_at))
                g.memory_mib = -1;
            if (g.memory_mib >= 0 && began_ms &&
                sim_blind_plug_on_its_way(v, began_ms, g.memory_mib))
                g.memory_mib = -1;
            if (!sim_guest_shows(v, &g))
                sim_break(s, INV_DONE_SHOWS,
                          "%s: done but the guest has %lld MiB online and %d vCPUs, want %lld "
                          "MiB %d vCPUs%s",
                          v->name, (long long)v->guest_mem, v->guest_cpus, (long long)w->memory_mib,
                          w->cpus, v->stats == 1 ? " (stale statistics)" : "");
        }
    }
    /* Required never answers done without the guest's view of a field the operation changes
     * (docs/settings.md guestVerification): a memory report newer than the operation's last
     * step (fresh statistics, or stale ones from a later second), a guest agent for vCPUs; a
     * guest still booting has none. Checked on the world's facts when the answering replica
     * looked at the VM after anything else changed it. */
    s->r.checks++;
    /* (not after the operator cleared the record during the operation: the next call starts
     * afresh and finds nothing to change, docs/messages.md "Clearing a sticky failure") */
    if (c->op.s.guest_check == HV_GC_REQUIRED && v->exists && v->power == HV_POWER_ON &&
        v->touched_ms < v->look_ms[r] && v->stats_changed_ms < v->look_ms[r] &&
        v->record_cleared_ms < c->op.start_ms) {
        const struct hv_hw *w = &c->op.want;
        /* (the world's last step, not the record's stepAt: a done record is stamped when
         * concluded) */
        int64_t after =
            s->unix0 + (v->step_ok_ms > c->op.start_ms ? v->step_ok_ms : c->op.start_ms) / 1000;
        bool booted = !v->boot_at || v->boot_at <= v->look_ms[r];
        bool mem_view =
            booted && (v->stats == 0 || (v->stats == 1 && v->stale.mem_view == HV_GV_SEEN &&
                                         v->stale.mem_at > after));
        /* or fresh statistics of the booted guest after that step, gone before this answer: a
         * done concluded while they were there had the guest's view (it is answered again
         * since, as stored) */
        int64_t step_ms = v->step_ok_ms > c->op.start_ms ? v->step_ok_ms : c->op.start_ms;
        mem_view |=
            v->fresh_until_ms > (v->booted_ms > step_ms ? v->booted_ms : step_ms) && !v->boot_at;
        bool cpu_view = booted && v->agent;
        /* or the done answered is the record of this state concluded while the guest had the
         * view (note_done_view), a halt or a boot since having taken it away: answered again
         * as stored (held-out seed 1662284: r0 concluded C done at 144.5 s from the booted
         * guest's fresh statistics, the VM halted at 145.6 s, the operator powered it on at
         * 146.4 s, r1 answered the stored done at 148.8 s during that boot) */
        const struct hv_oprecord *dr = sim_record(v);
        if (dr && dr->phase == HV_PH_DONE && dr->started_at == v->done_view_op &&
            hv_hw_equal(&dr->desired, w) && !strcmp(dr->message, res.message)) {
            mem_view |= v->done_view_mem;
            cpu_view |= v->done_view_cpus;
        }
        /* (a field the VM already showed when the operation began, or at the
         * CanUpdateMachine or after the operator's change before the operation began, is no
         * change of this operation's) */
        const struct sim_vm *cv = v;
        bool began = hv_hw_equal(&cv->begun_for, w);
        bool mem = w->memory_mib >= 0 && w->memory_mib != c->op.from.memory_mib &&
                   !(began && cv->begun_hw.memory_mib == w->memory_mib) && !c->op.kept_mem;
        bool cpus = w->cpus >= 0 && w->cpus != c->op.from.cpus &&
                    !(began && cv->begun_hw.cpus == w->cpus) && !c->op.kept_cpus;
        if ((mem && !mem_view) || (cpus && !cpu_view))
            sim_break(s, INV_DONE_SHOWS,
                      "%s: done under guestVerification Required without the guest's view of "
                      "its %s: \"%.120s\"",
                      v->name, mem && !mem_view ? "memory" : "vCPUs", res.message);
    }
    if (v->power == HV_POWER_ON && c->op.s.guest_check == HV_GC_OFF) {
        v->off_done_hw = v->live;
        v->off_done_guest_mem = v->guest_mem;
        v->off_done_guest_cpus = v->guest_cpus;
    }
    c->st = C_IDLE;
    c->done_last = true;
    c->done_ms = s->now_ms;
    c->next_ms = s->now_ms + 1000 * sim_range(s, 5, 200);
}

/* CAPI's other behaviours: stop calling, change the desired state, go back to the old one. */
static void caller_whim(struct sim *s)
{
    int m = sim_range(s, 0, s->n_vms - 1);
    struct sim_caller *c = &s->callers[m];
    if (c->st != C_UPDATING)
        return;
    int w = sim_range(s, 0, 2);
    if (w != 0 && s->o.honest_capi)
        return; /* (never while an update is in flight: CONTRACT.md) */
    if (w == 0) {
        c->st = C_STOPPED;
        c->stopped_mid = true;
        c->stopped_ms = s->now_ms;
        sim_note(s, "capi %s: stops calling (Machine deleted)", s->vms[m].name);
    } else if (w == 1 || !c->have_prev) {
        struct hv_hw want = pick_want(s, &c->spec);
        sim_note(s, "capi %s: the rollout changes (A -> B)", s->vms[m].name);
        start_op(s, m, want, sim_chance(s, 800));
    } else if (!hv_hw_equal(&c->prev_op.want, &c->op.want)) {
        sim_note(s, "capi %s: the rollout goes back (A -> B -> A)", s->vms[m].name);
        start_op(s, m, c->prev_op.want, true);
    }
}

static void caller_step(struct sim *s)
{
    int start = sim_range(s, 0, s->n_vms - 1);
    for (int j = 0; j < s->n_vms; j++) {
        int m = (start + j) % s->n_vms;
        struct sim_caller *c = &s->callers[m];
        if (c->st == C_STOPPED || c->next_ms > s->now_ms)
            continue;
        if (c->st == C_IDLE) {
            if (!s->vms[m].exists)
                continue;
            struct hv_hw want = pick_want(s, &c->spec);
            if (c->n_wants > 1 && sim_chance(s, 300)) { /* a rollout rolled back: an old state */
                want = c->wants[sim_range(s, 0, c->n_wants - 1)];
                if (hv_hw_equal(&want, &c->spec))
                    want = pick_want(s, &c->spec);
            }
            start_op(s, m, want, sim_chance(s, 800));
        } else {
            call_update(s, m);
        }
        return;
    }
}

/* ---- invariants checked every step ---------------------------------------------------------- */

/* v's record shows a power cycle in flight: also a Failure that came upon a cycle's
 * shutdown or power-off, which may still take the VM down (downAt) */
static bool in_cycle(struct sim_vm *v)
{
    const struct hv_oprecord *r = v->exists ? sim_record(v) : NULL;
    return r && r->cold &&
           ((r->phase >= HV_PH_SHUTDOWN && r->phase <= HV_PH_POWER_ON) ||
            (r->phase == HV_PH_FAILED && r->down_at));
}

static int64_t stuck_since[SIM_MAX_REPLICAS];

/* Replica r's caps, as its present life counts them from the world's facts, have room for a
 * new cycle on host h (slots.c eng_slot_acquire, eng_slot_take): h listed by a scan of this
 * life, and the cycles in flight whose record this replica wrote, with a host's worth of
 * slots for each host this life never listed, under the overall and the per-host cap. */
bool sim_caps_room(struct sim *s, int r, int h)
{
    unsigned listed = s->reps[r].listed_hosts;
    if (!(listed & (1u << h)))
        return false;
    int all = 0, on_host = 0;
    for (int g = 0; g < s->n_hosts; g++)
        all += !(listed & (1u << g)) ? s->ecfg.max_power_cycles_per_host : 0;
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *w = &s->vms[k];
        int rep = -1, gen = 0;
        if (!in_cycle(w) || sscanf(sim_record(w)->owner, "sim-r%d:%d", &rep, &gen) != 2 || rep != r)
            continue;
        all++;
        on_host += w->host == h;
    }
    return all < s->ecfg.max_power_cycles && on_host < s->ecfg.max_power_cycles_per_host;
}

/* each step: open or close each replica's spans of room on each host */
void sim_note_room(struct sim *s)
{
    for (int r = 0; r < s->n_reps; r++) {
        struct sim_replica *rep = &s->reps[r];
        for (int h = 0; h < s->n_hosts; h++) {
            bool room = sim_caps_room(s, r, h);
            int n = rep->n_room[h], at = (n + SIM_ROOM_SPANS - 1) % SIM_ROOM_SPANS;
            bool open = n && !rep->room_to[h][at];
            if (room && !open) {
                at = n % SIM_ROOM_SPANS;
                rep->room_from[h][at] = s->now_ms;
                rep->room_to[h][at] = 0;
                rep->n_room[h]++;
            } else if (!room && open) {
                rep->room_to[h][at] = s->now_ms;
            }
        }
    }
}

/* A power cycle is under way on a host that died or stalled (now, or at some time since
 * since_ms): its VM may be down, so its slot stays held (a cap the operator set stays kept)
 * for as long as the host does not answer, a fault no CanUpdateMachine can see coming. */
static bool cycle_on_a_host_in_trouble(struct sim *s, int64_t since_ms)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *w = &s->vms[k];
        const struct sim_host *h = &s->hosts[w->host];
        if (in_cycle(w) && (h->down || h->stalled || w->host_down_ms >= since_ms))
            return true;
        /* (... or whose record the operator cleared while its host was out, still out: no
         * engine can see that clear, held-out seed 5434580: vm1's cycle on host1, stalled for
         * good at 132.7 s, its record cleared at 241.5 s, the only slot held for it while vm5
         * waited past its deadline) */
        if (w->exists && w->cleared_out_cycle && (h->down || h->stalled))
            return true;
    }
    /* ... or did so at some time since since_ms, though the host is back and the cycle over
     * now (held-out seed 2034955: host1 stalled with vm1's cycle from before vm3's
     * CanUpdateMachine until 10 s before vm3's deadline, which fell between two of its polls
     * for the slot) */
    for (int h = 0; h < s->n_hosts; h++)
        if (s->hosts[h].cycle_out_ms >= since_ms)
            return true;
    return false;
}

/* ... or replica r's own last word on a VM's cycle (its last record write on it showed the cycle
 * under way, in its present life), with no look of r at that VM since, on a host down or
 * stalled now: r keeps that cycle's slot while it cannot see the VM, whatever another replica
 * or the operator wrote on the record meanwhile (held-out seeds 5268954, 5335713: r1's power-on
 * of vm0 written, r0 concluded it done 0.2 s later, the host stalled and then died, never back;
 * r1's only slot stayed held for vm0 and vm2 waited for it past its deadline) */
static bool own_cycle_behind_a_host_in_trouble(const struct sim *s, int r)
{
    for (int k = 0; k < s->n_vms; k++) {
        const struct sim_vm *w = &s->vms[k];
        const struct sim_host *h = &s->hosts[w->host];
        if ((h->down || h->stalled) && w->wrote_cycle_seq[r] &&
            w->wrote_cycle_gen[r] == s->reps[r].gen && w->look_seq[r] < w->wrote_cycle_seq[r])
            return true;
    }
    return false;
}

static bool owner_alive(const struct sim *s, struct sim_vm *v);

/* 5: a VM that went off in the middle of a power cycle whose carrier still runs is brought back
 * by the engine's own looks (every few seconds while it carries a cycle; docs/how-it-works.md
 * "Slots while a VM may go down"), not by CAPI's next call or the scan (scan_interval_s, 300 s
 * by default): once nothing has held it back since it went off (no fault of its host, no failed
 * or lost call, no pause, busy task, halt or refused start, no operator change, the carrier not
 * restarted) and no pass of the carrier is overdue, it is on again within OFF_MID_CYCLE_MS. Before,
 * only the run's end looked (a VM off at the end), and an engine that stopped following its own
 * cycle after one blind pass (mutation blind_pass_forgets_own_cycle) brought the VM back only when
 * the end phase delivered its events. */
static void check_off_mid_cycle(struct sim *s)
{
    s->off_checks++;
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        const struct hv_oprecord *r = v->exists ? sim_record(v) : NULL;
        if (!r || v->power != HV_POWER_OFF || !r->cold || r->phase < HV_PH_SHUTDOWN ||
            r->phase > HV_PH_POWER_ON || !owner_alive(s, v))
            continue;
        int rep = -1, gen = 0;
        if (sscanf(r->owner, "sim-r%d:%d", &rep, &gen) != 2 || rep < 0 || rep >= s->n_reps)
            continue;
        const struct sim_host *h = &s->hosts[v->host];
        int64_t since = v->went_off_ms;
        if (h->down || h->stalled || v->halted || v->halted_for_good || v->host_fault_ms >= since ||
            v->delay_ms >= since || v->touched_ms >= since || v->start_failed_ms >= since ||
            v->busy_until >= since || s->restart_ms[rep] >= since ||
            s->now_ms - since <= OFF_MID_CYCLE_MS)
            continue;
        /* (nor while the change report of its going off waits in the step loop, which
         * delivers reports on about one step in ten: a real backend's comes at once, and an
         * entry parked for the resume (HV_FOLLOW_RESUME) has no timer; held-out seeds 3189862,
         * 5392106) */
        if (v->reported_ms < since)
            continue;
        /* (a pass of the carrier that is due but has not had its turn yet, which its workers
         * would have run by now: the step loop's clock ran past it, as for 3's slots) */
        if (s->due_ms[rep] && s->due_ms[rep] <= s->now_ms)
            continue;
        /* (nor the VM's own pass, queued but left for later by the step loop's run of a few
         * passes, which its workers would have run at once; the timed passes still waiting,
         * which due_ms counts, do not show it) */
        if (hv_engine_pass_waiting(s->reps[rep].e, v->name)) {
            /* ... but only while the queue could not have reached it yet: it is FIFO, so
             * once the carrier ran as many passes as it has entries since the excuse began,
             * with no look at this VM, the pass was put back or skipped, not just late */
            struct sim_replica *c = &s->reps[rep];
            if (v->wait_check != s->off_checks - 1 || v->wait_look != v->look_ms[rep]) {
                v->wait_passes = c->passes;
                v->wait_look = v->look_ms[rep];
            }
            v->wait_check = s->off_checks;
            int64_t ran = c->passes - v->wait_passes;
            if (ran <= (int64_t)hv_engine_entries(c->e))
                continue;
            s->r.checks++;
            sim_break(s, INV_NO_LOSS,
                      "%s has been off in the middle of its power cycle (record: %s) for %.0f s, "
                      "its own pass queued on r%d through %lld passes that never looked at it",
                      v->name, hv_phase_name(r->phase), (double)(s->now_ms - since) / 1000, rep,
                      (long long)ran);
            return;
        }
        s->r.checks++;
        sim_break(s, INV_NO_LOSS,
                  "%s has been off in the middle of its power cycle (record: %s) for %.0f s, its "
                  "carrier r%d running and its host answering, nothing holding it back",
                  v->name, hv_phase_name(r->phase), (double)(s->now_ms - since) / 1000, rep);
        return;
    }
}

static void check_step(struct sim *s, bool calling)
{
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_host *h = &s->hosts[s->vms[k].host];
        if ((h->down || h->stalled) && in_cycle(&s->vms[k]))
            h->cycle_out_ms = s->now_ms;
    }
    check_off_mid_cycle(s);
    sim_note_room(s);
    s->r.checks++;
    sim_check_carried(s);
    /* 3: operations end within deadline + bound */
    for (int m = 0; calling && m < s->n_vms; m++) {
        struct sim_caller *c = &s->callers[m];
        s->r.checks++;
        /* (a host that died or stalled meanwhile: issue 17 item 10 wants a bound there) */
        const struct sim_host *h = &s->hosts[s->vms[m].host];
        /* (a VM paused outside a cycle: no step is taken until it runs, and each call is told
         * so: no bound applies while it stays paused) */
        bool held = s->vms[m].power == HV_POWER_PAUSED && !in_cycle(&s->vms[m]);
        /* (... nor, when it was so before any record of the operation, until CAPI's first
         * call after it runs again: the engine began nothing and begins on that call) */
        held = held || (c->op.held_unbegun && !op_recorded(&s->vms[m], c));
        /* (the operator cleared the VM's record during the operation: the engine begins it
         * anew, its deadline counted from that new start, docs/settings.md; seed 12260) */
        int64_t from = c->op.start_ms > s->vms[m].record_cleared_ms ? c->op.start_ms
                                                                    : s->vms[m].record_cleared_ms;
        /* (nor did it begin while its VM was paused before any record of the operation: it
         * begins on CAPI's first call after the VM runs again, whose time CAPI's back-off
         * sets, and counts its deadline from then; held-out seed 3942475: paused 0.2 s after
         * the cover, resumed at 609.9 s, CAPI's next call at 808.1 s after a 320 s back-off) */
        if (c->op.resumed_call_ms > from)
            from = c->op.resumed_call_ms;
        /* (the clock that other VMs' calls to a stalled host waited since: the step loop runs
         * every replica's passes and probes on the one clock in turn, where each replica's
         * workers would not wait for the other's, nor its passes for its probes; a pass that
         * ran that late after its call began nothing, run_head, and CAPI's calls came that
         * late. Seed 809130: a begin 188 s after the call, the deadline counted from it;
         * 809665: a done never answered, each call late) */
        int64_t others_stall = s->stall_wait_ms - s->vms[m].stall_wait_ms - c->op.others_stall_ms;
        if (c->st == C_UPDATING && !c->op.failed && s->vms[m].host_fault_ms < c->op.start_ms &&
            !h->down && !h->stalled && !held &&
            s->now_ms - from > (int64_t)c->op.s.deadline_s * 1000 + BOUND_MS + others_stall)
            sim_break(s, INV_ENDS, "%s: operation started %.0f s ago (deadline %d s), %d calls",
                      s->vms[m].name, (double)(s->now_ms - c->op.start_ms) / 1000,
                      c->op.s.deadline_s, c->op.calls);
    }
    /* 3: no slot held for an operation that cannot progress */
    int can = 0;
    bool paused = false;
    for (int k = 0; k < s->n_vms; k++) {
        can += in_cycle(&s->vms[k]) && s->vms[k].power != HV_POWER_PAUSED;
        paused |= s->vms[k].exists && s->vms[k].power == HV_POWER_PAUSED;
    }
    for (int r = 0; r < s->n_reps; r++) {
        int ops, pcs;
        hv_engine_gauges(s->reps[r].e, &ops, &pcs);
        s->r.checks++;
        bool hosts_up = true; /* a slot of a VM on a host that does not answer waits for it */
        for (int h = 0; h < s->n_hosts; h++)
            hosts_up &= !s->hosts[h].down && !s->hosts[h].stalled;
        /* (a pass of its own that is due but has not had its turn yet, which its workers
         * would have run by now: the step loop's clock ran past it. The slot is not stuck,
         * the engine has not looked yet) */
        int64_t due = s->due_ms[r];
        /* (nor one that came due and waits in its queue: the step loop's look for the next
         * event (hv_engine_run with max 0) moves a due timed pass to the queue, which due_ms
         * no longer shows, and runs it only at its next run of a few passes; workers would
         * have run it at once. Seed 216409: a blind pass took the slot of a VM paused in
         * its cycle, and the pass that would see it paused again and give the slot back
         * waited in the queue for 91 s of steps that ran no engine) */
        bool queued = false;
        for (int k = 0; k < s->n_vms && !queued; k++)
            queued = hv_engine_pass_waiting(s->reps[r].e, s->vms[k].name);
        if (pcs > can && hosts_up && !(due && due <= s->now_ms) && !queued) {
            if (!stuck_since[r])
                stuck_since[r] = s->now_ms;
            else if (s->now_ms - stuck_since[r] > STUCK_MS)
                sim_break(s, INV_ENDS,
                          "r%d holds %d power-cycle slots for %.0f s while %d VMs can go on "
                          "with a cycle%s",
                          r, pcs, (double)(s->now_ms - stuck_since[r]) / 1000, can,
                          paused ? " (a VM is paused)" : "");
        } else {
            stuck_since[r] = 0;
        }
    }
}

/* The process that wrote v's record still runs (no restart since). */
static bool owner_alive(const struct sim *s, struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    if (!r)
        return true;
    for (int k = 0; k < s->n_reps; k++)
        if (!strcmp(r->owner, s->reps[k].owner))
            return true;
    return false;
}

/* v's cycle belongs to a process that has ended and no process has observed v since. */
static bool cycle_unseen(const struct sim *s, struct sim_vm *v)
{
    const struct hv_oprecord *r = sim_record(v);
    int rep, gen;
    return r && sscanf(r->owner, "sim-r%d:%d", &rep, &gen) == 2 &&
           sim_unseen_since_restart(s, v, rep, gen);
}

/* 5 and 6, at the end of a run. */
static void check_end(struct sim *s)
{
    int slots = 0; /* power-cycle slots held by the replicas: a cycle nobody holds one for is
                      carried by no process (issue 17 item 5) */
    for (int r = 0; r < s->n_reps; r++) {
        int ops = 0, cycles = 0;
        hv_engine_gauges(s->reps[r].e, &ops, &cycles);
        slots += cycles;
    }
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        struct sim_caller *c = &s->callers[k];
        s->r.checks++;
        if (!v->exists) {
            if (!v->operator_power)
                sim_break(s, INV_NO_LOSS, "%s no longer exists", v->name);
            continue;
        }
        /* a VM that was off is started by an operation (docs/how-it-works.md: reconfigure,
         * then power-on): a Machine's desired state is a running VM */
        bool asked = c->n_wants > 0;
        /* A failed cold operation that left the VM off retries its start by itself for
         * step_timeout_s after the Failure (reconcile.c left_off), then only on CAPI's calls,
         * and CAPI has stopped. When the hypervisor refused or failed the engine's starts
         * through that window (the last one at or after its end), the engine kept its bound:
         * no bounded engine can know that one more start would have worked (the step loop may
         * also run its passes late, which real workers run when due: fewer tries fit the
         * window). A VM left off with no start tried that late is still a break, unless its
         * host was down or stalled at the window's end (seed 606628: the engine could not
         * look, so tried no start, until the window was over). */
        bool start_given_up = sim_start_given_up(s, v) || sim_start_window_lost_to_host(s, v) ||
                              sim_start_window_lost_to_the_loop(v);
        if (!v->operator_power && !v->halted_for_good && !v->halted && !start_given_up &&
            v->power != v->power0 && !(v->power0 == HV_POWER_OFF && asked))
            sim_break(
                s, INV_NO_LOSS, "%s is %s at the end, was %s%s (record: %s)", v->name,
                v->power == HV_POWER_OFF ? "off" : "on", v->power0 == HV_POWER_OFF ? "off" : "on",
                in_cycle(v) && cycle_unseen(s, v)
                    ? " (the cycle's process restarted; no process has seen the VM since)"
                : in_cycle(v) && !owner_alive(s, v) ? " (the cycle's process restarted)"
                : in_cycle(v) && !slots             ? " (no process holds a power-cycle slot)"
                : sim_record(v) && sim_record(v)->rollback ? " (a rollback that did not complete)"
                                                           : "",
                v->record);
        /* (a VM left paused: its operation continues when it runs; a live change that was
         * halfway, e.g. memory plugged and the vCPUs not yet, is not finished) */
        if (v->operator_config || v->power == HV_POWER_PAUSED)
            continue;
        /* the last answer done stays true: no operation of an older desired state (another
         * replica's, say) changes the VM after it, unless a fault or the operator did since
         * (or invariant 1 excused that done: the VM never showed it) */
        const struct hv_hw *dw = &c->op.want;
        if (c->done_last && !c->done_excused && v->touched_ms < c->done_ms &&
            v->host_fault_ms < c->done_ms &&
            ((dw->memory_mib >= 0 && v->config.memory_mib != dw->memory_mib) ||
             (dw->cpus >= 0 && v->config.cpus != dw->cpus)))
            sim_break(s, INV_NO_LOSS,
                      "%s has %lld MiB %d vCPUs at the end, but the last answer was done for "
                      "%lld MiB %d vCPUs (record: %.200s)",
                      v->name, (long long)v->config.memory_mib, v->config.cpus,
                      (long long)dw->memory_mib, dw->cpus, v->record);
        bool whole =
            v->config.memory_mib == v->config0.memory_mib && v->config.cpus == v->config0.cpus;
        for (int j = 0; j < c->n_wants; j++)
            whole |= v->config.memory_mib == c->wants[j].memory_mib &&
                     v->config.cpus == c->wants[j].cpus;
        /* A live change left halfway when CAPI stopped calling in the middle of it (the
         * Machine deleted, or a rollout changed to a state not covered: CAPI replaces the
         * Machine): memory plugged and the vCPUs not yet, say. The engine acts on a live
         * change only when called and cannot unplug what it plugged; each field is still
         * the old one or one asked for. (A cold change writes the whole configuration at
         * once: not excused once it may have, unless it stopped before: planned, waiting for
         * a slot, or on its way down, the mix left by an earlier live change is still there;
         * or none of its reconfigures got through since it began (each one failed: seed
         * 212216, a disk that cannot grow), its Failure starting the VM as it found it.) */
        const struct hv_oprecord *er = sim_record(v);
        bool rewritten = er && er->cold &&
                         (er->phase < HV_PH_PLANNED || er->phase > HV_PH_POWER_OFF) &&
                         v->reconf_ms && s->unix0 + v->reconf_ms / 1000 >= er->started_at;
        /* (A rollback's reconfigure puts back the configuration its operation found, which
         * may be such a mix left by a live change before it, whether CAPI went on calling or
         * not: judged as found, each field the old one or one asked for; held-out seed
         * 1652456, A -> B with B's memory plugged and its vCPUs not yet, then C, cold, rolled
         * back after three halts. "Found" is the world's fact, the VM's configuration when
         * the operation's first record was written, not the record's `previous`.) */
        bool put_back = er && er->rollback && er->started_at == v->found_op &&
                        v->config.memory_mib == v->found_config.memory_mib &&
                        v->config.cpus == v->found_config.cpus;
        /* (... or a live operation that ended in its sticky Failure halfway: no further step,
         * and no engine unplugs what it plugged; docs/how-it-works.md "Steps and failures";
         * held-out seed 1699253, whose caller gave up at the Failure) */
        bool failed_live = er && er->phase == HV_PH_FAILED && !er->cold;
        if (!whole &&
            ((c->stopped_mid && c->st == C_STOPPED && !rewritten) || put_back || failed_live)) {
            bool mem = v->config.memory_mib == v->config0.memory_mib,
                 cpus = v->config.cpus == v->config0.cpus;
            for (int j = 0; j < c->n_wants; j++) {
                mem |= v->config.memory_mib == c->wants[j].memory_mib;
                cpus |= v->config.cpus == c->wants[j].cpus;
            }
            whole = mem && cpus;
        }
        if (!whole)
            sim_break(s, INV_NO_LOSS,
                      "%s's configuration (%lld MiB, %d vCPUs) is neither the old one nor one "
                      "asked for",
                      v->name, (long long)v->config.memory_mib, v->config.cpus);
    }
    bool paused = false, halts = false;
    for (int k = 0; k < s->n_vms; k++) {
        paused |= s->vms[k].exists && s->vms[k].power == HV_POWER_PAUSED;
        halts |= s->vms[k].exists && s->vms[k].halts < 0;
    }
    for (int r = 0; r < s->n_reps; r++) {
        int64_t next = 0;
        hv_engine_run(s->reps[r].e, 100, &next);
        size_t n = hv_engine_entries(s->reps[r].e);
        int ops, pcs;
        hv_engine_gauges(s->reps[r].e, &ops, &pcs);
        s->r.checks++;
        /* An entry kept with no pass, timer or slot for a VM that is paused or suspended since
         * a shutdown or power-off a life of this replica sent, which the hypervisor took (its
         * cycle, no power-on of the engine since) or left unanswered (the VM not off since): that
         * step may land once the VM runs, and only the backend's report of the resume can tell the
         * engine so (workers.c HV_FOLLOW_RESUME). At most one per such VM. The world's own
         * log of its acts says so, never the record the engine wrote (what it keeps and why
         * is what this checks). */
        size_t kept = 0;
        int gen = s->reps[r].gen;
        for (int k = 0; k < s->n_vms; k++) {
            const struct sim_vm *w = &s->vms[k];
            if (!w->exists || w->power != HV_POWER_PAUSED)
                continue;
            /* (paused by the operator or a fault, or right after a power-on) */
            int64_t since = w->paused_ms > w->paused_on_ms ? w->paused_ms : w->paused_on_ms;
            /* (no power-on of the engine since: none at all, or the last one the operator's,
             * after the step landed before any look of the engine saw the VM off; held-out
             * seed 1061, no engine can tell that from a step not landed yet. Whatever became
             * of the record since: seed 12010, cleared by the operator. Ordered by the world's
             * events, not its milliseconds: held-out seed 3009423, another life's give-up
             * power-on and this replica's shutdown in one millisecond) */
            bool open = w->power_on_seq < w->cycle_seq || w->op_on_ms >= w->power_on_ms;
            /* (sent by this life, or by another process and carried by this replica since: the
             * last record write the world took, after the step, is one of its lives'; held-out
             * seeds 2975479, 2934946: r1's shutdown taken, r0 wrote the record over it for the
             * next state, the VM paused, r0's deadline Failure; 3321665: that Failure written
             * by r0's previous life, which the restarted scan took up and parked again) */
            bool carried = w->writer_rep == r && w->writer_ms >= w->cycle_ms;
            /* (or by a previous life of this replica: the restarted process's scan takes up
             * that life's Failure upon it and parks it for the resume, scan.c; held-out seed
             * 5378229, the VM still paused at the end) */
            bool took =
                open && since >= w->cycle_ms &&
                (w->cycle_owner == r || /* (any life of r: its gen is never past this one) */
                 /* (or sent again by any life of r: held-out seeds 5440422, 5459500, r1's life
                  * 2 resent r0's shutdown, its Failure upon it parked, r1 restarted) */
                 (w->resent_rep == r && since >= w->resent_ms) || carried);
            /* (... but not for a press the guest ignored, no shutdown pending, whose window was
             * over with the VM running all along since (press_spent's facts) before it paused,
             * when a pass of this life saw it running past that window and before the pause:
             * the step can land no more, and the engine saw so. Not when this life may have
             * forgotten that look (an entry idle for IDLE_MS goes) before a pass saw the pause,
             * nor when its scan listed the host between the press and the pause: the scan
             * takes up a previous life's Failure upon a running VM and times its step anew
             * from the first pass that sees it running, scan.c. Scenario
             * previous_lifes_spent_failure_seen_running_is_not_parked: r0's restarted scan could
             * not list host0, its passes for CAPI's calls saw vm0 running past the window, vm0
             * paused later, and the entry was parked for ever) */
            int64_t listed = s->reps[r].listed_ms[w->host];
            bool spent = w->acpi_missed && !w->off_at && w->press_ms &&
                         w->resumed_ms < w->press_ms && w->power_on_ms < w->press_ms &&
                         since > w->press_may_land_ms && w->look_on_ms[r] > w->press_may_land_ms &&
                         w->look_on_ms[r] > s->restart_ms[r] &&
                         w->look_ms[r] - w->look_on_ms[r] < IDLE_MS &&
                         (!listed || listed < w->press_ms || listed > since);
            took = took && !spent;
            /* (a try of this life's, or of a previous life of this replica, whose Failure the
             * restarted process's scan takes up and parks, scan.c; held-out seed 3234321) */
            bool unanswered = w->unans_ms && w->unans_rep == r && /* (any life of r) */
                              since >= w->unans_ms && w->went_off_ms < w->unans_ms;
            /* (or stored by a previous life of this replica, no power-on since and the VM
             * paused since: the new life cannot tell whether that life sent it and counts it
             * as sent, pass_paths.c paused_step_sent_at; held-out seed 5376039: the step's call
             * never reached the hypervisor, and that life restarted with the VM paused) */
            bool stored_before = w->step_rec_gen && w->step_rec_rep == r && w->step_rec_gen < gen &&
                                 since >= w->step_rec_ms && w->power_on_ms < w->step_rec_ms;
            /* (or, the cross-replica twin of stored_before, stored by another process with no
             * try recorded, which this life sent again and its call failed, no power-on since
             * that record and the VM paused since the try: the engine cannot tell whether that
             * process sent it and holds it as one that may land, pass_steps.c step_failed;
             * held-out seed 3803231: r0:1's shutdown never reached the hypervisor, r1 took its
             * record over for B with no try, r0's resend was refused busy, the host died and
             * the VM was suspended, r0's deadline Failure parked) */
            bool resent_others = w->rr_gen && w->rr_rep == r && w->rr_gen == gen &&
                                 since >= w->rr_ms && w->power_on_ms < w->rr_rec_ms &&
                                 sim_record_upon_step(w, w->rr_step_at);
            /* (or that other process's stored step, no try recorded, which this life took over
             * for an operation of its own that needs a cycle (how-it-works `takeover`: the
             * operation keeps that step's phase and time) and did not send again, the VM paused
             * since that takeover, not powered on since that record, and this life the last
             * writer of the VM's record since: it holds the step as one that may land and its
             * deadline Failure comes upon it, pass_paused.c; held-out seed 3936209: r0:1's
             * shutdown refused busy, its count's write lost, r1 took the record over for B
             * at 181.6 s, the VM paused at 183.1 s, r1's deadline Failure at 557.4 s parked) */
            bool took_others = w->to_gen && w->to_rep == r && w->to_gen == gen &&
                               since >= w->to_ms && w->power_on_ms < w->to_rec_ms &&
                               w->writer_rep == r && w->writer_gen == gen &&
                               w->writer_ms >= w->to_ms && sim_record_upon_step(w, w->to_step_at);
            kept += took || unanswered || stored_before || resent_others || took_others;
        }
        if (!ops && !pcs && !next && n <= kept)
            n = 0;
        if (n || ops || pcs || next)
            sim_break(s, INV_IDLE, "r%d not idle: %zu entries, %d operations, %d slots, timer %s%s",
                      r, n, ops, pcs, next ? "pending" : "none",
                      paused  ? " (a VM is paused)"
                      : halts ? " (a VM halts after every power-on)"
                              : "");
    }
}

/* ---- the run -----------------------------------------------------------------------------------
 */

static int64_t next_event(struct sim *s, bool calling)
{
    int64_t t = 0;
#define CAND(x)                                                                                    \
    do {                                                                                           \
        int64_t _x = (x);                                                                          \
        if (_x > s->now_ms && (!t || _x < t))                                                      \
            t = _x;                                                                                \
    } while (0)
    for (int k = 0; k < s->n_vms; k++) {
        struct sim_vm *v = &s->vms[k];
        CAND(v->off_at);
        CAND(v->halt_at);
        CAND(v->online_at);
        CAND(v->boot_at);
        if (calling && s->callers[k].st != C_STOPPED)
            CAND(s->callers[k].next_ms);
    }
    for (int r = 0; r < s->n_reps; r++) {
        int64_t n = 0;
        sim_note_due(s, r);
        hv_engine_run(s->reps[r].e, 0, &n);
        sim_note_queues(s, r); /* (before the clock jumps past what waits there) */
        /* a time already past is work due now (the first scan of a restarted process, due at
         * once, which workers run with its first passes): the clock moves on 1 ms, not to the
         * next event (held-out seeds 2651013, 2693509: that scan ran 60 s later, past the
         * window it had to act in). The timed passes that came due are in the queue now and
         * not in n: the clock may still jump past those (seeds 2204552, 2389010, open) */
        CAND(n && n <= s->now_ms ? s->now_ms + 1 : n);
    }
#undef CAND
    return t;
}

static void run_engines(struct sim *s, int max_each, int only)
{
    for (int r = 0; r < s->n_reps; r++) {
        if (only >= 0 && r != only)
            continue;
        s->in_pass = true;
        s->pass_rep = r;
        sim_note_due(s, r);
        int n = hv_engine_run(s->reps[r].e, max_each, &s->due_ms[r]);
        sim_note_queues(s, r);
        s->r.passes += n;
        s->reps[r].passes += n;
        s->in_pass = false;
    }
}

/* The run under way, for a message when the engine's own check aborts it (an illegal phase
 * move: hv_rec_move names from, to and the call site; this names the seed and the step). */
static volatile sig_atomic_t abort_seed_set;
static char abort_note[256];
static const struct sim *abort_sim;

static void on_abort(int sig)
{
    (void)sig;
    if (abort_seed_set && abort_sim) {
        char m[320];
        int n = snprintf(m, sizeof(m), "%s%d\n", abort_note, abort_sim->step);
        if (n > 0)
            (void)!write(2, m, (size_t)n < sizeof(m) ? (size_t)n : sizeof(m) - 1);
    }
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

/* ---- scripted scenarios (issue 26 item 4) ---------------------------------------------------
 * A regression test that pins its schedule (`sim_main --script FILE`), one line each:
 *   world [hosts=N] [replicas=N] [cap=N] [cap_host=N] [record_in_step=0|1]
 *   vm K [host=H] [power=on|off] [mem=MiB] [cpus=N] [maxmem=MiB] [maxcpus=N] [agent=0|1]
 *        [stats=0|1|2] [acpi=0|1] [button=0|1] [transient=0|1]
 *        [online_block=MiB online_pace_ms=MS]
 *        (acpi=0: the guest ignores the ACPI button; button=0: there is none, nothing can
 *        ask the guest to shut down)
 *        (online_block: the guest onlines hot-plugged memory one block of that size every
 *        online_pace_ms, not all at once)
 *   at SECONDS can K mem=MiB cpus=N [disk=MiB] settings=POWERCYCLE/POWEROFFMODE/
 *        GUESTVERIFICATION/LIVE/SHUTDOWN/DEADLINE [replica=R]
 *                                            (CanUpdateMachine; UpdateMachine calls follow;
 *                                             every VM's disk is 10240 MiB and grows live)
 *   at SECONDS update K [replica=R]          (one UpdateMachine call; none once K's
 *                                             operation is done or CAPI gave up on it;
 *                                             replica: to R from now on, as after can)
 *   at SECONDS run [replica=R]               (every replica runs its due passes; replica:
 *                                             R alone, the others' passes stay queued)
 *   at SECONDS events                        (the hypervisor's change events are delivered)
 *   at SECONDS fault K NAME                  (NAME: a fault of sim_world_fault_on, below)
 *   at SECONDS acts K LETTERS                (the outcomes of K's next acts, in order: f its
 *                                             call fails before it reaches the hypervisor
 *                                             (an outage, no try), r the hypervisor refuses
 *                                             it (an internal error, a try), l taken, its
 *                                             answer lost (a try), t its call times out
 *                                             and the hypervisor did not take it (no
 *                                             answer: a try that may land), o as the
 *                                             world has it)
 *   at SECONDS plans K N [after=M]           (K's next N plan calls fail before they reach
 *                                             the hypervisor: an outage, as a look's; after:
 *                                             once M more have gone through)
 *   at SECONDS writes K LETTERS              (the outcomes of K's next record writes, in
 *                                             order: f the call fails (an outage), l the
 *                                             record is written and the call times out (its
 *                                             answer lost), o as the world has it)
 *   at SECONDS restart R
 *   at SECONDS expect K done                 (CAPI has been answered done for K by now, or
 *                                             the run breaks 3-operations-end)
 * Times are the simulated clock, in order; the world ticks (guests boot, shut down, online
 * memory) as the clock moves to each. Nothing else happens: no seeded call, fault or pass.
 * After the table, the run ends as every run does (CAPI stops, faults heal, the engines go
 * idle) and the invariants are checked throughout. */
static const char *const fault_names[22] = {
    "host-dies",   "host-stalls",  "host-is-back", "pauses",        "suspended",  "resumed",
    "halts",       "pauses-after", "refuses",      "restore-fails", "no-online",  "reserves",
    "stats-stale", "stats-absent", "stats-fresh",  "acpi-toggle",   "disk-stuck", "op-config",
    "op-power",    "clear-record", "busy",         "call-failures"};

/* A script line's outcome letters ("at T acts K LETTERS"): each one of allowed, at most 15,
 * copied into out (a VM's queue of them, 16 bytes); -1 with a message otherwise. */
static int script_outcomes(const char *line, const char *allowed, const char *what, char out[16])
{
    char q[16] = "";
    sscanf(line, "at %*f %*s %*d %15s", q);
    if (!q[0] || strspn(q, allowed) != strlen(q)) {
        fprintf(stderr, "sim: bad %s outcomes in script line: %s", what, line);
        return -1;
    }
    memcpy(out, q, sizeof(q));
    return 0;
}

static const char *kv(const char *line, const char *key, char *out, size_t cap)
{
    char pat[40];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, " \t\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

static long kvl(const char *line, const char *key, long def)
{
    char b[64];
    return kv(line, key, b, sizeof(b)) ? strtol(b, NULL, 10) : def;
}

/* The world lines of the script, applied to the seeded world (which they replace). */
static int script_world(struct sim *s, FILE *f)
{
    char line[512];
    int vms = 0;
    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "world", 5)) {
            s->n_hosts = (int)kvl(line, "hosts", 1);
            s->n_reps = (int)kvl(line, "replicas", 1);
            s->ecfg.max_power_cycles = (int)kvl(line, "cap", 1);
            s->ecfg.max_power_cycles_per_host = (int)kvl(line, "cap_host", 1);
            s->record_in_step = kvl(line, "record_in_step", 0) != 0;
        } else if (!strncmp(line, "vm ", 3)) {
            int k = atoi(line + 3);
            if (k < 0 || k >= SIM_MAX_VMS)
                return -1;
            struct sim_vm *v = &s->vms[k];
            memset(v, 0, sizeof(*v));
            snprintf(v->name, sizeof(v->name), "vm%d", k);
            char b[16];
            v->host = (int)kvl(line, "host", 0);
            v->exists = true;
            v->power =
                kv(line, "power", b, sizeof(b)) && !strcmp(b, "off") ? HV_POWER_OFF : HV_POWER_ON;
            v->config.memory_mib = kvl(line, "mem", 2048);
            v->config.cpus = (int)kvl(line, "cpus", 2);
            v->config.cores_per_socket = 1;
            v->config.disk_mib = 10240;
            v->live = v->config;
            v->max_live_mem = kvl(line, "maxmem", v->config.memory_mib);
            v->max_live_cpus = (int)kvl(line, "maxcpus", v->config.cpus);
            v->disk_grows = true;
            v->agent = kvl(line, "agent", 1) != 0;
            v->stats = (int)kvl(line, "stats", 0);
            v->guest_mem = v->config.memory_mib;
            v->guest_cpus = v->config.cpus;
            v->reserve = v->reserve_own = 50;
            v->onlines = true;
            v->online_block = kvl(line, "online_block", 0);
            v->online_pace_ms = kvl(line, "online_pace_ms", 1000);
            v->ignores_acpi = kvl(line, "acpi", 1) == 0;
            /* (button=0: no ACPI button at all, nothing can ask the guest to shut down) */
            v->no_acpi = kvl(line, "button", 1) == 0;
            v->ignores_acpi = v->ignores_acpi || v->no_acpi;
            v->transient = kvl(line, "transient", 0) != 0;
            v->power0 = v->power;
            v->config0 = v->config;
            v->cycle_owner = -1;
            vms = k + 1 > vms ? k + 1 : vms;
        }
    }
    s->n_vms = vms;
    s->fail_permille = s->timeout_permille = 0;
    return vms > 0 && s->n_hosts > 0 && s->n_hosts <= SIM_MAX_HOSTS && s->n_reps > 0 &&
                   s->n_reps <= SIM_MAX_REPLICAS
               ? 0
               : -1;
}

static void start_op(struct sim *s, int m, struct hv_hw want, bool same_settings);
static void call_update(struct sim *s, int m);
static void check_step(struct sim *s, bool calling);
static void run_engines(struct sim *s, int max_each, int only);

/* The table of the script, in order. */
static int script_events(struct sim *s, FILE *f)
{
    char line[512];
    rewind(f);
    while (fgets(line, sizeof(line), f) && !s->r.broken) {
        double at;
        char what[32];
        int k = -1;
        if (sscanf(line, "at %lf %31s %d", &at, what, &k) < 2)
            continue;
        int64_t t = (int64_t)(at * 1000 + 0.5);
        if (t > s->now_ms)
            s->now_ms = t;
        sim_world_tick(s);
        bool vm_ok = k >= 0 && k < s->n_vms;
        if (!strcmp(what, "can") && vm_ok) {
            struct sim_caller *c = &s->callers[k];
            struct hv_hw want = c->spec;
            want.memory_mib = kvl(line, "mem", want.memory_mib);
            want.cpus = (int)kvl(line, "cpus", want.cpus);
            want.disk_mib = kvl(line, "disk", want.disk_mib);
            char st[128], pc[16], pom[16], gc[16];
            int live = 60, shut = 60, dl = 600;
            if (!kv(line, "settings", st, sizeof(st)) ||
                sscanf(st, "%15[^/]/%15[^/]/%15[^/]/%d/%d/%d", pc, pom, gc, &live, &shut, &dl) !=
                    6) {
                fprintf(stderr, "sim: bad settings in script line: %s", line);
                return -1;
            }
            c->replica = (int)kvl(line, "replica", -1);
            snprintf(c->op.settings_json, sizeof(c->op.settings_json),
                     "{\"powerCycle\":\"%s\",\"powerOffMode\":\"%s\",\"guestVerification\":"
                     "\"%s\",\"liveTimeoutSeconds\":\"%d\",\"shutdownTimeoutSeconds\":\"%d\","
                     "\"deadlineSeconds\":\"%d\"}",
                     pc, pom, gc, live, shut, dl);
            start_op(s, k, want, true);
            c->next_ms = INT64_MAX / 2; /* (the script makes the calls) */
        } else if (!strcmp(what, "update") && vm_ok) {
            s->callers[k].replica = (int)kvl(line, "replica", s->callers[k].replica);
            if (s->callers[k].st == C_UPDATING) /* (after done CAPI has nothing to call for) */
                call_update(s, k);
            s->callers[k].next_ms = INT64_MAX / 2;
            if (s->callers[k].st != C_UPDATING)
                s->callers[k].st = C_IDLE;
        } else if (!strcmp(what, "expect") && vm_ok) {
            /* script only: CAPI has been answered done for K's operation by now */
            char want[16] = "";
            sscanf(line, "at %*f %*s %*d %15s", want);
            if (strcmp(want, "done") != 0) {
                fprintf(stderr, "sim: bad expectation in script line: %s", line);
                return -1;
            }
            if (s->callers[k].st == C_UPDATING)
                sim_break(s, INV_ENDS, "%s: CAPI still waits for its done at %.1f s (script)",
                          s->vms[k].name, at);
        } else if (!strcmp(what, "run")) {
            run_engines(s, 50, (int)kvl(line, "replica", -1));
        } else if (!strcmp(what, "events")) {
            sim_deliver_events(s);
        } else if (!strcmp(what, "restart") && k >= 0 && k < s->n_reps) {
            rep_restart(s, k);
        } else if (!strcmp(what, "acts") && vm_ok) {
            /* script only: the world never draws these */
            if (script_outcomes(line, "frlot", "act", s->vms[k].acts_next) < 0)
                return -1;
            sim_note(s, "script: the next acts on %s: %s", s->vms[k].name, s->vms[k].acts_next);
        } else if (!strcmp(what, "writes") && vm_ok) {
            /* script only: the outcomes of K's next record writes (f fails, l lands with its
             * answer lost, o as drawn) */
            if (script_outcomes(line, "flo", "write", s->vms[k].writes_next) < 0)
                return -1;
            sim_note(s, "script: the next record writes on %s: %s", s->vms[k].name,
                     s->vms[k].writes_next);
        } else if (!strcmp(what, "plans") && vm_ok) {
            /* script only: K's next N plan calls fail before they reach the host */
            int n = 0;
            if (sscanf(line, "at %*f %*s %*d %d", &n) != 1 || n < 1) {
                fprintf(stderr, "sim: bad plan failures in script line: %s", line);
                return -1;
            }
            s->vms[k].plans_fail = n;
            s->vms[k].plans_pass = (int)kvl(line, "after", 0);
            if (s->vms[k].plans_pass)
                sim_note(s, "script: %d plan calls on %s fail after the next %d", n, s->vms[k].name,
                         s->vms[k].plans_pass);
            else
                sim_note(s, "script: the next %d plan calls on %s fail", n, s->vms[k].name);
        } else if (!strcmp(what, "fault") && vm_ok) {
            char name[32] = "";
            sscanf(line, "at %*f %*s %*d %31s", name);
            int kind = -1;
            for (int j = 0; j < 22; j++)
                if (!strcmp(name, fault_names[j]))
                    kind = j;
            if (kind < 0) {
                fprintf(stderr, "sim: unknown fault in script line: %s", line);
                return -1;
            }
            sim_world_fault_on(s, k, kind);
        } else {
            fprintf(stderr, "sim: cannot run script line: %s", line);
            return -1;
        }
        check_step(s, true);
        s->step++;
    }
    return 0;
}

bool sim_run(const struct sim_opts *o, struct sim_result *out)
{
    struct sim *s = calloc(1, sizeof(*s));
    if (!s)
        abort();
    s->o = *o;
    hv_phase_set_strict(true); /* an illegal phase move aborts, whatever the build type */
    snprintf(abort_note, sizeof(abort_note),
             "sim: the engine aborted seed %llu (replay: sim_main "
             "--seed %llu --steps %d --trace) at step ",
             (unsigned long long)o->seed, (unsigned long long)o->seed, o->steps);
    abort_sim = s;
    abort_seed_set = 1;
    signal(SIGABRT, on_abort);
    s->rng = o->seed * 0x2545F4914F6CDD1DULL + 7;
    s->unix0 = 1800000000;
    hv_log_set_level(o->trace && getenv("HV_SIM_LOG") ? HV_LOG_INFO
                                                      : (enum hv_log_level)(HV_LOG_ERROR + 1));
    memset(stuck_since, 0, sizeof(stuck_since));
    sim_world_init(s);
    hv_profiles_builtin(&s->profiles);
    hv_engine_cfg_default(&s->ecfg);
    s->ecfg.max_power_cycles = sim_range(s, 1, 3);
    s->ecfg.max_power_cycles_per_host = 1;
    s->ecfg.step_timeout_s = 30;
    s->ecfg.entry_idle_ms = IDLE_MS;
    s->ecfg.scan_interval_s = 0; /* the scan at start only: an idle engine has no timer */
    s->n_reps = sim_chance(s, 300) ? 2 : 1;
    FILE *script = NULL;
    if (o->script && (!(script = fopen(o->script, "r")) || script_world(s, script) < 0)) {
        fprintf(stderr, "sim: cannot read the scenario %s\n", o->script);
        exit(2);
    }
    for (int r = 0; r < s->n_reps; r++)
        rep_start(s, r);
    int fault_permille = sim_range(s, 0, 60);
    for (int m = 0; m < s->n_vms; m++) {
        struct sim_caller *c = &s->callers[m];
        c->spec = s->vms[m].config;
        c->spec.cores_per_socket = -1;
        c->replica = s->n_reps > 1 && sim_chance(s, 300) ? sim_range(s, 0, s->n_reps - 1) : -1;
        c->next_ms = 1000 * sim_range(s, 0, 30);
    }
    sim_note(s,
             "seed %llu: %d hosts, %d VMs, %d replicas, cap %d/%d, fail %d, lost answers %d, "
             "record in step %d, faults %d permille",
             (unsigned long long)o->seed, s->n_hosts, s->n_vms, s->n_reps, s->ecfg.max_power_cycles,
             s->ecfg.max_power_cycles_per_host, s->fail_permille, s->timeout_permille,
             s->record_in_step, fault_permille);

    if (script) {
        for (int m = 0; m < s->n_vms; m++) {
            s->callers[m].replica = -1;
            s->callers[m].next_ms = INT64_MAX / 2;
        }
        s->step = 0;
        if (script_events(s, script) < 0)
            exit(2);
        fclose(script);
    }
    for (s->step = script ? s->step : 0; !script && s->step < o->steps && !s->r.broken; s->step++) {
        bool due = false;
        for (int m = 0; m < s->n_vms; m++)
            due |= s->callers[m].st != C_STOPPED && s->callers[m].next_ms <= s->now_ms;
        if (due || sim_chance(s, 600)) {
            s->now_ms += sim_range(s, 0, due ? 200 : 500);
        } else {
            int64_t t = next_event(s, true);
            if (t > s->now_ms + 30000)
                t = s->now_ms + 30000;
            s->now_ms = t > s->now_ms ? t : s->now_ms + 1000;
        }
        sim_world_tick(s);
        int a = sim_range(s, 0, 99);
        if (a < 10) {
            sim_deliver_events(s);
        } else if (a < 50) {
            run_engines(s, sim_range(s, 1, 4), -1); /* as the engine's workers would */
        } else if (a < 90) {
            caller_step(s);
        } else if (sim_chance(s, fault_permille * 10)) {
            sim_world_fault(s);
        } else if (a < 96) {
            caller_whim(s);
        } else if (a == 96 && sim_chance(s, 200)) {
            rep_restart(s, sim_range(s, 0, s->n_reps - 1));
        }
        check_step(s, true);
    }
    int run_steps = s->step;
    /* The end: CAPI stops calling, the faults heal (hosts back, calls answer); the engines
     * carry on by themselves until nothing is left to do, then sit idle. */
    if (!s->r.broken) {
        for (int m = 0; m < s->n_vms; m++) {
            /* one still updating stops in the middle of its operation, as for a Machine
             * deleted (real CAPI would call on): a live change its last pass left halfway (a
             * step that failed, retried on the next call) stays so (check_end) */
            if (s->callers[m].st == C_UPDATING) {
                s->callers[m].stopped_mid = true;
                s->callers[m].stopped_ms = s->now_ms;
            }
            s->callers[m].st = C_STOPPED;
        }
        for (int h = 0; h < s->n_hosts; h++)
            s->hosts[h].down = s->hosts[h].stalled = false;
        for (int k = 0; k < s->n_vms; k++)
            s->vms[k].cleared_out_cycle = false; /* (every host answers again) */
        s->fail_permille = s->timeout_permille = 0;
        int64_t end = s->now_ms + QUIESCE_MS;
        for (int n = 0; n < 2000 && !s->r.broken; n++) {
            sim_deliver_events(s);
            run_engines(s, 50, -1);
            check_step(s, false);
            int64_t t = next_event(s, false);
            if (!t || t > end)
                break;
            s->now_ms = t;
            s->step++;
            sim_world_tick(s);
        }
    }
    if (!s->r.broken) {
        s->now_ms += IDLE_MS + 1000;
        sim_world_tick(s);
        check_end(s);
    }
    s->r.steps = run_steps;
    for (int r = 0; r < s->n_reps; r++)
        hv_engine_free(s->reps[r].e);
    hv_profiles_free(&s->profiles);
    for (int k = 0; k < s->n_vms; k++)
        free(s->vms[k].rec);
    bool ok = !s->r.broken;
    if (out)
        *out = s->r;
    abort_seed_set = 0;
    abort_sim = NULL;
    free(s);
    return ok;
}
