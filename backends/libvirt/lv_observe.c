/* lv_observe.c: observe(): what one domain is right now, from libvirt's live and persistent
 * XML, its state, ID, job and metadata. Fills the caller's struct hv_vm_obs only; every XML
 * string fetched from libvirt is freed here before returning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lv_internal.h"

int lv_read_live(struct lv_dom *d, struct lv_dominfo *li, bool *active, char **xml_out,
                 struct hv_err *err)
{
    if (xml_out)
        *xml_out = NULL;
    int a = virDomainIsActive(d->dom);
    if (a < 0)
        return lv_fail(d, "virDomainIsActive", err);
    char *xml = virDomainGetXMLDesc(d->dom, 0);
    if (!xml)
        return lv_fail(d, "virDomainGetXMLDesc", err);
    char why[128];
    if (lv_xml_parse_domain(xml, li, why, sizeof(why)) < 0) {
        free(xml);
        return lv_seterr(err, HV_E_INTERNAL, "live XML: %s", why);
    }
    *active = a == 1;
    if (xml_out)
        *xml_out = xml;
    else
        free(xml);
    return HV_OK;
}

enum hv_power lv_power_of(int state, bool active)
{
    switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_SHUTDOWN: /* being shut down: still on */
        return HV_POWER_ON;
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_PMSUSPENDED:
        return HV_POWER_PAUSED;
    case VIR_DOMAIN_SHUTOFF:
        return HV_POWER_OFF;
    case VIR_DOMAIN_CRASHED: /* preserved crashed guests keep their process */
        return active ? HV_POWER_UNKNOWN : HV_POWER_OFF;
    default:
        return HV_POWER_UNKNOWN;
    }
}

static void lv_hw_from(const struct lv_dominfo *i, struct hv_hw *hw)
{
    hw->memory_mib = i->effective_kib / 1024;
    hw->cpus = i->vcpu_current;
    hw->cores_per_socket = i->cores > 0 ? i->cores : -1;
}

static void lv_obs_reset(struct hv_vm_obs *obs)
{
    memset(obs, 0, sizeof(*obs));
    obs->hw.memory_mib = obs->config.memory_mib = -1;
    obs->hw.cpus = obs->config.cpus = -1;
    obs->hw.cores_per_socket = obs->config.cores_per_socket = -1;
    obs->hw.disk_mib = obs->config.disk_mib = -1;
}

struct lv_observe_arg {
    struct hv_vm_obs *obs;
    const char *disk; /* target device of the disk to report, "" for none */
};
/* Balloon statistics are only collected while a period is set: a running domain with a
 * virtio balloon and none gets one (live only, LV_BALLOON_PERIOD_S) on every observe, so the
 * guest has reported by the time the engine asks for its view. Cheap: no guest round trip. */
static void lv_stats_on(struct lv_dom *d, const struct lv_dominfo *li)
{
    if (li->balloon_virtio && li->balloon_period <= 0 &&
        virDomainSetMemoryStatsPeriod(d->dom, LV_BALLOON_PERIOD_S, VIR_DOMAIN_AFFECT_LIVE) < 0)
        virResetLastError(); /* e.g. a driver without statistics: the guest cannot tell */
}

/* libvirt's test driver runs no guest: its balloon statistics are its own (the balloon
 * target as "available", a fixed last-update of 1989), so its guest cannot tell. */
static bool lv_no_guest(struct lv_dom *d)
{
    const char *type = virConnectGetType(d->conn);
    if (!type) {
        virResetLastError();
        return false;
    }
    return strcmp(type, "TEST") == 0;
}

/* The guest's memory total from the virtio-balloon statistics: "available" (the guest
 * kernel's MemTotal) as of "last-update" (obs->guest.mem_at: the engine takes a report not
 * newer than its step as no evidence of it). A guest that has never reported (no
 * "available", or a last-update of 0: no balloon driver in it, or not loaded yet) is
 * "pending": the engine waits for it only right after a power cycle. */
