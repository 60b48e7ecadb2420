/* test_mhc.c: the remediation hold (kube/mhc.h) against a fake API server of Machines and a
 * fake VM state: its decision table, marking and unmarking across a power cycle, a user's own
 * skip-remediation left alone, the wait for NodeReady and its bound, finding its marks again
 * after a restart, a Machine that goes away, and a patch that meets a newer Machine. Passes
 * are driven (no thread) at chosen times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mhc.h"

/* ---- the fake API server: Machines in namespace "ns" ---- */

#define MAXM 4
struct fake {
    hj *m[MAXM]; /* NULL: no such Machine */
    int rv;
    int gets, patches, lists;
    int conflict_next; /* answer the next patch 409 */
    enum hv_mhc_vm vm[MAXM];
};

static int idx(const char *path)
{
    const char *p = strrchr(path, '/');
    return p && !strncmp(p + 1, "m", 1) ? atoi(p + 2) : -1;
}

static void bump(struct fake *f, hj *m)
{
    char rv[16];
    snprintf(rv, sizeof(rv), "%d", ++f->rv);
    hj_obj_set_take(hj_get(m, "metadata"), "resourceVersion", hj_new_string(rv));
}

static hj *machine(struct fake *f, int i, const char *annotations, const char *node_ready)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"m%d\",\"annotations\":%s},"
             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
             "{\"type\":\"NodeReady\",\"status\":\"%s\"}]}}",
             i, annotations, node_ready);
    char e[128];
    hj *m = hj_parse(text, strlen(text), e, sizeof(e));
    assert_non_null(m);
    hj_free(f->m[i]);
    f->m[i] = m;
    bump(f, m);
    return m;
}

static void set_node_ready(struct fake *f, int i, const char *st)
{
    const hj *c = hj_get(hj_get(f->m[i], "status"), "conditions");
    hj *nr = c->items[1];
    hj_obj_set_take(nr, "status", hj_new_string(st));
    bump(f, f->m[i]);
}

static const char *ann(struct fake *f, int i, const char *key)
{
    return hj_get_str(hj_get(hj_get(f->m[i], "metadata"), "annotations"), key);
}

static void set_ann(struct fake *f, int i, const char *key, const char *val)
{
    hj *a = hj_get(hj_get(f->m[i], "metadata"), "annotations");
    hj_obj_set_take(a, key, hj_new_string(val));
    bump(f, f->m[i]);
}

