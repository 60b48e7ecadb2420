/* vs_test.h: test hooks into a vSphere backend (used by test/vsphere only).
 *
 * The returned server is borrowed from the backend and lives until b->ops->free.
 */
#ifndef HV_VS_TEST_H
#define HV_VS_TEST_H

#include <stddef.h>

#include "backend.h"
#include "vs_soap.h"

/* The i-th configured server of a backend made by hv_vsphere_new, or NULL. */
struct vs_server *vs_backend_server(struct hv_backend *b, size_t i);
/* How many per-cluster / per-thumbprint sessions the backend holds now. */
size_t vs_backend_sessions(struct hv_backend *b);

#endif
