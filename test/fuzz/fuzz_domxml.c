/* fuzz_domxml.c: libFuzzer target for libvirt domain XML and the record metadata snippet.
 *
 * The input (as a NUL-terminated string) goes to lv_xml_parse_domain, lv_xml_vmem_device
 * (by index and by an address key), lv_xml_element_text, and lv_xml_record_element, whose
 * output must read back to the same text through lv_xml_element_text (for text that XML can
 * hold at all; see xml_chars). The first line of the
 * input is also tried as a size (lv_xml_to_kib, any unit) and a cpuset
 * (lv_xml_parse_cpuset). Invariants: no crash or leak, counts within their arrays, a
 * refusal always has a reason, sizes never negative except the documented -1.
 */
#include "lv_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_domxml: invariant broken: %s\n", what);
    abort();
}

/* Text an XML document can hold as character data: valid UTF-8 of XML 1.0 Chars (tab, LF,
 * CR and U+0020 up, no surrogates, no U+FFFE/U+FFFF). The record writer only ever gets such
 * text (hj_dump escapes control characters and writes UTF-8). */
static bool xml_chars(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s, n = 0;
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                return false;
            s++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, c &= 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, c &= 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, c &= 0x07;
        else
            return false;
        for (unsigned i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return false;
            c = c << 6 | (s[i] & 0x3f);
        }
        if ((n == 2 && c < 0x800) || (n == 3 && (c < 0x10000 || c > 0x10ffff)) ||
            (c >= 0xd800 && c <= 0xdfff) || c == 0xfffe || c == 0xffff)
            return false;
        s += n + 1;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *xml = malloc(size + 1);
    if (!xml)
        return 0;
    memcpy(xml, data, size);
    xml[size] = '\0';

    static struct lv_dominfo di;
    char why[256] = "";
    if (lv_xml_parse_domain(xml, &di, why, sizeof(why)) == 0) {
        if (di.ncells < 0 || di.ncells > LV_MAX_CELLS || di.nmems < 0 ||
            di.nmems > LV_MAX_MEMDEVS || di.slots_used < 0 || di.slots_used > di.nmems)
            fail("counts");
    } else if (!why[0]) {
        fail("a refusal without a reason");
    }

    char addr[128]; /* as lv_live.c: the size of lv_addr_key's key */
    for (int i = 0; i < 3; i++) {
        char *dev = lv_xml_vmem_device(xml, i, "", 1048576, addr, sizeof(addr));
        if (dev && !memchr(addr, '\0', sizeof(addr)))
            fail("address key");
        if (dev && i == 0 && addr[0]) {
            char again[128];
            char *dev2 = lv_xml_vmem_device(xml, 7, addr, 2097152, again, sizeof(again));
            if (!dev2 || strcmp(again, addr))
                fail("a device found by index is not found by its address");
            free(dev2);
        }
        free(dev);
    }

    free(lv_xml_element_text(xml));
    char *el = xml_chars((const unsigned char *)xml) ? lv_xml_record_element(xml) : NULL;
    if (el) {
        char *back = lv_xml_element_text(el);
        if (!back || strcmp(back, xml))
            fail("record element does not read back");
        free(back);
        free(el);
    }

    char line[128];
    size_t n = strcspn(xml, "\n");
    if (n < sizeof(line)) {
        memcpy(line, xml, n);
        line[n] = '\0';
        static const char *const units[] = {NULL, "", "b", "KiB", "M", "GiB", "TB", "EiB", "bogus"};
        for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            long long k = lv_xml_to_kib(line, units[u]);
            if (k < -1)
                fail("negative size");
        }
        bool set[64];
        (void)lv_xml_parse_cpuset(line, set, 64);
    }
    free(xml);
    return 0;
}
