/* test_libvirt_qemu.c: the libvirt backend against real QEMU (TCG, no disk, booting the lab
 * guest of test/lab/guest; switches make the guest misbehave where a test needs it) on the
 * lab daemon. Needs test/lab/libvirt-up.sh and HV_LIBVIRT_LAB_URI=qemu:///system (what the
 * script prints); without them every run FAILS. Each test defines its own hvt-* domain from
 * test/lab/domains/ and its teardown removes it, pass or fail. Step timings go to stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lv_testutil.h"

static const char *lab_uri;

struct qt {
    char name[64];
    struct hv_backend *be;
    struct hv_vm_ref ref;
    char image[512]; /* disk style: the image file, removed by the teardown */
};

static void qt_timing(const char *what, double t0)
{
    printf("    timing %-44s %8.1f ms\n", what, lvt_now_ms() - t0);
    fflush(stdout);
}

static int qt_teardown(void **state)
{
    struct qt *q = *state;
    if (!q)
        return 0;
    if (q->be)
        q->be->ops->free(q->be);
    lvt_remove(lab_uri, q->name);
    if (q->image[0]) {
        virConnectPtr c = virConnectOpen(lab_uri);
        virStorageVolPtr v = c ? virStorageVolLookupByPath(c, q->image) : NULL;
        if (v) {
            virStorageVolDelete(v, 0);
            virStorageVolFree(v);
        }
        virResetLastError();
        if (c)
            virConnectClose(c);
        unlink(q->image); /* the loose image lives in no pool */
    }
    free(q);
    return 0;
}

/* define + start a lab domain of `style` (guest kernel switches: NULL for none) and a backend
 * on the lab URI; state owns both */
static struct qt *qt_start_guest(void **state, const char *style, const char *switches)
{
    struct qt *q = calloc(1, sizeof(*q));
    assert_non_null(q);
    *state = q;
    lvt_name(q->name, sizeof(q->name), style);
    lvt_remove(lab_uri, q->name); /* leftovers of an aborted run */
    char *xml = lvt_style_xml(style, q->name, switches);
    double t0 = lvt_now_ms();
    lvt_define(lab_uri, xml, true);
    qt_timing("define + start domain", t0);
    free(xml);
    const char *uris[] = {lab_uri};
    q->be = lvt_backend(uris, 1);
    lvt_ref(&q->ref, "", "", q->name);
    return q;
}

/* The "disk" style with a fresh 1 GiB image: a qcow2 volume of the lab pool (pool = true, made
 * by test/lab/disk-image.sh), or a raw file in no pool. Running; ref names its disk vda. */
static struct qt *qt_start_disk(void **state, bool pool)
{
    struct qt *q = calloc(1, sizeof(*q));
    assert_non_null(q);
    *state = q;
    lvt_name(q->name, sizeof(q->name), pool ? "disk" : "rawdisk");
    lvt_remove(lab_uri, q->name);
    double t0 = lvt_now_ms();
    if (pool) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), HV_LAB_DIR "/disk-image.sh %s 1", q->name);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        if (!fgets(q->image, sizeof(q->image), f))
            q->image[0] = '\0';
        int rc = pclose(f);
        q->image[strcspn(q->image, "\n")] = '\0';
        if (rc != 0 || !q->image[0])
            fail_msg("disk-image.sh failed (%d)", rc);
    } else {
        assert_int_equal(system("mkdir -p /var/lib/libvirt/images/hvt-loose"), 0);
        snprintf(q->image, sizeof(q->image), "/var/lib/libvirt/images/hvt-loose/%s.img", q->name);
        FILE *f = fopen(q->image, "w");
        assert_non_null(f);
        assert_int_equal(ftruncate(fileno(f), 1024LL * 1024 * 1024), 0);
        fclose(f);
    }
    qt_timing("make disk image", t0);
    char *tmpl = lvt_style_xml("disk", q->name, NULL);
    /* lvt_style_xml renamed every hvt-disk, the template's image path too */
    char placeholder[256];
    snprintf(placeholder, sizeof(placeholder), "/var/lib/libvirt/images/hvt/%s.qcow2", q->name);
    char *at = strstr(tmpl, placeholder);
    assert_non_null(at);
    size_t len = strlen(tmpl) + strlen(q->image) + 16;
    char *xml = malloc(len);
    assert_non_null(xml);
    snprintf(xml, len, "%.*s%s%s", (int)(at - tmpl), tmpl, q->image, at + strlen(placeholder));
    free(tmpl);
    if (!pool) { /* a raw image */
        char *drv = strstr(xml, "type='qcow2'");
        assert_non_null(drv);
        memcpy(drv, "type='raw'  ", 12);
    }
    t0 = lvt_now_ms();
    lvt_define(lab_uri, xml, true);
    qt_timing("define + start domain", t0);
    free(xml);
    const char *uris[] = {lab_uri};
    q->be = lvt_backend(uris, 1);
    lvt_ref(&q->ref, "", "", q->name);
    snprintf(q->ref.disk, sizeof(q->ref.disk), "vda");
    return q;
}

