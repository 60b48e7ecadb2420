/* vs_props.c: SearchIndex.FindByUuid and the single RetrievePropertiesEx that observes a
 * VM: power state, hardware, hot-plug settings, changeVersion, VMware Tools, our extraConfig
 * record, and (through a TraversalSpec over recentTask) whether a task is still running.
 * Requests are built and answers parsed here; vs_soap.c moves the bytes.
 */
#include "vs_props.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vs_config.h"

static const char *const vm_paths[] = {
    "config.uuid",
    "runtime.powerState",
    "config.hardware.memoryMB",
    "config.hardware.numCPU",
    "config.hardware.numCoresPerSocket",
    "config.memoryHotAddEnabled",
    "config.cpuHotAddEnabled",
    "config.cpuHotRemoveEnabled",
    "config.hotPlugMemoryLimit",
    "config.hotPlugMemoryIncrementSize",
    "config.changeVersion",
    "guest.toolsRunningStatus",
    "config.extraConfig",
    "config.hardware.device",
    "snapshot",
};

void vs_find_request(struct vs_buf *b, const char *search_index, const char *uuid)
{
    vs_env_begin(b, "FindByUuid", "SearchIndex", search_index);
    vs_buf_elem(b, "uuid", uuid);
    vs_buf_add(b, "<vmSearch>true</vmSearch><instanceUuid>false</instanceUuid>");
    vs_env_end(b, "FindByUuid");
}

void vs_find_parse(xmlNodePtr body, char *moref, size_t len)
{
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    if (!vs_xml_text(rv, moref, len))
        moref[0] = '\0';
}

static int find_once(struct vs_server *s, const struct vs_content *c, const char *uuid,
                     int timeout_ms, char *moref, size_t len, struct hv_err *err)
{
    struct vs_buf req;
    vs_buf_init(&req);
    vs_find_request(&req, c->search_index, uuid);
    struct vs_reply r;
    int rc = vs_call(s, "FindByUuid", &req, timeout_ms, &r, err);
    vs_buf_free(&req);
    if (rc != HV_OK)
        return rc;
    vs_find_parse(r.body, moref, len);
    vs_reply_free(&r);
    return HV_OK;
}

int vs_find_vm(struct vs_server *s, const char *uuid, int timeout_ms, char *moref, size_t len,
               struct hv_err *err)
{
    moref[0] = '\0';
    const struct vs_content *c = vs_session(s, timeout_ms, err);
    if (!c)
        return err->code;
    int rc = find_once(s, c, uuid, timeout_ms, moref, len, err);
    if (rc != HV_OK || moref[0])
        return rc;
    /* SearchIndex compares case-sensitively (the simulator does); BIOS UUIDs are stored
     * lower-case, while a providerID may carry them upper-case. */
    char lower[64];
    size_t n = strlen(uuid);
    if (n >= sizeof(lower))
        return HV_OK;
    bool differs = false;
    for (size_t i = 0; i <= n; i++) {
        lower[i] = (char)tolower((unsigned char)uuid[i]);
        differs |= lower[i] != uuid[i];
    }
    if (!differs)
        return HV_OK;
    return find_once(s, c, lower, timeout_ms, moref, len, err);
}

void vs_vm_task_request(struct vs_buf *b, const char *property_collector, const char *moref,
                        const char *task)
{
    vs_env_begin(b, "RetrievePropertiesEx", "PropertyCollector", property_collector);
    vs_buf_add(b, "<specSet><propSet><type>VirtualMachine</type><all>false</all>");
    for (size_t i = 0; i < sizeof(vm_paths) / sizeof(vm_paths[0]); i++)
        vs_buf_elem(b, "pathSet", vm_paths[i]);
    vs_buf_add(b, "</propSet><propSet><type>Task</type><all>false</all>"
                  "<pathSet>info.state</pathSet><pathSet>info.error</pathSet></propSet>"
                  "<propSet><type>Datastore</type><all>false</all>"
                  "<pathSet>summary.freeSpace</pathSet></propSet><objectSet>");
    vs_buf_moref(b, "obj", "VirtualMachine", moref);
    vs_buf_add(b, "<skip>false</skip><selectSet xsi:type=\"TraversalSpec\"><name>vmTasks</name>"
                  "<type>VirtualMachine</type><path>recentTask</path><skip>false</skip>"
                  "</selectSet><selectSet xsi:type=\"TraversalSpec\"><name>vmDatastores</name>"
                  "<type>VirtualMachine</type><path>datastore</path><skip>false</skip>"
                  "</selectSet></objectSet>");
    if (task && task[0]) {
        vs_buf_add(b, "<objectSet>");
        vs_buf_moref(b, "obj", "Task", task);
        vs_buf_add(b, "<skip>false</skip></objectSet>");
    }
    vs_buf_add(b, "</specSet><options></options>");
    vs_env_end(b, "RetrievePropertiesEx");
}

