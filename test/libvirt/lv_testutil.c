/* lv_testutil.c: helpers for the libvirt backend tests (see lv_testutil.h). Connections the
 * helpers open are closed before they return, so a test's own view never keeps libvirt state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lv_testutil.h"

double lvt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

struct hv_backend *lvt_backend(const char *const *uris, size_t n)
{
    struct hv_libvirt_opts o = {.uris = uris, .n_uris = n};
    char err[256];
    struct hv_backend *be = hv_libvirt_new(&o, err, sizeof(err));
    if (!be)
        fail_msg("hv_libvirt_new: %s", err);
    return be;
}

void lvt_ref(struct hv_vm_ref *r, const char *server, const char *uuid, const char *name)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->server, sizeof(r->server), "%s", server ? server : "");
    snprintf(r->uuid, sizeof(r->uuid), "%s", uuid ? uuid : "");
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "");
}

char *lvt_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* a copy of s with every `from` replaced by `to` */
static char *lvt_replace(const char *s, const char *from, const char *to)
{
    size_t n = 0, fl = strlen(from), tl = strlen(to);
    for (const char *p = strstr(s, from); p; p = strstr(p + fl, from))
        n++;
    char *out = malloc(strlen(s) + n * tl + 1);
    assert_non_null(out);
    char *o = out;
    for (const char *p; (p = strstr(s, from)); s = p + fl) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, to, tl);
        o += tl;
    }
    strcpy(o, s);
    return out;
}

char *lvt_style_xml(const char *style, const char *name, const char *switches)
{
    char path[512], tmpl[64], cmd[256];
    snprintf(path, sizeof(path), "%s/domains/%s.xml", HV_LAB_DIR, style);
    snprintf(tmpl, sizeof(tmpl), "hvt-%s", style);
    char *xml = lvt_read_file(path);
    assert_non_null(strstr(xml, "<name>"));
    char *named = lvt_replace(xml, tmpl, name);
    free(xml);
    if (!switches)
        return named;
    snprintf(cmd, sizeof(cmd), " %s</cmdline>", switches);
    char *out = lvt_replace(named, "</cmdline>", cmd);
    free(named);
    return out;
}

static virConnectPtr lvt_open(const char *uri)
{
    virConnectPtr c = virConnectOpen(uri);
    if (!c) {
        virErrorPtr e = virGetLastError();
        fail_msg("cannot open %s: %s", uri, e && e->message ? e->message : "?");
    }
    return c;
}

void lvt_define(const char *uri, const char *xml, bool start)
{
    virConnectPtr c = lvt_open(uri);
    virDomainPtr d = virDomainDefineXML(c, xml);
    if (!d) {
        virErrorPtr e = virGetLastError();
        fail_msg("define: %s", e && e->message ? e->message : "?");
    }
    if (start && virDomainCreate(d) < 0) {
        virErrorPtr e = virGetLastError();
        fail_msg("start: %s", e && e->message ? e->message : "?");
    }
    virDomainFree(d);
    virConnectClose(c);
}

void lvt_remove(const char *uri, const char *name)
{
    virConnectPtr c = virConnectOpen(uri);
    if (!c)
        return;
    virDomainPtr d = virDomainLookupByName(c, name);
    if (d) {
        if (virDomainIsActive(d) == 1)
            virDomainDestroy(d);
        virDomainUndefineFlags(d, VIR_DOMAIN_UNDEFINE_NVRAM);
        virDomainFree(d);
    }
    virResetLastError();
    virConnectClose(c);
}

char *lvt_dom_xml(const char *uri, const char *name, unsigned int flags)
{
    virConnectPtr c = lvt_open(uri);
    virDomainPtr d = virDomainLookupByName(c, name);
    assert_non_null(d);
    char *xml = virDomainGetXMLDesc(d, flags);
    assert_non_null(xml);
    virDomainFree(d);
    virConnectClose(c);
    return xml;
}

void lvt_name(char *out, size_t len, const char *what)
{
    snprintf(out, len, "hvt-%s-%ld", what, (long)getpid());
}

long long lvt_wait_memory(struct hv_backend *be, const struct hv_vm_ref *ref, long long mib,
                          int timeout_ms)
{
    double end = lvt_now_ms() + timeout_ms;
    struct hv_vm_obs obs;
    struct hv_err err;
    for (;;) {
        assert_int_equal(be->ops->observe(be, ref, &obs, &err), HV_OK);
        if (obs.hw.memory_mib == mib || lvt_now_ms() > end)
            return obs.hw.memory_mib;
        usleep(20 * 1000);
    }
}