static void lv_guest_mem(struct lv_dom *d, struct hv_vm_obs *obs)
{
    virDomainMemoryStatStruct st[VIR_DOMAIN_MEMORY_STAT_NR];
    int n = virDomainMemoryStats(d->dom, st, VIR_DOMAIN_MEMORY_STAT_NR, 0);
    if (n < 0) {
        obs->guest.mem_view = HV_GV_NONE;
        virResetLastError();
        return;
    }
    bool avail = false, stamped = false;
    unsigned long long kib = 0, at = 0;
    for (int i = 0; i < n; i++) {
        if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_AVAILABLE && st[i].val > 0) {
            avail = true;
            kib = st[i].val;
        } else if (st[i].tag == VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE) {
            stamped = true;
            at = st[i].val;
        }
    }
    if (!avail || (stamped && at == 0))
        return; /* pending: it has not reported since it started */
    obs->guest.mem_view = HV_GV_SEEN;
    obs->guest.memory_mib = (int64_t)(kib / 1024);
    obs->guest.mem_at = stamped ? (int64_t)at : 0;
}

/* The guest's own view (ops->observe_guest, asked only when the engine needs it: it costs a
 * round trip into the guest). Memory: see lv_guest_mem; "pending" while no period is set yet
 * (set now). vCPUs: the guest agent's count of online vCPUs, asked only when its channel
 * shows an agent connected; "pending" while the channel exists but no agent is connected (a
 * booting guest, or one without an agent: the engine decides how long to wait). Failures
 * here only mean "cannot tell". */
static void lv_observe_guest(struct lv_dom *d, const struct lv_dominfo *li, struct hv_vm_obs *obs)
{
    if (lv_no_guest(d))
        return;
    if (li->balloon_virtio) {
        obs->guest.mem_view = HV_GV_PENDING;
        if (li->balloon_period <= 0) {
            if (virDomainSetMemoryStatsPeriod(d->dom, LV_BALLOON_PERIOD_S, VIR_DOMAIN_AFFECT_LIVE) <
                0) {
                obs->guest.mem_view = HV_GV_NONE; /* e.g. a driver without statistics */
                virResetLastError();
            }
        } else {
            lv_guest_mem(d, obs);
        }
    }
    if (li->agent_channel && !li->agent_connected) {
        obs->guest.cpu_view = HV_GV_PENDING;
    } else if (li->agent_connected) {
        int n = virDomainGetVcpusFlags(d->dom, VIR_DOMAIN_VCPU_GUEST);
        if (n > 0) {
            obs->guest.cpu_view = HV_GV_SEEN;
            obs->guest.cpus = n;
        } else {
            obs->guest.cpu_view = HV_GV_PENDING; /* connected, not answering yet */
            virResetLastError();
        }
    }
}

static int lv_observe_guest_body(struct lv_dom *d, void *arg, struct hv_err *err)
{
    struct hv_vm_obs *obs = arg;
    memset(&obs->guest, 0, sizeof(obs->guest));
    struct lv_dominfo li;
    bool active;
    int rc = lv_read_live(d, &li, &active, NULL, err);
    if (rc != HV_OK)
        return rc;
    if (active)
        lv_observe_guest(d, &li, obs);
    return HV_OK;
}

int lv_observe_guest_op(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                        struct hv_err *err)
{
    struct hv_err dummy;
    err = lv_err_start(err, &dummy);
    memset(&obs->guest, 0, sizeof(obs->guest));
    if (!ref)
        return lv_seterr(err, HV_E_INTERNAL, "observe_guest: missing ref");
    bool found = false;
    int rc = lv_with_dom_settled(b->priv, ref, lv_observe_guest_body, obs, &found, err);
    if (rc != HV_OK || !found)
        memset(&obs->guest, 0, sizeof(obs->guest)); /* gone meanwhile: it cannot tell */
    return rc;
}

