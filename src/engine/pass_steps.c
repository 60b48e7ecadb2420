/* pass_steps.c: what a reconcile pass writes and does to the VM: the record (stored before a
 * power or configuration step), one step, a sticky Failure, and the rollback of a VM that does
 * not start with its new configuration. */
#include "pass.h"
#include "reconcile.h"
#include "errclass.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "phase.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* How far a rollback got. */
enum rb_outcome { RB_STARTED = 0, RB_RESTORE_FAILED, RB_START_FAILED, RB_STARTED_AS_IS, RB_COUNT };

bool rc_first_sight(struct pass *p, int64_t op)
{
    if (p->sight_new && p->sight_new == op)
        return false;
    return p->b->first_sight(p->b->ctx, p->key, op);
}

void rc_forget_sight(struct pass *p)
{
    p->sight_new = 0;
    p->b->first_sight(p->b->ctx, p->key, 0);
}

/* The record of the operation this pass began is on the VM now: this process has seen it. */
static void stored_sight(struct pass *p)
{
    if (p->sight_new)
        p->b->first_sight(p->b->ctx, p->key, p->sight_new);
    p->sight_new = 0;
}

bool rc_store(struct pass *p)
{
    char buf[HV_RECORD_MAX];
    struct hv_err err = {0};
    p->after.found = false; /* a read from before this write no longer shows the VM */
    hv_engine_check(p->rec.phase != HV_PH_FAILED || p->rec.message[0], "failed implies a message");
    snprintf(p->rec.owner, sizeof(p->rec.owner), "%s", p->b->owner);
    /* (a record for other hardware than the pass's, an older operation's Failure whose starts
     * it carries on, keeps the settings it was recorded under) */
    if (hv_hw_equal(&p->rec.desired, p->desired))
        rc_policy_of(p->s, p->rec.policy, sizeof(p->rec.policy));
    p->rec.ref = *p->ref; /* a restarted process finds it by this name (scan.c) */
    if (!hv_oprecord_write(&p->rec, buf, sizeof(buf)) ||
        p->be->ops->write_record(p->be, p->ref, p->on_vm_known ? p->on_vm : NULL, buf, &err) !=
            HV_OK) {
        rc_log_err(p, "write-record", &err);
        p->store_no_answer = hv_err_classify(err.code) == HV_EC_NO_ANSWER;
        /* an outage (item 10), or a lost race: another writer changed the record since this
         * pass read it (e.g. another replica began the same operation at the same moment:
         * the step that would follow is not sent, the next look sees that writer's record),
         * within the bound */
        if (rc_wait_for_hypervisor(p, HV_EK_RECORD, &err))
            return false;
        char m[300];
        snprintf(m, sizeof(m), HV_MSG("cannot store the operation record on the VM: %s"),
                 hv_errcode_message(err.code));
        rc_answer(p->out, true, 0, m);
        return false;
    }
    hv_metrics_record_write();
    stored_sight(p);
    memcpy(p->on_vm, buf, strlen(buf) + 1);
    p->on_vm_known = true;
    p->b->lost_race_since(p->b->ctx, p->key, p->now, false); /* a run of lost races ends */
    /* (the starts stored are true: none untaken is counted any longer) */
    p->b->starts_untaken(p->b->ctx, p->key, p->rec.started_at, -1);
    p->vm_cycle = p->rec.cold && p->rec.phase >= HV_PH_SHUTDOWN && p->rec.phase <= HV_PH_POWER_ON;
    return true;
}

/* Sticky failure: recorded on the VM so every later call for this desired spec answers the
 * same message and takes no step. why is its reason code (what metrics count; the message is
 * for people and never parsed). */
bool rc_fail_sticky(struct pass *p, enum hv_failure_reason why, const char *msg)
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
    bool stored = rc_store(p);
    if (stored)
        rc_answer_sticky(p->out, msg);
    hv_log(HV_LOG_WARN, "operation-failed", "vm", p->key, "message", msg, (char *)NULL);
    return stored;
}

/* Best-effort start of a VM an operation is giving up on (failed steps, failure after a
 * late shutdown): no retry count; the error only goes to the log. An accepted start counts in
 * the record's starts (stored by the caller). */
bool rc_power_on_anyway(struct pass *p)
{
    struct hv_step on = {.kind = HV_STEP_POWER_ON,
                         .desired = *p->desired,
                         .timeout_ms = p->b->cfg->step_timeout_s * 1000};
    struct hv_err err = {0};
    if (p->be->ops->act(p->be, p->ref, &on, &err) != HV_OK) {
        rc_log_err(p, "power-on while giving up", &err);
        p->left_off = true;
        return false;
    }
    p->rec.starts++;
    return true;
}

