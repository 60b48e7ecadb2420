/* sim_bench.c: the deterministic simulation at length (issue 18): runs seeds from --from on,
 * --run-steps steps each, until --steps steps have run, and prints steps per second, the
 * invariant checks made and every seed that broke an invariant (each replayable with
 * sim_main --seed N --steps M --trace). Breaks an open issue already names are counted apart.
 *   sim_bench [--steps 1000000] [--run-steps 1000] [--from 1000001] [--strict] */
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
    long total = 1000000;
    struct sim_opts o;
    sim_opts_default(&o);
    o.steps = 1000;
    o.quiet = true;
    uint64_t seed = 1000001;
    for (int k = 1; k < argc; k++) {
        const char *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(argv[k], "--steps") && v) {
            total = atol(v);
            k++;
        } else if (!strcmp(argv[k], "--run-steps") && v) {
            o.steps = atoi(v);
            k++;
        } else if (!strcmp(argv[k], "--from") && v) {
            seed = strtoull(v, NULL, 10);
            k++;
        } else if (!strcmp(argv[k], "--strict")) {
            o.strict = true;
        } else {
            fprintf(stderr, "usage: %s [--steps N] [--run-steps N] [--from SEED] [--strict]\n",
                    argv[0]);
            return 2;
        }
    }
    long steps = 0, checks = 0, runs = 0, known = 0, broken = 0;
    long per_inv[INV_COUNT] = {0};
    long judged = 0, excused[SIM_CAUSES] = {0}, done_excused = 0;
    double t0 = now_s();
    for (; steps < total; seed++, runs++) {
        struct sim_result r;
        o.seed = seed;
        if (!sim_run(&o, &r)) {
            broken++;
            per_inv[r.broken]++;
            printf("failing seed %llu (--steps %d): %s at step %d: %.200s\n",
                   (unsigned long long)seed, o.steps, sim_inv_name(r.broken), r.broken_step, r.why);
        }
        known += r.known > 0;
        judged += r.fail_judged;
        for (int k = 0; k < SIM_CAUSES; k++)
            excused[k] += r.fail_excused[k];
        done_excused += r.done_excused;
        steps += r.steps;
        checks += r.checks;
    }
    double dt = now_s() - t0;
    printf("sim-bench: %ld steps in %ld runs (%d steps each, seeds %llu..%llu), %.1f s, %.0f "
           "steps/s, %ld invariant checks; failing seeds: %ld",
           steps, runs, o.steps, (unsigned long long)(seed - (uint64_t)runs),
           (unsigned long long)(seed - 1), dt, dt > 0 ? (double)steps / dt : 0.0, checks, broken);
    for (int i = 1; i < INV_COUNT; i++)
        if (per_inv[i])
            printf(" %s %ld", sim_inv_name((enum sim_inv)i), per_inv[i]);
    printf("; runs meeting a known open issue: %ld\n", known);
    printf("sim-bench: Failures: %ld judged; excused by cause:", judged);
    for (int k = 0; k < SIM_CAUSES; k++)
        printf(" %s %ld%s", sim_cause_name(k), excused[k], k + 1 < SIM_CAUSES ? "," : "\n");
    printf("sim-bench: dones the VM did not show, excused (A -> B -> A mid-update served "
           "elsewhere): %ld\n",
           done_excused);
    return broken ? 1 : 0;
}
