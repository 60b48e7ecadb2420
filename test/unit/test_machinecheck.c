/* test_machinecheck.c: the machine check (kube/machinecheck.h) against a fake API server of
 * Machines, MachineSets and LibvirtMachines, with reads driven by the test (no threads) and a
 * clock it sets; and through hv_hook_handle (hooks.h's gate), where a refused or unread
 * UpdateMachine never reaches the engine (a stub counting calls). Each forged request of issue
 * 28 (unknown Machine, wrong uid, not being updated, a desired spec that is not the stored
 * one, another VM in the request's providerID) is refused or answered from the API server's
 * objects; a Machine cached just before CAPI marked it is read again, not refused; a thousand
 * calls within the TTL cost two reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hooks.h"
#include "machinecheck.h"
#include "testutil.h"

#define API   "hooks.runtime.cluster.x-k8s.io/v1alpha1"
#define INFRA "infrastructure.cluster.x-k8s.io/v1beta1"
#define MPATH "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"
#define IPATH "/apis/" INFRA "/namespaces/ns/libvirtmachines/lm1"
#define SPATH "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinesets/ms1"
#define UUID1 "6f1c2d8e-3b4a-4c5d-9e7f-0a1b2c3d4e5f"
#define UUID2 "11111111-2222-3333-4444-555555555555"

/* ---- the fake API server ---- */

#define NOBJ 4
struct fake {
    const char *path[NOBJ];
    char *text[NOBJ]; /* NULL: 404 */
    int status[NOBJ]; /* 0: 200/404 by text */
    int gets;
};
static struct fake F;
static int64_t clock_now = 1000000;
static int64_t fake_clock(void)
{
    return clock_now;
}

static int f_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    (void)ctx;
    F.gets++;
    *out = NULL;
    snprintf(err, errlen, "fake");
    for (int i = 0; i < NOBJ; i++) {
        if (!F.path[i] || strcmp(F.path[i], path))
            continue;
        if (F.status[i])
            return F.status[i];
        if (!F.text[i])
            return 404;
        *out = tu_json(F.text[i]);
        return 200;
    }
    return 404;
}

static void put(int i, const char *path, const char *text)
{
    free(F.text[i]);
    F.path[i] = path;
    F.text[i] = text ? strdup(text) : NULL;
    F.status[i] = 0;
}

/* A Machine m1 as the API server holds it. */
static void put_machine(const char *uid, bool updating, const char *infra_name)
{
    char t[2048];
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
             "\"metadata\":{\"name\":\"m1\",\"namespace\":\"ns\",\"uid\":\"%s\","
             "\"managedFields\":[{\"manager\":\"x\"}],\"annotations\":{%s}},"
             "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"libvirt://" UUID1 "\","
             "\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
             "\"kind\":\"LibvirtMachine\",\"name\":\"%s\"}},"
             "\"status\":{\"conditions\":[]}}",
             uid,
             updating ? "\"" HV_MC_IN_PROGRESS "\":\"\",\"" HV_MC_PENDING_HOOKS
                        "\":\"UpdateMachine\""
                      : "",
             infra_name);
    put(0, MPATH, t);
}

static void put_infra(int memory, bool updating)
{
    char t[1024];
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"" INFRA "\",\"kind\":\"LibvirtMachine\","
             "\"metadata\":{\"name\":\"lm1\",\"namespace\":\"ns\",\"annotations\":{%s}},"
             "\"spec\":{\"providerID\":\"libvirt://" UUID1 "\",\"memoryMiB\":%d,\"vcpu\":2}}",
             updating ? "\"" HV_MC_IN_PROGRESS "\":\"\"" : "", memory);
    put(1, IPATH, t);
}

