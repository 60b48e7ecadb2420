/* lv_live.c: the live steps: grow memory (virtio-mem <requested>, a new DIMM, or the balloon)
 * and vCPUs on a running domain, persistent definition updated in the same step. Each step
 * re-reads the domain and re-plans first, so it is idempotent (nothing left to do = HV_OK)
 * and refuses when the planned method no longer fits. Success means libvirt accepted the
 * change; whether the guest got it is for the next observe(). Owns nothing past a call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"

static int lv_live_dimm(struct lv_dom *d, const struct lv_mem_choice *c, unsigned int flags,
                        struct hv_err *err)
{
    char dev[256];
    snprintf(dev, sizeof(dev),
             "<memory model='dimm'><target><size unit='KiB'>%lld</size><node>%d</node>"
             "</target></memory>",
             c->dimm_kib, c->node);
    d->mutated = true;
    if (virDomainAttachDeviceFlags(d->dom, dev, flags) < 0)
        return lv_fail(d, "virDomainAttachDeviceFlags(dimm)", err);
    return HV_OK;
}

/* libvirt finds a memory device of the persistent definition by its address, of the live one
 * by alias and address, so each side gets the device as that side describes it. */
static int lv_live_vmem(struct lv_dom *d, const char *live_xml, const struct lv_mem_choice *c,
                        bool persistent, struct hv_err *err)
{
    char addr[128];
    char *dev = lv_xml_vmem_device(live_xml, c->dev, NULL, c->requested_kib, addr, sizeof(addr));
    if (!dev)
        return lv_seterr(err, HV_E_INTERNAL, "virtio-mem device %d vanished from live XML", c->dev);
    d->mutated = true;
    int rc = virDomainUpdateDeviceFlags(d->dom, dev, VIR_DOMAIN_AFFECT_LIVE);
    free(dev);
    if (rc < 0)
        return lv_fail(d, "virDomainUpdateDeviceFlags(virtio-mem, live)", err);
    if (!persistent)
        return HV_OK;
    char *cfg = virDomainGetXMLDesc(d->dom, VIR_DOMAIN_XML_INACTIVE);
    if (!cfg)
        return lv_fail(d, "virDomainGetXMLDesc(inactive)", err);
    dev = lv_xml_vmem_device(cfg, c->dev, addr, c->requested_kib, NULL, 0);
    free(cfg);
    if (!dev)
        return lv_seterr(err, HV_E_INTERNAL,
                         "live virtio-mem changed; persistent definition has no such device");
    rc = virDomainUpdateDeviceFlags(d->dom, dev, VIR_DOMAIN_AFFECT_CONFIG);
    free(dev);
    if (rc < 0)
        return lv_fail(d, "virDomainUpdateDeviceFlags(virtio-mem, config)", err);
    return HV_OK;
}

int lv_act_live_memory(struct lv_dom *d, const struct hv_step *s, struct hv_err *err)
{
    if (s->desired.memory_mib < 0)
        return HV_OK;
    if (s->desired.memory_mib == 0)
        return lv_seterr(err, HV_E_UNSUPPORTED, "memory must be positive");
    struct lv_dominfo li;
    bool active;
    char *xml;
    int rc = lv_read_live(d, &li, &active, &xml, err);
    if (rc != HV_OK)
        return rc;
    long long want = (long long)s->desired.memory_mib * 1024;
    if (!active) {
        rc = lv_seterr(err, HV_E_INVALID_STATE, "domain is not running");
        goto out;
    }
    if (want / 1024 == li.effective_kib / 1024)
        goto out; /* nothing left to do */
    if (want < li.effective_kib) {
        rc = lv_seterr(err, HV_E_UNSUPPORTED, "memory shrink needs a restart");
        goto out;
    }
    struct lv_mem_choice c;
    lv_plan_memory(&li, want, &c);
    if (c.method == LV_MM_NONE) {
        rc = lv_seterr(err, HV_E_UNSUPPORTED, "%s", c.reason);
        goto out;
    }
    const char *name = lv_mem_method_name(c.method);
    if (s->method[0] && strcmp(s->method, name) != 0) {
        rc = lv_seterr(err, HV_E_UNSUPPORTED, "planned method %s no longer applies (now %s)",
                       s->method, name);
        goto out;
    }
    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0) {
        rc = lv_fail(d, "virDomainIsPersistent", err);
        goto out;
    }
    unsigned int flags = VIR_DOMAIN_AFFECT_LIVE | (persistent ? VIR_DOMAIN_AFFECT_CONFIG : 0);
    switch (c.method) {
    case LV_MM_DIMM:
        rc = lv_live_dimm(d, &c, flags, err);
        break;
    case LV_MM_VIRTIO_MEM:
        rc = lv_live_vmem(d, xml, &c, persistent == 1, err);
        break;
    case LV_MM_BALLOON:
        /* two calls: some drivers (test://) refuse LIVE|CONFIG together for this one */
        d->mutated = true;
        if (virDomainSetMemoryFlags(d->dom, (unsigned long)c.balloon_kib, VIR_DOMAIN_AFFECT_LIVE) <
            0)
            rc = lv_fail(d, "virDomainSetMemoryFlags(live)", err);
        else if (persistent && virDomainSetMemoryFlags(d->dom, (unsigned long)c.balloon_kib,
                                                       VIR_DOMAIN_AFFECT_CONFIG) < 0)
            rc = lv_fail(d, "virDomainSetMemoryFlags(config)", err);
        break;
    default:
        rc = lv_seterr(err, HV_E_INTERNAL, "no memory method");
        break;
    }
out:
    free(xml);
    return rc;
}

int lv_act_live_cpus(struct lv_dom *d, const struct hv_step *s, struct hv_err *err)
{
    int n = s->desired.cpus;
    if (n < 0)
        return HV_OK;
    struct lv_dominfo li;
    bool active;
    int rc = lv_read_live(d, &li, &active, NULL, err);
    if (rc != HV_OK)
        return rc;
    if (!active)
        return lv_seterr(err, HV_E_INVALID_STATE, "domain is not running");
    if (n == li.vcpu_current)
        return HV_OK;
    if (n < li.vcpu_current)
        return lv_seterr(err, HV_E_UNSUPPORTED, "vCPU shrink needs a restart");
    if (n > li.vcpu_max)
        return lv_seterr(err, HV_E_UNSUPPORTED, "above maximum vCPUs (%d > %d)", n, li.vcpu_max);
    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0)
        return lv_fail(d, "virDomainIsPersistent", err);
    unsigned int flags = VIR_DOMAIN_AFFECT_LIVE | (persistent ? VIR_DOMAIN_AFFECT_CONFIG : 0);
    d->mutated = true;
    if (virDomainSetVcpusFlags(d->dom, (unsigned int)n, flags) < 0)
        return lv_fail(d, "virDomainSetVcpusFlags", err);
    return HV_OK;
}
