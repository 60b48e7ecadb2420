/* metrics.c: counters kept in fixed arrays of atomics (hooks x statuses, latency buckets)
 * plus a small mutex-guarded table for engine phases and steps, whose names are few and
 * fixed by the engine. Rendering takes a consistent-enough snapshot; no allocation on the
 * hot path. */
#include "metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define NB (sizeof(buckets) / sizeof(buckets[0]))

static atomic_ulong calls[HV_HOOK_COUNT][HV_CALL_STATUS_COUNT];
static atomic_ulong hist[HV_HOOK_COUNT][NB + 1];
static atomic_ulong hist_sum_us[HV_HOOK_COUNT];
static atomic_long inflight;
static atomic_ulong http_codes[6]; /* 200, 400, 404, 405, 413, other */
static atomic_ulong passes, record_writes, illegal_transitions, engine_assertions, engine_refused;
static atomic_ulong mc_reads, mc_verdicts[3];
static atomic_long passes_pending;

#define NAMED_MAX 64
struct named {
    char a[32], b[256];
    unsigned long count;
    double sum;
};
static struct named named_ops[NAMED_MAX], named_steps[NAMED_MAX], named_servers[NAMED_MAX];
static size_t n_ops, n_steps, n_servers;

/* Sticky failure reasons: the label of each code (enum hv_failure_reason). */
static const char *const reasons[HV_FAIL_COUNT] = {
    [HV_FAIL_STEP_FAILED] = "step_failed",
    [HV_FAIL_FIELD_NOT_CHANGEABLE] = "field_not_changeable",
    [HV_FAIL_SHUTDOWN_TIMEOUT] = "shutdown_timeout",
    [HV_FAIL_NOT_APPLIED_AFTER_POWER_CYCLE] = "not_applied_after_power_cycle",
    [HV_FAIL_POWERED_ON_EXTERNALLY] = "powered_on_externally",
    [HV_FAIL_NO_GUEST_TOOLS] = "no_guest_tools",
    [HV_FAIL_LIVE_CHANGE_NOT_SEEN] = "live_change_not_seen",
    [HV_FAIL_DEADLINE] = "deadline",
    [HV_FAIL_PAUSED_MID_CYCLE] = "paused_mid_cycle",
    [HV_FAIL_START_FAILED] = "start_failed",
    [HV_FAIL_DID_NOT_STAY_ON] = "did_not_stay_on",
    [HV_FAIL_POWER_CYCLE_NOT_ALLOWED] = "power_cycle_not_allowed",
    [HV_FAIL_OTHER] = "other",
};
#define N_REASONS HV_FAIL_COUNT
static atomic_ulong failures[N_REASONS];
static _Atomic(hv_metrics_gauge_fn) gauge_fn;
static _Atomic(void *) gauge_ctx;

/* Downstream extensions: at most 8 names x 4 hooks x 3 statuses, plus error kinds. */
#define DS_MAX 128
struct ds_count {
    char name[64], hook[24], label[16];
    unsigned long count;
    double sum;
};
static struct ds_count ds_calls[DS_MAX], ds_errors[DS_MAX];
static size_t n_ds_calls, n_ds_errors;
static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;

void hv_metrics_call_start(void)
{
    atomic_fetch_add(&inflight, 1);
}

void hv_metrics_call_end(enum hv_hook h, enum hv_call_status st, double seconds)
{
    atomic_fetch_sub(&inflight, 1);
    atomic_fetch_add(&calls[h][st], 1);
    size_t b = 0;
    while (b < NB && seconds > buckets[b])
        b++;
    atomic_fetch_add(&hist[h][b], 1);
    atomic_fetch_add(&hist_sum_us[h], (unsigned long)(seconds * 1e6));
}

void hv_metrics_http(int code)
{
    int i = code == 200   ? 0
            : code == 400 ? 1
            : code == 404 ? 2
            : code == 405 ? 3
            : code == 413 ? 4
                          : 5;
    atomic_fetch_add(&http_codes[i], 1);
}