/* An UpdateMachine request as CAPI v1.14.2 sends it (no uid unless uid is given). */
static hj *update_req(const char *uid, const char *providerid, int memory)
{
    char t[2048], u[128] = "";
    if (uid)
        snprintf(u, sizeof(u), ",\"uid\":\"%s\"", uid);
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"" API "\",\"kind\":\"UpdateMachineRequest\",\"desired\":{"
             "\"machine\":{\"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\","
             "\"metadata\":{\"name\":\"m1\",\"namespace\":\"ns\"%s},"
             "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"%s\","
             "\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
             "\"kind\":\"LibvirtMachine\",\"name\":\"lm1\"}}},"
             "\"infrastructureMachine\":{\"apiVersion\":\"" INFRA "\",\"kind\":\"LibvirtMachine\","
             "\"metadata\":{\"name\":\"lm1\",\"namespace\":\"ns\"},"
             "\"spec\":{\"providerID\":\"%s\",\"memoryMiB\":%d,\"vcpu\":2}}}}",
             u, providerid, providerid, memory);
    return tu_json(t);
}

static struct hv_mc *new_mc(void)
{
    struct hv_mc_cfg c = {.io = {.get = f_get}, .drive = true, .clock_ms = fake_clock};
    struct hv_mc *mc = hv_mc_new(&c);
    assert_non_null(mc);
    return mc;
}

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < NOBJ; i++)
        put(i, NULL, NULL);
    F.gets = 0;
    clock_now += 100000;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NOBJ; i++) {
        free(F.text[i]);
        F.text[i] = NULL;
    }
    return 0;
}

/* Check req twice as CAPI would (the first call queues the reads, they are made, the second
 * decides); returns the second verdict. */
static enum hv_mc_verdict check2(struct hv_mc *mc, enum hv_hook h, const hj *req, hj **out,
                                 char *msg, size_t cap)
{
    enum hv_mc_verdict v = hv_mc_check(mc, h, req, out, msg, cap);
    assert_int_equal(v, HV_MC_WAIT);
    assert_null(*out);
    assert_non_null(strstr(msg, "retry"));
    assert_int_equal(hv_mc_work(mc), 2);
    clock_now += 1000;
    return hv_mc_check(mc, h, req, out, msg, cap);
}

/* ---- the checks ---- */

static void test_resource_names(void **state)
{
    (void)state;
    char r[64];
    assert_true(hv_mc_resource("VSphereMachine", r, sizeof(r)));
    assert_string_equal(r, "vspheremachines");
    assert_true(hv_mc_resource("LibvirtMachineTemplate", r, sizeof(r)));
    assert_string_equal(r, "libvirtmachinetemplates");
    assert_true(hv_mc_resource("Proxy", r, sizeof(r)));
    assert_string_equal(r, "proxies");
    assert_true(hv_mc_resource("Address", r, sizeof(r)));
    assert_string_equal(r, "addresses");
    assert_false(hv_mc_resource("Bad/Kind", r, sizeof(r)));
    assert_false(hv_mc_resource("", r, sizeof(r)));
}

static void test_unknown_machine(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: Machine ns/m1 does not exist in the API server");
    assert_null(out);
    hj_free(req);
    hv_mc_free(mc);
}

static void test_wrong_uid(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("uid-real", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req("uid-forged", "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: Machine ns/m1 in the API server has another uid "
                             "than the request's");
    hj_free(req);
    clock_now += HV_MC_TTL_MS;
    req = update_req("uid-real", "libvirt://" UUID1, 4096); /* the right uid passes */
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    hj_free(out);
    hj_free(req);
    hv_mc_free(mc);
}

static void test_not_updating(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", false, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: Machine ns/m1 is not being updated in place by "
                             "Cluster API (no " HV_MC_IN_PROGRESS
                             " annotation or no pending UpdateMachine hook)");
    /* marked, but the infra machine is not */
    put_machine("u1", true, "lm1");
    put_infra(4096, false);
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: LibvirtMachine ns/lm1 is not being updated in place "
                             "by Cluster API (no " HV_MC_IN_PROGRESS " annotation)");
    hj_free(req);
    hv_mc_free(mc);
}

static void test_spec_not_stored(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 8192), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: the request's desired spec of LibvirtMachine "
                             "ns/lm1 is not the one in the API server");
    hj_free(req);
    /* another infra machine than the Machine's */
    put_machine("u1", true, "lm-other");
    clock_now += HV_MC_TTL_MS;
    req = update_req(NULL, "libvirt://" UUID1, 4096);
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: the infrastructureRef of Machine ns/m1 is not the "
                             "request's LibvirtMachine lm1");
    hj_free(req);
    hv_mc_free(mc);
}

