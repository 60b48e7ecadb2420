/* phase.c: the one writer of an operation record's phase, cold and downAt, and the table of
 * legal moves (issue 27 step 3). The table is what the engine does (collected by running the
 * simulation over every seed of the trace oracle, then each cell reviewed against its call
 * sites in reconcile.c and docs/how-it-works.md); a move outside it is a defect. */
#include "phase.h"
#include "log.h"
#include "metrics.h"
#include "pass.h"
#include "settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NDEBUG
static bool strict = false;
#else
static bool strict = true;
#endif

void hv_phase_set_strict(bool on)
{
    strict = on;
}

/* Rows: from; columns: to (in enum order). A cell is 1 where reconcile.c makes that move,
 * as the record on the VM shows it (docs/how-it-works.md "The phase table" says where): a
 * direct move of one call site, or a pass that re-plans through an unstored none (a step
 * taken over that did not take the VM down goes on live; a live change past its timeout, or
 * a VM started by someone else before it was reconfigured, cycles again), or the live record
 * stored again after the wait-live one its last step carried (the step's answer was lost).
 * The simulation checks every pair of consecutive record writes against it too. */
// clang-format off
static const unsigned char allowed[HV_PH_COUNT][HV_PH_COUNT] = {
    /*                     none plan live wait shut poff reco pon  done fail */
    [HV_PH_NONE] =        { 1,   1,   1,   1,   1,   1,   1,   1,   1,   1 },
    [HV_PH_PLANNED] =     { 0,   0,   0,   0,   1,   1,   1,   1,   1,   1 },
    [HV_PH_LIVE] =        { 0,   0,   1,   1,   0,   0,   1,   1,   1,   1 },
    [HV_PH_WAIT_LIVE] =   { 1,   1,   1,   0,   1,   1,   1,   1,   1,   1 },
    [HV_PH_SHUTDOWN] =    { 1,   0,   1,   1,   1,   1,   1,   1,   0,   1 },
    [HV_PH_POWER_OFF] =   { 1,   0,   1,   1,   0,   1,   1,   1,   0,   1 },
    [HV_PH_RECONFIGURE] = { 1,   1,   0,   0,   1,   1,   1,   1,   1,   1 },
    [HV_PH_POWER_ON] =    { 1,   1,   0,   0,   1,   1,   1,   1,   1,   1 },
    [HV_PH_DONE] =        { 0,   0,   0,   0,   0,   0,   0,   0,   0,   0 },
    [HV_PH_FAILED] =      { 0,   0,   0,   0,   0,   0,   0,   0,   0,   1 },
};
// clang-format on

bool hv_phase_move_allowed(enum hv_phase from, enum hv_phase to)
{
    return from < HV_PH_COUNT && to < HV_PH_COUNT && allowed[from][to];
}

void hv_rec_move_at(struct hv_oprecord *r, enum hv_phase to, bool cold, int64_t down_at,
                    const char *why, const char *file, int line)
{
    enum hv_phase from = r->phase;
    if (!hv_phase_move_allowed(from, to)) {
        const char *base = strrchr(file, '/');
        char at[96];
        snprintf(at, sizeof(at), "%s:%d", base ? base + 1 : file, line);
        if (strict) {
            fprintf(stderr, "hvupdater: illegal phase move %s -> %s at %s (%s)\n",
                    hv_phase_name(from), hv_phase_name(to), at, why);
            abort();
        }
        hv_log(HV_LOG_ERROR, "illegal-phase-move", "from", hv_phase_name(from), "to",
               hv_phase_name(to), "at", at, "why", why, (char *)NULL);
        hv_metrics_illegal_transition();
    }
    r->phase = to;
    r->cold = cold;
    r->down_at = down_at;
    if (to != HV_PH_POWER_OFF)
        r->off_first = false; /* (a power-off's own mark: new_cycle sets it with the step) */
}

void hv_engine_check_at(bool ok, const char *what, const char *file, int line)
{
    if (ok)
        return;
    const char *base = strrchr(file, '/');
    char at[96];
    snprintf(at, sizeof(at), "%s:%d", base ? base + 1 : file, line);
    if (strict) {
        fprintf(stderr, "hvupdater: engine check failed at %s: %s\n", at, what);
        abort();
    }
    hv_log(HV_LOG_ERROR, "engine-assertion", "what", what, "at", at, (char *)NULL);
    hv_metrics_engine_assertion();
}

int64_t hv_rec_taken_over_at(const struct hv_oprecord *r)
{
    return r->phase == HV_PH_SHUTDOWN || r->phase == HV_PH_POWER_OFF ? r->down_at : 0;
}

int64_t hv_rec_failed_upon_at(const struct hv_oprecord *r)
{
    return r->phase == HV_PH_FAILED ? r->down_at : 0;
}

bool hv_policy_settings(const char *policy, struct hv_settings *s)
{
    char pc[32], pom[32], gc[32];
    int live, shut, dl;
    hv_settings_default(s);
    if (sscanf(policy, "%31[^/]/%31[^/]/%d/%d/%d/%31s", pc, pom, &live, &shut, &dl, gc) != 6)
        return false;
    bool ok = false;
    for (int k = HV_PC_IF_NEEDED; k <= HV_PC_NEVER; k++)
        if (!strcmp(pc, hv_power_cycle_name((enum hv_power_cycle)k)))
            s->power_cycle = (enum hv_power_cycle)k, ok = true;
    for (int k = HV_POM_TRY_SOFT; k <= HV_POM_HARD; k++)
        if (!strcmp(pom, hv_power_off_mode_name((enum hv_power_off_mode)k)))
            s->power_off_mode = (enum hv_power_off_mode)k;
    for (int k = HV_GC_IF_AVAILABLE; k <= HV_GC_OFF; k++)
        if (!strcmp(gc, hv_guest_check_name((enum hv_guest_check)k)))
            s->guest_check = (enum hv_guest_check)k;
    s->live_timeout_s = live;
    s->shutdown_timeout_s = shut;
    s->deadline_s = dl;
    return ok;
}

bool hv_rec_in_power_cycle(const struct hv_oprecord *r, int step_timeout_s, int64_t now)
{
    struct hv_settings s;
    switch (r->phase) {
    case HV_PH_SHUTDOWN:
    case HV_PH_POWER_OFF:
    case HV_PH_RECONFIGURE:
    case HV_PH_POWER_ON:
        return true;
    case HV_PH_FAILED:
        hv_policy_settings(r->policy, &s); /* (the defaults when it names none) */
        return hv_rec_failed_upon_at(r) != 0 &&
               now < rc_may_land_until(&s, step_timeout_s, hv_rec_failed_upon_at(r));
    default:
        return false;
    }
}

void hv_rec_clear(struct hv_oprecord *r)
{
    memset(r, 0, sizeof(*r));
}
