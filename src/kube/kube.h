/* kube.h: a small Kubernetes API client: GET one object or one page of a list, POST one
 * object, merge-patch one object, nothing else.
 *
 * Configured in-cluster (KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA
 * files) or explicitly (server URL, token file, CA file) for tests and hosts outside a cluster.
 * The token file is read at every request (projected tokens rotate). Every request is bounded
 * by its timeout and uses its own libcurl handle, so calls are thread-safe; none may run on a
 * hook's thread (callers run them on workers, probes or a thread of their own).
 * hv_kube owns its strings; free with hv_kube_free. Tokens are never logged or put in errors.
 */
#ifndef HV_KUBE_H
#define HV_KUBE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

struct hv_kube_cfg {
    const char *server;     /* "https://host:port"; NULL or "": in-cluster from the environment */
    const char *token_file; /* NULL: the service account's */
    const char *ca_file;    /* NULL: the service account's */
    int timeout_ms;         /* per request; <= 0: 5000 */
};

#define HV_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct hv_kube;

/* NULL with a reason in err when the configuration is incomplete (e.g. in-cluster without
 * KUBERNETES_SERVICE_HOST). Never contacts the server. */
struct hv_kube *hv_kube_new(const struct hv_kube_cfg *cfg, char *err, size_t errlen);
void hv_kube_free(struct hv_kube *k);
int hv_kube_timeout(const struct hv_kube *k);

/* GET path ("/api/v1/namespaces/ns/secrets/name"). Returns the HTTP status, or -1 when no
 * answer came (err says why). On 200, *out is the parsed object (caller frees with hj_free);
 * otherwise *out is NULL. timeout_ms <= 0: the client's. */
int hv_kube_get(struct hv_kube *k, const char *path, int timeout_ms, hj **out, char *err,
                size_t errlen);
/* POST a JSON body to path; returns the HTTP status or -1 (err says why). */
int hv_kube_post(struct hv_kube *k, const char *path, const char *body, int timeout_ms, char *err,
                 size_t errlen);

/* PATCH path with a JSON merge patch (RFC 7386); returns the HTTP status or -1 (err says
 * why; on 409 a merge patch that carried metadata.resourceVersion met a newer object). */
int hv_kube_merge_patch(struct hv_kube *k, const char *path, const char *patch, int timeout_ms,
                        char *err, size_t errlen);
/* PATCH path?dryRun=All with a JSON merge patch: nothing is stored, but the API server runs
 * its validation and every admission webhook on the result. Returns the HTTP status or -1
 * (err says why); on an error status *status_out is the API server's Status object when it
 * sent one (the caller frees it), else NULL. */
int hv_kube_dry_run_merge_patch(struct hv_kube *k, const char *path, const char *patch,
                                int timeout_ms, hj **status_out, char *err, size_t errlen);
/* GET one page of a list: path?limit=limit[&continue=cont] (cont NULL or "": the first page).
 * Returns the HTTP status, or -1; on 200 *out is the List (its metadata.continue names the
 * next page), else NULL. */
int hv_kube_list(struct hv_kube *k, const char *path, int limit, const char *cont, int timeout_ms,
                 hj **out, char *err, size_t errlen);

/* Reads through an interface, so a caller's logic runs against the API server (hv_kube_io)
 * or against answers a test or fuzz target makes up. get is hv_kube_get's contract: the HTTP
 * status or -1, *out only on 200. */
struct hv_kube_io {
    void *ctx;
    int (*get)(void *ctx, const char *path, int timeout_ms, hj **out, char *err, size_t errlen);
};
/* io through k (borrowed: k must outlive io). */
struct hv_kube_io hv_kube_io(struct hv_kube *k);

/* true when s is a valid object name or namespace (DNS subdomain: [a-z0-9.-], at most 253),
 * so it can stand in a path as it is. */
int hv_kube_name_ok(const char *s);

/* CLOCK_MONOTONIC in ms: the deadlines of reads made on behalf of one lookup (capv.c, capk.c). */
int64_t hv_kube_mono_ms(void);

#endif
