/* lv_disk.c: the disk hvupdater grows, named by its target device (the profile's "vda").
 * Its size is what libvirt reports (virDomainGetBlockInfo's capacity); a running domain's
 * disk grows with virDomainBlockResize (QEMU resizes the image under the guest), an off
 * domain's with virStorageVolResize, which needs the image to be a libvirt storage volume.
 * Raw block devices and network disks are left alone: libvirt cannot grow those itself.
 * Disks never shrink. Owns nothing past a call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"

#define MIB (1024LL * 1024LL)

long long lv_disk_mib(const struct lv_disk *dk)
{
    return dk->found && dk->capacity >= 0 ? dk->capacity / MIB : -1;
}

int lv_disk_read(struct lv_dom *d, const char *target, struct lv_disk *dk, struct hv_err *err)
{
    memset(dk, 0, sizeof(*dk));
    dk->capacity = -1;
    if (!target || !target[0])
        return HV_OK;
    char *xml = virDomainGetXMLDesc(d->dom, 0);
    if (!xml)
        return lv_fail(d, "virDomainGetXMLDesc", err);
    int rc = lv_xml_disk(xml, target, dk);
    free(xml);
    if (rc < 0)
        return lv_seterr(err, HV_E_INTERNAL, "domain XML does not parse");
    if (!dk->found || strcmp(dk->device, "disk") != 0)
        return HV_OK;
    virDomainBlockInfo bi;
    if (virDomainGetBlockInfo(d->dom, target, &bi, 0) == 0) {
        dk->capacity = (long long)bi.capacity;
        return HV_OK;
    }
    struct lv_lasterr e;
    lv_error_capture(&e);
    if (lv_error_is_dead_conn(&e))
        return lv_fail_err(d, &e, "virDomainGetBlockInfo", err);
    virResetLastError(); /* e.g. a driver without block info: the size stays unknown */
    return HV_OK;
}

static virStorageVolPtr lv_disk_volume(struct lv_dom *d, const struct lv_disk *dk)
{
    virStorageVolPtr vol = NULL;
    if (!strcmp(dk->type, "file") && dk->source[0]) {
        vol = virStorageVolLookupByPath(d->conn, dk->source);
    } else if (!strcmp(dk->type, "volume") && dk->pool[0] && dk->volume[0]) {
        virStoragePoolPtr pool = virStoragePoolLookupByName(d->conn, dk->pool);
        if (pool) {
            vol = virStorageVolLookupByName(pool, dk->volume);
            virStoragePoolFree(pool);
        }
    }
    if (!vol)
        virResetLastError();
    return vol;
}

bool lv_disk_in_pool(struct lv_dom *d, const struct lv_disk *dk)
{
    virStorageVolPtr vol = lv_disk_volume(d, dk);
    if (vol)
        virStorageVolFree(vol);
    return vol != NULL;
}

static void lv_dset(struct hv_field_plan *p, enum hv_how how, const char *method, const char *why)
{
    p->how = how;
    snprintf(p->method, sizeof(p->method), "%s", method);
    snprintf(p->reason, sizeof(p->reason), "%s", why);
}

void lv_plan_disk(const struct lv_disk *dk, bool active, bool in_pool, long long want_mib,
                  struct hv_field_plan *p)
{
    if (want_mib > HV_DISK_MAX_MIB) /* want_mib * MIB would overflow */
        lv_dset(p, HV_HOW_IMPOSSIBLE, "", HV_REASON_DISK_MAX);
    else if (!dk->found)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("the domain has no disk with that target device"));
    else if (strcmp(dk->device, "disk") != 0)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "",
                HV_MSG("the target device is not a disk (e.g. a CD-ROM)"));
    else if (!strcmp(dk->type, "block"))
        lv_dset(p, HV_HOW_IMPOSSIBLE, "",
                HV_MSG("the disk is a raw block device, which libvirt cannot grow; grow it on "
                       "the host"));
    else if (strcmp(dk->type, "file") != 0 && strcmp(dk->type, "volume") != 0)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "",
                HV_MSG("libvirt can grow file and storage volume disks only"));
    else if (dk->readonly)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("the disk is read-only"));
    else if (dk->capacity < 0)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "", HV_MSG("libvirt does not report the disk's capacity"));
    else if (want_mib * MIB < dk->capacity)
        lv_dset(p, HV_HOW_IMPOSSIBLE, "", HV_REASON_DISK_SHRINK);
    else if (active)
        lv_dset(p, HV_HOW_LIVE, "block-resize", "");
    else if (in_pool)
        lv_dset(p, HV_HOW_COLD, "", HV_MSG("domain is off"));
    else
        lv_dset(p, HV_HOW_IMPOSSIBLE, "",
                HV_MSG("the domain is off and its disk image is in no libvirt storage pool, so "
                       "libvirt cannot grow it"));
}

int lv_act_live_disk(struct lv_dom *d, const char *target, const struct hv_step *s,
                     struct hv_err *err)
{
    long long want = s->desired.disk_mib;
    if (!hv_disk_set(want))
        return HV_OK;
    struct lv_disk dk;
    int rc = lv_disk_read(d, target, &dk, err);
    if (rc != HV_OK)
        return rc;
    int active = virDomainIsActive(d->dom);
    if (active < 0)
        return lv_fail(d, "virDomainIsActive", err);
    if (!active)
        return lv_seterr(err, HV_E_INVALID_STATE, "domain is not running");
    struct hv_field_plan p;
    if (lv_disk_mib(&dk) == want)
        return HV_OK; /* nothing left to do */
    lv_plan_disk(&dk, true, false, want, &p);
    if (p.how != HV_HOW_LIVE)
        return lv_seterr(err, HV_E_UNSUPPORTED, "disk %s: %s", target, p.reason);
    d->mutated = true;
    if (virDomainBlockResize(d->dom, target, (unsigned long long)(want * MIB),
                             VIR_DOMAIN_BLOCK_RESIZE_BYTES) < 0)
        return lv_fail(d, "virDomainBlockResize", err);
    return HV_OK;
}

int lv_grow_volume(struct lv_dom *d, const char *target, long long want_mib, struct hv_err *err)
{
    if (!hv_disk_set(want_mib) || !target || !target[0])
        return HV_OK;
    struct lv_disk dk;
    int rc = lv_disk_read(d, target, &dk, err);
    if (rc != HV_OK)
        return rc;
    if (lv_disk_mib(&dk) >= want_mib)
        return HV_OK; /* a larger disk is left as it is, as plan() says (never a shrink) */
    struct hv_field_plan p;
    bool in_pool = lv_disk_in_pool(d, &dk);
    lv_plan_disk(&dk, false, in_pool, want_mib, &p);
    if (p.how != HV_HOW_COLD)
        return lv_seterr(err, HV_E_UNSUPPORTED, "disk %s: %s", target, p.reason);
    virStorageVolPtr vol = lv_disk_volume(d, &dk);
    if (!vol)
        return lv_seterr(err, HV_E_UNSUPPORTED, "disk %s: its storage volume is gone", target);
    d->mutated = true;
    rc = virStorageVolResize(vol, (unsigned long long)(want_mib * MIB), 0);
    virStorageVolFree(vol);
    if (rc < 0)
        return lv_fail(d, "virStorageVolResize", err);
    return HV_OK;
}
