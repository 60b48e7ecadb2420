/* lv_cold.c: the power-cycle path: SHUTDOWN (ACPI, plus the guest agent when connected),
 * POWER_OFF (destroy), RECONFIGURE (rewrite the persistent definition of a domain that is off
 * and define it again) and POWER_ON. lv_cold_rewrite_xml is the pure XML part (unit-tested):
 * it returns a malloc'd document the caller frees; libxml2 trees never leave this file.
 *
 * RECONFIGURE's folding rule, so the domain boots with exactly the desired memory:
 *  - DIMMs and virtio-mem devices are removed: their memory moves into the NUMA cells, so
 *    the boot gives exactly the desired memory with no guest driver involved and libvirt's
 *    <memory> total equals it. maxMemory and its slots stay, so DIMM hot-add remains possible
 *    after the restart (a removed virtio-mem device is not recreated). Other memory devices
 *    (nvdimm, virtio-pmem: storage, not RAM) are kept as they are.
 *  - the desired memory is spread evenly over the NUMA cells (whole MiB, the remainder to the
 *    first cell); <memory> = desired + kept devices, <currentMemory> = desired, and maxMemory
 *    is raised when that total would exceed it.
 *  - vCPUs: the maximum never shrinks (hot-plug room is kept); it grows to the desired count,
 *    rounded up to whole sockets when a topology is (or becomes) present, and the topology's
 *    sockets follow. <vcpus> (per-vCPU state) is dropped, libvirt rebuilds it; vCPUs no NUMA
 *    cell lists are added to the first cell.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "lv_internal.h"

static xmlNodePtr lv_elem(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST name) == 0)
            return c;
    }
    return NULL;
}

/* the child element name of parent, created (before `before` when given) if absent */
static xmlNodePtr lv_elem_ensure(xmlNodePtr parent, const char *name, xmlNodePtr before)
{
    xmlNodePtr n = lv_elem(parent, name);
    if (n)
        return n;
    n = xmlNewNode(NULL, BAD_CAST name);
    if (!n)
        return NULL;
    if (before)
        return xmlAddPrevSibling(before, n);
    return xmlAddChild(parent, n);
}

static void lv_set_kib(xmlNodePtr n, long long kib)
{
    char num[32];
    snprintf(num, sizeof(num), "%lld", kib);
    xmlNodeSetContent(n, BAD_CAST num);
    xmlSetProp(n, BAD_CAST "unit", BAD_CAST "KiB");
}

static void lv_set_int_prop(xmlNodePtr n, const char *name, long long v)
{
    char num[32];
    snprintf(num, sizeof(num), "%lld", v);
    xmlSetProp(n, BAD_CAST name, BAD_CAST num);
}

static void lv_format_cpuset(const bool *set, int max, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < max; i++) {
        if (!set[i])
            continue;
        int j = i;
        while (j + 1 < max && set[j + 1])
            j++;
        int w = j > i ? snprintf(out + o, len - o, "%s%d-%d", o ? "," : "", i, j)
                      : snprintf(out + o, len - o, "%s%d", o ? "," : "", i);
        if (w < 0 || (size_t)w >= len - o)
            return;
        o += (size_t)w;
        i = j;
    }
}

