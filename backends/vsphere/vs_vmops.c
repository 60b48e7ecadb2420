/* vs_vmops.c: request bodies for ReconfigVM_Task (elements in the WSDL's order:
 * changeVersion, numCPUs, numCoresPerSocket, memoryMB, deviceChange, extraConfig), PowerOnVM_Task,
 * PowerOffVM_Task and ShutdownGuest, sent through vs_soap and waited for through vs_task.
 */
#include "vs_vmops.h"

#include <string.h>

#include "vs_task.h"
#include "vs_config.h"

void vs_reconfig_request(struct vs_buf *b, const char *moref, const struct vs_spec *spec)
{
    vs_env_begin(b, "ReconfigVM_Task", "VirtualMachine", moref);
    vs_buf_add(b, "<spec>");
    if (spec->change_version && *spec->change_version)
        vs_buf_elem(b, "changeVersion", spec->change_version);
    if (spec->cpus >= 0)
        vs_buf_elem_i64(b, "numCPUs", spec->cpus);
    if (spec->cores_per_socket >= 0)
        vs_buf_elem_i64(b, "numCoresPerSocket", spec->cores_per_socket);
    if (spec->memory_mb >= 0)
        vs_buf_elem_i64(b, "memoryMB", spec->memory_mb);
    if (spec->disk) {
        /* The device as vCenter described it, with new capacities in their WSDL place. */
        const struct vs_disk *d = spec->disk;
        vs_buf_add(b, "<deviceChange><operation>edit</operation>"
                      "<device xsi:type=\"VirtualDisk\">");
        vs_buf_addn(b, d->xml, d->split);
        vs_buf_elem_i64(b, "capacityInKB", spec->disk_bytes / 1024);
        vs_buf_elem_i64(b, "capacityInBytes", spec->disk_bytes);
        vs_buf_add(b, d->xml + d->split);
        vs_buf_add(b, "</device></deviceChange>");
    }
    if (spec->record) {
        vs_buf_add(b, "<extraConfig xsi:type=\"OptionValue\">");
        vs_buf_elem(b, "key", HV_VSPHERE_RECORD_KEY);
        vs_buf_add(b, "<value xsi:type=\"xsd:string\">");
        vs_buf_esc(b, spec->record);
        vs_buf_add(b, "</value></extraConfig>");
    }
    vs_buf_add(b, "</spec>");
    vs_env_end(b, "ReconfigVM_Task");
}

static int run(struct vs_server *s, const char *method, struct vs_buf *req, int64_t deadline,
               bool is_task, struct hv_err *err)
{
    int rc;
    if (is_task) {
        rc = vs_run_task(s, method, req, deadline, err);
    } else {
        int left = vs_left_ms(deadline);
        struct vs_reply r = {0};
        rc = left ? vs_call(s, method, req, left, &r, err)
                  : vs_err(err, HV_E_TIMEOUT, "%s: no time left to start it", method);
        vs_reply_free(&r);
    }
    vs_buf_free(req);
    return rc;
}

int vs_reconfigure(struct vs_server *s, const char *moref, const struct vs_spec *spec,
                   int64_t deadline, const char *disk_sel, struct vs_vm *after, bool *after_ok,
                   struct hv_err *err)
{
    if (after_ok)
        *after_ok = false;
    if (!vs_session(s, vs_left_ms(deadline), err))
        return err->code;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_reconfig_request(&req, moref, spec);
    if (!after)
        return run(s, "ReconfigVM_Task", &req, deadline, true, err);
    /* A change of the record alone, guarded by the changeVersion of the read *after holds:
     * done, the VM is that read with the new record and version (anything else that changed
     * its configuration meanwhile would have failed the guard), so only those are read back
     * (a narrower answer for vCenter to build and us to parse than the whole VM's). */
    bool version_only = spec->record && spec->change_version && *spec->change_version &&
                        spec->memory_mb < 0 && spec->cpus < 0 && spec->cores_per_socket < 0 &&
                        !spec->disk && strcmp(after->moref, moref) == 0 &&
                        strcmp(after->change_version, spec->change_version) == 0;
    int rc = vs_run_task_vm(s, "ReconfigVM_Task", &req, moref, disk_sel, deadline, after,
                            version_only, after_ok, err);
    vs_buf_free(&req);
    return rc;
}

int vs_power(struct vs_server *s, const char *moref, const char *method, int64_t deadline,
             struct hv_err *err)
{
    if (!vs_session(s, vs_left_ms(deadline), err))
        return err->code;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, method, "VirtualMachine", moref);
    vs_env_end(&req, method);
    return run(s, method, &req, deadline, true, err);
}

int vs_shutdown_guest(struct vs_server *s, const char *moref, int64_t deadline, struct hv_err *err)
{
    if (!vs_session(s, vs_left_ms(deadline), err))
        return err->code;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_env_begin(&req, "ShutdownGuest", "VirtualMachine", moref);
    vs_env_end(&req, "ShutdownGuest");
    return run(s, "ShutdownGuest", &req, deadline, false, err);
}
