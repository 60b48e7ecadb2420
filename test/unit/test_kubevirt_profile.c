/* test_kubevirt_profile.c: the built-in profile of CAPK's KubevirtMachine(Template): the
 * quantity unit of memory.guest, the identity (providerID kubevirt://NAME in the object's or
 * the template's namespace) and the coverage of a grow of memory and sockets. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "plan.h"
#include "profile.h"
#include "settings.h"
#include "testutil.h"

#define GROUP_V1A1 "infrastructure.cluster.x-k8s.io/v1alpha1"

static int64_t q(const char *json)
{
    char err[100];
    hj *v = hj_parse(json, strlen(json), err, sizeof(err));
    assert_non_null(v);
    int64_t r = hv_unit_to_mib(v, HV_UNIT_QUANTITY);
    hj_free(v);
    return r;
}

static void test_quantity_unit(void **state)
{
    (void)state;
    assert_int_equal(q("\"4Gi\""), 4096);
    assert_int_equal(q("\"4096Mi\""), 4096);
    assert_int_equal(q("\"1.5Gi\""), 1536);
    assert_int_equal(q("\"4294967296\""), 4096);
    assert_int_equal(q("4294967296"), 4096); /* a number is bytes */
    assert_int_equal(q("\"1G\""), -1);       /* 10^9 bytes: not a whole MiB */
    assert_int_equal(q("\"512Ki\""), -1);
    assert_int_equal(q("\"0\""), -1);
    assert_int_equal(q("\"-4Gi\""), -1);
    assert_int_equal(q("\"4GB\""), -1);
    assert_int_equal(q("4.5"), -1);
    assert_int_equal(q("true"), -1);
}

static void test_builtin(void **state)
{
    (void)state;
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    const struct hv_profile *p = hv_profile_find(&ps, GROUP_V1A1, "KubevirtMachine");
    assert_non_null(p);
    assert_string_equal(p->backend, "kubevirt");
    assert_false(p->is_template);
    assert_true(p->namespaced);
    assert_int_equal(p->field[HV_F_MEMORY].unit, HV_UNIT_QUANTITY);
    assert_string_equal(p->field[HV_F_MEMORY].path,
                        "/virtualMachineTemplate/spec/template/spec/domain/memory/guest");
    assert_string_equal(p->field[HV_F_CPUS].path,
                        "/virtualMachineTemplate/spec/template/spec/domain/cpu/sockets");
    assert_string_equal(p->field[HV_F_CORES].path,
                        "/virtualMachineTemplate/spec/template/spec/domain/cpu/cores");
    assert_false(p->field[HV_F_DISK].set);
    const struct hv_profile *t = hv_profile_find(&ps, GROUP_V1A1, "KubevirtMachineTemplate");
    assert_non_null(t);
    assert_true(t->is_template);
    assert_null(hv_profile_find(&ps, "infrastructure.cluster.x-k8s.io/v1beta1", "KubevirtMachine"));
    hv_profiles_free(&ps);
}

