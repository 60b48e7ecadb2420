/* lv_record.c: hvupdater's operation record, kept on the domain itself as libvirt metadata
 * (<operation> in namespace https://hvupdater.dev/xmlns/operation/1, prefix "hvupdater"), so
 * it survives our restarts, libvirtd restarts and domain restarts (persistent definition).
 * The text is opaque here: escaped on write, read back exactly. Owns no memory past a call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/virterror.h>
#include <libxml/xmlstring.h>

#include "lv_internal.h"

int lv_record_read(struct lv_dom *d, bool active, char *out, size_t outlen, struct hv_err *err)
{
    out[0] = '\0';
    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0)
        return lv_fail(d, "virDomainIsPersistent", err);
    unsigned int where[2];
    int n = 0;
    if (active)
        where[n++] = VIR_DOMAIN_AFFECT_LIVE; /* live first: it is what runs now */
    if (persistent == 1)
        where[n++] = VIR_DOMAIN_AFFECT_CONFIG;
    for (int i = 0; i < n; i++) {
        char *m = virDomainGetMetadata(d->dom, VIR_DOMAIN_METADATA_ELEMENT, LV_NS_URI, where[i]);
        if (!m) {
            struct lv_lasterr e;
            lv_error_capture(&e);
            if (e.code == VIR_ERR_NO_DOMAIN_METADATA)
                continue;
            return lv_fail_err(d, &e, "virDomainGetMetadata", err);
        }
        char *text = lv_xml_element_text(m);
        free(m);
        if (!text)
            return lv_seterr(err, HV_E_INTERNAL, "record metadata does not parse");
        size_t len = strlen(text);
        if (len >= outlen) {
            free(text);
            return lv_seterr(err, HV_E_INTERNAL, "record metadata longer than %zu bytes",
                             outlen - 1);
        }
        memcpy(out, text, len + 1);
        free(text);
        return HV_OK;
    }
    return HV_OK;
}

/* XML 1.0 carries tab, LF, CR and everything from 0x20 up, as valid UTF-8. */
static bool lv_record_text_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    }
    return xmlCheckUTF8((const unsigned char *)s) != 0;
}

struct lv_record_swap {
    const char *expected; /* NULL: unconditional */
    const char *record;
};

static int lv_record_body(struct lv_dom *d, void *arg, struct hv_err *err)
{
    const struct lv_record_swap *w = arg;
    const char *record = w->record;
    int active = virDomainIsActive(d->dom);
    if (active < 0)
        return lv_fail(d, "virDomainIsActive", err);
    /* libvirt cannot test and write metadata in one call: read, compare, write, which narrows
     * the race with another writer to the two calls (docs/limits.md). The record this write
     * stores already (a retry after a reconnect, whose first try landed) is no lost race. */
    if (w->expected) {
        char cur[HV_RECORD_MAX];
        int rrc = lv_record_read(d, active == 1, cur, sizeof(cur), err);
        if (rrc != HV_OK)
            return rrc;
        if (strcmp(cur, w->expected) && strcmp(cur, record))
            return lv_seterr(err, HV_E_BUSY, "the domain's record changed since it was read");
    }
    int persistent = virDomainIsPersistent(d->dom);
    if (persistent < 0)
        return lv_fail(d, "virDomainIsPersistent", err);
    unsigned int flags = 0;
    if (persistent == 1)
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    if (active == 1)
        flags |= VIR_DOMAIN_AFFECT_LIVE;

    /* idempotent: a retry after a reconnect writes the same thing again */
    if (record[0] == '\0') {
        if (virDomainSetMetadata(d->dom, VIR_DOMAIN_METADATA_ELEMENT, NULL, NULL, LV_NS_URI,
                                 flags) < 0) {
            struct lv_lasterr e;
            lv_error_capture(&e);
            if (e.code == VIR_ERR_NO_DOMAIN_METADATA)
                return HV_OK;
            return lv_fail_err(d, &e, "virDomainSetMetadata(remove)", err);
        }
        return HV_OK;
    }
    char *elem = lv_xml_record_element(record);
    if (!elem)
        return lv_seterr(err, HV_E_INTERNAL, "out of memory");
    int rc = virDomainSetMetadata(d->dom, VIR_DOMAIN_METADATA_ELEMENT, elem, LV_NS_KEY, LV_NS_URI,
                                  flags);
    free(elem);
    if (rc < 0)
        return lv_fail(d, "virDomainSetMetadata", err);
    return HV_OK;
}

int lv_record_write_op(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                       const char *record, struct hv_err *err)
{
    struct hv_err dummy;
    err = lv_err_start(err, &dummy);
    if (!ref || !record)
        return lv_seterr(err, HV_E_INTERNAL, "write_record: missing ref or record");
    if (strlen(record) >= HV_RECORD_MAX)
        return lv_seterr(err, HV_E_INTERNAL, "record longer than %d bytes", HV_RECORD_MAX - 1);
    if (!lv_record_text_ok(record))
        return lv_seterr(err, HV_E_INTERNAL, "record holds bytes XML cannot carry");
    bool found = false;
    /* the domain may start or stop between reading its state and writing live + config */
    struct lv_record_swap w = {expected, record};
    int rc = lv_with_dom_settled(b->priv, ref, lv_record_body, &w, &found, err);
    if (rc == HV_OK && !found)
        return lv_seterr(err, HV_E_NOT_FOUND, "domain not found on any configured host");
    return rc;
}
