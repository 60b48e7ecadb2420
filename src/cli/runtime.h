/* runtime.h: the serving process's wiring: from a config, the backends, the engine and the
 * hooks context that the server answers with. Owns everything it creates; borrows cfg. */
#ifndef HV_RUNTIME_H
#define HV_RUNTIME_H

#include "config.h"
#include "hooks.h"

struct hv_runtime;

struct hv_runtime *hv_runtime_new(const struct hv_config *cfg, char *err, size_t errlen);
const struct hv_hooks_ctx *hv_runtime_hooks(const struct hv_runtime *rt);
void hv_runtime_free(struct hv_runtime *rt);

#endif
