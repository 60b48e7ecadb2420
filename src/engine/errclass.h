/* errclass.h: the one classification of a failed hypervisor call (issue 27): what each error
 * code (backends/backend.h enum hv_errcode) means for an operation, and what a reconcile pass
 * does with each class, by the kind of call that failed. Both pure tables in errclass.c,
 * read by every pass that handles a failed call (pass_say.c rc_wait_for_hypervisor, rc_store,
 * step_failed); docs/how-it-works.md "Failed calls" shows them. */
#ifndef HV_ERRCLASS_H
#define HV_ERRCLASS_H

#include "backend.h"

/* What a failed call says about the operation. */
enum hv_err_class {
    HV_EC_NONE = 0,  /* HV_OK: no error */
    HV_EC_OUTAGE,    /* the call did not reach the hypervisor: nothing was done */
    HV_EC_NO_ANSWER, /* the hypervisor did not answer in time: the call may have been done */
    HV_EC_LOST_RACE, /* another writer holds or changed the VM: nothing was done */
    HV_EC_REFUSAL,   /* refused for a reason trying again soon does not remove */
    HV_EC_COUNT
};

/* The class of code (a code out of range: a refusal, as HV_E_INTERNAL). */
enum hv_err_class hv_err_classify(enum hv_errcode code);

/* The kinds of call a pass makes. */
enum hv_err_call {
    HV_EK_LOOK = 0, /* observe, plan, the guest's view: nothing on the VM changes */
    HV_EK_RECORD,   /* the operation record's write, before a step (nothing taken yet) */
    HV_EK_STEP,     /* a step: live change, shutdown, power-off, reconfigure, power-on */
    HV_EK_COUNT
};

/* What a pass does with a failed call. */
enum hv_err_take {
    /* in progress, the call made again on the next pass (3 s) within the outage bound (the
     * operation's deadline; for a lost race, counted from the first of a run of lost races);
     * past it as the kind's fallback: a look's or a record write's Failure for this call, a
     * step's counted try */
    HV_TAKE_WAIT = 0,
    HV_TAKE_TRY,  /* a step's try: counted (attempts), the Failure after the configured tries */
    HV_TAKE_FAIL, /* the call's Failure: answered for this call, not recorded */
    HV_TAKE_COUNT
};

/* What a pass does with an error of class c in a call of kind k (HV_EC_NONE: nothing to
 * take, HV_TAKE_FAIL). */
enum hv_err_take hv_err_take(enum hv_err_class c, enum hv_err_call k);

#endif
