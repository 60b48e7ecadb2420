/* hooks.h: the Runtime SDK hooks as hvupdater answers them: decode a request (already parsed
 * JSON), check what the hook needs, plan or route to the engine, and write the response JSON.
 * No I/O here. Returned response text is malloc'd and owned by the caller. */
#ifndef HV_HOOKS_H
#define HV_HOOKS_H

#include "hookname.h"
#include "json.h"
#include "plan.h"
#include "profile.h"
#include "settings.h"

struct hv_update_result {
    bool failure;
    int retry_after_s; /* > 0 in progress, 0 done (ignored on failure) */
    /* in progress and only waiting for a change already made to show (on the hypervisor or
     * in the guest): nothing to act on, so the engine times its next look to end just before
     * the next call instead of right after this one */
    bool settling;
    /* a Failure for this call only (the VM could not be read, or not yet as asked): nothing
     * recorded on the VM; a sticky Failure (recorded, answered again) has it false */
    bool once;
    char message[1024];
};

/* UpdateMachine's engine entry point: must answer within milliseconds. */
typedef void (*hv_update_fn)(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                             const struct hv_hw *desired, const struct hv_settings *s,
                             struct hv_update_result *out);

struct hv_compose;
struct hv_hooks_ctx;
/* Compose mode's answer to CanUpdateMachine(Set) and UpdateMachine (compose.h's
 * hv_compose_handle): the hooks call composition through this, never by name. */
typedef hj *(*hv_chain_fn)(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                           const struct hv_settings *s);

/* A Warning worth an Event (kubernetes.events): obj is the object the call is about (the
 * request's desired Machine, or MachineSet for CanUpdateMachineSet), borrowed for the call;
 * reason is a fixed word (InvalidSettings, UpdateBlocked, UpdateFailed), message the answer's.
 * Called on the hook's thread after the answer is made: it must only queue, never block. */
typedef void (*hv_event_fn)(void *ctx, const hj *obj, const char *reason, const char *message);

/* UpdateMachine found the VM of the request's desired Machine (obj, borrowed for the call):
 * the profile's backend and the VM's reference (kubernetes.holdRemediation, kube/mhc.h).
 * Called on the hook's thread before the engine answers: it must only queue, never block. */
typedef void (*hv_machine_vm_fn)(void *ctx, const hj *machine, const char *backend,
                                 const struct hv_vm_ref *ref);

/* ---- machine check (kubernetes.checkMachines) ---- */
/* The management cluster's word on a hook call (kube/machinecheck.h, wired by cli): pass,
 * wait (the objects are being read: UpdateMachine answers in progress, CanUpdate* a retryable
 * Failure) or fail (Failure, nothing touched). On a pass *req_out may be a request to answer
 * instead of req (UpdateMachine: the API server's specs; freed by the caller), or NULL. msg
 * receives the message of wait and fail. Called on the hook's thread: never blocks. */
enum hv_gate { HV_GATE_PASS = 0, HV_GATE_WAIT, HV_GATE_FAIL };
typedef enum hv_gate (*hv_gate_fn)(void *ctx, enum hv_hook h, const hj *req, hj **req_out,
                                   char *msg, size_t msglen);
#define HV_GATE_RETRY_S 1 /* UpdateMachine's retryAfterSeconds while waiting */

struct hv_hooks_ctx {
    const struct hv_profiles *profiles;
    struct hv_settings defaults;
    const struct hv_plan_hooks *plan_hooks; /* may be NULL */
    hv_update_fn update;                    /* NULL: no backend configured */
    void *update_ctx;
    int timeout_s; /* advertised handler timeout */
    /* failurePolicy advertised for CanUpdateMachine and CanUpdateMachineSet: false "Fail"
     * (CAPI waits while hvupdater is unreachable), true "Ignore" (CAPI then replaces the
     * Machines). UpdateMachine is always "Fail": a started update must be finished. */
    bool can_update_ignore;
    /* The configured hosts, borrowed, for log lines only: a VM whose request names no host
     * is on the only one, when there is one. */
    const char *const *libvirt_uris;
    size_t n_libvirt_uris;
    const char *only_vcenter;   /* the vCenter's name when exactly one is configured */
    struct hv_compose *compose; /* NULL: no downstream extensions (compose.h) */
    hv_chain_fn chain;          /* answers when compose is set (hv_compose_handle) */
    hv_event_fn event;          /* NULL: no Events */
    void *event_ctx;
    hv_machine_vm_fn machine_vm; /* NULL: nobody asks which VM serves a Machine */
    void *machine_vm_ctx;
    /* NULL: no machine check (the request is taken as it is). Set: every UpdateMachine call
     * the engine is asked for passed it, and hv_hooks_own_update gives the engine the call's
     * Machine and infra machine (hv_vm_ref.machine) for the operation record. */
    hv_gate_fn gate;
    void *gate_ctx;
};

/* Answer one hook call. failure_out says whether the answer's status is Failure; msg (may be
 * NULL) receives the answer's message for logs. */
char *hv_hook_handle(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                     bool *failure_out, char *msg, size_t msglen, size_t *len_out);

/* What a hook call is about, for its log line: read from the request (no I/O). Empty strings
 * where the request does not say (discovery, a request too broken to tell). */
struct hv_hook_who {
    char machine[256]; /* namespace/name of the Machine (MachineSet for CanUpdateMachineSet) */
    char cluster[128]; /* spec.clusterName, else the cluster.x-k8s.io/cluster-name label */
    char infra[256];   /* Kind/name of the infra machine (template) */
    char vm[400];      /* "qemu:///system uuid 4c4c...", "vc1 uuid 4211...", "... name web-0" */
};

/* hv_hook_handle, also filling who (may be NULL). */
char *hv_hook_handle_who(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                         bool *failure_out, char *msg, size_t msglen, size_t *len_out,
                         struct hv_hook_who *who);
/* Pieces compose.c builds its answers from. */
hj *hv_hook_response(enum hv_hook h, bool failure, const char *message);
/* Put a JSON Patch (ops borrowed) as field {patchType: JSONPatch, patch: base64}; false (and
 * no field) when memory runs out. */
bool hv_hook_put_patch(hj *r, const char *field, const hj *ops);
/* Whether a change hvupdater covers under these settings may take the Machine down (a power
 * cycle can happen): CanUpdateMachine(Set)'s affectsAvailability, put with the patch. */
bool hv_affects_availability(const struct hv_settings *s);
void hv_hook_put_affects(hj *r, bool affects);
/* hvupdater's own coverage for CanUpdateMachine(Set): 0 with *c filled (free it), or -1 when
 * the request lacks an object the hook needs (the Failure message in buf). */
int hv_hooks_own_plan(const struct hv_hooks_ctx *ctx, enum hv_hook h, const hj *req,
                      const struct hv_settings *s, struct hv_coverage *c, char *buf, size_t cap);
/* hvupdater's own UpdateMachine answer; *no_profile says the infra kind is not hvupdater's
 * (then res is a Failure saying so). */
void hv_hooks_own_update(const struct hv_hooks_ctx *ctx, const hj *req, const struct hv_settings *s,
                         struct hv_update_result *res, bool *no_profile);

#endif
