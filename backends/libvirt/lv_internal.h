/* lv_internal.h: private declarations shared by the files of the libvirt backend (and its
 * tests). Nothing in src/ includes it. Structures are plain data owned by whoever declared
 * them; functions say when they return memory the caller frees (always with free()).
 * Memory sizes inside the backend are KiB (libvirt's unit); the contract speaks MiB.
 */
#ifndef HV_LV_INTERNAL_H
#define HV_LV_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "backend.h"
#include "libvirt_backend.h"

#define LV_NS_URI         "https://hvupdater.dev/xmlns/operation/1"
#define LV_NS_KEY         "hvupdater"
#define LV_RECORD_ELEM    "operation"
#define LV_DIMM_ALIGN_MIB 128 /* DIMM sizes: Linux x86-64 memory section size */
#define LV_MAX_MEMDEVS    32
#define LV_MAX_CELLS      16
#define LV_MAX_VCPUS      4096
/* libvirt keeps memory sizes in bytes within a long long (virMemoryMaxValue: LLONG_MAX
 * bytes on 64-bit hosts): the largest whole MiB a domain definition can hold */
#define LV_MAX_MEMORY_MIB   8796093022207LL
#define LV_R_TRANSIENT      HV_MSG("transient domain: a power cycle would delete it")
#define LV_BALLOON_PERIOD_S 2 /* balloon statistics period hvupdater sets when there is none */

/* ---- connections and fleet (lv_conn.c) ---- */

struct lv_lasterr;

/* One virConnectOpen running on its own thread (lv_conn.c). */
struct lv_opener;

#define LV_MAX_OPENERS 4 /* connection attempts in flight per host, stuck ones included */
#define LV_EV_IDS      7 /* domain event kinds hvupdater listens to (lv_conn.c) */
/* Connections per host: libvirtd runs at most max_client_requests (5) calls of one client at
 * once, and max_workers (20) calls in all; one connection carried every worker's calls, and a
 * slow one (a guest agent's answer, a QEMU monitor of a loaded guest) held the others back.
 * Another connection opens when each open one carries LV_LANE_USERS callers; four reach
 * libvirtd's 20 (its defaults, libvirtd.conf). */
#define LV_LANES      4
#define LV_LANE_USERS 5

struct lv_backend;
/* Where a host's domain events go (lv_conn.c): outlives the host until libvirt drops the
 * last callback that points to it. */
struct lv_ev_sink;

struct lv_host {
    struct lv_ev_sink *sink; /* this host's, shared with its event callbacks */
    char *uri;               /* owned */
    bool remote;             /* a transport ("+") or host part: keepalive applies */
    pthread_mutex_t mu;      /* guards lane[] and opening[]; never held while libvirt connects */
    /* lane[0] is the host's connection (domain events listen on it): NULL until first use or
     * after a reset; the others open on demand while it is open. Each holds one reference;
     * users counts the references lv_host_get handed out on it and not yet put back. */
    struct {
        virConnectPtr conn;
        int users;
    } lane[LV_LANES];
    struct lv_opener *opening[LV_MAX_OPENERS]; /* attempts not yet reaped, oldest first */
    int n_opening;
    bool tried;            /* a connection was ever attempted (under mu) */
    int ev_ids[LV_EV_IDS]; /* domain event callbacks registered on lane[0] */
    int n_ev;
};

struct lv_cache_ent {
    char key[HV_NAME_MAX + 8]; /* uuid (lower case) or "name:" + name */
    size_t host;               /* index into lv_backend.hosts */
};

struct lv_backend {
    struct hv_backend pub; /* pub.priv points back to this struct */
    struct lv_host *hosts;
    size_t n_hosts;
    int ka_interval, ka_count, call_timeout_ms;
    int connect_timeout_ms; /* a caller waits this long for a connection to open */
    bool evloop;            /* holds a reference on the shared event loop thread */
    /* who hears of domain events (ops->watch); watch_mu is held while fn runs */
    pthread_mutex_t watch_mu;
    hv_vm_changed_fn watch_fn;
    void *watch_ctx;
    pthread_mutex_t cache_mu;
    struct lv_cache_ent *cache; /* owned, n_cache entries */
    size_t n_cache;
};

