/* A scoreboard of worker slots: a request claims a free slot and runs in it. */
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

#define MAX_WORKERS 64

typedef struct slot {
    atomic_int busy;
    int request_id;
    long served;
} slot_t;

typedef struct scoreboard {
    slot_t slots[MAX_WORKERS];
    int n_slots;
} scoreboard_t;

slot_t *slot_claim(scoreboard_t *sb, int request_id)
{
    for (;;) {
        for (int i = 0; i < sb->n_slots; i++) {
            int expected = 0;
            if (atomic_compare_exchange_strong(&sb->slots[i].busy, &expected, 1)) {
                sb->slots[i].request_id = request_id;
                return &sb->slots[i];
            }
        }
        usleep(1000); /* every slot is busy: back off and retry */
    }
}

void slot_run(slot_t *s, void (*handler)(int))
{
    handler(s->request_id);
    s->served++;
}

void slot_free(slot_t *s)
{
    s->request_id = -1;
    atomic_store(&s->busy, 0);
}
