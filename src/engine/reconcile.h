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

/* What a pass found of the VM's power cycle, for the caller to carry it on by itself. */
enum hv_follow {
    HV_FOLLOW_NONE,   /* no power cycle of the VM's operation in flight */
    HV_FOLLOW_CYCLE,  /* one in flight (with or without a slot: waiting for one, or the VM
                       * paused), or a step that may still take the VM down */
    HV_FOLLOW_OWN,    /* ... and the VM's record says this process carries it */
    HV_FOLLOW_PAUSED, /* ... its VM paused or suspended mid-cycle: the slot went back, and
                       * the shutdown or power-off it got may land once it runs again */
    HV_FOLLOW_RESUME, /* no cycle followed: the VM is paused under a step of this process that
                       * may land once it runs (pass.h parked); the backend's change report
                       * of its resume wakes a pass, no timer does */
    HV_FOLLOW_GONE,   /* the look found no such VM (deleted): as HV_FOLLOW_UNSEEN, but a
                       * parking (HV_FOLLOW_RESUME) ends, no resume will come */
    HV_FOLLOW_UNSEEN, /* the pass could not read the VM's record (the hypervisor did not
                       * answer): the caller keeps following a cycle the last pass that read
                       * it found this process carrying (HV_FOLLOW_OWN) */
};

/* One pass (up to four rounds of observe, decide, act) for the VM keyed key. called_at: a hook
 * call asked for it, at these unix seconds (b->unix_s's clock); 0 for the passes the engine
 * runs by itself to finish a power cycle, which continue this process's operation but never
 * begin one (the desired hardware they carry may be outdated). Says whether a power cycle of
 * the VM's operation is in flight after it, which the caller then carries on by itself. */
enum hv_follow hv_reconcile_key(const struct hv_books *b, const char *key, struct hv_backend *be,
                                const struct hv_vm_ref *ref, const struct hv_hw *desired,
                                const struct hv_settings *s, int64_t called_at,
                                struct hv_update_result *out);

/* Stable text for a backend error code (never the raw hypervisor text). */
const char *hv_errcode_message(enum hv_errcode c);

#endif
