/* fuzz_oprecord.c: libFuzzer target for the operation record read back from a VM (libvirt
 * metadata, vSphere extraConfig: anyone with write access to the VM can put text there).
 *
 * hv_oprecord_read must refuse or accept without harm; an accepted record must have a known
 * phase, NUL-terminated strings, and write back (hv_oprecord_write) to text that reads again
 * to the same record, and writes again to the same text.
 */
#include "oprecord.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_oprecord: invariant broken: %s\n", what);
    abort();
}

static void check_strings(const struct hv_oprecord *r)
{
    for (int f = 0; f < HV_F_COUNT; f++)
        if (!memchr(r->plan[f], '\0', sizeof(r->plan[f])))
            fail("plan string");
    if (!memchr(r->owner, '\0', sizeof(r->owner)) || !memchr(r->policy, '\0', sizeof(r->policy)) ||
        !memchr(r->message, '\0', sizeof(r->message)))
        fail("string");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static struct hv_oprecord a, b;
    static char out1[HV_RECORD_MAX], out2[HV_RECORD_MAX];
    if (hv_oprecord_read(&a, text)) {
        if (a.phase < 0 || a.phase >= HV_PH_COUNT)
            fail("phase");
        check_strings(&a);
        if (hv_oprecord_write(&a, out1, sizeof(out1))) {
            if (!hv_oprecord_read(&b, out1))
                fail("a written record does not read back");
            if (!hv_oprecord_write(&b, out2, sizeof(out2)) || strcmp(out1, out2))
                fail("write, read, write differs");
            if (b.phase != a.phase || b.cold != a.cold || !hv_hw_equal(&a.desired, &b.desired) ||
                b.attempts != a.attempts || b.started_at != a.started_at || b.step_at != a.step_at)
                fail("read back differs");
        }
    }
    free(text);
    return 0;
}
