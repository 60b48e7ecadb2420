/* runtime.c: builds the hooks context from the config. Until backends are wired in, the
 * UpdateMachine hook answers Failure ("no backend is configured"). */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

struct hv_runtime {
    struct hv_hooks_ctx hooks;
};

struct hv_runtime *hv_runtime_new(const struct hv_config *cfg, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct hv_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt)
        return NULL;
    rt->hooks.profiles = &cfg->profiles;
    rt->hooks.defaults = cfg->defaults;
    rt->hooks.timeout_s = cfg->handler_timeout_s;
    return rt;
}

const struct hv_hooks_ctx *hv_runtime_hooks(const struct hv_runtime *rt)
{
    return &rt->hooks;
}

void hv_runtime_free(struct hv_runtime *rt)
{
    free(rt);
}
