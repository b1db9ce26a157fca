/* A write-ahead log of fixed-size frames, as SQLite's WAL keeps one: appends advance the end
 * position in the log's header, and a checkpoint restarts the log at frame 0 once no reader
 * still reads it. Readers hold read locks, told apart by their index. A cursor over the log
 * has a frame position of its own that is not the log's end. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define NFRAME 4096
#define NREADER 4

typedef struct log_hdr {
    uint32_t change;    /* bumped by each commit */
    uint32_t max_frame; /* index of the last valid frame in the log */
} log_hdr;

typedef struct frame_log {
    pthread_mutex_t mutex;
    log_hdr hdr;                /* the header as of the current transaction */
    int read_locks[NREADER];    /* readers holding each read lock */
    char frames[NFRAME][64];    /* the frames, by index */
} frame_log;

typedef struct log_cursor {
    frame_log *log;
    uint32_t frame; /* the next frame this cursor reads */
} log_cursor;

/* Take read lock lock_idx: the log keeps every frame a reader holding it may read. */
int log_lock_shared(frame_log *log, int lock_idx) {
    pthread_mutex_lock(&log->mutex);
    log->read_locks[lock_idx]++;
    pthread_mutex_unlock(&log->mutex);
    return 0;
}

void log_unlock_shared(frame_log *log, int lock_idx) {
    pthread_mutex_lock(&log->mutex);
    log->read_locks[lock_idx]--;
    pthread_mutex_unlock(&log->mutex);
}

/* Append n frames of data; returns the index of the last one. */
uint32_t log_append(frame_log *log, const char *data, int n) {
    pthread_mutex_lock(&log->mutex);
    uint32_t frame = log->hdr.max_frame;
    for (int i = 0; i < n; i++) {
        frame++;
        memcpy(log->frames[frame % NFRAME], data + 64 * i, 64);
    }
    log->hdr.max_frame = frame;
    log->hdr.change++;
    pthread_mutex_unlock(&log->mutex);
    return frame;
}

/* Checkpoint: when no reader holds a read lock, the log starts again at frame 0. */
int log_restart(frame_log *log) {
    int restarted = 0;
    pthread_mutex_lock(&log->mutex);
    int readers = 0;
    for (int i = 0; i < NREADER; i++) readers += log->read_locks[i];
    if (readers == 0) {
        log->hdr.max_frame = 0;
        restarted = 1;
    }
    pthread_mutex_unlock(&log->mutex);
    return restarted;
}

/* The cursor's own position, reset and stepped: not the log's end. */
void cursor_rewind(log_cursor *c) { c->frame = 0; }

const char *cursor_next(log_cursor *c) {
    if (c->frame >= c->log->hdr.max_frame) return NULL;
    c->frame++;
    return c->log->frames[c->frame % NFRAME];
}
