/* Forking under load, as pre-forking servers do: `fork_storm MODE CHILDREN EVENTS`.
 *
 * late:  the parent sleeps 300 ms (its writer waiting on its condition variable), forks
 *        CHILDREN children, and each emits EVENTS events.
 * storm: while a parent thread keeps emitting, the main thread fills its ring past half,
 *        waits until the writer has taken its records, and forks while the writer writes them
 *        out (with rings of 2^18 records, that takes long enough), CHILDREN times. Each child
 *        emits EVENTS events from two threads, and the first child forks a grandchild of its
 *        own that does the same.
 *
 * Events are ACQUIRE/RELEASE pairs of test.fork, object = the emitting process's number
 * (0 the parent, k the k-th child, 100 the grandchild) * 10^9 + a counter. Every process
 * exits 0 only if every child it waited for did. */
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

static int32_t res;
static long events;

static void emit(int64_t who, int64_t from, long n) {
    for (long i = 0; i < n / 2; i++) {
        gigi_acquire(res, who * 1000000000 + from + i, 1, -1);
        gigi_release(res, who * 1000000000 + from + i, 1, -1);
    }
}

typedef struct {
    int64_t who, from;
    long n;
} work_t;

static void *emit_thread(void *arg) {
    work_t *w = arg;
    emit(w->who, w->from, w->n);
    return NULL;
}

/* A child's work: EVENTS events from two threads, half each. */
static void child_work(int64_t who) {
    pthread_t th;
    work_t w = {who, 500000000, events / 2};
    pthread_create(&th, NULL, emit_thread, &w);
    emit(who, 0, events / 2);
    pthread_join(th, NULL);
}

static int wait_all(pid_t *pids, int n) {
    int ok = 1;
    for (int k = 0; k < n; k++) {
        int status = 0;
        if (waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            ok = 0;
    }
    return ok;
}

static _Atomic int stop_busy;

static void *busy_parent(void *arg) {
    (void)arg;
    struct timespec pause = {0, 1000000};
    for (int64_t i = 0; !atomic_load(&stop_busy); i += 1024) {
        emit(0, 900000000 + i, 1024);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "late";
    int children = argc > 2 ? atoi(argv[2]) : 1;
    events = argc > 3 ? atol(argv[3]) : 2000000;
    res = gigi_resource("test.fork", -1, "slots", "pool");
    pid_t pids[64];
    if (children > 64) children = 64;
    if (strcmp(mode, "late") == 0) {
        emit(0, 0, 100);
        struct timespec pause = {0, 300000000};
        nanosleep(&pause, NULL);
        for (int k = 0; k < children; k++) {
            pids[k] = fork();
            if (pids[k] == 0) {
                emit(k + 1, 0, events);
                return 0;
            }
        }
        return wait_all(pids, children) ? 0 : 1;
    }
    if (strcmp(mode, "storm") == 0) {
        pthread_t busy;
        pthread_create(&busy, NULL, busy_parent, NULL);
        /* the ring's half, where put() nudges the writer: gigi's default unless set */
        const char *rr = getenv("GIGI_RING_RECORDS");
        long half = (rr && atol(rr) > 0 ? atol(rr) : 16384) / 2;
        emit(0, 0, 2); /* this thread's ring, from here on */
        for (int k = 0; k < children; k++) {
            /* past half: the writer drains now; once it has taken this ring's records (the
             * tail moves), it is writing them out, and the fork comes in mid-flush */
            uint64_t tail = __atomic_load_n(&gigi_ring_mine_->tail, __ATOMIC_ACQUIRE);
            emit(0, (int64_t)k * 10000000, half + 2);
            for (long spins = 0; spins < 100000000; spins++)
                if (__atomic_load_n(&gigi_ring_mine_->tail, __ATOMIC_ACQUIRE) != tail) break;
            pids[k] = fork();
            if (pids[k] == 0) {
                int grandchild = k == 0;
                pid_t g = grandchild ? fork() : 0;
                if (grandchild && g == 0) {
                    child_work(100);
                    return 0;
                }
                child_work(k + 1);
                return grandchild && !wait_all(&g, 1) ? 1 : 0;
            }
        }
        int ok = wait_all(pids, children);
        atomic_store(&stop_busy, 1);
        pthread_join(busy, NULL);
        return ok ? 0 : 1;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
