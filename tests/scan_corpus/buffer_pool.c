/* A page buffer pool: fixed frames, a free list, an LRU for eviction, pins per frame. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PAGE_SIZE 4096

typedef struct frame {
    uint64_t page_no;
    int pin_count;
    int dirty;
    struct frame *next_free;   /* free list link */
    struct frame *lru_prev, *lru_next;
    char data[PAGE_SIZE];
} frame_t;

/* The buffer pool: frames handed out to readers, evicted in LRU order when none is free. */
typedef struct buf_pool {
    frame_t *frames;
    size_t capacity;           /* number of frames */
    size_t n_free;
    frame_t *free_list;
    frame_t *lru_head, *lru_tail;
    pthread_mutex_t mutex;
    pthread_cond_t frame_freed;
} buf_pool_t;

extern int disk_read(uint64_t page_no, char *buf);
extern int disk_write(uint64_t page_no, const char *buf);

static frame_t *bp_lookup(buf_pool_t *bp, uint64_t page_no)
{
    for (size_t i = 0; i < bp->capacity; i++) {
        if (bp->frames[i].page_no == page_no && bp->frames[i].pin_count >= 0)
            return &bp->frames[i];
    }
    return NULL;
}

static frame_t *bp_evict_one(buf_pool_t *bp)
{
    for (frame_t *f = bp->lru_tail; f != NULL; f = f->lru_prev) {
        if (f->pin_count == 0) {
            if (f->dirty)
                disk_write(f->page_no, f->data);
            f->dirty = 0;
            return f;
        }
    }
    return NULL;
}

/* Pin the frame holding page_no, reading it in if needed. */
frame_t *bp_get_page(buf_pool_t *bp, uint64_t page_no)
{
    pthread_mutex_lock(&bp->mutex);
    frame_t *f = bp_lookup(bp, page_no);
    if (f == NULL) {
        while (bp->free_list == NULL && (f = bp_evict_one(bp)) == NULL)
            pthread_cond_wait(&bp->frame_freed, &bp->mutex);
        if (f == NULL) {
            f = bp->free_list;
            bp->free_list = f->next_free;
            bp->n_free--;
        }
        f->page_no = page_no;
        disk_read(page_no, f->data);
    }
    f->pin_count++;
    pthread_mutex_unlock(&bp->mutex);
    return f;
}

/* Unpin a frame; an unpinned frame goes back to the free list. */
void bp_release_page(buf_pool_t *bp, frame_t *f)
{
    pthread_mutex_lock(&bp->mutex);
    f->pin_count--;
    if (f->pin_count == 0) {
        f->next_free = bp->free_list;
        bp->free_list = f;
        bp->n_free++;
        pthread_cond_signal(&bp->frame_freed);
    }
    pthread_mutex_unlock(&bp->mutex);
}

size_t bp_read(buf_pool_t *bp, frame_t *f, size_t off, char *out, size_t n)
{
    (void)bp;
    if (off + n > PAGE_SIZE)
        n = PAGE_SIZE - off;
    memcpy(out, f->data + off, n);
    return n;
}

void bp_write(frame_t *f, size_t off, const char *in, size_t n)
{
    memcpy(f->data + off, in, n);
    f->dirty = 1;
}

size_t bp_free_frames(const buf_pool_t *bp)
{
    return bp->n_free;
}
