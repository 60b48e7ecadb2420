/* hookname.h: the Runtime SDK hooks hvupdater answers, by number and by name. At the bottom
 * so the metrics and the downstream client can name a hook without the hooks room. */
#ifndef HV_HOOKNAME_H
#define HV_HOOKNAME_H

#define HV_HOOKS_API "hooks.runtime.cluster.x-k8s.io/v1alpha1"

enum hv_hook {
    HV_HOOK_DISCOVERY = 0,
    HV_HOOK_CAN_UPDATE_MACHINE,
    HV_HOOK_CAN_UPDATE_MACHINE_SET,
    HV_HOOK_UPDATE_MACHINE,
    HV_HOOK_COUNT
};

const char *hv_hook_name(enum hv_hook h);         /* "CanUpdateMachine" */
const char *hv_hook_handler_name(enum hv_hook h); /* "can-update-machine" ("" for discovery) */

#endif
