/* compose.h: hvupdater as the one registered in-place extension that chains others (config
 * `downstream`), because CAPI v1.12 accepts only one per hook. CanUpdateMachine(Set): own plan,
 * then each downstream in order on the request patched so far, answered as one patch per
 * object; UpdateMachine: own engine, then each downstream, done when all are.
 * hv_compose owns its downstream clients; answers are owned by the caller. */
#ifndef HV_COMPOSE_H
#define HV_COMPOSE_H

#include "downstream.h"
#include "hooks.h"

struct hv_compose;

/* NULL when the list is empty (compose mode off). */
struct hv_compose *hv_compose_new(const struct hv_downstream_list *l);
/* Discovery against every downstream, at start, on a background thread (so a downstream
 * that is slow to answer does not delay serving); failures are logged and discovery runs
 * again on the next call that needs the downstream. hv_compose_free waits for it. */
void hv_compose_discover_all(struct hv_compose *c, int timeout_s);
void hv_compose_free(struct hv_compose *c);

/* For tests: replace the call to a downstream and the monotonic clock (NULL: the real
 * hv_downstream_call / hv_mono_ms). Call before serving. */
typedef enum hv_ds_result (*hv_compose_call_fn)(struct hv_downstream *d, enum hv_hook h,
                                                const hj *req, int64_t deadline_ms, hj **answer,
                                                char *why, size_t whylen);
void hv_compose_set_test_hooks(struct hv_compose *c, hv_compose_call_fn call,
                               int64_t (*now_ms)(void));

/* Answer CanUpdateMachine, CanUpdateMachineSet or UpdateMachine (envelope and settings
 * already checked, s holds the call's settings). */
hj *hv_compose_handle(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                      const struct hv_settings *s);

#endif