static int f_get(void *ctx, const char *path, hj **out, char *err, size_t errlen)
{
    struct fake *f = ctx;
    f->gets++;
    int i = idx(path);
    assert_non_null(strstr(path, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m"));
    *out = i >= 0 && i < MAXM && f->m[i] ? hj_clone(f->m[i]) : NULL;
    snprintf(err, errlen, "%s", *out ? "" : "HTTP 404");
    return *out ? 200 : 404;
}

/* A merge patch of metadata.annotations, checked against metadata.resourceVersion. */
static int f_patch(void *ctx, const char *path, const char *patch, char *err, size_t errlen)
{
    struct fake *f = ctx;
    f->patches++;
    int i = idx(path);
    if (i < 0 || i >= MAXM || !f->m[i]) {
        snprintf(err, errlen, "HTTP 404");
        return 404;
    }
    char e[128];
    hj *p = hj_parse(patch, strlen(patch), e, sizeof(e));
    assert_non_null(p);
    const hj *md = hj_get(p, "metadata");
    const char *rv = hj_get_str(md, "resourceVersion");
    assert_non_null(rv); /* every patch of the hold is conditional */
    hj *have = hj_get(f->m[i], "metadata");
    if (f->conflict_next || strcmp(rv, hj_get_str(have, "resourceVersion"))) {
        f->conflict_next = 0;
        hj_free(p);
        snprintf(err, errlen, "HTTP 409");
        return 409;
    }
    const hj *a = hj_get(md, "annotations");
    hj *to = hj_get(have, "annotations");
    for (size_t k = 0; a && k < a->n; k++) {
        if (a->items[k]->type == HJ_NULL)
            hj_obj_del(to, a->keys[k]);
        else
            hj_obj_set_take(to, a->keys[k], hj_clone(a->items[k]));
    }
    hj_free(p);
    bump(f, f->m[i]);
    return 200;
}

/* One Machine per page, so the continue token is followed. */
static int f_list(void *ctx, const char *path, const char *cont, hj **out, char *err, size_t errlen)
{
    struct fake *f = ctx;
    (void)err;
    (void)errlen;
    f->lists++;
    assert_string_equal(path, "/apis/cluster.x-k8s.io/v1beta2/machines");
    int from = cont ? atoi(cont) : 0;
    hj *l = hj_new_object(), *items = hj_new_array(), *md = hj_new_object();
    int i = from;
    while (i < MAXM && !f->m[i])
        i++;
    if (i < MAXM)
        hj_arr_push_take(items, hj_clone(f->m[i]));
    int next = i + 1;
    while (next < MAXM && !f->m[next])
        next++;
    if (next < MAXM) {
        char c[16];
        snprintf(c, sizeof(c), "%d", next);
        hj_obj_set_take(md, "continue", hj_new_string(c));
    }
    hj_obj_set_take(l, "metadata", md);
    hj_obj_set_take(l, "items", items);
    *out = l;
    return 200;
}

static enum hv_mhc_vm f_vm(void *ctx, const char *backend, const char *ref)
{
    struct fake *f = ctx;
    assert_string_equal(backend, "libvirt");
    assert_true(ref[0] == 'v' && ref[1] >= '0' && ref[1] < '0' + MAXM);
    return f->vm[ref[1] - '0'];
}

static struct hv_mhc *hold(struct fake *f)
{
    struct hv_mhc_cfg c = {.io = {.ctx = f, .get = f_get, .patch = f_patch, .list = f_list},
                           .vm_state = f_vm,
                           .vm_ctx = f,
                           .ready_wait_s = 300,
                           .adopt_s = 60,
                           .drive = true};
    struct hv_mhc *m = hv_mhc_new(&c);
    assert_non_null(m);
    return m;
}

static void fake_free(struct fake *f)
{
    for (int i = 0; i < MAXM; i++)
        hj_free(f->m[i]);
}

/* ---- the decision table ---- */

static void test_decide(void **state)
{
    (void)state;
    const struct hv_mhc_seen gone = {0}, bare = {.exists = true},
                             user = {.exists = true, .skip = true},
                             mine = {.exists = true, .ours = true, .skip = true, .skip_ours = true},
                             mine_ready = {.exists = true,
                                           .ours = true,
                                           .skip = true,
                                           .skip_ours = true,
                                           .node_ready = true},
                             mine_deleting = {.exists = true, .deleting = true, .ours = true},
                             deleting = {.exists = true, .deleting = true};
    for (int vm = HV_MHC_VM_UNKNOWN; vm <= HV_MHC_VM_CYCLING; vm++) {
        assert_int_equal(hv_mhc_decide(vm, &gone, 0, 300), HV_MHC_FORGET);
        assert_int_equal(hv_mhc_decide(vm, &deleting, 0, 300), HV_MHC_FORGET);
        assert_int_equal(hv_mhc_decide(vm, &mine_deleting, 0, 300), HV_MHC_UNMARK);
        /* a skip-remediation that is not ours is never marked over nor removed */
        assert_int_equal(hv_mhc_decide(vm, &user, 0, 300), HV_MHC_NOTHING);
        assert_int_equal(hv_mhc_decide(vm, &user, 10000, 300), HV_MHC_NOTHING);
    }
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_CYCLING, &bare, 0, 300), HV_MHC_MARK);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_CYCLING, &mine, 0, 300), HV_MHC_NOTHING);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_CYCLING, &mine_ready, 0, 300), HV_MHC_NOTHING);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_QUIET, &bare, 0, 300), HV_MHC_NOTHING);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_UNKNOWN, &bare, 0, 300), HV_MHC_NOTHING);
    /* the cycle is over: the mark waits for NodeReady, at most ready_wait_s */
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_QUIET, &mine, 10, 300), HV_MHC_NOTHING);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_QUIET, &mine_ready, 10, 300), HV_MHC_UNMARK);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_QUIET, &mine, 300, 300), HV_MHC_UNMARK);
    /* a VM that cannot be read keeps the mark, up to the same bound */
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_UNKNOWN, &mine_ready, 10, 300), HV_MHC_NOTHING);
    assert_int_equal(hv_mhc_decide(HV_MHC_VM_UNKNOWN, &mine, 300, 300), HV_MHC_UNMARK);
    assert_string_equal(hv_mhc_act_name(HV_MHC_MARK), "mark");
}

