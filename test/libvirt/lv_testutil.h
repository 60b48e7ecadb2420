/* lv_testutil.h: helpers shared by the libvirt backend tests: backends, refs, lab domain
 * templates (test/lab/domains/STYLE.xml) and direct libvirt checks. Every helper asserts (cmocka)
 * instead of returning errors; strings returned are malloc'd and the caller frees them.
 */
#ifndef HV_LV_TESTUTIL_H
#define HV_LV_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "libvirt_backend.h"
#include "lv_internal.h"

double lvt_now_ms(void);
struct hv_backend *lvt_backend(const char *const *uris, size_t n);
void lvt_ref(struct hv_vm_ref *r, const char *server, const char *uuid, const char *name);
char *lvt_read_file(const char *path);
/* test/lab/domains/<style>.xml with every "hvt-<style>" (name, console log) replaced by name
 * and, when switches is non-NULL, " <switches>" appended to the guest's kernel command line */
char *lvt_style_xml(const char *style, const char *name, const char *switches);
/* define (and start when start) xml on uri through a private connection */
void lvt_define(const char *uri, const char *xml, bool start);
/* destroy + undefine name on uri, ignoring "not running" / "not found" */
void lvt_remove(const char *uri, const char *name);
/* the domain's XML read through a private connection (flags: 0 or VIR_DOMAIN_XML_INACTIVE) */
char *lvt_dom_xml(const char *uri, const char *name, unsigned int flags);
/* a unique hvt-* name for this process */
void lvt_name(char *out, size_t len, const char *what);
/* observe until hw.memory_mib == mib or timeout; returns the last observation's value */
long long lvt_wait_memory(struct hv_backend *be, const struct hv_vm_ref *ref, long long mib,
                          int timeout_ms);

#endif