/* The configuration from before the operation, for the fields it changes; false when the
 * record does not hold one (a record from an older version). */
bool rc_previous_config(const struct hv_oprecord *r, struct hv_hw *out)
{
    out->memory_mib = r->desired.memory_mib >= 0 ? r->prev.memory_mib : -1;
    out->cpus = r->desired.cpus >= 0 ? r->prev.cpus : -1;
    out->cores_per_socket = r->desired.cores_per_socket >= 0 ? r->prev.cores_per_socket : -1;
    out->disk_mib = -1; /* disks only grow: a rollback leaves them as they are */
    return (out->memory_mib > 0 || out->cpus > 0 || out->cores_per_socket > 0) &&
           out->memory_mib != 0 && out->cpus != 0 && out->cores_per_socket != 0;
}

/* The VM did not start with the new configuration: put the previous one back and start it
 * as it was. Errors go to the log; the outcome goes into the sticky message (see
 * rollback_note), and a later pass that finds the VM still off tries again. */
static enum rb_outcome roll_back(struct pass *p)
{
    struct hv_hw prev;
    if (!rc_previous_config(&p->rec, &prev))
        return RB_RESTORE_FAILED;
    struct hv_err err = {0};
    int64_t tmo = p->b->cfg->step_timeout_s * 1000;
    if (!rc_matches(&p->obs.config, &prev)) {
        struct hv_step rc = {.kind = HV_STEP_RECONFIGURE, .desired = prev, .timeout_ms = tmo};
        if (p->be->ops->act(p->be, p->ref, &rc, &err) != HV_OK) {
            rc_log_err(p, "reconfigure while rolling back", &err);
            /* never leave a VM off that can run: start it as it is (what kept the new
             * configuration from starting may have passed, e.g. the host's free memory) */
            struct hv_step as_is = {
                .kind = HV_STEP_POWER_ON, .desired = *p->desired, .timeout_ms = tmo};
            if (p->be->ops->act(p->be, p->ref, &as_is, &err) == HV_OK) {
                p->rec.starts++;
                return RB_STARTED_AS_IS;
            }
            rc_log_err(p, "power-on as it is while rolling back", &err);
            p->left_off = true;
            return RB_RESTORE_FAILED;
        }
    }
    struct hv_step on = {.kind = HV_STEP_POWER_ON, .desired = prev, .timeout_ms = tmo};
    if (p->be->ops->act(p->be, p->ref, &on, &err) != HV_OK) {
        rc_log_err(p, "power-on while rolling back", &err);
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
    if (!rc_previous_config(r, &prev))
        memset(&prev, 0xff, sizeof(prev)); /* not kept: "no hardware fields" */
    rc_describe(was, sizeof(was), &prev);
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
static void rc_fail_rolled_back(struct pass *p, enum hv_failure_reason why, const char *cause)
{
    char m[sizeof(p->rec.message)], note[400];
    p->rec.rollback = true;
    rollback_note(note, sizeof(note), &p->rec, roll_back(p));
    snprintf(m, sizeof(m), "%s; %s", cause, note);
    rc_fail_sticky(p, why, m);
}

/* The rolled-back Failure's message ends with the note of another outcome than now: it says
 * now's instead. True when it changed. */
static bool note_follows(struct pass *p, enum rb_outcome now)
{
    char note[400];
    size_t len = strlen(p->rec.message);
    for (int o = 0; o < RB_COUNT; o++) {
        rollback_note(note, sizeof(note), &p->rec, (enum rb_outcome)o);
        size_t n = strlen(note);
        if ((enum rb_outcome)o == now || n > len || strcmp(p->rec.message + len - n, note))
            continue;
        rollback_note(note, sizeof(note), &p->rec, now);
        p->rec.message[len - n] = '\0';
        char m[sizeof(p->rec.message)];
        snprintf(m, sizeof(m), "%s%s", p->rec.message, note);
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        return true;
    }
    return false;
}

/* A later pass found the rolled-back VM off and rolled back again: when that got further or
 * less far than the stored message says, the message follows what was done. */
void rc_roll_back_again(struct pass *p)
{
    enum rb_outcome now = roll_back(p);
    if (note_follows(p, now) || now == RB_STARTED)
        rc_store(p); /* the message and the count of starts; best effort */
}

/* A pass found the rolled-back VM running: the message says which configuration it runs
 * with, the previous one restored or the new one, as the VM shows it now. The pass that rolled
 * back stores what it did, but that write may fail (seed 212186: a second rollback restored
 * the previous configuration, its record write failed, and the passes after it answered "so
 * it was started with the new configuration" from the stored record): any later pass stores
 * it then. A configuration that is neither (the operator's) leaves the message as it is. */
void rc_rollback_note_follows_vm(struct pass *p)
{
    struct hv_hw prev;
    if (!rc_previous_config(&p->rec, &prev))
        return;
    enum rb_outcome now = rc_matches(&p->obs.config, &prev)             ? RB_STARTED
                          : rc_matches(&p->obs.config, &p->rec.desired) ? RB_STARTED_AS_IS
                                                                        : RB_COUNT;
    if (now != RB_COUNT && note_follows(p, now))
        rc_store(p); /* best effort: the next pass tries again */
}

/* A start not taken is not counted: the record stored with the step counts it, until a later
 * write of this process stores the count taken back (step_failed's may fail, or not come: an
 * outage waits). Until then a pass that reads the record takes it back (starts_untaken): a VM
 * whose starts never reached it did not "not stay on" (seeds 39323, 219558). One that did not
 * answer in time may have been started: counted. */
static void start_not_taken(struct pass *p, const struct hv_err *err)
{
    p->rec.starts--;
    if (hv_err_classify(err->code) != HV_EC_NO_ANSWER)
        p->b->starts_untaken(p->b->ctx, p->key, p->rec.started_at, 1);
}

/* A step was refused: counted (attempts), retried on the next pass, or after
 * max_step_attempts a sticky Failure (a start with the new configuration rolled back first; a
 * VM off started as it is). */
static void step_failed(struct pass *p, enum hv_step_kind kind, bool live, const struct hv_err *err)
{
    memset(&p->after, 0, sizeof(p->after));
    rc_log_err(p, step_name(kind), err);
    if (kind == HV_STEP_POWER_ON)
        start_not_taken(p, err);
    /* The hypervisor (or what stands before it: KubeVirt's admission webhook, an API server
     * answering 5xx) could not be reached: not a refusal of the step. In progress within the
     * outage bound (rc_wait_for_hypervisor, as for a look), and not counted against the
     * step's tries: the next pass sends it again (a cold step's record says it was sent, so
     * this process forgets it has seen the operation, as below). Any other class is a try
     * (errclass.h: a step that did not answer in time may have been taken). */
    bool down_step = (kind == HV_STEP_SHUTDOWN || kind == HV_STEP_POWER_OFF) && p->rec.cold;
    /* Another process's shutdown or power-off of this operation that this pass sent again
     * (a replica's, recorded with no failed try, within the time it may still take the VM
     * down): the record this try rewrote no longer shows it, and this try's failure does not
     * undo it. Remembered as a try that may have been taken, as one of this process's
     * previous life is (below), so the next pass does not take the step for one never sent
     * and give the slot back while it may land (held-out seeds 2641376, 2577294: the other
     * replica's shutdown landed beside another VM's cycle of the host). */
    if (down_step && p->other_down_at)
        p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, p->other_down_at);
    if (rc_wait_for_hypervisor(p, HV_EK_STEP, err)) {
        /* This try did not reach the hypervisor, but the previous life's send of the step
         * this pass found (record_down) may have: the record this try rewrote no longer shows
         * it and the sight is forgotten below, so it is remembered as a try that may have been
         * taken, as after a refused try (previous_step_outlives_refused_try; held-out seed
         * 3178431: the next pass, for the rollout's next state, took it for a step never
         * sent, went on live and gave the slot back, and another VM's cycle began as it
         * landed) */
        if (down_step && p->record_down_at)
            p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, p->record_down_at);
        if (!live)
            rc_forget_sight(p);
        return;
    }
    p->rec.attempts++;
    p->rec.tries_of = live ? kind : 0; /* (a live step's, recorded: "triesOf") */
    /* A shutdown or power-off try that got no answer may have been taken and may still take
     * the VM down, whatever the tries after it get: remembered for the operation (the
     * latest such try may land last). */
    if (down_step && hv_err_classify(err->code) == HV_EC_NO_ANSWER)
        p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, p->rec.step_at);
    char m[400];
    if (p->rec.attempts >= p->b->cfg->max_step_attempts) {
        snprintf(m, sizeof(m), HV_MSG("step %s failed %d times: %s"), step_name(kind),
                 p->rec.attempts, hv_errcode_message(err->code));
        struct hv_hw prev;
        if (kind == HV_STEP_POWER_ON && p->rec.cold && rc_previous_config(&p->rec, &prev)) {
            /* It does not start with the new configuration: back to the one it ran with. */
            char m2[sizeof(m) + 200];
            snprintf(m2, sizeof(m2), HV_MSG("the VM could not start with %s (%s)"), p->what, m);
            rc_fail_rolled_back(p, HV_FAIL_START_FAILED, m2);
            return;
        }
        if (p->obs.power == HV_POWER_OFF && kind != HV_STEP_POWER_ON) {
            rc_power_on_anyway(p); /* never leave a VM off: start it as it is */
        }
        /* A shutdown or power-off of this operation that may have been taken (a try of this
         * life that got no answer, remembered above) may still take the VM down: the Failure
         * comes upon the latest one (downAt), so its slot stays while it may land, and the VM
         * is started again if it does. Its last try (seed 24075: the slot went back, another
         * VM of the host went down, and the shutdown landed beside it), or an earlier one,
         * whatever the last try's error (seed 505485: the first shutdown's answer was lost,
         * the two tries after it were refused, "another task is changing the VM"; the guest
         * shut down 8 s after the Failure and stayed off outside the caps). */
        int64_t unanswered =
            down_step ? p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, 0) : 0;
        /* ... and so may one of this process's previous life that this pass found sent and
         * tried again: this life's refused try does not undo it (seed 301935: the previous
         * life's shutdown was taken, its answer lost; the new life's try was refused, the
         * operation failed without downAt, the shutdown landed and the VM stayed off outside
         * the caps while other VMs of its host went down) */
        int64_t previous = down_step ? p->record_down_at : 0;
        p->down_at = unanswered > previous ? unanswered : previous;
        rc_fail_sticky(p, HV_FAIL_STEP_FAILED, m);
        p->down_at = 0;
        return;
    }
    /* A try before the last: a shutdown or power-off of this process's previous life that
     * this pass found sent and tried again (previous_step_outlives_refused_try) is remembered
     * as a try that may have been taken, as one with no answer is: this life's refused try
     * does not undo it, and the record this try rewrote (its attempts, its stepAt) no longer
     * shows it, so the next pass does not take the step for one never sent and wait for a
     * slot within the caps as for a new cycle (held-out seed 1415072: the slot went back and
     * another VM of the host went down while that shutdown could still land). */
    bool previous_step_outlives_refused_try = down_step && p->record_down_at;
    if (previous_step_outlives_refused_try)
        p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, p->record_down_at);
    if (rc_store(p)) {
        snprintf(m, sizeof(m), HV_MSG("in progress: retrying %s (%s)"), step_name(kind),
                 hv_errcode_message(err->code));
        rc_answer(p->out, false, RETRY_COLD, m);
    } else if (!live) {
        /* The record still says the step was sent (stored before it, attempts 0): this
         * process forgets it has seen the operation, so its next pass sends the step again
         * as for a record of a process that is gone, instead of waiting for its effect. */
        rc_forget_sight(p);
    }
}

