/* test_vs_xml.c: request building (escaping, element order), response parsing (faults,
 * properties with the appended-extraConfig "last wins" rule, tasks) and the parser's
 * refusals (DTDs, entities, oversize, malformed). No network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vs_props.h"
#include "vs_task.h"
#include "vs_vmops.h"
#include "vs_xml.h"

#define ENV_HEAD                                                                                   \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"                                                   \
    "<soapenv:Envelope xmlns:soapenc=\"http://schemas.xmlsoap.org/soap/encoding/\" "               \
    "xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "                                 \
    "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" "                                              \
    "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
#define ENV_TAIL "</soapenv:Body></soapenv:Envelope>"
/* How the 0.24 simulator spells xsi:type inside values. */
#define XSI                                                                                        \
    "xmlns:XMLSchema-instance=\"http://www.w3.org/2001/XMLSchema-instance\" "                      \
    "XMLSchema-instance:type="

static xmlNodePtr parse_body(const char *text, xmlDocPtr *doc)
{
    struct hv_err err = {0};
    *doc = vs_xml_parse(text, strlen(text), &err);
    if (!*doc)
        fail_msg("parse: %s", err.detail);
    return vs_xml_body(*doc);
}

static void test_envelope_escaping(void **state)
{
    (void)state;
    struct vs_buf b;
    vs_buf_init(&b);
    vs_env_begin(&b, "Login", "SessionManager", "Session\"Mgr");
    vs_buf_elem(&b, "userName", "a<b>&'c'");
    vs_buf_elem(&b, "password", "</password><x>");
    vs_env_end(&b, "Login");
    assert_false(b.failed);
    assert_string_equal(b.data,
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope "
                        "xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
                        "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" "
                        "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
                        "<Login xmlns=\"urn:vim25\"><_this type=\"SessionManager\">Session&quot;Mgr"
                        "</_this><userName>a&lt;b&gt;&amp;&apos;c&apos;</userName>"
                        "<password>&lt;/password&gt;&lt;x&gt;</password></Login>"
                        "</soapenv:Body></soapenv:Envelope>");
    /* What we built parses back to the original values. */
    xmlDocPtr doc;
    xmlNodePtr login = parse_body(b.data, &doc);
    char v[64];
    assert_true(vs_xml_child_text(login, "password", v, sizeof(v)));
    assert_string_equal(v, "</password><x>");
    xmlFreeDoc(doc);
    vs_buf_free(&b);
}

