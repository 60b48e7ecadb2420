/* vs_task.h: starting a vim25 *_Task method and waiting, within a deadline, for the Task
 * it returns to finish (polling info.state/info.error through the PropertyCollector).
 *
 * The simulator finishes tasks before answering; real vCenter does not, so a wait that
 * runs out of time is HV_E_TIMEOUT while the task may still complete later.
 */
#ifndef HV_VS_TASK_H
#define HV_VS_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include "vs_soap.h"
#include "vs_xml.h"

enum vs_task_state {
    VS_TASK_UNKNOWN = 0,
    VS_TASK_QUEUED,
    VS_TASK_RUNNING,
    VS_TASK_SUCCESS,
    VS_TASK_ERROR,
};

/* Send req (a *_Task method), then wait for its task until deadline (vs_now_ms based).
 * A task error becomes the code of its fault type. */
int vs_run_task(struct vs_server *s, const char *method, const struct vs_buf *req, int64_t deadline,
                struct hv_err *err);
int vs_task_wait(struct vs_server *s, const char *method, const char *task, int64_t deadline,
                 struct hv_err *err);
/* As vs_run_task, for a task on VM moref: each poll reads the task and the VM's properties in
 * one RetrievePropertiesEx (vs_vm_task_request), so that when the task is done *vm holds
 * the VM as it is after it (*vm_ok true) and no second read is needed. disk_sel picks the
 * virtual disk *vm describes, as for vs_read_vm (the profile's unitNumber; NULL or "": the
 * first). version_only: *vm holds the VM as read before a change that touched nothing but its
 * record, guarded by that read's changeVersion; the polls read only config.changeVersion and
 * config.extraConfig (vs_vm_version_request), and the task's success updates just those in
 * *vm, which then describes the VM after it (vCenter applies a guarded change only when
 * nothing changed the configuration since that read). */
struct vs_vm;
int vs_run_task_vm(struct vs_server *s, const char *method, const struct vs_buf *req,
                   const char *moref, const char *disk_sel, int64_t deadline, struct vs_vm *vm,
                   bool version_only, bool *vm_ok, struct hv_err *err);

/* Pure parts. */
void vs_task_request(struct vs_buf *b, const char *property_collector, const char *task);
/* Read info.state and info.error of task from a RetrievePropertiesEx answer. */
int vs_task_parse(xmlNodePtr body, const char *task, enum vs_task_state *state,
                  struct vs_fault *fault, struct hv_err *err);

#endif