/* The step sent to the hypervisor (the failpoints around it, its time in the metrics, its
 * log line): the backend's answer. */
static int send_step(struct pass *p, const struct hv_step *st, struct hv_err *err)
{
    char fp[64];
    struct timespec t0, t1;
    snprintf(fp, sizeof(fp), "before:%s", step_name(st->kind));
    hv_failpoint(fp);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = p->be->ops->act(p->be, p->ref, st, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    snprintf(fp, sizeof(fp), "after:%s", step_name(st->kind));
    hv_failpoint(fp);
    hv_metrics_step(step_name(st->kind),
                    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    hv_log(HV_LOG_INFO, "step", "vm", p->key, "step", step_name(st->kind), "result",
           rc == HV_OK ? "accepted" : "error", (char *)NULL);
    return rc;
}

/* Record the phase, then act. Returns true when the step was accepted. */
bool rc_step(struct pass *p, enum hv_phase phase, enum hv_step_kind kind, const char *method)
{
    bool live =
        kind == HV_STEP_LIVE_MEMORY || kind == HV_STEP_LIVE_CPUS || kind == HV_STEP_LIVE_DISK;
    /* A step's tries are its own. The live steps share the phase: tries recorded of another
     * live step are over (that step shows now, e.g. one that did not answer in time but was
     * taken; the pass reached this one), so this one does not fail with tries it never had
     * (seeds 204763, 209763: live-disk failed "3 times" after one live-memory try and two of
     * its own). Records without triesOf keep their tries. */
    enum hv_phase was = p->rec.phase;
    if (was != phase || (live && p->rec.tries_of && p->rec.tries_of != kind))
        p->rec.attempts = 0;
    /* (a step taken over, if any, is past: this one is the operation's) A reconfigure or a
     * power-on is a power cycle's step: the operation is cold from then on. A live one whose
     * VM someone else powered off goes on as a cycle (the guest verified as after one, a VM
     * started by someone else before it was reconfigured cycled again), never with a live
     * step after it: the phase table has none after reconfigure or power-on. */
    bool cold = p->rec.cold || kind == HV_STEP_RECONFIGURE || kind == HV_STEP_POWER_ON;
    hv_rec_move(&p->rec, phase, cold, 0, "step");
    p->rec.step_at = p->now;
    if (kind == HV_STEP_POWER_ON)
        p->rec.starts++; /* recorded with the step; taken back below if it is refused */
    /* Live steps are idempotent against what the VM shows (absolute vCPU counts, DIMMs and
     * virtio-mem sized from the observed memory), so a crash after one needs no record of it:
     * the next pass sees the change. Power and configuration steps are recorded first. */
    if (!live && !rc_store(p)) {
        /* Not sent, and the record on the VM may say it was (a step sent again, whose write
         * failed): this process forgets it has seen the operation, so its next pass sends
         * the step instead of waiting for its effect (as in step_failed). A step of another
         * phase leaves the record as it was and the sight stays: the power-off after a
         * shutdown's window leaves "shutdown", a step this process has seen and which may land;
         * forgotten, the next pass would take it for a gone life's and free the slot (held-out
         * seed 4324148). A new cycle's first step has no sight stored yet to keep. */
        if (was == phase)
            rc_forget_sight(p);
        return false;
    }
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
        rc_policy_of(p->s, waiting.policy, sizeof(waiting.policy));
        waiting.ref = *p->ref;
        if (hv_oprecord_write(&waiting, carried, sizeof(carried)))
            st.record = carried;
    }
    bool stored = false;
    st.record_stored = &stored;
    memset(&p->after, 0, sizeof(p->after));
    st.seen_after = &p->after;
    struct hv_err err = {0};
    int rc = send_step(p, &st, &err);
    if (rc == HV_OK) {
        if (p->rec.attempts) {
            /* a retry got through: the next step of this phase (live memory, then live disk)
             * has tries of its own (seed 410); the record says it was sent. One carried with
             * the step is stored already: its wait-live phase counts no tries. */
            p->rec.attempts = 0;
            waiting.attempts = 0;
            if (!st.record && !rc_store(p)) {
                /* Taken, but the VM's record still counts the failed try before it: the next
                 * pass would take the step for one this process knows it did not send and
                 * give its slot back while it may land (held-out seed 2033481: another VM's
                 * cycle took it and went down beside this one). This process remembers it as
                 * sent, as a try with no answer: its slot stays while it may land. */
                if ((kind == HV_STEP_SHUTDOWN || kind == HV_STEP_POWER_OFF) && p->rec.cold)
                    p->b->unanswered_sent(p->b->ctx, p->key, p->rec.started_at, p->rec.step_at);
                return false;
            }
        }
        p->chain =
            kind == HV_STEP_SHUTDOWN || kind == HV_STEP_POWER_OFF || kind == HV_STEP_RECONFIGURE;
        if (st.record) {
            /* stored with the step, and the step is complete: verify at once */
            p->rec = waiting;
            if (stored) {
                hv_metrics_record_write();
                stored_sight(p);
                memcpy(p->on_vm, carried, strlen(carried) + 1);
                p->on_vm_known = true;
                p->b->lost_race_since(p->b->ctx, p->key, p->now, false);
            } else if (!rc_store(p)) /* the step had nothing to change: stored alone */
                return false;
            p->carried = p->chain = true;
        }
        return true;
    }
    if (st.record)
        p->on_vm_known = false; /* the record it carried may have landed with it */
    step_failed(p, kind, live, &err);
    return false;
}

/* The VM is off and about to be started with the new configuration: false (and a sticky
 * Failure, after a rollback when the record keeps the previous configuration) when it went
 * off again after every start so far. A VM that halts at once is not started for ever. */
bool rc_may_start(struct pass *p)
{
    if (p->rec.starts < MAX_STARTS + p->rec.recycles)
        return true;
    char m[300];
    struct hv_hw prev;
    snprintf(m, sizeof(m), HV_MSG("the VM did not stay on: it was started %d times with %s"),
             p->rec.starts, p->what);
    if (p->rec.cold && rc_previous_config(&p->rec, &prev)) {
        rc_fail_rolled_back(p, HV_FAIL_DID_NOT_STAY_ON, m);
    } else {
        char m2[sizeof(m) + 64];
        snprintf(m2, sizeof(m2), HV_MSG("%s; it is left off"), m);
        rc_fail_sticky(p, HV_FAIL_DID_NOT_STAY_ON, m2);
    }
    return false;
}
