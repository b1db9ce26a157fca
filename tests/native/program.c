/* A program the native-probe tests run: `program MODE [N]`. Every mode emits a known
 * sequence; the tests compare what the trace holds with it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gigi_probe.h"

static int32_t pool, log_;
static long n = 100;

/* Per request: a wait, then ACQUIRE, USE (with a value), RELEASE of object i, amount i % 3 + 1. */
static void requests(long first, long count) {
    for (long i = first; i < first + count; i++) {
        int64_t t = gigi_task_begin("request", 0);
        int64_t w = gigi_wait_begin(pool, i, i % 3 + 1, 10);
        gigi_wait_end(w);
        gigi_acquire(pool, i, i % 3 + 1, 11);
        gigi_event_value(GIGI_USE, pool, i, 1, 12, 1000 + i);
        gigi_release(pool, i, i % 3 + 1, -1);
        gigi_task_end(t);
    }
}

/* Planted mode: true sites 10-13 in a real lifecycle (a waiter behind a holder), and false
 * candidates 20-23 whose events fit no lifecycle. */
static _Atomic int held = 0, waiting = 0;

static void *waiter(void *arg) {
    (void)arg;
    int64_t t = gigi_task_begin("waiter", 0);
    while (!held) {
    }
    int64_t w = gigi_wait_begin(pool, 7, 1, 10);
    waiting = 1;
    while (held) {
    }
    gigi_wait_end(w);
    gigi_acquire(pool, 7, 1, 11);
    gigi_use(pool, 7, 1, 12);
    gigi_release(pool, 7, 1, 13);
    gigi_task_end(t);
    return NULL;
}

static void planted(void) {
    pthread_t th;
    pthread_create(&th, NULL, waiter, NULL);
    int64_t t = gigi_task_begin("holder", 0);
    gigi_acquire(pool, 7, 1, 11);
    held = 1;
    while (!waiting) { /* the holder lets go only once the waiter waits, however loaded the machine */
    }
    for (volatile long i = 0; i < 2000000; i++) {
    }
    gigi_use(pool, 7, 1, 12);
    gigi_release(pool, 7, 1, 13);
    held = 0;
    pthread_join(th, NULL);
    for (long i = 100; i < 110; i++) {
        gigi_acquire(pool, i, 1, 20);             /* a lookup: nothing is ever given back */
        gigi_release(log_, 5000 + i, 1, 21);      /* gives back what nobody took */
        gigi_acquire(pool, 200 + i, 1, 11);
        gigi_release(pool, 200 + i, 1, 13);
        gigi_use(pool, 200 + i, 1, 22);           /* after its own release */
        int64_t w = gigi_wait_begin(log_, 0, 1, 23); /* nobody holds the log */
        gigi_wait_end(w);
    }
    gigi_task_end(t);
}

/* Nested scopes, as gigi-query instrument writes them: one event per call path. */
static void take_inner(long obj) { /* a callee whose function opens no scope */
    gigi_scoped(GIGI_ACQUIRE, pool, obj, 1, 31, 0);
}
static void take_then_record(long obj) { /* the wrapper's site after the call */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_ACQUIRE);
    take_inner(obj);
    gigi_scoped(GIGI_ACQUIRE, pool, obj, 1, 30, s);
}
static void record_then_take(long obj) { /* the wrapper's site before the call */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_ACQUIRE);
    gigi_scoped(GIGI_ACQUIRE, pool, obj, 1, 32, s);
    take_inner(obj);
}
static void take_second_try(long obj, int again) { /* its site only on a second attempt */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_ACQUIRE);
    take_inner(obj);
    if (again) gigi_scoped(GIGI_ACQUIRE, pool, obj, 1, 30, s);
}
static void wrap_second_try(long obj) { /* a wrapper of that, its site after the call */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_ACQUIRE);
    take_second_try(obj, 0);
    gigi_scoped(GIGI_ACQUIRE, pool, obj, 1, 36, s);
}
static void give_inner(long obj) {
    gigi_scoped(GIGI_RELEASE, pool, obj, 1, 34, 0);
}
static void give_all(long first, int n, int own) { /* releases in a loop of callees */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_RELEASE);
    for (int i = 0; i < n; i++) give_inner(first + i);
    if (own) gigi_scoped(GIGI_RELEASE, pool, first, n, 33, s);
}
static void give_each(long first, int n) { /* its own release in a loop, no callee's */
    int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(pool, GIGI_RELEASE);
    for (int i = 0; i < n; i++) gigi_scoped(GIGI_RELEASE, pool, first + i, 1, 35, s);
}
static void scopes(void) {
    int64_t t = gigi_task_begin("scopes", 0);
    take_then_record(1);
    record_then_take(2);
    take_second_try(3, 0);
    wrap_second_try(4);
    give_all(10, 3, 1);
    give_all(15, 2, 0);
    give_each(20, 2);
    gigi_task_end(t);
}

static void *thread_main(void *arg) {
    long k = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%ld", k);
    pthread_setname_np(pthread_self(), name);
    requests(k * n, n);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (argc > 2) n = atol(argv[2]);
    pool = gigi_resource("test.pool", 8, "slots", "pool");
    log_ = gigi_resource("test.log", -1, "bytes", "log");
    gigi_site(10, "src/pool.c", 40, "pool_get", GIGI_WAIT, "test.pool", "heuristic", 1);
    gigi_site(11, "src/pool.c", 52, "pool_get", GIGI_ACQUIRE, "test.pool", "heuristic", 1);
    gigi_site(12, "src/pool.c", 60, "pool_use", GIGI_USE, "test.pool", "heuristic", 1);
    if (strcmp(mode, "basic") == 0) {
        int64_t job = gigi_task_begin("purge", 1);
        gigi_acquire(log_, 0, 4096, -1);
        requests(0, n); /* tasks started inside the purge job: its children */
        gigi_task_end(job);
        gigi_wait_begin(log_, 0, 1, -1); /* still waiting at exit */
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t th[4];
        for (long k = 0; k < 4; k++) pthread_create(&th[k], NULL, thread_main, (void *)k);
        for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
        printf("%llu\n", (unsigned long long)gigi_dropped());
    } else if (strcmp(mode, "killed") == 0) {
        requests(0, n);
        gigi_flush();
        printf("flushed\n");
        fflush(stdout);
        for (long i = n;; i++) requests(i, 1); /* until killed */
    } else if (strcmp(mode, "fork") == 0) {
        requests(0, n);
        pid_t child = fork();
        requests(child == 0 ? 1000000 : 2000000, n);
        if (child == 0) return 0;
        waitpid(child, NULL, 0);
    } else if (strcmp(mode, "scopes") == 0) {
        scopes();
    } else if (strcmp(mode, "planted") == 0) {
        planted();
    } else if (strcmp(mode, "clock") == 0) {
        /* a 50 ms wait, then events 20 ms apart: the trace's clock against the caller's */
        int64_t t = gigi_task_begin("sleeper", 0);
        int64_t w = gigi_wait_begin(pool, 1, 1, 10);
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        gigi_wait_end(w);
        for (int i = 0; i < 3; i++) {
            gigi_acquire(pool, 1, 1, 11);
            pause.tv_nsec = 20000000;
            nanosleep(&pause, NULL);
        }
        gigi_task_end(t);
    } else if (strcmp(mode, "enabled") == 0) {
        printf("%d\n", gigi_enabled_);
    }
    return 0;
}
