/* test_kv_infra.c: kubevirt.followInfraClusterSecretRef end to end against fake_infra.py (a
 * management API with CAPK's objects and an infra API reachable only with the kubeconfig's
 * credentials): the chain KubevirtMachine -> Cluster -> KubevirtCluster -> Secret ->
 * kubeconfig -> the infra cluster's VM, read and patched there, through src/kube/capk.c over
 * the management client (hv_kube) as runtime.c wires it. Also: the KubevirtMachine's own ref,
 * a client certificate from the kubeconfig (in memory), data.namespace and the template's
 * namespace, no ref (the configured cluster), and a Secret missing, forbidden, with an exec
 * plugin, without data.kubeconfig: HV_E_INFRA_SECRET, a message without credentials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "capk.h"
#include "kube.h"
#include "kubevirt_backend.h"
#include "runtime.h"

static struct hv_kube *kube;

static struct hv_backend *backend(void)
{
    struct hv_kubevirt_cluster c = {.name = "mgmt",
                                    .server = getenv("KV_MGMT_SERVER"),
                                    .token_file = getenv("KV_MGMT_TOKEN"),
                                    .ca_file = getenv("KV_CA")};
    struct hv_kubevirt_opts o = {.clusters = &c,
                                 .n_clusters = 1,
                                 .timeout_ms = 3000,
                                 .infra = hv_runtime_capk_infra,
                                 .infra_ctx = kube};
    char err[200];
    struct hv_backend *b = hv_kubevirt_new(&o, err, sizeof(err));
    if (!b)
        fail_msg("hv_kubevirt_new: %s", err);
    return b;
}

static void ref_of(struct hv_vm_ref *ref, const char *cluster, const char *machine)
{
    memset(ref, 0, sizeof(*ref));
    snprintf(ref->cluster, sizeof(ref->cluster), "capi/%s", cluster);
    snprintf(ref->name, sizeof(ref->name), "capi/%s", machine); /* as the hook path makes it */
}

static void observe_ok(struct hv_backend *b, const char *cluster, const char *machine,
                       const char *host)
{
    struct hv_vm_ref ref;
    ref_of(&ref, cluster, machine);
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    int rc = b->ops->observe(b, &ref, &obs, &err);
    if (rc != HV_OK)
        fail_msg("observe %s: %d %s", machine, rc, err.detail);
    assert_true(obs.found);
    assert_int_equal(obs.hw.memory_mib, 2048);
    assert_int_equal(obs.hw.cpus, 2);
    assert_string_equal(obs.host, host);
}

static void test_chain(void **state)
{
    (void)state;
    struct hv_backend *b = backend();
    /* through the Cluster's KubevirtCluster, token; twice: the second from the cache */
    observe_ok(b, "c1", "m1", "capk:capi/infra-kubeconfig");
    observe_ok(b, "c1", "m1", "capk:capi/infra-kubeconfig");
    /* the record is written on the infra cluster */
    struct hv_vm_ref ref;
    ref_of(&ref, "c1", "m1");
    struct hv_err err = {0};
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "{\"v\":1}", &err), HV_OK);
    /* the machine's own ref, a client certificate, data.namespace */
    observe_ok(b, "c2", "m2", "capk:sec/cert-kc");
    /* no ref: the configured cluster */
    observe_ok(b, "c3", "m3", "mgmt");
    /* the template's namespace over the Secret's */
    observe_ok(b, "c1", "m8", "capk:capi/infra-kubeconfig");
    b->ops->free(b);
}

static void test_refused(void **state)
{
    (void)state;
    struct hv_backend *b = backend();
    static const struct {
        const char *machine, *detail;
    } t[] = {
        {"m4", "Secret capi/gone not found"},
        {"m5", "Secret capi/forbidden: HTTP 403 (hvupdater may not get it)"},
        {"m6", "Secret capi/exec: kubeconfig: user \"hv\": exec credential plugins are not "
               "supported (give a token or a client certificate)"},
        {"m7", "Secret capi/empty lacks data.kubeconfig"},
        {"m9", "KubevirtMachine capi/m9 not found"},
    };
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        struct hv_vm_ref ref;
        ref_of(&ref, "c1", t[k].machine);
        struct hv_vm_obs obs;
        struct hv_err err = {0};
        assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_INFRA_SECRET);
        assert_int_equal(err.code, HV_E_INFRA_SECRET);
        assert_string_equal(err.detail, t[k].detail);
        /* and again: an error is not cached, it says the same */
        assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_INFRA_SECRET);
        assert_string_equal(err.detail, t[k].detail);
    }
    b->ops->free(b);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct hv_kube_cfg kc = {.server = getenv("KV_MGMT_SERVER"),
                             .token_file = getenv("KV_MGMT_TOKEN"),
                             .ca_file = getenv("KV_CA"),
                             .timeout_ms = 3000};
    char err[200];
    kube = hv_kube_new(&kc, err, sizeof(err));
    if (!kube) {
        fprintf(stderr, "hv_kube_new: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    hv_kube_free(kube);
    curl_global_cleanup();
    return rc;
}
