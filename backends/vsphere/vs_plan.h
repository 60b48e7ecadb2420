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
/* vSphere's largest VM, over every virtual hardware version ("Hardware Features Available
 * with Virtual Machine Compatibility Settings", vSphere 8.0 VM Administration): 24560 GB of
 * memory and 768 logical processors from hardware version 18 (ESXi 7.0 U1) on, 256 cores
 * per socket from version 20 (ESXi 8.0). Older hardware versions allow less; that depends on
 * the VM and is left to vCenter. */
#define VS_MAX_MEMORY_MB        (24560 * 1024)
#define VS_MAX_CPUS             768
#define VS_MAX_CORES_PER_SOCKET 256

/* The rules that hold whatever the VM (ops->check): each set field of desired gets
 * HV_HOW_IMPOSSIBLE with a stable reason, or HV_HOW_NONE: memory a positive multiple of 4
 * MiB, cpus and coresPerSocket positive, cpus a multiple of the desired coresPerSocket, all
 * within the maxima above. vs_plan applies it first. */
void vs_check(const struct hv_hw *desired, struct hv_field_plan plan[HV_F_COUNT]);

/* Take the VM as an operation in flight leaves it (hv_vm_obs.assumed): memory, vCPUs, cores
 * per socket and the disk's size from hw where set; everything else as read. */
void vs_assume(struct vs_vm *vm, const struct hv_hw *hw);

/* Fill plan[] for every field that differs between vm and desired (others HV_HOW_NONE). */
void vs_plan(const struct vs_vm *vm, const struct hv_hw *desired,
             struct hv_field_plan plan[HV_F_COUNT]);

#endif
