/* A program the perf tests run under `perf record -k mono -g`: a compaction task holds
 * app.table_lock while it burns CPU in compact_everything(), and two request tasks wait for the
 * lock meanwhile (blocked in pthread_mutex_lock, so they take no CPU). Built with
 * -g -fno-omit-frame-pointer so that perf's frame-pointer stacks name the functions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gigi_probe.h"

static int32_t lock_rid;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int held = 0, waiting = 0;
static long rounds = 200000000L;
static volatile double sink;

__attribute__((noinline)) void compact_everything(void) {
    double x = 0;
    for (long i = 0; i < rounds; i++) x += (double)(i ^ (i >> 3)) * 0.5;
    sink = x;
}

static void *request(void *arg) {
    int64_t task = gigi_task_begin("flush request", 0);
    while (!held) sched_yield();
    int64_t w = gigi_wait_begin(lock_rid, 0, 1, -1);
    atomic_fetch_add(&waiting, 1);
    pthread_mutex_lock(&table_lock); /* blocks while the compaction holds the lock */
    gigi_wait_end(w);
    gigi_acquire(lock_rid, 0, 1, -1);
    gigi_use(lock_rid, 0, 1, -1);
    gigi_release(lock_rid, 0, 1, -1);
    pthread_mutex_unlock(&table_lock);
    gigi_task_end(task);
    return arg;
}

__attribute__((noinline)) static void run_compaction(void) {
    int64_t task = gigi_task_begin("compaction", 1);
    pthread_mutex_lock(&table_lock);
    gigi_acquire(lock_rid, 0, 1, -1);
    held = 1;
    while (waiting < 2) sched_yield(); /* both requests wait before the work starts */
    compact_everything();
    gigi_release(lock_rid, 0, 1, -1);
    pthread_mutex_unlock(&table_lock);
    gigi_task_end(task);
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    lock_rid = gigi_resource("app.table_lock", 1, "locks", "exclusive");
    pthread_t th[2];
    for (long k = 0; k < 2; k++) pthread_create(&th[k], NULL, request, (void *)k);
    run_compaction();
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    return 0;
}
