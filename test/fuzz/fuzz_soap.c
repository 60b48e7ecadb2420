/* fuzz_soap.c: libFuzzer target for what a vCenter (or anything posing as one) sends back.
 *
 * The input is a SOAP answer: vs_xml_parse (no DTD, no entities, no network), then every
 * parser of an answer the backend has: FindByUuid (vs_find_parse), the VM's properties
 * (vs_vm_parse), a task's state (vs_task_parse) and faults (vs_xml_fault,
 * vs_xml_method_fault, vs_fault_err). Invariants: nothing crashes or leaks, every string
 * filled is NUL-terminated within its buffer, an OK VM parse gives a known power state and
 * an operation record that hv_oprecord_read accepts or refuses without harm, and an error has
 * a code and a detail.
 */
#include "oprecord.h"
#include "vs_props.h"
#include "vs_task.h"
#include "vs_xml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_soap: invariant broken: %s\n", what);
    abort();
}

static void terminated(const char *s, size_t cap, const char *what)
{
    if (!memchr(s, '\0', cap))
        fail(what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hv_err err = {0};
    xmlDocPtr doc = vs_xml_parse((const char *)data, size, &err);
    if (!doc) {
        if (!err.code || !err.detail[0])
            fail("a refused answer without an error");
        return 0;
    }
    xmlNodePtr body = vs_xml_body(doc);
    if (body) {
        struct vs_fault f;
        memset(&f, 0, sizeof(f));
        if (vs_xml_fault(body, &f)) {
            terminated(f.type, sizeof(f.type), "fault type");
            terminated(f.message, sizeof(f.message), "fault message");
            struct hv_err fe = {0};
            if (vs_fault_err(&f, "fuzz", &fe) != (int)fe.code || !fe.detail[0])
                fail("fault error");
        }
        char moref[64];
        vs_find_parse(body, moref, sizeof(moref));
        terminated(moref, sizeof(moref), "moref");

        static struct vs_vm vm;
        memset(&vm, 0x5a, sizeof(vm));
        struct hv_err ve = {0};
        if (vs_vm_parse(body, moref[0] ? moref : "vm-42", &vm, &ve) == 0) {
            terminated(vm.change_version, sizeof(vm.change_version), "changeVersion");
            terminated(vm.record, sizeof(vm.record), "record");
            if (vm.power != HV_POWER_ON && vm.power != HV_POWER_OFF &&
                vm.power != HV_POWER_PAUSED && vm.power != HV_POWER_UNKNOWN)
                fail("power state");
            struct hv_oprecord rec;
            (void)hv_oprecord_read(&rec, vm.record);
        } else if (!ve.code || !ve.detail[0]) {
            fail("a failed VM parse without an error");
        }

        enum vs_task_state st;
        struct vs_fault tf;
        memset(&tf, 0, sizeof(tf));
        struct hv_err te = {0};
        if (vs_task_parse(body, "task-7", &st, &tf, &te) == 0) {
            terminated(tf.type, sizeof(tf.type), "task fault type");
            terminated(tf.message, sizeof(tf.message), "task fault message");
        }
        for (xmlNodePtr n = body->children; n; n = n->next) {
            struct vs_fault mf;
            memset(&mf, 0, sizeof(mf));
            vs_xml_method_fault(n, &mf);
            terminated(mf.type, sizeof(mf.type), "method fault type");
        }
    }
    xmlFreeDoc(doc);
    return 0;
}
