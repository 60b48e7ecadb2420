/* capv.c: CAPV's identity lookup (capv.h): Cluster -> VSphereCluster -> identityRef ->
 * Secret, with VSphereClusterIdentity's ready and allowedNamespaces checks. The decoded
 * credentials go straight into the caller's buffers; every intermediate copy is wiped. */
#include "capv.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"

#define CAPI_CLUSTERS "/apis/cluster.x-k8s.io/v1beta2/namespaces/%s/clusters/%s"
#define CAPV_GROUP    "/apis/infrastructure.cluster.x-k8s.io/v1beta1"

/* GET path within what is left of deadline; *out on 200. */
static int get(const struct hv_kube_io *k, const char *path, int64_t deadline, hj **out, char *why,
               size_t whylen)
{
    int64_t left = deadline - hv_kube_mono_ms();
    *out = NULL;
    if (left <= 0) {
        snprintf(why, whylen, "no time left before GET %s", path);
        return -1;
    }
    int st = k->get(k->ctx, path, (int)left, out, why, whylen);
    if (st == 200 && *out)
        return 0;
    if (st >= 0 && st != 200)
        snprintf(why, whylen, "kubernetes GET %s: HTTP %d", path, st);
    hj_free(*out);
    *out = NULL;
    return -1;
}

static bool str_in(const char *s, const hj *arr)
{
    for (size_t i = 0; arr && arr->type == HJ_ARRAY && i < arr->n; i++)
        if (arr->items[i]->type == HJ_STRING && strcmp(arr->items[i]->s, s) == 0)
            return true;
    return false;
}

/* [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])? of at most max bytes; empty allowed if empty_ok
 * (apimachinery's qualified-name part and label value). */
static bool label_token_ok(const char *s, size_t n, size_t max, bool empty_ok)
{
    if (n == 0)
        return empty_ok;
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

/* A DNS-1123 subdomain: lower-case alphanumerics, '-' and '.', at most 253, alphanumeric at
 * both ends and around each '.'. */
static bool dns_subdomain_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (alnum)
            continue;
        if ((c != '-' && c != '.') || i == 0 || i == n - 1)
            return false;
        if (c == '.' && (s[i - 1] == '.' || s[i - 1] == '-' || s[i + 1] == '-'))
            return false;
    }
    return true;
}

/* A label key as Go's validation.IsQualifiedName takes it: [prefix/]name. */
static bool label_key_ok(const char *k)
{
    const char *slash = strchr(k, '/');
    if (!slash)
        return label_token_ok(k, strlen(k), 63, false);
    if (strchr(slash + 1, '/'))
        return false;
    return dns_subdomain_ok(k, (size_t)(slash - k)) &&
           label_token_ok(slash + 1, strlen(slash + 1), 63, false);
}

static bool label_value_ok(const hj *v)
{
    return v && v->type == HJ_STRING && strlen(v->s) == v->slen &&
           label_token_ok(v->s, v->slen, 63, true);
}

/* The selector as metav1.LabelSelectorAsSelector would accept it: every key a qualified name,
 * every value a label value, In and NotIn with at least one value, Exists and DoesNotExist
 * with none. Where Go's parser returns an error, CAPV allows no namespace: so do we. */
static bool selector_ok(const hj *selector)
{
    const hj *ml = hj_get(selector, "matchLabels");
    if (ml && ml->type != HJ_OBJECT && ml->type != HJ_NULL)
        return false;
    for (size_t i = 0; ml && ml->type == HJ_OBJECT && i < ml->n; i++)
        if (!label_key_ok(ml->keys[i]) || !label_value_ok(ml->items[i]))
            return false;
    const hj *me = hj_get(selector, "matchExpressions");
    if (me && me->type != HJ_ARRAY && me->type != HJ_NULL)
        return false;
    for (size_t i = 0; me && me->type == HJ_ARRAY && i < me->n; i++) {
        const hj *e = me->items[i];
        const char *key = hj_get_str(e, "key"), *op = hj_get_str(e, "operator");
        const hj *values = hj_get(e, "values");
        if (e->type != HJ_OBJECT || !key || !op || !label_key_ok(key))
            return false;
        if (values && values->type != HJ_ARRAY && values->type != HJ_NULL)
            return false;
        size_t nv = values && values->type == HJ_ARRAY ? values->n : 0;
        for (size_t j = 0; j < nv; j++)
            if (!label_value_ok(values->items[j]))
                return false;
        bool set_op = !strcmp(op, "In") || !strcmp(op, "NotIn");
        bool exists_op = !strcmp(op, "Exists") || !strcmp(op, "DoesNotExist");
        if ((set_op && nv == 0) || (exists_op && nv != 0) || (!set_op && !exists_op))
            return false;
    }
    return true;
}

