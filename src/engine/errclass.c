/* errclass.c: the one classification of a failed hypervisor call and what a pass does with
 * each class (errclass.h). Both are tables and pure: test_errclass checks every code and
 * every cell, docs/how-it-works.md "Failed calls" shows them. */
#include "errclass.h"

/* Every code in one row (no default: a new code fails the build until it is classed here). */
// clang-format off
enum hv_err_class hv_err_classify(enum hv_errcode code)
{
    switch (code) {
    case HV_OK:              return HV_EC_NONE;
    case HV_E_UNREACHABLE:   return HV_EC_OUTAGE;    /* host, vCenter or API server down */
    case HV_E_TIMEOUT:       return HV_EC_NO_ANSWER; /* hangs; the call may have landed */
    case HV_E_BUSY:          return HV_EC_LOST_RACE; /* another task or writer holds the VM */
    case HV_E_NOT_FOUND:     return HV_EC_REFUSAL;
    case HV_E_AUTH:          return HV_EC_REFUSAL;
    case HV_E_INVALID_STATE: return HV_EC_REFUSAL;
    case HV_E_UNSUPPORTED:   return HV_EC_REFUSAL;
    case HV_E_RESOURCES:     return HV_EC_REFUSAL;
    case HV_E_TLS:           return HV_EC_REFUSAL;
    case HV_E_CREDENTIALS:   return HV_EC_REFUSAL;
    case HV_E_INFRA_SECRET:  return HV_EC_REFUSAL;   /* CAPK's kubeconfig Secret, as CAPV's credentials */
    case HV_E_INTERNAL:      return HV_EC_REFUSAL;
    case HV_E_AMBIGUOUS:     return HV_EC_REFUSAL;
    }
    return HV_EC_REFUSAL;
}
// clang-format on

/* Rows: the class; columns: the kind of call. A step that did not answer in time may have
 * been taken, so it is a try; one that never reached the hypervisor is sent again. A lost
 * race on the record write stored nothing and took no step: the next pass reads the VM
 * again, within the same bound as an outage (a VM another writer changes on every pass is
 * not in progress for ever). */
// clang-format off
static const unsigned char takes[HV_EC_COUNT][HV_EK_COUNT] = {
    /*                     look           record          step */
    [HV_EC_NONE] =      { HV_TAKE_FAIL,  HV_TAKE_FAIL,   HV_TAKE_FAIL },
    [HV_EC_OUTAGE] =    { HV_TAKE_WAIT,  HV_TAKE_WAIT,   HV_TAKE_WAIT },
    [HV_EC_NO_ANSWER] = { HV_TAKE_WAIT,  HV_TAKE_WAIT,   HV_TAKE_TRY  },
    [HV_EC_LOST_RACE] = { HV_TAKE_FAIL,  HV_TAKE_WAIT,   HV_TAKE_TRY  },
    [HV_EC_REFUSAL] =   { HV_TAKE_FAIL,  HV_TAKE_FAIL,   HV_TAKE_TRY  },
};
// clang-format on

enum hv_err_take hv_err_take(enum hv_err_class c, enum hv_err_call k)
{
    if ((unsigned)c >= HV_EC_COUNT || (unsigned)k >= HV_EK_COUNT)
        return HV_TAKE_FAIL;
    return (enum hv_err_take)takes[c][k];
}