/* A domain found on one host: owns dom and one reference on conn; lv_dom_release drops both. */
struct lv_dom {
    struct lv_backend *be;
    struct lv_host *host; /* borrowed from be */
    virConnectPtr conn;
    virDomainPtr dom;
    bool dead;    /* a call failed because the connection died (it has been reset) */
    bool mutated; /* a mutating call was issued: do not retry the operation */
};

int lv_fleet_init(struct lv_backend *be, const struct hv_libvirt_opts *o, char *err, size_t errlen);
void lv_fleet_free(struct lv_backend *be);
/* ops->watch: domain events of every host reach fn(ctx, ...) from now on. */
void lv_watch(struct hv_backend *b, hv_vm_changed_fn fn, void *ctx);
bool lv_uri_is_remote(const char *uri);
/* Find ref on the fleet. HV_OK with d->dom == NULL: missing on every host. */
int lv_find(struct lv_backend *be, const struct hv_vm_ref *ref, struct lv_dom *d,
            struct hv_err *err);
void lv_dom_release(struct lv_dom *d);
/* Run fn on the domain ref names. HV_OK with *found = false when it is missing everywhere.
 * When fn fails on a dead connection before any mutating call (d->mutated), the connection is
 * reopened and the whole lookup + fn retried once. */
typedef int (*lv_body_fn)(struct lv_dom *d, void *arg, struct hv_err *err);
int lv_with_dom(struct lv_backend *be, const struct hv_vm_ref *ref, lv_body_fn fn, void *arg,
                bool *found, struct hv_err *err);
/* lv_with_dom for bodies that are safe to repeat (reads, the record write): when the domain
 * starts or stops between their calls (HV_E_INVALID_STATE), run them again, up to 3 times. */
int lv_with_dom_settled(struct lv_backend *be, const struct hv_vm_ref *ref, lv_body_fn fn,
                        void *arg, bool *found, struct hv_err *err);
bool lv_serves(struct hv_backend *b, const struct hv_vm_ref *ref);
/* ops->list_records (lv_conn.c). */
int lv_list_records(struct hv_backend *b, hv_vm_found_fn fn, void *ctx, struct hv_err *err);
/* Record the last libvirt error of this thread into err (what = the call that failed), and
 * reset d's host connection when the failure shows a dead connection. Returns err->code. */
int lv_fail(struct lv_dom *d, const char *what, struct hv_err *err);
/* The same for an error captured already. */
int lv_fail_err(struct lv_dom *d, const struct lv_lasterr *e, const char *what, struct hv_err *err);

/* ---- errors (lv_error.c) ---- */

struct lv_lasterr {
    int code;   /* virErrorNumber, 0 when none */
    int domain; /* virErrorDomain */
    char msg[HV_MSG_MAX];
};

void lv_error_init(void);                    /* install the quiet error handler (once) */
void lv_error_capture(struct lv_lasterr *e); /* this thread's last libvirt error */
enum hv_errcode lv_error_map(int code, int domain, const char *msg);
bool lv_error_is_dead_conn(const struct lv_lasterr *e);
/* err->code = code, err->detail = printf-style text. Returns code. */
/* Where a backend op reports its error: err, or *dummy when the caller passed none; either
 * way cleared to HV_OK. */
