/* test_oprecord_v1.c: issue 27 "Must not change": records written by the release before the
 * engine's refactor are read and finished by today's code. The fixtures
 * (test/fixtures/oprecord-v1/, README there) are records that release's engine wrote (commit
 * 5f5a5e4, main before issue 27's first step, its simulation run with a dump of every record
 * the world stored), one per phase and a few variants, kept byte for byte.
 *
 * For each: today's reader takes it (phase, desired, owner, policy, message as written), its
 * writer writes it back byte for byte (the v1 format unchanged), and a driven engine of today,
 * as the next life of the process that wrote it (same host, another pid), over a fake VM in
 * the state the phase implies, finishes the cycle: done with the desired hardware on a
 * running VM, or the record's sticky Failure answered again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "oprecord.h"
#include "settings.h"

/* ---- a fake VM: one, whatever the reference ---- */

static struct {
    bool on;
    struct hv_hw config; /* live values == config (what a running VM shows) */
    int run;             /* run identity, new at every power-on */
    char record[HV_RECORD_MAX];
    int steps, writes;
} V;

static bool fv_serves(struct hv_backend *b, const struct hv_vm_ref *ref)
{
    (void)b, (void)ref;
    return true;
}

static int fv_observe(struct hv_backend *b, const struct hv_vm_ref *ref, struct hv_vm_obs *o,
                      struct hv_err *err)
{
    (void)b, (void)ref, (void)err;
    memset(o, 0, sizeof(*o));
    o->found = true;
    o->power = V.on ? HV_POWER_ON : HV_POWER_OFF;
    o->hw = o->config = V.config;
    snprintf(o->id, sizeof(o->id), "%d", V.run);
    snprintf(o->host, sizeof(o->host), "fake");
    snprintf(o->record, sizeof(o->record), "%s", V.record);
    o->tools_running = o->can_shutdown = V.on;
    o->no_mem_report = o->no_cpu_report = true; /* the guest cannot tell: nothing to verify */
    return HV_OK;
}

/* Grows of memory, vCPUs and the disk live on a running VM, everything else cold. */
static int fv_plan(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_vm_obs *o,
                   const struct hv_hw *want, struct hv_field_plan plan[HV_F_COUNT],
                   struct hv_err *err)
{
    (void)b, (void)ref, (void)err;
    memset(plan, 0, sizeof(struct hv_field_plan) * HV_F_COUNT);
    struct {
        int64_t have, want;
        const char *method;
    } f[HV_F_COUNT] = {
        [HV_F_MEMORY] = {o->config.memory_mib, want->memory_mib, "dimm"},
        [HV_F_CPUS] = {o->config.cpus, want->cpus, "vcpu hot-plug"},
        [HV_F_CORES] = {o->config.cores_per_socket, want->cores_per_socket, NULL},
        [HV_F_DISK] = {o->config.disk_mib, hv_disk_set(want->disk_mib) ? want->disk_mib : -1,
                       "block resize"},
    };
    for (int k = 0; k < HV_F_COUNT; k++) {
        if (f[k].want < 0 || f[k].want == f[k].have)
            continue;
        bool live = o->power == HV_POWER_ON && f[k].method && f[k].want > f[k].have;
        plan[k].how = live ? HV_HOW_LIVE : HV_HOW_COLD;
        if (live)
            snprintf(plan[k].method, sizeof(plan[k].method), "%s", f[k].method);
    }
    return HV_OK;
}

static void set_fields(struct hv_hw *to, const struct hv_hw *from)
{
    if (from->memory_mib >= 0)
        to->memory_mib = from->memory_mib;
    if (from->cpus >= 0)
        to->cpus = from->cpus;
    if (from->cores_per_socket >= 0)
        to->cores_per_socket = from->cores_per_socket;
    if (hv_disk_set(from->disk_mib) && from->disk_mib > to->disk_mib)
        to->disk_mib = from->disk_mib;
}

static int fv_act(struct hv_backend *b, const struct hv_vm_ref *ref, const struct hv_step *st,
                  struct hv_err *err)
{
    (void)b, (void)ref, (void)err;
    V.steps++;
    switch (st->kind) {
    case HV_STEP_LIVE_MEMORY:
        V.config.memory_mib = st->desired.memory_mib;
        break;
    case HV_STEP_LIVE_CPUS:
        V.config.cpus = st->desired.cpus;
        break;
    case HV_STEP_LIVE_DISK:
        V.config.disk_mib = st->desired.disk_mib;
        break;
    case HV_STEP_SHUTDOWN:
    case HV_STEP_POWER_OFF:
        V.on = false;
        break;
    case HV_STEP_RECONFIGURE:
        set_fields(&V.config, &st->desired);
        break;
    case HV_STEP_POWER_ON:
        V.on = true;
        V.run++;
        break;
    }
    return HV_OK;
}