void vs_vm_version_request(struct vs_buf *b, const char *property_collector, const char *moref,
                           const char *task)
{
    vs_env_begin(b, "RetrievePropertiesEx", "PropertyCollector", property_collector);
    vs_buf_add(b, "<specSet><propSet><type>VirtualMachine</type><all>false</all>"
                  "<pathSet>config.changeVersion</pathSet><pathSet>config.extraConfig</pathSet>"
                  "</propSet><propSet><type>Task</type><all>false</all>"
                  "<pathSet>info.state</pathSet><pathSet>info.error</pathSet></propSet>"
                  "<objectSet>");
    vs_buf_moref(b, "obj", "VirtualMachine", moref);
    vs_buf_add(b, "<skip>false</skip></objectSet><objectSet>");
    vs_buf_moref(b, "obj", "Task", task);
    vs_buf_add(b, "<skip>false</skip></objectSet></specSet><options></options>");
    vs_env_end(b, "RetrievePropertiesEx");
}

void vs_vm_request(struct vs_buf *b, const char *property_collector, const char *moref)
{
    vs_vm_task_request(b, property_collector, moref, NULL);
}

static bool text_bool(xmlNodePtr val)
{
    char t[16];
    return vs_xml_text(val, t, sizeof(t)) && strcmp(t, "true") == 0;
}

static int64_t text_i64(xmlNodePtr val, int64_t fallback)
{
    char t[32];
    if (!vs_xml_text(val, t, sizeof(t)) || !t[0])
        return fallback;
    char *end;
    long long v = strtoll(t, &end, 10);
    return *end ? fallback : (int64_t)v;
}

/* Last entry for our key wins; returns false when its value does not fit a record. */
static bool read_record(xmlNodePtr val, char *record, size_t len)
{
    bool ok = true;
    for (xmlNodePtr o = vs_xml_child(val, NULL); o; o = vs_xml_next(o, NULL)) {
        char key[128];
        if (!vs_xml_child_text(o, "key", key, sizeof(key)) ||
            strcmp(key, HV_VSPHERE_RECORD_KEY) != 0)
            continue;
        xmlNodePtr value = vs_xml_child(o, "value");
        ok = value ? vs_xml_text(value, record, len) : true;
        if (!value)
            record[0] = '\0';
    }
    return ok;
}

/* Write element n as a request carries it: local names, the XML Schema instance type as
 * "xsi:type" (the envelope binds xsi; answers may use any prefix for it, the simulator's
 * is "XMLSchema-instance"), other attributes unqualified, text escaped. */
static void write_elem(struct vs_buf *b, xmlNodePtr n)
{
    vs_buf_addf(b, "<%s", (const char *)n->name);
    for (xmlAttrPtr a = n->properties; a; a = a->next) {
        xmlChar *v = xmlNodeListGetString(n->doc, a->children, 1);
        bool xsi = a->ns && a->ns->href &&
                   !strcmp((const char *)a->ns->href, "http://www.w3.org/2001/XMLSchema-instance");
        if (!a->ns || xsi) {
            vs_buf_addf(b, " %s%s=\"", xsi ? "xsi:" : "", (const char *)a->name);
            vs_buf_esc(b, v ? (const char *)v : "");
            vs_buf_add(b, "\"");
        }
        xmlFree(v);
    }
    vs_buf_add(b, ">");
    for (xmlNodePtr c = n->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) {
            write_elem(b, c);
        } else if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
            vs_buf_esc(b, c->content ? (const char *)c->content : "");
        }
    }
    vs_buf_addf(b, "</%s>", (const char *)n->name);
}

/* Append node's serialisation to d->xml; false when it does not fit. */
static bool dump_child(struct vs_disk *d, size_t *len, xmlNodePtr node)
{
    struct vs_buf b;
    vs_buf_init(&b);
    write_elem(&b, node);
    bool ok = !b.failed && b.data && *len + b.len < sizeof(d->xml);
    if (ok) {
        memcpy(d->xml + *len, b.data, b.len);
        *len += b.len;
        d->xml[*len] = '\0';
    }
    vs_buf_free(&b);
    return ok;
}