static struct qt *qt_start(void **state, const char *style)
{
    return qt_start_guest(state, style, NULL);
}

static void qt_observe(struct qt *q, struct hv_vm_obs *obs)
{
    struct hv_err err;
    if (q->be->ops->observe(q->be, &q->ref, obs, &err) != HV_OK)
        fail_msg("observe: %s", err.detail);
    assert_true(obs->found);
    /* the guest's view is asked for separately (a round trip into the guest), as the engine
     * does once the VM shows the desired hardware */
    if (obs->power == HV_POWER_ON && q->be->ops->observe_guest(q->be, &q->ref, obs, &err) != HV_OK)
        fail_msg("observe_guest: %s", err.detail);
}

static void qt_act(struct qt *q, enum hv_step_kind kind, struct hv_hw want, const char *method,
                   const char *what)
{
    struct hv_step step = {.kind = kind, .desired = want, .timeout_ms = 10000};
    snprintf(step.method, sizeof(step.method), "%s", method ? method : "");
    struct hv_err err;
    double t0 = lvt_now_ms();
    if (q->be->ops->act(q->be, &q->ref, &step, &err) != HV_OK)
        fail_msg("act %s: %s", what, err.detail);
    qt_timing(what, t0);
}

static void test_dimm_hot_add(void **state)
{
    struct qt *q = qt_start(state, "dimm");
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    double t0 = lvt_now_ms();
    qt_observe(q, &obs);
    qt_timing("observe (first, opens the connection)", t0);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.memory_mib, 1024);
    assert_int_equal(obs.hw.cpus, 1);
    assert_int_equal(obs.hw.cores_per_socket, 1);
    assert_string_equal(obs.host, lab_uri);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    t0 = lvt_now_ms();
    qt_observe(q, &obs);
    qt_timing("observe (warm)", t0);

    struct hv_hw want = {1536, -1, -1, -1};
    t0 = lvt_now_ms();
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    qt_timing("plan", t0);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_MEMORY].method, "dimm");
    /* the probe's worst case (hv_vm_obs.assumed): as a grow to 1536 MiB in flight would leave
     * the domain, going back to 1024 is a shrink, cold; unmarked, planned as read (nothing) */
    struct hv_vm_obs after = obs;
    after.hw.memory_mib = after.config.memory_mib = 1536;
    struct hv_hw back = {1024, -1, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &after, &back, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_NONE);
    after.assumed = true;
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &after, &back, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory shrink needs a restart");
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "dimm", "act LIVE_MEMORY dimm 1024->1536");
    t0 = lvt_now_ms();
    assert_int_equal(lvt_wait_memory(q->be, &q->ref, 1536, 3000), 1536);
    qt_timing("until observe shows 1536 MiB", t0);
    qt_observe(q, &obs);
    assert_string_equal(obs.id, id); /* no restart */
    assert_int_equal(obs.config.memory_mib, 1536);
    char *cfg = lvt_dom_xml(lab_uri, q->name, VIR_DOMAIN_XML_INACTIVE);
    assert_non_null(strstr(cfg, "<memory model='dimm'>"));
    free(cfg);
    /* done: the same step again is a no-op, not a second DIMM */
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "dimm", "act LIVE_MEMORY again (no-op)");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1536);
}

static void test_vcpu_hot_plug(void **state)
{
    struct qt *q = qt_start(state, "dimm");
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    qt_observe(q, &obs);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    struct hv_hw want = {-1, 3, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_CPUS].method, "vcpu hot-plug");
    /* the probe's worst case (hv_vm_obs.assumed): as the plug to 3 in flight would leave the
     * domain, back to 1 is a shrink, cold; 4 is live; 6 passes the maximum of 4 as read */
    struct hv_vm_obs after = obs;
    after.hw.cpus = after.config.cpus = 3;
    after.assumed = true;
    struct hv_hw back = {-1, 1, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &after, &back, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "vCPU shrink needs a restart");
    struct hv_hw four = {-1, 4, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &after, &four, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE);
    struct hv_hw six = {-1, 6, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &after, &six, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "above maximum vCPUs");
    qt_act(q, HV_STEP_LIVE_CPUS, want, "vcpu hot-plug", "act LIVE_CPUS 1->3");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.cpus, 3);
    assert_int_equal(obs.config.cpus, 3);
    assert_string_equal(obs.id, id);
    /* above the maximum of 4: cold */
    struct hv_hw more = {-1, 6, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &more, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "above maximum vCPUs");
}