static inline struct hv_err *lv_err_start(struct hv_err *err, struct hv_err *dummy)
{
    if (!err)
        err = dummy;
    err->code = HV_OK;
    err->detail[0] = '\0';
    return err;
}
int lv_seterr(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Map e into err, detail "what: libvirt message (code N)". Returns err->code. */
int lv_seterr_virt(struct hv_err *err, const struct lv_lasterr *e, const char *what);

/* ---- domain XML (lv_xml.c) ---- */

enum lv_mem_model { LV_MEM_DIMM = 0, LV_MEM_VIRTIO_MEM, LV_MEM_OTHER };

struct lv_memdev {
    enum lv_mem_model model;
    long long size_kib;
    long long requested_kib; /* virtio-mem only, else -1 */
    long long current_kib;   /* virtio-mem live XML only, else -1 */
    long long block_kib;     /* virtio-mem only, else -1 */
    int node;                /* -1 when unset */
};

struct lv_cell {
    int id;
    long long mem_kib;
};

/* What the backend knows of one domain definition (live or persistent): the richer, private
 * observation plan() and act() decide from. Always re-read, never cached, so never stale. */
struct lv_dominfo {
    long long memory_kib;  /* <memory>: libvirt's total, counts memory device sizes */
    long long current_kib; /* <currentMemory> (balloon), = memory_kib when absent */
    long long max_kib;     /* <maxMemory>, -1 without */
    int slots;             /* <maxMemory slots=>, -1 without */
    int ncells;
    struct lv_cell cells[LV_MAX_CELLS];
    int nmems;
    struct lv_memdev mems[LV_MAX_MEMDEVS];
    int slots_used; /* DIMM-slot devices (dimm, nvdimm): virtio models sit on PCI */
    int vcpu_max, vcpu_current;
    int sockets, dies, cores, threads; /* -1 without <topology> */
    bool balloon;                      /* a memballoon other than model='none' */
    bool balloon_virtio;               /* ... of a virtio model (it can report statistics) */
    int balloon_period;                /* <stats period=> seconds, 0 when off */
    bool acpi;                         /* <features><acpi/> */
    bool agent_channel;                /* org.qemu.guest_agent.0 channel present */
    bool agent_connected;              /* ... and its state='connected' (live XML) */
    /* derived */
    long long initial_kib;   /* NUMA cells, else <memory> minus memory devices */
    long long plugged_kib;   /* initial + DIMMs/others + virtio-mem <current> (0 if absent) */
    long long effective_kib; /* what the guest has: plugged, capped by the balloon */
};

/* Parse libvirt domain XML (no network, no entity expansion). Returns 0, or -1 with why. */
int lv_xml_parse_domain(const char *xml, struct lv_dominfo *out, char *why, size_t whylen);
/* A size with a libvirt unit ("KiB" when unit is NULL or ""): KiB, or -1 when invalid. */
long long lv_xml_to_kib(const char *value, const char *unit);
/* libvirt cpuset syntax ("0-3,^2,5") into set[0..max): 0, or -1 when invalid. */
int lv_xml_parse_cpuset(const char *s, bool *set, int max);
/* A virtio-mem device of domain XML ready for virDomainUpdateDeviceFlags, <requested> set to
 * requested_kib and <current> dropped: the one whose address key ("bus:slot:function")
 * equals addr when addr is non-empty, else the index-th <memory> device. Its address key goes
 * to addr_out. NULL when there is no such virtio-mem device. Caller frees. */
char *lv_xml_vmem_device(const char *domxml, int index, const char *addr, long long requested_kib,
                         char *addr_out, size_t addr_len);
/* One <disk> of a domain, found by its target device. */
struct lv_disk {
    bool found;
    char type[16];               /* file, block, volume, network, ... */
    char device[16];             /* disk, cdrom, floppy, lun */
    char source[1024];           /* file path or block device ("" for volume/network) */
    char pool[128], volume[256]; /* type='volume' */
    bool readonly;
    long long capacity; /* bytes, from virDomainGetBlockInfo; -1 unknown */
};

/* The disk with target dev target in domain XML: 0 (out->found says whether there is one),
 * or -1 when the XML does not parse. Capacity is left -1. */
int lv_xml_disk(const char *xml, const char *target, struct lv_disk *out);
/* Text of the single element in a metadata snippet, entities decoded; caller frees. */
char *lv_xml_element_text(const char *xml);
/* The XML of the record element holding text, escaped; caller frees. */
char *lv_xml_record_element(const char *text);

/* ---- planning (lv_plan.c) ---- */

enum lv_mem_method { LV_MM_NONE = 0, LV_MM_VIRTIO_MEM, LV_MM_DIMM, LV_MM_BALLOON };

struct lv_mem_choice {
    enum lv_mem_method method;
    int dev;                 /* virtio-mem: index into lv_dominfo.mems */
    long long requested_kib; /* virtio-mem: new <requested> */
    long long dimm_kib;      /* dimm: size */
    int node;                /* dimm: NUMA node */
    long long balloon_kib;   /* balloon: new target */
    char reason[HV_MSG_MAX]; /* when method == LV_MM_NONE */
};

const char *lv_mem_method_name(enum lv_mem_method m);
long long lv_align_up(long long v, long long a);
bool lv_is_aligned(long long v, long long a);
/* How a running domain grows from li->effective_kib to want_kib live (want > effective). */
void lv_plan_memory(const struct lv_dominfo *li, long long want_kib, struct lv_mem_choice *c);
/* The rules that do not depend on the domain (ops->check): every set field of desired gets
 * HV_HOW_IMPOSSIBLE with a stable reason, or HV_HOW_NONE. */
void lv_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT]);
/* The contract's plan, from fresh facts: li = live definition, active = running or paused,
 * persistent = the domain has a definition that outlives its run (a transient one has not:
 * whatever needs a power cycle is impossible for it). Applies lv_check first. */
