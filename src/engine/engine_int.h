/* engine_int.h: what reconcile.c needs from engine.c (slots, config, identity), kept out of
 * the public engine.h. */
#ifndef HV_ENGINE_INT_H
#define HV_ENGINE_INT_H

#include "engine.h"
#include "oprecord.h"

#define HV_KEY_MAX 600

const struct hv_engine_cfg *hv_engine_cfg(const struct hv_engine *e);
/* "hostname:pid" of this process, written into records. */
const char *hv_engine_owner(const struct hv_engine *e);
/* Take a power-cycle slot for key on host (true if held now). force: take it even over the
 * caps (a VM already mid-cycle must finish). */
bool hv_engine_slot_acquire(struct hv_engine *e, const char *key, const char *host, bool force);
void hv_engine_slot_release(struct hv_engine *e, const char *key);
/* True the first time this process handles the operation that started at op_started_at on
 * this VM (e.g. after a restart, or an operation another replica began). */
bool hv_engine_first_sight(struct hv_engine *e, const char *key, int64_t op_started_at);
/* The VM's hypervisor was found unreachable at now (unreachable) or reachable: returns when
 * it was first found unreachable in the run that is going on (now when none is). */
int64_t hv_engine_unreachable_since(struct hv_engine *e, const char *key, int64_t now,
                                    bool unreachable);
void hv_engine_reconcile_key(struct hv_engine *e, const char *key, struct hv_backend *be,
                             const struct hv_vm_ref *ref, const struct hv_hw *desired,
                             const struct hv_settings *s, struct hv_update_result *out);

#endif