static void test_read_machine(void **state)
{
    (void)state;
    struct fake f = {0};
    struct hv_mhc_seen s;
    hv_mhc_read_machine(machine(&f, 0, "{\"" HV_MHC_SKIP "\":\"\"}", "False"), &s);
    assert_true(s.exists && s.skip);
    assert_false(s.skip_ours || s.ours || s.node_ready || s.deleting);
    hv_mhc_read_machine(
        machine(&f, 0, "{\"" HV_MHC_SKIP "\":\"hvupdater\",\"" HV_MHC_OWNED "\":\"libvirt v0\"}",
                "True"),
        &s);
    assert_true(s.exists && s.skip && s.skip_ours && s.ours && s.node_ready);
    hv_mhc_read_machine(NULL, &s);
    assert_false(s.exists);
    fake_free(&f);
}

/* ---- the worker ---- */

/* A power cycle: marked while cycling, kept until NodeReady is True again, then both
 * annotations removed; nothing patched before or after. */
static void test_cycle(void **state)
{
    (void)state;
    struct fake f = {0};
    machine(&f, 0, "{\"other\":\"x\"}", "True");
    struct hv_mhc *m = hold(&f);
    hv_mhc_track(m, "ns", "m0", "libvirt", "v0");
    f.vm[0] = HV_MHC_VM_QUIET;
    hv_mhc_pass(m, 1000);
    hv_mhc_pass(m, 1002);
    assert_int_equal(f.patches, 0);
    assert_null(ann(&f, 0, HV_MHC_SKIP));
    assert_int_equal(f.lists, 1); /* the first pass lists; the next within adopt_s does not */

    f.vm[0] = HV_MHC_VM_CYCLING;
    hv_mhc_pass(m, 1004);
    assert_int_equal(f.patches, 1);
    assert_string_equal(ann(&f, 0, HV_MHC_SKIP), HV_MHC_SKIP_VALUE);
    assert_string_equal(ann(&f, 0, HV_MHC_OWNED), "libvirt v0");
    assert_string_equal(ann(&f, 0, "other"), "x");
    set_node_ready(&f, 0, "False");
    hv_mhc_pass(m, 1006);
    hv_mhc_pass(m, 1008);
    assert_int_equal(f.patches, 1);

    f.vm[0] = HV_MHC_VM_QUIET; /* done; the Node is not Ready yet */
    hv_mhc_pass(m, 1010);
    hv_mhc_pass(m, 1030);
    assert_int_equal(f.patches, 1);
    assert_non_null(ann(&f, 0, HV_MHC_SKIP));
    set_node_ready(&f, 0, "True");
    hv_mhc_pass(m, 1032);
    assert_int_equal(f.patches, 2);
    assert_null(ann(&f, 0, HV_MHC_SKIP));
    assert_null(ann(&f, 0, HV_MHC_OWNED));
    assert_string_equal(ann(&f, 0, "other"), "x");
    int gets = f.gets;
    hv_mhc_pass(m, 1034); /* nothing of ours on it, nothing cycling: not even read */
    assert_int_equal(f.patches, 2);
    assert_int_equal(f.gets, gets);
    assert_int_equal(hv_mhc_tracked(m), 1);
    hv_mhc_pass(m, 1034 + HV_MHC_IDLE_S + 10); /* no call about it for long: forgotten */
    assert_int_equal(hv_mhc_tracked(m), 0);
    hv_mhc_free(m);
    fake_free(&f);
}