static int fv_write(struct hv_backend *b, const struct hv_vm_ref *ref, const char *expected,
                    const char *rec, struct hv_err *err)
{
    (void)b, (void)ref, (void)expected, (void)err;
    V.writes++;
    snprintf(V.record, sizeof(V.record), "%s", rec);
    return HV_OK;
}

static void fv_free(struct hv_backend *b)
{
    (void)b;
}

static const struct hv_backend_ops fv_ops = {.name = "libvirt",
                                             .serves = fv_serves,
                                             .observe = fv_observe,
                                             .plan = fv_plan,
                                             .act = fv_act,
                                             .write_record = fv_write,
                                             .free = fv_free};
static struct hv_backend fake_be = {.ops = &fv_ops};

static int64_t now_s;
static int64_t d_mono(void *ctx)
{
    (void)ctx;
    return now_s * 1000;
}
static int64_t d_unix(void *ctx)
{
    (void)ctx;
    return now_s;
}

/* ---- the fixtures ---- */

enum vm_cfg { PREV, DESIRED }; /* the VM's configuration when today's engine first looks */

static const struct fixture {
    const char *file;
    enum hv_phase phase;
    bool on;
    enum vm_cfg cfg;
    bool failed; /* the record's sticky Failure is the answer */
} fixtures[] = {
    /* a cold operation waiting for its slot */
    {"planned", HV_PH_PLANNED, true, PREV, false},
    /* live steps being issued (powerCycle Never), none landed yet */
    {"live", HV_PH_LIVE, true, PREV, false},
    {"live-never", HV_PH_LIVE, true, PREV, false},
    /* live steps landed, waiting for them to show */
    {"wait-live", HV_PH_WAIT_LIVE, true, DESIRED, false},
    /* a shutdown or power-off that took the VM down before the writer went away */
    {"shutdown", HV_PH_SHUTDOWN, false, PREV, false},
    {"power-off", HV_PH_POWER_OFF, false, PREV, false},
    /* an older operation's shutdown taken over (downAt), landed */
    {"shutdown-taken-over", HV_PH_SHUTDOWN, false, DESIRED, false},
    /* off, not reconfigured yet */
    {"reconfigure", HV_PH_RECONFIGURE, false, PREV, false},
    /* reconfigured, its start sent and lost */
    {"power-on", HV_PH_POWER_ON, false, DESIRED, false},
    {"done", HV_PH_DONE, true, DESIRED, false},
    /* a sticky Failure (the VM left running as it was) */
    {"failed", HV_PH_FAILED, true, PREV, true},
    /* rolled back and left off: the Failure stays; the VM is started as it was */
    {"failed-rollback", HV_PH_FAILED, false, PREV, true},
};
#define N_FIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static void read_fixture(const char *name, char *out, size_t cap)
{
    const char *src = getenv("HV_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/test/fixtures/oprecord-v1/%s.json", src ? src : ".", name);
    FILE *fp = fopen(path, "r");
    if (!fp)
        fail_msg("cannot open %s", path);
    size_t n = fread(out, 1, cap - 1, fp);
    fclose(fp);
    out[n] = '\0';
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
}

/* The settings a record's policy names ("IfNeeded/TrySoft/120/300/1800/IfAvailable"). */
static void settings_of(const char *policy, struct hv_settings *s)
{
    char pc[32], pom[32], gc[32];
    int live, shut, dl;
    hv_settings_default(s);
    assert_int_equal(
        sscanf(policy, "%31[^/]/%31[^/]/%d/%d/%d/%31s", pc, pom, &live, &shut, &dl, gc), 6);
    bool p = false, o = false, g = false;
    for (int k = HV_PC_IF_NEEDED; k <= HV_PC_NEVER; k++)
        if (!strcmp(pc, hv_power_cycle_name((enum hv_power_cycle)k)))
            s->power_cycle = (enum hv_power_cycle)k, p = true;
    for (int k = HV_POM_TRY_SOFT; k <= HV_POM_HARD; k++)
        if (!strcmp(pom, hv_power_off_mode_name((enum hv_power_off_mode)k)))
            s->power_off_mode = (enum hv_power_off_mode)k, o = true;
    for (int k = HV_GC_IF_AVAILABLE; k <= HV_GC_OFF; k++)
        if (!strcmp(gc, hv_guest_check_name((enum hv_guest_check)k)))
            s->guest_check = (enum hv_guest_check)k, g = true;
    assert_true(p && o && g);
    s->live_timeout_s = live;
    s->shutdown_timeout_s = shut;
    s->deadline_s = dl;
}

