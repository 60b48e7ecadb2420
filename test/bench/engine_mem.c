/* engine_mem.c: memory of the UpdateMachine engine for many distinct VMs. Sends
 * UpdateMachine and CanUpdateMachine (powerCycle Never) through the engine's hook entry
 * points for N distinct VM names (default 1,000,000; none exists) against libvirt's
 * in-process test:///default driver, and prints RSS when idle, its peak, and after the idle
 * entries were evicted. The table holds at most max-entries (engine.maxEntries; default the
 * engine's, 10,000); calls refused over it are counted. A benchmark: it prints figures and
 * asserts nothing.
 * Usage: bench_engine_mem [N] [idle-ms] [max-entries] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "libvirt_backend.h"
#include "log.h"

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n))
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int idle_ms = argc > 2 ? atoi(argv[2]) : 2000;
    int max_entries = argc > 3 ? atoi(argv[3]) : 0;
    hv_log_set_level(HV_LOG_ERROR);
    const char *uris[] = {"test:///default"};
    struct hv_libvirt_opts o = {.uris = uris, .n_uris = 1};
    char err[256];
    struct hv_backend *be = hv_libvirt_new(&o, err, sizeof(err));
    if (!be) {
        fprintf(stderr, "bench_engine_mem: %s\n", err);
        return 1;
    }
    struct hv_engine_cfg c;
    hv_engine_cfg_default(&c);
    c.entry_idle_ms = idle_ms;
    if (max_entries > 0)
        c.max_entries = max_entries;
    struct hv_engine *e = hv_engine_new(&c, &be, 1);
    struct hv_profile p;
    memset(&p, 0, sizeof(p));
    snprintf(p.backend, sizeof(p.backend), "libvirt");
    struct hv_settings s;
    hv_settings_default(&s);
    struct hv_hw want = {2048, 2, -1, -1};
    /* warm up the connection and the allocator, then measure idle */
    struct hv_vm_ref ref;
    memset(&ref, 0, sizeof(ref));
    struct hv_update_result r;
    struct hv_field_plan plan[HV_F_COUNT];
    char why[300];
    snprintf(ref.name, sizeof(ref.name), "bench-warmup");
    hv_engine_update(e, &p, &ref, &want, &s, &r);
    hv_engine_probe(e, &p, &ref, &want, &s, plan, why, sizeof(why));
    while (hv_engine_entries(e) > 0) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long idle = status_kib("VmRSS:");
    printf("engine memory, %ld distinct VM names (UpdateMachine + CanUpdateMachine Never), "
           "entries evicted after %d ms idle, at most %d held\n",
           n, idle_ms, max_entries > 0 ? max_entries : HV_ENGINE_MAX_ENTRIES);
    printf("RSS idle:            %8.1f MiB\n", idle / 1024.0);
    double t0 = now_s();
    size_t most = 0;
    for (long k = 0; k < n; k++) {
        snprintf(ref.name, sizeof(ref.name), "bench-vm-%ld", k);
        hv_engine_update(e, &p, &ref, &want, &s, &r);
        snprintf(ref.name, sizeof(ref.name), "bench-probe-%ld", k);
        hv_engine_probe(e, &p, &ref, &want, &s, plan, why, sizeof(why));
        if (k % 10000 == 9999) {
            size_t held = hv_engine_entries(e);
            most = held > most ? held : most;
            printf("  %7ld calls each: %zu entries held, RSS %.1f MiB (%.1f s)\n", k + 1, held,
                   status_kib("VmRSS:") / 1024.0, now_s() - t0);
            fflush(stdout);
        }
    }
    double t1 = now_s();
    long peak = status_kib("VmHWM:");
    size_t left;
    while ((left = hv_engine_entries(e)) > 0) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long after = status_kib("VmRSS:");
    printf("calls:               %ld UpdateMachine + %ld CanUpdateMachine in %.1f s "
           "(%.1f us per pair)\n",
           n, n, t1 - t0, (t1 - t0) * 1e6 / (double)(n ? n : 1));
    printf("entries held:        at most %zu at a checkpoint\n", most);
    printf("calls refused:       %llu (table full of VMs with work in flight)\n",
           (unsigned long long)hv_engine_refused(e));
    printf("RSS peak:            %8.1f MiB\n", peak / 1024.0);
    printf("RSS after eviction:  %8.1f MiB (%+.1f MiB from idle; target within 8 MiB)\n",
           after / 1024.0, (after - idle) / 1024.0);
    hv_engine_free(e);
    be->ops->free(be);
    return 0;
}