static void named_add(struct named *t, size_t *n, const char *a, const char *b, double v,
                      unsigned long inc)
{
    pthread_mutex_lock(&named_lock);
    size_t k;
    for (k = 0; k < *n; k++)
        if (!strcmp(t[k].a, a) && !strcmp(t[k].b, b))
            break;
    if (k == *n && *n < NAMED_MAX) {
        snprintf(t[k].a, sizeof(t[k].a), "%s", a);
        snprintf(t[k].b, sizeof(t[k].b), "%s", b);
        (*n)++;
    }
    if (k < NAMED_MAX) {
        t[k].count += inc;
        t[k].sum += v;
    }
    pthread_mutex_unlock(&named_lock);
}

void hv_metrics_operation(const char *phase, const char *outcome)
{
    named_add(named_ops, &n_ops, phase, outcome, 0, 1);
}

void hv_metrics_pass(void)
{
    atomic_fetch_add(&passes, 1);
}

void hv_metrics_passes_pending(long delta)
{
    atomic_fetch_add(&passes_pending, delta);
}

void hv_metrics_record_write(void)
{
    atomic_fetch_add(&record_writes, 1);
}

void hv_metrics_engine_assertion(void)
{
    atomic_fetch_add(&engine_assertions, 1);
}

void hv_metrics_engine_refused(void)
{
    atomic_fetch_add(&engine_refused, 1);
}

void hv_metrics_illegal_transition(void)
{
    atomic_fetch_add(&illegal_transitions, 1);
}

void hv_metrics_machine_check_read(void)
{
    atomic_fetch_add(&mc_reads, 1);
}

void hv_metrics_machine_check(int verdict)
{
    if (verdict >= 0 && verdict < 3)
        atomic_fetch_add(&mc_verdicts[verdict], 1);
}

void hv_metrics_step(const char *step, double seconds)
{
    named_add(named_steps, &n_steps, step, "", seconds, 1);
}

static size_t reason_index(enum hv_failure_reason why)
{
    return why >= 0 && why < HV_FAIL_COUNT ? (size_t)why : (size_t)HV_FAIL_OTHER;
}

const char *hv_metrics_failure_reason(enum hv_failure_reason why)
{
    return reasons[reason_index(why)];
}

void hv_metrics_failure(enum hv_failure_reason why)
{
    atomic_fetch_add(&failures[reason_index(why)], 1);
}

void hv_metrics_register_server(const char *backend, const char *server)
{
    named_add(named_servers, &n_servers, backend, server, 0, 0);
}

void hv_metrics_backend_error(const char *backend, const char *server)
{
    named_add(named_servers, &n_servers, backend, server, 0, 1);
}

void hv_metrics_set_gauges(hv_metrics_gauge_fn fn, void *ctx)
{
    atomic_store(&gauge_ctx, ctx);
    atomic_store(&gauge_fn, fn);
}

static void ds_add(struct ds_count *t, size_t *n, const char *name, const char *hook,
                   const char *label, double v)
{
    size_t k;
    for (k = 0; k < *n; k++)
        if (!strcmp(t[k].name, name) && !strcmp(t[k].hook, hook) && !strcmp(t[k].label, label))
            break;
    if (k == *n && *n < DS_MAX) {
        snprintf(t[k].name, sizeof(t[k].name), "%s", name);
        snprintf(t[k].hook, sizeof(t[k].hook), "%s", hook);
        snprintf(t[k].label, sizeof(t[k].label), "%s", label);
        (*n)++;
    }
    if (k < DS_MAX) {
        t[k].count++;
        t[k].sum += v;
    }
}

void hv_metrics_downstream(const char *name, const char *hook, const char *status,
                           const char *error_kind, double seconds)
{
    pthread_mutex_lock(&named_lock);
    ds_add(ds_calls, &n_ds_calls, name, hook, status, seconds);
    if (error_kind)
        ds_add(ds_errors, &n_ds_errors, name, hook, error_kind, 0);
    pthread_mutex_unlock(&named_lock);
}

struct buf {
    char *p;
    size_t len, cap;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 0);
        char *np = realloc(b->p, b->cap);
        if (!np)
            abort();
        b->p = np;
    }
}

/* Seconds since the epoch at boot (/proc/stat btime), or -1. */
static long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "re");
    long long bt = -1;
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %lld", &bt) == 1)
            break;
    if (f)
        fclose(f);
    return bt;
}

