/* Per-event cost of the native probes against one clock_gettime(CLOCK_MONOTONIC) call, in
 * thread CPU time: THREADS threads each run N iterations of WORK steps of arithmetic followed
 * by nothing ("work"), a clock_gettime ("clock") or a USE probe ("probe"). The cost of a call
 * is its mode's time per iteration less the "work" mode's. Run by bench/native_cost.py.
 *
 *     cost THREADS N WORK MODE     prints: ns-per-iteration events-dropped */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gigi_probe.h"

static long n, work;
static int mode; /* 0 work, 1 clock, 2 probe */
static int32_t rid;
static volatile uint64_t sink;

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *loop(void *out) {
    uint64_t x = (uint64_t)(uintptr_t)out;
    gigi_task_current(); /* the thread's ring is set up before the clock starts */
    double t0 = cpu_ns();
    for (long i = 0; i < n; i++) {
        for (long w = 0; w < work; w++) x = x * 6364136223846793005u + 1442695040888963407u;
        if (mode == 1) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            x += (uint64_t)t.tv_nsec;
        } else if (mode == 2) {
            gigi_use(rid, (int64_t)(i & 1023), 1, 7);
        }
    }
    sink += x;
    *(double *)out = (cpu_ns() - t0) / n;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: cost THREADS N WORK work|clock|probe\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    n = atol(argv[2]);
    work = atol(argv[3]);
    mode = strcmp(argv[4], "clock") == 0 ? 1 : strcmp(argv[4], "probe") == 0 ? 2 : 0;
    rid = gigi_resource("bench.pool", 1024, "slots", "pool");
    pthread_t th[64];
    double per[64], sum = 0;
    if (threads < 1 || threads > 64) return 2;
    for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, loop, &per[i]);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL), sum += per[i];
    printf("%.3f %llu\n", sum / threads, (unsigned long long)gigi_dropped());
    return 0;
}