/* Fill d from one <VirtualDevice xsi:type="VirtualDisk"> element. */
static void read_disk(xmlNodePtr dev, struct vs_disk *d)
{
    memset(d, 0, sizeof(*d));
    d->found = true;
    d->unit_number = -1;
    int64_t kb = -1, bytes = -1;
    size_t len = 0;
    bool fits = true, split_set = false;
    for (xmlNodePtr c = vs_xml_child(dev, NULL); c; c = vs_xml_next(c, NULL)) {
        const char *n = (const char *)c->name;
        if (!strcmp(n, "capacityInKB") || !strcmp(n, "capacityInBytes")) {
            if (!strcmp(n, "capacityInKB"))
                kb = text_i64(c, -1);
            else
                bytes = text_i64(c, -1);
            if (!split_set)
                d->split = len;
            split_set = true;
            continue;
        }
        if (!strcmp(n, "key"))
            d->key = (int32_t)text_i64(c, 0);
        else if (!strcmp(n, "controllerKey"))
            d->controller_key = (int32_t)text_i64(c, 0);
        else if (!strcmp(n, "unitNumber"))
            d->unit_number = (int32_t)text_i64(c, -1);
        else if (!strcmp(n, "backing")) {
            char t[16];
            vs_xml_xsi_type(c, d->backing, sizeof(d->backing));
            d->thin = vs_xml_child_text(c, "thinProvisioned", t, sizeof(t)) && !strcmp(t, "true");
            vs_xml_child_text(c, "datastore", d->datastore, sizeof(d->datastore));
        } else if (!split_set && (!strcmp(n, "shares") || !strcmp(n, "storageIOAllocation") ||
                                  !strcmp(n, "diskObjectId") || !strcmp(n, "vDiskId") ||
                                  !strcmp(n, "iofilter") || !strcmp(n, "vFlashCacheConfigInfo") ||
                                  !strcmp(n, "nativeUnmanagedLinkedClone"))) {
            d->split = len; /* the elements that follow the capacities in the WSDL */
            split_set = true;
        }
        fits = fits && dump_child(d, &len, c);
    }
    if (!split_set)
        d->split = len;
    if (!fits) {
        d->xml[0] = '\0';
        d->split = 0;
    }
    d->capacity_bytes = bytes > 0 ? bytes : kb >= 0 ? kb * 1024 : -1;
}

/* The disk sel names among config.hardware.device, and its controller's type. */
static void read_devices(xmlNodePtr val, const char *sel, struct vs_disk *d)
{
    int want_unit = -1;
    if (sel && sel[0])
        want_unit = atoi(sel);
    xmlNodePtr chosen = NULL;
    for (xmlNodePtr dev = vs_xml_child(val, NULL); dev && !chosen; dev = vs_xml_next(dev, NULL)) {
        char type[64], unit[16];
        vs_xml_xsi_type(dev, type, sizeof(type));
        if (strcmp(type, "VirtualDisk"))
            continue;
        if (want_unit < 0 ||
            (vs_xml_child_text(dev, "unitNumber", unit, sizeof(unit)) && atoi(unit) == want_unit))
            chosen = dev;
    }
    memset(d, 0, sizeof(*d));
    if (!chosen)
        return;
    read_disk(chosen, d);
    for (xmlNodePtr dev = vs_xml_child(val, NULL); dev; dev = vs_xml_next(dev, NULL)) {
        char key[16];
        if (vs_xml_child_text(dev, "key", key, sizeof(key)) && atoi(key) == d->controller_key) {
            vs_xml_xsi_type(dev, d->controller, sizeof(d->controller));
            break;
        }
    }
}