/* A resource limit as Prometheus' Go client reports it (unlimited: 2^64 - 1 as a float). */
static double rlimit_value(int resource)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0)
        return -1;
    return rl.rlim_cur == RLIM_INFINITY ? 18446744073709551615.0 : (double)rl.rlim_cur;
}

/* One process_* series with its HELP and TYPE lines; %.17g keeps integers exact. */
static void process_metric(struct buf *b, const char *name, const char *type, const char *help,
                           double v)
{
    bprintf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* The standard process_* metrics (Prometheus' process collector, which controller-runtime
 * and CAPI's controllers export too), from /proc/self. A value that cannot be read is left
 * out rather than reported wrong. */
static void render_process(struct buf *b)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long long rss = 0;
    bool stat_ok = false;
    FILE *f = fopen("/proc/self/stat", "re");
    if (f) {
        char text[1024];
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        /* fields after the command name, which may hold spaces and parentheses: from the
         * last ')' on, field 3 (state) is first */
        const char *p = strrchr(text, ')');
        stat_ok = p && sscanf(p + 2,
                              "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
                              "%*d %*d %*d %llu %llu %lld",
                              &utime, &stime, &start, &vsize, &rss) == 5;
    }
    if (stat_ok && tick > 0)
        process_metric(b, "process_cpu_seconds_total", "counter",
                       "Total user and system CPU time spent in seconds.",
                       (double)(utime + stime) / (double)tick);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long open_fds = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                open_fds++;
        closedir(d);
        process_metric(b, "process_open_fds", "gauge", "Number of open file descriptors.",
                       (double)(open_fds - 1)); /* less the one opendir itself held */
    }
    double max_fds = rlimit_value(RLIMIT_NOFILE), max_vm = rlimit_value(RLIMIT_AS);
    if (max_fds >= 0)
        process_metric(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                       max_fds);
    if (!stat_ok)
        return;
    process_metric(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                   (double)vsize);
    if (max_vm >= 0)
        process_metric(b, "process_virtual_memory_max_bytes", "gauge",
                       "Maximum amount of virtual memory available in bytes.", max_vm);
    if (page > 0)
        process_metric(b, "process_resident_memory_bytes", "gauge",
                       "Resident memory size in bytes.", (double)rss * (double)page);
    long long bt = boot_time();
    if (bt >= 0 && tick > 0)
        process_metric(b, "process_start_time_seconds", "gauge",
                       "Start time of the process since unix epoch in seconds.",
                       (double)bt + (double)start / (double)tick);
}

