/* backend.h: the one contract between hvupdater's hook logic (src/) and a hypervisor.
 *
 * A backend observes a VM, says which of its hardware fields can change live, performs one
 * step at a time, and stores hvupdater's operation record on the VM itself. It never parses
 * a CAPI request and never decides policy: src/engine/engine.c does that from what backends
 * report.
 *
 * Ownership: a backend instance is created by its constructor (see the backend's own header)
 * and freed with ops->free. Every out-struct here is caller-owned plain data (fixed arrays,
 * no heap pointers) unless a comment says otherwise; strings are NUL-terminated.
 * Thread safety: every op may be called from several threads at once; the backend serialises
 * what it must. act() may block for seconds (it runs on an engine worker, never in a hook).
 */
#ifndef HV_BACKEND_H
#define HV_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* HV_MSG marks a stable, user-visible message template (CAPI shows these in conditions).
 * docs/messages.md lists every one; test/docs checks that none is missing. */
#ifndef HV_MSG
#define HV_MSG(s) s
#endif

#define HV_NAME_MAX   256
#define HV_MSG_MAX    512
#define HV_RECORD_MAX 4096

/* Stable error codes: each maps to one stable message in the engine's catalog. Raw
 * hypervisor text goes to logs only (hv_err.detail), never into a CAPI answer. */
enum hv_errcode {
    HV_OK = 0,
    HV_E_NOT_FOUND,     /* the VM does not exist on any host we serve */
    HV_E_UNREACHABLE,   /* host / vCenter cannot be reached or refused the session */
    HV_E_AUTH,          /* credentials refused */
    HV_E_INVALID_STATE, /* the VM's power state forbids the step */
    HV_E_BUSY,          /* another task / concurrent change holds the VM */
    HV_E_UNSUPPORTED,   /* the hypervisor cannot do this (no slots, above maximum, ...) */
    HV_E_RESOURCES,     /* host lacks memory/CPU */
    HV_E_TIMEOUT,       /* a call or a wait ran out of time */
    HV_E_TLS,           /* the server certificate does not match the pinned thumbprint / CA */
    HV_E_CREDENTIALS,   /* the credentials could not be read where they are kept (CAPV's
                           identity of the machine's cluster) */
    HV_E_INTERNAL,      /* anything else */
    HV_E_AMBIGUOUS,     /* the VM's name is on several hosts (detail: the hosts, comma-separated) */
    HV_E_INFRA_SECRET,  /* the infrastructure cluster's kubeconfig Secret (CAPK's
                           infraClusterSecretRef) cannot be read or used (detail: which object,
                           names only) */
};

struct hv_err {
    enum hv_errcode code;
    char detail[HV_MSG_MAX]; /* raw text for logs only; may hold hypervisor wording */
};

/* The Machine an UpdateMachine call was for, as the machine check (kubernetes.checkMachines)
 * read it from the API server, and the infra machine the call named: all "" when the call was
 * not checked. Backends ignore it; the operation record keeps it, so that a power cycle found
 * in flight with no call behind it is confirmed by the API server before it is carried on
 * (src/engine/scan.c). */
struct hv_machine_id {
    char ns[64];
    char name[254];
    char uid[64];
    char infra_api_version[128]; /* "group/version" */
    char infra_kind[64];
    char infra_name[254];
};

/* How a VM is found: filled by src/ from the kind profile's identity rule. */
struct hv_vm_ref {
    char server[HV_NAME_MAX]; /* libvirt URI or vCenter name; "" = any configured host */
    char uuid[64];            /* domain UUID / BIOS UUID; "" when unknown */
    char name[HV_NAME_MAX];   /* domain / VM name; fallback when uuid is "" */
    char disk[32]; /* which disk the disk size means, from the profile: libvirt target device
                      ("vda"); vSphere unit number ("" = the first virtual disk) */
    char cluster[HV_NAME_MAX]; /* "namespace/clusterName" of the Machine's Cluster ("" = not
                                  known): whose credentials a backend that reads them per
                                  cluster uses (vSphere identityFrom capv) */
    char thumbprint[100];      /* the request's certificate thumbprint of the server (CAPV
                                  VSphereMachine.spec.thumbprint); "" = none. Used only when the
                                  configured server entry pins none */
    /* the call's Machine when the machine check passed it (hv_hooks_own_update) */
    struct hv_machine_id machine;
};