static void vm_prop(struct vs_vm *vm, const char *name, xmlNodePtr val, bool *record_ok,
                    const char *disk_sel)
{
    char t[64];
    if (strcmp(name, "config.uuid") == 0) {
        vs_xml_text(val, vm->uuid, sizeof(vm->uuid));
    } else if (strcmp(name, "runtime.powerState") == 0) {
        vs_xml_text(val, t, sizeof(t));
        vm->power = strcmp(t, "poweredOn") == 0    ? HV_POWER_ON
                    : strcmp(t, "poweredOff") == 0 ? HV_POWER_OFF
                    : strcmp(t, "suspended") == 0  ? HV_POWER_PAUSED
                                                   : HV_POWER_UNKNOWN;
    } else if (strcmp(name, "config.hardware.memoryMB") == 0) {
        vm->memory_mb = text_i64(val, -1);
    } else if (strcmp(name, "config.hardware.numCPU") == 0) {
        vm->cpus = (int32_t)text_i64(val, -1);
    } else if (strcmp(name, "config.hardware.numCoresPerSocket") == 0) {
        vm->cores_per_socket = (int32_t)text_i64(val, -1);
    } else if (strcmp(name, "config.memoryHotAddEnabled") == 0) {
        vm->mem_hot_add = text_bool(val);
    } else if (strcmp(name, "config.cpuHotAddEnabled") == 0) {
        vm->cpu_hot_add = text_bool(val);
    } else if (strcmp(name, "config.cpuHotRemoveEnabled") == 0) {
        vm->cpu_hot_remove = text_bool(val);
    } else if (strcmp(name, "config.hotPlugMemoryLimit") == 0) {
        vm->hotplug_limit_mb = text_i64(val, 0);
    } else if (strcmp(name, "config.hotPlugMemoryIncrementSize") == 0) {
        vm->hotplug_increment_mb = text_i64(val, 0);
    } else if (strcmp(name, "config.changeVersion") == 0) {
        vs_xml_text(val, vm->change_version, sizeof(vm->change_version));
    } else if (strcmp(name, "guest.toolsRunningStatus") == 0) {
        vs_xml_text(val, t, sizeof(t));
        vm->tools_running = strcmp(t, "guestToolsRunning") == 0;
    } else if (strcmp(name, "config.extraConfig") == 0) {
        *record_ok = read_record(val, vm->record, sizeof(vm->record));
    } else if (strcmp(name, "config.hardware.device") == 0) {
        read_devices(val, disk_sel, &vm->disk);
    } else if (strcmp(name, "snapshot") == 0) {
        vm->has_snapshots = vs_xml_child(val, "rootSnapshotList") != NULL;
    }
}

int vs_vm_parse(xmlNodePtr body, const char *moref, struct vs_vm *vm, struct hv_err *err)
{
    return vs_vm_parse_disk(body, moref, NULL, vm, err);
}

int vs_vm_parse_disk(xmlNodePtr body, const char *moref, const char *disk_sel, struct vs_vm *vm,
                     struct hv_err *err)
{
    struct {
        char moref[64];
        int64_t free;
    } ds[VS_MAX_DS];
    size_t nds = 0;
    memset(ds, 0, sizeof(ds));
    memset(vm, 0, sizeof(*vm));
    vm->disk_ds_free = -1;
    vm->memory_mb = -1;
    vm->cpus = -1;
    vm->cores_per_socket = -1;
    snprintf(vm->moref, sizeof(vm->moref), "%s", moref);
    bool seen = false, record_ok = true;
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        xmlNodePtr obj = vs_xml_child(o, "obj");
        char type[32], value[64];
        xmlChar *t = obj ? xmlGetProp(obj, (const xmlChar *)"type") : NULL;
        snprintf(type, sizeof(type), "%s", t ? (const char *)t : "");
        xmlFree(t);
        vs_xml_text(obj, value, sizeof(value));
        bool is_vm = strcmp(type, "VirtualMachine") == 0 && strcmp(value, moref) == 0;
        seen |= is_vm;
        for (xmlNodePtr p = vs_xml_child(o, "propSet"); p; p = vs_xml_next(p, "propSet")) {
            char name[64];
            if (!vs_xml_child_text(p, "name", name, sizeof(name)))
                continue;
            xmlNodePtr val = vs_xml_child(p, "val");
            if (is_vm) {
                vm_prop(vm, name, val, &record_ok, disk_sel);
            } else if (strcmp(type, "Datastore") == 0 && strcmp(name, "summary.freeSpace") == 0 &&
                       nds < VS_MAX_DS) {
                snprintf(ds[nds].moref, sizeof(ds[nds].moref), "%s", value);
                ds[nds++].free = text_i64(val, -1);
            } else if (strcmp(type, "Task") == 0 && strcmp(name, "info.state") == 0) {
                char state[32];
                vs_xml_text(val, state, sizeof(state));
                vm->busy |= strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
            }
        }
    }
    if (!seen)
        return vs_err(err, HV_E_NOT_FOUND, "VM %s is not in the property answer", moref);
    for (size_t k = 0; k < nds; k++)
        if (vm->disk.found && !strcmp(ds[k].moref, vm->disk.datastore))
            vm->disk_ds_free = ds[k].free;
    if (!record_ok)
        return vs_err(err, HV_E_INTERNAL, "extraConfig %s on %s exceeds %d bytes",
                      HV_VSPHERE_RECORD_KEY, moref, HV_RECORD_MAX - 1);
    return HV_OK;
}

