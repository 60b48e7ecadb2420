/* test_kv_api.c: the KubeVirt backend's HTTP side against fake_api.py (a tiny HTTPS
 * Kubernetes API; it runs this binary with KV_TEST_SERVER, KV_TEST_CA, KV_TEST_TOKEN):
 * list_records over pages (a continue token escaped), a namespace it may not list reported
 * unlisted with its error, write_record decided again after a refused resourceVersion test,
 * observe of a VM without a VMI, a VM another writer always changes first (BUSY after three
 * rounds), and a server that is not there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubevirt_backend.h"

static struct hv_backend *backend(const char *server)
{
    static const char *const ns[] = {"ns1", "ns2"};
    struct hv_kubevirt_cluster c = {.name = "fake",
                                    .server = server,
                                    .token_file = getenv("KV_TEST_TOKEN"),
                                    .ca_file = getenv("KV_TEST_CA"),
                                    .namespaces = ns,
                                    .n_namespaces = 2};
    struct hv_kubevirt_opts o = {.clusters = &c, .n_clusters = 1, .timeout_ms = 3000};
    char err[200];
    struct hv_backend *b = hv_kubevirt_new(&o, err, sizeof(err));
    if (!b)
        fail_msg("hv_kubevirt_new: %s", err);
    return b;
}

struct seen {
    char names[8][HV_NAME_MAX];
    char records[8][64];
    int n, unlisted;
    char unlisted_host[HV_NAME_MAX];
};

static void found(void *ctx, const struct hv_vm_found *vm)
{
    struct seen *s = ctx;
    if (vm->unlisted) {
        s->unlisted++;
        snprintf(s->unlisted_host, sizeof(s->unlisted_host), "%s", vm->host);
        return;
    }
    assert_true(s->n < 8);
    assert_string_equal(vm->ref.server, "fake");
    assert_int_equal(vm->power, HV_POWER_OFF);
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", vm->ref.name);
    snprintf(s->records[s->n], sizeof(s->records[0]), "%s", vm->record);
    s->n++;
}

static void test_list_records(void **state)
{
    (void)state;
    struct hv_backend *b = backend(getenv("KV_TEST_SERVER"));
    struct seen s;
    memset(&s, 0, sizeof(s));
    struct hv_err err = {0};
    int rc = b->ops->list_records(b, found, &s, &err);
    assert_int_equal(rc, HV_E_AUTH); /* ns2: 403 */
    assert_int_equal(s.n, 2);        /* b has no record */
    assert_string_equal(s.names[0], "ns1/a");
    assert_string_equal(s.records[0], "{\"v\":1,\"a\":1}");
    assert_string_equal(s.names[1], "ns1/c"); /* from the second page */
    assert_int_equal(s.unlisted, 1);
    assert_string_equal(s.unlisted_host, "fake");
    b->ops->free(b);
}

static void test_write_record_and_observe(void **state)
{
    (void)state;
    struct hv_backend *b = backend(getenv("KV_TEST_SERVER"));
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.name, sizeof(ref.name), "ns1/a");
    struct hv_err err = {0};
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "{\"v\":1,\"new\":1}", &err), HV_OK);
    /* compare-and-swap: a write expecting another record than the VM's is a lost race,
     * no patch sent (the fake counts them) */
    assert_int_equal(b->ops->write_record(b, &ref, "{\"v\":0}", "{\"v\":2}", &err), HV_E_BUSY);
    assert_string_equal(err.detail, "the VM's record changed since it was read");
    struct hv_vm_obs obs;
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_true(obs.found);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_int_equal(obs.hw.memory_mib, 1024);
    assert_string_equal(obs.id, "");
    snprintf(ref.name, sizeof(ref.name), "ns1/gone");
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_OK);
    assert_false(obs.found);
    snprintf(ref.name, sizeof(ref.name), "NS/Bad");
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_NOT_FOUND);
    b->ops->free(b);
}

/* A 422 to a patch of a VM whose resourceVersion did not move since it was read is the API
 * server refusing the patch itself, not a lost race: not BUSY, not sent again. */
static void test_refused_patch_is_not_a_race(void **state)
{
    (void)state;
    struct hv_backend *b = backend(getenv("KV_TEST_SERVER"));
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.name, sizeof(ref.name), "ns1/frozen");
    struct hv_err err = {0};
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "{\"v\":1}", &err), HV_E_INTERNAL);
    assert_non_null(strstr(err.detail, "HTTP 422"));
    b->ops->free(b);
}

/* Three 422s in a row, the VM's resourceVersion moved each time: another writer wins every
 * race. BUSY for the engine (it looks again on its next pass), after three patches, not
 * more, and not a refusal. */
static void test_three_lost_races_are_busy(void **state)
{
    (void)state;
    struct hv_backend *b = backend(getenv("KV_TEST_SERVER"));
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.name, sizeof(ref.name), "ns1/contended");
    struct hv_err err = {0};
    assert_int_equal(b->ops->write_record(b, &ref, NULL, "{\"v\":1}", &err), HV_E_BUSY);
    assert_string_equal(err.detail, "patch virtualmachine: the VM changed since it was read");
    b->ops->free(b);
}

static void test_unreachable(void **state)
{
    (void)state;
    struct hv_backend *b = backend("https://127.0.0.1:1"); /* nothing listens on port 1 */
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    snprintf(ref.name, sizeof(ref.name), "ns1/a");
    struct hv_vm_obs obs;
    struct hv_err err = {0};
    assert_int_equal(b->ops->observe(b, &ref, &obs, &err), HV_E_UNREACHABLE);
    assert_null(strstr(err.detail, "kv-test-token"));
    b->ops->free(b);
}

int main(void)
{
    if (!getenv("KV_TEST_SERVER")) {
        fprintf(stderr, "run through fake_api.py\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_records),
        cmocka_unit_test(test_write_record_and_observe),
        cmocka_unit_test(test_refused_patch_is_not_a_race),
        cmocka_unit_test(test_three_lost_races_are_busy),
        cmocka_unit_test(test_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
