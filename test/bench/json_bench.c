/* json_bench.c: what decoding one hook request costs, apart from TLS and HTTP.
 *
 * json_bench FILE [ITERATIONS]: times, per request body, (1) yajl alone with callbacks that
 * do nothing (the floor for any tree built on yajl), (2) hj_parse + hj_free on the heap,
 * (3) the same in a request arena as serve does, (4) hj_dump of the parsed tree. Prints
 * microseconds per call (best of 5 rounds, CLOCK_MONOTONIC) and MB/s. Figures only: nothing
 * is asserted; hook-bench.sh prints them beside the server's CPU per request. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_parse.h>

static int nothing(void *ctx)
{
    (void)ctx;
    return 1;
}

static int nothing_b(void *ctx, int b)
{
    (void)ctx;
    (void)b;
    return 1;
}

static int nothing_n(void *ctx, const char *s, size_t n)
{
    (void)ctx;
    (void)s;
    (void)n;
    return 1;
}

static int nothing_s(void *ctx, const unsigned char *s, size_t n)
{
    (void)ctx;
    (void)s;
    (void)n;
    return 1;
}

static const yajl_callbacks null_callbacks = {
    .yajl_null = nothing,
    .yajl_boolean = nothing_b,
    .yajl_number = nothing_n,
    .yajl_string = nothing_s,
    .yajl_start_map = nothing,
    .yajl_map_key = nothing_s,
    .yajl_end_map = nothing,
    .yajl_start_array = nothing,
    .yajl_end_array = nothing,
};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

enum mode { YAJL_ONLY, HEAP, ARENA, DUMP };

static void once(enum mode m, const char *buf, size_t len, const hj *tree)
{
    char err[200];
    if (m == YAJL_ONLY) {
        yajl_handle h = yajl_alloc(&null_callbacks, NULL, NULL);
        if (yajl_parse(h, (const unsigned char *)buf, len) != yajl_status_ok ||
            yajl_complete_parse(h) != yajl_status_ok) {
            fprintf(stderr, "json_bench: yajl refused the body\n");
            exit(1);
        }
        yajl_free(h);
    } else if (m == DUMP) {
        size_t n;
        free(hj_dump(tree, &n));
    } else {
        struct hj_arena a;
        if (m == ARENA)
            hj_arena_begin(&a);
        hj *v = hj_parse(buf, len, err, sizeof(err));
        if (!v) {
            fprintf(stderr, "json_bench: %s\n", err);
            exit(1);
        }
        hj_free(v);
        if (m == ARENA)
            hj_arena_end(&a);
    }
}

static double best_us(enum mode m, const char *buf, size_t len, const hj *tree, long iters)
{
    double best = 1e300;
    for (int round = 0; round < 5; round++) {
        double t0 = now_us();
        for (long i = 0; i < iters; i++)
            once(m, buf, len, tree);
        double per = (now_us() - t0) / (double)iters;
        if (per < best)
            best = per;
    }
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: json_bench FILE [ITERATIONS]\n");
        return 2;
    }
    long iters = argc > 2 ? strtol(argv[2], NULL, 10) : 5000;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t cap = 1 << 20, len;
    char *buf = malloc(cap);
    len = fread(buf, 1, cap, f);
    fclose(f);
    char err[200];
    hj *tree = hj_parse(buf, len, err, sizeof(err));
    if (!tree) {
        fprintf(stderr, "json_bench: %s\n", err);
        return 1;
    }
    static const char *const names[] = {"yajl alone (no tree)", "hj_parse+hj_free, heap",
                                        "hj_parse, request arena", "hj_dump"};
    printf("json decode of a %zu B hook request, %ld calls x best of 5 rounds\n", len, iters);
    for (int m = YAJL_ONLY; m <= DUMP; m++) {
        double us = best_us((enum mode)m, buf, len, tree, iters);
        printf("  %-26s %8.1f us/call %8.0f MB/s\n", names[m], us, (double)len / us);
    }
    hj_free(tree);
    free(buf);
    return 0;
}
