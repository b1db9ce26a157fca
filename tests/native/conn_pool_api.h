/* The corpus's connection pool (tests/scan_corpus/conn_pool.c) as its drivers see it. */
#ifndef CONN_POOL_API_H
#define CONN_POOL_API_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct conn {
    int fd;
    bool in_use;
    struct conn *next;
    unsigned long queries;
} conn_t;

typedef struct conn_pool {
    conn_t *idle;
    int max_conns;
    int n_busy;
    pthread_mutex_t lock;
    pthread_cond_t available;
} conn_pool_t;

conn_t *pool_checkout(conn_pool_t *pool);
void pool_checkin(conn_pool_t *pool, conn_t *c);
int conn_query(conn_t *c, const char *sql, char *out, size_t n);

#endif