static void test_identity(void **state)
{
    (void)state;
    struct hv_profiles ps;
    hv_profiles_builtin(&ps);
    const struct hv_profile *p = hv_profile_find(&ps, GROUP_V1A1, "KubevirtMachine");
    hj *req = tu_fixture("kvm-grow.json");
    hj *m = (hj *)hj_ptr(req, "/desired/machine");
    hj *infra = (hj *)hj_ptr(req, "/desired/infrastructureMachine");
    struct hv_vm_ref ref;
    char why[200] = "";
    assert_int_equal(hv_identity(p, m, infra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.name, "capk/capk-demo-md-0-x7k2p");
    assert_string_equal(ref.uuid, "");
    assert_string_equal(ref.server, "");
    /* the VM template's namespace wins over the KubevirtMachine's */
    tu_set(req, "/desired/infrastructureMachine/spec/virtualMachineTemplate/metadata/namespace",
           "\"vms\"");
    assert_int_equal(hv_identity(p, m, infra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.name, "vms/capk-demo-md-0-x7k2p");
    /* no providerID yet: the KubevirtMachine's name (CAPK names the VM after it) */
    tu_set(req, "/desired/machine/spec/providerID", "\"\"");
    tu_set(req, "/desired/infrastructureMachine/spec/providerID", "\"\"");
    tu_set(req, "/desired/infrastructureMachine/metadata/name", "\"other\"");
    assert_int_equal(hv_identity(p, m, infra, &ref, why, sizeof(why)), 0);
    assert_string_equal(ref.name, "vms/other");
    tu_set(req, "/desired/machine/spec/providerID", "\"kubevirt://Not_A_Name\"");
    assert_int_equal(hv_identity(p, m, infra, &ref, why, sizeof(why)), -1);
    assert_string_equal(why, "providerID is not kubevirt://<name>");
    hj_free(req);
    hv_profiles_free(&ps);
}

static void test_coverage_grow(void **state)
{
    (void)state;
    struct hv_profiles ps;
    struct hv_settings s;
    hv_profiles_builtin(&ps);
    hv_settings_default(&s);
    hj *req = tu_fixture("kvm-grow.json");
    const hj *cur = hj_get(req, "current"), *des = hj_get(req, "desired");
    struct hv_plan_input in = {
        .profiles = &ps,
        .settings = &s,
        .cur_machine = hj_get(cur, "machine"),
        .des_machine = hj_get(des, "machine"),
        .cur_infra = hj_get(cur, "infrastructureMachine"),
        .des_infra = hj_get(des, "infrastructureMachine"),
    };
    struct hv_coverage c;
    hv_plan_coverage(&in, &c);
    assert_false(c.failure);
    assert_false(c.declined);
    assert_string_equal(c.message, "guest 2Gi->4Gi live; sockets 2->3 live");
    assert_true(c.desired.memory_mib == 4096);
    assert_int_equal(c.desired.cpus, 3);
    tu_assert_dump(c.infra_patch,
                   "[{\"op\":\"replace\",\"path\":\"/spec/virtualMachineTemplate/spec/template/"
                   "spec/domain/memory/guest\",\"value\":\"4Gi\"},{\"op\":\"replace\",\"path\":"
                   "\"/spec/virtualMachineTemplate/spec/template/spec/domain/cpu/sockets\","
                   "\"value\":3}]");
    hv_coverage_free(&c);
    /* a change of resources is not a profile field: not covered (CAPI rolls the Machine) */
    tu_set(req,
           "/desired/infrastructureMachine/spec/virtualMachineTemplate/spec/template/spec/"
           "domain/resources",
           "{\"requests\":{\"memory\":\"4Gi\"}}");
    hv_plan_coverage(&in, &c);
    assert_int_equal(c.n_uncovered, 1);
    hv_coverage_free(&c);
    hj_free(req);
    hv_profiles_free(&ps);
}

static int parse(struct hv_config *c, const char *text, char *err, size_t errlen)
{
    hv_config_default(c);
    return hv_config_parse(c, text, strlen(text), err, errlen);
}

static void test_config_section(void **state)
{
    (void)state;
    struct hv_config c;
    char err[256] = "";
    assert_int_equal(parse(&c, "{}", err, sizeof(err)), 0);
    assert_int_equal(c.n_kubevirt, 0); /* no section: no backend */
    hv_config_free(&c);
    assert_int_equal(parse(&c, "{\"kubevirt\":{}}", err, sizeof(err)), 0);
    assert_int_equal(c.n_kubevirt, 1); /* in-cluster */
    assert_string_equal(c.kubevirt[0].name, "in-cluster");
    assert_null(c.kubevirt[0].server);
    assert_int_equal(c.kubevirt_timeout_s, 10);
    hv_config_free(&c);
    assert_int_equal(parse(&c,
                           "{\"kubevirt\":{\"timeoutSeconds\":20,\"clusters\":[{\"name\":\"infra\","
                           "\"server\":\"https://10.0.0.1:6443\",\"tokenFile\":\"/t\",\"caFile\":"
                           "\"/c\",\"namespaces\":[\"capk\",\"b\"]}]}}",
                           err, sizeof(err)),
                     0);
    assert_int_equal(c.n_kubevirt, 1);
    assert_string_equal(c.kubevirt[0].name, "infra");
    assert_string_equal(c.kubevirt[0].server, "https://10.0.0.1:6443");
    assert_string_equal(c.kubevirt[0].token_file, "/t");
    assert_int_equal(c.kubevirt[0].n_namespaces, 2);
    assert_string_equal(c.kubevirt[0].namespaces[1], "b");
    assert_int_equal(c.kubevirt_timeout_s, 20);
    hv_config_free(&c);
    static const struct {
        const char *cfg, *err;
    } bad[] = {
        {"{\"kubevirt\":{\"clusters\":[{\"server\":\"https://a:1\"}]}}",
         "kubevirt.clusters[0].name must be 1 to 253 characters without spaces"},
        {"{\"kubevirt\":{\"clusters\":[{\"name\":\"a\",\"server\":\"http://a:1\"}]}}",
         "kubevirt.clusters[0].server must be https://HOST[:PORT] without spaces"},
        {"{\"kubevirt\":{\"clusters\":[{\"name\":\"a\"},{\"name\":\"a\"}]}}",
         "kubevirt.clusters[1].name repeats kubevirt.clusters[0].name"},
        {"{\"kubevirt\":{\"clusters\":[{\"namespaces\":[\"Caps\"]}]}}",
         "kubevirt.clusters[0].namespaces[0] must be a namespace name"},
        {"{\"kubevirt\":{\"clusters\":[{\"token\":\"x\"}]}}", NULL},
        {"{\"kubevirt\":{\"timeoutSeconds\":0}}", NULL},
        {"{\"kubevirt\":[]}", "kubevirt must be an object"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        err[0] = '\0';
        assert_int_equal(parse(&c, bad[k].cfg, err, sizeof(err)), -1);
        if (bad[k].err)
            assert_string_equal(err, bad[k].err);
        else
            assert_true(err[0] != '\0');
        hv_config_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantity_unit),  cmocka_unit_test(test_builtin),
        cmocka_unit_test(test_identity),       cmocka_unit_test(test_coverage_grow),
        cmocka_unit_test(test_config_section),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
