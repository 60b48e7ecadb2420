/* vs_props.h: finding a VM by BIOS UUID and reading what hvupdater needs of it in one
 * RetrievePropertiesEx (VM properties plus the state of its recent tasks).
 *
 * struct vs_vm is plain caller-owned data. The request builders and parsers are pure (no
 * I/O) so unit tests feed them captured answers.
 */
#ifndef HV_VS_PROPS_H
#define HV_VS_PROPS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "vs_soap.h"
#include "vs_xml.h"

#define VS_DISK_XML_MAX 6144
#define VS_MAX_DS       16

/* The disk hv_vm_ref.disk names (the first VirtualDisk, or the first with that unit number),
 * with what an edit of its capacity needs: its device XML as vCenter sent it, minus the two
 * capacity elements, split where they go (the WSDL fixes the order of a device's elements). */
struct vs_disk {
    bool found;
    int32_t key;
    int32_t controller_key;
    int32_t unit_number;       /* -1 unknown */
    int64_t capacity_bytes;    /* capacityInBytes, else capacityInKB * 1024 */
    char backing[64];          /* xsi:type of its backing, e.g. "VirtualDiskFlatVer2BackingInfo" */
    char controller[64];       /* xsi:type of its controller, e.g. "ParaVirtualSCSIController" */
    bool thin;                 /* backing.thinProvisioned */
    char datastore[64];        /* backing.datastore moref */
    char xml[VS_DISK_XML_MAX]; /* children, capacities left out; "" when it did not fit */
    size_t split;              /* where <capacityInKB><capacityInBytes> go in xml */
};

/* The backend's private observation: richer than hv_vm_obs, used by plan(). */
struct vs_vm {
    char moref[64];
    char uuid[64]; /* config.uuid (the BIOS UUID), "" when the answer had none */
    enum hv_power power;
    int64_t memory_mb;        /* -1 unknown */
    int32_t cpus;             /* -1 unknown */
    int32_t cores_per_socket; /* -1 unknown */
    bool mem_hot_add;
    bool cpu_hot_add;
    bool cpu_hot_remove;
    int64_t hotplug_limit_mb;     /* 0 = not set */
    int64_t hotplug_increment_mb; /* 0 = not set */
    char change_version[64];
    bool tools_running;
    bool busy; /* a task on the VM is queued or running */
    char record[HV_RECORD_MAX];
    struct vs_disk disk;
    bool has_snapshots;
    int64_t disk_ds_free; /* free bytes on the disk's datastore, -1 unknown */
};

/* SearchIndex.FindByUuid(vmSearch=true, instanceUuid=false): the uuid as given, then
 * lower-cased. moref = "" (and HV_OK) when no VM has it. */
int vs_find_vm(struct vs_server *s, const char *uuid, int timeout_ms, char *moref, size_t len,
               struct hv_err *err);
/* Read the VM, and the disk disk_sel names (see hv_vm_ref.disk; NULL = the first);
 * HV_E_NOT_FOUND when the moref no longer exists. */
int vs_read_vm(struct vs_server *s, const char *moref, const char *disk_sel, int timeout_ms,
               struct vs_vm *vm, struct hv_err *err);

/* One VM of vs_list_records: its moref, name, BIOS UUID, power state and record ("" when it
 * carries none, or one too large to read). */
typedef void (*vs_record_fn)(void *ctx, const char *moref, const char *name, const char *uuid,
                             enum hv_power power, const char *record);
/* Every VM of the vCenter (a ContainerView over the root folder, read with
 * RetrievePropertiesEx and its continuations); fn for each, with its record if it has one. */
int vs_list_records(struct vs_server *s, int timeout_ms, vs_record_fn fn, void *ctx,
                    struct hv_err *err);

/* Pure parts. */
void vs_find_request(struct vs_buf *b, const char *search_index, const char *uuid);
/* moref of <FindByUuidResponse>, "" when empty. */
void vs_find_parse(xmlNodePtr body, char *moref, size_t len);
void vs_vm_request(struct vs_buf *b, const char *property_collector, const char *moref);
/* The same read plus one more object: task (info.state, info.error), so that waiting for a
 * task on the VM and reading the VM after it are one round trip. */
void vs_vm_task_request(struct vs_buf *b, const char *property_collector, const char *moref,
                        const char *task);
/* The narrow read of a task on the VM: the task (info.state, info.error) and only the VM's
 * config.changeVersion and config.extraConfig, for a change that touched nothing else. */
void vs_vm_version_request(struct vs_buf *b, const char *property_collector, const char *moref,
                           const char *task);
/* From such an answer: vm's change_version and record (the LAST extraConfig entry for our
 * key; "" when it has none), the rest of *vm left alone; *vm unchanged on an error (the VM
 * not in the answer, a record too long). */
int vs_vm_version_parse(xmlNodePtr body, const char *moref, struct vs_vm *vm, struct hv_err *err);
/* Fill vm from a <RetrievePropertiesExResponse>; the record is the LAST extraConfig entry
 * for HV_VSPHERE_RECORD_KEY (0.24's simulator appends entries, vCenter replaces them). */
int vs_vm_parse(xmlNodePtr body, const char *moref, struct vs_vm *vm, struct hv_err *err);
/* The same, choosing the disk disk_sel names. */
int vs_vm_parse_disk(xmlNodePtr body, const char *moref, const char *disk_sel, struct vs_vm *vm,
                     struct hv_err *err);

#endif
