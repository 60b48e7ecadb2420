/* hookname.c: the hook names (hookname.h). */
#include "hookname.h"

static const char *const hook_names[] = {"Discovery", "CanUpdateMachine", "CanUpdateMachineSet",
                                         "UpdateMachine"};
static const char *const handler_names[] = {"", "can-update-machine", "can-update-machine-set",
                                            "update-machine"};

const char *hv_hook_name(enum hv_hook h)
{
    return hook_names[h];
}

const char *hv_hook_handler_name(enum hv_hook h)
{
    return handler_names[h];
}