static void test_virtio_mem_accepted_not_done(void **state)
{
    struct qt *q = qt_start_guest(state, "vmem", "hvguest.novmem"); /* no guest driver */
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1024);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    struct hv_hw want = {1536, -1, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_MEMORY].method, "virtio-mem");
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "virtio-mem", "act LIVE_MEMORY virtio-mem +512");
    usleep(500 * 1000);
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1024); /* no guest driver plugs the blocks */
    assert_string_equal(obs.id, id);
    char *live = lvt_dom_xml(lab_uri, q->name, 0);
    assert_non_null(strstr(live, "<requested unit='KiB'>524288</requested>"));
    assert_non_null(strstr(live, "<current unit='KiB'>0</current>"));
    free(live);
    char *cfg = lvt_dom_xml(lab_uri, q->name, VIR_DOMAIN_XML_INACTIVE);
    assert_non_null(strstr(cfg, "<requested unit='KiB'>524288</requested>"));
    free(cfg);
    /* the definition asks for 512 MiB more, but a boot guarantees none of it: config says so,
     * and an engine that compares config with desired still reconfigures */
    assert_int_equal(obs.config.memory_mib, 1024);
    /* asked again (the engine's retry): same request, still accepted */
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "virtio-mem", "act LIVE_MEMORY virtio-mem again");
}

static void test_vmem_cold_cycle(void **state)
{
    struct qt *q = qt_start(state, "vmem");
    struct hv_vm_obs obs;
    struct hv_hw want = {1536, -1, -1, -1};
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "virtio-mem", "act LIVE_MEMORY virtio-mem (setup)");
    qt_act(q, HV_STEP_POWER_OFF, want, NULL, "act POWER_OFF (vmem)");
    qt_observe(q, &obs);
    assert_int_equal(obs.config.memory_mib, 1024); /* so the engine does reconfigure */
    qt_act(q, HV_STEP_RECONFIGURE, want, NULL, "act RECONFIGURE 1536 MiB (vmem)");
    qt_observe(q, &obs);
    assert_int_equal(obs.config.memory_mib, 1536);
    qt_act(q, HV_STEP_POWER_ON, want, NULL, "act POWER_ON (vmem)");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1536); /* folded into the NUMA cell */
    char *live = lvt_dom_xml(lab_uri, q->name, 0);
    assert_null(strstr(live, "virtio-mem"));
    assert_non_null(strstr(live, "<memory unit='KiB'>1572864</memory>"));
    free(live);
}

static void test_shutdown_ignored_by_guest(void **state)
{
    struct qt *q = qt_start_guest(state, "plain", "hvguest.nopowerbutton hvguest.noagent");
    struct hv_vm_obs obs;
    qt_observe(q, &obs);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    assert_false(obs.tools_running);
    assert_true(obs.can_shutdown); /* ACPI: accepted, even though the guest ignores it */
    struct hv_hw none = {-1, -1, -1, -1};
    qt_act(q, HV_STEP_SHUTDOWN, none, NULL, "act SHUTDOWN (ACPI, guest ignores it)");
    usleep(1000 * 1000);
    qt_observe(q, &obs);
    assert_int_equal(obs.power, HV_POWER_ON); /* the guest ignored the button */
    assert_string_equal(obs.id, id);
}

/* observe until the guest's own view shows mem_min..mem_max MiB and cpus (or timeout_s) */
static void qt_wait_guest(struct qt *q, struct hv_vm_obs *obs, int64_t mem_min, int64_t mem_max,
                          int cpus, int timeout_s)
{
    double t0 = lvt_now_ms();
    for (;;) {
        qt_observe(q, obs);
        if (obs->guest.mem_view == HV_GV_SEEN && obs->guest.cpu_view == HV_GV_SEEN &&
            obs->guest.memory_mib >= mem_min && obs->guest.memory_mib <= mem_max &&
            obs->guest.cpus == cpus)
            break;
        if (lvt_now_ms() - t0 > timeout_s * 1000.0)
            fail_msg("guest view: mem %d/%lld MiB cpus %d/%d, want %lld..%lld MiB, %d cpus",
                     (int)obs->guest.mem_view, (long long)obs->guest.memory_mib,
                     (int)obs->guest.cpu_view, obs->guest.cpus, (long long)mem_min,
                     (long long)mem_max, cpus);
        usleep(500 * 1000);
    }
    qt_timing("guest view reached", t0);
}

