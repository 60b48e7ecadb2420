/* pass_say.c: what a reconcile pass says: the stable texts (backend error codes, step
 * names, hardware described), the answers (in progress, settling, going off, a Failure for one
 * call or sticky), the log of backend errors, and the wait for a hypervisor that cannot be
 * reached. */
#include "pass.h"
#include "reconcile.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *hv_errcode_message(enum hv_errcode c)
{
    switch (c) {
    case HV_OK:
        return HV_MSG("no error");
    case HV_E_NOT_FOUND:
        return HV_MSG("the VM was not found");
    case HV_E_UNREACHABLE:
        return HV_MSG("the hypervisor cannot be reached");
    case HV_E_AUTH:
        return HV_MSG("the hypervisor refused hvupdater's credentials");
    case HV_E_INVALID_STATE:
        return HV_MSG("the VM's power state does not allow this step");
    case HV_E_BUSY:
        return HV_MSG("another task is changing the VM");
    case HV_E_UNSUPPORTED:
        return HV_MSG("the hypervisor does not support this change");
    case HV_E_RESOURCES:
        return HV_MSG("the host lacks the resources");
    case HV_E_TIMEOUT:
        return HV_MSG("the hypervisor did not answer in time");
    case HV_E_TLS:
        return HV_MSG("the hypervisor's certificate does not match the configured thumbprint or "
                      "CA");
    case HV_E_AMBIGUOUS:
        return HV_MSG("its name is on several configured hosts");
    case HV_E_CREDENTIALS:
        return HV_MSG("hvupdater cannot read the vCenter credentials of the machine's cluster");
    case HV_E_INFRA_SECRET:
        return HV_MSG("hvupdater cannot use the KubeVirt infrastructure cluster's kubeconfig "
                      "Secret (CAPK infraClusterSecretRef)");
    case HV_E_INTERNAL:
        break;
    }
    return HV_MSG("the hypervisor reported an error");
}