int vs_vm_version_parse(xmlNodePtr body, const char *moref, struct vs_vm *vm, struct hv_err *err)
{
    char version[sizeof(vm->change_version)] = "", record[HV_RECORD_MAX] = "";
    bool seen = false, record_ok = true;
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        xmlNodePtr obj = vs_xml_child(o, "obj");
        char value[64];
        xmlChar *t = obj ? xmlGetProp(obj, (const xmlChar *)"type") : NULL;
        bool is_vm = t && strcmp((const char *)t, "VirtualMachine") == 0 &&
                     vs_xml_text(obj, value, sizeof(value)) && strcmp(value, moref) == 0;
        xmlFree(t);
        if (!is_vm)
            continue;
        seen = true;
        for (xmlNodePtr p = vs_xml_child(o, "propSet"); p; p = vs_xml_next(p, "propSet")) {
            char name[64];
            if (!vs_xml_child_text(p, "name", name, sizeof(name)))
                continue;
            xmlNodePtr val = vs_xml_child(p, "val");
            if (strcmp(name, "config.changeVersion") == 0)
                vs_xml_text(val, version, sizeof(version));
            else if (strcmp(name, "config.extraConfig") == 0)
                record_ok = read_record(val, record, sizeof(record));
        }
    }
    if (!seen)
        return vs_err(err, HV_E_NOT_FOUND, "VM %s is not in the property answer", moref);
    if (!record_ok)
        return vs_err(err, HV_E_INTERNAL, "extraConfig %s on %s exceeds %d bytes",
                      HV_VSPHERE_RECORD_KEY, moref, HV_RECORD_MAX - 1);
    memcpy(vm->change_version, version, sizeof(version));
    memcpy(vm->record, record, sizeof(record));
    return HV_OK;
}

int vs_read_vm(struct vs_server *s, const char *moref, const char *disk_sel, int timeout_ms,
               struct vs_vm *vm, struct hv_err *err)
{
    const struct vs_content *c = vs_session(s, timeout_ms, err);
    if (!c)
        return err->code;
    struct vs_buf req;
    vs_buf_init(&req);
    vs_vm_request(&req, c->property_collector, moref);
    struct vs_reply r;
    int rc = vs_call(s, "RetrievePropertiesEx", &req, timeout_ms, &r, err);
    vs_buf_free(&req);
    if (rc != HV_OK)
        return rc;
    rc = vs_vm_parse_disk(r.body, moref, disk_sel, vm, err);
    vs_reply_free(&r);
    return rc;
}

/* Report the VMs of one RetrievePropertiesEx(-Continue) answer, with our record when they
 * carry it; the continuation token goes to token ("" when the answer is the last). */
static void list_parse(xmlNodePtr body, vs_record_fn fn, void *ctx, char *token, size_t toklen)
{
    xmlNodePtr rv = vs_xml_child(body, "returnval");
    if (!vs_xml_child_text(rv, "token", token, toklen))
        token[0] = '\0';
    char *record = malloc(HV_RECORD_MAX);
    if (!record)
        return;
    for (xmlNodePtr o = vs_xml_child(rv, "objects"); o; o = vs_xml_next(o, "objects")) {
        char moref[64], name[HV_NAME_MAX] = "", uuid[64] = "", t[32];
        enum hv_power power = HV_POWER_UNKNOWN;
        if (!vs_xml_text(vs_xml_child(o, "obj"), moref, sizeof(moref)))
            continue;
        record[0] = '\0';
        bool record_ok = true;
        for (xmlNodePtr p = vs_xml_child(o, "propSet"); p; p = vs_xml_next(p, "propSet")) {
            char pname[64];
            if (!vs_xml_child_text(p, "name", pname, sizeof(pname)))
                continue;
            xmlNodePtr val = vs_xml_child(p, "val");
            if (strcmp(pname, "name") == 0) {
                vs_xml_text(val, name, sizeof(name));
            } else if (strcmp(pname, "config.uuid") == 0) {
                vs_xml_text(val, uuid, sizeof(uuid));
            } else if (strcmp(pname, "runtime.powerState") == 0) {
                vs_xml_text(val, t, sizeof(t));
                power = strcmp(t, "poweredOn") == 0    ? HV_POWER_ON
                        : strcmp(t, "poweredOff") == 0 ? HV_POWER_OFF
                        : strcmp(t, "suspended") == 0  ? HV_POWER_PAUSED
                                                       : HV_POWER_UNKNOWN;
            } else if (strcmp(pname, "config.extraConfig") == 0) {
                record_ok = read_record(val, record, HV_RECORD_MAX);
            }
        }
        fn(ctx, moref, name, uuid, power, record_ok ? record : "");
    }
    free(record);
}

