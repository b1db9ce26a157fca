/* A database connection pool: checkout blocks until a connection is free. */
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
    conn_t *idle;              /* idle connections */
    int max_conns;
    int n_busy;
    pthread_mutex_t lock;
    pthread_cond_t available;
} conn_pool_t;

extern int net_send(int fd, const char *sql);
extern int net_recv(int fd, char *buf, size_t n);

conn_t *pool_checkout(conn_pool_t *pool)
{
    pthread_mutex_lock(&pool->lock);
    while (pool->idle == NULL)
        pthread_cond_wait(&pool->available, &pool->lock);
    conn_t *c = pool->idle;
    pool->idle = c->next;
    c->in_use = true;
    pool->n_busy++;
    pthread_mutex_unlock(&pool->lock);
    return c;
}

void pool_checkin(conn_pool_t *pool, conn_t *c)
{
    pthread_mutex_lock(&pool->lock);
    c->in_use = false;
    c->next = pool->idle;
    pool->idle = c;
    pool->n_busy--;
    pthread_cond_signal(&pool->available);
    pthread_mutex_unlock(&pool->lock);
}

int conn_query(conn_t *c, const char *sql, char *out, size_t n)
{
    c->queries++;
    if (net_send(c->fd, sql) < 0)
        return -1;
    return net_recv(c->fd, out, n);
}

int pool_busy(conn_pool_t *pool)
{
    return pool->n_busy;
}