enum hv_power { HV_POWER_UNKNOWN = 0, HV_POWER_ON, HV_POWER_OFF, HV_POWER_PAUSED };

/* Hardware values hvupdater can change. A field < 0 means "not set / not known"; so does a
 * disk size <= 0 (no disk is 0 MiB, and initialisers that predate the disk leave it 0). */
struct hv_hw {
    int64_t memory_mib;
    int32_t cpus;
    int32_t cores_per_socket;
    int64_t disk_mib; /* capacity of the disk hv_vm_ref.disk names */
};

static inline bool hv_disk_set(int64_t disk_mib)
{
    return disk_mib > 0;
}

/* The one reason a smaller disk is refused, in CanUpdate* and in UpdateMachine alike. */
#define HV_REASON_DISK_SHRINK HV_MSG("disks cannot shrink")
/* The largest disk size in MiB whose size in bytes fits the hypervisors' 64 bits; above it
 * the one reason, in ops->check (so CanUpdate*), the plans and the steps alike. */
#define HV_DISK_MAX_MIB    (INT64_MAX >> 20)
#define HV_REASON_DISK_MAX HV_MSG("disk size above what a hypervisor can express")
/* What the guest itself shows, independently of the hypervisor's view (libvirt: the memory
 * total from virtio-balloon statistics, online vCPUs from the QEMU guest agent). A zeroed
 * struct means "the guest cannot tell", so backends without a guest channel need do nothing. */
enum hv_guest_view {
    HV_GV_NONE = 0, /* no way to ask (no device or agent, VM off) */
    HV_GV_PENDING,  /* the VM has the device but the guest has not reported since it
                       started (booting, or no driver or agent in it) */
    HV_GV_SEEN,     /* the value below is what the guest reports */
};

struct hv_guest_obs {
    enum hv_guest_view mem_view, cpu_view;
    int64_t memory_mib; /* the guest kernel's memory total (MemTotal), when mem_view is SEEN */
    int32_t cpus;       /* vCPUs online in the guest, when cpu_view is SEEN */
    /* When the guest reported memory_mib (unix seconds; libvirt: the balloon statistics'
     * last-update): a report not newer than a step says nothing about that step. 0: read
     * from the guest just now. */
    int64_t mem_at;
};

/* What a backend sees of one VM right now. */
struct hv_vm_obs {
    bool found;
    enum hv_power power;
    /* the hypervisor's word for a state that is neither on nor off ("paused", "suspended");
       "" when it has none (a transition) */
    char power_state[24];
    struct hv_hw hw;            /* what the hypervisor reports as live (running) values */
    struct hv_hw config;        /* persistent/next-boot values (== hw when the backend has one) */
    char id[64];                /* hypervisor's run identity (libvirt domain ID, vSphere moref) */
    char host[HV_NAME_MAX];     /* the host/server the VM was found on */
    char record[HV_RECORD_MAX]; /* hvupdater's operation record stored on the VM ("" = none) */
    bool tools_running;         /* a guest agent / VMware Tools answers */
    bool can_shutdown;          /* the guest can be asked to shut down now (libvirt: ACPI or agent;
                                   vSphere: VMware Tools running) */
    bool busy;                  /* a hypervisor task is still running on the VM */
    struct hv_guest_obs guest;  /* the guest's own view; all zero = it cannot tell (filled by
                                   ops->observe_guest when the backend has it) */
    /* The VM's definition gives its guest no way to report its memory (libvirt: no virtio
     * balloon) or its vCPUs (no guest agent channel): known also while the VM is off, when the
     * guest itself cannot be asked. false: it may (also when the backend cannot tell). */
    bool no_mem_report, no_cpu_report;
    char no_power_cycle[HV_MSG_MAX]; /* non-empty: the VM must never be powered off, and why
                                        (stable text, e.g. a libvirt transient domain, which a
                                        power cycle would delete) */
    /* hw and config are assumed, not read: the VM as an operation in flight will leave it (the
     * probe plans a change from there too, src/engine/probe.c plan_worst_with). ops->plan,
     * which may re-read the VM, then takes the changing values (memory, vCPUs, cores per
     * socket, disk size: those of hw that are set) from obs, and everything else (limits,
     * devices, power, persistence) from its read. */
    bool assumed;
};