/* Read by today's reader, written back byte for byte by today's writer. */
static void test_read_and_written_back_unchanged(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_FIXTURES; k++) {
        const struct fixture *fx = &fixtures[k];
        char text[HV_RECORD_MAX], again[HV_RECORD_MAX];
        read_fixture(fx->file, text, sizeof(text));
        struct hv_oprecord r;
        if (!hv_oprecord_read(&r, text))
            fail_msg("%s: not read", fx->file);
        assert_int_equal(r.phase, fx->phase);
        assert_non_null(strstr(text, "\"v\":1,"));
        char ph[64];
        snprintf(ph, sizeof(ph), "\"phase\":\"%s\"", hv_phase_name(fx->phase));
        assert_non_null(strstr(text, ph));
        assert_true(r.desired.memory_mib > 0 && r.desired.cpus > 0);
        assert_true(r.started_at > 0 && r.step_at > 0 && r.owner[0] && r.policy[0]);
        assert_true(r.ref.name[0]);
        assert_int_equal(r.phase == HV_PH_FAILED, fx->failed);
        if (fx->failed)
            assert_true(r.message[0]);
        assert_true(hv_oprecord_write(&r, again, sizeof(again)));
        if (strcmp(again, text))
            fail_msg("%s: written back differently:\n  v1: %s\n now: %s", fx->file, text, again);
    }
}

/* Finished by a driven engine of today, the next life of the process that wrote it. */
static void finish(const struct fixture *fx)
{
    char text[HV_RECORD_MAX];
    read_fixture(fx->file, text, sizeof(text));
    struct hv_oprecord r;
    assert_true(hv_oprecord_read(&r, text));
    memset(&V, 0, sizeof(V));
    V.on = fx->on;
    V.run = 1;
    V.config = r.desired;
    if (fx->cfg == PREV) { /* the fields the operation changes, as they were */
        if (r.prev.memory_mib > 0)
            V.config.memory_mib = r.prev.memory_mib;
        if (r.prev.cpus > 0)
            V.config.cpus = r.prev.cpus;
        if (r.prev.cores_per_socket > 0)
            V.config.cores_per_socket = r.prev.cores_per_socket;
    }
    snprintf(V.record, sizeof(V.record), "%s", text);

    char owner[128], host[96];
    snprintf(host, sizeof(host), "%s", r.owner);
    char *colon = strrchr(host, ':');
    assert_non_null(colon);
    *colon = '\0';
    snprintf(owner, sizeof(owner), "%s:99999", host);
    struct hv_engine_drive drive = {.mono_ms = d_mono, .unix_s = d_unix, .owner = owner};
    struct hv_engine_cfg cfg;
    hv_engine_cfg_default(&cfg);
    cfg.scan_interval_s = -1;
    cfg.drive = &drive;
    struct hv_backend *b = &fake_be;
    struct hv_engine *e = hv_engine_new(&cfg, &b, 1);
    assert_non_null(e);
    struct hv_settings s;
    settings_of(r.policy, &s);
    struct hv_vm_ref ref = r.ref; /* the calls name the VM as the record says they did */
    now_s = r.step_at + 2;

    struct hv_update_result res;
    int n = 0;
    for (;;) {
        hv_engine_reconcile(e, &fake_be, &ref, &r.desired, &s, &res);
        n++;
        if (res.failure || res.retry_after_s == 0 || n >= 300)
            break;
        now_s += res.retry_after_s;
    }
    print_message("%-20s %2d passes, %d steps, %d record writes: %s\n", fx->file, n, V.steps,
                  V.writes, res.message);
    struct hv_oprecord after;
    bool have = hv_oprecord_read(&after, V.record);
    if (fx->failed) {
        if (!res.failure)
            fail_msg("%s: no Failure after %d passes: %s", fx->file, n, res.message);
        assert_true(have);
        assert_int_equal(after.phase, HV_PH_FAILED);
        /* the sticky Failure as recorded (a rollback's note may follow what was done since) */
        size_t cut = strcspn(r.message, ";");
        if (strncmp(res.message, r.message, cut))
            fail_msg("%s: answered '%s', the record says '%s'", fx->file, res.message, r.message);
        if (!V.on)
            fail_msg("%s: the VM is left off", fx->file);
    } else {
        if (res.failure || strncmp(res.message, "done", 4))
            fail_msg("%s: not done after %d passes: %s", fx->file, n, res.message);
        assert_true(V.on);
        assert_int_equal(V.config.memory_mib, r.desired.memory_mib);
        assert_int_equal(V.config.cpus, r.desired.cpus);
        assert_true(have);
        assert_int_equal(after.phase, HV_PH_DONE);
        assert_int_equal(after.started_at, r.started_at); /* the same operation, finished */
    }
    hv_engine_free(e);
}