int hv_label_selector_match(const hj *selector, const hj *labels)
{
    if (!selector || selector->type == HJ_NULL)
        return 1;
    if (selector->type != HJ_OBJECT || !selector_ok(selector))
        return -1;
    const hj *ml = hj_get(selector, "matchLabels");
    if (ml && ml->type != HJ_OBJECT && ml->type != HJ_NULL)
        return -1;
    for (size_t i = 0; ml && ml->type == HJ_OBJECT && i < ml->n; i++) {
        const char *have = hj_get_str(labels, ml->keys[i]);
        if (ml->items[i]->type != HJ_STRING)
            return -1;
        if (!have || strcmp(have, ml->items[i]->s) != 0)
            return 0;
    }
    const hj *me = hj_get(selector, "matchExpressions");
    if (me && me->type != HJ_ARRAY && me->type != HJ_NULL)
        return -1;
    for (size_t i = 0; me && me->type == HJ_ARRAY && i < me->n; i++) {
        const char *key = hj_get_str(me->items[i], "key");
        const char *op = hj_get_str(me->items[i], "operator");
        const hj *values = hj_get(me->items[i], "values");
        if (!key || !op)
            return -1;
        const char *have = hj_get_str(labels, key);
        bool ok;
        if (strcmp(op, "In") == 0)
            ok = have && str_in(have, values);
        else if (strcmp(op, "NotIn") == 0)
            ok = !have || !str_in(have, values);
        else if (strcmp(op, "Exists") == 0)
            ok = have != NULL;
        else if (strcmp(op, "DoesNotExist") == 0)
            ok = have == NULL;
        else
            return -1;
        if (!ok)
            return 0;
    }
    return 1;
}

/* data[key] of a Secret, base64-decoded into out (NUL-terminated, no NUL inside). */
static int secret_value(const hj *secret, const char *key, char *out, size_t cap)
{
    const char *b64 = hj_get_str(hj_get(secret, "data"), key);
    if (!b64)
        return -1;
    size_t n = 0;
    char *v = hv_b64_decode(b64, strlen(b64), &n);
    if (!v)
        return -1;
    int rc = n > 0 && n < cap && !memchr(v, '\0', n) ? 0 : -1;
    if (rc == 0) {
        memcpy(out, v, n);
        out[n] = '\0';
    }
    explicit_bzero(v, n);
    free(v);
    return rc;
}

/* The Secret's encoded values, wiped before the parsed answer is freed (its collector's buffer
 * is wiped by kube.c). */
static void wipe_secret(hj *secret)
{
    hj *data = hj_get(secret, "data");
    static const char *const keys[] = {"username", "password"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        char *v = (char *)hj_get_str(data, keys[k]);
        if (v)
            explicit_bzero(v, strlen(v));
    }
}

enum hv_capv_rc hv_capv_credentials(struct hv_kube *k, const char *capv_namespace,
                                    const char *cluster, int timeout_ms, char *user, size_t ulen,
                                    char *pass, size_t plen, char *why, size_t whylen)
{
    struct hv_kube_io io = hv_kube_io(k);
    return hv_capv_credentials_io(&io, capv_namespace, cluster,
                                  timeout_ms > 0 ? timeout_ms : hv_kube_timeout(k), user, ulen,
                                  pass, plen, why, whylen);
}