/* How one field can change on this VM now. */
enum hv_how { HV_HOW_NONE = 0, HV_HOW_LIVE, HV_HOW_COLD, HV_HOW_IMPOSSIBLE };

struct hv_field_plan {
    enum hv_how how;
    char method[64];         /* e.g. "virtio-mem", "dimm", "balloon", "hot-add", "vcpu hot-plug" */
    char reason[HV_MSG_MAX]; /* stable text: why cold/impossible (no raw hypervisor text) */
};

enum hv_field { HV_F_MEMORY = 0, HV_F_CPUS, HV_F_CORES, HV_F_DISK, HV_F_COUNT };

/* One step the engine asks a backend to take. */
enum hv_step_kind {
    HV_STEP_LIVE_MEMORY = 1, /* grow memory live by plan[HV_F_MEMORY].method */
    HV_STEP_LIVE_CPUS,       /* grow vCPUs live */
    HV_STEP_SHUTDOWN,        /* ask the guest to shut down (ACPI / agent / VMware Tools) */
    HV_STEP_POWER_OFF,       /* hard power-off */
    HV_STEP_RECONFIGURE,     /* VM is off: write desired hardware to its configuration (and
                                grow its disk) */
    HV_STEP_POWER_ON,        /* start the VM */
    HV_STEP_LIVE_DISK,       /* grow the disk of a running VM to desired.disk_mib */
};

struct hv_step {
    enum hv_step_kind kind;
    struct hv_hw desired; /* full desired hardware; fields < 0 stay as they are */
    char method[64];      /* the method chosen by plan() for live steps */
    int timeout_ms;       /* bound for the hypervisor call itself */
    /* Only with ops->record_in_step, only on live steps: the operation record to store in
     * the same change as the step (NULL: none). Stored only when the step succeeds, and
     * only if the step changes something: a step with nothing to do (e.g. the disk already
     * has that size) may succeed without storing it. */
    const char *record;
    /* Optional out (may be NULL): set true by a backend that stored record with the step.
     * The engine stores the record itself when the step succeeded and this stayed false. */
    bool *record_stored;
    /* Optional out (may be NULL): a backend that reads the VM in the same round trip that
     * sees its step finish fills this and sets seen_after->found; the engine then uses it as
     * the observation of its next round instead of observing again. Left untouched (found
     * false) when the backend has no such read or the step failed. */
    struct hv_vm_obs *seen_after;
};

struct hv_backend;

/* Something happened to a VM that may end a wait (libvirt: a device added or removed, a
 * memory device resized, the balloon changed, the domain started, stopped or was redefined,
 * its guest agent connected): look at it again. server is the host it happened on; uuid and
 * name are the VM's ("" when unknown). Called on a backend's own thread: must not block and
 * must not call back into the backend. */
typedef void (*hv_vm_changed_fn)(void *ctx, struct hv_backend *b, const char *server,
                                 const char *uuid, const char *name);

/* One VM that carries hvupdater's operation record, as ops->list_records finds it; or
 * (unlisted) one host whose VMs could not be listed. */
struct hv_vm_found {
    bool unlisted;          /* only host is set: its VMs could not be listed */
    struct hv_vm_ref ref;   /* how to find it again: server, uuid and name set */
    char host[HV_NAME_MAX]; /* the host it runs on (as hv_vm_obs.host says) */
    enum hv_power power;
    char record[HV_RECORD_MAX]; /* the record stored on it (never "") */
};
/* Called by ops->list_records for each such VM, on the caller's thread; vm is borrowed. */
typedef void (*hv_vm_found_fn)(void *ctx, const struct hv_vm_found *vm);

