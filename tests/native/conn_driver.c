/* Drives the corpus's connection pool (tests/scan_corpus/conn_pool.c, instrumented by the
 * test): THREADS clients share 2 connections, each running N queries as tasks of its own. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gigi_probe.h"
#include "conn_pool_api.h"

static conn_pool_t pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                           .available = PTHREAD_COND_INITIALIZER};
static conn_t conns[2];
static long n = 50;

int net_send(int fd, const char *sql) { return fd + (sql != NULL); }
int net_recv(int fd, char *buf, size_t len) {
    struct timespec t = {0, 200000}; /* the server takes 0.2 ms */
    nanosleep(&t, NULL);
    if (len) buf[0] = (char)fd;
    return 1;
}

static void *client(void *arg) {
    char out[16];
    for (long i = 0; i < n; i++) {
        int64_t t = gigi_task_begin("SELECT 1", 0);
        conn_t *c = pool_checkout(&pool);
        conn_query(c, "SELECT 1", out, sizeof out);
        pool_checkin(&pool, c);
        gigi_task_end(t);
    }
    (void)arg;
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 6;
    if (argc > 2) n = atol(argv[2]);
    for (int i = 0; i < 2; i++) {
        conns[i].fd = i + 3;
        conns[i].next = pool.idle;
        pool.idle = &conns[i];
    }
    pool.max_conns = 2;
    pthread_t th[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&th[i], NULL, client, NULL);
    for (int i = 0; i < threads && i < 64; i++) pthread_join(th[i], NULL);
    return 0;
}
