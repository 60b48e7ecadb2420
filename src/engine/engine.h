/* engine.h: the UpdateMachine engine. Level-triggered: each reconcile observes the VM,
 * compares it with the desired hardware and the operation record stored on the VM, takes at
 * most the next step, and records what it did on the VM before doing it. Hook calls never
 * wait: they return the latest conclusion and queue a reconcile on a worker thread.
 * Ownership: the engine borrows the backends (the caller frees them after hv_engine_free). */
#ifndef HV_ENGINE_H
#define HV_ENGINE_H

#include "backend.h"
#include "hooks.h"
#include "profile.h"
#include "reconcile.h"
#include "settings.h"

struct hv_engine;

/* Default of hv_engine_cfg.max_entries (engine.maxEntries): VMs the engine keeps in hand. */
#define HV_ENGINE_MAX_ENTRIES 10000

void hv_engine_cfg_default(struct hv_engine_cfg *c);
struct hv_engine *hv_engine_new(const struct hv_engine_cfg *cfg, struct hv_backend *const *bes,
                                size_t n);
void hv_engine_free(struct hv_engine *e);

/* The backend with this name, or NULL. */
struct hv_backend *hv_engine_backend(struct hv_engine *e, const char *name);

/* hv_update_fn for the UpdateMachine hook: answers at once from what is known, and queues a
 * reconcile. ctx is the engine. */
void hv_engine_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                      const struct hv_hw *desired, const struct hv_settings *s,
                      struct hv_update_result *out);

/* One reconcile pass on the calling thread (the lab CLI and tests use it): observe, decide,
 * take at most one step, answer. */
void hv_engine_reconcile(struct hv_engine *e, struct hv_backend *be, const struct hv_vm_ref *ref,
                         const struct hv_hw *desired, const struct hv_settings *s,
                         struct hv_update_result *out);

/* hv_plan_hooks callbacks for CanUpdateMachine(Set); ctx is the engine. */
int hv_engine_available(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        char *why, size_t whylen);
int hv_engine_probe(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                    const struct hv_hw *desired, const struct hv_settings *s,
                    struct hv_field_plan plan[HV_F_COUNT], char *why, size_t whylen);

/* Driven engine only (cfg.drive): move the timed passes now due to the queue, then run up to
 * max queued passes on the calling thread, as the workers would. Returns the passes run;
 * *next_ms (may be NULL) receives the earliest timed pass still waiting (0: none). */
int hv_engine_run(struct hv_engine *e, int max, int64_t *next_ms);

/* Driven engine only: a pass of the VM named vm_name is queued, waiting for its turn (one
 * hv_engine_run left for later: the workers would run it at once). For the simulation's
 * judge. */
bool hv_engine_pass_waiting(struct hv_engine *e, const char *vm_name);

/* Driven engine only: when the timed pass of the VM named vm_name is due (engine
 * milliseconds; 0: none timed). For the simulation's judge. */
int64_t hv_engine_pass_timed(struct hv_engine *e, const char *vm_name);

/* A pass of the VM named vm_name is queued, running or asked for again: the engine may still
 * act on it (tests wait for this to end before they expect a quiet VM). */
bool hv_engine_pass_pending(struct hv_engine *e, const char *vm_name);

/* Entries held now, after evicting those idle for entry_idle_ms (tests, benchmarks). */
size_t hv_engine_entries(struct hv_engine *e);
/* The first scan has ended (or none runs): every VM it listed is known by its handle, and no
 * scan is listing hosts now (tests that count a hypervisor's calls). */
bool hv_engine_scanned(struct hv_engine *e);

/* Calls refused so far because the table held cfg.max_entries entries with something in
 * flight (tests, benchmarks; /metrics counts them as hvupdater_engine_entries_refused_total). */
uint64_t hv_engine_refused(struct hv_engine *e);

/* Passes queued so far because a backend reported a change of a VM with an operation in
 * flight (ops->watch), over the entries held now (tests, benchmarks). */
uint64_t hv_engine_woken(struct hv_engine *e);

/* For /metrics (hv_metrics_gauge_fn): VMs whose latest answer is in progress or that are
 * queued or being worked on, and power-cycle slots held, in this process. */
void hv_engine_gauges(void *engine, int *operations, int *power_cycles);

#endif