enum hv_capv_rc hv_capv_credentials_io(const struct hv_kube_io *k, const char *capv_namespace,
                                       const char *cluster, int timeout_ms, char *user, size_t ulen,
                                       char *pass, size_t plen, char *why, size_t whylen)
{
    int64_t deadline = hv_kube_mono_ms() + timeout_ms;
    char ns[256], name[256], path[1024];
    const char *slash = strchr(cluster, '/');
    if (!slash || (size_t)(slash - cluster) >= sizeof(ns) || strlen(slash + 1) >= sizeof(name)) {
        snprintf(why, whylen, "cluster key is not namespace/name");
        return HV_CAPV_ERR;
    }
    memcpy(ns, cluster, (size_t)(slash - cluster));
    ns[slash - cluster] = '\0';
    snprintf(name, sizeof(name), "%s", slash + 1);
    if (!hv_kube_name_ok(ns) || !hv_kube_name_ok(name)) {
        snprintf(why, whylen, "cluster namespace or name is not a valid object name");
        return HV_CAPV_ERR;
    }
    enum hv_capv_rc rc = HV_CAPV_ERR;
    hj *cl = NULL, *vc = NULL, *id = NULL, *nso = NULL, *sec = NULL;

    snprintf(path, sizeof(path), CAPI_CLUSTERS, ns, name);
    if (get(k, path, deadline, &cl, why, whylen) < 0)
        goto out;
    const hj *iref = hj_get(hj_get(cl, "spec"), "infrastructureRef");
    const char *ikind = hj_get_str(iref, "kind"), *iname = hj_get_str(iref, "name");
    if (!ikind || strcmp(ikind, "VSphereCluster") != 0 || !hv_kube_name_ok(iname)) {
        snprintf(why, whylen, "Cluster %s/%s: spec.infrastructureRef is not a VSphereCluster", ns,
                 name);
        goto out;
    }
    snprintf(path, sizeof(path), CAPV_GROUP "/namespaces/%s/vsphereclusters/%s", ns, iname);
    if (get(k, path, deadline, &vc, why, whylen) < 0)
        goto out;
    const hj *ref = hj_get(hj_get(vc, "spec"), "identityRef");
    if (!ref || ref->type == HJ_NULL) {
        rc = HV_CAPV_NONE;
        snprintf(why, whylen, "VSphereCluster %s/%s has no spec.identityRef", ns, iname);
        goto out;
    }
    const char *rkind = hj_get_str(ref, "kind"), *rname = hj_get_str(ref, "name");
    if (!rkind || !hv_kube_name_ok(rname)) {
        snprintf(why, whylen, "VSphereCluster %s/%s: spec.identityRef needs a kind and a name", ns,
                 iname);
        goto out;
    }
    const char *sec_ns = ns, *sec_name = rname;
    if (strcmp(rkind, "VSphereClusterIdentity") == 0) {
        snprintf(path, sizeof(path), CAPV_GROUP "/vsphereclusteridentities/%s", rname);
        if (get(k, path, deadline, &id, why, whylen) < 0)
            goto out;
        const hj *ready = hj_get(hj_get(id, "status"), "ready");
        if (!ready || ready->type != HJ_BOOL || !ready->b) {
            snprintf(why, whylen, "VSphereClusterIdentity %s is not ready", rname);
            goto out;
        }
        const hj *allowed = hj_get(hj_get(id, "spec"), "allowedNamespaces");
        if (!allowed || allowed->type != HJ_OBJECT) {
            snprintf(why, whylen, "VSphereClusterIdentity %s allows no namespace", rname);
            goto out;
        }
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s", ns);
        if (get(k, path, deadline, &nso, why, whylen) < 0)
            goto out;
        int m = hv_label_selector_match(hj_get(allowed, "selector"),
                                        hj_get(hj_get(nso, "metadata"), "labels"));
        if (m != 1) {
            snprintf(why, whylen,
                     m < 0 ? "VSphereClusterIdentity %s: allowedNamespaces.selector is malformed"
                           : "VSphereClusterIdentity %s does not allow namespace %s",
                     rname, ns);
            goto out;
        }
        sec_ns = capv_namespace;
        sec_name = hj_get_str(hj_get(id, "spec"), "secretName");
        if (!hv_kube_name_ok(sec_name)) {
            snprintf(why, whylen, "VSphereClusterIdentity %s: spec.secretName is not a name",
                     rname);
            goto out;
        }
    } else if (strcmp(rkind, "Secret") != 0) {
        snprintf(why, whylen,
                 "VSphereCluster %s/%s: identityRef kind %.40s is not Secret or "
                 "VSphereClusterIdentity",
                 ns, iname, rkind);
        goto out;
    }
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", sec_ns, sec_name);
    if (get(k, path, deadline, &sec, why, whylen) < 0)
        goto out;
    if (secret_value(sec, "username", user, ulen) < 0 ||
        secret_value(sec, "password", pass, plen) < 0) {
        explicit_bzero(user, ulen);
        explicit_bzero(pass, plen);
        snprintf(why, whylen, "Secret %s/%s lacks data.username or data.password", sec_ns,
                 sec_name);
        goto out;
    }
    rc = HV_CAPV_OK;
out:
    hj_free(cl);
    hj_free(vc);
    hj_free(id);
    hj_free(nso);
    wipe_secret(sec);
    hj_free(sec);
    return rc;
}
