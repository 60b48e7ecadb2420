/* vs_plan.h: which hardware changes vSphere can make to a running VM (hot-add) and which
 * need the VM off, decided from a vs_vm observation alone (pure; unit-tested as a table).
 */
#ifndef HV_VS_PLAN_H
#define HV_VS_PLAN_H

#include "backend.h"
#include "vs_props.h"

#define VS_LINUX_HOTADD_EDGE_MB 3072 /* Linux guests cannot grow live from <= 3 GB past it */

/* The disk's capacity in MiB as the contract counts it (-1 when there is no such disk). */
int64_t vs_disk_mib(const struct vs_vm *vm);
/* Fill plan[] for every field that differs between vm and desired (others HV_HOW_NONE). */
void vs_plan(const struct vs_vm *vm, const struct hv_hw *desired,
             struct hv_field_plan plan[HV_F_COUNT]);

#endif