static void test_escape_refusals(void **state)
{
    (void)state;
    static const char *bad[] = {"bell\a",       "nul-ish\x01",  "\xc3(",
                                "\xed\xa0\x80", "\xef\xbf\xbf", "\xf8\x88\x80\x80\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vs_buf b;
        vs_buf_init(&b);
        vs_buf_esc(&b, bad[i]);
        assert_true(b.failed);
        vs_buf_free(&b);
    }
    struct vs_buf b;
    vs_buf_init(&b);
    vs_buf_esc(&b, "tab\tnl\ncr\r utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    assert_false(b.failed);
    assert_string_equal(b.data, "tab\tnl\ncr&#13; utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    vs_buf_free(&b);
}

static void test_reconfig_spec(void **state)
{
    (void)state;
    struct vs_buf b;
    vs_buf_init(&b);
    struct vs_spec spec = {"2024-01-01T00:00:00.000001Z", 8192, 4, 2, NULL, NULL, 0};
    vs_reconfig_request(&b, "vm-42", &spec);
    assert_non_null(strstr(b.data, "<_this type=\"VirtualMachine\">vm-42</_this><spec>"
                                   "<changeVersion>2024-01-01T00:00:00.000001Z</changeVersion>"
                                   "<numCPUs>4</numCPUs><numCoresPerSocket>2</numCoresPerSocket>"
                                   "<memoryMB>8192</memoryMB></spec>"));
    vs_buf_free(&b);

    /* A disk edit: the device as read, new capacities where the WSDL puts them (after
     * unitNumber, before shares), between memoryMB and extraConfig. */
    vs_buf_init(&b);
    struct vs_disk disk;
    memset(&disk, 0, sizeof(disk));
    snprintf(disk.xml, sizeof(disk.xml), "%s",
             "<key>2000</key><unitNumber>0</unitNumber><shares><level>normal</level></shares>");
    disk.split = strlen("<key>2000</key><unitNumber>0</unitNumber>");
    struct vs_spec grow = {"v1", 8192, -1, -1, "{}", &disk, 40LL << 30};
    vs_reconfig_request(&b, "vm-7", &grow);
    assert_non_null(strstr(b.data, "<memoryMB>8192</memoryMB><deviceChange><operation>edit"
                                   "</operation><device xsi:type=\"VirtualDisk\"><key>2000</key>"
                                   "<unitNumber>0</unitNumber><capacityInKB>41943040"
                                   "</capacityInKB><capacityInBytes>42949672960</capacityInBytes>"
                                   "<shares><level>normal</level></shares></device></deviceChange>"
                                   "<extraConfig"));
    vs_buf_free(&b);

    /* Record only: no hardware, no changeVersion; the value is escaped and typed. */
    vs_buf_init(&b);
    struct vs_spec rec = {NULL, -1, -1, -1, "{\"a\":\"<&>\"}\r", NULL, 0};
    vs_reconfig_request(&b, "vm-1", &rec);
    assert_non_null(strstr(b.data, "<spec><extraConfig xsi:type=\"OptionValue\">"
                                   "<key>hvupdater.operation</key>"
                                   "<value xsi:type=\"xsd:string\">{&quot;a&quot;:&quot;&lt;"
                                   "&amp;&gt;&quot;}&#13;</value></extraConfig></spec>"));
    xmlDocPtr doc;
    xmlNodePtr call = parse_body(b.data, &doc);
    char v[64];
    xmlNodePtr ec = vs_xml_child(vs_xml_child(call, "spec"), "extraConfig");
    assert_true(vs_xml_child_text(ec, "value", v, sizeof(v)));
    assert_string_equal(v, "{\"a\":\"<&>\"}\r");
    xmlFreeDoc(doc);
    vs_buf_free(&b);
}

static void test_find(void **state)
{
    (void)state;
    struct vs_buf b;
    vs_buf_init(&b);
    vs_find_request(&b, "SearchIndex", "4203<x>");
    assert_non_null(strstr(b.data, "<uuid>4203&lt;x&gt;</uuid><vmSearch>true</vmSearch>"
                                   "<instanceUuid>false</instanceUuid>"));
    vs_buf_free(&b);

    xmlDocPtr doc;
    char moref[64];
    xmlNodePtr body = parse_body(ENV_HEAD "<FindByUuidResponse xmlns=\"urn:vim25\"><returnval "
                                          "type=\"VirtualMachine\">vm-42</returnval>"
                                          "</FindByUuidResponse>" ENV_TAIL,
                                 &doc);
    vs_find_parse(body, moref, sizeof(moref));
    assert_string_equal(moref, "vm-42");
    xmlFreeDoc(doc);
    body = parse_body(
        ENV_HEAD "<FindByUuidResponse xmlns=\"urn:vim25\"></FindByUuidResponse>" ENV_TAIL, &doc);
    vs_find_parse(body, moref, sizeof(moref));
    assert_string_equal(moref, "");
    xmlFreeDoc(doc);
}

static void test_faults(void **state)
{
    (void)state;
    /* The simulator's form: xsi:type on the detail element. */
    xmlDocPtr doc;
    struct vs_fault f;
    xmlNodePtr body = parse_body(
        ENV_HEAD "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The "
                 "attempted operation cannot be performed in the current state (Powered on)."
                 "</faultstring><detail><InvalidPowerStateFault xmlns=\"urn:vim25\" "
                 "xsi:type=\"InvalidPowerState\"><existingState>poweredOn</existingState>"
                 "</InvalidPowerStateFault></detail></soapenv:Fault>" ENV_TAIL,
        &doc);
    assert_true(vs_xml_fault(body, &f));
    assert_string_equal(f.type, "InvalidPowerState");
    assert_non_null(strstr(f.message, "current state"));
    struct hv_err err;
    assert_int_equal(vs_fault_err(&f, "PowerOnVM_Task", &err), HV_E_INVALID_STATE);
    assert_non_null(strstr(err.detail, "PowerOnVM_Task: InvalidPowerState: The attempted"));
    xmlFreeDoc(doc);

    /* No xsi:type: the element name without its "Fault" suffix. */
    body = parse_body(ENV_HEAD "<soapenv:Fault><faultcode>ServerFaultCode</faultcode>"
                               "<faultstring></faultstring><detail><TaskInProgressFault "
                               "xmlns=\"urn:vim25\"/></detail></soapenv:Fault>" ENV_TAIL,
                      &doc);
    assert_true(vs_xml_fault(body, &f));
    assert_string_equal(f.type, "TaskInProgress");
    xmlFreeDoc(doc);

    /* A response is not a fault. */
    body = parse_body(ENV_HEAD "<LogoutResponse xmlns=\"urn:vim25\"/>" ENV_TAIL, &doc);
    assert_false(vs_xml_fault(body, &f));
    xmlFreeDoc(doc);
}

static void test_fault_codes(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        enum hv_errcode code;
    } table[] = {
        {"NotAuthenticated", HV_E_AUTH},
        {"InvalidLogin", HV_E_AUTH},
        {"NoPermission", HV_E_AUTH},
        {"InvalidPowerState", HV_E_INVALID_STATE},
        {"InvalidState", HV_E_INVALID_STATE},
        {"ToolsUnavailable", HV_E_INVALID_STATE},
        {"TaskInProgress", HV_E_BUSY},
        {"ConcurrentAccess", HV_E_BUSY},
        {"InsufficientResourcesFault", HV_E_RESOURCES},
        {"InsufficientMemoryResourcesFault", HV_E_RESOURCES},
        {"InsufficientHostCapacityFault", HV_E_RESOURCES},
        {"NotSupported", HV_E_UNSUPPORTED},
        {"MemoryHotPlugNotSupported", HV_E_UNSUPPORTED},
        {"MethodDisabled", HV_E_UNSUPPORTED},
        {"ManagedObjectNotFound", HV_E_NOT_FOUND},
        {"HostNotConnected", HV_E_UNREACHABLE},
        {"Timedout", HV_E_TIMEOUT},
        {"NoDiskSpace", HV_E_RESOURCES},
        {"InsufficientDiskSpace", HV_E_RESOURCES},
        {"InvalidDeviceSpec", HV_E_UNSUPPORTED},
        {"SystemError", HV_E_INTERNAL},
        {"", HV_E_INTERNAL},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (vs_fault_code(table[i].type) != table[i].code)
            fail_msg("%s -> %d, want %d", table[i].type, vs_fault_code(table[i].type),
                     table[i].code);
    }
}

/* A simulator answer for one VM plus its running task; extraConfig appended three times. */
#define VM_ANSWER                                                                                  \
    ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"              \
             "<obj type=\"VirtualMachine\">vm-42</obj>"                                            \
             "<propSet><name>runtime.powerState</name><val " XSI "\"VirtualMachinePowerState\">"   \
             "poweredOn</val></propSet>"                                                           \
             "<propSet><name>config.hardware.memoryMB</name><val " XSI "\"xsd:int\">4096</val>"    \
             "</propSet>"                                                                          \
             "<propSet><name>config.hardware.numCPU</name><val " XSI "\"xsd:int\">4</val>"         \
             "</propSet>"                                                                          \
             "<propSet><name>config.hardware.numCoresPerSocket</name><val " XSI "\"xsd:int\">2"    \
             "</val></propSet>"                                                                    \
             "<propSet><name>config.memoryHotAddEnabled</name><val " XSI "\"xsd:boolean\">true"    \
             "</val></propSet>"                                                                    \
             "<propSet><name>config.cpuHotAddEnabled</name><val " XSI "\"xsd:boolean\">false"      \
             "</val></propSet>"                                                                    \
             "<propSet><name>config.hotPlugMemoryLimit</name><val " XSI "\"xsd:long\">16384"       \
             "</val></propSet>"                                                                    \
             "<propSet><name>config.hotPlugMemoryIncrementSize</name><val " XSI "\"xsd:long\">"    \
             "128</val></propSet>"                                                                 \
             "<propSet><name>config.changeVersion</name><val " XSI "\"xsd:string\">"               \
             "2024-01-01T00:00:00.000003Z</val></propSet>"                                         \
             "<propSet><name>guest.toolsRunningStatus</name><val " XSI "\"xsd:string\">"           \
             "guestToolsRunning</val></propSet>"                                                   \
             "<propSet><name>config.extraConfig</name><val " XSI "\"ArrayOfOptionValue\">"         \
             "<OptionValue XMLSchema-instance:type=\"OptionValue\"><key>govcsim</key>"             \
             "<value XMLSchema-instance:type=\"xsd:string\">TRUE</value></OptionValue>"            \
             "<OptionValue XMLSchema-instance:type=\"OptionValue\"><key>hvupdater.operation"       \
             "</key><value XMLSchema-instance:type=\"xsd:string\">old</value></OptionValue>"       \
             "<OptionValue XMLSchema-instance:type=\"OptionValue\"><key>other</key>"               \
             "<value XMLSchema-instance:type=\"xsd:string\">x</value></OptionValue>"               \
             "<OptionValue XMLSchema-instance:type=\"OptionValue\"><key>hvupdater.operation"       \
             "</key><value XMLSchema-instance:type=\"xsd:string\">{&quot;step&quot;:2}</value>"    \
             "</OptionValue>"                                                                      \
             "%s"                                                                                  \
             "</val></propSet></objects>"                                                          \
             "<objects><obj type=\"Task\">task-7</obj><propSet><name>info.state</name>"            \
             "<val " XSI "\"TaskInfoState\">%s</val></propSet></objects>"                          \
             "</returnval></RetrievePropertiesExResponse>" ENV_TAIL

static int parse_vm(const char *extra, const char *task_state, struct vs_vm *vm, struct hv_err *err)
{
    char text[8192];
    snprintf(text, sizeof(text), VM_ANSWER, extra, task_state);
    xmlDocPtr doc;
    xmlNodePtr body = parse_body(text, &doc);
    int rc = vs_vm_parse(body, "vm-42", vm, err);
    xmlFreeDoc(doc);
    return rc;
}

static void test_vm_properties(void **state)
{
    (void)state;
    struct vs_vm vm;
    struct hv_err err = {0};
    assert_int_equal(parse_vm("", "running", &vm, &err), HV_OK);
    assert_string_equal(vm.moref, "vm-42");
    assert_int_equal(vm.power, HV_POWER_ON);
    assert_int_equal(vm.memory_mb, 4096);
    assert_int_equal(vm.cpus, 4);
    assert_int_equal(vm.cores_per_socket, 2);
    assert_true(vm.mem_hot_add);
    assert_false(vm.cpu_hot_add);
    assert_false(vm.cpu_hot_remove); /* absent (the simulator omits unset flags) */
    assert_int_equal(vm.hotplug_limit_mb, 16384);
    assert_int_equal(vm.hotplug_increment_mb, 128);
    assert_string_equal(vm.change_version, "2024-01-01T00:00:00.000003Z");
    assert_true(vm.tools_running);
    assert_true(vm.busy);
    /* Appended entries: the last one for our key wins. */
    assert_string_equal(vm.record, "{\"step\":2}");

    assert_int_equal(parse_vm("", "success", &vm, &err), HV_OK);
    assert_false(vm.busy);
    assert_int_equal(parse_vm("", "queued", &vm, &err), HV_OK);
    assert_true(vm.busy);

    /* A later empty value clears the record. */
    assert_int_equal(parse_vm("<OptionValue><key>hvupdater.operation</key><value "
                              "XMLSchema-instance:type=\"xsd:string\"></value></OptionValue>",
                              "success", &vm, &err),
                     HV_OK);
    assert_string_equal(vm.record, "");

    /* A stored value too long for a record is an error, not a truncation. */
    char extra[6000];
    int n = snprintf(extra, sizeof(extra), "<OptionValue><key>hvupdater.operation</key><value>");
    memset(extra + n, 'x', HV_RECORD_MAX);
    snprintf(extra + n + HV_RECORD_MAX, sizeof(extra) - (size_t)n - HV_RECORD_MAX,
             "</value></OptionValue>");
    assert_int_equal(parse_vm(extra, "success", &vm, &err), HV_E_INTERNAL);
}

/* Devices, snapshot and datastores: the disk is chosen (first, or by unit number), its
 * controller typed, its free space found, and its XML kept for an edit with the simulator's
 * xsi prefix rewritten to the request's. */
static void test_vm_disk(void **state)
{
    (void)state;
    const char *text =
        ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                 "<obj type=\"VirtualMachine\">vm-42</obj>"
                 "<propSet><name>config.hardware.device</name><val " XSI "\"ArrayOfVirtualDevice\">"
                 "<VirtualDevice XMLSchema-instance:type=\"VirtualIDEController\"><key>200</key>"
                 "</VirtualDevice>"
                 "<VirtualDevice XMLSchema-instance:type=\"ParaVirtualSCSIController\">"
                 "<key>1000</key></VirtualDevice>"
                 "<VirtualDevice XMLSchema-instance:type=\"VirtualDisk\"><key>2000</key>"
                 "<deviceInfo XMLSchema-instance:type=\"Description\"><label>Hard disk 1</label>"
                 "<summary>a &amp; b</summary></deviceInfo>"
                 "<backing XMLSchema-instance:type=\"VirtualDiskFlatVer2BackingInfo\">"
                 "<fileName>[ds1] vm/vm.vmdk</fileName><datastore type=\"Datastore\">ds-1"
                 "</datastore><diskMode>persistent</diskMode><thinProvisioned>false"
                 "</thinProvisioned></backing><controllerKey>1000</controllerKey>"
                 "<unitNumber>0</unitNumber><capacityInKB>26214400</capacityInKB>"
                 "<capacityInBytes>26843545600</capacityInBytes><shares><level>normal</level>"
                 "</shares></VirtualDevice>"
                 "<VirtualDevice XMLSchema-instance:type=\"VirtualDisk\"><key>2001</key>"
                 "<backing XMLSchema-instance:type=\"VirtualDiskFlatVer2BackingInfo\">"
                 "<fileName>[ds1] vm/vm_1.vmdk</fileName></backing><controllerKey>200"
                 "</controllerKey><unitNumber>1</unitNumber><capacityInKB>1024</capacityInKB>"
                 "</VirtualDevice></val></propSet>"
                 "<propSet><name>snapshot</name><val " XSI "\"VirtualMachineSnapshotInfo\">"
                 "<rootSnapshotList><name>s</name></rootSnapshotList></val></propSet></objects>"
                 "<objects><obj type=\"Datastore\">ds-0</obj><propSet><name>summary.freeSpace"
                 "</name><val " XSI "\"xsd:long\">5</val></propSet></objects>"
                 "<objects><obj type=\"Datastore\">ds-1</obj><propSet><name>summary.freeSpace"
                 "</name><val " XSI "\"xsd:long\">1073741824</val></propSet></objects>"
                 "</returnval></RetrievePropertiesExResponse>" ENV_TAIL;
    xmlDocPtr doc;
    xmlNodePtr body = parse_body(text, &doc);
    struct vs_vm *vm = malloc(sizeof(*vm));
    assert_non_null(vm);
    struct hv_err err = {0};
    assert_int_equal(vs_vm_parse(body, "vm-42", vm, &err), HV_OK);
    assert_true(vm->disk.found);
    assert_int_equal(vm->disk.key, 2000);
    assert_int_equal(vm->disk.unit_number, 0);
    assert_int_equal(vm->disk.capacity_bytes, 25LL << 30);
    assert_string_equal(vm->disk.controller, "ParaVirtualSCSIController");
    assert_string_equal(vm->disk.backing, "VirtualDiskFlatVer2BackingInfo");
    assert_false(vm->disk.thin);
    assert_string_equal(vm->disk.datastore, "ds-1");
    assert_int_equal(vm->disk_ds_free, 1073741824);
    assert_true(vm->has_snapshots);
    assert_null(strstr(vm->disk.xml, "XMLSchema-instance"));
    assert_null(strstr(vm->disk.xml, "capacityIn"));
    assert_string_equal(vm->disk.xml + vm->disk.split, "<shares><level>normal</level></shares>");
    assert_non_null(strstr(vm->disk.xml, "<deviceInfo xsi:type=\"Description\"><label>Hard disk 1"
                                         "</label><summary>a &amp; b</summary></deviceInfo>"));
    assert_non_null(strstr(vm->disk.xml, "<datastore type=\"Datastore\">ds-1</datastore>"));

    assert_int_equal(vs_vm_parse_disk(body, "vm-42", "1", vm, &err), HV_OK);
    assert_int_equal(vm->disk.key, 2001);
    assert_int_equal(vm->disk.capacity_bytes, 1024LL * 1024);
    assert_string_equal(vm->disk.controller, "VirtualIDEController");
    assert_int_equal(vm->disk.split, strlen(vm->disk.xml)); /* nothing after the capacities */
    assert_int_equal(vm->disk_ds_free, -1);                 /* no datastore named */
    assert_int_equal(vs_vm_parse_disk(body, "vm-42", "5", vm, &err), HV_OK);
    assert_false(vm->disk.found);
    free(vm);
    xmlFreeDoc(doc);
}

static void test_vm_missing(void **state)
{
    (void)state;
    xmlDocPtr doc;
    struct vs_vm vm;
    struct hv_err err = {0};
    xmlNodePtr body = parse_body(ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\">"
                                          "</RetrievePropertiesExResponse>" ENV_TAIL,
                                 &doc);
    assert_int_equal(vs_vm_parse(body, "vm-42", &vm, &err), HV_E_NOT_FOUND);
    xmlFreeDoc(doc);
}

static void test_vm_request(void **state)
{
    (void)state;
    struct vs_buf b;
    vs_buf_init(&b);
    vs_vm_request(&b, "propertyCollector", "vm-42");
    const char *must[] = {
        "<_this type=\"PropertyCollector\">propertyCollector</_this>",
        "<pathSet>runtime.powerState</pathSet>",
        "<pathSet>config.hotPlugMemoryIncrementSize</pathSet>",
        "<pathSet>config.changeVersion</pathSet>",
        "<pathSet>guest.toolsRunningStatus</pathSet>",
        "<pathSet>config.extraConfig</pathSet>",
        "<propSet><type>Task</type><all>false</all><pathSet>info.state</pathSet>"
        "<pathSet>info.error</pathSet></propSet>",
        "<obj type=\"VirtualMachine\">vm-42</obj><skip>false</skip>"
        "<selectSet xsi:type=\"TraversalSpec\">",
        "<path>recentTask</path>",
    };
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
        if (!strstr(b.data, must[i]))
            fail_msg("missing %s", must[i]);
    vs_buf_free(&b);
}

/* The narrow read-back of a guarded record write: the task and only the VM's changeVersion
 * and extraConfig; its parse sets those two (the last entry for our key wins) and leaves the
 * rest of the VM as it was, or nothing at all when the VM is not in the answer. */
static void test_vm_version(void **state)
{
    (void)state;
    struct vs_buf b;
    vs_buf_init(&b);
    vs_vm_version_request(&b, "propertyCollector", "vm-42", "task-7");
    const char *must[] = {
        "<propSet><type>VirtualMachine</type><all>false</all>"
        "<pathSet>config.changeVersion</pathSet><pathSet>config.extraConfig</pathSet></propSet>",
        "<obj type=\"VirtualMachine\">vm-42</obj><skip>false</skip></objectSet>",
        "<obj type=\"Task\">task-7</obj><skip>false</skip></objectSet>",
    };
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
        if (!strstr(b.data, must[i]))
            fail_msg("missing %s", must[i]);
    assert_null(strstr(b.data, "config.hardware.device"));
    assert_null(strstr(b.data, "TraversalSpec"));
    vs_buf_free(&b);

    struct vs_vm vm;
    struct hv_err err = {0};
    memset(&vm, 0, sizeof(vm));
    snprintf(vm.moref, sizeof(vm.moref), "vm-42");
    vm.memory_mb = 1234;
    vm.disk.found = true;
    snprintf(vm.change_version, sizeof(vm.change_version), "old");
    snprintf(vm.record, sizeof(vm.record), "before");
    char text[8192];
    snprintf(text, sizeof(text), VM_ANSWER, "", "success");
    xmlDocPtr doc;
    xmlNodePtr body = parse_body(text, &doc);
    assert_int_equal(vs_vm_version_parse(body, "vm-42", &vm, &err), HV_OK);
    xmlFreeDoc(doc);
    assert_string_equal(vm.change_version, "2024-01-01T00:00:00.000003Z");
    assert_string_equal(vm.record, "{\"step\":2}");
    assert_int_equal(vm.memory_mb, 1234); /* the rest as it was */
    assert_true(vm.disk.found);

    body = parse_body(ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\">"
                               "</RetrievePropertiesExResponse>" ENV_TAIL,
                      &doc);
    assert_int_equal(vs_vm_version_parse(body, "vm-42", &vm, &err), HV_E_NOT_FOUND);
    xmlFreeDoc(doc);
    assert_string_equal(vm.change_version, "2024-01-01T00:00:00.000003Z");
}

static void test_task_parse(void **state)
{
    (void)state;
    xmlDocPtr doc;
    enum vs_task_state st;
    struct vs_fault f;
    struct hv_err err = {0};
    xmlNodePtr body = parse_body(
        ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                 "<obj type=\"Task\">task-45</obj><propSet><name>info.state</name><val " XSI
                 "\"TaskInfoState\">error</val></propSet><propSet><name>info.error</name>"
                 "<val " XSI "\"LocalizedMethodFault\"><fault XMLSchema-instance:type="
                 "\"InvalidPowerState\"><existingState>poweredOn</existingState></fault>"
                 "<localizedMessage>*types.InvalidPowerState</localizedMessage></val>"
                 "</propSet></objects></returnval></RetrievePropertiesExResponse>" ENV_TAIL,
        &doc);
    assert_int_equal(vs_task_parse(body, "task-45", &st, &f, &err), HV_OK);
    assert_int_equal(st, VS_TASK_ERROR);
    assert_string_equal(f.type, "InvalidPowerState");
    assert_string_equal(f.message, "*types.InvalidPowerState");
    assert_int_equal(vs_task_parse(body, "task-46", &st, &f, &err), HV_E_INTERNAL);
    xmlFreeDoc(doc);

    body = parse_body(ENV_HEAD "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval>"
                               "<objects><obj type=\"Task\">task-9</obj><propSet><name>"
                               "info.state</name><val>running</val></propSet></objects>"
                               "</returnval></RetrievePropertiesExResponse>" ENV_TAIL,
                      &doc);
    assert_int_equal(vs_task_parse(body, "task-9", &st, &f, &err), HV_OK);
    assert_int_equal(st, VS_TASK_RUNNING);
    xmlFreeDoc(doc);
}

static void test_parser_refusals(void **state)
{
    (void)state;
    struct hv_err err = {0};
    /* Entity expansion ("billion laughs") and external entities: a DTD is refused. */
    const char *dtd = "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b "
                      "\"&a;&a;&a;&a;\">]><x>&b;</x>";
    assert_null(vs_xml_parse(dtd, strlen(dtd), &err));
    assert_int_equal(err.code, HV_E_INTERNAL);
    const char *ext = "<?xml version=\"1.0\"?><!DOCTYPE x SYSTEM \"http://127.0.0.1:1/x.dtd\">"
                      "<x/>";
    assert_null(vs_xml_parse(ext, strlen(ext), &err));
    const char *broken = "<a><b></a>";
    assert_null(vs_xml_parse(broken, strlen(broken), &err));
    assert_string_equal(err.detail, "response is not well-formed XML");
    /* Oversize answers are refused before parsing. */
    assert_null(vs_xml_parse("<x/>", (size_t)VS_RESPONSE_MAX + 1, &err));
    assert_non_null(strstr(err.detail, "larger than"));
    /* Not a SOAP envelope: no body. */
    xmlDocPtr doc = vs_xml_parse("<x/>", 4, &err);
    assert_non_null(doc);
    assert_null(vs_xml_body(doc));
    xmlFreeDoc(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_escaping),
        cmocka_unit_test(test_escape_refusals),
        cmocka_unit_test(test_reconfig_spec),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_fault_codes),
        cmocka_unit_test(test_vm_properties),
        cmocka_unit_test(test_vm_missing),
        cmocka_unit_test(test_vm_disk),
        cmocka_unit_test(test_vm_request),
        cmocka_unit_test(test_vm_version),
        cmocka_unit_test(test_task_parse),
        cmocka_unit_test(test_parser_refusals),
    };
    int rc = cmocka_run_group_tests_name("vsphere-xml", tests, NULL, NULL);
    xmlCleanupParser();
    return rc;
}
