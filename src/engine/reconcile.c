/* reconcile.c: one level-triggered pass of the UpdateMachine engine for one VM.
 * Observe; read the operation record on the VM; decide the next step from what is seen plus
 * the record; write the record (intent) before acting; act once; answer. Nothing here
 * remembers anything between passes except through the record and the slot table. */
#include "reconcile.h"
#include "judge.h"
#include "phase.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "oprecord.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RETRY_LIVE          2
#define RETRY_LIVE_SOON     1  /* within LIVE_SOON_S of a live step: the change shows soon */
#define LIVE_SOON_S         30 /* a DIMM or a vCPU shows at once, a guest's view in seconds */
#define RETRY_COLD          5
#define RETRY_SLOT          10
#define RETRY_UNREACHABLE   3 /* a restarting daemon or vCenter is back in seconds */
#define MAX_RECYCLES        3
#define GUEST_MEM_SLACK_MIB 128
/* Starts with the new configuration after which a VM that went off again each time (a guest
 * that panics at boot, with on_crash=destroy) is given up on; a cycle needs one, plus one per
 * time the VM was started by someone else before it was reconfigured (recycles). */
#define MAX_STARTS 3

const char *hv_errcode_message(enum hv_errcode c)
{
    switch (c) {
    case HV_OK:
        return HV_MSG("no error");
    case HV_E_NOT_FOUND:
        return HV_MSG("the VM was not found");
    case HV_E_UNREACHABLE:
        return HV_MSG("the hypervisor cannot be reached");
    case HV_E_AUTH:
        return HV_MSG("the hypervisor refused hvupdater's credentials");
    case HV_E_INVALID_STATE:
        return HV_MSG("the VM's power state does not allow this step");
    case HV_E_BUSY:
        return HV_MSG("another task is changing the VM");
    case HV_E_UNSUPPORTED:
        return HV_MSG("the hypervisor does not support this change");
    case HV_E_RESOURCES:
        return HV_MSG("the host lacks the resources");
    case HV_E_TIMEOUT:
        return HV_MSG("the hypervisor did not answer in time");
    case HV_E_TLS:
        return HV_MSG("the hypervisor's certificate does not match the configured thumbprint or "
                      "CA");
    case HV_E_AMBIGUOUS:
        return HV_MSG("its name is on several configured hosts");
    case HV_E_CREDENTIALS:
        return HV_MSG("hvupdater cannot read the vCenter credentials of the machine's cluster");
    case HV_E_INTERNAL:
        break;
    }
    return HV_MSG("the hypervisor reported an error");
}

static const char *step_name(enum hv_step_kind k)
{
    switch (k) {
    case HV_STEP_LIVE_MEMORY:
        return "live-memory";
    case HV_STEP_LIVE_CPUS:
        return "live-cpus";
    case HV_STEP_SHUTDOWN:
        return "shutdown";
    case HV_STEP_POWER_OFF:
        return "power-off";
    case HV_STEP_RECONFIGURE:
        return "reconfigure";
    case HV_STEP_POWER_ON:
        return "power-on";
    case HV_STEP_LIVE_DISK:
        return "live-disk";
    }
    return "step";
}

