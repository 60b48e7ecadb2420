/* sim_main.c: run the simulation over a range of seeds (the CI runner, ctest sim.seeds) or
 * one seed with its trace. Exit status 1 when any run breaks an invariant; every broken run
 * prints its seed, the invariant and its step history.
 *   sim_main [--from N] [--seeds COUNT] [--steps N] [--seed N --trace] [--quiet] */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct sim_opts o;
    sim_opts_default(&o);
    uint64_t from = 1, count = 100;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(a, "--from") && v) {
            from = strtoull(v, NULL, 10);
            k++;
        } else if (!strcmp(a, "--seeds") && v) {
            count = strtoull(v, NULL, 10);
            k++;
        } else if (!strcmp(a, "--seed") && v) {
            from = strtoull(v, NULL, 10);
            count = 1;
            k++;
        } else if (!strcmp(a, "--steps") && v) {
            o.steps = atoi(v);
            k++;
        } else if (!strcmp(a, "--trace")) {
            o.trace = true;
        } else if (!strcmp(a, "--strict")) {
            o.strict = true;
        } else if (!strcmp(a, "--quiet")) {
            o.quiet = true;
        } else {
            fprintf(stderr,
                    "usage: %s [--from N] [--seeds COUNT] [--steps N] [--seed N] "
                    "[--trace] [--quiet]\n",
                    argv[0]);
            return 2;
        }
    }
    double t0 = now_s();
    long steps = 0, checks = 0, calls = 0, passes = 0, faults = 0, dones = 0, fails = 0;
    int broken = 0, known_runs = 0;
    for (uint64_t seed = from; seed < from + count; seed++) {
        struct sim_result r;
        o.seed = seed;
        if (!sim_run(&o, &r)) {
            broken++;
            printf("seed %llu: %s broken at step %d: %s\n", (unsigned long long)seed,
                   sim_inv_name(r.broken), r.broken_step, r.why);
        }
        if (r.known) {
            known_runs++;
            if (o.trace || count <= 20)
                printf("seed %llu: known: %s\n", (unsigned long long)seed, r.known_what);
        }
        steps += r.steps;
        checks += r.checks;
        calls += r.calls;
        passes += r.passes;
        faults += r.faults;
        dones += r.dones;
        fails += r.failures;
    }
    double dt = now_s() - t0;
    printf(
        "sim: %llu runs, %ld steps, %ld invariant checks, %ld hook calls (%ld done, %ld "
        "Failure), %ld engine passes, %ld faults; %d runs broke an invariant, %d runs met a known "
        "open issue; %.2f s (%.0f steps/s)\n",
        (unsigned long long)count, steps, checks, calls, dones, fails, passes, faults, broken,
        known_runs, dt, dt > 0 ? (double)steps / dt : 0.0);
    return broken ? 1 : 0;
}