/* A pass answers from the API server's specs: the request's providerID naming another VM is
 * replaced in the Machine's spec (the infra spec must be equal already). */
static void test_pass_uses_api_objects(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID2, 4096), *out = NULL;
    /* the infra spec must match: take the stored one's providerID */
    hj_obj_set_take(hj_ptr(req, "/desired/infrastructureMachine/spec"), "providerID",
                    hj_new_string("libvirt://" UUID1));
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    assert_non_null(out);
    const char *pid = hj_get_str(hj_ptr(out, "/desired/machine/spec"), "providerID");
    assert_string_equal(pid, "libvirt://" UUID1);
    /* nothing of the API server's metadata or status comes in */
    assert_null(hj_ptr(out, "/desired/machine/status"));
    assert_null(hj_ptr(out, "/desired/machine/metadata/managedFields"));
    hj_free(out);
    hj_free(req);
    hv_mc_free(mc);
}

/* CanUpdateMachine read the Machine before KCP marked it: UpdateMachine reads it again instead
 * of refusing, then passes. */
static void test_stale_cache_not_refused(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", false, "lm1");
    put_infra(2048, false);
    hj *can = tu_json("{\"apiVersion\":\"" API "\",\"kind\":\"CanUpdateMachineRequest\","
                      "\"current\":{\"machine\":{\"metadata\":{\"name\":\"m1\",\"namespace\":"
                      "\"ns\"}},\"infrastructureMachine\":{\"apiVersion\":\"" INFRA "\","
                      "\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"lm1\","
                      "\"namespace\":\"ns\"},\"spec\":{}}},"
                      "\"desired\":{\"machine\":{\"metadata\":{\"name\":\"m1\",\"namespace\":"
                      "\"ns\"}},\"infrastructureMachine\":{\"apiVersion\":\"" INFRA "\","
                      "\"kind\":\"LibvirtMachine\",\"metadata\":{\"name\":\"lm1\","
                      "\"namespace\":\"ns\"},\"spec\":{}}}}");
    hj *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_CAN_UPDATE_MACHINE, can, &out, msg, sizeof(msg)),
                     HV_MC_PASS);
    assert_null(out);
    /* KCP marks the Machine and writes the new spec; UpdateMachine comes within the TTL */
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096);
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    hj_free(out);
    hj_free(req);
    hj_free(can);
    hv_mc_free(mc);
}

/* 1,000 calls within the TTL: two reads; after the TTL, two more. */
static void test_cache_cost(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    hj_free(out);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)),
                         HV_MC_PASS);
        hj_free(out);
    }
    assert_int_equal(hv_mc_work(mc), 0);
    assert_int_equal(F.gets, 2);
    clock_now += HV_MC_TTL_MS;
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    hj_free(out);
    assert_int_equal(F.gets, 4);
    struct hv_mc_stats st;
    hv_mc_get_stats(mc, &st);
    assert_int_equal(st.reads, 4);
    assert_int_equal(st.passes, 1002);
    assert_int_equal(st.waits, 2);
    hj_free(req);
    hv_mc_free(mc);
}

/* Calls that keep coming never see their objects expire: a check in the TTL's last fifth reads
 * them again in the background (and passes on the read it has); the next call past the first
 * read's TTL passes on the new read instead of waiting for one. */