/* "memory 2048 MiB, 3 vCPUs, 2 cores per socket" for the fields that are set. */
static void describe(char *out, size_t cap, const struct hv_hw *h)
{
    char part[64];
    out[0] = '\0';
    if (h->memory_mib >= 0) {
        snprintf(part, sizeof(part), HV_MSG("memory %lld MiB"), (long long)h->memory_mib);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (h->cpus >= 0) {
        snprintf(part, sizeof(part), h->cpus == 1 ? HV_MSG("%s%d vCPU") : HV_MSG("%s%d vCPUs"),
                 out[0] ? ", " : "", h->cpus);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (h->cores_per_socket >= 0) {
        snprintf(part, sizeof(part), HV_MSG("%s%d cores per socket"), out[0] ? ", " : "",
                 h->cores_per_socket);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (hv_disk_set(h->disk_mib)) {
        if (h->disk_mib % 1024 == 0)
            snprintf(part, sizeof(part), HV_MSG("%sdisk %lld GiB"), out[0] ? ", " : "",
                     (long long)(h->disk_mib / 1024));
        else
            snprintf(part, sizeof(part), HV_MSG("%sdisk %lld MiB"), out[0] ? ", " : "",
                     (long long)h->disk_mib);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (!out[0])
        snprintf(out, cap, HV_MSG("no hardware fields"));
}

/* Every desired field (>= 0) equals what the VM shows. */
static bool matches(const struct hv_hw *have, const struct hv_hw *want)
{
    return (want->memory_mib < 0 || have->memory_mib == want->memory_mib) &&
           (want->cpus < 0 || have->cpus == want->cpus) &&
           (want->cores_per_socket < 0 || have->cores_per_socket == want->cores_per_socket) &&
           (!hv_disk_set(want->disk_mib) || have->disk_mib >= want->disk_mib); /* disks only grow */
}

/* Guest verification compares the guest with itself: its own view before the first step
 * (the record's base) and after. What its kernel keeps for itself (its image, page tables,
 * a kdump crashkernel= reservation of 192 MiB or more) is in both, so only the change counts.
 * A guest shows a memory change when its total moved by it, less what one memory block can
 * hide (a block left offline: 128 MiB on x86-64) and the page structures of the memory added
 * (1/64 of it; 1/32 allowed). */
#define GUEST_MEM_BLOCK_MIB 128

/* What the guest's own view says of the desired memory and vCPUs (cores per socket and disks:
 * the guest cannot tell). Worst first: NOT_YET, PENDING, UNKNOWN, SHOWS. */
enum gverdict { GV_SHOWS = 0, GV_UNKNOWN, GV_PENDING, GV_NOT_YET };

static void answer(struct hv_update_result *out, bool failure, int retry, const char *msg)
{
    out->failure = failure;
    out->retry_after_s = failure ? 0 : retry;
    out->settling = false;
    out->once = failure; /* the sticky ones say otherwise (sticky) */
    snprintf(out->message, sizeof(out->message), "%s", msg);
}

/* The Failure recorded on the VM, answered on every call for its desired hardware. */
static void answer_sticky(struct hv_update_result *out, const char *msg)
{
    answer(out, true, 0, msg);
    out->once = false;
}

struct pass {
    const struct hv_books *b;
    struct hv_backend *be;
    const struct hv_vm_ref *ref;
    const struct hv_hw *desired;
    const struct hv_settings *s;
    struct hv_vm_obs obs;
    struct hv_oprecord rec;
    char key[HV_KEY_MAX];
    char what[160]; /* describe(desired) */
    int64_t now;
    struct hv_update_result *out;
    bool called; /* a hook call asked for this pass (else: the engine's own carry-on) */
    bool chain;  /* the step just taken can be followed at once */
    bool seen;   /* the last round read the VM's record */
    /* the VM's record, as read or last stored, shows a power cycle of this process in flight
     * (for any hardware): its slot stays, whatever else failed in this pass */
    bool vm_cycle;
    bool ours; /* p->rec is this operation's record (for these desired hardware) */
    /* a failed operation's start of the VM (as it is, or rolled back) failed: it is off */
    bool left_off;
    /* the VM's record is another hardware's sticky Failure */
    bool other_failed;
    /* the VM was seen paused or suspended in the middle of this operation's cycle: the cycle
     * cannot progress, its slot goes back */
    bool stalled;
    /* while begin() runs: when the shutdown or power-off of a cycle of an older operation,
     * which this one takes over, was sent (0: none); a Failure of begin() records it */
    int64_t down_at;
    /* a failed operation's VM may still go down from a cycle's shutdown or power-off: it
     * keeps a slot (see hv_reconcile_key) */
    bool going_down;
    /* the VM runs and its record, as read, shows a shutdown or power-off of this process's
     * previous life (for any hardware) sent recently enough to take it down yet: a slot held
     * for it stays (no live process holds one for it) */
    bool record_down;
    /* The live step about to be taken is the last one: with ops->record_in_step it carries
     * the waiting record (carried: it did, so no separate write follows). */
    bool carry, carried;
    /* The VM as the backend read it when the last step finished (after.found): the next
     * round's observation, a look taken after that step. */
    struct hv_vm_obs after;
};

static enum gverdict guest_mem(const struct pass *p, bool booting)
{
    const struct hv_guest_obs *g = &p->obs.guest;
    if (g->mem_view == HV_GV_PENDING) /* it has not reported since it started */
        return booting ? GV_PENDING : GV_UNKNOWN;
    if (g->mem_view != HV_GV_SEEN)
        return GV_UNKNOWN;
    if (g->mem_at > 0 && g->mem_at <= p->rec.step_at) {
        /* a report from before the step says nothing of it: wait for the next one while the
         * guest reports */
        int64_t since = g->mem_at > p->rec.started_at ? g->mem_at : p->rec.started_at;
        return p->now - since <= GUEST_REPORT_S ? GV_PENDING : GV_UNKNOWN;
    }
    const struct hv_guest_base *b = &p->rec.base;
    if (!p->rec.has_base || b->guest_memory_mib < 0 || b->hv_memory_mib < 0) {
        /* its view before the change is not known. After the power cycle all its memory is
         * boot memory, which a guest that reports (newer than the power-on: stamped after
         * it, see above, or read from the guest just now, mem_at 0) has online. */
        bool cycled = p->rec.cold && p->rec.phase == HV_PH_POWER_ON;
        return cycled ? GV_SHOWS : GV_UNKNOWN;
    }
    int64_t delta = p->desired->memory_mib - b->hv_memory_mib;
    int64_t grown = g->memory_mib - b->guest_memory_mib;
    int64_t slack = GUEST_MEM_BLOCK_MIB + (delta < 0 ? -delta : delta) / 32;
    bool shows = delta > 0   ? grown > 0 && grown >= delta - slack
                 : delta < 0 ? grown < 0 && grown <= delta + slack
                             : grown <= slack && grown >= -slack;
    return shows ? GV_SHOWS : GV_NOT_YET;
}

static enum gverdict guest_cpus(const struct pass *p, bool booting)
{
    const struct hv_guest_obs *g = &p->obs.guest;
    if (g->cpu_view == HV_GV_PENDING) /* an agent channel, no agent connected */
        return booting ? GV_PENDING : GV_UNKNOWN;
    if (g->cpu_view != HV_GV_SEEN)
        return GV_UNKNOWN;
    const struct hv_guest_base *b = &p->rec.base;
    bool shows = p->rec.has_base && b->guest_cpus >= 0 && b->hv_cpus >= 0
                     ? g->cpus - b->guest_cpus == p->desired->cpus - b->hv_cpus
                     : g->cpus == p->desired->cpus; /* online vCPUs are an exact count */
    return shows ? GV_SHOWS : GV_NOT_YET;
}

/* Also fills unverified (the checked fields the guest cannot tell, " and "-joined), "" when
 * none, and *checked (how many fields were checked). booting: right after a power cycle, when
 * a guest that has not reported since it started may still (at other times it stays silent). */
static enum gverdict guest_verdict(const struct pass *p, bool booting, char *unverified, size_t cap,
                                   int *checked)
{
    enum gverdict worst = GV_SHOWS, v;
    bool mem, cpus;
    hv_guest_fields(&p->rec, p->desired, &mem, &cpus);
    unverified[0] = '\0';
    *checked = mem + cpus;
    if (mem) {
        v = guest_mem(p, booting);
        if (v == GV_UNKNOWN || v == GV_PENDING)
            snprintf(unverified, cap, "memory");
        worst = v > worst ? v : worst;
    }
    if (cpus) {
        v = guest_cpus(p, booting);
        if (v == GV_UNKNOWN || v == GV_PENDING)
            snprintf(unverified + strlen(unverified), cap - strlen(unverified), "%svCPUs",
                     unverified[0] ? " and " : "");
        worst = v > worst ? v : worst;
    }
    return worst;
}

static void log_err(const struct pass *p, const char *what, const struct hv_err *err)
{
    char code[8];
    snprintf(code, sizeof(code), "%d", (int)err->code);
    hv_log(HV_LOG_WARN, "backend-error", "backend", p->be->ops->name, "vm", p->key, "during", what,
           "#code", code, "detail", err->detail, (char *)NULL);
    hv_metrics_backend_error(p->be->ops->name, p->obs.host[0] ? p->obs.host : p->ref->server);
}

/* The settings an operation's outcome depends on, as recorded with it. */
static void policy_of(const struct hv_settings *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/%d/%d/%d/%s", hv_power_cycle_name(s->power_cycle),
             hv_power_off_mode_name(s->power_off_mode), s->live_timeout_s, s->shutdown_timeout_s,
             s->deadline_s, hv_guest_check_name(s->guest_check));
}

static bool wait_for_hypervisor(struct pass *p, const struct hv_err *err);

static bool store(struct pass *p)
{
    char buf[HV_RECORD_MAX];
    struct hv_err err = {0};
    p->after.found = false; /* a read from before this write no longer shows the VM */
    snprintf(p->rec.owner, sizeof(p->rec.owner), "%s", p->b->owner);
    policy_of(p->s, p->rec.policy, sizeof(p->rec.policy));
    p->rec.ref = *p->ref; /* a restarted process finds it by this name (scan.c) */
    if (!hv_oprecord_write(&p->rec, buf, sizeof(buf)) ||
        p->be->ops->write_record(p->be, p->ref, buf, &err) != HV_OK) {
        log_err(p, "write-record", &err);
        if (wait_for_hypervisor(p, &err)) /* an outage (item 10): in progress, not a Failure */
            return false;
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("cannot store the operation record on the VM: %s"),
                 hv_errcode_message(err.code));
        answer(p->out, true, 0, m);
        return false;
    }
    hv_metrics_record_write();
    p->vm_cycle = p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN && p->rec.phase <= HV_PH_POWER_ON;
    return true;
}

/* Sticky failure: recorded on the VM so every later call for this desired spec answers the
 * same message and takes no step. why is its reason code (what metrics count; the message is
 * for people and never parsed). */
static void fail_sticky(struct pass *p, enum hv_failure_reason why, const char *msg)
{
    p->rec.step_at = p->now;
    if (p->down_at) { /* the VM is still going down: started again once it is off */
        hv_rec_move(&p->rec, HV_PH_FAILED, true, p->down_at, "sticky failure, VM going down");
        p->going_down = true;
    } else {
        hv_rec_set_phase(&p->rec, HV_PH_FAILED, "sticky failure");
    }
    snprintf(p->rec.message, sizeof(p->rec.message), "%s", msg);
    /* The slot goes back at the end of the pass (hv_reconcile_key) once the stored Failure
     * shows no cycle: while a write that failed leaves the VM's record showing this process's
     * cycle in flight (a shutdown sent that may still land), it stays, as after any other
     * failed write (vm_cycle), until a later pass stores the Failure. */
    hv_metrics_operation("failed", "failure");
    hv_metrics_failure(why);
    if (store(p))
        answer_sticky(p->out, msg);
    hv_log(HV_LOG_WARN, "operation-failed", "vm", p->key, "message", msg, (char *)NULL);
}

/* Best-effort start of a VM an operation is giving up on (failed steps, failure after a
 * late shutdown): no retry count; the error only goes to the log. An accepted start counts in
 * the record's starts (stored by the caller). */
static bool power_on_anyway(struct pass *p)
{
    struct hv_step on = {.kind = HV_STEP_POWER_ON,
                         .desired = *p->desired,
                         .timeout_ms = p->b->cfg->step_timeout_s * 1000};
    struct hv_err err = {0};
    if (p->be->ops->act(p->be, p->ref, &on, &err) != HV_OK) {
        log_err(p, "power-on while giving up", &err);
        p->left_off = true;
        return false;
    }
    p->rec.starts++;
    return true;
}

/* The configuration from before the operation, for the fields it changes; false when the
 * record does not hold one (a record from an older version). */
static bool previous_config(const struct hv_oprecord *r, struct hv_hw *out)
{
    out->memory_mib = r->desired.memory_mib >= 0 ? r->prev.memory_mib : -1;
    out->cpus = r->desired.cpus >= 0 ? r->prev.cpus : -1;
    out->cores_per_socket = r->desired.cores_per_socket >= 0 ? r->prev.cores_per_socket : -1;
    out->disk_mib = -1; /* disks only grow: a rollback leaves them as they are */
    return (out->memory_mib > 0 || out->cpus > 0 || out->cores_per_socket > 0) &&
           out->memory_mib != 0 && out->cpus != 0 && out->cores_per_socket != 0;
}

/* How far a rollback got. */
enum rb_outcome { RB_STARTED = 0, RB_RESTORE_FAILED, RB_START_FAILED, RB_STARTED_AS_IS, RB_COUNT };

/* The VM did not start with the new configuration: put the previous one back and start it
 * as it was. Errors go to the log; the outcome goes into the sticky message (see
 * rollback_note), and a later pass that finds the VM still off tries again. */
static enum rb_outcome roll_back(struct pass *p)
{
    struct hv_hw prev;
    if (!previous_config(&p->rec, &prev))
        return RB_RESTORE_FAILED;
    struct hv_err err = {0};
    int64_t tmo = p->b->cfg->step_timeout_s * 1000;
    if (!matches(&p->obs.config, &prev)) {
        struct hv_step rc = {.kind = HV_STEP_RECONFIGURE, .desired = prev, .timeout_ms = tmo};
        if (p->be->ops->act(p->be, p->ref, &rc, &err) != HV_OK) {
            log_err(p, "reconfigure while rolling back", &err);
            /* never leave a VM off that can run: start it as it is (what kept the new
             * configuration from starting may have passed, e.g. the host's free memory) */
            struct hv_step as_is = {
                .kind = HV_STEP_POWER_ON, .desired = *p->desired, .timeout_ms = tmo};
            if (p->be->ops->act(p->be, p->ref, &as_is, &err) == HV_OK) {
                p->rec.starts++;
                return RB_STARTED_AS_IS;
            }
            log_err(p, "power-on as it is while rolling back", &err);
            p->left_off = true;
            return RB_RESTORE_FAILED;
        }
    }
    struct hv_step on = {.kind = HV_STEP_POWER_ON, .desired = prev, .timeout_ms = tmo};
    if (p->be->ops->act(p->be, p->ref, &on, &err) != HV_OK) {
        log_err(p, "power-on while rolling back", &err);
        p->left_off = true;
        return RB_START_FAILED;
    }
    p->rec.starts++;
    hv_log(HV_LOG_INFO, "rolled-back", "vm", p->key, (char *)NULL);
    return RB_STARTED;
}

/* What a rollback did, for the sticky message ("<why it failed>; <this>"). */
static void rollback_note(char *out, size_t cap, const struct hv_oprecord *r, enum rb_outcome o)
{
    struct hv_hw prev;
    char was[160];
    if (!previous_config(r, &prev))
        memset(&prev, 0xff, sizeof(prev)); /* not kept: "no hardware fields" */
    describe(was, sizeof(was), &prev);
    switch (o) {
    case RB_STARTED:
        snprintf(out, cap,
                 HV_MSG("its previous configuration (%s) was restored and it was started"), was);
        return;
    case RB_RESTORE_FAILED:
        snprintf(out, cap,
                 HV_MSG("restoring its previous configuration (%s) failed too, so the VM is off "
                        "with the new configuration"),
                 was);
        return;
    case RB_STARTED_AS_IS:
        snprintf(out, cap,
                 HV_MSG("restoring its previous configuration (%s) failed too, so it was started "
                        "with the new configuration"),
                 was);
        return;
    case RB_START_FAILED:
    case RB_COUNT:
        break;
    }
    snprintf(out, cap,
             HV_MSG("its previous configuration (%s) was restored, but starting it failed too, "
                    "so the VM is off"),
             was);
}

/* Fail for good because the VM does not run with the new configuration (cause says why):
 * roll back first, then record the Failure saying what the rollback did. */
static void fail_rolled_back(struct pass *p, enum hv_failure_reason why, const char *cause)
{
    char m[sizeof(p->rec.message)], note[400];
    p->rec.rollback = true;
    rollback_note(note, sizeof(note), &p->rec, roll_back(p));
    snprintf(m, sizeof(m), "%s; %s", cause, note);
    fail_sticky(p, why, m);
}

/* A later pass found the rolled-back VM off and rolled back again: when that got further or
 * less far than the stored message says, the message follows what was done. */
static void roll_back_again(struct pass *p)
{
    enum rb_outcome now = roll_back(p);
    char note[400];
    size_t len = strlen(p->rec.message);
    bool changed = false;
    for (int o = 0; o < RB_COUNT && !changed; o++) {
        rollback_note(note, sizeof(note), &p->rec, (enum rb_outcome)o);
        size_t n = strlen(note);
        if ((enum rb_outcome)o == now || n > len || strcmp(p->rec.message + len - n, note))
            continue;
        rollback_note(note, sizeof(note), &p->rec, now);
        p->rec.message[len - n] = '\0';
        char m[sizeof(p->rec.message)];
        snprintf(m, sizeof(m), "%s%s", p->rec.message, note);
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        changed = true;
    }
    if (changed || now == RB_STARTED)
        store(p); /* the message and the count of starts; best effort */
}

/* Record the phase, then act. Returns true when the step was accepted. */
static bool step(struct pass *p, enum hv_phase phase, enum hv_step_kind kind, const char *method)
{
    if (p->rec.phase != phase)
        p->rec.attempts = 0;
    /* (a step taken over, if any, is past: this one is the operation's) */
    hv_rec_move(&p->rec, phase, p->rec.cold, 0, "step");
    p->rec.step_at = p->now;
    if (kind == HV_STEP_POWER_ON)
        p->rec.starts++; /* recorded with the step; taken back below if it is refused */
    /* Live steps are idempotent against what the VM shows (absolute vCPU counts, DIMMs and
     * virtio-mem sized from the observed memory), so a crash after one needs no record of it:
     * the next pass sees the change. Power and configuration steps are recorded first. */
    bool live =
        kind == HV_STEP_LIVE_MEMORY || kind == HV_STEP_LIVE_CPUS || kind == HV_STEP_LIVE_DISK;
    if (!live && !store(p))
        return false;
    struct hv_step st = {
        .kind = kind, .desired = *p->desired, .timeout_ms = p->b->cfg->step_timeout_s * 1000};
    snprintf(st.method, sizeof(st.method), "%s", method ? method : "");
    /* The last live step stores the waiting record in the same change (one hypervisor
     * call instead of two): the record then says "waiting" exactly when the step was made. */
    struct hv_oprecord waiting = p->rec;
    char carried[HV_RECORD_MAX];
    p->carried = false;
    if (live && p->carry && p->be->ops->record_in_step) {
        hv_rec_set_phase(&waiting, HV_PH_WAIT_LIVE, "last live step carries the record");
        snprintf(waiting.owner, sizeof(waiting.owner), "%s", p->b->owner);
        policy_of(p->s, waiting.policy, sizeof(waiting.policy));
        waiting.ref = *p->ref;
        if (hv_oprecord_write(&waiting, carried, sizeof(carried)))
            st.record = carried;
    }
    bool stored = false;
    st.record_stored = &stored;
    memset(&p->after, 0, sizeof(p->after));
    st.seen_after = &p->after;
    struct hv_err err = {0};
    struct timespec t0, t1;
    char fp[64];
    snprintf(fp, sizeof(fp), "before:%s", step_name(kind));
    hv_failpoint(fp);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = p->be->ops->act(p->be, p->ref, &st, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    snprintf(fp, sizeof(fp), "after:%s", step_name(kind));
    hv_failpoint(fp);
    hv_metrics_step(step_name(kind),
                    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    hv_log(HV_LOG_INFO, "step", "vm", p->key, "step", step_name(kind), "result",
           rc == HV_OK ? "accepted" : "error", (char *)NULL);
    if (rc == HV_OK) {
        if (!live && p->rec.attempts) { /* a retry got through: the record says it was sent */
            p->rec.attempts = 0;
            if (!store(p))
                return false;
        }
        p->chain =
            kind == HV_STEP_SHUTDOWN || kind == HV_STEP_POWER_OFF || kind == HV_STEP_RECONFIGURE;
        if (st.record) {
            /* stored with the step, and the step is complete: verify at once */
            p->rec = waiting;
            if (stored)
                hv_metrics_record_write();
            else if (!store(p)) /* the step had nothing to change: stored alone */
                return false;
            p->carried = p->chain = true;
        }
        return true;
    }
    memset(&p->after, 0, sizeof(p->after));
    log_err(p, step_name(kind), &err);
    p->rec.attempts++;
    if (kind == HV_STEP_POWER_ON)
        p->rec.starts--;
    char m[400];
    if (p->rec.attempts >= p->b->cfg->max_step_attempts) {
        snprintf(m, sizeof(m), HV_MSG("step %s failed %d times: %s"), step_name(kind),
                 p->rec.attempts, hv_errcode_message(err.code));
        struct hv_hw prev;
        if (kind == HV_STEP_POWER_ON && p->rec.cold && previous_config(&p->rec, &prev)) {
            /* It does not start with the new configuration: back to the one it ran with. */
            char m2[sizeof(m) + 200];
            snprintf(m2, sizeof(m2), HV_MSG("the VM could not start with %s (%s)"), p->what, m);
            fail_rolled_back(p, HV_FAIL_START_FAILED, m2);
            return false;
        }
        if (p->obs.power == HV_POWER_OFF && kind != HV_STEP_POWER_ON) {
            power_on_anyway(p); /* never leave a VM off: start it as it is */
        }
        fail_sticky(p, HV_FAIL_STEP_FAILED, m);
        return false;
    }
    if (store(p)) {
        snprintf(m, sizeof(m), HV_MSG("in progress: retrying %s (%s)"), step_name(kind),
                 hv_errcode_message(err.code));
        answer(p->out, false, RETRY_COLD, m);
    } else if (!live) {
        /* The record still says the step was sent (stored before it, attempts 0): this
         * process forgets it has seen the operation, so its next pass sends the step again
         * as for a record of a process that is gone, instead of waiting for its effect. */
        p->b->first_sight(p->b->ctx, p->key, 0);
    }
    return false;
}

/* "in progress: <fmt>", CAPI asked back in retry seconds; settling: only waiting for a
 * change already made to show (the engine may time its next look, an event may end it). */
static void vprogress(struct pass *p, int retry, bool settling, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void vprogress(struct pass *p, int retry, bool settling, const char *fmt, va_list ap)
{
    char m[400], body[300];
    vsnprintf(body, sizeof(body), fmt, ap);
    snprintf(m, sizeof(m), HV_MSG("in progress: %s"), body);
    answer(p->out, false, retry, m);
    if (settling)
        p->out->settling = true;
}

static void progress(struct pass *p, int retry, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void progress(struct pass *p, int retry, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, retry, false, fmt, ap);
    va_end(ap);
}

/* In progress, waiting for a change already made to show (phase wait-live, or the guest
 * after a power cycle): CAPI is asked back in 1 s while it should show soon (a loaded guest
 * may take seconds to online memory and report it), then in RETRY_LIVE; the engine takes its
 * next look just before that call (settling). */
static void settle(struct pass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void settle(struct pass *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, p->now - p->rec.step_at < LIVE_SOON_S ? RETRY_LIVE_SOON : RETRY_LIVE, true, fmt,
              ap);
    va_end(ap);
}

/* In progress, waiting for the VM to go off after a shutdown or power-off was sent: settling
 * too (a libvirt lifecycle event ends the wait), at the pace of power steps. */
static void going_off(struct pass *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void going_off(struct pass *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, RETRY_COLD, true, fmt, ap);
    va_end(ap);
}

/* Done. note: what the answer adds about the guest's own view (stored with the record, so
 * every later call answers the same words). */
static void done(struct pass *p, bool had_record, const char *note)
{
    char m[400];
    snprintf(m, sizeof(m), HV_MSG("done: %s (%s)"), p->what, note);
    /* Another replica may have finished what this one began: give back any slot held here. */
    p->b->slot_release(p->b->ctx, p->key);
    if (had_record && p->rec.phase != HV_PH_DONE) {
        hv_rec_set_phase(&p->rec, HV_PH_DONE, "done");
        p->rec.step_at = p->now;
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        hv_metrics_operation("done", "success");
        hv_log(HV_LOG_INFO, "operation-done", "vm", p->key, "result", p->what, "guest", note,
               (char *)NULL);
        if (!store(p))
            return;
    } else if (!had_record && p->other_failed) {
        /* The record is another hardware's sticky Failure: this state is done now, so a
         * later return to that hardware (A -> B -> A) begins anew instead of answering the
         * old Failure. Best effort: the done stands if the record cannot be written. */
        hv_rec_clear(&p->rec);
        p->rec.desired = *p->desired;
        p->rec.started_at = p->rec.step_at = p->now;
        for (int f = 0; f < HV_F_COUNT; f++)
            snprintf(p->rec.plan[f], sizeof(p->rec.plan[f]), "none");
        hv_rec_set_phase(&p->rec, HV_PH_DONE, "done over another hardware's failure");
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        (void)store(p);
    }
    answer(p->out, false, 0, m);
}

/* A call to the hypervisor failed. When it cannot be reached (a daemon or vCenter restarting,
 * a network cut, a connection being reopened) or did not answer in time (a host or vCenter
 * that hangs, overloaded or restarting), that is not the operation's failure: in progress
 * with a short retry, until the operation's deadline (deadlineSeconds from the start of the
 * operation in flight, or from the first failed look when none is): true, answered. Past that
 * bound, or for any other error, false: the caller's Failure. */
static bool wait_for_hypervisor(struct pass *p, const struct hv_err *err)
{
    if (err->code != HV_E_UNREACHABLE && err->code != HV_E_TIMEOUT)
        return false;
    int64_t since = p->b->unreachable_since(p->b->ctx, p->key, p->now, true);
    if (p->now - since >= p->s->deadline_s)
        return false;
    if (err->code == HV_E_TIMEOUT)
        progress(p, RETRY_UNREACHABLE,
                 HV_MSG("the hypervisor did not answer in time; trying again"));
    else
        progress(p, RETRY_UNREACHABLE, HV_MSG("the hypervisor cannot be reached; trying again"));
    return true;
}

/* The hypervisor shows the desired hardware and the VM runs: is it done in the guest too?
 * Returns true when it answered (done, waiting, or failed), false when the operation must go
 * on (the guest does not show it yet and no operation is waiting for it). */
static bool done_in_guest(struct pass *p, bool had, bool inflight)
{
    char unv[32], note[120];
    enum gverdict v = GV_UNKNOWN;
    int checked = 0;
    unv[0] = '\0';
    if (!had) { /* no operation of this spec: the VM had it already, nothing changed to verify */
        done(p, false, HV_MSG("not verified in the guest"));
        return true;
    }
    /* the hardware step is taken: a live change waits, a power cycle is over */
    bool cycled =
        p->rec.cold && (p->rec.phase == HV_PH_RECONFIGURE || p->rec.phase == HV_PH_POWER_ON);
    bool waiting = inflight && (p->rec.phase == HV_PH_WAIT_LIVE || cycled);
    if (p->s->guest_check != HV_GC_OFF)
        v = guest_verdict(p, waiting && cycled, unv, sizeof(unv), &checked);
    if (!checked)
        v = GV_UNKNOWN; /* nothing the guest can show changed */
    bool in_time = waiting && p->now - p->rec.step_at < p->s->live_timeout_s;
    if (v == GV_PENDING && !in_time)
        v = GV_UNKNOWN; /* it never reported: the guest cannot tell */
    if (v == GV_UNKNOWN && checked && p->s->guest_check == HV_GC_REQUIRED) {
        /* It reported before the step (else begin() failed): give it the live timeout (a
         * guest booting after the power cycle, an agent reconnecting), then fail; never a
         * power cycle, which cannot make a silent guest report. */
        if (in_time) {
            settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
            return true;
        }
        char m[300];
        snprintf(m, sizeof(m),
                 HV_MSG("guestVerification is Required but the guest did not report its %s "
                        "after the change"),
                 unv);
        fail_sticky(p, HV_FAIL_OTHER, m);
        return true;
    }
    switch (v) {
    case GV_SHOWS:
        done(p, had, HV_MSG("the guest shows it"));
        return true;
    case GV_UNKNOWN:
        if (!unv[0] || checked < 2 || strchr(unv, ' '))
            snprintf(note, sizeof(note), HV_MSG("not verified in the guest"));
        else
            snprintf(note, sizeof(note), HV_MSG("%s not verified in the guest"), unv);
        done(p, had, note);
        return true;
    case GV_PENDING:
    case GV_NOT_YET:
        break;
    }
    if (!waiting)
        return false; /* begin (or go on with) an operation that waits for the guest */
    if (in_time) {
        settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
        return true;
    }
    char m[400];
    if (cycled) {
        snprintf(m, sizeof(m),
                 HV_MSG("the guest did not show %s within %d s after the power cycle (the "
                        "hypervisor shows it; the guest did not take it)"),
                 p->what, p->s->live_timeout_s);
        fail_sticky(p, HV_FAIL_OTHER, m);
        return true;
    }
    return false; /* WAIT_LIVE past its time: live_path falls back or fails */
}

static bool look_into_guest(struct pass *p, bool had);

/* The look begin needs: the guest's own view of a running VM, from backends that give it only
 * on request, when the change is one the guest can show against what the hypervisor shows
 * now. False (with a Failure for this call) when the VM cannot be read. */
static bool look_before_begin(struct pass *p, bool on)
{
    struct hv_guest_base *b = &p->rec.base;
    p->rec.has_base = true;
    b->hv_memory_mib = p->obs.hw.memory_mib;
    b->hv_cpus = p->obs.hw.cpus;
    b->guest_memory_mib = b->guest_cpus = -1;
    return !on || look_into_guest(p, true);
}

/* The refusal j makes of the operation begin, if any (the first in the order the judgement
 * names them), as a Failure: sticky, recorded with the plan so far; or for this call only
 * while the guest may still report by itself. True when refused. */
static bool begin_refused(struct pass *p, const struct hv_begin_judgement *j)
{
    char m[HV_MSG_MAX + 400];
    if (j->impossible >= 0) {
        hv_begin_impossible_msg(j, m, sizeof(m));
        fail_sticky(p, HV_FAIL_FIELD_NOT_CHANGEABLE, m);
    } else if (j->unshown && j->unshown_sticky) {
        fail_sticky(p, HV_FAIL_OTHER, j->unshown_msg);
    } else if (j->unshown) {
        answer(p->out, true, 0, j->unshown_msg);
        hv_log(HV_LOG_INFO, "guest-not-reporting-yet", "vm", p->key, "message", j->unshown_msg,
               (char *)NULL);
    } else {
        return false;
    }
    return true;
}

/* The same for a power cycle j refuses (under powerCycle Never, or one this VM may not take),
 * which begin applies once the record says the operation is cold. takeover: the operation takes
 * an older one's shutdown or power-off over (its cycle goes on from there, see cold_on_path). */
static bool begin_cycle_refused(struct pass *p, const struct hv_begin_judgement *j, bool takeover)
{
    if (j->never)
        fail_sticky(p, HV_FAIL_POWER_CYCLE_NOT_ALLOWED, j->never_msg);
    else if (j->cycle_refused && !takeover)
        fail_sticky(p, j->cycle_code, j->cycle_msg);
    else
        return false;
    return true;
}

/* A new operation: ask the backend how each field can change on this VM now, judge it
 * (hv_begin_judge, as CanUpdateMachine does), and begin it or refuse it. */
static bool begin(struct pass *p)
{
    struct hv_begin_facts f;
    struct hv_err err = {0};
    memset(&f, 0, sizeof(f));
    if (p->be->ops->plan(p->be, p->ref, &p->obs, p->desired, f.plan, &err) != HV_OK) {
        log_err(p, "plan", &err);
        if (wait_for_hypervisor(p, &err))
            return false;
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("cannot plan the change: %s"), hv_errcode_message(err.code));
        answer(p->out, true, 0, m);
        return false;
    }
    struct hv_oprecord old = p->rec; /* an operation in flight may leave its base to this one */
    hv_rec_clear(&p->rec);
    p->rec.desired = *p->desired;
    p->rec.prev.memory_mib = p->desired->memory_mib >= 0 ? p->obs.config.memory_mib : -1;
    p->rec.prev.cpus = p->desired->cpus >= 0 ? p->obs.config.cpus : -1;
    p->rec.prev.cores_per_socket =
        p->desired->cores_per_socket >= 0 ? p->obs.config.cores_per_socket : -1;
    p->rec.started_at = p->rec.step_at = p->now;
    bool on = p->obs.power == HV_POWER_ON;
    if (!look_before_begin(p, on))
        return false;
    f.on = on;
    f.hw = p->obs.hw;
    f.guest = p->obs.guest;
    f.guest_mem_current = hv_guest_mem_current(&p->obs.guest, p->now);
    f.no_mem_report = p->obs.no_mem_report;
    f.no_cpu_report = p->obs.no_cpu_report;
    f.can_shutdown = p->obs.can_shutdown;
    f.no_power_cycle = p->obs.no_power_cycle;
    struct hv_begin_in in = {
        .facts = &f, .old = &old, .desired = p->desired, .s = p->s, .now = p->now};
    struct hv_begin_judgement j;
    hv_begin_judge(&in, &j);
    p->rec.base = j.base;
    if (j.wait_boot) {
        progress(p, RETRY_LIVE_SOON, HV_MSG("waiting for the guest to finish starting"));
        return false; /* nothing stored: the next call asks again */
    }
    /* the plan as recorded (up to a field it cannot change, when one is) */
    int upto = j.impossible >= 0 ? j.impossible : HV_F_COUNT;
    for (int k = 0; k < upto; k++) {
        if (f.plan[k].how == HV_HOW_LIVE)
            snprintf(p->rec.plan[k], sizeof(p->rec.plan[k]), "live:%s", f.plan[k].method);
        else
            snprintf(p->rec.plan[k], sizeof(p->rec.plan[k]), "%s",
                     f.plan[k].how == HV_HOW_COLD ? "cold" : "none");
        if (f.plan[k].how == HV_HOW_COLD)
            hv_rec_move(&p->rec, p->rec.phase, true, p->rec.down_at, "plan: a field needs a cycle");
    }
    if (begin_refused(p, &j))
        return false;
    if (!on)
        hv_rec_move(&p->rec, p->rec.phase, true, p->rec.down_at, "plan: the VM is off");
    if (begin_cycle_refused(p, &j, p->down_at != 0))
        return false;
    hv_rec_set_phase(&p->rec, HV_PH_NONE, "begun");
    p->b->first_sight(p->b->ctx, p->key, p->rec.started_at); /* ours: nothing to re-issue */
    hv_metrics_operation("started", p->rec.cold ? "cold" : "live");
    hv_log(HV_LOG_INFO, "operation-start", "vm", p->key, "desired", p->what, "path",
           p->rec.cold ? "cold" : "live", (char *)NULL);
    return true;
}

/* The VM is off and about to be started with the new configuration: false (and a sticky
 * Failure, after a rollback when the record keeps the previous configuration) when it went
 * off again after every start so far. A VM that halts at once is not started for ever. */
static bool may_start(struct pass *p)
{
    if (p->rec.starts < MAX_STARTS + p->rec.recycles)
        return true;
    char m[300];
    struct hv_hw prev;
    snprintf(m, sizeof(m), HV_MSG("the VM did not stay on: it was started %d times with %s"),
             p->rec.starts, p->what);
    if (p->rec.cold && previous_config(&p->rec, &prev)) {
        fail_rolled_back(p, HV_FAIL_DID_NOT_STAY_ON, m);
    } else {
        char m2[sizeof(m) + 64];
        snprintf(m2, sizeof(m2), HV_MSG("%s; it is left off"), m);
        fail_sticky(p, HV_FAIL_DID_NOT_STAY_ON, m2);
    }
    return false;
}

/* The VM is off during an operation: write the desired hardware if needed, then start it. */
static void off_path(struct pass *p)
{
    /* Powered off by this operation: always rewrite the definition, even when it already
     * shows the desired values (hot-plugged ones a guest did not take): the rewrite folds
     * DIMMs and virtio-mem into boot memory, which every guest sees without onlining. */
    bool ours = p->rec.cold && (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF);
    if (!matches(&p->obs.config, p->desired) || ours) {
        if (step(p, HV_PH_RECONFIGURE, HV_STEP_RECONFIGURE, NULL)) {
            progress(p, 1, HV_MSG("reconfigured the powered-off VM to %s; starting it next"),
                     p->what);
        }
        return;
    }
    if (may_start(p) && step(p, HV_PH_POWER_ON, HV_STEP_POWER_ON, NULL))
        progress(p, RETRY_COLD, HV_MSG("powering the VM on with %s"), p->what);
}

static void live_path(struct pass *p);

static void cold_on_path(struct pass *p)
{
    const struct hv_engine_cfg *cfg = p->b->cfg;
    int64_t elapsed = p->now - p->rec.step_at;
    bool first = p->b->first_sight(p->b->ctx, p->key, p->rec.started_at);
    /* The shutdown or power-off in flight is an older operation's that this one, which needs
     * no power cycle itself, took over while it might still take the VM down (downAt): it
     * sends no step of its own (no new cycle for hardware that needs none). Once that step
     * has not taken the VM down within the time it could (see old_step_recent), it will not:
     * the operation goes on as planned, live, and the slot goes back with the record. */
    bool inherited = hv_rec_taken_over_at(&p->rec) != 0;
    if (inherited && elapsed >= p->s->shutdown_timeout_s + cfg->step_timeout_s) {
        hv_rec_move(&p->rec, HV_PH_NONE, false, 0, "a taken-over step did not take the VM down");
        live_path(p);
        return;
    }
    /* This process's own shutdown or power-off, sent (no failed try recorded) within the time
     * it may still take the VM down, of a cycle that lost its slot while the VM was paused:
     * the VM may go down at any moment, so the cycle counts against the caps at once (taken
     * over them), before a new cycle of its host begins. */
    bool sent = p->vm_cycle && !first && !p->rec.attempts &&
                elapsed < p->s->shutdown_timeout_s + cfg->step_timeout_s;
    if ((p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF) &&
        !p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, sent)) {
        /* A cycle this process does not hold a slot for (begun by a process that is gone or
         * by another replica, or one whose step is older): it goes on like a new one, when a
         * slot is free (not handled here yet: the pass that goes on sends its step again). */
        if (first)
            p->b->first_sight(p->b->ctx, p->key, 0);
        progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
        return;
    }
    if (inherited) {
        if (p->rec.phase == HV_PH_SHUTDOWN)
            going_off(p, HV_MSG("waiting for the guest to shut down"));
        else
            going_off(p, HV_MSG("waiting for the VM to power off"));
        return;
    }
    switch (p->rec.phase) {
    case HV_PH_SHUTDOWN:
        if ((first || p->rec.attempts) && p->obs.can_shutdown && !p->obs.busy) {
            /* Recorded by a process that is gone (or another replica) and maybe never sent:
             * ask again so the guest gets its whole graceful window. Once per process; and
             * again while the last try failed (it was not sent). */
            if (step(p, HV_PH_SHUTDOWN, HV_STEP_SHUTDOWN, NULL))
                going_off(p, HV_MSG("shutting the guest down to apply %s"), p->what);
            return;
        }
        if (elapsed < p->s->shutdown_timeout_s) {
            going_off(p, HV_MSG("waiting for the guest to shut down"));
            return;
        }
        if (p->s->power_off_mode == HV_POM_SOFT) {
            char m[300];
            snprintf(m, sizeof(m),
                     HV_MSG("the guest did not shut down within %d s and powerOffMode is Soft"),
                     p->s->shutdown_timeout_s);
            fail_sticky(p, HV_FAIL_SHUTDOWN_TIMEOUT, m);
            return;
        }
        if (step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
            going_off(p, HV_MSG("powering off: the guest did not shut down in time"));
        return;
    case HV_PH_POWER_OFF:
        if (elapsed < cfg->step_timeout_s && !((first || p->rec.attempts) && !p->obs.busy)) {
            going_off(p, HV_MSG("waiting for the VM to power off"));
            return;
        }
        if (step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
            going_off(p, HV_MSG("powering off again"));
        return;
    case HV_PH_RECONFIGURE:
    case HV_PH_POWER_ON:
        if (p->rec.phase == HV_PH_POWER_ON && matches(&p->obs.config, p->desired)) {
            /* We started it with the new configuration, but the VM shows other values. */
            char m[400], seen[160];
            describe(seen, sizeof(seen), &p->obs.hw);
            snprintf(m, sizeof(m),
                     HV_MSG("after the power cycle the hypervisor reports %s, want %s"), seen,
                     p->what);
            fail_sticky(p, HV_FAIL_NOT_APPLIED_AFTER_POWER_CYCLE, m);
            return;
        }
        /* It came back on before it was reconfigured (e.g. CAPV powers on VMs it finds off). */
        if (++p->rec.recycles > MAX_RECYCLES) {
            fail_sticky(p, HV_FAIL_POWERED_ON_EXTERNALLY,
                        HV_MSG("the VM was powered on again before hvupdater could reconfigure it; "
                               "pause the cluster (spec.paused) and retry"));
            return;
        }
        hv_rec_set_phase(&p->rec, HV_PH_NONE, "on again before reconfigured");
        /* shut it down again */
        __attribute__((fallthrough));
    default:; /* (an empty statement: a label is followed by a statement in C17) */
        char refused[HV_MSG_MAX + 64];
        enum hv_failure_reason why;
        if (hv_cycle_refused(p->obs.no_power_cycle, p->obs.can_shutdown, p->s, refused,
                             sizeof(refused), &why)) {
            fail_sticky(p, why, refused);
            return;
        }
        if (!p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, false)) {
            if (p->rec.phase == HV_PH_NONE) { /* keep the plan and start time while waiting */
                hv_rec_set_phase(&p->rec, HV_PH_PLANNED, "waiting for a slot");
                if (!store(p))
                    return;
            }
            progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
            return;
        }
        if (p->s->power_off_mode == HV_POM_HARD || !p->obs.can_shutdown) {
            if (step(p, HV_PH_POWER_OFF, HV_STEP_POWER_OFF, NULL))
                going_off(p, HV_MSG("powering off to apply %s"), p->what);
        } else if (step(p, HV_PH_SHUTDOWN, HV_STEP_SHUTDOWN, NULL)) {
            going_off(p, HV_MSG("shutting the guest down to apply %s"), p->what);
        }
        return;
    }
}

static void live_path(struct pass *p)
{
    if (p->rec.phase == HV_PH_WAIT_LIVE) {
        bool hv_shows = matches(&p->obs.hw, p->desired);
        if (p->now - p->rec.step_at < p->s->live_timeout_s) {
            settle(p, HV_MSG("waiting for the hypervisor to show %s"), p->what);
            return;
        }
        if (p->s->power_cycle == HV_PC_IF_NEEDED) {
            hv_log(HV_LOG_INFO, "live-timeout", "vm", p->key, "next", "power cycle", (char *)NULL);
            hv_rec_move(&p->rec, HV_PH_NONE, true, p->rec.down_at, "live timeout: power cycle");
            cold_on_path(p);
            return;
        }
        char m[400];
        if (hv_shows)
            snprintf(m, sizeof(m),
                     HV_MSG("the hypervisor shows %s but the guest did not take it within %d s; "
                            "allow powerCycle IfNeeded or check the guest's hot-plug support"),
                     p->what, p->s->live_timeout_s);
        else
            snprintf(
                m, sizeof(m),
                HV_MSG("the live change to %s did not show within %d s (the guest did not take "
                       "it); allow powerCycle IfNeeded or check the guest's hot-plug support"),
                p->what, p->s->live_timeout_s);
        /* (the first is counted as other, as the message prefixes filed it before the codes:
         * a metrics label of its own is a change of its own) */
        fail_sticky(p, hv_shows ? HV_FAIL_OTHER : HV_FAIL_LIVE_CHANGE_NOT_SEEN, m);
        return;
    }
    /* Issue every live step still needed; each is idempotent against what the VM shows.
     * The last one may carry the waiting record (see step()). */
    bool mem = p->desired->memory_mib >= 0 && p->obs.hw.memory_mib != p->desired->memory_mib;
    bool cpus = p->desired->cpus >= 0 && p->obs.hw.cpus != p->desired->cpus;
    bool disk = hv_disk_set(p->desired->disk_mib) && p->obs.hw.disk_mib < p->desired->disk_mib;
    if ((mem || cpus) && p->rec.phase < HV_PH_LIVE &&
        !(p->be->ops->record_in_step && mem + cpus + disk == 1)) {
        /* the record, with the guest's view from before, is on the VM before the first step:
         * a restart or another replica that sees the change sees what to compare it with
         * (a backend that stores the record with the step needs no separate write when that
         * step is the only one: only the last step carries it) */
        hv_rec_set_phase(&p->rec, HV_PH_LIVE, "record before the first live step");
        p->rec.step_at = p->now;
        if (!store(p))
            return;
    }
    p->carry = mem && !cpus && !disk;
    if (mem && !step(p, HV_PH_LIVE, HV_STEP_LIVE_MEMORY, p->rec.plan[HV_F_MEMORY] + 5))
        return;
    p->carry = cpus && !disk;
    if (cpus && !step(p, HV_PH_LIVE, HV_STEP_LIVE_CPUS, p->rec.plan[HV_F_CPUS] + 5))
        return;
    p->carry = disk;
    if (disk && !step(p, HV_PH_LIVE, HV_STEP_LIVE_DISK, p->rec.plan[HV_F_DISK] + 5))
        return;
    p->carry = false;
    bool stepped = p->rec.phase == HV_PH_LIVE || p->carried;
    if (!p->carried) {
        hv_rec_set_phase(&p->rec, HV_PH_WAIT_LIVE, "live steps issued");
        p->rec.step_at = p->now;
        if (!store(p))
            return;
    }
    if (stepped)
        settle(p, HV_MSG("hot-plugged; waiting for the hypervisor to show %s"), p->what);
    else
        settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
}

/* The VM runs with the desired hardware: ask for the guest's own view now, from backends
 * that give it only on request (it costs a round trip into the guest, which a pass that has
 * a step to take does not need). False (with a Failure for this call) when the VM cannot be
 * read, as for observe. */
static bool look_into_guest(struct pass *p, bool had)
{
    bool mem = false, cpus = false;
    if (had)
        hv_guest_fields(&p->rec, p->desired, &mem, &cpus);
    if (!p->be->ops->observe_guest || p->s->guest_check == HV_GC_OFF || !(mem || cpus))
        return true;
    struct hv_err err = {0};
    if (p->be->ops->observe_guest(p->be, p->ref, &p->obs, &err) == HV_OK)
        return true;
    log_err(p, "observe", &err);
    if (wait_for_hypervisor(p, &err))
        return false;
    char m[300];
    snprintf(m, sizeof(m), HV_MSG("cannot observe the VM: %s"), hv_errcode_message(err.code));
    answer(p->out, true, 0, m);
    return false;
}

/* The VM is neither running nor off: paused, suspended, or in a transition. No step is
 * taken (resuming a VM is not ours to decide). A sticky Failure stays sticky. In the middle of
 * this operation's power cycle that is expected for a moment (a domain being started is
 * briefly paused, seen by another replica), but the cycle cannot progress: the slot goes back
 * at the end of the pass (see hv_reconcile_key) and deadlineSeconds still applies. */
static void neither_on_nor_off(struct pass *p)
{
    char pol[sizeof(p->rec.policy)];
    policy_of(p->s, pol, sizeof(pol));
    bool mine =
        hv_oprecord_read(&p->rec, p->obs.record) && hv_hw_equal(&p->rec.desired, p->desired);
    p->seen = true;
    p->ours = mine;
    if (mine && p->rec.phase == HV_PH_FAILED && !strcmp(p->rec.policy, pol)) {
        answer_sticky(p->out, p->rec.message);
        return;
    }
    if (!(mine && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
          p->rec.phase <= HV_PH_POWER_ON)) {
        answer(p->out, true, 0,
               HV_MSG("the VM is paused, suspended or in transition; hvupdater continues when "
                      "it runs or is off"));
        return;
    }
    if (p->now - p->rec.started_at > p->s->deadline_s) {
        char m[300];
        snprintf(m, sizeof(m),
                 HV_MSG("the VM is %s in the middle of its power cycle (last step: %s) and the "
                        "change did not complete within %d s"),
                 p->obs.power_state[0] ? p->obs.power_state : HV_MSG("in transition"),
                 hv_phase_name(p->rec.phase), p->s->deadline_s);
        fail_sticky(p, HV_FAIL_PAUSED_MID_CYCLE, m);
        return;
    }
    p->stalled = true;
    progress(p, RETRY_COLD, HV_MSG("waiting for the VM to finish starting or stopping"));
}

/* One observe-decide-act round. Returns true when it took a step after which the next one
 * can follow at once (power-off, shutdown, reconfigure): those run back to back, so a VM is
 * off as briefly as possible and nothing (e.g. CAPV, which powers on VMs it finds off) gets a
 * window between them. */
static bool one_pass(struct pass *p)
{
    const struct hv_vm_ref *ref = p->ref;
    const struct hv_hw *desired = p->desired;
    const struct hv_settings *s = p->s;
    struct hv_update_result *out = p->out;
    struct hv_err err = {0};
    p->chain = false;
    p->carried = false; /* only a step of this round carries the record */
    p->now = p->b->unix_s(p->b->ctx);
    int orc = HV_OK;
    if (p->after.found) { /* read when the last step finished: no second look needed */
        p->obs = p->after;
        p->after.found = false;
    } else {
        memset(&p->obs, 0, sizeof(p->obs));
        orc = p->be->ops->observe(p->be, ref, &p->obs, &err);
    }
    if (orc != HV_OK) {
        log_err(p, "observe", &err);
        if (wait_for_hypervisor(p, &err))
            return false;
        char m[400];
        if (err.code == HV_E_AMBIGUOUS) /* detail: the configured hosts that hold the name */
            snprintf(m, sizeof(m),
                     HV_MSG("VM %s is on several configured %s hosts (%s): name its server or "
                            "give its UUID"),
                     ref->name, p->be->ops->name, err.detail);
        else
            snprintf(m, sizeof(m), HV_MSG("cannot observe the VM: %s"),
                     hv_errcode_message(err.code));
        answer(out, true, 0, m);
        return false;
    }
    p->b->unreachable_since(p->b->ctx, p->key, p->now, false); /* it answered */
    if (!p->obs.found) {
        char m[400];
        snprintf(m, sizeof(m), HV_MSG("VM %s not found on any configured %s host"),
                 ref->uuid[0] ? ref->uuid : ref->name, p->be->ops->name);
        answer(out, true, 0, m);
        p->b->slot_release(p->b->ctx, p->key);
        return false;
    }
    if (p->obs.power != HV_POWER_ON && p->obs.power != HV_POWER_OFF) {
        neither_on_nor_off(p);
        return false;
    }
    bool had = hv_oprecord_read(&p->rec, p->obs.record);
    p->seen = true;
    p->vm_cycle = had && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
                  p->rec.phase <= HV_PH_POWER_ON && !strcmp(p->rec.owner, p->b->owner);
    /* A record for other hardware belongs to an older operation. If that one left the VM
     * off mid-cycle, the new one must still bring it back on. */
    bool old_cold_inflight =
        had && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN && p->rec.phase <= HV_PH_POWER_ON;
    /* ... also one that failed in its cycle and left the VM off (its start or its rollback's
     * failed): that VM is not off on purpose, so "off" is no "done" for the new one. */
    bool old_left_off =
        had && p->rec.cold && p->rec.phase == HV_PH_FAILED && p->obs.power == HV_POWER_OFF;
    /* ... and while another process (e.g. a replica serving a newer spec) carries one out, the
     * VM is not done, whatever it shows now: it is about to change. */
    bool other_inflight = had && !hv_hw_equal(&p->rec.desired, desired) &&
                          p->rec.phase >= HV_PH_LIVE && p->rec.phase <= HV_PH_POWER_ON &&
                          strcmp(p->rec.owner, p->b->owner) != 0 &&
                          p->now - p->rec.started_at <= s->deadline_s;
    /* ... and a shutdown or power-off such an older operation sent may still take the VM
     * down (a rollout that changed, or went back, mid-shutdown): the new operation takes that
     * cycle over instead of answering done or stepping live on a VM about to go off. */
    bool on_now = p->obs.power == HV_POWER_ON;
    /* (also a Failure that came upon such a shutdown or power-off while it may still land:
     * downAt) */
    bool old_failed_down =
        had && on_now && p->rec.cold && hv_rec_failed_upon_at(&p->rec) &&
        p->now - hv_rec_failed_upon_at(&p->rec) < s->shutdown_timeout_s + p->b->cfg->step_timeout_s;
    /* (not one sent longer ago than such a step can take: the VM stayed on, and a new state
     * that shows takes no cycle for it) */
    bool old_step_recent =
        p->now - p->rec.step_at < s->shutdown_timeout_s + p->b->cfg->step_timeout_s;
    bool old_going_down =
        had && on_now && !hv_hw_equal(&p->rec.desired, desired) && p->rec.cold &&
        (((p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF) && old_step_recent) ||
         old_failed_down);
    p->record_down = had && on_now && p->rec.cold &&
                     (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF) &&
                     old_step_recent && hv_owner_previous(p->rec.owner, p->b->owner);
    enum hv_phase old_phase = old_failed_down ? HV_PH_SHUTDOWN : p->rec.phase;
    p->other_failed = had && p->rec.phase == HV_PH_FAILED && !hv_hw_equal(&p->rec.desired, desired);
    /* ... or still open before its cycle (planned, live, waiting for the guest, going down):
     * the VM may show this state by another operation's step the guest has not taken yet
     * (A -> B hot-plugged, then back to A, then B again) */
    bool other_open = had && !hv_hw_equal(&p->rec.desired, desired) &&
                      p->rec.phase >= HV_PH_PLANNED && p->rec.phase <= HV_PH_POWER_OFF;
    int64_t old_step_at = old_failed_down ? hv_rec_failed_upon_at(&p->rec) : p->rec.step_at;
    bool old_others = had && strcmp(p->rec.owner, p->b->owner) != 0;
    if (had && !hv_hw_equal(&p->rec.desired, desired))
        had = false;
    char pol[sizeof(p->rec.policy)];
    policy_of(s, pol, sizeof(pol));
    /* A failure is final for this hardware under this policy; a changed policy (e.g. the
     * operator allowed power cycles) gets a new operation. */
    bool refailed = had && p->rec.phase == HV_PH_FAILED && strcmp(p->rec.policy, pol);
    if (refailed)
        had = false;
    if (had && p->rec.phase == HV_PH_FAILED) {
        p->b->slot_release(p->b->ctx, p->key);
        /* Starts after the failure are bounded too: a VM that halts at once stays off. */
        bool may = p->rec.starts < 2 * MAX_STARTS + p->rec.recycles;
        if (p->rec.rollback && p->obs.power == HV_POWER_OFF && may) {
            roll_back_again(p); /* it did not start with the new configuration: as it was */
        } else if (p->rec.cold && p->obs.power == HV_POWER_OFF && may) {
            /* It failed mid-cycle and the guest went down after (e.g. a late ACPI shutdown):
             * a failure must not leave the VM off. Best effort, every call. */
            bool landed =
                hv_rec_failed_upon_at(&p->rec) != 0; /* the shutdown it came upon landed now */
            if (landed) {
                hv_rec_move(&p->rec, p->rec.phase, p->rec.cold, 0, "failed: the shutdown landed");
                p->rec.step_at = p->now; /* a start that fails keeps the slot from now */
            }
            if (power_on_anyway(p) || landed)
                store(p); /* counted */
        } else if (p->rec.cold && hv_rec_failed_upon_at(&p->rec) && on_now &&
                   p->now - hv_rec_failed_upon_at(&p->rec) <
                       s->shutdown_timeout_s + p->b->cfg->step_timeout_s) {
            p->going_down = true; /* a shutdown or power-off it came upon may land yet */
        }
        answer_sticky(out, p->rec.message);
        return false;
    }
    bool on = p->obs.power == HV_POWER_ON;
    bool inflight = had && p->rec.phase != HV_PH_DONE;
    /* A shutdown or power-off we sent may still take the VM down: not done while it can. */
    bool going_down =
        (inflight && (p->rec.phase == HV_PH_SHUTDOWN || p->rec.phase == HV_PH_POWER_OFF)) ||
        old_going_down;
    p->ours = had;
    if (matches(&p->obs.hw, desired) && !going_down &&
        (on || !(inflight || old_cold_inflight || old_left_off))) {
        if (other_inflight && !inflight) {
            progress(p, RETRY_COLD, HV_MSG("waiting for another operation on this VM to finish"));
            return false;
        }
        if (had && p->rec.phase == HV_PH_DONE && p->rec.message[0]) {
            answer(out, false, 0, p->rec.message); /* as answered when it was done */
            return false;
        }
        if (!on) {
            done(p, had, HV_MSG("not verified in the guest: the VM is off"));
            return false;
        }
        /* Another hardware's Failure that came upon an operation still in flight (it kept
         * that one's view from before), another hardware's operation still open (its base is
         * the view from before the chain of them), or this hardware's Failure under other
         * settings (e.g. a hot-add the guest did not take under Never, then IfNeeded): the VM
         * changed since,
         * so this state is not simply what it had; it begins an operation that verifies the
         * change against that view. */
        bool changed_since =
            !had && (p->other_failed || other_open || refailed) && p->rec.has_base &&
            p->now - p->rec.started_at <= s->deadline_s &&
            ((desired->memory_mib >= 0 && p->rec.base.hv_memory_mib != desired->memory_mib) ||
             (desired->cpus >= 0 && p->rec.base.hv_cpus != desired->cpus));
        if (!changed_since) {
            if (!look_into_guest(p, had))
                return false;
            if (done_in_guest(p, had, inflight))
                return false;
        }
    }
    if (!had || p->rec.phase == HV_PH_DONE) {
        if (!p->called && !(old_cold_inflight && (!on || !strcmp(p->rec.owner, p->b->owner)))) {
            /* The engine's own pass, to finish a cycle of this process: the VM's record no
             * longer shows it (done, or replaced by another replica's operation). Nothing of
             * ours is in flight; only a call begins an operation. (A VM off mid-cycle, or a
             * cycle of ours for older hardware going on, becomes the new operation: the VM
             * comes back on.) */
            progress(p, RETRY_COLD, HV_MSG("observing the VM"));
            return false;
        }
        /* Never begin over another process's operation in flight (a late call for an older
         * spec reaching one replica while another carries out the newer one): its record
         * would be lost and with it what the guest showed before. A cycle it left going down
         * or off is taken over (below). */
        if (other_inflight && !old_going_down && !(old_cold_inflight && !on)) {
            progress(p, RETRY_COLD, HV_MSG("waiting for another operation on this VM to finish"));
            return false;
        }
        /* Another process's cycle going down is taken over like a new one, within this
         * process's caps: that process gives its slot back once the record is ours. */
        if (old_going_down && old_others &&
            !p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, false)) {
            progress(p, RETRY_SLOT, HV_MSG("waiting for a power-cycle slot"));
            return false;
        }
        p->down_at = old_going_down ? old_step_at : 0;
        bool begun = begin(p);
        p->down_at = 0;
        if (!begun)
            return false;
        p->ours = true;
        if (old_going_down) { /* the cycle already under way is this operation's now */
            /* (an operation that needs no cycle of its own only waits for that step: its
             * record says when it was sent, downAt, see cold_on_path) */
            hv_rec_move(&p->rec, old_phase, true, p->rec.cold ? p->rec.down_at : old_step_at,
                        "takes the cycle under way over");
            p->rec.step_at = old_step_at;
            p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, true);
            if (!store(p))
                return false;
        }
    }
    if (p->now - p->rec.started_at > s->deadline_s) {
        if (!on) {
            if (may_start(p) && step(p, HV_PH_POWER_ON, HV_STEP_POWER_ON, NULL))
                progress(p, RETRY_COLD, HV_MSG("deadline passed; powering the VM back on"));
            return false;
        }
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("the change did not complete within %d s (last step: %s)"),
                 s->deadline_s, hv_phase_name(p->rec.phase));
        fail_sticky(p, HV_FAIL_DEADLINE, m);
        return false;
    }
    if (!on) {
        if (p->rec.cold)
            p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, true);
        off_path(p);
    } else if (p->rec.cold) {
        cold_on_path(p);
    } else {
        live_path(p);
    }
    return p->chain;
}

