/* libvirt_backend.h: the libvirt/KVM backend's constructor, the only public entry point of
 * backends/libvirt/. The returned struct hv_backend implements backends/backend.h for a fleet
 * of libvirt hosts (one lazily opened, shared connection per URI); free it with ops->free.
 * hv_libvirt_new copies everything it needs from opts: the caller keeps ownership of it.
 *
 * Behaviour the engine can rely on (details in the .c files named in brackets):
 * - Identity [lv_conn.c]: ref->uuid when set (UUID lookup on every configured host, the host
 *   that answered is cached and re-checked on each use), else ref->name (first host that
 *   knows the name wins). ref->server narrows the search to that URI (exact string match).
 *   A VM missing on every host is found=false with HV_OK; when some host could not be asked,
 *   the answer is HV_E_UNREACHABLE instead (we cannot say the VM is gone).
 * - Observation [lv_observe.c, lv_xml.c]: hw.memory_mib = NUMA cells (or base memory) + DIMMs
 *   + virtio-mem <current> (never <requested>), capped by the balloon (<currentMemory>) on
 *   domains without virtio-mem; hw.cpus = live current vCPUs; cores_per_socket from
 *   <cpu><topology>, else -1. config is the same read from the persistent definition: what
 *   the next boot guarantees, so virtio-mem counts 0 there (its <requested> is only plugged if
 *   a guest driver does it; the engine's "config matches, skip RECONFIGURE" stays safe). id =
 *   libvirt domain ID ("" while off): it changes on every start: unchanged id = no restart.
 * - Planning [lv_plan.c]: memory growth live by "virtio-mem" (delta a multiple of the block
 *   size, within the device's size), else "dimm" (free slot, room under maxMemory, NUMA node,
 *   ACPI on, delta a multiple of LV_DIMM_ALIGN_MIB = 128 MiB: the Linux x86-64 memory section,
 *   so a guest can online all of it), else "balloon" (only up to the memory already plugged).
 *   vCPU growth up to the vCPU maximum: "vcpu hot-plug". Anything else (shrink, above the
 *   maximums, topology change) is COLD with a stable reason; a domain that is off is COLD for
 *   every field: the engine then sends RECONFIGURE and POWER_ON, no SHUTDOWN needed.
 *   plan() re-reads the domain instead of trusting obs; a paused domain counts as running.
 * - Steps [lv_live.c, lv_cold.c]: live changes update the persistent definition in the same
 *   step. RECONFIGURE needs the domain off; it folds DIMMs and virtio-mem devices into base
 *   memory (removes them), spreads the desired memory evenly over the NUMA cells, raises
 *   maxMemory and the vCPU maximum when the desired values would not fit, and keeps everything
 *   else (our metadata included). "Accepted" is all a step promises: re-observe to verify.
 *   SHUTDOWN without a guest OS (or an ACPI-deaf one) is accepted and changes nothing: the
 *   engine must time out and send POWER_OFF. Steps are idempotent: a LIVE step whose target is
 *   reached, POWER_OFF on an off domain, POWER_ON on a running one return HV_OK.
 * - Reconnection [lv_conn.c]: a connection found dead (libvirtd restarted, RPC error) is
 *   closed and reopened once and the read-only part of the call retried; a mutating libvirt
 *   call is never repeated blindly: the engine re-observes and decides.
 * - Time bounds: libvirt has no per-call deadline in its public API. Remote URIs (a "+"
 *   transport or a host part) get keepalive, which aborts calls to a dead peer after about
 *   interval * (count + 1) seconds; guest-agent shutdowns are bounded by the step's
 *   timeout_ms (else call_timeout_ms) through virDomainAgentSetResponseTimeout; the QEMU
 *   driver itself gives up on a busy domain after 30 s (mapped to HV_E_BUSY). Opening a
 *   connection runs on a thread of its own, outside every lock another host needs; a call
 *   waits for it at most connect_timeout_ms, then answers HV_E_UNREACHABLE, and later calls
 *   answer at once while that attempt is still stuck (a new one starts 30 s later, at most
 *   LV_MAX_OPENERS stuck attempts per host: a peer that never answers costs one wait).
 * - Lookups: a VM whose host is known (cached from an earlier lookup, or ref->server) is
 *   looked up on that host only; when that host fails, the answer is its error, and no other
 *   host is asked. Only a VM no host is known for is searched for across the fleet.
 * - Thread safety: every op may run on several threads at once; connections are shared.
 * - Process-wide effects of the first hv_libvirt_new: virInitialize(), a quiet libvirt error
 *   handler (virSetErrorFunc), and SIGPIPE set to ignored when it was at its default (libvirt
 *   writes to sockets a restarted libvirtd has closed; SIGPIPE would kill the process). While
 *   a backend serves a remote URI, libvirt's default event loop runs on a thread of ours.
 */
#ifndef HV_LIBVIRT_BACKEND_H
#define HV_LIBVIRT_BACKEND_H

#include <stddef.h>

#include "backend.h"

struct hv_libvirt_opts {
    const char *const *uris; /* fleet: hosts to search, e.g. qemu:///system, qemu+ssh://h/system,
                                test:///default; copied */
    size_t n_uris;
    int keepalive_interval_s; /* for remote URIs; 0 = default 5 */
    int keepalive_count;      /* default 3 */
    int call_timeout_ms;      /* bound for blocking calls where libvirt lets us bound them;
                                 0 = default 10000 */
    int connect_timeout_ms;   /* how long a call waits for a connection to open; 0 = 10000 */
};

/* Create a backend serving opts->uris. Opens no connection yet (the first op does). Returns
 * NULL with a message in err when opts are unusable (no URI, empty URI, out of memory). */
struct hv_backend *hv_libvirt_new(const struct hv_libvirt_opts *o, char *err, size_t errlen);

/* virsh's habits, for the lab CLI [lv_virsh.c]: connects to uri, else LIBVIRT_DEFAULT_URI,
 * else libvirt's default, and writes the URI libvirt reports for it (as `virsh uri`) to
 * uri_out. When domain is not NULL it is looked up as virsh does (an ID when it is a whole
 * number, then a UUID, then a name) and its UUID written to uuid_out. 0, or -1 with err. */
int hv_libvirt_virsh_resolve(const char *uri, const char *domain, char *uri_out, size_t uri_len,
                             char *uuid_out, size_t uuid_len, char *err, size_t errlen);

#endif
