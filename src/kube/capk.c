/* capk.c: CAPK's infraClusterSecretRef lookup (capk.h): KubevirtMachine, else Cluster ->
 * KubevirtCluster, -> Secret. The decoded kubeconfig goes to the caller; every other copy of
 * the Secret's values is wiped. */
#include "capk.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"

#define CAPI_CLUSTERS "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/clusters/%s"
#define CAPK_GROUP    "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/%s"

/* GET path within what is left of deadline: the HTTP status (200 with *out), or -1. what
 * names the object in why. */
static int get(const struct hv_kube_io *k, const char *path, const char *what, int64_t deadline,
               hj **out, char *why, size_t whylen)
{
    int64_t left = deadline - hv_kube_mono_ms();
    *out = NULL;
    if (left <= 0) {
        snprintf(why, whylen, "%s: no time left to read it", what);
        return -1;
    }
    char e[200] = "";
    int st = k->get(k->ctx, path, (int)left, out, e, sizeof(e));
    if (st == 200 && *out)
        return 200;
    hj_free(*out);
    *out = NULL;
    if (st == 404)
        snprintf(why, whylen, "%s not found", what);
    else if (st == 401 || st == 403)
        snprintf(why, whylen, "%s: HTTP %d (hvupdater may not get it)", what, st);
    else if (st >= 0)
        snprintf(why, whylen, "%s: HTTP %d", what, st);
    else
        snprintf(why, whylen, "%s: no answer (%s)", what, e);
    return st < 0 ? -1 : st;
}

/* The Secret's encoded values, wiped before the parsed answer is freed. */
static void wipe_secret(hj *secret)
{
    hj *data = hj_get(secret, "data");
    for (size_t i = 0; data && data->type == HJ_OBJECT && i < data->n; i++)
        if (data->items[i]->type == HJ_STRING)
            explicit_bzero(data->items[i]->s, data->items[i]->slen);
}

/* data[key] decoded (malloc'd, NUL-terminated); NULL when absent or not base64 (*bad) */
static char *secret_value(const hj *secret, const char *key, size_t *len, bool *bad)
{
    const hj *v = hj_get(hj_get(secret, "data"), key);
    *bad = false;
    if (!v)
        return NULL;
    char *out = v->type == HJ_STRING ? hv_b64_decode(v->s, v->slen, len) : NULL;
    *bad = !out;
    return out;
}

/* spec.infraClusterSecretRef of obj: true with name (and namespace, "" when unset) when it
 * names a Secret; false when absent or null; -1 when it is not usable */
static int secret_ref(const hj *obj, const char **ns, const char **name)
{
    const hj *ref = hj_get(hj_get(obj, "spec"), "infraClusterSecretRef");
    if (!ref || ref->type == HJ_NULL)
        return 0;
    *name = hj_get_str(ref, "name");
    *ns = hj_get_str(ref, "namespace");
    if (!*ns || !**ns)
        *ns = "";
    if (ref->type != HJ_OBJECT || !*name || !hv_kube_name_ok(*name) ||
        (**ns && !hv_kube_name_ok(*ns)))
        return -1;
    return 1;
}

static bool split(const char *key, char *ns, size_t nscap, char *name, size_t namecap)
{
    const char *slash = key ? strchr(key, '/') : NULL;
    if (!slash || (size_t)(slash - key) >= nscap || strlen(slash + 1) >= namecap)
        return false;
    memcpy(ns, key, (size_t)(slash - key));
    ns[slash - key] = '\0';
    snprintf(name, namecap, "%s", slash + 1);
    return hv_kube_name_ok(ns) && hv_kube_name_ok(name);
}

