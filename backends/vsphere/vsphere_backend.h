/* vsphere_backend.h: the vSphere (vCenter vim25 SOAP) backend's constructor.
 *
 * hv_vsphere_new copies everything it needs from servers[] (vs_config.h); the caller keeps
 * ownership of the array and its strings. The returned backend is freed with b->ops->free (which
 * logs out of every vCenter). One session per server is shared by all threads.
 */
#ifndef HV_VSPHERE_BACKEND_H
#define HV_VSPHERE_BACKEND_H

#include <stddef.h>

#include "backend.h"
#include "vs_config.h"

/* NULL on a bad configuration, with a reason in err. Never contacts a server. */
struct hv_backend *hv_vsphere_new(const struct hv_vsphere_server *servers, size_t n, char *err,
                                  size_t errlen);

#endif