/* The guest's own view: balloon statistics (turned on by observe) and the guest agent. */
static void test_guest_view(void **state)
{
    struct qt *q = qt_start(state, "dimm");
    struct hv_vm_obs obs;
    qt_observe(q, &obs);
    /* the statistics period was 0: observe turned it on; nothing reported yet */
    assert_int_not_equal(obs.guest.mem_view, HV_GV_SEEN);
    char *live = lvt_dom_xml(lab_uri, q->name, 0);
    assert_non_null(strstr(live, "<stats period='2'/>"));
    free(live);
    /* booted: the kernel's MemTotal is the 1024 MiB less what it reserved */
    qt_wait_guest(q, &obs, 800, 1023, 1, 120);
    /* the agent answered (the guest's vCPU count): an observation from now on shows it
     * connected (the one qt_wait_guest made before asking the guest may predate it) */
    qt_observe(q, &obs);
    assert_true(obs.tools_running);
    struct hv_hw want = {1536, 3, -1, -1};
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "dimm", "act LIVE_MEMORY dimm +512");
    qt_act(q, HV_STEP_LIVE_CPUS, want, NULL, "act LIVE_CPUS 3");
    qt_wait_guest(q, &obs, 1300, 1535, 3, 60); /* the guest onlined both */
}

/* A guest that never onlines hot-added memory: libvirt shows it, the guest does not. */
static void test_guest_view_memory_left_offline(void **state)
{
    struct qt *q = qt_start_guest(state, "dimm", "hvguest.noonline");
    struct hv_vm_obs obs;
    qt_wait_guest(q, &obs, 800, 1023, 1, 120);
    int64_t before = obs.guest.memory_mib;
    struct hv_hw want = {1536, 2, -1, -1};
    qt_act(q, HV_STEP_LIVE_MEMORY, want, "dimm", "act LIVE_MEMORY dimm +512 (noonline)");
    qt_act(q, HV_STEP_LIVE_CPUS, want, NULL, "act LIVE_CPUS 2 (noonline)");
    qt_wait_guest(q, &obs, 800, 1023, 2, 60); /* CPUs: onlined; memory: not */
    usleep(3000 * 1000);                      /* two more statistics periods */
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1536);
    assert_int_equal(obs.guest.mem_view, HV_GV_SEEN);
    assert_true(obs.guest.memory_mib <= before + 16);
}

static void test_cold_cycle(void **state)
{
    struct qt *q = qt_start(state, "dimm");
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    assert_int_equal(q->be->ops->write_record(q->be, &q->ref, NULL, "{\"phase\":\"cold\"}", &err),
                     HV_OK);
    struct hv_hw grown = {1536, -1, -1, -1};
    qt_act(q, HV_STEP_LIVE_MEMORY, grown, "dimm", "act LIVE_MEMORY dimm (setup)");
    assert_int_equal(lvt_wait_memory(q->be, &q->ref, 1536, 3000), 1536);
    qt_observe(q, &obs);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);

    struct hv_hw want = {768, 2, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "memory shrink needs a restart");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_LIVE); /* 1 -> 2 alone would be live */

    qt_act(q, HV_STEP_POWER_OFF, want, NULL, "act POWER_OFF");
    qt_observe(q, &obs);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_string_equal(obs.id, "");
    qt_act(q, HV_STEP_RECONFIGURE, want, NULL, "act RECONFIGURE 768 MiB / 2 vCPU");
    qt_observe(q, &obs);
    assert_int_equal(obs.config.memory_mib, 768);
    assert_int_equal(obs.config.cpus, 2);
    char *cfg = lvt_dom_xml(lab_uri, q->name, VIR_DOMAIN_XML_INACTIVE);
    assert_null(strstr(cfg, "model='dimm'")); /* folded into the NUMA cell */
    free(cfg);
    qt_act(q, HV_STEP_POWER_ON, want, NULL, "act POWER_ON");
    double t0 = lvt_now_ms();
    qt_observe(q, &obs);
    qt_timing("observe after POWER_ON", t0);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.memory_mib, 768);
    assert_int_equal(obs.hw.cpus, 2);
    assert_int_equal(obs.config.memory_mib, 768);
    assert_string_not_equal(obs.id, id); /* a new run */
    assert_string_not_equal(obs.id, "");
    assert_string_equal(obs.record, "{\"phase\":\"cold\"}");
}

