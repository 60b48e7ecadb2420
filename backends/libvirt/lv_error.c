/* lv_error.c: libvirt errors into hvupdater's stable error codes.
 * Installs a process-wide quiet error handler (libvirt would print to stderr otherwise) that
 * keeps a per-thread copy of the last error; raw libvirt text only ever reaches
 * hv_err.detail. Owns no heap memory.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libvirt/virterror.h>

#include "lv_internal.h"

static _Thread_local struct lv_lasterr lv_handler_copy;
static pthread_once_t lv_error_once = PTHREAD_ONCE_INIT;

static void lv_quiet_handler(void *opaque, virErrorPtr e)
{
    (void)opaque;
    if (!e)
        return;
    lv_handler_copy.code = e->code;
    lv_handler_copy.domain = e->domain;
    snprintf(lv_handler_copy.msg, sizeof(lv_handler_copy.msg), "%s", e->message ? e->message : "");
}

static void lv_error_setup(void)
{
    virSetErrorFunc(NULL, lv_quiet_handler);
}

void lv_error_init(void)
{
    pthread_once(&lv_error_once, lv_error_setup);
}

void lv_error_capture(struct lv_lasterr *e)
{
    virErrorPtr v = virGetLastError();
    if (v && v->code != VIR_ERR_OK) {
        e->code = v->code;
        e->domain = v->domain;
        snprintf(e->msg, sizeof(e->msg), "%s", v->message ? v->message : "");
    } else if (lv_handler_copy.code != VIR_ERR_OK) {
        *e = lv_handler_copy;
    } else {
        e->code = VIR_ERR_OK;
        e->domain = VIR_FROM_NONE;
        snprintf(e->msg, sizeof(e->msg), "libvirt reported no error");
    }
    memset(&lv_handler_copy, 0, sizeof(lv_handler_copy));
}

static bool lv_domain_is_transport(int domain)
{
    return domain == VIR_FROM_RPC || domain == VIR_FROM_REMOTE || domain == VIR_FROM_SSH ||
           domain == VIR_FROM_LIBSSH || domain == VIR_FROM_URI;
}

enum hv_errcode lv_error_map(int code, int domain, const char *msg)
{
    if (!msg)
        msg = "";
    /* host resources, whatever the code: QEMU reports them as text only */
    if (strstr(msg, "Cannot allocate memory") || strstr(msg, "cannot set up guest memory"))
        return HV_E_RESOURCES;
    switch (code) {
    case VIR_ERR_NO_DOMAIN:
    case VIR_ERR_INVALID_DOMAIN:
        return HV_E_NOT_FOUND;
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
    case VIR_ERR_UNKNOWN_HOST:
    case VIR_ERR_RPC:
    case VIR_ERR_SSH:
    case VIR_ERR_LIBSSH:
    case VIR_ERR_GNUTLS_ERROR:
    case VIR_ERR_NO_SERVER:
    case VIR_ERR_NO_CLIENT:
        return HV_E_UNREACHABLE;
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_INTERNAL_ERROR:
        return lv_domain_is_transport(domain) ? HV_E_UNREACHABLE : HV_E_INTERNAL;
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_ACCESS_DENIED:
    case VIR_ERR_OPERATION_DENIED:
        return HV_E_AUTH;
    case VIR_ERR_OPERATION_INVALID:
    case VIR_ERR_DOM_EXIST:
        return HV_E_INVALID_STATE;
    case VIR_ERR_OPERATION_TIMEOUT:
        /* "cannot acquire state change lock": another job holds the domain */
        return strstr(msg, "change lock") ? HV_E_BUSY : HV_E_TIMEOUT;
    case VIR_ERR_AGENT_UNRESPONSIVE:
    case VIR_ERR_AGENT_UNSYNCED:
        return HV_E_TIMEOUT;
    case VIR_ERR_RESOURCE_BUSY:
    case VIR_ERR_BLOCK_COPY_ACTIVE:
        return HV_E_BUSY;
    case VIR_ERR_NO_SUPPORT:
    case VIR_ERR_OPERATION_UNSUPPORTED:
    case VIR_ERR_CONFIG_UNSUPPORTED:
    case VIR_ERR_ARGUMENT_UNSUPPORTED:
    case VIR_ERR_CPU_INCOMPATIBLE:
    case VIR_ERR_INVALID_ARG: /* e.g. "requested vcpus is greater than max allowable" */
        return HV_E_UNSUPPORTED;
    default:
        return HV_E_INTERNAL;
    }
}

bool lv_error_is_dead_conn(const struct lv_lasterr *e)
{
    switch (e->code) {
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
    case VIR_ERR_RPC:
        return true;
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_INTERNAL_ERROR:
        return lv_domain_is_transport(e->domain);
    default:
        return false;
    }
}

int lv_seterr(struct hv_err *err, enum hv_errcode code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
    va_end(ap);
    return code;
}

int lv_seterr_virt(struct hv_err *err, const struct lv_lasterr *e, const char *what)
{
    enum hv_errcode code = lv_error_map(e->code, e->domain, e->msg);
    if (e->code == VIR_ERR_OK)
        code = HV_E_INTERNAL;
    return lv_seterr(err, code, "%s: %s (libvirt error %d, domain %d)", what, e->msg, e->code,
                     e->domain);
}