static int lv_rewrite_memory(xmlNodePtr root, const struct lv_dominfo *li, long long want,
                             char *why, size_t whylen)
{
    xmlNodePtr devs = lv_elem(root, "devices");
    long long kept = 0;
    xmlNodePtr next;
    for (xmlNodePtr c = devs ? devs->children : NULL; c; c = next) {
        next = c->next;
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "memory") != 0)
            continue;
        xmlChar *model = xmlGetProp(c, BAD_CAST "model");
        bool fold = model && (xmlStrcmp(model, BAD_CAST "dimm") == 0 ||
                              xmlStrcmp(model, BAD_CAST "virtio-mem") == 0);
        xmlFree(model);
        if (fold) {
            xmlUnlinkNode(c);
            xmlFreeNode(c);
            continue;
        }
        xmlNodePtr t = lv_elem(c, "target");
        xmlNodePtr size = lv_elem(t, "size");
        xmlChar *sv = size ? xmlNodeGetContent(size) : NULL;
        xmlChar *su = size ? xmlGetProp(size, BAD_CAST "unit") : NULL;
        long long kib = lv_xml_to_kib((const char *)sv, (const char *)su);
        xmlFree(sv);
        xmlFree(su);
        kept += kib > 0 ? kib : 0;
    }

    if (li->ncells > 0) {
        xmlNodePtr numa = lv_elem(lv_elem(root, "cpu"), "numa");
        long long per = want / 1024 / li->ncells * 1024;
        if (per <= 0) {
            snprintf(why, whylen, "desired memory smaller than one MiB per NUMA cell");
            return -1;
        }
        int k = 0;
        for (xmlNodePtr c = numa ? numa->children : NULL; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "cell") != 0)
                continue;
            long long v = k == 0 ? want - per * (li->ncells - 1) : per;
            lv_set_int_prop(c, "memory", v);
            xmlSetProp(c, BAD_CAST "unit", BAD_CAST "KiB");
            k++;
        }
    }
    long long total = want + kept;
    xmlNodePtr mem = lv_elem(root, "memory");
    if (!mem) {
        snprintf(why, whylen, "domain XML has no <memory>");
        return -1;
    }
    lv_set_kib(mem, total);
    xmlNodePtr cur = lv_elem(root, "currentMemory");
    if (!cur) {
        cur = xmlNewNode(NULL, BAD_CAST "currentMemory");
        if (cur)
            xmlAddNextSibling(mem, cur);
    }
    if (cur)
        lv_set_kib(cur, want);
    xmlNodePtr maxm = lv_elem(root, "maxMemory");
    if (maxm && li->max_kib >= 0 && total > li->max_kib)
        lv_set_kib(maxm, total); /* slots stay as they were */
    return 0;
}

static int lv_rewrite_cpus(xmlNodePtr root, const struct lv_dominfo *li, const struct hv_hw *hw,
                           char *why, size_t whylen)
{
    int want = hw->cpus > 0 ? hw->cpus : li->vcpu_current;
    int cores = hw->cores_per_socket > 0 ? hw->cores_per_socket : li->cores;
    int newmax = want > li->vcpu_max ? want : li->vcpu_max;
    xmlNodePtr devs = lv_elem(root, "devices");
    if (cores > 0) {
        int threads = li->threads > 0 ? li->threads : 1;
        int dies = li->dies > 0 ? li->dies : 1;
        /* values from domain XML: multiplied in 64 bits, and no socket may hold more vCPUs
         * than a domain can have (each factor is at most INT_MAX, so this cannot overflow) */
        long long unit = (long long)cores * threads;
        if (unit <= LV_MAX_VCPUS)
            unit *= dies;
        if (unit > LV_MAX_VCPUS) {
            snprintf(why, whylen, "a socket of this topology holds more than %d vCPUs",
                     LV_MAX_VCPUS);
            return -1;
        }
        newmax = (int)lv_align_up(newmax, unit);
        xmlNodePtr cpu = lv_elem_ensure(root, "cpu", devs);
        xmlNodePtr topo = cpu ? lv_elem_ensure(cpu, "topology", cpu->children) : NULL;
        if (!topo) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        lv_set_int_prop(topo, "sockets", newmax / unit);
        lv_set_int_prop(topo, "dies", dies);
        lv_set_int_prop(topo, "cores", cores);
        lv_set_int_prop(topo, "threads", threads);
    }
    if (newmax > LV_MAX_VCPUS) {
        snprintf(why, whylen, "more than %d vCPUs", LV_MAX_VCPUS);
        return -1;
    }
    xmlNodePtr vcpu = lv_elem(root, "vcpu");
    if (!vcpu) {
        vcpu = xmlNewNode(NULL, BAD_CAST "vcpu");
        if (!vcpu || !xmlAddNextSibling(lv_elem(root, "memory"), vcpu)) {
            snprintf(why, whylen, "cannot add <vcpu>");
            return -1;
        }
    }
    char num[32];
    snprintf(num, sizeof(num), "%d", newmax);
    xmlNodeSetContent(vcpu, BAD_CAST num);
    if (want < newmax)
        lv_set_int_prop(vcpu, "current", want);
    else
        xmlUnsetProp(vcpu, BAD_CAST "current");
    xmlNodePtr vcpus = lv_elem(root, "vcpus");
    if (vcpus) {
        xmlUnlinkNode(vcpus);
        xmlFreeNode(vcpus);
    }

    /* every vCPU must belong to a NUMA cell: the ones no cell lists go to the first cell */
    xmlNodePtr numa = lv_elem(lv_elem(root, "cpu"), "numa");
    xmlNodePtr first = NULL;
    bool *all = calloc(LV_MAX_VCPUS, sizeof(bool)), *one = calloc(LV_MAX_VCPUS, sizeof(bool));
    int rc = 0;
    if (!all || !one) {
        snprintf(why, whylen, "out of memory");
        rc = -1;
        goto out;
    }
    for (xmlNodePtr c = numa ? numa->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "cell") != 0)
            continue;
        xmlChar *cpus = xmlGetProp(c, BAD_CAST "cpus");
        if (!first)
            first = c;
        if (cpus && lv_xml_parse_cpuset((const char *)cpus, one, LV_MAX_VCPUS) == 0) {
            for (int i = 0; i < LV_MAX_VCPUS; i++)
                all[i] = all[i] || one[i];
        }
        xmlFree(cpus);
    }
    if (first) {
        xmlChar *cpus = xmlGetProp(first, BAD_CAST "cpus");
        if (!cpus || lv_xml_parse_cpuset((const char *)cpus, one, LV_MAX_VCPUS) < 0)
            memset(one, 0, LV_MAX_VCPUS * sizeof(bool));
        xmlFree(cpus);
        bool added = false;
        for (int i = 0; i < newmax; i++) {
            if (!all[i]) {
                one[i] = true;
                added = true;
            }
        }
        if (added) {
            char buf[1024];
            lv_format_cpuset(one, LV_MAX_VCPUS, buf, sizeof(buf));
            xmlSetProp(first, BAD_CAST "cpus", BAD_CAST buf);
        }
    }