static void test_record_survives_libvirtd_restart(void **state)
{
    struct qt *q = qt_start(state, "plain");
    struct hv_vm_obs obs;
    struct hv_err err;
    const char *rec = "{\"op\":\"restart-proof\",\"n\":1}";
    assert_int_equal(q->be->ops->write_record(q->be, &q->ref, NULL, rec, &err), HV_OK);
    qt_observe(q, &obs);
    assert_string_equal(obs.record, rec);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);

    double t0 = lvt_now_ms();
    assert_int_equal(system(HV_LAB_DIR "/libvirt-up.sh --restart"), 0);
    qt_timing("restart libvirtd (lab script)", t0);
    t0 = lvt_now_ms();
    qt_observe(q, &obs); /* same backend: its connection died with the daemon */
    qt_timing("observe after restart (reconnects)", t0);
    assert_string_equal(obs.record, rec);
    assert_string_equal(obs.id, id); /* the domain kept running */
    assert_int_equal(q->be->ops->write_record(q->be, &q->ref, NULL, "", &err), HV_OK);
    qt_observe(q, &obs);
    assert_string_equal(obs.record, "");
}

static void test_plain_plans_cold(void **state)
{
    struct qt *q = qt_start(state, "plain");
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.memory_mib, 1024);
    assert_int_equal(obs.hw.cpus, 2);
    struct hv_hw want = {2048, 4, -1, -1};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_MEMORY].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_MEMORY].reason, "no memory hot-plug slots (no maxMemory)");
    assert_int_equal(plan[HV_F_CPUS].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_CPUS].reason, "above maximum vCPUs");
    struct hv_step step = {.kind = HV_STEP_LIVE_MEMORY, .desired = want, .method = "dimm"};
    assert_int_equal(q->be->ops->act(q->be, &q->ref, &step, &err), HV_E_UNSUPPORTED);

    /* the same daemon through a remote-style URI: keepalive and the event loop in play */
    const char *const uris[] = {"qemu+unix:///system"};
    struct hv_backend *rb = lvt_backend(uris, 1);
    struct hv_vm_obs robs;
    assert_int_equal(rb->ops->observe(rb, &q->ref, &robs, &err), HV_OK);
    assert_true(robs.found);
    assert_string_equal(robs.id, obs.id);
    rb->ops->free(rb);
}

/* A running domain's disk grows live (virDomainBlockResize): same QEMU process, the new
 * capacity reported at once; a smaller size is refused; the same step again does nothing. */
static void test_disk_grows_live(void **state)
{
    struct qt *q = qt_start_disk(state, true);
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    qt_observe(q, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.disk_mib, 1024);
    assert_int_equal(obs.config.disk_mib, 1024);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);

    struct hv_hw want = {-1, -1, -1, 2048};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_LIVE);
    assert_string_equal(plan[HV_F_DISK].method, "block-resize");
    qt_act(q, HV_STEP_LIVE_DISK, want, "block-resize", "act LIVE_DISK 1->2 GiB");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 2048);
    assert_string_equal(obs.id, id); /* the same QEMU process: no restart */
    assert_int_equal(obs.power, HV_POWER_ON);
    qt_act(q, HV_STEP_LIVE_DISK, want, "block-resize", "act LIVE_DISK again (no-op)");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 2048);

    struct hv_hw less = {-1, -1, -1, 1024};
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &less, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_NONE); /* a larger disk is left as it is */
    struct hv_step step = {.kind = HV_STEP_LIVE_DISK, .desired = less};
    assert_int_equal(q->be->ops->act(q->be, &q->ref, &step, &err), HV_E_UNSUPPORTED);
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 2048);

    /* a target the domain does not have */
    snprintf(q->ref.disk, sizeof(q->ref.disk), "vdz");
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason, "the domain has no disk with that target device");
}

