/* vs_task.c: the returned Task moref is polled with RetrievePropertiesEx (info.state,
 * info.error) with a growing pause (25 ms up to 1 s) until success, error or the caller's
 * deadline. Task faults map to stable codes through vs_fault_code; raw text stays in detail.
 */
#include "vs_task.h"
#include "vs_props.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void vs_task_request(struct vs_buf *b, const char *property_collector, const char *task)
{
    vs_env_begin(b, "RetrievePropertiesEx", "PropertyCollector", property_collector);
    vs_buf_add(b, "<specSet><propSet><type>Task</type><all>false</all>"
                  "<pathSet>info.state</pathSet><pathSet>info.error</pathSet></propSet>"
                  "<objectSet>");
    vs_buf_moref(b, "obj", "Task", task);
    vs_buf_add(b, "<skip>false</skip></objectSet></specSet><options></options>");
    vs_env_end(b, "RetrievePropertiesEx");
}

int vs_task_parse(xmlNodePtr body, const char *task, enum vs_task_state *state,
                  struct vs_fault *fault, struct hv_err *err)
{
    *state = VS_TASK_UNKNOWN;
    memset(fault, 0, sizeof(*fault));
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        char value[64];
        if (!vs_xml_child_text(o, "obj", value, sizeof(value)) || strcmp(value, task) != 0)
            continue;
        for (xmlNodePtr p = vs_xml_child(o, "propSet"); p; p = vs_xml_next(p, "propSet")) {
            char name[32], text[32];
            vs_xml_child_text(p, "name", name, sizeof(name));
            xmlNodePtr val = vs_xml_child(p, "val");
            if (strcmp(name, "info.state") == 0) {
                vs_xml_text(val, text, sizeof(text));
                *state = strcmp(text, "queued") == 0    ? VS_TASK_QUEUED
                         : strcmp(text, "running") == 0 ? VS_TASK_RUNNING
                         : strcmp(text, "success") == 0 ? VS_TASK_SUCCESS
                         : strcmp(text, "error") == 0   ? VS_TASK_ERROR
                                                        : VS_TASK_UNKNOWN;
            } else if (strcmp(name, "info.error") == 0) {
                vs_xml_method_fault(val, fault);
            }
        }
        if (*state == VS_TASK_UNKNOWN)
            return vs_err(err, HV_E_INTERNAL, "task %s has no readable info.state", task);
        if (*state == VS_TASK_ERROR && !fault->type[0])
            snprintf(fault->type, sizeof(fault->type), "UnknownFault");
        return HV_OK;
    }
    return vs_err(err, HV_E_INTERNAL, "task %s is not in the property answer", task);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Whether the answer lists task at all. */
static bool task_listed(xmlNodePtr body, const char *task)
{
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        char value[64];
        if (vs_xml_child_text(o, "obj", value, sizeof(value)) && strcmp(value, task) == 0)
            return true;
    }
    return false;
}

static int task_wait(struct vs_server *s, const char *method, const char *task, const char *moref,
                     const char *disk_sel, int64_t deadline, struct vs_vm *vm, bool version_only,
                     bool *vm_ok, struct hv_err *err)
{
    int pause = 25;
    for (;;) {
        int left = vs_left_ms(deadline);
        if (left == 0)
            return vs_err(err, HV_E_TIMEOUT, "%s: task %s still running at the deadline", method,
                          task);
        const struct vs_content *c = vs_session(s, left, err);
        if (!c)
            return err->code;
        struct vs_buf req;
        vs_buf_init(&req);
        if (vm && version_only)
            vs_vm_version_request(&req, c->property_collector, moref, task);
        else if (vm)
            vs_vm_task_request(&req, c->property_collector, moref, task);
        else
            vs_task_request(&req, c->property_collector, task);
        struct vs_reply r;
        int rc = vs_call(s, "RetrievePropertiesEx", &req, left, &r, err);
        vs_buf_free(&req);
        if (rc != HV_OK)
            return rc;
        if (vm && !task_listed(r.body, task)) {
            vs_reply_free(&r);
            vm = NULL; /* not in the answer (should not happen): poll the task alone */
            continue;
        }
        enum vs_task_state state;
        struct vs_fault fault;
        rc = vs_task_parse(r.body, task, &state, &fault, err);
        if (rc == HV_OK && state == VS_TASK_SUCCESS && vm) {
            struct hv_err ignored = {0};
            *vm_ok =
                (version_only ? vs_vm_version_parse(r.body, moref, vm, &ignored)
                              : vs_vm_parse_disk(r.body, moref, disk_sel, vm, &ignored)) == HV_OK;
        }
        vs_reply_free(&r);
        if (rc != HV_OK)
            return rc;
        if (state == VS_TASK_SUCCESS)
            return HV_OK;
        if (state == VS_TASK_ERROR)
            return vs_fault_err(&fault, method, err);
        left = vs_left_ms(deadline);
        sleep_ms(pause < left ? pause : left);
        pause = pause * 2 > 1000 ? 1000 : pause * 2;
    }
}

int vs_task_wait(struct vs_server *s, const char *method, const char *task, int64_t deadline,
                 struct hv_err *err)
{
    return task_wait(s, method, task, NULL, NULL, deadline, NULL, false, NULL, err);
}

int vs_run_task_vm(struct vs_server *s, const char *method, const struct vs_buf *req,
                   const char *moref, const char *disk_sel, int64_t deadline, struct vs_vm *vm,
                   bool version_only, bool *vm_ok, struct hv_err *err)
{
    if (vm_ok)
        *vm_ok = false;
    int left = vs_left_ms(deadline);
    if (left == 0)
        return vs_err(err, HV_E_TIMEOUT, "%s: no time left to start it", method);
    struct vs_reply r;
    int rc = vs_call(s, method, req, left, &r, err);
    if (rc != HV_OK)
        return rc;
    char task[64];
    bool ok = vs_xml_child_text(r.body, "returnval", task, sizeof(task)) && task[0];
    vs_reply_free(&r);
    if (!ok)
        return vs_err(err, HV_E_INTERNAL, "%s: answer names no task", method);
    /* moref may point into *vm (the caller's last read), which parsing the answer clears */
    char vm_moref[64];
    snprintf(vm_moref, sizeof(vm_moref), "%s", moref ? moref : "");
    return task_wait(s, method, task, vm_moref, disk_sel, deadline, vm && vm_ok ? vm : NULL,
                     version_only, vm_ok, err);
}

int vs_run_task(struct vs_server *s, const char *method, const struct vs_buf *req, int64_t deadline,
                struct hv_err *err)
{
    return vs_run_task_vm(s, method, req, NULL, NULL, deadline, NULL, false, NULL, err);
}
