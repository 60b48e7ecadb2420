/* fuzz_config.c: libFuzzer target for the config loader (hv_config_parse over the embedded
 * default, as `serve --config` does). Accepted or refused, the config frees cleanly; a
 * refusal names what is wrong; an accepted config has values inside their documented ranges.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_config: invariant broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hv_config c;
    char err[512] = "";
    hv_config_default(&c);
    if (hv_config_parse(&c, (const char *)data, size, err, sizeof(err)) == 0) {
        if (c.engine.workers < 1 || c.engine.workers > 64)
            fail("engine.workers out of range");
        if (c.max_body < 1024)
            fail("maxBodyBytes out of range");
        for (size_t i = 0; i < c.n_vsphere; i++)
            if (!c.vsphere[i].name || !c.vsphere[i].url)
                fail("a vSphere server without name or url");
    } else if (!err[0]) {
        fail("a refusal without a message");
    }
    hv_config_free(&c);
    return 0;
}
