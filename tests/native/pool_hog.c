/* A pool of two slots served first come, first served; one "hog" task keeps a slot for
 * 1.5 s while seven worker threads run 150 short requests through the other. Written the way
 * a user instruments a program by hand: WAIT around the slow path, ACQUIRE / USE / RELEASE of
 * the slot taken, one task per request. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "gigi_probe.h"

enum { SLOTS = 2, WORKERS = 7, REQUESTS = 150 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int free_slots[SLOTS] = {1, 2};
static int nfree = SLOTS;
static long next_ticket, serving;
static int next_request;
static int32_t pool;

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, 0);
}

static int take(void) {
    pthread_mutex_lock(&mu);
    long ticket = next_ticket++;
    if (nfree == 0 || ticket != serving) {
        int64_t w = gigi_wait_begin(pool, 0, 1, 1);
        while (nfree == 0 || ticket != serving) pthread_cond_wait(&cv, &mu);
        gigi_wait_end(w);
    }
    serving++;
    int slot = free_slots[--nfree];
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    gigi_acquire(pool, slot, 1, 2);
    return slot;
}

static void give(int slot) {
    gigi_release(pool, slot, 1, 3);
    pthread_mutex_lock(&mu);
    free_slots[nfree++] = slot;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void *hog(void *arg) {
    (void)arg;
    int64_t t = gigi_task_begin("hog", 0);
    int slot = take();
    gigi_use(pool, slot, 1, 4);
    sleep_ms(1500);
    give(slot);
    gigi_task_end(t);
    return 0;
}

static void *worker(void *arg) {
    (void)arg;
    sleep_ms(20);
    for (;;) {
        pthread_mutex_lock(&mu);
        int n = next_request++;
        pthread_mutex_unlock(&mu);
        if (n >= REQUESTS) return 0;
        char name[32];
        snprintf(name, sizeof name, "request %d", n);
        int64_t t = gigi_task_begin(name, 0);
        int slot = take();
        gigi_use(pool, slot, 1, 4);
        sleep_ms(8);
        give(slot);
        gigi_task_end(t);
    }
}

int main(void) {
    pool = gigi_resource("app.pool", SLOTS, "slots", "pool");
    gigi_site(1, "pool_hog.c", 28, "take", GIGI_WAIT, "app.pool", "manual", 1);
    gigi_site(2, "pool_hog.c", 36, "take", GIGI_ACQUIRE, "app.pool", "manual", 1);
    gigi_site(3, "pool_hog.c", 41, "give", GIGI_RELEASE, "app.pool", "manual", 1);
    gigi_site(4, "pool_hog.c", 55, "hog", GIGI_USE, "app.pool", "manual", 1);
    pthread_t threads[WORKERS + 1];
    pthread_create(&threads[0], 0, hog, 0);
    for (int i = 1; i <= WORKERS; i++) pthread_create(&threads[i], 0, worker, 0);
    for (int i = 0; i <= WORKERS; i++) pthread_join(threads[i], 0);
    return 0;
}
