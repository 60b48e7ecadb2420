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

/* The backend's private observation: richer than hv_vm_obs, used by plan(). */
struct vs_vm {
    char moref[64];
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
};

/* SearchIndex.FindByUuid(vmSearch=true, instanceUuid=false): the uuid as given, then
 * lower-cased. moref = "" (and HV_OK) when no VM has it. */
int vs_find_vm(struct vs_server *s, const char *uuid, int timeout_ms, char *moref, size_t len,
               struct hv_err *err);
/* Read the VM; HV_E_NOT_FOUND when the moref no longer exists. */
int vs_read_vm(struct vs_server *s, const char *moref, int timeout_ms, struct vs_vm *vm,
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
/* Fill vm from a <RetrievePropertiesExResponse>; the record is the LAST extraConfig entry
 * for HV_VSPHERE_RECORD_KEY (0.24's simulator appends entries, vCenter replaces them). */
int vs_vm_parse(xmlNodePtr body, const char *moref, struct vs_vm *vm, struct hv_err *err);

#endif