char *hv_metrics_render(const char *extra, size_t *len_out)
{
    static const char *const st_names[] = {"Success", "Failure", "Error"};
    static const char *const codes[] = {"200", "400", "404", "405", "413", "other"};
    struct buf b = {malloc(8192), 0, 8192};
    if (!b.p)
        abort();
    bprintf(&b,
            "# HELP hvupdater_hook_calls_total Hook calls by hook and answer status "
            "(Error: answered with an HTTP error).\n# TYPE hvupdater_hook_calls_total counter\n");
    for (int h = 0; h < HV_HOOK_COUNT; h++)
        for (int s = 0; s < HV_CALL_STATUS_COUNT; s++)
            bprintf(&b, "hvupdater_hook_calls_total{hook=\"%s\",status=\"%s\"} %lu\n",
                    hv_hook_name((enum hv_hook)h), st_names[s], atomic_load(&calls[h][s]));
    bprintf(&b, "# HELP hvupdater_hook_duration_seconds Hook call latency.\n"
                "# TYPE hvupdater_hook_duration_seconds histogram\n");
    for (int h = 0; h < HV_HOOK_COUNT; h++) {
        unsigned long cum = 0;
        const char *hn = hv_hook_name((enum hv_hook)h);
        for (size_t k = 0; k <= NB; k++) {
            cum += atomic_load(&hist[h][k]);
            if (k < NB)
                bprintf(&b, "hvupdater_hook_duration_seconds_bucket{hook=\"%s\",le=\"%g\"} %lu\n",
                        hn, buckets[k], cum);
            else
                bprintf(&b,
                        "hvupdater_hook_duration_seconds_bucket{hook=\"%s\",le=\"+Inf\"} %lu\n"
                        "hvupdater_hook_duration_seconds_count{hook=\"%s\"} %lu\n",
                        hn, cum, hn, cum);
        }
        bprintf(&b, "hvupdater_hook_duration_seconds_sum{hook=\"%s\"} %.6f\n", hn,
                (double)atomic_load(&hist_sum_us[h]) / 1e6);
    }
    bprintf(&b,
            "# HELP hvupdater_hook_calls_in_flight Hook calls being answered now.\n"
            "# TYPE hvupdater_hook_calls_in_flight gauge\nhvupdater_hook_calls_in_flight %ld\n",
            atomic_load(&inflight));
    bprintf(&b, "# HELP hvupdater_http_responses_total HTTP responses by code.\n"
                "# TYPE hvupdater_http_responses_total counter\n");
    for (int k = 0; k < 6; k++)
        bprintf(&b, "hvupdater_http_responses_total{code=\"%s\"} %lu\n", codes[k],
                atomic_load(&http_codes[k]));
    bprintf(&b,
            "# HELP hvupdater_build_info The running build (always 1).\n"
            "# TYPE hvupdater_build_info gauge\n"
            "hvupdater_build_info{version=\"%s\",git=\"%s\"} 1\n",
            HV_VERSION, HV_GIT);
    int ops = 0, cycles = 0;
    hv_metrics_gauge_fn fn = atomic_load(&gauge_fn);
    if (fn)
        fn(atomic_load(&gauge_ctx), &ops, &cycles);
    bprintf(&b,
            "# HELP hvupdater_operations_in_progress VMs with an update in progress in this "
            "process.\n# TYPE hvupdater_operations_in_progress gauge\n"
            "hvupdater_operations_in_progress %d\n"
            "# HELP hvupdater_power_cycles_in_progress VMs powered off for an update by this "
            "process now (holding a power-cycle slot).\n"
            "# TYPE hvupdater_power_cycles_in_progress gauge\n"
            "hvupdater_power_cycles_in_progress %d\n",
            ops, cycles);
    bprintf(&b, "# HELP hvupdater_operation_failures_total Operations that ended in a sticky "
                "Failure, by stable reason.\n# TYPE hvupdater_operation_failures_total counter\n");
    for (size_t k = 0; k < N_REASONS; k++)
        bprintf(&b, "hvupdater_operation_failures_total{reason=\"%s\"} %lu\n", reasons[k],
                atomic_load(&failures[k]));
    bprintf(&b,
            "# HELP hvupdater_passes_total Engine passes run (observe, decide, at most a step).\n"
            "# TYPE hvupdater_passes_total counter\nhvupdater_passes_total %lu\n"
            "# HELP hvupdater_passes_pending Engine passes queued or running now.\n"
            "# TYPE hvupdater_passes_pending gauge\nhvupdater_passes_pending %ld\n"
            "# HELP hvupdater_record_writes_total Operation records written to VMs.\n"
            "# TYPE hvupdater_record_writes_total counter\nhvupdater_record_writes_total %lu\n"
            "# HELP hvupdater_engine_illegal_transitions_total Operation record phase moves "
            "outside the engine's table (a defect; carried out and logged).\n"
            "# TYPE hvupdater_engine_illegal_transitions_total counter\n"
            "hvupdater_engine_illegal_transitions_total %lu\n"
            "# HELP hvupdater_engine_assertions_total Engine invariants found broken (a "
            "defect; logged).\n"
            "# TYPE hvupdater_engine_assertions_total counter\n"
            "hvupdater_engine_assertions_total %lu\n"
            "# HELP hvupdater_engine_entries_refused_total Calls for a new VM refused (a "
            "retryable Failure) because the engine held engine.maxEntries VMs with work in "
            "flight.\n"
            "# TYPE hvupdater_engine_entries_refused_total counter\n"
            "hvupdater_engine_entries_refused_total %lu\n",
            atomic_load(&passes), atomic_load(&passes_pending), atomic_load(&record_writes),
            atomic_load(&illegal_transitions), atomic_load(&engine_assertions),
            atomic_load(&engine_refused));
    bprintf(&b,
            "# HELP hvupdater_machine_check_api_requests_total API server reads made by the "
            "machine check (kubernetes.checkMachines).\n"
            "# TYPE hvupdater_machine_check_api_requests_total counter\n"
            "hvupdater_machine_check_api_requests_total %lu\n"
            "# HELP hvupdater_machine_checks_total Hook calls checked against the API server, "
            "by verdict (wait: answered retry while the objects are read).\n"
            "# TYPE hvupdater_machine_checks_total counter\n"
            "hvupdater_machine_checks_total{verdict=\"pass\"} %lu\n"
            "hvupdater_machine_checks_total{verdict=\"wait\"} %lu\n"
            "hvupdater_machine_checks_total{verdict=\"fail\"} %lu\n",
            atomic_load(&mc_reads), atomic_load(&mc_verdicts[0]), atomic_load(&mc_verdicts[1]),
            atomic_load(&mc_verdicts[2]));
    pthread_mutex_lock(&named_lock);
    bprintf(&b, "# HELP hvupdater_backend_errors_total Failed hypervisor calls by backend and "
                "server (libvirt URI or vCenter name).\n"
                "# TYPE hvupdater_backend_errors_total counter\n");
    for (size_t k = 0; k < n_servers; k++) {
        char esc[520];
        size_t j = 0;
        for (const char *c = named_servers[k].b; *c && j + 2 < sizeof(esc); c++) {
            if (*c == '"' || *c == '\\')
                esc[j++] = '\\';
            esc[j++] = *c;
        }
        esc[j] = '\0';
        bprintf(&b, "hvupdater_backend_errors_total{backend=\"%s\",server=\"%s\"} %lu\n",
                named_servers[k].a, esc, named_servers[k].count);
    }
    bprintf(&b, "# HELP hvupdater_operations_total Engine operations by phase and outcome.\n"
                "# TYPE hvupdater_operations_total counter\n");
    for (size_t k = 0; k < n_ops; k++)
        bprintf(&b, "hvupdater_operations_total{phase=\"%s\",outcome=\"%s\"} %lu\n", named_ops[k].a,
                named_ops[k].b, named_ops[k].count);
    bprintf(&b, "# HELP hvupdater_step_duration_seconds Time spent in engine steps.\n"
                "# TYPE hvupdater_step_duration_seconds summary\n");
    for (size_t k = 0; k < n_steps; k++)
        bprintf(&b,
                "hvupdater_step_duration_seconds_count{step=\"%s\"} %lu\n"
                "hvupdater_step_duration_seconds_sum{step=\"%s\"} %.6f\n",
                named_steps[k].a, named_steps[k].count, named_steps[k].a, named_steps[k].sum);
    if (n_ds_calls) {
        bprintf(&b, "# HELP hvupdater_downstream_calls_total Calls to downstream extensions by "
                    "downstream, hook and answer status (Error: no usable answer).\n"
                    "# TYPE hvupdater_downstream_calls_total counter\n");
        for (size_t k = 0; k < n_ds_calls; k++)
            bprintf(&b,
                    "hvupdater_downstream_calls_total{downstream=\"%s\",hook=\"%s\","
                    "status=\"%s\"} %lu\n",
                    ds_calls[k].name, ds_calls[k].hook, ds_calls[k].label, ds_calls[k].count);
        bprintf(&b, "# HELP hvupdater_downstream_call_seconds_total Time spent calling downstream "
                    "extensions.\n# TYPE hvupdater_downstream_call_seconds_total counter\n");
        for (size_t k = 0; k < n_ds_calls; k++)
            bprintf(&b,
                    "hvupdater_downstream_call_seconds_total{downstream=\"%s\",hook=\"%s\","
                    "status=\"%s\"} %.6f\n",
                    ds_calls[k].name, ds_calls[k].hook, ds_calls[k].label, ds_calls[k].sum);
        bprintf(&b, "# HELP hvupdater_downstream_errors_total Downstream calls without a usable "
                    "answer, by downstream, hook and kind.\n"
                    "# TYPE hvupdater_downstream_errors_total counter\n");
        for (size_t k = 0; k < n_ds_errors; k++)
            bprintf(&b,
                    "hvupdater_downstream_errors_total{downstream=\"%s\",hook=\"%s\","
                    "kind=\"%s\"} %lu\n",
                    ds_errors[k].name, ds_errors[k].hook, ds_errors[k].label, ds_errors[k].count);
    }
    pthread_mutex_unlock(&named_lock);
    render_process(&b);
    if (extra)
        bprintf(&b, "%s", extra);
    *len_out = b.len;
    return b.p;
}