static void test_finished_by_todays_engine(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_FIXTURES; k++)
        finish(&fixtures[k]);
}

/* r written and read back into *back; the text in buf; whether it names key. */
static bool round_trip(const struct hv_oprecord *r, char *buf, struct hv_oprecord *back,
                       const char *key)
{
    assert_true(hv_oprecord_write(r, buf, HV_RECORD_MAX));
    assert_true(hv_oprecord_read(back, buf));
    return strstr(buf, key) != NULL;
}

/* An operation record in phase ph for desired, begun at 1800000000. */
static struct hv_oprecord record_in(enum hv_phase ph, struct hv_hw desired)
{
    struct hv_oprecord r;
    memset(&r, 0, sizeof(r));
    r.desired = desired;
    r.phase = ph;
    r.started_at = r.step_at = 1800000000;
    return r;
}

/* "triesOf" (added after v1): the live step the attempts of phase live are of, written only
 * with attempts, read back as written; a v1 record without it reads as not recorded (0, its
 * tries kept: pass_steps.c rc_step). */
static void test_tries_of_live_step_round_trip(void **state)
{
    (void)state;
    struct hv_oprecord r = record_in(HV_PH_LIVE, (struct hv_hw){2048, 2, -1, 12288}), back;
    r.attempts = 1;
    r.tries_of = HV_STEP_LIVE_MEMORY;
    char buf[HV_RECORD_MAX];
    assert_true(round_trip(&r, buf, &back, "\"triesOf\":\"live-memory\""));
    assert_int_equal(back.attempts, 1);
    assert_int_equal(back.tries_of, HV_STEP_LIVE_MEMORY);
    r.attempts = 0; /* no tries: nothing to name */
    assert_false(round_trip(&r, buf, &back, "triesOf"));
    assert_int_equal(back.tries_of, 0);
}

/* "bootAt" (added after v1): the engine's own power-on a guest was still booting from when
 * the operation began, written only when set, read back as written; a v1 record without it
 * reads as none (0). */
static void test_boot_at_round_trip(void **state)
{
    (void)state;
    struct hv_oprecord r = record_in(HV_PH_WAIT_LIVE, (struct hv_hw){2048, 3, -1, 12288}), back;
    r.boot_at = 1799999993;
    char buf[HV_RECORD_MAX];
    assert_true(round_trip(&r, buf, &back, "\"bootAt\":1799999993"));
    assert_int_equal(back.boot_at, 1799999993);
    r.boot_at = 0;
    assert_false(round_trip(&r, buf, &back, "bootAt"));
    assert_int_equal(back.boot_at, 0);
}

/* "offFirst" (added after v1): a TrySoft power-off that no shutdown came before, written only
 * in phase power-off, read back as written; a v1 record without it reads as not marked (a
 * TrySoft power-off taken to follow a shutdown that may still land: pass_paths.c
 * rc_cold_on_path), and a mark on another phase is neither written nor read. */