static int lv_observe_body(struct lv_dom *d, void *arg, struct hv_err *err)
{
    const struct lv_observe_arg *a = arg;
    struct hv_vm_obs *obs = a->obs;
    lv_obs_reset(obs);
    obs->found = true;
    snprintf(obs->host, sizeof(obs->host), "%s", d->host->uri);

    int state = VIR_DOMAIN_NOSTATE, reason = 0;
    if (virDomainGetState(d->dom, &state, &reason, 0) < 0)
        return lv_fail(d, "virDomainGetState", err);
    struct lv_dominfo li;
    bool active;
    int rc = lv_read_live(d, &li, &active, NULL, err);
    if (rc != HV_OK)
        return rc;
    obs->power = lv_power_of(state, active);
    if (obs->power == HV_POWER_PAUSED)
        snprintf(obs->power_state, sizeof(obs->power_state), "%s",
                 state == VIR_DOMAIN_PMSUSPENDED ? "suspended" : "paused");
    unsigned int id = virDomainGetID(d->dom);
    if (active && id != (unsigned int)-1)
        snprintf(obs->id, sizeof(obs->id), "%u", id);
    lv_hw_from(&li, &obs->hw);
    obs->tools_running = active && li.agent_connected;
    /* no device in its definition its guest could report through (what a running guest
     * reports: lv_observe_guest) */
    obs->no_mem_report = !li.balloon_virtio;
    obs->no_cpu_report = !li.agent_channel;
    obs->can_shutdown = active; /* ACPI power button, or the agent when connected */
    if (obs->power == HV_POWER_ON)
        lv_stats_on(d, &li);

    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0)
        return lv_fail(d, "virDomainIsPersistent", err);
    if (persistent == 0 && active)
        snprintf(obs->no_power_cycle, sizeof(obs->no_power_cycle), "%s", LV_R_TRANSIENT);
    if (persistent == 1 && active) {
        char *xml = virDomainGetXMLDesc(d->dom, VIR_DOMAIN_XML_INACTIVE);
        if (!xml)
            return lv_fail(d, "virDomainGetXMLDesc(inactive)", err);
        struct lv_dominfo lc;
        char why[128];
        int prc = lv_xml_parse_domain(xml, &lc, why, sizeof(why));
        free(xml);
        if (prc < 0)
            return lv_seterr(err, HV_E_INTERNAL, "persistent XML: %s", why);
        lv_hw_from(&lc, &obs->config);
    } else {
        obs->config = obs->hw; /* off: the live XML is the definition; transient: no other */
    }

    struct lv_disk dk;
    rc = lv_disk_read(d, a->disk, &dk, err);
    if (rc != HV_OK)
        return rc;
    /* a disk's size is the image's, whether running or not: one value for both */
    obs->hw.disk_mib = obs->config.disk_mib = lv_disk_mib(&dk);

    if (active) {
        virDomainJobInfo ji;
        if (virDomainGetJobInfo(d->dom, &ji) == 0)
            obs->busy = ji.type != VIR_DOMAIN_JOB_NONE;
        else
            virResetLastError(); /* drivers without job info: not busy as far as we know */
    }
    return lv_record_read(d, active, obs->record, sizeof(obs->record), err);
}

int lv_observe_op(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *obs,
                  struct hv_err *err)
{
    struct hv_err dummy;
    err = lv_err_start(err, &dummy);
    lv_obs_reset(obs);
    if (!ref)
        return lv_seterr(err, HV_E_INTERNAL, "observe: missing ref");
    bool found = false;
    /* e.g. the live metadata read of a domain that just shut off: observe it again */
    struct lv_observe_arg a = {obs, ref->disk};
    int rc = lv_with_dom_settled(b->priv, ref, lv_observe_body, &a, &found, err);
    if (rc != HV_OK || !found)
        lv_obs_reset(obs); /* found = false; nothing half-filled */
    return rc;
}