/* An off domain's disk grows through its storage volume in RECONFIGURE. */
static void test_disk_grows_off_through_the_pool(void **state)
{
    struct qt *q = qt_start_disk(state, true);
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    struct hv_hw want = {-1, -1, -1, 3072};
    qt_act(q, HV_STEP_POWER_OFF, want, NULL, "act POWER_OFF (disk)");
    qt_observe(q, &obs);
    assert_int_equal(obs.power, HV_POWER_OFF);
    assert_int_equal(obs.hw.disk_mib, 1024); /* read from the image while off */
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &want, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_COLD);
    assert_string_equal(plan[HV_F_DISK].reason, "domain is off");
    qt_act(q, HV_STEP_RECONFIGURE, want, NULL, "act RECONFIGURE disk 3 GiB (volume resize)");
    qt_observe(q, &obs);
    assert_int_equal(obs.config.disk_mib, 3072);
    qt_act(q, HV_STEP_RECONFIGURE, want, NULL, "act RECONFIGURE again (no-op)");
    qt_act(q, HV_STEP_POWER_ON, want, NULL, "act POWER_ON (disk)");
    qt_observe(q, &obs);
    assert_int_equal(obs.power, HV_POWER_ON);
    assert_int_equal(obs.hw.disk_mib, 3072);
}

/* A raw image in no pool: QEMU grows it live, but an off domain's cannot be grown by
 * libvirt, and hvupdater says so instead of failing in the middle of a power cycle. */
static void test_disk_outside_any_pool(void **state)
{
    struct qt *q = qt_start_disk(state, false);
    struct hv_vm_obs obs;
    struct hv_err err;
    struct hv_field_plan plan[HV_F_COUNT];
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 1024);
    char id[64];
    snprintf(id, sizeof(id), "%s", obs.id);
    struct hv_hw want = {-1, -1, -1, 1536};
    qt_act(q, HV_STEP_LIVE_DISK, want, "block-resize", "act LIVE_DISK raw 1024->1536 MiB");
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 1536);
    assert_string_equal(obs.id, id);

    struct hv_hw more = {-1, -1, -1, 2048};
    qt_act(q, HV_STEP_POWER_OFF, more, NULL, "act POWER_OFF (raw disk)");
    qt_observe(q, &obs);
    assert_int_equal(q->be->ops->plan(q->be, &q->ref, &obs, &more, plan, &err), HV_OK);
    assert_int_equal(plan[HV_F_DISK].how, HV_HOW_IMPOSSIBLE);
    assert_string_equal(plan[HV_F_DISK].reason,
                        "the domain is off and its disk image is in no libvirt storage pool, so "
                        "libvirt cannot grow it");
    struct hv_step step = {.kind = HV_STEP_RECONFIGURE, .desired = more};
    assert_int_equal(q->be->ops->act(q->be, &q->ref, &step, &err), HV_E_UNSUPPORTED);
    qt_observe(q, &obs);
    assert_int_equal(obs.hw.disk_mib, 1536);
}

int main(void)
{
    lab_uri = getenv("HV_LIBVIRT_LAB_URI");
    if (!lab_uri || !*lab_uri) {
        fprintf(stderr, "FAIL: HV_LIBVIRT_LAB_URI is not set. Start the lab first:\n"
                        "  eval \"$(test/lab/libvirt-up.sh)\"\n");
        return 1;
    }
    virConnectPtr c = virConnectOpen(lab_uri);
    if (!c) {
        virErrorPtr e = virGetLastError();
        fprintf(stderr, "FAIL: cannot reach the lab daemon at %s: %s\n", lab_uri,
                e && e->message ? e->message : "?");
        return 1;
    }
    virConnectClose(c);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_dimm_hot_add, qt_teardown),
        cmocka_unit_test_teardown(test_disk_grows_live, qt_teardown),
        cmocka_unit_test_teardown(test_disk_grows_off_through_the_pool, qt_teardown),
        cmocka_unit_test_teardown(test_disk_outside_any_pool, qt_teardown),
        cmocka_unit_test_teardown(test_vcpu_hot_plug, qt_teardown),
        cmocka_unit_test_teardown(test_virtio_mem_accepted_not_done, qt_teardown),
        cmocka_unit_test_teardown(test_vmem_cold_cycle, qt_teardown),
        cmocka_unit_test_teardown(test_guest_view, qt_teardown),
        cmocka_unit_test_teardown(test_guest_view_memory_left_offline, qt_teardown),
        cmocka_unit_test_teardown(test_shutdown_ignored_by_guest, qt_teardown),
        cmocka_unit_test_teardown(test_cold_cycle, qt_teardown),
        cmocka_unit_test_teardown(test_record_survives_libvirtd_restart, qt_teardown),
        cmocka_unit_test_teardown(test_plain_plans_cold, qt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
