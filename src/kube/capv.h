/* capv.h: vCenter credentials where Cluster API Provider vSphere (CAPV) keeps them.
 *
 * For a machine's cluster "namespace/name": the Cluster's spec.infrastructureRef names its
 * VSphereCluster, whose spec.identityRef is either a Secret in the cluster's namespace or a
 * cluster-scoped VSphereClusterIdentity (status.ready, spec.allowedNamespaces.selector matching
 * the namespace's labels) whose spec.secretName lives in CAPV's namespace. The Secret's
 * data.username and data.password are the credentials, as CAPV's pkg/identity reads them.
 * Needs get on clusters, vsphereclusters, vsphereclusteridentities, namespaces and secrets.
 */
#ifndef HV_CAPV_H
#define HV_CAPV_H

#include <stddef.h>

#include "kube.h"

enum hv_capv_rc {
    HV_CAPV_OK = 0,   /* user and pass filled */
    HV_CAPV_NONE = 1, /* the VSphereCluster names no identity (CAPV falls back to its own) */
    HV_CAPV_ERR = -1, /* why says which object could not be read or used (names only) */
};

/* Blocks for up to timeout_ms (over all its requests; <= 0: k's timeout): never call it on a
 * hook's thread. */
enum hv_capv_rc hv_capv_credentials(struct hv_kube *k, const char *capv_namespace,
                                    const char *cluster, int timeout_ms, char *user, size_t ulen,
                                    char *pass, size_t plen, char *why, size_t whylen);
/* The same lookup through io (timeout_ms > 0 required). */
enum hv_capv_rc hv_capv_credentials_io(const struct hv_kube_io *io, const char *capv_namespace,
                                       const char *cluster, int timeout_ms, char *user, size_t ulen,
                                       char *pass, size_t plen, char *why, size_t whylen);

/* true when labels (an object of strings, may be NULL) match a metav1.LabelSelector
 * (matchLabels and matchExpressions with In, NotIn, Exists, DoesNotExist); an empty selector
 * matches everything. -1 when the selector is malformed: wherever Go's
 * metav1.LabelSelectorAsSelector returns an error (In/NotIn without values, Exists/DoesNotExist
 * with values, a key or value that is not a label key or value, an unknown operator), so that
 * CAPV's "allowed" is never read from a selector CAPV itself refuses. */
int hv_label_selector_match(const hj *selector, const hj *labels);

#endif
