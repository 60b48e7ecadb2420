/* vcsim_harness.h: start and stop the vcsim launcher (test/vcsim) from a test, read its
 * info.json, talk to its /hvtest control endpoints, and count a VM's events through the
 * real vim25 EventManager.QueryEvents.
 *
 * struct vcsim is caller-owned plain data; vcsim_stop kills the launcher and removes its
 * directory. The launcher also exits when the test process dies (its stdin closes).
 */
#ifndef HV_VCSIM_HARNESS_H
#define HV_VCSIM_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#include "vsphere_backend.h"

#define VCSIM_MAX_VMS 128

struct vcsim_vm {
    char name[64];
    char uuid[64];
    char moref[64];
    char host[64];
};

struct vcsim {
    pid_t pid;
    int stdin_fd;
    char dir[256];
    char url[256];
    char host[128]; /* 127.0.0.1:port */
    char username[64];
    char password_file[320];
    char cert[320];
    char ca[320];
    char sha1[128];
    char sha256[128];
    char control_url[256];
    size_t nvms;
    struct vcsim_vm vms[VCSIM_MAX_VMS];
    double start_ms; /* launcher start to ready line */
};

/* Start $HV_VCSIM_BIN with extra flags (NULL-terminated). Fails loudly (message on stderr,
 * returns -1) when the binary is missing or does not become ready. */
int vcsim_start(struct vcsim *v, const char *const *flags);
void vcsim_stop(struct vcsim *v);
const struct vcsim_vm *vcsim_vm(const struct vcsim *v, size_t index);

/* A server config for this launcher: name "vcsim", pinned by SHA-256 thumbprint. */
struct hv_vsphere_server vcsim_server(const struct vcsim *v);
/* New backend for one server; aborts the test on failure. */
struct hv_backend *vcsim_backend(const struct hv_vsphere_server *cfg);

/* Server-side counters: calls of method (or all requests when method is NULL). */
long vcsim_calls(const struct vcsim *v, const char *method);
/* Drop every session the server has handed out; returns how many, or -1. */
int vcsim_expire_sessions(const struct vcsim *v);
/* Events of type (e.g. "VmPoweredOffEvent") recorded for the VM; -1 on error. */
int vcsim_count_events(struct hv_backend *b, const char *moref, const char *type);

double vcsim_now_ms(void);

#endif