out:
    free(all);
    free(one);
    return rc;
}

int lv_cold_rewrite_xml(const char *xml, const struct hv_hw *desired, char **out, char *why,
                        size_t whylen)
{
    *out = NULL;
    if (desired->memory_mib == 0 || desired->cpus == 0 || desired->cores_per_socket == 0) {
        snprintf(why, whylen, "desired values must be positive");
        return -1;
    }
    struct lv_dominfo li;
    if (lv_xml_parse_domain(xml, &li, why, whylen) < 0)
        return -1;
    xmlDocPtr doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        snprintf(why, whylen, "domain XML does not parse");
        return -1;
    }
    int rc = -1;
    xmlNodePtr root = xmlDocGetRootElement(doc);
    if (desired->memory_mib > 0 &&
        lv_rewrite_memory(root, &li, (long long)desired->memory_mib * 1024, why, whylen) < 0)
        goto done;
    if ((desired->cpus > 0 || desired->cores_per_socket > 0) &&
        lv_rewrite_cpus(root, &li, desired, why, whylen) < 0)
        goto done;
    xmlChar *buf = NULL;
    int len = 0;
    xmlDocDumpMemory(doc, &buf, &len);
    if (!buf) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    *out = strdup((const char *)buf);
    xmlFree(buf);
    rc = *out ? 0 : -1;
done:
    xmlFreeDoc(doc);
    return rc;
}