static void test_hot_entry_read_again_before_it_expires(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_PASS);
    hj_free(out);
    int64_t read_at = clock_now - 1000; /* check2 made its reads 1 s before its second call */
    clock_now = read_at + HV_MC_TTL_MS - HV_MC_TTL_MS / 5 - 1;
    assert_int_equal(hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)),
                     HV_MC_PASS);
    hj_free(out);
    assert_int_equal(hv_mc_work(mc), 0); /* not yet in the last fifth: nothing to read */
    clock_now = read_at + HV_MC_TTL_MS - HV_MC_TTL_MS / 5;
    assert_int_equal(hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)),
                     HV_MC_PASS);
    hj_free(out);
    assert_int_equal(hv_mc_work(mc), 2); /* Machine and infra machine read again */
    assert_int_equal(F.gets, 4);
    clock_now = read_at + HV_MC_TTL_MS + 500; /* past the first reads' TTL */
    assert_int_equal(hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)),
                     HV_MC_PASS);
    hj_free(out);
    assert_int_equal(hv_mc_work(mc), 0);
    struct hv_mc_stats st;
    hv_mc_get_stats(mc, &st);
    assert_int_equal(st.waits, 1); /* only check2's first call, before any read */
    assert_int_equal(st.passes, 4);
    hj_free(req);
    hv_mc_free(mc);
}

/* An UpdateMachine request for Machine NAME and LibvirtMachine INFRA_NAME in ns. */
static hj *named_req(const char *name, const char *infra_name)
{
    char t[1024];
    snprintf(t, sizeof(t),
             "{\"apiVersion\":\"" API "\",\"kind\":\"UpdateMachineRequest\",\"desired\":{"
             "\"machine\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\"},"
             "\"spec\":{\"infrastructureRef\":{\"apiGroup\":\"infrastructure.cluster.x-k8s.io\","
             "\"kind\":\"LibvirtMachine\",\"name\":\"%s\"}}},"
             "\"infrastructureMachine\":{\"apiVersion\":\"" INFRA "\",\"kind\":\"LibvirtMachine\","
             "\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\"},\"spec\":{}}}}",
             name, infra_name, infra_name);
    return tu_json(t);
}

static enum hv_mc_verdict check_named(struct hv_mc *mc, const char *name, const char *infra_name)
{
    hj *req = named_req(name, infra_name), *out = NULL;
    char msg[600];
    enum hv_mc_verdict v = hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg));
    hj_free(out);
    hj_free(req);
    return v;
}

/* The table full (HV_MC_MAX objects, none looked at within two TTLs): a check drops them for
 * room, and its own Machine, added just before its infra machine needed the room, is neither
 * dropped nor lost when the drop moves it; every object is found again by its path after. */
static void test_full_table_makes_room(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    char name[32], infra[32];
    /* HV_MC_MAX - 1 objects: Machines m0.. with LibvirtMachines l0.., one Machine sharing l0 */
    for (int i = 0; i < HV_MC_MAX / 2 - 1; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        snprintf(infra, sizeof(infra), "l%d", i);
        assert_int_equal(check_named(mc, name, infra), HV_MC_WAIT);
    }
    assert_int_equal(check_named(mc, "mx", "l0"), HV_MC_WAIT);
    assert_int_equal(hv_mc_work(mc), HV_MC_MAX - 1); /* each read once (404s) */
    struct hv_mc_stats st;
    hv_mc_get_stats(mc, &st);
    assert_int_equal(st.cached, HV_MC_MAX - 1);
    /* the first half looked at again now: they must stay */
    clock_now += 3 * HV_MC_TTL_MS;
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        snprintf(infra, sizeof(infra), "l%d", i);
        check_named(mc, name, infra); /* expired: wait and read again */
    }
    assert_int_equal(hv_mc_work(mc), 200);
    /* a new Machine takes the last place, its infra machine needs room: the rest is dropped */
    assert_int_equal(check_named(mc, "new", "lnew"), HV_MC_WAIT);
    hv_mc_get_stats(mc, &st);
    assert_int_equal(st.cached, 202);
    assert_int_equal(hv_mc_work(mc), 2); /* both of the new check's objects were wanted */
    clock_now += 1000;
    int gets = F.gets;
    /* found by path: no read wanted, a verdict on the reads made (the API server has none) */
    assert_int_not_equal(check_named(mc, "new", "lnew"), HV_MC_WAIT);
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        snprintf(infra, sizeof(infra), "l%d", i);
        assert_int_not_equal(check_named(mc, name, infra), HV_MC_WAIT);
    }
    assert_int_equal(hv_mc_work(mc), 0);
    assert_int_equal(F.gets, gets);
    /* a dropped one is read anew */
    assert_int_equal(check_named(mc, "m500", "l500"), HV_MC_WAIT);
    assert_int_equal(hv_mc_work(mc), 2);
    hv_mc_free(mc);
}