bool hv_reconcile_key(const struct hv_books *b, const char *key, struct hv_backend *be,
                      const struct hv_vm_ref *ref, const struct hv_hw *desired,
                      const struct hv_settings *s, bool called, struct hv_update_result *out)
{
    struct pass *p = calloc(1, sizeof(*p));
    if (!p)
        abort();
    p->b = b;
    p->be = be;
    p->ref = ref;
    p->desired = desired;
    p->s = s;
    p->out = out;
    p->called = called;
    snprintf(p->key, sizeof(p->key), "%s", key);
    describe(p->what, sizeof(p->what), desired);
    for (int round = 0; round < 4 && one_pass(p); round++)
        ;
    /* No power-cycle slot outlives its cycle: once the VM's record shows no cycle of this
     * operation in flight (done, failed, live, waiting, or cleared or replaced by someone
     * else), the slot goes back. A pass that could not read the record keeps it. */
    bool cycling = p->ours && p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN &&
                   p->rec.phase <= HV_PH_POWER_ON &&
                   !(out->failure && p->obs.power == HV_POWER_ON); /* e.g. no record stored */
    /* A failed operation that left the VM off (starting it, as it is or rolled back, failed)
     * still has it down: it keeps a slot (taken over the caps: the VM is off already), so no
     * other VM of the host goes down meanwhile and the engine tries again by itself, for
     * step_timeout_s after the failure. Then the slot goes: a VM that cannot start holds none
     * (each call still tries). */
    bool left_off = p->left_off && p->rec.phase == HV_PH_FAILED &&
                    p->now - p->rec.step_at < b->cfg->step_timeout_s;
    /* A cycle that cannot progress (the VM paused or suspended in the middle of it) holds no
     * slot either: the other VMs of the host go on, and this one takes a slot again when it
     * runs or is off. A shutdown or power-off of this process's previous life that may still
     * take the VM down is a cycle no live process holds a slot for: a slot this process took
     * for it (the scan's resume, a takeover) stays, also when this pass took no step (its
     * write failed, an uncalled pass for other hardware), and the engine keeps looking, until
     * the step lands (the VM off: taken over as a cycle under way) or its window ends. */
    if (left_off || p->going_down)
        b->slot_acquire(b->ctx, key, p->obs.host, true);
    else if (p->seen && ((!cycling && !p->vm_cycle && !p->record_down) || p->stalled))
        b->slot_release(b->ctx, key);
    cycling |= p->going_down || p->record_down; /* the engine looks again by itself */
    free(p);
    return cycling;
}