static int lv_reconfigure(struct lv_dom *d, const struct hv_hw *desired, const char *disk,
                          struct hv_err *err)
{
    int active = virDomainIsActive(d->dom);
    if (active < 0)
        return lv_fail(d, "virDomainIsActive", err);
    if (active)
        return lv_seterr(err, HV_E_INVALID_STATE, "domain must be off to reconfigure");
    /* The disk first: growing its volume is idempotent, so a failed define after it is
     * simply retried by the next pass. */
    int drc = lv_grow_volume(d, disk, desired->disk_mib, err);
    if (drc != HV_OK)
        return drc;
    /* SECURE: keep passwords (graphics, ...) that a plain dump would leave out */
    char *xml = virDomainGetXMLDesc(d->dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
    if (!xml)
        return lv_fail(d, "virDomainGetXMLDesc(inactive)", err);
    char *nxml = NULL, why[256];
    int rc = lv_cold_rewrite_xml(xml, desired, &nxml, why, sizeof(why));
    free(xml);
    if (rc < 0)
        return lv_seterr(err, HV_E_UNSUPPORTED, "reconfigure: %s", why);
    d->mutated = true;
    virDomainPtr nd = virDomainDefineXMLFlags(d->conn, nxml, VIR_DOMAIN_DEFINE_VALIDATE);
    free(nxml);
    if (!nd)
        return lv_fail(d, "virDomainDefineXMLFlags", err);
    virDomainFree(nd);
    return HV_OK;
}

static int lv_shutdown(struct lv_dom *d, const struct hv_step *s, struct hv_err *err)
{
    struct lv_dominfo li;
    bool active;
    int rc = lv_read_live(d, &li, &active, NULL, err);
    if (rc != HV_OK)
        return rc;
    if (!active)
        return HV_OK;
    unsigned int flags = VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN;
    if (li.agent_connected) {
        /* the agent's answer is the one wait libvirt lets us bound; the setting lasts only
         * until the domain stops, which is what we are asking for */
        int ms = s->timeout_ms > 0 ? s->timeout_ms : d->be->call_timeout_ms;
        int secs = (ms + 999) / 1000;
        if (virDomainAgentSetResponseTimeout(d->dom, secs > 0 ? secs : 1, 0) < 0)
            virResetLastError();
        flags |= VIR_DOMAIN_SHUTDOWN_GUEST_AGENT;
    }
    d->mutated = true;
    if (virDomainShutdownFlags(d->dom, flags) < 0) {
        struct lv_lasterr e;
        lv_error_capture(&e);
        if (e.code != VIR_ERR_INVALID_ARG && e.code != VIR_ERR_ARGUMENT_UNSUPPORTED)
            return lv_fail_err(d, &e, "virDomainShutdownFlags", err);
        /* a driver that refuses to be told how (test://): its own default method */
        if (virDomainShutdownFlags(d->dom, 0) < 0)
            return lv_fail(d, "virDomainShutdownFlags(default)", err);
    }
    return HV_OK;
}

static int lv_power_off(struct lv_dom *d, struct hv_err *err)
{
    int active = virDomainIsActive(d->dom);
    if (active < 0)
        return lv_fail(d, "virDomainIsActive", err);
    if (!active)
        return HV_OK;
    d->mutated = true;
    if (virDomainDestroy(d->dom) < 0) {
        struct lv_lasterr e;
        lv_error_capture(&e);
        if (virDomainIsActive(d->dom) == 0)
            return HV_OK; /* it stopped by itself meanwhile */
        return lv_fail_err(d, &e, "virDomainDestroy", err);
    }
    return HV_OK;
}

static int lv_power_on(struct lv_dom *d, struct hv_err *err)
{
    int state = VIR_DOMAIN_NOSTATE, reason = 0;
    if (virDomainGetState(d->dom, &state, &reason, 0) < 0)
        return lv_fail(d, "virDomainGetState", err);
    if (state == VIR_DOMAIN_PAUSED) {
        d->mutated = true;
        if (virDomainResume(d->dom) < 0)
            return lv_fail(d, "virDomainResume", err);
        return HV_OK;
    }
    int active = virDomainIsActive(d->dom);
    if (active < 0)
        return lv_fail(d, "virDomainIsActive", err);
    if (active)
        return HV_OK;
    d->mutated = true;
    if (virDomainCreate(d->dom) < 0)
        return lv_fail(d, "virDomainCreate", err);
    return HV_OK;
}

int lv_act_cold(struct lv_dom *d, const struct hv_step *s, const char *disk_target,
                struct hv_err *err)
{
    if (s->kind == HV_STEP_SHUTDOWN || s->kind == HV_STEP_POWER_OFF) {
        /* a transient domain that stops is gone: never the backend that deletes a VM */
        int persistent = virDomainIsPersistent(d->dom);
        if (persistent < 0)
            return lv_fail(d, "virDomainIsPersistent", err);
        if (persistent == 0 && virDomainIsActive(d->dom) == 1)
            return lv_seterr(err, HV_E_UNSUPPORTED, "%s", LV_R_TRANSIENT);
    }
    switch (s->kind) {
    case HV_STEP_SHUTDOWN:
        return lv_shutdown(d, s, err);
    case HV_STEP_POWER_OFF:
        return lv_power_off(d, err);
    case HV_STEP_RECONFIGURE:
        return lv_reconfigure(d, &s->desired, disk_target, err);
    case HV_STEP_POWER_ON:
        return lv_power_on(d, err);
    default:
        return lv_seterr(err, HV_E_INTERNAL, "not a cold step: %d", (int)s->kind);
    }
}