static void test_read_forbidden_fails_closed(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    put_machine("u1", true, "lm1");
    put_infra(4096, true);
    F.status[0] = 403;
    hj *req = update_req(NULL, "libvirt://" UUID1, 4096), *out = NULL;
    char msg[600];
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: hvupdater may not read Machine ns/m1 from the API "
                             "server (HTTP 403; see the RBAC in docs/operations.md)");
    F.status[0] = 500;
    assert_int_equal(check2(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)), HV_MC_FAIL);
    assert_string_equal(msg, "machine check: cannot read Machine ns/m1 from the API server");
    hj_free(req);
    hv_mc_free(mc);
}

static void test_machine_set(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    const char *tmpl = "/apis/" INFRA "/namespaces/ns/libvirtmachinetemplates/t1";
    hj *req = tu_json(
        "{\"apiVersion\":\"" API "\",\"kind\":\"CanUpdateMachineSetRequest\","
        "\"current\":{\"machineSet\":{\"metadata\":{\"name\":\"ms1\",\"namespace\":\"ns\"}},"
        "\"infrastructureMachineTemplate\":{\"apiVersion\":\"" INFRA "\","
        "\"kind\":\"LibvirtMachineTemplate\",\"metadata\":{\"name\":\"t1\",\"namespace\":\"ns\"},"
        "\"spec\":{}}},\"desired\":{}}");
    hj *out = NULL;
    char msg[600];
    put(1, tmpl, "{\"metadata\":{\"name\":\"t1\",\"namespace\":\"ns\"},\"spec\":{}}");
    assert_int_equal(check2(mc, HV_HOOK_CAN_UPDATE_MACHINE_SET, req, &out, msg, sizeof(msg)),
                     HV_MC_FAIL);
    assert_string_equal(msg, "machine check: MachineSet ns/ms1 does not exist in the API server");
    put(0, SPATH,
        "{\"metadata\":{\"name\":\"ms1\",\"namespace\":\"ns\",\"uid\":\"s1\"},\"spec\":{"
        "\"template\":{\"spec\":{\"infrastructureRef\":{\"apiGroup\":"
        "\"infrastructure.cluster.x-k8s.io\",\"kind\":\"LibvirtMachineTemplate\","
        "\"name\":\"t1\"}}}}}");
    assert_int_equal(check2(mc, HV_HOOK_CAN_UPDATE_MACHINE_SET, req, &out, msg, sizeof(msg)),
                     HV_MC_PASS);
    assert_null(out);
    hj_free(req);
    hv_mc_free(mc);
}

static void test_request_without_names(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    hj *req = tu_json("{\"apiVersion\":\"" API "\",\"kind\":\"UpdateMachineRequest\","
                      "\"desired\":{\"machine\":{\"metadata\":{\"name\":\"../x\"}}}}");
    hj *out = NULL;
    char msg[600];
    assert_int_equal(hv_mc_check(mc, HV_HOOK_UPDATE_MACHINE, req, &out, msg, sizeof(msg)),
                     HV_MC_FAIL);
    assert_string_equal(msg,
                        "machine check: the request's machine has no valid namespace and name");
    assert_int_equal(hv_mc_work(mc), 0);
    hj_free(req);
    hv_mc_free(mc);
}

/* ---- when it is on ---- */

static bool checks(const char *doc)
{
    struct hv_config c;
    char err[300];
    hv_config_default(&c);
    if (hv_config_parse(&c, doc, strlen(doc), err, sizeof(err)) < 0)
        fail_msg("config does not parse: %s", err);
    bool on = hv_config_checks_machines(&c);
    hv_config_free(&c);
    return on;
}

