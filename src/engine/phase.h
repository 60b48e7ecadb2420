/* phase.h: the one writer of an operation record's phase, cold and downAt (issue 27 step 3),
 * and the table of the moves it allows. */
#ifndef HV_PHASE_H
#define HV_PHASE_H

#include "oprecord.h"

#include <stdbool.h>
#include <stdint.h>

/* allowed[from][to]: a record in phase from may next be in phase to (the same operation; a
 * new operation's record starts from none, see hv_rec_clear). Shared with the simulation's
 * invariant 7-legal-transition and docs/how-it-works.md ("The phase table"). */
bool hv_phase_move_allowed(enum hv_phase from, enum hv_phase to);

/* Strict (the default in builds without NDEBUG, and what the simulation and the unit tests
 * set): a move outside the table aborts with its from, to and call site, and so does a failed
 * hv_engine_check. Otherwise it is logged, counted (hvupdater_engine_illegal_transitions_total,
 * hvupdater_engine_assertions_total) and carried out. */
void hv_phase_set_strict(bool on);

/* The only write of r->phase, r->cold and r->down_at in src/engine (besides reading a record
 * from its JSON): moves r to phase to with cold and down_at, checked against the table. why
 * names the move at its call site. */
void hv_rec_move_at(struct hv_oprecord *r, enum hv_phase to, bool cold, int64_t down_at,
                    const char *why, const char *file, int line);
#define hv_rec_move(r, to, cold, down_at, why)                                                     \
    hv_rec_move_at((r), (to), (cold), (down_at), (why), __FILE__, __LINE__)
/* Only the phase (cold and downAt kept). */
#define hv_rec_set_phase(r, to, why) hv_rec_move((r), (to), (r)->cold, (r)->down_at, (why))

/* An engine invariant checked where it must hold (issue 27 step 3: "a slot held implies a
 * cycle, a hazard or a VM left off", "failed implies a message"): ok false is a defect. Strict
 * (as for the table), it aborts naming what and the call site; otherwise it is logged
 * (engine-assertion) and counted (hvupdater_engine_assertions_total). */
void hv_engine_check_at(bool ok, const char *what, const char *file, int line);
#define hv_engine_check(ok, what) hv_engine_check_at((ok), (what), __FILE__, __LINE__)

/* downAt's two meanings, named by phase (the record on the VM keeps its one field, downAt):
 * taken over: in phase shutdown or power-off, that step is an older operation's, taken over
 * by this one, which needs no power cycle itself and sends none (when it was sent; 0: the
 * step is this operation's own). */
int64_t hv_rec_taken_over_at(const struct hv_oprecord *r);
/* failed upon: in phase failed, when a shutdown or power-off the Failure came upon in flight
 * was sent: the VM may still go down, and is started again once it is off (0: none). */
int64_t hv_rec_failed_upon_at(const struct hv_oprecord *r);

/* Whether the VM of a record in this state is in, or may still go into, a power cycle at
 * now (unix seconds): a shutdown, power-off, reconfigure or power-on step, or a Failure that
 * came upon a shutdown or power-off in flight, within the time that step may still land
 * (rc_may_land_until under the record's policy and step_timeout_s: a VM left paused under it
 * is not held for ever). The MachineHealthCheck hold reads it. */
bool hv_rec_in_power_cycle(const struct hv_oprecord *r, int step_timeout_s, int64_t now);

/* The settings a record's policy names ("IfNeeded/TrySoft/120/300/1800/IfAvailable", see
 * reconcile.c's rc_policy_of), the defaults for any it does not; false when it names none. */
struct hv_settings;
bool hv_policy_settings(const char *policy, struct hv_settings *s);

/* A new record (all zero: phase none, not cold, no downAt): a new operation begins. */
void hv_rec_clear(struct hv_oprecord *r);

#endif
