/* A circular redo log: writers reserve space; a checkpoint truncates the tail. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct redo_log {
    char *ring;
    uint64_t size;             /* capacity in bytes */
    uint64_t head;             /* next byte to write */
    uint64_t tail;             /* oldest byte still needed */
    pthread_mutex_t mutex;
    pthread_cond_t space;
} redo_log_t;

extern void request_checkpoint(redo_log_t *log);

/* Reserve n bytes at the head; waits for a checkpoint while the log is full. */
uint64_t log_reserve(redo_log_t *log, uint64_t n)
{
    pthread_mutex_lock(&log->mutex);
    while (log->head + n - log->tail > log->size) {
        request_checkpoint(log);
        pthread_cond_wait(&log->space, &log->mutex);
    }
    uint64_t lsn = log->head;
    log->head += n;
    pthread_mutex_unlock(&log->mutex);
    return lsn;
}

void log_append(redo_log_t *log, uint64_t lsn, const char *rec, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        log->ring[(lsn + i) % log->size] = rec[i];
}

/* Everything before lsn is checkpointed: truncate the tail. */
void log_truncate(redo_log_t *log, uint64_t lsn)
{
    pthread_mutex_lock(&log->mutex);
    if (lsn > log->tail)
        log->tail = lsn;
    pthread_cond_broadcast(&log->space);
    pthread_mutex_unlock(&log->mutex);
}