static void test_default_on_with_a_client(void **state)
{
    (void)state;
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1); /* a pod's: not a client by itself */
    assert_false(checks("{}"));
    assert_false(checks("{\"kubernetes\": {\"timeoutSeconds\": 5}}"));
    assert_true(checks("{\"kubernetes\": {\"server\": \"https://10.0.0.1:6443\"}}"));
    assert_true(checks("{\"kubernetes\": {\"events\": true}}"));
    assert_true(checks("{\"kubernetes\": {\"holdRemediation\": true}}"));
    assert_false(checks("{\"kubernetes\": {\"server\": \"https://10.0.0.1:6443\", "
                        "\"checkMachines\": false}}"));
    assert_true(checks("{\"kubernetes\": {\"checkMachines\": true}}"));
    unsetenv("KUBERNETES_SERVICE_HOST");
}

/* ---- through the hooks ---- */

struct stub {
    int calls;
    struct hv_vm_ref ref;
};

static void stub_update(void *ctx, const struct hv_profile *p, const struct hv_vm_ref *ref,
                        const struct hv_hw *desired, const struct hv_settings *s,
                        struct hv_update_result *out)
{
    struct stub *st = ctx;
    (void)p, (void)desired, (void)s;
    st->calls++;
    st->ref = *ref;
    memset(out, 0, sizeof(*out));
}

static enum hv_gate gate(void *ctx, enum hv_hook h, const hj *req, hj **req_out, char *msg,
                         size_t msglen)
{
    return (enum hv_gate)hv_mc_check(ctx, h, req, req_out, msg, msglen);
}

static hj *handle(const struct hv_hooks_ctx *ctx, const hj *req)
{
    bool failure;
    size_t len;
    char msg[600];
    char *out = hv_hook_handle(ctx, HV_HOOK_UPDATE_MACHINE, req, &failure, msg, sizeof(msg), &len);
    assert_non_null(out);
    hj *r = tu_json(out);
    free(out);
    return r;
}

static void test_hooks_never_reach_engine(void **state)
{
    (void)state;
    struct hv_mc *mc = new_mc();
    struct hv_profiles ps;
    struct stub st = {0};
    hv_profiles_builtin(&ps);
    struct hv_hooks_ctx ctx = {.profiles = &ps,
                               .update = stub_update,
                               .update_ctx = &st,
                               .timeout_s = 10,
                               .gate = gate,
                               .gate_ctx = mc};
    hv_settings_default(&ctx.defaults);
    put_machine("u1", false, "lm1"); /* not being updated */
    put_infra(4096, true);
    hj *req = update_req(NULL, "libvirt://" UUID2, 4096);
    /* the first call: in progress while the Machine is read */
    hj *r = handle(&ctx, req);
    assert_string_equal(hj_get_str(r, "status"), "Success");
    assert_int_equal(hj_get(r, "retryAfterSeconds")->i, HV_GATE_RETRY_S);
    hj_free(r);
    hv_mc_work(mc);
    r = handle(&ctx, req);
    assert_string_equal(hj_get_str(r, "status"), "Failure");
    assert_int_equal(hj_get(r, "retryAfterSeconds")->i, 0);
    assert_non_null(strstr(hj_get_str(r, "message"), "is not being updated in place"));
    hj_free(r);
    assert_int_equal(st.calls, 0);
    /* marked: the engine is called, with the VM of the API server's Machine */
    put_machine("u1", true, "lm1");
    hj_obj_set_take(hj_ptr(req, "/desired/infrastructureMachine/spec"), "providerID",
                    hj_new_string("libvirt://" UUID1));
    r = handle(&ctx, req);
    hj_free(r);
    hv_mc_work(mc);
    r = handle(&ctx, req);
    assert_string_equal(hj_get_str(r, "status"), "Success");
    hj_free(r);
    assert_int_equal(st.calls, 1);
    assert_string_equal(st.ref.uuid, UUID1);
    hj_free(req);
    hv_profiles_free(&ps);
    hv_mc_free(mc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_names),
        cmocka_unit_test(test_default_on_with_a_client),
        cmocka_unit_test_setup_teardown(test_unknown_machine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_uid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_updating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_not_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass_uses_api_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_cache_not_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_cost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_table_makes_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hot_entry_read_again_before_it_expires, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_forbidden_fails_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_machine_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_without_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hooks_never_reach_engine, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