int hv_capk_infra_io(const struct hv_kube_io *k, const char *cluster, const char *machine,
                     int timeout_ms, struct hv_capk_infra *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    int64_t deadline = hv_kube_mono_ms() + (timeout_ms > 0 ? timeout_ms : 5000);
    char ns[64], cname[256], path[1024], what[400];
    if (!split(cluster, ns, sizeof(ns), cname, sizeof(cname)) || !machine ||
        !hv_kube_name_ok(machine) || strlen(machine) > 253) {
        snprintf(why, whylen, "cluster key is not namespace/name or machine is not a name");
        return -1;
    }
    int rc = -1;
    hj *kvm = NULL, *cl = NULL, *kvc = NULL, *sec = NULL;
    const char *rns = "", *rname = NULL;

    /* the KubevirtMachine: the VM's namespace, and its own ref (CAPK >= 0.1.10 defaults it to
     * the KubevirtCluster's) */
    snprintf(path, sizeof(path), CAPK_GROUP "/kubevirtmachines/%s", ns, machine);
    snprintf(what, sizeof(what), "KubevirtMachine %s/%s", ns, machine);
    if (get(k, path, what, deadline, &kvm, why, whylen) != 200)
        goto out;
    const char *tns = hj_get_str(
        hj_get(hj_get(hj_get(kvm, "spec"), "virtualMachineTemplate"), "metadata"), "namespace");
    if (tns && *tns) {
        if (!hv_kube_name_ok(tns) || strlen(tns) >= sizeof(out->template_ns)) {
            snprintf(why, whylen, "%s: virtualMachineTemplate.metadata.namespace is not a name",
                     what);
            goto out;
        }
        snprintf(out->template_ns, sizeof(out->template_ns), "%s", tns);
    }
    int has = secret_ref(kvm, &rns, &rname);
    if (has < 0) {
        snprintf(why, whylen, "%s: spec.infraClusterSecretRef needs a valid name", what);
        goto out;
    }
    if (!has) { /* the Cluster's KubevirtCluster */
        snprintf(path, sizeof(path), CAPI_CLUSTERS, ns, cname);
        snprintf(what, sizeof(what), "Cluster %s/%s", ns, cname);
        if (get(k, path, what, deadline, &cl, why, whylen) != 200)
            goto out;
        const hj *iref = hj_get(hj_get(cl, "spec"), "infrastructureRef");
        const char *ikind = hj_get_str(iref, "kind"), *iname = hj_get_str(iref, "name");
        if (!ikind || strcmp(ikind, "KubevirtCluster") != 0 || !iname || !hv_kube_name_ok(iname)) {
            snprintf(why, whylen, "%s: spec.infrastructureRef is not a KubevirtCluster", what);
            goto out;
        }
        snprintf(path, sizeof(path), CAPK_GROUP "/kubevirtclusters/%s", ns, iname);
        snprintf(what, sizeof(what), "KubevirtCluster %s/%s", ns, iname);
        if (get(k, path, what, deadline, &kvc, why, whylen) != 200)
            goto out;
        has = secret_ref(kvc, &rns, &rname);
        if (has < 0) {
            snprintf(why, whylen, "%s: spec.infraClusterSecretRef needs a valid name", what);
            goto out;
        }
        if (!has) {
            rc = 0; /* no ref: CAPK uses its own cluster; so do we (the configured one) */
            goto out;
        }
    }
    const char *sns = *rns ? rns : ns; /* pkg/infracluster: the owner's namespace by default */
    snprintf(out->secret, sizeof(out->secret), "%s/%s", sns, rname);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", sns, rname);
    snprintf(what, sizeof(what), "Secret %s/%s", sns, rname);
    if (get(k, path, what, deadline, &sec, why, whylen) != 200)
        goto out;
    const char *rv = hj_get_str(hj_get(sec, "metadata"), "resourceVersion");
    snprintf(out->rv, sizeof(out->rv), "%s", rv && strlen(rv) < sizeof(out->rv) ? rv : "");
    bool bad;
    out->kubeconfig = secret_value(sec, "kubeconfig", &out->kubeconfig_len, &bad);
    if (!out->kubeconfig) {
        snprintf(why, whylen,
                 bad ? "%s: data.kubeconfig is not base64" : "%s lacks data.kubeconfig", what);
        goto out;
    }
    size_t nl = 0;
    char *nsv = secret_value(sec, "namespace", &nl, &bad);
    if (nsv || bad) {
        const char *b = nsv ? nsv : "";
        size_t len = nsv ? nl : 0;
        while (len && strchr(" \t\r\n", b[len - 1])) /* strings.TrimSpace, as CAPK */
            len--;
        while (len && strchr(" \t\r\n", *b)) {
            b++;
            len--;
        }
        char tmp[64];
        bool ok = !bad && len < sizeof(tmp);
        if (ok) {
            memcpy(tmp, b, len);
            tmp[len] = '\0';
            ok = len == 0 || hv_kube_name_ok(tmp);
        }
        free(nsv);
        if (!ok) {
            snprintf(why, whylen, "%s: data.namespace is not a namespace", what);
            goto out;
        }
        snprintf(out->secret_ns, sizeof(out->secret_ns), "%s", tmp);
    }
    rc = 0;
out:
    if (rc < 0 && out->kubeconfig) {
        explicit_bzero(out->kubeconfig, out->kubeconfig_len);
        free(out->kubeconfig);
        out->kubeconfig = NULL;
        out->kubeconfig_len = 0;
    }
    hj_free(kvm);
    hj_free(cl);
    hj_free(kvc);
    wipe_secret(sec);
    hj_free(sec);
    return rc;
}