struct hv_backend_ops {
    const char *name; /* "libvirt", "vsphere", ... (matches the profile's backend) */
    /* true when this backend holds a connection (or config) able to reach ref's server. */
    bool (*serves)(struct hv_backend *b, const struct hv_vm_ref *ref);
    /* Find and observe the VM. A missing VM is obs->found = false with HV_OK. */
    int (*observe)(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                   struct hv_err *err);
    /* For each field that differs between obs and desired, say live, cold or impossible on
     * this VM now. Fields not differing are HV_HOW_NONE. May re-read the VM (it runs on a
     * worker or within a bounded hook-side probe), and must answer within a few seconds. */
    int (*plan)(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *obs,
                const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT],
                struct hv_err *err);
    /* Take one step; may block up to step->timeout_ms. Success means "accepted": the engine
     * verifies by observing afterwards. */
    int (*act)(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *step,
               struct hv_err *err);
    /* Store (record != "") or clear (record == "") the operation record on the VM. With
     * expected (not NULL) only while the VM still holds exactly that record ("" = none):
     * else HV_E_BUSY, nothing written (a lost race: another writer came between the caller's
     * read and this write). Atomic where the hypervisor can test and write in one request
     * (vSphere: changeVersion; KubeVirt: resourceVersion); else read, compare, write. */
    int (*write_record)(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                        const char *record, struct hv_err *err);
    void (*free)(struct hv_backend *b);
    /* The rules that hold whatever the VM's state: for each field of desired that is set
     * (>= 0), HV_HOW_IMPOSSIBLE with a stable reason when no VM of this backend can have that
     * value (not positive, above the platform's maximum, not a multiple the platform needs),
     * else HV_HOW_NONE. Pure: no I/O, no lock, any thread. CanUpdateMachine(Set) applies it
     * from a hook so it never covers what UpdateMachine refuses; plan() applies the same
     * function to the fields that differ, with the same reasons. NULL: no such rules. */
    void (*check)(struct hv_backend *b, const struct hv_hw *desired,
                  struct hv_field_plan plan[HV_F_COUNT]);
    /* true when act() stores step->record with a live step in one atomic change (vSphere:
     * one ReconfigVM_Task carries the hardware and the extraConfig record) and that change
     * is complete when act() returns (its task has finished). The engine then writes the
     * waiting record with the last live step instead of separately, and verifies at once. */
    bool record_in_step;
    /* Report changes of VMs to fn(ctx, ...) from now on; one watcher at a time, a new one
     * replaces the old. fn NULL stops the reports of the watcher ctx; when it returns, fn is
     * not running and will not be called for ctx again. Reports are hints only: the engine
     * still observes before it concludes anything, and works without them (a backend
     * without events leaves this NULL). */
    void (*watch)(struct hv_backend *b, hv_vm_changed_fn fn, void *ctx);
    /* Fill obs->guest, the guest's own view, of a VM observe() just saw running. Optional: a
     * backend without it fills obs->guest in observe() (or leaves it zero: cannot tell); a
     * backend with it leaves obs->guest zero in observe(), because asking the guest costs a
     * round trip into it, and the engine asks only when it needs the view (the VM shows the
     * desired hardware). Fails like observe() when the VM cannot be read. */
    int (*observe_guest)(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                         struct hv_err *err);
    /* Call fn(ctx, vm) for every VM on every configured host or server that carries an
     * operation record of hvupdater (any phase: the engine decides which to carry on). A
     * restarted process finds with it the power cycles its previous life left in flight, which
     * no call may ever reach again. HV_OK when every host answered; else the first host's
     * error, after the VMs of the hosts that did answer were reported and each host that did
     * not was reported as unlisted. Optional (NULL: the
     * engine learns of such VMs only from calls). May block for seconds (engine worker). */
    int (*list_records)(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err);
};

struct hv_backend {
    const struct hv_backend_ops *ops;
    void *priv; /* backend-owned state */
};

#endif
