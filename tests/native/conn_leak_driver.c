/* Drives the corpus's connection pool (tests/scan_corpus/conn_pool.c, instrumented by the
 * test) the way a small server core does: THREADS request threads share 12 backend
 * connections, each request a task of its own. A query that fails takes the error path, which
 * returns without checking the connection back in: the first 9 failures (a quarter of the way
 * in and after) lose 9 of the 12 connections, and every later request waits for the 3 left. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gigi_probe.h"
#include "conn_pool_api.h"

enum { CONNS = 12, LOST = 9 };
static conn_pool_t pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                           .available = PTHREAD_COND_INITIALIZER};
static conn_t conns[CONNS];
static long n = 60;
static long served, failures;
static pthread_mutex_t counts = PTHREAD_MUTEX_INITIALIZER;
static long total;

int net_send(int fd, const char *sql) { return fd + (sql != NULL); }
int net_recv(int fd, char *buf, size_t len) {
    struct timespec t = {0, 2000000}; /* the backend takes 2 ms */
    nanosleep(&t, NULL);
    if (len) buf[0] = (char)fd;
    pthread_mutex_lock(&counts);
    long k = ++served;
    /* from a quarter of the way in, every 15th query fails, until 9 have */
    bool fail = k > total / 4 && k % 15 == 0 && failures < LOST;
    if (fail) failures++;
    pthread_mutex_unlock(&counts);
    return fail ? -1 : 1;
}

static void *request_thread(void *arg) {
    char out[16], name[48];
    long id = (long)arg;
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "GET /items/%ld (thread %ld)", i, id);
        int64_t t = gigi_task_begin(name, 0);
        conn_t *c = pool_checkout(&pool);
        if (conn_query(c, "SELECT * FROM items WHERE id = $1", out, sizeof out) < 0) {
            gigi_task_end(t); /* the bug: the error path forgets pool_checkin */
            continue;
        }
        pool_checkin(&pool, c);
        gigi_task_end(t);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 16;
    if (argc > 2) n = atol(argv[2]);
    total = threads * n;
    for (int i = 0; i < CONNS; i++) {
        conns[i].fd = i + 3;
        conns[i].next = pool.idle;
        pool.idle = &conns[i];
    }
    pool.max_conns = CONNS;
    pthread_t th[64];
    for (long i = 0; i < threads && i < 64; i++)
        pthread_create(&th[i], NULL, request_thread, (void *)i);
    for (int i = 0; i < threads && i < 64; i++) pthread_join(th[i], NULL);
    printf("served %ld, lost %ld connections\n", served, failures);
    return 0;
}