static void test_off_first_round_trip(void **state)
{
    (void)state;
    struct hv_oprecord r = record_in(HV_PH_POWER_OFF, (struct hv_hw){4096, 2, -1, 12288}), back;
    r.cold = true;
    r.off_first = true;
    char buf[HV_RECORD_MAX];
    assert_true(round_trip(&r, buf, &back, "\"offFirst\":true"));
    assert_true(back.off_first);
    r.off_first = false;
    assert_false(round_trip(&r, buf, &back, "offFirst"));
    assert_false(back.off_first);
    r = record_in(HV_PH_SHUTDOWN, (struct hv_hw){4096, 2, -1, 12288});
    r.cold = r.off_first = true;
    assert_false(round_trip(&r, buf, &back, "offFirst"));
    assert_false(back.off_first);
    /* a record that says it in another phase (hand-edited) is not read as marked */
    struct hv_oprecord odd;
    assert_true(hv_oprecord_write(&r, buf, sizeof(buf)));
    char *end = strrchr(buf, '}');
    assert_non_null(end);
    snprintf(end, sizeof(buf) - (size_t)(end - buf), ",\"offFirst\":true}");
    assert_true(hv_oprecord_read(&odd, buf));
    assert_int_equal(odd.phase, HV_PH_SHUTDOWN);
    assert_false(odd.off_first);
}

/* A record's text whose strings do not fit their fields (owner 96 bytes, message 512, plan
 * 48, ref disk 32, machine uid 64) is cut where a character begins, never inside one (1 or
 * 2 bytes into a 2-, 3- or 4-byte character): the
 * record read writes back as text that reads again, and the same text again (fuzz_oprecord's
 * find: an owner cut inside "\u00e9" wrote a record no reader took, so the operation it held
 * read as none on the next pass). */
static void test_fields_cut_inside_a_character_read_back(void **state)
{
    (void)state;
    char text[HV_RECORD_MAX], a94[95], m509[510], p45[46], d30[31], u62[63];
    memset(a94, 'a', 94), a94[94] = '\0';
    memset(m509, 'm', 509), m509[509] = '\0';
    memset(p45, 'p', 45), p45[45] = '\0';
    memset(d30, 'd', 30), d30[30] = '\0';
    memset(u62, 'u', 62), u62[62] = '\0';
    snprintf(text, sizeof(text),
             "{\"v\":1,\"desired\":{\"memoryMiB\":4096,\"cpus\":2,\"coresPerSocket\":1},"
             "\"phase\":\"failed\",\"plan\":{\"memory\":\"%s\xf0\x9f\x98\x80\"},"
             "\"owner\":\"%s\xc3\xa9\",\"message\":\"%s\xe2\x82\xac\","
             "\"ref\":{\"name\":\"vm1\",\"disk\":\"%s\xc3\xa9\"},"
             "\"machine\":{\"name\":\"m1\",\"uid\":\"%s\xc3\xa9\"}}",
             p45, a94, m509, d30, u62);
    struct hv_oprecord r, back;
    assert_true(hv_oprecord_read(&r, text));
    assert_string_equal(r.owner, a94);
    assert_string_equal(r.message, m509);
    assert_string_equal(r.plan[HV_F_MEMORY], p45);
    assert_string_equal(r.ref.disk, d30);
    assert_string_equal(r.ref.machine.uid, u62);
    char out1[HV_RECORD_MAX], out2[HV_RECORD_MAX];
    assert_true(hv_oprecord_write(&r, out1, sizeof(out1)));
    assert_true(hv_oprecord_read(&back, out1));
    assert_int_equal(back.phase, HV_PH_FAILED);
    assert_string_equal(back.owner, a94);
    assert_string_equal(back.message, m509);
    assert_string_equal(back.plan[HV_F_MEMORY], p45);
    assert_string_equal(back.ref.disk, d30);
    assert_string_equal(back.ref.machine.uid, u62);
    assert_true(hv_oprecord_write(&back, out2, sizeof(out2)));
    assert_string_equal(out1, out2);
    /* what the engine's own snprintf cut the same way is written without the broken tail */
    snprintf(r.message, sizeof(r.message), "%s\xe2\x82\xac", m509);
    assert_true(hv_oprecord_write(&r, out1, sizeof(out1)));
    assert_true(hv_oprecord_read(&back, out1));
    assert_string_equal(back.message, m509);
}

int main(void)
{
    hv_log_set_level(getenv("HV_TEST_LOG") ? HV_LOG_DEBUG : HV_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_and_written_back_unchanged),
        cmocka_unit_test(test_finished_by_todays_engine),
        cmocka_unit_test(test_tries_of_live_step_round_trip),
        cmocka_unit_test(test_boot_at_round_trip),
        cmocka_unit_test(test_off_first_round_trip),
        cmocka_unit_test(test_fields_cut_inside_a_character_read_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