/* "memory 2048 MiB, 3 vCPUs, 2 cores per socket" for the fields that are set. */
void rc_describe(char *out, size_t cap, const struct hv_hw *h)
{
    char part[64];
    out[0] = '\0';
    if (h->memory_mib >= 0) {
        snprintf(part, sizeof(part), HV_MSG("memory %lld MiB"), (long long)h->memory_mib);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (h->cpus >= 0) {
        snprintf(part, sizeof(part), h->cpus == 1 ? HV_MSG("%s%d vCPU") : HV_MSG("%s%d vCPUs"),
                 out[0] ? ", " : "", h->cpus);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (h->cores_per_socket >= 0) {
        snprintf(part, sizeof(part), HV_MSG("%s%d cores per socket"), out[0] ? ", " : "",
                 h->cores_per_socket);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (hv_disk_set(h->disk_mib)) {
        if (h->disk_mib % 1024 == 0)
            snprintf(part, sizeof(part), HV_MSG("%sdisk %lld GiB"), out[0] ? ", " : "",
                     (long long)(h->disk_mib / 1024));
        else
            snprintf(part, sizeof(part), HV_MSG("%sdisk %lld MiB"), out[0] ? ", " : "",
                     (long long)h->disk_mib);
        strncat(out, part, cap - strlen(out) - 1);
    }
    if (!out[0])
        snprintf(out, cap, HV_MSG("no hardware fields"));
}

/* Every desired field (>= 0) equals what the VM shows. */
bool rc_matches(const struct hv_hw *have, const struct hv_hw *want)
{
    return (want->memory_mib < 0 || have->memory_mib == want->memory_mib) &&
           (want->cpus < 0 || have->cpus == want->cpus) &&
           (want->cores_per_socket < 0 || have->cores_per_socket == want->cores_per_socket) &&
           (!hv_disk_set(want->disk_mib) || have->disk_mib >= want->disk_mib); /* disks only grow */
}

void rc_answer(struct hv_update_result *out, bool failure, int retry, const char *msg)
{
    out->failure = failure;
    out->retry_after_s = failure ? 0 : retry;
    out->settling = false;
    out->once = failure; /* the sticky ones say otherwise (sticky) */
    snprintf(out->message, sizeof(out->message), "%s", msg);
}

/* The Failure recorded on the VM, answered on every call for its desired hardware. */
void rc_answer_sticky(struct hv_update_result *out, const char *msg)
{
    rc_answer(out, true, 0, msg);
    out->once = false;
}

void rc_log_err(const struct pass *p, const char *what, const struct hv_err *err)
{
    char code[8];
    snprintf(code, sizeof(code), "%d", (int)err->code);
    hv_log(HV_LOG_WARN, "backend-error", "backend", p->be->ops->name, "vm", p->key, "during", what,
           "#code", code, "detail", err->detail, (char *)NULL);
    hv_metrics_backend_error(p->be->ops->name, p->obs.host[0] ? p->obs.host : p->ref->server);
}

/* The settings an operation's outcome depends on, as recorded with it. */
void rc_policy_of(const struct hv_settings *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/%d/%d/%d/%s", hv_power_cycle_name(s->power_cycle),
             hv_power_off_mode_name(s->power_off_mode), s->live_timeout_s, s->shutdown_timeout_s,
             s->deadline_s, hv_guest_check_name(s->guest_check));
}

static void vprogress(struct pass *p, int retry, bool settling, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static void vprogress(struct pass *p, int retry, bool settling, const char *fmt, va_list ap)
{
    char m[400], body[300];
    vsnprintf(body, sizeof(body), fmt, ap);
    snprintf(m, sizeof(m), HV_MSG("in progress: %s"), body);
    rc_answer(p->out, false, retry, m);
    if (settling)
        p->out->settling = true;
}

void rc_progress(struct pass *p, int retry, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, retry, false, fmt, ap);
    va_end(ap);
}

/* In progress, waiting for a change already made to show (phase wait-live, or the guest
 * after a power cycle): CAPI is asked back in 1 s while it should show soon (a loaded guest
 * may take seconds to online memory and report it), then in RETRY_LIVE; the engine takes its
 * next look just before that call (settling). */
void rc_settle(struct pass *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, p->now - p->rec.step_at < LIVE_SOON_S ? RETRY_LIVE_SOON : RETRY_LIVE, true, fmt,
              ap);
    va_end(ap);
}

/* In progress, waiting for the VM to go off after a shutdown or power-off was sent: settling
 * too (a libvirt lifecycle event ends the wait), at the pace of power steps. */
void rc_going_off(struct pass *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprogress(p, RETRY_COLD, true, fmt, ap);
    va_end(ap);
}

/* In progress, another task holding the VM (a lost race, a busy VM): one message for both. */
void rc_progress_busy(struct pass *p)
{
    rc_progress(p, RETRY_UNREACHABLE, HV_MSG("another task is changing the VM; trying again"));
}

/* A call of kind k to the hypervisor failed. When errclass.h's table says to wait (it cannot
 * be reached: a daemon or vCenter restarting, a network cut, a connection being reopened; or,
 * but for a step, which may have been taken, it did not answer in time: a host or vCenter
 * that hangs, overloaded or restarting; or a record write lost a race with another writer),
 * that is not the operation's failure: in progress with a short retry, until the operation's
 * deadline (deadlineSeconds from the start of the operation in flight, or from the first
 * failed call of the run when none is; a lost race's run is its own): true, answered. Past
 * that bound, or for any other cell, false: the caller takes it (a Failure, a step's try). */
bool rc_wait_for_hypervisor(struct pass *p, enum hv_err_call k, const struct hv_err *err)
{
    enum hv_err_class c = hv_err_classify(err->code);
    if (hv_err_take(c, k) != HV_TAKE_WAIT)
        return false;
    bool race = c == HV_EC_LOST_RACE;
    int64_t since = race ? p->b->lost_race_since(p->b->ctx, p->key, p->now, true)
                         : p->b->unreachable_since(p->b->ctx, p->key, p->now, true);
    if (p->now - since >= p->s->deadline_s)
        return false;
    if (race) /* nothing was stored and no step taken; the next pass reads the VM again */
        rc_progress_busy(p);
    else if (c == HV_EC_NO_ANSWER)
        rc_progress(p, RETRY_UNREACHABLE,
                    HV_MSG("the hypervisor did not answer in time; trying again"));
    else
        rc_progress(p, RETRY_UNREACHABLE, HV_MSG("the hypervisor cannot be reached; trying again"));
    return true;
}