int vs_list_records(struct vs_server *s, int timeout_ms, vs_record_fn fn, void *ctx,
                    struct hv_err *err)
{
    const struct vs_content *c = vs_session(s, timeout_ms, err);
    if (!c)
        return err->code;
    if (!c->view_manager[0] || !c->root_folder[0])
        return vs_err(err, HV_E_UNSUPPORTED, "the vCenter names no ViewManager or root folder");
    struct vs_buf req;
    struct vs_reply r;
    vs_buf_init(&req);
    vs_env_begin(&req, "CreateContainerView", "ViewManager", c->view_manager);
    vs_buf_moref(&req, "container", "Folder", c->root_folder);
    vs_buf_add(&req, "<type>VirtualMachine</type><recursive>true</recursive>");
    vs_env_end(&req, "CreateContainerView");
    int rc = vs_call(s, "CreateContainerView", &req, timeout_ms, &r, err);
    vs_buf_free(&req);
    if (rc != HV_OK)
        return rc;
    char view[256]; /* (vcsim: "session[<uuid>]<uuid>") */
    bool have_view = vs_xml_child_text(r.body, "returnval", view, sizeof(view)) && view[0];
    vs_reply_free(&r);
    if (!have_view)
        return vs_err(err, HV_E_INTERNAL, "CreateContainerView returned no view");
    char token[256] = "";
    for (int page = 0; rc == HV_OK && (page == 0 || token[0]); page++) {
        vs_buf_init(&req);
        if (page == 0) {
            vs_env_begin(&req, "RetrievePropertiesEx", "PropertyCollector", c->property_collector);
            vs_buf_add(&req, "<specSet><propSet><type>VirtualMachine</type><all>false</all>"
                             "<pathSet>name</pathSet><pathSet>config.uuid</pathSet>"
                             "<pathSet>runtime.powerState</pathSet>"
                             "<pathSet>config.extraConfig</pathSet></propSet><objectSet>");
            vs_buf_moref(&req, "obj", "ContainerView", view);
            vs_buf_add(&req, "<skip>true</skip><selectSet xsi:type=\"TraversalSpec\">"
                             "<name>vmsInView</name><type>ContainerView</type><path>view</path>"
                             "<skip>false</skip></selectSet></objectSet></specSet>"
                             "<options></options>");
            vs_env_end(&req, "RetrievePropertiesEx");
        } else {
            vs_env_begin(&req, "ContinueRetrievePropertiesEx", "PropertyCollector",
                         c->property_collector);
            vs_buf_elem(&req, "token", token);
            vs_env_end(&req, "ContinueRetrievePropertiesEx");
        }
        rc = vs_call(s, page == 0 ? "RetrievePropertiesEx" : "ContinueRetrievePropertiesEx", &req,
                     timeout_ms, &r, err);
        vs_buf_free(&req);
        if (rc == HV_OK) {
            list_parse(r.body, fn, ctx, token, sizeof(token));
            vs_reply_free(&r);
        }
    }
    /* best effort: a view left behind goes with the session */
    struct hv_err derr = {0};
    vs_buf_init(&req);
    vs_env_begin(&req, "DestroyView", "ContainerView", view);
    vs_env_end(&req, "DestroyView");
    if (vs_call(s, "DestroyView", &req, timeout_ms, &r, &derr) == HV_OK)
        vs_reply_free(&r);
    vs_buf_free(&req);
    return rc;
}
