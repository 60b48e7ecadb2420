/* profile.h: infra kind profiles, the data that says which spec fields of an infra kind
 * hvupdater can change, in which unit, how to find the VM and which backend serves it.
 * Profiles are plain values (fixed-size arrays, no heap); hv_profiles owns its array. */
#ifndef HV_PROFILE_H
#define HV_PROFILE_H

#include "backend.h"
#include "json.h"

#include <stdbool.h>
#include <stddef.h>

/* HV_UNIT_QUANTITY: a Kubernetes resource quantity ("4Gi", "4096Mi", or a number of bytes),
 * read by backends/hv_quantity.h (KubevirtMachine's memory.guest). */
enum hv_unit { HV_UNIT_MIB = 0, HV_UNIT_KIB, HV_UNIT_GIB, HV_UNIT_BYTES, HV_UNIT_QUANTITY };

struct hv_field_def {
    bool set;
    char path[128]; /* JSON pointer relative to the spec root */
    enum hv_unit unit;
    /* disk only: which disk. libvirt: the target device ("vda"); vSphere: the unit number
     * (-1 = the first virtual disk). */
    char target[32];
    int unit_number;
};

struct hv_profile {
    char kind[64];
    char api_group[128];
    char versions[8][32]; /* none = any version */
    size_t n_versions;
    bool is_template; /* fields under spec.template.spec (infra machine templates) */
    char backend[32];
    struct hv_field_def field[HV_F_COUNT];
    char providerid_prefix[64]; /* "" = do not read providerID */
    bool by_name;               /* fall back to metadata.name as the VM name */
    char server_path[128];      /* pointer in the spec root naming host/vCenter ("" = none) */
    char thumbprint_path[128];  /* pointer in the spec root to the server's certificate
                                   thumbprint (VSphereMachine: /thumbprint; "" = none) */
    /* The VM is a namespaced object (KubeVirt): hv_vm_ref.name is "namespace/name", the name
     * being the providerID's tail (kubevirt://NAME, a name, not a UUID) or metadata.name, the
     * namespace the string at namespace_path in the spec root when there is one, else the
     * infra object's own namespace. */
    bool namespaced;
    char namespace_path[128];
};

struct hv_profiles {
    struct hv_profile *v;
    size_t n;
};

/* Fill with the built-in profiles (VSphereMachine(Template), LibvirtMachine(Template),
 * KubevirtMachine(Template)). */
void hv_profiles_builtin(struct hv_profiles *ps);
void hv_profiles_free(struct hv_profiles *ps);
/* Add or override (by kind + group) profiles from a JSON array shaped as schemas/config.json
 * "profiles". Returns 0, or -1 with a message naming the offending entry and key. */
int hv_profiles_load(struct hv_profiles *ps, const hj *arr, char *err, size_t errlen);
/* The profile for an object's apiVersion ("group/version") and kind, or NULL. */
const struct hv_profile *hv_profile_find(const struct hv_profiles *ps, const char *api_version,
                                         const char *kind);
/* The field's display name: the last token of its path (e.g. "memoryMiB"). */
const char *hv_field_name(const struct hv_profile *p, enum hv_field f);
/* Spec root pointer of the profile's objects: "/spec" or "/spec/template/spec". */
const char *hv_profile_spec_root(const struct hv_profile *p);
/* The disk selector hv_vm_ref.disk carries to the backend ("" when the profile has no disk). */
void hv_profile_disk_ref(const struct hv_profile *p, char *out, size_t cap);
/* Convert a value in the field's unit to MiB; -1 when not a whole, positive number of MiB. */
int64_t hv_unit_to_mib(const hj *v, enum hv_unit u);

#endif