/* A Failure that leaves the VM off (the Node never Ready): the mark goes after ready_wait_s,
 * so the MachineHealthCheck may remediate the Machine after all. */
static void test_ready_wait_bound(void **state)
{
    (void)state;
    struct fake f = {0};
    machine(&f, 0, "{}", "True");
    struct hv_mhc *m = hold(&f);
    hv_mhc_track(m, "ns", "m0", "libvirt", "v0");
    f.vm[0] = HV_MHC_VM_CYCLING;
    hv_mhc_pass(m, 1000);
    assert_non_null(ann(&f, 0, HV_MHC_OWNED));
    set_node_ready(&f, 0, "False");
    f.vm[0] = HV_MHC_VM_QUIET;
    hv_mhc_pass(m, 1100);
    hv_mhc_pass(m, 1299);
    assert_non_null(ann(&f, 0, HV_MHC_OWNED));
    hv_mhc_pass(m, 1300);
    assert_null(ann(&f, 0, HV_MHC_OWNED));
    assert_null(ann(&f, 0, HV_MHC_SKIP));
    hv_mhc_free(m);
    fake_free(&f);
}

/* A user's own skip-remediation: never marked over, never removed; and one the user sets in
 * place of hvupdater's value while it holds stays when hvupdater lets go. */
static void test_users_annotation(void **state)
{
    (void)state;
    struct fake f = {0};
    machine(&f, 0, "{\"" HV_MHC_SKIP "\":\"\"}", "True");
    machine(&f, 1, "{}", "True");
    struct hv_mhc *m = hold(&f);
    hv_mhc_track(m, "ns", "m0", "libvirt", "v0");
    hv_mhc_track(m, "ns", "m1", "libvirt", "v1");
    f.vm[0] = f.vm[1] = HV_MHC_VM_CYCLING;
    hv_mhc_pass(m, 1000);
    assert_string_equal(ann(&f, 0, HV_MHC_SKIP), "");
    assert_null(ann(&f, 0, HV_MHC_OWNED));
    assert_string_equal(ann(&f, 1, HV_MHC_SKIP), HV_MHC_SKIP_VALUE);
    assert_int_equal(f.patches, 1);
    set_ann(&f, 1, HV_MHC_SKIP, "true"); /* the user's now */
    f.vm[0] = f.vm[1] = HV_MHC_VM_QUIET;
    hv_mhc_pass(m, 1002);
    assert_string_equal(ann(&f, 0, HV_MHC_SKIP), "");
    assert_string_equal(ann(&f, 1, HV_MHC_SKIP), "true");
    assert_null(ann(&f, 1, HV_MHC_OWNED));
    assert_int_equal(f.patches, 2);
    hv_mhc_pass(m, 1004);
    assert_int_equal(f.patches, 2);
    hv_mhc_free(m);
    fake_free(&f);
}

/* A restarted process (a new hv_mhc, no call yet) finds its marks by listing Machines: one
 * whose VM still cycles stays marked, one whose cycle ended and whose Node is Ready is let go,
 * one of the user's is not touched. */
