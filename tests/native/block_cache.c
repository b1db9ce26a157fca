/* A cache of disk blocks for the scanner's branch WAITs: a block the cache does not hold is
 * read from disk into the least recently used slot (the slow path of a miss, a branch and not
 * a loop), while a flush writes dirty blocks on an ordinary branch of its walk. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define BLOCK_SIZE 4096

typedef struct block {
    uint64_t block_no;
    int refs;
    int dirty;
    struct block *lru_prev, *lru_next;
    char data[BLOCK_SIZE];
} block_t;

/* The cache: blocks handed out to readers, the least recently used one reused on a miss. */
typedef struct block_cache {
    block_t *blocks;
    size_t max_blocks;
    size_t n_used;
    block_t *lru_head, *lru_tail;
    pthread_mutex_t mutex;
} block_cache_t;

extern int disk_read_block(uint64_t block_no, char *buf);
extern int disk_write_block(uint64_t block_no, const char *buf);

static block_t *bc_find(block_cache_t *bc, uint64_t block_no)
{
    for (size_t i = 0; i < bc->n_used; i++) {
        if (bc->blocks[i].block_no == block_no)
            return &bc->blocks[i];
    }
    return NULL;
}

/* Pin the block, reading it from disk when the cache does not hold it. */
block_t *bc_get(block_cache_t *bc, uint64_t block_no)
{
    pthread_mutex_lock(&bc->mutex);
    block_t *b = bc_find(bc, block_no);
    if (b == NULL) {
        b = bc->lru_tail;
        bc->lru_tail = b->lru_prev;
        b->block_no = block_no;
        disk_read_block(block_no, b->data);
    }
    b->refs++;
    pthread_mutex_unlock(&bc->mutex);
    return b;
}

void bc_put(block_cache_t *bc, block_t *b)
{
    pthread_mutex_lock(&bc->mutex);
    b->refs--;
    pthread_mutex_unlock(&bc->mutex);
}

/* Write every dirty block back: I/O on a branch, but the cache's own work, not a wait. */
void bc_flush(block_cache_t *bc)
{
    pthread_mutex_lock(&bc->mutex);
    for (size_t i = 0; i < bc->n_used; i++) {
        block_t *b = &bc->blocks[i];
        if (b->dirty) {
            disk_write_block(b->block_no, b->data);
            b->dirty = 0;
        }
    }
    pthread_mutex_unlock(&bc->mutex);
}
