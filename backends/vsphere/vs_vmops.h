/* vs_vmops.h: the VM operations hvupdater performs: ReconfigVM_Task (hardware and our
 * extraConfig record, guarded by config.changeVersion), power on/off, ShutdownGuest.
 *
 * Each call is bounded by a deadline (vs_now_ms based) covering the call and the wait for
 * its task. Specs borrow their strings from the caller.
 */
#ifndef HV_VS_VMOPS_H
#define HV_VS_VMOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "vs_props.h"
#include "vs_soap.h"
#include "vs_xml.h"

struct vs_spec {
    const char *change_version; /* NULL/"" = unguarded */
    int64_t memory_mb;          /* < 0: unchanged */
    int32_t cpus;               /* < 0: unchanged */
    int32_t cores_per_socket;   /* < 0: unchanged */
    const char *record;         /* NULL: unchanged; "" clears */
    const struct vs_disk *disk; /* NULL: no disk change; else edit this disk ... */
    int64_t disk_bytes;         /* ... to this capacity */
};

void vs_reconfig_request(struct vs_buf *b, const char *moref, const struct vs_spec *spec);
/* after (may be NULL): the VM as read in the same call that saw the task done, describing the
 * disk disk_sel picks (as vs_read_vm); *after_ok says whether it was (then no re-read is
 * needed). When the spec changes only the record, guarded by the change_version of the read
 * *after holds (the same VM), only the changeVersion and the record are read back into it
 * (vs_run_task_vm's version_only). */
struct vs_vm;
int vs_reconfigure(struct vs_server *s, const char *moref, const struct vs_spec *spec,
                   int64_t deadline, const char *disk_sel, struct vs_vm *after, bool *after_ok,
                   struct hv_err *err);
/* method: "PowerOnVM_Task" or "PowerOffVM_Task". */
int vs_power(struct vs_server *s, const char *moref, const char *method, int64_t deadline,
             struct hv_err *err);
/* Ask VMware Tools to shut the guest down; returns once vCenter accepted the request. */
int vs_shutdown_guest(struct vs_server *s, const char *moref, int64_t deadline, struct hv_err *err);

#endif