static void test_adopt_after_restart(void **state)
{
    (void)state;
    struct fake f = {0};
    const char *mine0 = "{\"" HV_MHC_SKIP "\":\"hvupdater\",\"" HV_MHC_OWNED "\":\"libvirt v0\"}";
    const char *mine1 = "{\"" HV_MHC_SKIP "\":\"hvupdater\",\"" HV_MHC_OWNED "\":\"libvirt v1\"}";
    machine(&f, 0, mine0, "False");
    machine(&f, 1, mine1, "True");
    machine(&f, 3, "{\"" HV_MHC_SKIP "\":\"\"}", "True");
    f.vm[0] = HV_MHC_VM_CYCLING;
    f.vm[1] = HV_MHC_VM_QUIET;
    f.vm[3] = HV_MHC_VM_CYCLING;
    struct hv_mhc *m = hold(&f);
    hv_mhc_pass(m, 5000);
    assert_int_equal(f.lists, 3); /* three pages */
    assert_int_equal(hv_mhc_tracked(m), 2);
    assert_string_equal(ann(&f, 0, HV_MHC_OWNED), "libvirt v0");
    assert_null(ann(&f, 1, HV_MHC_OWNED));
    assert_null(ann(&f, 1, HV_MHC_SKIP));
    assert_string_equal(ann(&f, 3, HV_MHC_SKIP), "");
    assert_int_equal(f.patches, 1);
    /* the cycle ends after the restart: let go once the Node is Ready */
    f.vm[0] = HV_MHC_VM_QUIET;
    hv_mhc_pass(m, 5002);
    assert_non_null(ann(&f, 0, HV_MHC_OWNED));
    set_node_ready(&f, 0, "True");
    hv_mhc_pass(m, 5004);
    assert_null(ann(&f, 0, HV_MHC_OWNED));
    assert_null(ann(&f, 0, HV_MHC_SKIP));
    hv_mhc_free(m);
    fake_free(&f);
}

/* A patch that meets a newer Machine (409) is made again from a fresh read on the next pass;
 * a Machine that is gone is forgotten. */
static void test_conflict_and_gone(void **state)
{
    (void)state;
    struct fake f = {0};
    machine(&f, 0, "{}", "True");
    struct hv_mhc *m = hold(&f);
    hv_mhc_track(m, "ns", "m0", "libvirt", "v0");
    hv_mhc_track(m, "ns", "m2", "libvirt", "v2"); /* no such Machine */
    hv_mhc_track(m, "NS", "m0", "libvirt", "v0"); /* not a namespace: ignored */
    hv_mhc_track(m, "ns", "m1", "bad backend", "v1");
    f.vm[0] = f.vm[2] = HV_MHC_VM_CYCLING;
    f.conflict_next = 1;
    hv_mhc_pass(m, 1000);
    assert_null(ann(&f, 0, HV_MHC_OWNED));
    assert_int_equal(hv_mhc_tracked(m), 1);
    hv_mhc_pass(m, 1002);
    assert_string_equal(ann(&f, 0, HV_MHC_OWNED), "libvirt v0");
    hj_free(f.m[0]);
    f.m[0] = NULL;
    hv_mhc_pass(m, 1004);
    assert_int_equal(hv_mhc_tracked(m), 0);
    hv_mhc_free(m);
    fake_free(&f);
}

/* With the worker thread: started and stopped without a pass (serve --check-config). */
static void test_thread_stops(void **state)
{
    (void)state;
    struct fake f = {0};
    struct hv_mhc_cfg c = {.io = {.ctx = &f, .get = f_get, .patch = f_patch, .list = f_list},
                           .vm_state = f_vm,
                           .vm_ctx = &f,
                           .interval_ms = 60000};
    struct hv_mhc *m = hv_mhc_new(&c);
    assert_non_null(m);
    hv_mhc_free(m);
    assert_int_equal(f.lists, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_read_machine),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_ready_wait_bound),
        cmocka_unit_test(test_users_annotation),
        cmocka_unit_test(test_adopt_after_restart),
        cmocka_unit_test(test_conflict_and_gone),
        cmocka_unit_test(test_thread_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