/* Take the domain as an operation in flight leaves it (hv_vm_obs.assumed) before planning. */
void lv_assume(struct lv_dominfo *li, const struct hv_hw *hw);
void lv_plan_compute(const struct lv_dominfo *li, bool active, bool persistent,
                     const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT]);
/* The fields of an hv_hw libvirt shows for a disk: MiB of dk's capacity, -1 when unknown. */
long long lv_disk_mib(const struct lv_disk *dk);
int lv_plan_op(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *obs,
               const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT],
               struct hv_err *err);

/* ---- observation (lv_observe.c) ---- */

/* Live XML (and state) of a found domain, parsed. *xml_out (optional) gets the raw text. */
int lv_read_live(struct lv_dom *d, struct lv_dominfo *li, bool *active, char **xml_out,
                 struct hv_err *err);
int lv_observe_op(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                  struct hv_err *err);
int lv_observe_guest_op(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                        struct hv_err *err);
/* The contract's power state of a domain in libvirt state `state` (active: it has a process). */
enum hv_power lv_power_of(int state, bool active);

/* ---- steps (lv_live.c, lv_cold.c) ---- */

int lv_act_live_memory(struct lv_dom *d, const struct hv_step *s, struct hv_err *err);
int lv_act_live_cpus(struct lv_dom *d, const struct hv_step *s, struct hv_err *err);
int lv_act_cold(struct lv_dom *d, const struct hv_step *s, const char *disk_target,
                struct hv_err *err);
/* RECONFIGURE's pure part: rewrite inactive domain XML to desired. *out: caller frees. */
int lv_cold_rewrite_xml(const char *xml, const struct hv_hw *desired, char **out, char *why,
                        size_t whylen);

/* ---- disks (lv_disk.c) ---- */

/* Read the disk target names on a found domain (XML + virDomainGetBlockInfo). */
int lv_disk_read(struct lv_dom *d, const char *target, struct lv_disk *dk, struct hv_err *err);
/* Whether libvirt manages the disk's file as a storage volume (what an off domain needs). */
bool lv_disk_in_pool(struct lv_dom *d, const struct lv_disk *dk);
/* How the disk grows to want_mib: live (block resize) on a running domain, cold (volume
 * resize) on an off one whose disk is a storage volume, else impossible with a reason. */
void lv_plan_disk(const struct lv_disk *dk, bool active, bool in_pool, long long want_mib,
                  struct hv_field_plan *p);
/* HV_STEP_LIVE_DISK: virDomainBlockResize to step->desired.disk_mib. */
int lv_act_live_disk(struct lv_dom *d, const char *target, const struct hv_step *s,
                     struct hv_err *err);
/* The domain is off: grow the disk's storage volume to want_mib (nothing when it is that big). */
int lv_grow_volume(struct lv_dom *d, const char *target, long long want_mib, struct hv_err *err);

/* ---- operation record (lv_record.c) ---- */

int lv_record_read(struct lv_dom *d, bool active, char *out, size_t outlen, struct hv_err *err);
int lv_record_write_op(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                       const char *record, struct hv_err *err);

#endif
