/* reconcile.h: one level-triggered pass of the UpdateMachine engine for one VM (reconcile.c),
 * and the bookkeeping it borrows from whoever runs it (the engine, engine.c) through struct
 * hv_books, so the pass never calls back into the engine by name. */
#ifndef HV_RECONCILE_H
#define HV_RECONCILE_H

#include "backend.h"
#include "books.h"
#include "hooks.h"
#include "judge.h"
#include "metrics.h"
#include "oprecord.h"

#include <stdbool.h>
#include <stdint.h>

/* One pass (up to four rounds of observe, decide, act) for the VM keyed key. called: a hook
 * call asked for it; false for the passes the engine runs by itself to finish a power cycle,
 * which continue this process's operation but never begin one (the desired hardware they
 * carry may be outdated). True when a power cycle of the VM's operation is in flight after
 * it (with or without a slot: waiting for one, or the VM paused), which the caller then
 * carries on by itself. */
bool hv_reconcile_key(const struct hv_books *b, const char *key, struct hv_backend *be,
                      const struct hv_vm_ref *ref, const struct hv_hw *desired,
                      const struct hv_settings *s, bool called, struct hv_update_result *out);

/* Stable text for a backend error code (never the raw hypervisor text). */
const char *hv_errcode_message(enum hv_errcode c);

#endif
