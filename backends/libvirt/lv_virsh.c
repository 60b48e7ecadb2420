/* lv_virsh.c: virsh's habits for the lab CLI (hvupdater plan/apply): which connection URI
 * (-c, else LIBVIRT_DEFAULT_URI, else libvirt's own default, as `virsh uri` shows it) and a
 * domain named by an ID, a UUID or a name, tried in virsh's order. Owns no memory after it
 * returns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "libvirt_backend.h"
#include "lv_internal.h"

/* virsh accepts an ID only as a whole non-negative decimal number. */
static bool parse_id(const char *s, int *id)
{
    char *end = NULL;
    if (!*s || *s == '-' || *s == '+')
        return false;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 0x7fffffff)
        return false;
    *id = (int)v;
    return true;
}

int hv_libvirt_virsh_resolve(const char *uri, const char *domain, char *uri_out, size_t uri_len,
                             char *uuid_out, size_t uuid_len, char *err, size_t errlen)
{
    if (!uri || !*uri) {
        const char *env = getenv("LIBVIRT_DEFAULT_URI");
        uri = env && *env ? env : NULL; /* NULL: libvirt's default */
    }
    if (virInitialize() < 0) {
        snprintf(err, errlen, "libvirt: virInitialize failed");
        return -1;
    }
    lv_error_init();
    virConnectPtr c = virConnectOpen(uri);
    if (!c) {
        struct lv_lasterr e;
        lv_error_capture(&e);
        snprintf(err, errlen, "cannot connect to %s: %s", uri ? uri : "libvirt's default URI",
                 e.msg);
        return -1;
    }
    int rc = -1;
    char *got = virConnectGetURI(c);
    if (!got) {
        snprintf(err, errlen, "libvirt: the connection has no URI");
        goto out;
    }
    snprintf(uri_out, uri_len, "%s", got);
    free(got);
    if (domain) {
        virDomainPtr d = NULL;
        int id;
        if (parse_id(domain, &id))
            d = virDomainLookupByID(c, id);
        if (!d && strlen(domain) == VIR_UUID_STRING_BUFLEN - 1)
            d = virDomainLookupByUUIDString(c, domain);
        if (!d)
            d = virDomainLookupByName(c, domain);
        if (!d) {
            snprintf(err, errlen, "no domain with a matching name, ID or UUID '%s' on %s", domain,
                     uri_out);
            goto out;
        }
        char uuid[VIR_UUID_STRING_BUFLEN];
        int ok = virDomainGetUUIDString(d, uuid);
        virDomainFree(d);
        if (ok < 0) {
            snprintf(err, errlen, "libvirt: cannot read the UUID of domain '%s'", domain);
            goto out;
        }
        snprintf(uuid_out, uuid_len, "%s", uuid);
    }
    rc = 0;
out:
    virConnectClose(c);
    return rc;
}
