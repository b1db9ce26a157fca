"""Each verification rule of the scan (gigi/scan/_rules) on a small C snippet: what the scan
keeps with the rule, against what it keeps with every other rule but that one. A rule whose
difference is empty here does nothing, and fails its test."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from test_scan import ALLOCATOR, CORPUS, LOCK_API, USED_SET, WRAPPERS

from gigi.scan import scan
from gigi.scan._rules import RULES

PAGE = """
#include <stddef.h>
typedef struct page { int pgno; int nref; struct page *next_free; char data[4096]; } page_t;

/* A page cache: a fixed set of pages, handed out pinned, kept by number. */
typedef struct pcache {
    page_t *pages; int capacity; page_t *free_list; int n_free; int n_pinned;
} pcache_t;

/* A pager: reads pages of the file into its cache. */
typedef struct pager { pcache_t *cache; int fd; int n_read; } pager_t;

/* Pin the cached page PGNO, or NULL when it is not cached. */
page_t *pcache_fetch(pcache_t *c, int pgno)
{
    for (int i = 0; i < c->capacity; i++) {
        if (c->pages[i].pgno == pgno) {
            c->pages[i].nref++;
            c->n_pinned++;
            return &c->pages[i];
        }
    }
    return NULL;
}
"""

MISS = """
extern int read_page(int fd, int pgno, char *buf);

/* Read page PGNO through the cache: a miss reads it from the file. */
page_t *pager_get(pager_t *p, int pgno)
{
    page_t *pg = pcache_fetch(p->cache, pgno);
    if (pg == NULL) {
        pg = p->cache->free_list;
        p->cache->free_list = pg->next_free;
        read_page(p->fd, pgno, pg->data);
        p->n_read++;
    }
    return pg;
}
"""

RETRY = """
extern void sched_yield(void);
extern void *lookup_cache(const char *name);

/* The pager's: it polls until the page is cached, and pins it. */
page_t *pager_wait_page(pager_t *p, int pgno)
{
    page_t *pg;
    while ((pg = pcache_fetch(p->cache, pgno)) == NULL)
        sched_yield();
    return pg;
}

/* No resource's: it only waits for a page to be cached. */
void warm_page(const char *name, int pgno)
{
    while (pcache_fetch(lookup_cache(name), pgno) == NULL)
        sched_yield();
}
"""

RECLAIM = """
extern void reclaim_pages(pcache_t *c);

/* no sleep, no I/O by name: it makes room and tries again when the cache gave nothing */
page_t *pager_fetch_or_reclaim(pager_t *p, int pgno)
{
    page_t *pg = NULL;
    for (int i = 0; i < 3; i++) {
        pg = pcache_fetch(p->cache, pgno);
        if (pg == NULL)
            reclaim_pages(p->cache);
        else
            break;
    }
    return pg;
}

/* not a retry: one fetch for each of many pages, nothing made of a miss */
int pager_count_cached(pager_t *p, int n)
{
    int cached = 0;
    for (int i = 0; i < n; i++)
        if (pcache_fetch(p->cache, i) != NULL)
            cached++;
    return cached;
}
"""

HELPER = """
/* the file's own: a page unpinned goes back to the free list when no one holds it */
static void page_unpin(pcache_t *c, page_t *pg)
{
    pg->nref--;
    if (pg->nref == 0) {
        pg->next_free = c->free_list;
        c->free_list = pg;
        c->n_free++;
    }
}

void pcache_release(pcache_t *c, page_t *pg)
{
    c->n_pinned--;
    page_unpin(c, pg);
}
"""

READ_LOCKS = """
#include <pthread.h>
typedef struct wal_reader { int lock; struct wal_reader *next; } wal_reader_t;

/* A write-ahead log shared by connections: readers hold one of its read locks. */
typedef struct wal {
    int fd;
    int read_lock;          /* the read lock this connection holds, or -1 */
    int lock_mode;
    wal_reader_t *readers;  /* one per read lock */
    int n_readers;
    int max_readers;
    pthread_mutex_t mutex;
} wal_t;

#define WAL_READ_LOCK(i) (3 + (i))
#define SHM_LOCK 1
#define SHM_UNLOCK 2
extern int os_shm_lock(int fd, int idx, int n, int flags);

static int wal_lock_shared(wal_t *w, int lock_idx)
{
    return os_shm_lock(w->fd, lock_idx, 1, SHM_LOCK);
}

static void wal_unlock_shared(wal_t *w, int lock_idx)
{
    os_shm_lock(w->fd, lock_idx, 1, SHM_UNLOCK);
}

int wal_begin_read(wal_t *w, int i)
{
    int rc = wal_lock_shared(w, WAL_READ_LOCK(i));
    if (rc == 0)
        w->read_lock = i;
    return rc;
}

void wal_end_read(wal_t *w)
{
    wal_unlock_shared(w, WAL_READ_LOCK(w->read_lock));
    w->read_lock = -1;
}
"""


SEMAPHORE = """
#include <pthread.h>
/* a counting semaphore made of a mutex, a condition variable and an integer */
typedef struct { pthread_mutex_t mutex; pthread_cond_t cond; unsigned int value; } my_sem_t;
typedef struct { int refs; int spins; } header_t;
extern void spin_until_unlocked(header_t *h);

void my_sem_post(my_sem_t *sem) {
    pthread_mutex_lock(&sem->mutex);
    sem->value++;
    if (sem->value == 1)
        pthread_cond_signal(&sem->cond);
    pthread_mutex_unlock(&sem->mutex);
}

void my_sem_wait(my_sem_t *sem) {
    pthread_mutex_lock(&sem->mutex);
    while (sem->value == 0)
        pthread_cond_wait(&sem->cond, &sem->mutex);
    sem->value--;
    pthread_mutex_unlock(&sem->mutex);
}

int my_sem_trywait(my_sem_t *sem) {
    int ok = 0;
    pthread_mutex_lock(&sem->mutex);
    if (sem->value > 0) {
        sem->value--;
        ok = 1;
    }
    pthread_mutex_unlock(&sem->mutex);
    return ok;
}

/* not a wait for the count: cleanup that spins on something else when it reaches zero */
void unref(header_t *h) {
    h->refs--;
    if (h->refs == 0)
        spin_until_unlocked(h);
}
"""


CAS_LOCK = """
#include <sched.h>
typedef struct { volatile long lock; volatile long wait; } spin_t;
/* a shared slab pool, guarded by its spin lock */
typedef struct slab { spin_t mutex; struct slab_page *free; long n_free; long max_free; } slab_t;

int spin_trylock(spin_t *mtx, long me) {
    return mtx->lock == 0 && __sync_bool_compare_and_swap(&mtx->lock, 0, me);
}
void spin_lock(spin_t *mtx, long me) {
    for (;;) {
        if (mtx->lock == 0 && __sync_bool_compare_and_swap(&mtx->lock, 0, me))
            return;
        sched_yield();
    }
}
void spin_unlock(spin_t *mtx, long me) { __sync_bool_compare_and_swap(&mtx->lock, me, 0); }
/* a count stepped by a swap, not the lock's word */
void spin_wakeup(spin_t *mtx) {
    long wait = mtx->wait;
    if (wait > 0) __sync_bool_compare_and_swap(&mtx->wait, wait, wait - 1);
}
/* a reader's share of the word given back: the new value lowered first, swapped until
   the swap wins */
void spin_read_unlock(spin_t *mtx) {
    long old = mtx->lock;
    for (;;) {
        long now = old;
        now -= 1;
        if (__sync_bool_compare_and_swap(&mtx->lock, old, now))
            break;
        old = mtx->lock;
    }
}
"""


def _kept(tmp_path, files: dict[str, str], rules) -> set[tuple]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = scan(tmp_path, jobs=1, rules=rules)
    return {(c.function, c.kind, c.resource, c.object_expr.replace(" ", "")) for c in r.verified()}


def _without(*rules) -> tuple:
    return tuple(r for r in RULES if r not in rules)


def _difference(tmp_path, files: dict[str, str], name: str, *also: str) -> tuple[set, set]:
    """What the scan of FILES keeps with every rule and not without the rule NAME (and the
    rules ALSO, that find some of the same), and the other way round."""
    rules = [r for r in RULES if r.__name__ in (name, *also)]
    full = _kept(tmp_path, files, RULES)
    less = _kept(tmp_path, files, _without(*rules))
    return full - less, less - full


def test_every_rule_module_has_its_rule_in_the_tuple_once():
    import gigi.scan._rules as rules

    modules = {m.name for m in pkgutil.iter_modules(rules.__path__) if not m.name.startswith("_")}
    of = {importlib.import_module(f"gigi.scan._rules.{m}").__name__: m for m in modules}
    assert sorted(r.__module__ for r in RULES) == sorted(of)
    assert RULES[0].__name__ == "verified"  # every other rule revises its verdicts


USED_AFTER = """
/* a connection, and the pool of idle ones */
typedef struct conn { struct conn *next; int fd; } conn;
typedef struct conn_pool { conn *free; unsigned int n_free; unsigned int max_conns; } conn_pool;

extern void count_fd(int fd);

/* put back, then its socket counted: not the last word on it, so no release (clearing a
   field after, c->fd = -1, would only reset it) */
void conn_put(conn_pool *p, conn *c)
{
    p->n_free++;
    c->next = p->free;
    p->free = c;
    count_fd(c->fd);
}
"""


def test_verified_checks_each_proposal_and_nothing_stands_without_it(tmp_path):
    files = {"buffer_pool.c": (CORPUS / "buffer_pool.c").read_text(), "conn.c": USED_AFTER}
    assert _kept(tmp_path, files, ()) == set()
    kept = _kept(tmp_path, files, RULES[:1])
    assert ("bp_get_page", "ACQUIRE", "buf_pool", "f") in kept
    r = scan(tmp_path, jobs=1, rules=RULES[:1])
    why = {(c.function, c.kind): why for c, ok, why in r.candidates if not ok}
    assert "used again" in why[("conn_put", "RELEASE")], why  # a rejection says why


def test_uses_inside_a_move_are_part_of_it(tmp_path):
    scrub = """
#include <string.h>
/* a page scrubbed as it is given back: its data touched as part of the release */
void pcache_scrub_release(pcache_t *c, page_t *pg)
{
    memset(pg->data, 0, 16);
    pg->nref--;
    c->n_pinned--;
}
"""
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + scrub}, "uses_inside_a_move")
    assert gained == set()
    assert {(f, k) for f, k, _, _ in lost} == {("pcache_scrub_release", "USE")}, lost


def test_data_moved_into_what_was_taken_is_a_use_of_it():
    """Reading into a buffer just taken (or writing one out before it goes back) moves data
    through it: a USE, where touching its fields as part of the take is not."""
    from gigi.scan._offline import Candidate
    from gigi.scan._rules import Found, Site
    from gigi.scan._rules.moves import uses_inside_a_move

    def site(fn, kind, line, why):
        return Site(Candidate("p.c", fn, line, kind, "conn", "", "1", "heuristic", why), True, "")

    found = Found({}, (), (), (
        site("packet_read", "ACQUIRE", 10, "takes units"),
        site("packet_read", "USE", 14, "works through packet.payload, net_read()"),
        site("packet_take", "ACQUIRE", 20, "takes units"),
        site("packet_take", "USE", 21, "works through packet.pos"),
        site("packet_send", "USE", 30, "works through net_write()"),
        site("packet_send", "RELEASE", 31, "gives units back"),
        site("packet_late", "RELEASE", 40, "gives units back"),
        site("packet_late", "USE", 41, "works through net_write()"),
    ))  # fmt: skip
    kept = {(c.function, c.kind) for c, ok, _ in uses_inside_a_move(found).sites if ok}
    uses = {f for f, k in kept if k == "USE"}
    assert uses == {"packet_read", "packet_send"}, uses


def test_a_miss_waits_on_the_resource_it_looked_up(tmp_path):
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + MISS}, "waits_on_what_they_missed")
    assert gained == {("pager_get", "WAIT", "pcache", "")}
    assert lost == {("pager_get", "WAIT", "pager", "")}


def test_a_loop_retrying_an_acquire_waits_for_its_resource(tmp_path):
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + RETRY}, "waits_for_what_they_retry")
    assert gained == {
        ("pager_wait_page", "WAIT", "pcache", ""),  # was the pager's own wait
        ("warm_page", "WAIT", "pcache", ""),  # a function of no resource
    }
    assert lost == {("pager_wait_page", "WAIT", "pager", "")}
    # it returns the page it got at last (as handed_through_calls also finds without it)
    assert ("pager_wait_page", "ACQUIRE", "pcache", "pg") in _kept(tmp_path, {}, RULES)


def test_a_loop_that_makes_room_and_tries_again_waits(tmp_path):
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + RECLAIM}, "waits_for_what_they_retry")
    assert gained == {("pager_fetch_or_reclaim", "WAIT", "pcache", "")}
    assert lost == set()
    # and returns what it got (as handed_through_calls also finds without it)
    assert ("pager_fetch_or_reclaim", "ACQUIRE", "pcache", "pg") in _kept(tmp_path, {}, RULES)


def test_a_static_helper_is_part_of_its_callers_event(tmp_path):
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + HELPER}, "at_the_interface")
    assert gained == set()
    assert lost == {("page_unpin", "RELEASE", "pcache", "pg")}
    assert ("pcache_release", "RELEASE", "pcache", "pg") in _kept(tmp_path, {}, RULES)


def test_the_object_is_what_the_call_hands_a_lock_function(tmp_path):
    gained, lost = _difference(tmp_path, {"wal.c": READ_LOCKS}, "objects_through_calls")
    assert gained == {
        ("wal_begin_read", "ACQUIRE", "wal", "WAL_READ_LOCK(i)"),
        ("wal_end_read", "RELEASE", "wal", "WAL_READ_LOCK(w->read_lock)"),
    }
    assert lost == {
        ("wal_begin_read", "ACQUIRE", "wal", ""),
        ("wal_end_read", "RELEASE", "wal", ""),
    }


def test_a_word_swapped_to_a_value_and_back_is_a_lock(tmp_path):
    gained, lost = _difference(tmp_path, {"spin.c": CAS_LOCK}, "locks_by_compare_and_swap")
    assert gained == {
        ("spin_trylock", "ACQUIRE", "spin_t", "mtx"),
        ("spin_lock", "ACQUIRE", "spin_t", "mtx"),
        ("spin_lock", "WAIT", "spin_t", "mtx"),  # it yields between swaps
        ("spin_unlock", "RELEASE", "spin_t", "mtx"),
        ("spin_read_unlock", "RELEASE", "spin_t", "mtx"),  # lowered, not taken
    }
    # taken where the swap won (the return it guards), each event of the lock handed in
    r = scan(tmp_path, jobs=1)
    taken = next(c for c in r.verified() if (c.function, c.kind) == ("spin_lock", "ACQUIRE"))
    assert CAS_LOCK.splitlines()[taken.line - 1].strip() == "return;"
    assert {c.object_expr for c in r.verified() if c.resource == "spin_t"} == {"mtx"}
    # what the recall proposed on the slab pool, whose only state they touch is its lock's
    # (its uses, where nothing takes from the slab, sit in no hold in any case)
    proposed = {("spin_trylock", "slab"), ("spin_lock", "slab"), ("spin_unlock", "slab")}
    assert ("spin_lock", "slab") in {(f, r) for f, _, r, _ in lost} <= proposed, lost
    assert not {(c.function, c.resource) for c in r.verified()} & proposed


def test_a_count_waited_on_and_moved_is_a_pool(tmp_path):
    gained, lost = _difference(tmp_path, {"sem.c": SEMAPHORE}, "counts_waited_for")
    assert gained == {
        ("my_sem_wait", "WAIT", "my_sem_t", "sem"),
        ("my_sem_wait", "ACQUIRE", "my_sem_t", "sem"),
        ("my_sem_trywait", "ACQUIRE", "my_sem_t", "sem"),
        ("my_sem_post", "RELEASE", "my_sem_t", "sem"),
    }
    assert lost == set()


WORK_QUEUE = """
#include <pthread.h>
/* connections waiting for a worker, in a ring of fixed size */
typedef struct { int *data; unsigned int nelts, bounds, in, out; pthread_mutex_t one_big_mutex;
                 pthread_cond_t not_empty; } conn_queue_t;

void conn_queue_push(conn_queue_t *q, int sd) {
    pthread_mutex_lock(&q->one_big_mutex);
    q->data[q->in] = sd;
    q->in = (q->in + 1) % q->bounds;
    q->nelts++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->one_big_mutex);
}

int conn_queue_pop(conn_queue_t *q) {
    int sd;
    pthread_mutex_lock(&q->one_big_mutex);
    while (q->nelts == 0)
        pthread_cond_wait(&q->not_empty, &q->one_big_mutex);
    sd = q->data[q->out];
    q->out = (q->out + 1) % q->bounds;
    q->nelts--;
    pthread_mutex_unlock(&q->one_big_mutex);
    return sd;
}
"""


def test_a_queues_count_of_work_is_places_taken_by_pushing(tmp_path):
    """A consumer waits for a queue's count of work to rise, as for a semaphore's; but what
    the queue lends is a place in it: pushing work takes one, taking work off gives it
    back, and the consumer's wait is for work."""
    gained, lost = _difference(tmp_path, {"q.c": WORK_QUEUE}, "counts_waited_for")
    assert {(f, k) for f, k, _, _ in gained} == {
        ("conn_queue_pop", "WAIT"),
        ("conn_queue_pop", "RELEASE"),
        ("conn_queue_push", "ACQUIRE"),
    }, gained


@pytest.mark.parametrize(
    "name, files, wanted",
    [
        (
            "lock_apis",
            {"locks.c": LOCK_API},
            {
                ("my_mutex_lock", "ACQUIRE", "pthread_mutex_t", ""),
                ("my_sem_wait", "WAIT", "sem_t", ""),
            },
        ),
        (
            "allocators_with_a_budget",
            {"alloc.c": ALLOCATOR},
            {("try_alloc_internal", "ACQUIRE", "used", ""), ("my_free", "RELEASE", "used", "")},
        ),
        (
            "through_wrappers",
            {"buffer_pool.c": (CORPUS / "buffer_pool.c").read_text(), "wrappers.c": WRAPPERS},
            {
                ("bp_get_page_nowait", "ACQUIRE", "buf_pool", ""),
                ("bp_put", "RELEASE", "buf_pool", "frame"),  # the frame it hands over
            },
        ),
    ],
)
def test_rules_that_find_what_no_record_proposed(tmp_path, name, files, wanted):
    # a longer function's events through its calls are found by their own rule too
    also = ["handed_through_calls"] if name == "through_wrappers" else []
    gained, lost = _difference(tmp_path, files, name, *also)
    assert wanted <= gained and lost == set()


LISTS = """
#include <stddef.h>

/* an intrusive list, as list libraries write it */
struct node { struct node *next, *prev; };
static inline void node_append(struct node *list, struct node *item)
{
    item->next = list;
    item->prev = list->prev;
    list->prev->next = item;
    list->prev = item;
}
static inline void node_del(struct node *item)
{
    item->prev->next = item->next;
    item->next->prev = item->prev;
    item->next = item->prev = item;
}
static inline struct node *node_pop(struct node *list)
{
    if (list->next == list)
        return NULL;
    struct node *item = list->next;
    node_del(list->next);
    return item;
}

/* a counted list built on it */
struct counted { struct node head; int count; };
static inline void counted_append(struct counted *list, struct node *item)
{
    node_append(&list->head, item);
    list->count++;
}
static inline void counted_remove(struct counted *list, struct node *item)
{
    node_del(item);
    list->count--;
}

/* A connection to a backend, and a pool of them: idle ones, and ones lent to clients. */
typedef struct backend { struct node head; int fd; } backend_t;
typedef struct backend_pool {
    struct counted idle_list;
    struct counted used_list;
    int max_backends;
} backend_pool_t;

/* Lend BE to a client. */
void lend_backend(backend_pool_t *pool, backend_t *be)
{
    counted_remove(&pool->idle_list, &be->head);
    counted_append(&pool->used_list, &be->head);
}

/* BE is idle again. */
void return_backend(backend_pool_t *pool, backend_t *be)
{
    counted_remove(&pool->used_list, &be->head);
    counted_append(&pool->idle_list, &be->head);
}
"""


def test_objects_moved_between_a_resources_lists_by_a_list_library(tmp_path):
    """What each list function does to the lists it is handed is read from its code, to a
    fixed point over its calls; a call that moves an object off a pool's idle list takes
    it, onto it gives it back, and the other way round for the list of those in use."""
    gained, lost = _difference(tmp_path, {"pool.c": LISTS}, "linked_through_calls")
    # off the idle list and onto the used one: one taking; back: one giving back
    assert gained == {
        ("lend_backend", "ACQUIRE", "backend_pool", "be"),
        ("return_backend", "RELEASE", "backend_pool", "be"),
    }, gained
    assert lost == set()


LOCK_WORD = """
#include <stdint.h>
#define FLAG_LOCKED (1u << 28)
#define FLAG_HAS_WAITERS (1u << 30)
#define VAL_EXCLUSIVE (1u << 24)
extern void spin_delay(void);

/* a lock whose word holds its holders, a spin lock on its wait list, and flags */
typedef struct lwlock { uint32_t state; int tranche; } lwlock_t;

static inline uint32_t atomic_fetch_or_u32(uint32_t *p, uint32_t v)
{ return __atomic_fetch_or(p, v, 5); }
static inline uint32_t atomic_fetch_and_u32(uint32_t *p, uint32_t v)
{ return __atomic_fetch_and(p, v, 5); }
static inline uint32_t atomic_sub_fetch_u32(uint32_t *p, uint32_t v)
{ return __atomic_sub_fetch(p, v, 5); }
static inline int atomic_compare_exchange_u32(uint32_t *p, uint32_t *old, uint32_t v)
{ return __atomic_compare_exchange_n(p, old, v, 0, 5, 5); }

int lw_attempt(lwlock_t *lock)
{
    uint32_t old = lock->state;
    while (1) {
        if (old & VAL_EXCLUSIVE)
            return 1;
        if (atomic_compare_exchange_u32(&lock->state, &old, old + VAL_EXCLUSIVE))
            return 0;
    }
}

void wait_list_lock(lwlock_t *lock)
{
    uint32_t old;
    while (1) {
        old = atomic_fetch_or_u32(&lock->state, FLAG_LOCKED);
        if (!(old & FLAG_LOCKED))
            break;
        spin_delay();
    }
}

void wait_list_unlock(lwlock_t *lock) { atomic_fetch_and_u32(&lock->state, ~FLAG_LOCKED); }

void lw_release(lwlock_t *lock) { atomic_sub_fetch_u32(&lock->state, VAL_EXCLUSIVE); }

/* not the lock: a flag of the word cleared */
void no_more_waiters(lwlock_t *lock) { atomic_fetch_and_u32(&lock->state, ~FLAG_HAS_WAITERS); }
"""


def _with_sync_builtins(code: str) -> str:
    """LOCK_WORD with GCC's __sync builtins in place of its wrappers of C11's atomics (the
    swap to old | EXCLUSIVE: a swap to old + a value reads as a count)."""
    head = code.split("static inline uint32_t atomic_fetch_or_u32")[0]
    body = "int lw_attempt" + code.split("int lw_attempt", 1)[1]
    for wrapper, builtin in (
        (
            "atomic_compare_exchange_u32(&lock->state, &old, old + ",
            "__sync_bool_compare_and_swap(&lock->state, old, old | ",
        ),
        ("atomic_fetch_or_u32(", "__sync_fetch_and_or("),
        ("atomic_fetch_and_u32(", "__sync_fetch_and_and("),
        ("atomic_sub_fetch_u32(", "__sync_sub_and_fetch("),
    ):
        assert wrapper in body, wrapper
        body = body.replace(wrapper, builtin)
    return head + body


@pytest.mark.parametrize("spelt", ["wrappers", "sync builtins"])
def test_a_lock_words_other_bits_taken_and_given_back(tmp_path, spelt):
    """On a word a compare-and-swap takes as a lock, a bit set in a spin until it was clear
    is a lock within the word, and clearing that bit gives it back; a holder's share
    subtracted gives the lock back; clearing another flag moves nothing. The same with the
    word moved by GCC's legacy __sync builtins (which a compiler resolves to sized
    variants, __sync_sub_and_fetch_4) as by a codebase's wrappers of C11's atomics."""
    code = LOCK_WORD if spelt == "wrappers" else _with_sync_builtins(LOCK_WORD)
    gained, lost = _difference(tmp_path, {"lw.c": code}, "locks_by_compare_and_swap")
    moved = {(f, k) for f, k, r, o in gained if r == "lwlock" and o == "lock"}
    assert moved == {
        ("lw_attempt", "ACQUIRE"),
        ("wait_list_lock", "ACQUIRE"),
        ("wait_list_lock", "WAIT"),
        ("wait_list_unlock", "RELEASE"),
        ("lw_release", "RELEASE"),
    }, gained
    assert lost == set()


GLOBAL_FREE_LIST = """
#include <stdlib.h>
typedef struct chunk { struct chunk *next; char *mem; } chunk;
typedef struct request { void *con; int state; } request_st;
static request_st *reqpool;  /* free requests, linked through con */
static chunk *chunks;        /* free chunks */
static request_st *last_seen;

void request_release(request_st *r)
{
    r->state = 0;
    r->con = (void *)reqpool;
    reqpool = r;
}

request_st *request_acquire(void *con)
{
    request_st *r = reqpool;
    if (r)
        reqpool = (request_st *)r->con;
    else
        r = calloc(1, sizeof(request_st));
    r->con = con;
    return r;
}

void request_pool_free(void)
{
    while (reqpool) {
        request_st *r = reqpool;
        reqpool = (request_st *)r->con;
        free(r);
    }
}

static chunk *chunk_init(void) { return calloc(1, sizeof(chunk)); }

chunk *chunk_acquire(void)
{
    if (chunks) {
        chunk *c = chunks;
        chunks = c->next;
        return c;
    }
    return chunk_init();
}

void chunk_release(chunk *c)
{
    c->next = chunks;
    chunks = c;
}

/* a cache of one, set and read back: no pool */
void remember(request_st *r) { last_seen = r; }
request_st *recall_last(void) { return last_seen; }
"""


def test_a_free_list_in_a_global_popped_and_pushed_is_a_pool(tmp_path):
    """Popped where it is handed out (the slow path that makes a new object instead is its
    WAIT), pushed where it is given back; drained in a loop, or a global that is only set and
    read, is no event."""
    gained, lost = _difference(tmp_path, {"pool.c": GLOBAL_FREE_LIST}, "global_free_lists")
    assert gained == {
        ("request_acquire", "ACQUIRE", "reqpool", "r"),
        ("request_acquire", "WAIT", "reqpool", "r"),
        ("request_release", "RELEASE", "reqpool", "r"),
        ("chunk_acquire", "ACQUIRE", "chunks", "c"),
        ("chunk_acquire", "WAIT", "chunks", "c"),
        ("chunk_release", "RELEASE", "chunks", "c"),
    }, gained
    assert lost == set()


ENDS_RELEASING = """
#include <stdlib.h>
struct node { struct node *left, *right; };
typedef struct entry { struct node by_key, by_exp; unsigned int ref_cnt; } entry;
/* a table of entries counted against its size */
typedef struct table { unsigned int current; unsigned int size; entry *spare; } table;
extern void tree_delete(struct node *n);

void entry_free(table *t, entry *e)
{
    t->current--;
    free(e);
}

/* unlinked from its trees, then freed: the kill releases the entry */
int entry_kill(table *t, entry *e)
{
    if (e->ref_cnt)
        return 0;
    tree_delete(&e->by_key);
    tree_delete(&e->by_exp);
    entry_free(t, e);
    return 1;
}

/* freed, then read again: not its last word on the entry */
unsigned int entry_drop_and_count(table *t, entry *e)
{
    tree_delete(&e->by_key);
    tree_delete(&e->by_exp);
    entry_free(t, e);
    return e->ref_cnt;
}
"""


def test_a_function_that_ends_by_releasing_its_parameter_releases_it(tmp_path):
    """Longer than a thin wrapper, it unlinks what it was handed and then hands it, once and
    unconditionally, to be released, touching it no more: its RELEASE."""
    gained, lost = _difference(tmp_path, {"table.c": ENDS_RELEASING}, "through_wrappers")
    assert {(f, k) for f, k, _, _ in gained} == {("entry_kill", "RELEASE")}, gained
    assert lost == set()


LOOP_RELEASE = """
#include <stdlib.h>
typedef struct conn { struct conn *next; int fd; } conn;
/* a pool of connections: the idle ones, and how many are lent */
typedef struct conn_pool { conn *idle; unsigned int active; unsigned int max_conns; } conn_pool;

void conn_release(conn_pool *p, conn *c)
{
    p->active--;
    c->next = p->idle;
    p->idle = c;
}

/* each connection of a list given back */
void conn_release_list(conn_pool *p, conn *list)
{
    conn *c, *next;
    for (c = list; c; c = next) {
        next = c->next;
        conn_release(p, c);
    }
}

/* given back only if idle long enough: a decision per connection, not a release of each */
void conn_reap(conn_pool *p, conn *list, int now)
{
    conn *c, *next;
    for (c = list; c; c = next) {
        next = c->next;
        if (c->fd < now)
            conn_release(p, c);
    }
}

conn *conn_take(conn_pool *p)
{
    conn *c = p->idle;
    if (c == NULL)
        return NULL;
    p->idle = c->next;
    p->active++;
    return c;
}

/* a driver: it takes connections and gives them back; its calls are the events */
void conn_churn(conn_pool *p)
{
    conn *got[4];
    for (int i = 0; i < 4; i++)
        got[i] = conn_take(p);
    for (int i = 0; i < 4; i++)
        conn_release(p, got[i]);
}

int main(void)
{
    static conn cs[4];
    static conn_pool pool;
    for (int i = 0; i < 4; i++)
        conn_release(&pool, &cs[i]);
    return 0;
}
"""


def test_a_loop_that_gives_back_each_unit_it_walks_releases_them(tmp_path):
    """Handing each connection of a list, on every turn, to the function that gives one
    back releases them all, each turn's one named; so does handing back only those a test
    of their own state picks (a filter of the walk); a driver that also takes them, or a
    program's main, is no release of its own."""
    gained, lost = _difference(
        tmp_path, {"pool.c": LOOP_RELEASE}, "through_wrappers", "handed_through_calls"
    )
    assert {(f, k, o) for f, k, _, o in gained} == {
        ("conn_release_list", "RELEASE", "c"),
        # a reaper that gives back each connection it picks by the connection's own state
        ("conn_reap", "RELEASE", "c"),
    }, gained
    r = scan(tmp_path, jobs=1)
    why = {c.function: w for c, ok, w in r.candidates if ok and c.kind == "RELEASE"}
    assert "gives back each unit it walks" in why["conn_reap"], why
    assert lost == set()
    released = {f for f, k, _, _ in _kept(tmp_path, {}, RULES) if k == "RELEASE"}
    assert not released & {"conn_churn", "main"}, released


STATIC_WRAPPERS = """
#include <assert.h>
/* the file's own: a page pinned by number, for two callers */
static page_t *page_get(pcache_t *c, int pgno)
{
    return pcache_fetch(c, pgno);
}

/* a caller that pins, and is the interface: the helper is part of its ACQUIRE */
page_t *pcache_get(pcache_t *c, int pgno)
{
    return page_get(c, pgno);
}

/* the file's own, called by a caller that pins nothing of its own */
static page_t *page_peek(pcache_t *c, int pgno)
{
    return pcache_fetch(c, pgno);
}

int pcache_has(pcache_t *c, int pgno)
{
    assert(page_get(c, pgno) != 0);  /* a check: it calls for nothing */
    return page_peek(c, pgno) != 0;
}
"""


def test_a_static_helper_keeps_a_site_where_a_caller_does_not_take_over(tmp_path):
    """A file's static helper keeps a site of its own only where some caller does not
    perform the same event; a call in an assertion is no caller."""
    kept = _kept(tmp_path, {"cache.c": PAGE + STATIC_WRAPPERS}, RULES)
    acquired = {f for f, k, _, _ in kept if k == "ACQUIRE"}
    assert acquired == {"pcache_fetch", "pcache_get", "page_peek"}, kept


SLEEPS_FIRST = """
#include <stdlib.h>
#include <unistd.h>
typedef struct item { struct item *next; int fd; } item_t;
/* the work waiting for a worker thread */
typedef struct work_queue { item_t *head; item_t *tail; int pending; } work_queue_t;
extern item_t *item_new(void);

void queue_push(work_queue_t *q, item_t *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
}

/* it sleeps until an item can be had, then queues it: the sleep is its wait */
void notify_fd(work_queue_t *q, int fd)
{
    item_t *it;
    while ((it = item_new()) == NULL)
        usleep(10000);
    it->fd = fd;
    queue_push(q, it);
}

/* a thin wrapper waits where its callee does */
void redispatch(work_queue_t *q, int fd)
{
    notify_fd(q, fd);
}

/* it spins until an item can be had */
void spin_fd(work_queue_t *q, int fd)
{
    item_t *it;
    while ((it = item_new()) == NULL)
        ;
    it->fd = fd;
    queue_push(q, it);
}
"""


def test_a_loop_that_sleeps_until_it_can_hand_on_is_a_wait(tmp_path):
    """A function that hands work on, after a loop that sleeps (or spins) until the call
    of its condition gives something, waits there, the sleep no work of its own beside its
    call; its thin wrapper waits too."""
    gained, lost = _difference(tmp_path, {"q.c": SLEEPS_FIRST}, "through_wrappers")
    assert {(f, k) for f, k, _, _ in gained} == {
        ("notify_fd", "ACQUIRE"),
        ("redispatch", "ACQUIRE"),
        ("redispatch", "WAIT"),
        ("spin_fd", "ACQUIRE"),
        ("spin_fd", "WAIT"),
    }, gained
    assert lost == set()
    kept = {(f, k) for f, k, _, _ in _kept(tmp_path, {}, RULES)}
    assert ("notify_fd", "WAIT") in kept


LOOKED_UP = """
/* a buffer's header: who pins it */
typedef struct buf_desc { int refcount; int tag; } buf_desc_t;
/* the shared buffers, their headers by number */
typedef struct buf_pool { buf_desc_t *descs; int n_buffers; int n_pinned; } buf_pool_t;
buf_pool_t pool;

static buf_desc_t *get_desc(int id) { return &pool.descs[id]; }

void buf_unpin(buf_desc_t *d)
{
    d->refcount--;
}

/* the interface names a buffer by its number: the header is looked up, then unpinned */
void buf_release(int buffer)
{
    buf_unpin(get_desc(buffer - 1));
}
"""


def test_a_parameter_looked_up_by_a_call_is_what_a_wrapper_hands_over(tmp_path):
    """A wrapper that hands a call the object its parameter names, looked up by another
    call (the header of buffer number N), gives that parameter back."""
    gained, lost = _difference(tmp_path, {"buf.c": LOOKED_UP}, "through_wrappers")
    assert ("buf_release", "RELEASE", "buf_pool", "buffer") in gained, gained
    assert lost == set()


def test_a_use_on_a_resource_nothing_takes_or_gives_back_sits_in_no_hold(tmp_path):
    """The pcache's pages are taken and given back: a function copying out of a page works
    through a held unit. Nothing here takes or gives back a unit of a pool of message
    buffers: filling it is no USE, whatever the recall proposed."""
    text = (
        PAGE
        + """
#include <pthread.h>
#include <string.h>
void pcache_unpin(pcache_t *c, page_t *pg) { pg->nref--; c->n_pinned--; }
void page_copy_out(pcache_t *c, page_t *pg, char *out) { memcpy(out, pg->data, 16); }

/* a pool of message buffers, each with its capacity: no function here takes one */
typedef struct msg_pool { char *buf; int n_used; int capacity; pthread_mutex_t lock; } msg_pool_t;
void ctx_fill(msg_pool_t *r, const char *from) { memcpy(r->buf, from, 16); }
"""
    )
    gained, lost = _difference(tmp_path, {"cache.c": text}, "uses_within_holds")
    assert gained == set()
    assert {(f, k) for f, k, _, _ in lost} == {("ctx_fill", "USE")}, lost
    used = {(f, r) for f, k, r, _ in _kept(tmp_path, {}, RULES) if k == "USE"}
    assert ("page_copy_out", "pcache") in used, used
    assert all(f != "ctx_fill" for f, _ in used), used


OUT_PARAM = """
/* a reference to a page: the caller's, filled in */
typedef struct page_ref { page_t *pg; int pgno; } page_ref_t;

/* a page handed out through the caller's reference; one it holds already is handed back
   as it is (no shortage: no wait) */
page_ref_t *ref_get(pcache_t *c, page_ref_t *ref, int pgno)
{
    page_t *pg;
    if (ref->pg)
        return ref;
    pg = pcache_fetch(c, pgno);
    if (pg == NULL)
        return NULL;
    ref->pg = pg;
    return ref;
}
"""


def test_what_a_wrapper_stores_through_its_parameter_it_hands_out(tmp_path):
    """A wrapper that stores what its callee acquired into its parameter (ref->pg = pg)
    hands it out; returning the parameter it was handed, when it holds one already, is no
    fast path of a wait."""
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + OUT_PARAM}, "through_wrappers")
    assert {(f, k) for f, k, _, _ in gained} == {("ref_get", "ACQUIRE")}, gained
    # without it, the same event is a longer function's that keeps what its call acquired
    # in the record its caller handed in, recorded on the page rather than the reference
    assert lost == {("ref_get", "ACQUIRE", "pcache", "pg")}, lost


HANDLE = """
/* a page handed out by number: the caller's handle to it */
typedef int page_handle;
extern void trace_open(int pgno);
extern void check_mode(int mode);
extern void count_open(pcache_t *c);

page_handle page_open(pcache_t *c, int pgno, int mode)
{
    page_t *pg;
    trace_open(pgno);
    check_mode(mode);
    count_open(c);
    pg = pcache_fetch(c, pgno);
    if (pg == NULL)
        return -1;
    return pg->pgno;
}

/* a status passed on: nothing handed out */
int page_probe(pcache_t *c, int pgno, int mode)
{
    page_t *pg;
    trace_open(pgno);
    check_mode(mode);
    count_open(c);
    pg = pcache_fetch(c, pgno);
    return pg != NULL;
}
"""


def test_a_longer_function_returning_a_handle_hands_out_what_it_acquired(tmp_path):
    """A function past a wrapper's length that returns a handle of its own type (a number
    naming the page) made from what its call acquired hands that out; one returning an
    int, a truth or a status, hands out nothing."""
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + HANDLE}, "through_wrappers")
    assert {(f, k) for f, k, _, _ in gained} == {("page_open", "ACQUIRE")}, gained
    assert lost == set()


USED_THROUGH = """
#include <string.h>
extern void report(const char *what);
void page_copy_out(pcache_t *c, page_t *pg, char *out) { memcpy(out, pg->data, 16); }
char *page_copy_and_find(pcache_t *c, page_t *pg, char *out)
{
    memcpy(out, pg->data, 16);
    return memchr(pg->data, 0, 16);
}

/* the interface: hands the caller's page on to be read, reporting around it */
void page_read(pcache_t *c, page_t *pg, char *out)
{
    if (pg == NULL)
        return;
    page_copy_out(c, pg, out);
    report("read");
}

/* a page found and handed out: a lookup, not a use */
page_t *page_find_and_copy(pcache_t *c, page_t *pg, char *out)
{
    page_copy_out(c, pg, out);
    return pg;
}

/* the same, replying an error to its client when there is no page: a report, no work */
extern void reply_error(void *client, const char *msg);
int page_read_or_reply(void *client, const char *msg, pcache_t *c, page_t *pg, char *out)
{
    if (pg == NULL) {
        if (msg != NULL)
            reply_error(client, msg);
        else
            reply_error(client, "no such page");
        return -1;
    }
    page_copy_out(c, pg, out);
    return 0;
}

/* handing out what its callee found: a lookup, not a use */
char *page_copy_found(pcache_t *c, page_t *pg, char *out) { return page_copy_and_find(c, pg, out); }

/* a file's own helper: its callers' uses say it */
static void page_read_quietly(pcache_t *c, page_t *pg, char *out) { page_copy_out(c, pg, out); }
void page_dump(pcache_t *c, page_t *pg, char *out) { page_read_quietly(c, pg, out); }

/* tearing down what it hands over is no use of it */
void page_destroy(pcache_t *c, page_t *pg, char *out) { page_copy_out(c, pg, out); }
"""


def test_a_thin_wrapper_that_hands_its_parameter_to_be_used_uses_it(tmp_path):
    """A thin wrapper that hands its own parameter to a function that USEs it uses it too,
    at the call, on that parameter, whatever errors it replies with; not one that returns
    what it was handed (a lookup), a file's static helper, nor one that makes or tears down
    the object."""
    gained, lost = _difference(tmp_path, {"cache.c": PAGE + USED_THROUGH}, "through_wrappers")
    uses = {(f, o) for f, k, _, o in gained if k == "USE"}
    assert uses == {("page_read", "pg"), ("page_dump", "pg"), ("page_read_or_reply", "pg")}
    assert lost == set()


CONN_POOL = """
#include <stdlib.h>
typedef struct conn { int fd; struct conn *next; int busy; } conn_t;
/* a pool of connections: a free list, its counts, and the one its current request has */
typedef struct cpool {
    conn_t *free_list; int n_free; int n_used; int capacity; conn_t *current;
} cpool_t;
extern int send_all(int fd, const char *buf, int n);
extern void flush_fd(int fd);
extern void note_time(void);
extern void count_fd(int fd);

conn_t *cpool_get(cpool_t *p)
{
    conn_t *c = p->free_list;
    if (c == NULL)
        return NULL;
    p->free_list = c->next;
    p->n_free--;
    p->n_used++;
    return c;
}

void cpool_put(cpool_t *p, conn_t *c)
{
    c->next = p->free_list;
    p->free_list = c;
    p->n_free++;
    p->n_used--;
}

/* takes a connection for the pool's current request and keeps it there */
int cpool_start(cpool_t *p, const char *req, int n)
{
    conn_t *c;
    note_time();
    c = cpool_get(p);
    if (c == NULL)
        return -1;
    p->current = c;
    flush_fd(c->fd);
    return send_all(c->fd, req, n);
}

/* the request done: its last word on the connection it was handed is giving it back,
   where the pool has room for it */
void cpool_finish(cpool_t *p, conn_t *c)
{
    note_time();
    send_all(c->fd, "bye", 3);
    if (p->n_free < p->capacity)
        cpool_put(p, c);
    else
        count_fd(c->fd);
}

/* takes one, works through it, gives it back: it holds it inside, no event of its own */
int cpool_ping(cpool_t *p)
{
    conn_t *c = cpool_get(p);
    int rc;
    if (c == NULL)
        return -1;
    note_time();
    rc = send_all(c->fd, "ping", 4);
    flush_fd(c->fd);
    cpool_put(p, c);
    return rc;
}

/* still working through it after handing it over: not its last word */
void cpool_finish_late(cpool_t *p, conn_t *c)
{
    note_time();
    if (p->n_free < p->capacity)
        cpool_put(p, c);
    send_all(c->fd, "bye", 3);
    flush_fd(c->fd);
}

/* handing over the one chained to it, then it: a structure torn down, a job of its own */
void cpool_put_chain(cpool_t *p, conn_t *c)
{
    note_time();
    flush_fd(c->fd);
    if (p->n_free < p->capacity) {
        cpool_put(p, c->next);
        cpool_put(p, c);
    }
}

/* closing the connection the caller handed in gives it back */
void cpool_close(cpool_t *p, conn_t *c)
{
    note_time();
    count_fd(c->fd);
    if (p->n_free < p->capacity)
        cpool_put(p, c);
}

/* given back, then its socket read and the field reset: winding it up, no use of it */
void cpool_drop(cpool_t *p, conn_t *c)
{
    int fd;
    note_time();
    cpool_put(p, c);
    fd = c->fd;
    c->fd = -1;
    if (c->busy)
        return;
    flush_fd(fd);
}

/* tearing the pool down is no event on its units */
void cpool_destroy(cpool_t *p, conn_t *c)
{
    note_time();
    flush_fd(c->fd);
    if (p->n_free < p->capacity)
        cpool_put(p, c);
    free(p);
}
"""


def test_a_caller_keeping_or_giving_up_a_unit_performs_the_calls_event(tmp_path):
    """A longer function that keeps in the resource's record what a call acquired takes it
    (and uses it where it then sends through it), and one whose last word on a unit it was
    handed is a call that releases it gives it back, both at the call; not one that takes
    and gives back the unit itself, that goes on using it after, that hands over its parts
    too, or that tears the resource down (closing what the caller handed in is giving it
    back). Reading a field of the unit after, or resetting one, only winds it up."""
    gained, lost = _difference(tmp_path, {"pool.c": CONN_POOL}, "handed_through_calls")
    assert {(f, k, o) for f, k, _, o in gained} == {
        ("cpool_start", "ACQUIRE", "c"),
        ("cpool_start", "USE", "c"),  # the request sent on the connection it keeps
        ("cpool_finish", "RELEASE", "c"),
        ("cpool_close", "RELEASE", "c"),
        ("cpool_drop", "RELEASE", "c"),
    }, gained
    assert lost == set()


CELLS_DROPPED = """
/* a cache over the cells: drops the cells from P0 to P1 while any is in use, each by its
   number, reading the number on to remember the first it freed */
class cell_cache {
public:
    unsigned drop_from(int p0, int p1) {
        unsigned first = 0;
        for (unsigned i = 0; i < 16; ++i) {
            if (i < (unsigned) p0 || i > (unsigned) p1)
                continue;
            if (cells.n_used() > 0)
                cells.rm(i);
            if (first == 0)
                first = i;
        }
        return first;
    }
private:
    slot_cells cells;
};
"""


def test_a_method_releasing_a_slot_by_its_number_is_the_callers_last_word(tmp_path):
    """A method call is read by its class (``cells.rm(i)``), and a slot's number read on
    after it is given back touches no unit: the caller gives the slot back."""
    gained, lost = _difference(
        tmp_path, {"cells.cpp": USED_SET + CELLS_DROPPED}, "handed_through_calls"
    )
    assert {(f, k, o) for f, k, _, o in gained} == {("cell_cache::drop_from", "RELEASE", "i")}
    assert lost == set()


IDLERS = """
#include <pthread.h>
typedef int status_t;
/* workers gone idle, counted; the listener takes one, or waits for one to go idle */
typedef struct { int idlers; pthread_mutex_t idlers_mutex; pthread_cond_t wait_for_idler; }
    workers_t;

status_t wait_for_idler(workers_t *w)
{
    status_t rv;
    if (--w->idlers < 0) {
        rv = pthread_mutex_lock(&w->idlers_mutex);
        if (rv != 0) {
            w->idlers++;  /* undone on the way out: no unit taken */
            return rv;
        }
        while (w->idlers < 0)
            pthread_cond_wait(&w->wait_for_idler, &w->idlers_mutex);
        pthread_mutex_unlock(&w->idlers_mutex);
    }
    return 0;
}

void set_idle(workers_t *w)
{
    if (w->idlers++ < 0) {
        pthread_mutex_lock(&w->idlers_mutex);
        pthread_cond_signal(&w->wait_for_idler);
        pthread_mutex_unlock(&w->idlers_mutex);
    }
}
"""


def test_a_count_given_back_on_an_errors_way_out_is_an_undo(tmp_path):
    """A count a function takes and, on its way out on an error, gives back (``if (rv != 0)
    { idlers++; return rv; }``) is taken by it, one way: the waiter takes, the worker going
    idle gives back, and the undo is no release."""
    got = _kept(tmp_path, {"idlers.c": IDLERS}, RULES)
    assert {(f, k) for f, k, r, _ in got if r == "workers_t"} == {
        ("wait_for_idler", "WAIT"),
        ("wait_for_idler", "ACQUIRE"),
        ("set_idle", "RELEASE"),
    }, got


CONDITIONS = """
#include <pthread.h>
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t init_cond = PTHREAD_COND_INITIALIZER;
static int init_count;
static int run_worker = 1;
static int work_ready;

/* a barrier on a global count: the wait, and the registration that steps it and signals */
void wait_for_registration(int nthreads) {
    pthread_mutex_lock(&init_lock);
    while (init_count < nthreads)
        pthread_cond_wait(&init_cond, &init_lock);
    pthread_mutex_unlock(&init_lock);
}
void register_initialized(void) {
    pthread_mutex_lock(&init_lock);
    init_count++;
    pthread_cond_signal(&init_cond);
    pthread_mutex_unlock(&init_lock);
}
/* a flag set and signalled asks the waiter for something: no unit handed over */
void stop_worker(void) {
    pthread_mutex_lock(&init_lock);
    run_worker = 0;
    pthread_cond_signal(&init_cond);
    pthread_mutex_unlock(&init_lock);
}
/* a barrier reached through a local: its condition is the record's member */
struct barrier_s { pthread_mutex_t mutex; pthread_cond_t cond; unsigned int in, out; };
typedef struct { struct barrier_s *b; } barrier_t;
void barrier_drain(barrier_t *barrier) {
    struct barrier_s *b = barrier->b;
    pthread_mutex_lock(&b->mutex);
    while (b->out != 0)
        pthread_cond_wait(&b->cond, &b->mutex);
    pthread_mutex_unlock(&b->mutex);
}
/* one wait, while a count copied from shared state says so */
static unsigned long long pending_jobs[4];
static pthread_cond_t step_cond[4];
static pthread_mutex_t job_mutex[4];
void wait_step(int type) {
    pthread_mutex_lock(&job_mutex[type]);
    unsigned long long val = pending_jobs[type];
    if (val != 0)
        pthread_cond_wait(&step_cond[type], &job_mutex[type]);
    pthread_mutex_unlock(&job_mutex[type]);
}
/* a wait on a condition of the function's own, read off a local: nothing shared */
void wait_local(int *done) {
    int seen = 0;
    while (!seen) {
        pthread_cond_wait(&init_cond, &init_lock);
        seen = *done;
    }
}
"""


def test_a_wait_on_a_condition_variable_until_shared_state_says_go(tmp_path):
    gained, lost = _difference(tmp_path, {"cond.c": CONDITIONS}, "waits_on_conditions")
    assert {(f, k, r) for f, k, r, _ in gained} == {
        ("wait_for_registration", "WAIT", "init_cond"),
        ("register_initialized", "RELEASE", "init_cond"),
        ("barrier_drain", "WAIT", "barrier_s.cond"),
        ("wait_step", "WAIT", "step_cond"),
    }, gained
    assert lost == set()


LATE = """
typedef struct slot { struct slot *next; } slot_t;
typedef struct slot_pool { slot_t *free; unsigned int n_free; unsigned int max_slots; } slot_pool_t;
extern slot_t *take_somehow(slot_pool_t *p);
slot_t *inner_take(slot_pool_t *p) { return take_somehow(p); }
slot_t *outer_take(slot_pool_t *p) { return inner_take(p); }
"""


def test_an_event_found_after_the_wrappers_rule_still_reaches_its_wrappers(tmp_path):
    """The rules that carry a callee's events to its callers run once more at the end: an
    event a later rule found (a longer function's) reaches the thin wrappers of it."""
    from dataclasses import replace

    from gigi.scan._offline import Candidate
    from gigi.scan._rules import Site
    from gigi.scan._rules.verified import verified
    from gigi.scan._rules.wrappers import through_wrappers

    def late(found):  # stands for a rule after the wrappers' that finds inner_take's event
        c = Candidate("late.c", "inner_take", 5, "ACQUIRE", "slot_pool", "", "1", "heuristic", "")
        return replace(found, sites=(*found.sites, Site(c, True, "verified: late")))

    (tmp_path / "late.c").write_text(LATE)
    got = {}
    for rules in ((verified, through_wrappers, late), (verified, late)):
        r = scan(tmp_path, jobs=1, rules=rules)
        got[len(rules)] = {(c.function, c.kind) for c in r.verified()}
    assert ("outer_take", "ACQUIRE") in got[3], got
    assert ("outer_take", "ACQUIRE") not in got[2], got


SLOW_CALLEES = """
static int reclaimed, tries;
void reclaim_pages(pcache_t *c) { reclaimed++; }
void reclaim_all(pcache_t *c) { reclaimed += 2; }
void note_try(int pgno) { tries += pgno; }

/* it makes room and tries again when the cache gave nothing */
page_t *pager_fetch_or_reclaim(pager_t *p, int pgno)
{
    page_t *pg = NULL;
    for (int i = 0; i < 3; i++) {
        pg = pcache_fetch(p->cache, pgno);
        if (pg == NULL) {
            note_try(pgno);
            reclaim_pages(p->cache);
            reclaim_all(p->cache);
        } else {
            break;
        }
    }
    return pg;
}
/* called on an ordinary path too: no slow path of its own */
void pager_idle(pager_t *p) { reclaim_all(p->cache); }
"""


def test_a_function_called_only_to_make_room_in_a_wait_waits(tmp_path):
    """A step named for making room, called only inside a WAIT, is the slow path itself; not
    one also called on an ordinary path, nor the other steps of the wait's rounds."""
    files = {"cache.c": PAGE + SLOW_CALLEES}
    gained, lost = _difference(tmp_path, files, "slow_path_callees")
    assert gained == {("reclaim_pages", "WAIT", "pcache", "")}, gained
    assert lost == set()


LINKED_BY_CALLEE = """
#include <string.h>
#include <stdlib.h>
typedef struct chunk { struct chunk *next; char mem[64]; } chunk;
typedef struct chunk_pool {
    chunk *free_chunks;
    unsigned int n_free;
    unsigned int max_chunks;
} chunk_pool;
typedef struct queue { chunk *first, *last; } queue;

chunk *chunk_take(chunk_pool *p) {
    chunk *c = p->free_chunks;
    if (c == NULL)
        return NULL;
    p->free_chunks = c->next;
    p->n_free--;
    return c;
}
static chunk_pool pool;
void queue_link(queue *q, chunk *c) {
    c->next = NULL;
    if (q->last) q->last->next = c; else q->first = c;
    q->last = c;
}
chunk *queue_append_chunk(queue *q) {
    chunk *c = chunk_take(&pool);
    if (c) queue_link(q, c);
    return c;
}
extern void index_chunk(chunk *c);
/* the call links the chunk into the queue the caller handed in: kept there, filled here */
void queue_append(queue *q, const char *data, size_t n) {
    chunk *c = queue_append_chunk(q);
    if (c == NULL)
        return;
    memcpy(c->mem, data, n);
}
/* the same, filled by a copy function of the code's own */
extern void chunk_copy_string(char *dst, const char *src, size_t n);
void queue_append_string(queue *q, const char *s, size_t n) {
    chunk *c = queue_append_chunk(q);
    chunk_copy_string(c->mem, s, n);
}
/* the same through a macro, on the queue inside the record it was handed */
typedef struct table { queue a; int n_added; } table;
#define table_push(t) queue_append_chunk(&(t)->a)
void table_add(table *t, char first) {
    chunk *c = table_push(t);
    c->mem[0] = first;
}
/* handed on to another function: whose it is then is not this one's to say */
void queue_append_indexed(queue *q) {
    chunk *c = queue_append_chunk(q);
    if (c == NULL)
        return;
    index_chunk(c);
}
"""


def test_a_unit_a_call_links_into_what_it_was_handed_is_kept(tmp_path):
    """What a call links into the record the caller was handed is the caller's to keep
    (ACQUIRE) when it only fills it, by a memcpy or a copy function of its own (the data it
    copies into the unit is its USE), or sets it up; the record handed on may be a member
    of the caller's, through a macro that hides the call's arguments."""
    gained, lost = _difference(tmp_path, {"q.c": LINKED_BY_CALLEE}, "handed_through_calls")
    assert {(f, k) for f, k, _, _ in gained} == {
        ("queue_append", "ACQUIRE"),
        ("queue_append", "USE"),
        ("queue_append_string", "ACQUIRE"),
        ("queue_append_string", "USE"),
        ("table_add", "ACQUIRE"),
    }, gained
    assert lost == set()


GROWS = """
#include <stdlib.h>
#include <string.h>
typedef struct slot { int id; char data[60]; } slot;
/* a pool of slots that grows when full */
typedef struct slot_pool {
    slot *elts; int count; int capacity; int n_used; int max_slots;
} slot_pool;
extern void note_full(slot_pool *p);

slot *slot_pool_push(slot_pool *p) {
    if (p->count == p->capacity) {
        int n = p->capacity ? p->capacity * 2 : 4;
        slot *more = malloc(n * sizeof(slot));
        memcpy(more, p->elts, p->capacity * sizeof(slot));
        free(p->elts);
        p->elts = more;
        p->capacity = n;
    }
    return &p->elts[p->count++];
}

/* refuses when full: a test of the limit that leaves it alone is no growth */
slot *slot_pool_try_push(slot_pool *p) {
    if (p->count >= p->capacity) {
        note_full(p);
        return NULL;
    }
    return &p->elts[p->count++];
}

/* a count stepped under its limit is a take, not a growth */
slot *slot_pool_use(slot_pool *p) {
    if (p->n_used < p->max_slots) {
        p->n_used++;
        note_full(p);
    }
    return p->elts;
}
"""


def test_growing_when_full_is_the_slow_way_to_take(tmp_path):
    gained, lost = _difference(tmp_path, {"slots.c": GROWS}, "grows_when_full")
    assert gained == {("slot_pool_push", "WAIT", "slot_pool", "")}, gained
    assert lost == set()


SLOT_CLAIMS = """
#include <stdlib.h>
#include <time.h>
/* forward records on a list: one whose server is unset is free for a new query */
struct server { int fd; };
struct frec { struct frec *next; struct server *sentto; time_t time; unsigned short id; };
struct daemon { struct frec *frec_list; int max_frecs; int n_frecs; };
extern struct daemon *daemon;

struct frec *get_free_frec(time_t now) {
    struct frec *f, *target = NULL;
    for (f = daemon->frec_list; f; f = f->next)
        if (!f->sentto)
            target = f;
    if (target)
        target->time = now;
    return target;
}

/* a lookup picks by what it is asked for: no claim */
struct frec *lookup_frec(unsigned short id) {
    struct frec *f;
    for (f = daemon->frec_list; f; f = f->next)
        if (f->id == id)
            return f;
    return NULL;
}

/* counting the free ones hands out none */
int count_free(void) {
    int n = 0;
    for (struct frec *f = daemon->frec_list; f; f = f->next)
        if (!f->sentto)
            n++;
    return n;
}
"""


def test_a_unit_found_free_by_its_state_and_claimed_is_taken(tmp_path):
    gained, lost = _difference(tmp_path, {"fwd.c": SLOT_CLAIMS}, "claims_free_slots")
    assert {(f, k, o) for f, k, _, o in gained} == {("get_free_frec", "ACQUIRE", "target")}
    assert lost == set()


CONTAINER_POOL = """
#include <stdlib.h>
#include <unistd.h>
/* a generic list library: its elements untyped, its size a macro */
typedef struct sblist { size_t itemsize, blockitems, count, capa; char *items; } sblist;
#define sblist_getsize(X) ((X)->count)
int sblist_add(sblist *l, void *item);
void sblist_delete(sblist *l, size_t idx);
void *sblist_get(sblist *l, size_t idx);
struct config { unsigned maxclients; int quit; };
extern struct config *config;
struct child { int done; int fd; };
static sblist *childs;
static sblist *names;  /* a list no one waits for room in: only a collection */

static void collect_children(void) {
    for (size_t i = 0; i < sblist_getsize(childs);) {
        struct child *c = *(struct child **)sblist_get(childs, i);
        if (c->done) { sblist_delete(childs, i); free(c); } else i++;
    }
}
extern int start_worker(struct child *c);
void accept_loop(int listenfd) {
    while (!config->quit) {
        collect_children();
        if (sblist_getsize(childs) >= config->maxclients) {
            usleep(16);  /* full: wait for a worker to finish */
            continue;
        }
        struct child *c = malloc(sizeof *c);
        if (!sblist_add(childs, &c))
            continue;
        if (start_worker(c) != 0)
            sblist_delete(childs, sblist_getsize(childs) - 1);  /* undone */
    }
}
void remember(const char *name) { sblist_add(names, (void *)&name); }
"""


def test_a_pool_in_a_generic_container_shows_by_the_wait_for_room(tmp_path):
    gained, lost = _difference(tmp_path, {"child.c": CONTAINER_POOL}, "pools_in_containers")
    assert {(f, k, r) for f, k, r, _ in gained} == {
        ("accept_loop", "WAIT", "childs"),
        ("accept_loop", "ACQUIRE", "childs"),
        ("collect_children", "RELEASE", "childs"),
    }, gained
    assert lost == set()


ROOM = """
typedef struct conn { struct conn *data; int close; void (*handler)(struct conn *); } conn_t;
/* a cycle keeps the free connections, their count, and the idle ones it may close */
typedef struct cycle {
    conn_t *free_connections; unsigned free_connection_n; unsigned connection_n;
    conn_t *idle[32]; unsigned idle_n;
} cycle_t;

conn_t *get_connection(cycle_t *cycle) {
    conn_t *c = cycle->free_connections;
    if (c == 0)
        return 0;
    cycle->free_connections = c->data;
    cycle->free_connection_n--;
    return c;
}
void free_connection(cycle_t *cycle, conn_t *c) {
    c->data = cycle->free_connections;
    cycle->free_connections = c;
    cycle->free_connection_n++;
}
/* closes idle connections, but only when few are free: the slow way to one */
void drain_connections(cycle_t *cycle) {
    if (cycle->free_connection_n > cycle->connection_n / 16 || cycle->idle_n == 0)
        return;
    for (unsigned i = 0; i < cycle->idle_n; i++) {
        conn_t *c = cycle->idle[i];
        c->close = 1;
        c->handler(c);
    }
}
/* a report that returns early when nothing is free is no room made */
unsigned free_share(cycle_t *cycle) {
    if (cycle->free_connection_n > cycle->connection_n)
        return 100;
    return cycle->free_connection_n * 100 / cycle->connection_n;
}
"""


def test_making_room_when_few_units_are_free_is_a_wait(tmp_path):
    gained, lost = _difference(tmp_path, {"cycle.c": ROOM}, "makes_room_when_low")
    assert {(f, k) for f, k, _, _ in gained} == {("drain_connections", "WAIT")}, gained
    assert lost == set()


DRAINED = """
#include <stddef.h>
typedef struct conn { struct conn *next; int idle; } conn_t;
typedef struct conn_pool {
    conn_t *free_conns; unsigned int free_n; unsigned int max_conns; conn_t *reusable;
} conn_pool_t;
extern void close_conn(conn_t *c);

/* closes idle connections, but only when few are free */
static void drain_conns(conn_pool_t *cy)
{
    if (cy->free_n > cy->max_conns / 16)
        return;
    for (int i = 0; i < 32 && cy->reusable; i++) {
        conn_t *c = cy->reusable;
        cy->reusable = c->next;
        close_conn(c);
    }
}

conn_t *get_conn(conn_pool_t *cy)
{
    conn_t *c;
    drain_conns(cy);
    c = cy->free_conns;
    if (c == NULL)
        return NULL;
    cy->free_conns = c->next;
    cy->free_n--;
    return c;
}
"""


def test_a_slow_way_called_before_the_take_is_the_callers_wait(tmp_path):
    """A function that calls the slow way to a unit (closing idle connections when few are
    free) and then takes one waits there, on every call."""
    gained, lost = _difference(tmp_path, {"conn.c": DRAINED}, "waits_in_a_callee_first")
    assert gained == {("get_conn", "WAIT", "conn_pool", "")}, gained
    assert lost == set()


LIBRARY_POOL = """
#include <stddef.h>
/* connections to a backend, pooled by a library the tree does not hold */
typedef struct reslist reslist_t;
extern int reslist_acquire(reslist_t *rl, void **out);
extern int reslist_release(reslist_t *rl, void *res);
extern int reslist_invalidate(reslist_t *rl, void *res);
typedef struct conn_pool { reslist_t *res; int hmax; } conn_pool_t;
typedef struct backend { conn_pool_t *cp; const char *name; } backend_t;
typedef struct conn { backend_t *worker; int fd; } conn_t;

int acquire_conn(backend_t *b, conn_t **out)
{
    return reslist_acquire(b->cp->res, (void **)out) == 0 ? 0 : -1;
}

int get_conn(backend_t *b, conn_t **conn)
{
    int rv = reslist_acquire(b->cp->res, (void **)&*conn);
    if (rv != 0)
        return -1;
    (*conn)->worker = b;
    return 0;
}

static int conn_cleanup(void *theconn)
{
    conn_t *conn = (conn_t *)theconn;
    backend_t *b = conn->worker;
    conn->fd = -1;
    return reslist_release(b->cp->res, conn);
}

int release_conn(conn_t *conn)
{
    return conn_cleanup(conn);
}

/* a walk that hands each back is left to the rules that read loops */
void drop_all(backend_t *b, conn_t **all, int n)
{
    for (int i = 0; i < n; i++)
        reslist_invalidate(b->cp->res, all[i]);
}
"""


def test_a_pool_a_library_keeps_is_taken_and_given_back_by_name(tmp_path):
    """A pool a library outside the tree keeps is taken from and given back through calls
    named for it: the function that keeps what the call hands out ACQUIREs, the one that
    hands its own unit to be taken back RELEASEs (and its thin wrapper with it)."""
    gained, lost = _difference(tmp_path, {"pool.c": LIBRARY_POOL}, "pools_of_libraries")
    assert {(f, k) for f, k, _, _ in gained} == {
        ("get_conn", "ACQUIRE"),
        ("acquire_conn", "ACQUIRE"),
        ("conn_cleanup", "RELEASE"),
        ("release_conn", "RELEASE"),
    }, gained
    assert {r for _, _, r, _ in gained} == {"backend.cp"}
    assert lost == set()


HANDED_ON = """
#include <stdlib.h>
typedef struct item { struct item *next; int fd; } item_t;
/* a worker's queue of work items, bounded */
typedef struct work_queue {
    item_t *head; item_t *tail; unsigned int count; unsigned int max_items;
} work_queue_t;
typedef struct worker { work_queue_t *queue; } worker_t;
typedef struct conn { worker_t *thread; int fd; } conn_t;

static void queue_push(work_queue_t *q, item_t *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->count++;
}

static void notify_worker(worker_t *t, item_t *it)
{
    queue_push(t->queue, it);
}

/* hands on what its parameter holds: the connection's worker, with a new item */
void redispatch(conn_t *c)
{
    item_t *it = malloc(sizeof(*it));
    it->fd = c->fd;
    notify_worker(c->thread, it);
}
"""


def test_a_wrapper_that_hands_on_what_its_parameter_holds_takes_it(tmp_path):
    """A thin wrapper that hands a callee which takes what it is handed something its own
    parameter holds (``notify_worker(c->thread, ...)``) takes it too, for its callers."""
    gained, lost = _difference(tmp_path, {"q.c": HANDED_ON}, "through_wrappers")
    assert ("redispatch", "ACQUIRE") in {(f, k) for f, k, _, _ in gained}, gained
    assert lost == set()


RESERVED = """
#include <stdint.h>
#include <stddef.h>
extern void spin_lock(volatile int *lock);
extern void spin_unlock(volatile int *lock);

/* the write-ahead log: where the next record goes, and how far it was written out */
typedef struct wal_insert {
    volatile int insert_lck; uint64_t cur_pos; uint64_t prev_pos;
} wal_insert;
typedef struct wal_ctl { wal_insert insert; char *pages; uint64_t written; } wal_ctl;
static wal_ctl *wal;

/* reserve SIZE bytes of the log for a record: its start and end through START and END */
static void reserve_insert_location(int size, uint64_t *start, uint64_t *end)
{
    wal_insert *ins = &wal->insert;
    uint64_t startpos, endpos;
    spin_lock(&ins->insert_lck);
    startpos = ins->cur_pos;
    endpos = startpos + size;
    ins->cur_pos = endpos;
    ins->prev_pos = startpos;
    spin_unlock(&ins->insert_lck);
    *start = startpos;
    *end = endpos;
}

/* a parser's cursor over its own input: no lock, nothing shared */
typedef struct reader { const char *buf; size_t pos; size_t len; } reader;
const char *reader_take(reader *rd, size_t n)
{
    const char *at = rd->buf + rd->pos;
    rd->pos += n;
    return at;
}

/* ids handed out under a lock, one at a time */
typedef struct ids { volatile int lock; unsigned next_id; } ids;
unsigned take_id(ids *s)
{
    unsigned id;
    spin_lock(&s->lock);
    id = s->next_id;
    s->next_id = id + 1;
    spin_unlock(&s->lock);
    return id;
}
"""


def test_a_position_moved_by_the_callers_amount_is_a_reservation(tmp_path):
    """A shared position moved forward by an amount the caller names, under a lock, with the
    old position handed back through a pointer, reserves that amount: an ACQUIRE on the
    position's record. A parser's cursor (no lock) and an id counter (moved by one) reserve
    nothing here."""
    gained, lost = _difference(tmp_path, {"wal.c": RESERVED}, "reservations")
    assert {(f, k, r) for f, k, r, _ in gained} == {
        ("reserve_insert_location", "ACQUIRE", "wal_insert"),
    }, gained
    assert lost == set()


OWN_LOCKS = """
#include <stdint.h>
/* the server's own lock: its functions are in another file of the tree */
typedef struct lwlock { uint32_t state; } lwlock;
extern int lw_lock_acquire(lwlock *lock, int mode);
extern void shm_lock(int fd, int offset, int flags);

/* the locks that writers of the log insert under, one each */
typedef struct insert_lock { lwlock lock; uint64_t inserting_at; } insert_lock;
static insert_lock insert_locks[8];
static int my_lock_no;
static int lock_to_try = -1;

/* take one of the insertion locks for this backend */
void insert_lock_acquire(void)
{
    if (lock_to_try == -1)
        lock_to_try = 3;
    my_lock_no = lock_to_try;
    lw_lock_acquire(&insert_locks[my_lock_no].lock, 1);
}

extern void lw_lock_release_clear_var(lwlock *lock, uint64_t *var, uint64_t value);
extern void lw_lock_update_var(lwlock *lock, uint64_t *var, uint64_t value);
static int holding_all_locks;

/* take every insertion lock, in order */
void insert_lock_acquire_all(void)
{
    int i;
    for (i = 0; i < 8; i++)
        lw_lock_acquire(&insert_locks[i].lock, 1);
    holding_all_locks = 1;
}

/* let go of the insertion lock held, or of all of them */
void insert_lock_release(void)
{
    if (holding_all_locks) {
        int i;
        for (i = 0; i < 8; i++)
            lw_lock_release_clear_var(&insert_locks[i].lock, &insert_locks[i].inserting_at, 0);
        holding_all_locks = 0;
    } else {
        lw_lock_release_clear_var(&insert_locks[my_lock_no].lock,
                                  &insert_locks[my_lock_no].inserting_at, 0);
    }
}

/* say how far the holder has inserted: a chore done to the lock, no take */
void insert_lock_update(uint64_t at)
{
    lw_lock_update_var(&insert_locks[my_lock_no].lock, &insert_locks[my_lock_no].inserting_at, at);
}

typedef struct shm { int fd; int n_readers; } shm;
/* a lock on a file, by its descriptor: no lock named in what it is handed */
void shm_read_lock(shm *s)
{
    shm_lock(s->fd, 0, 1);
}
"""


def test_a_lock_function_of_the_code_s_own_is_read_by_its_name(tmp_path):
    """A call to a lock function of the code's own whose body the scan does not have
    (``LWLockAcquire``) is read by what its name says after its lock word
    (``LWLockReleaseClearVar``: release; ``LWLockUpdateVar``, a chore: nothing), on a lock
    named so: the one of a table of locks it picks (what picks it is part of taking it), or
    every one of the table in a walk, beside a flag named for them. Handed a file
    descriptor, the same call names no lock."""
    gained, lost = _difference(tmp_path, {"insert.c": OWN_LOCKS}, "lock_apis")
    assert {(f, k, r) for f, k, r, _ in gained} == {
        ("insert_lock_acquire", "ACQUIRE", "insert_locks"),
        ("insert_lock_acquire_all", "ACQUIRE", "insert_locks"),
        ("insert_lock_release", "RELEASE", "insert_locks"),
    }, gained
    assert lost == set()
    r = scan(tmp_path, jobs=1)
    assert {(g.name, g.sharing, g.unit) for g in r.resources if g.name == "insert_locks"} == {
        ("insert_locks", "exclusive", "locks")
    }
    # a site at each call that gives back: all of the table's in the walk, or the one held
    released = [c.line for c in r.verified() if c.function == "insert_lock_release"]
    assert len(set(released)) == 2, released


LOCK_WAITS = """
#include <sched.h>
/* the server's own lock: its functions are in another file of the tree */
typedef struct lwlock { unsigned state; } lwlock;
extern int lw_lock_wait_for_var(lwlock *lock, unsigned long *var, unsigned long old,
                                unsigned long *now);
extern int lw_lock_acquire(lwlock *lock, int mode);
extern int lw_lock_try(lwlock *lock);
extern void lw_lock_release(lwlock *lock);

/* the locks writers insert under, each with how far its holder has inserted */
typedef struct insert_slot { lwlock lock; unsigned long at; } insert_slot;
static insert_slot slots[8];

/* wait until every insertion before upto has finished: for each lock, again and again
   until it is free or its holder has passed upto */
unsigned long wait_for_inserts(unsigned long upto)
{
    unsigned long done = upto;
    int i;
    for (i = 0; i < 8; i++) {
        unsigned long at = 0;
        do {
            if (lw_lock_wait_for_var(&slots[i].lock, &slots[i].at, at, &at)) {
                at = 0;
                break;
            }
        } while (at < upto);
        if (at && at < done)
            done = at;
    }
    return done;
}

/* take a lock by trying until it is free */
void take_spinning(insert_slot *s)
{
    while (!lw_lock_try(&s->lock))
        sched_yield();
    s->at = 0;
}

/* a round of work under the lock while there is work: waits for none of it */
typedef struct queue { lwlock lock; int n; } queue;
void drain(queue *q)
{
    while (q->n > 0) {
        lw_lock_acquire(&q->lock, 1);
        q->n--;
        lw_lock_release(&q->lock);
        sched_yield();
    }
}
"""


def test_a_loop_that_calls_a_lock_again_until_it_may_go_on_waits_for_it(tmp_path):
    """A loop that calls a lock function again until what the call said (its result, or what
    it wrote through ``&at``) lets it go on WAITs for that lock, at the loop: a lock waited
    for by its name's verb (``lw_lock_wait_for_var``), one tried until it is free. A walk of
    a table of locks is no retry; a loop that takes a lock for each round of its work and
    tests something else waits for nothing."""
    gained, lost = _difference(tmp_path, {"insert.c": LOCK_WAITS}, "waits_around_locks")
    assert {(f, k, r) for f, k, r, _ in gained} == {
        ("wait_for_inserts", "WAIT", "slots"),
        ("take_spinning", "WAIT", "insert_slot.lock"),
    }, gained
    assert lost == set()


LOG_READ = """
#include <pthread.h>
#include <unistd.h>
/* a page of the log's buffers */
typedef struct log_page { unsigned long end; char data[8192]; } log_page;

/* the log's shared state: its buffer pages, how far they are initialized, and how far
   written out */
typedef struct log_ctl {
    pthread_mutex_t lock;
    unsigned long initialized_upto;
    unsigned long written_upto;
    unsigned long n_pages;
    unsigned long max_pages;
    log_page *pages;
} log_ctl;

/* this process's own: the shared state, and the segment file it writes to */
static log_ctl *ctl;
static log_page *open_segment;
static unsigned long segments_open;
static int segment_fd = -1;
static unsigned long max_segments = 64;
static pthread_mutex_t segment_lock = PTHREAD_MUTEX_INITIALIZER;

/* make the log's pages ready up to upto: an old page not yet written out is written
   first, and the loop goes on until the page is initialized */
void advance_buffers(unsigned long upto)
{
    while (upto >= ctl->initialized_upto) {
        unsigned long idx = ctl->initialized_upto % ctl->max_pages;
        if (ctl->written_upto < ctl->pages[idx].end) {
            pwrite(segment_fd, ctl->pages[idx].data, 8192, 0);
            fsync(segment_fd);
            ctl->written_upto = ctl->pages[idx].end;
        }
        ctl->pages[idx].end = upto;
        ctl->initialized_upto += 8192;
    }
}
"""


def test_a_wait_loop_waits_for_the_resource_its_condition_reads(tmp_path):
    """A file that keeps its state in variables of its own (a pointer to the log's shared
    state, its segment's descriptor) makes a record the recall gives its function; the loop
    waits for what its condition reads, the shared state, and its WAIT moves there."""
    gained, lost = _difference(tmp_path, {"wal.c": LOG_READ}, "waits_on_what_they_read")
    assert {(f, k, r) for f, k, r, _ in gained} == {("advance_buffers", "WAIT", "log_ctl")}
    assert {(f, k, r) for f, k, r, _ in lost} == {("advance_buffers", "WAIT", "wal_c")}


WRITTEN_OUT = """
#include <pthread.h>
#include <unistd.h>
/* a page of the log's buffers */
typedef struct log_page { unsigned long end; char data[8192]; } log_page;

/* the log's shared state: its pages, how far they are filled, and how far written out */
typedef struct log_ctl {
    pthread_mutex_t lock;
    pthread_cond_t written;
    unsigned long insert_upto;
    unsigned long written_upto;
    unsigned long n_pages;
    unsigned long max_pages;
    unsigned long last_switch;
    log_page *pages;
} log_ctl;

static log_ctl *ctl;
static int log_fd = -1;

/* wait until the log is written out up to upto: room for new pages */
void log_wait_written(unsigned long upto)
{
    pthread_mutex_lock(&ctl->lock);
    while (ctl->written_upto < upto)
        pthread_cond_wait(&ctl->written, &ctl->lock);
    pthread_mutex_unlock(&ctl->lock);
}

/* write the filled pages out, then say how far: the waiters' room */
void log_write(unsigned long upto)
{
    unsigned long done = ctl->written_upto;
    while (done < upto) {
        log_page *p = &ctl->pages[(done / 8192) % ctl->max_pages];
        pwrite(log_fd, p->data, 8192, done);
        done += 8192;
    }
    fsync(log_fd);
    if (done % (8192 * 64) == 0)
        ctl->last_switch = done;
    pthread_mutex_lock(&ctl->lock);
    ctl->written_upto = done;
    pthread_cond_broadcast(&ctl->written);
    pthread_mutex_unlock(&ctl->lock);
}

/* a request to write: nothing went out yet */
void log_request(unsigned long upto)
{
    pthread_mutex_lock(&ctl->lock);
    ctl->written_upto = upto;
    pthread_mutex_unlock(&ctl->lock);
    fsync(log_fd);
}

/* at start, the log is as far as the file on disk */
void log_startup(unsigned long end)
{
    fsync(log_fd);
    ctl->written_upto = end;
}
"""


def test_storing_what_waiters_read_after_writing_out_releases(tmp_path):
    """A function that writes the log's pages out and then stores how far (the member the
    waiters for room compare with what they need) gives that room back: a RELEASE at the
    store. Storing it before anything went out (a request), or at startup, gives nothing
    back."""
    gained, lost = _difference(tmp_path, {"wal.c": WRITTEN_OUT}, "published_after_writing")
    assert {(f, k, r) for f, k, r, _ in gained} == {("log_write", "RELEASE", "log_ctl")}
    assert lost == set()


def test_a_loop_that_waits_only_on_one_branch_waits_on_that_branch(tmp_path):
    """The loop that makes the log's pages ready does work on every pass (it initializes a
    page) and waits only when the page to reuse is not written out yet: its WAIT is that
    branch, where every call that blocks stands, not the loop, so the work is not waiting."""
    (tmp_path / "wal.c").write_text(LOG_READ)
    lines = LOG_READ.splitlines()
    loop = next(i for i, x in enumerate(lines, 1) if "while (upto" in x)
    branch = next(i for i, x in enumerate(lines, 1) if "if (ctl->written_upto <" in x)

    def waits(rules) -> set[int]:
        r = scan(tmp_path, jobs=1, rules=rules)
        return {
            c.line for c in r.verified() if c.function == "advance_buffers" and c.kind == "WAIT"
        }

    assert waits(RULES) == {branch}
    named = [r for r in RULES if r.__name__ == "waits_on_their_slow_branch"]
    assert waits(_without(*named)) == {loop}


QUEUE_FULL = """
#include <pthread.h>
/* a bounded queue of messages */
typedef struct msg_queue {
    pthread_mutex_t mut;
    pthread_cond_t not_full;
    int size;
    int max_size;
    int wait_when_full;
    long dropped;
} msg_queue;

/* add a message: when the queue is full, drop it or wait for room, as configured */
int queue_add(msg_queue *q, void *msg)
{
    int rc = 0;
    pthread_mutex_lock(&q->mut);
    while (q->size >= q->max_size) {
        if (!q->wait_when_full) {
            q->dropped++;
            rc = -1;
            goto out;
        } else {
            pthread_cond_wait(&q->not_full, &q->mut);
        }
    }
    q->size++;
out:
    pthread_mutex_unlock(&q->mut);
    return rc;
}
"""


def test_a_loop_whose_other_branch_leaves_is_one_wait(tmp_path):
    """A queue that is full drops the message and returns, or waits for room: every pass that
    goes round waits, so the WAIT stays the loop's, not one per wait of the condition."""
    (tmp_path / "queue.c").write_text(QUEUE_FULL)
    loop = next(i for i, x in enumerate(QUEUE_FULL.splitlines(), 1) if "while (q->size" in x)
    r = scan(tmp_path, jobs=1, rules=RULES)
    waits = {c.line for c in r.verified() if c.function == "queue_add" and c.kind == "WAIT"}
    assert waits == {loop}


def test_a_count_moved_on_the_pools_record_gives_back_the_parameter_linked_in():
    """A release that moves only the pool's own count (``cycle->free_n++``) gives back the
    parameter the function links into a record (``cycle->free = c``): that is where its
    callers hand the unit over. Without such a link it names no parameter."""
    from gigi.scan._parse import Assign, Function
    from gigi.scan._rules.wrappers import released_at

    def put(*links: Assign) -> Function:
        counted = Assign(4, "cycle.free_n", "cycle", ["cycle.free_n"], "+=", "cycle->free_n++")
        return Function(
            "put_conn", "c.c", 1, 5, "", "void", [("conn_t *", "c")], "", assigns=[*links, counted]
        )

    linked = Assign(3, "cycle.free", "cycle", ["c"], "=", "cycle->free = c")
    released: dict = {}
    released_at(released, put(linked), "conn", 4, "")
    assert released == {"put_conn": {"conn": {0}}}
    released = {}
    released_at(released, put(), "conn", 4, "")
    assert released == {"put_conn": {"conn": set()}}


OWN_LOCK_FUNCTION = """
typedef struct lwlock { unsigned int state; int waiters; } lwlock;
extern int lock_attempt(lwlock *lock, int mode);
extern void lock_sleep(lwlock *lock);

/* Take LOCK in MODE, sleeping until it is free. */
void LWLockAcquire(lwlock *lock, int mode)
{
    for (;;) {
        if (lock_attempt(lock, mode))
            break;
        lock_sleep(lock);
    }
}

/* the insertion locks, and the one this process takes */
typedef struct insert_lock { lwlock lock; long inserting_at; } insert_lock;
extern insert_lock *InsertLocks;
static int my_lock_no;

/* Take one of the insertion locks. */
void InsertLockAcquire(void)
{
    LWLockAcquire(&InsertLocks[my_lock_no].lock, 1);
}
"""


def test_taking_a_named_lock_through_the_codes_own_lock_function_waits_in_it(tmp_path):
    """A function whose job is to take a lock of its own naming (one of the insertion locks)
    through a lock function of the code's own takes that lock, and waits for it where the
    lock function waits inside (sleeping until the lock is free); the lock function's own
    wait stays on its own resource."""
    got = _kept(tmp_path, {"lock.c": OWN_LOCK_FUNCTION}, RULES)
    assert got == {
        ("LWLockAcquire", "WAIT", "lwlock", ""),
        ("InsertLockAcquire", "ACQUIRE", "InsertLocks", ""),
        ("InsertLockAcquire", "WAIT", "InsertLocks", ""),
    }, got


WAITED_OBJECT = """
#include <stdbool.h>
#include <semaphore.h>

/* A lightweight lock: an exclusive bit and a count of shared holders, sleepers on sem. */
typedef struct lwlock { unsigned state; int nwaiters; sem_t sem; } lwlock_t;

#define EXCLUSIVE 0x1000000u

/* Try to take LOCK: whether the caller must wait. */
static bool lwlock_attempt(lwlock_t *lock, bool exclusive)
{
    unsigned old = lock->state;
    unsigned desired = old;
    if (exclusive ? old != 0 : (old & EXCLUSIVE) != 0)
        return true;
    desired += exclusive ? EXCLUSIVE : 1;
    return !__sync_bool_compare_and_swap(&lock->state, old, desired);
}

/* Take LOCK, sleeping until it is free. */
void lwlock_acquire(lwlock_t *lock, bool exclusive)
{
    for (;;) {
        if (!lwlock_attempt(lock, exclusive))
            break;
        lock->nwaiters++;
        sem_wait(&lock->sem);
        lock->nwaiters--;
    }
}
"""


def test_a_wait_is_for_the_object_its_function_goes_on_to_take(tmp_path):
    """The lock function's wait is for the lock it is handed and then takes: with no object,
    its blame would go to the holders of every lock of the kind."""
    gained, lost = _difference(tmp_path, {"lock.c": WAITED_OBJECT}, "waits_name_their_object")
    assert gained == {("lwlock_acquire", "WAIT", "lwlock", "lock")}, gained
    assert lost == {("lwlock_acquire", "WAIT", "lwlock", "")}, lost


def test_a_wait_that_takes_nothing_is_for_the_one_object_of_the_kind_it_is_handed(tmp_path):
    """A function that only waits (until a variable under the lock moves), handed one lock
    of the type the lock's events name, waits for that lock; one handed two does not say
    which."""
    from dataclasses import replace

    from gigi.scan._rules._found import Found, Site
    from gigi.scan._rules.wait_objects import waits_name_their_object

    waits = """
void lwlock_wait_for_var(lwlock_t *lock, int *var, int old)
{
    while (*var == old)
        sem_wait(&lock->sem);
}

void lwlock_wait_either(lwlock_t *one, lwlock_t *other)
{
    while (one->state && other->state)
        sem_wait(&one->sem);
}
"""
    (tmp_path / "lock.c").write_text(WAITED_OBJECT + waits)
    r = scan(tmp_path, jobs=1)
    functions = {(f.file, f.name): f for u in r.units for f in u.functions}
    take = next(c for c in r.verified() if c.kind == "ACQUIRE")
    sites = [Site(c, ok, why) for c, ok, why in r.candidates]
    for name in ("lwlock_wait_for_var", "lwlock_wait_either"):
        fn = functions[("lock.c", name)]
        wait = replace(take, function=name, line=fn.loops[0].line, kind="WAIT", object_expr="")
        sites.append(Site(wait, True, "verified: a loop that sleeps"))
    found = Found(functions, tuple(r.resources), (), tuple(sites))
    got = {
        (s.candidate.function, s.candidate.object_expr)
        for s in waits_name_their_object(found).sites
        if s.candidate.kind == "WAIT"
    }
    assert got == {
        ("lwlock_acquire", "lock"),
        ("lwlock_wait_for_var", "lock"),
        ("lwlock_wait_either", ""),
    }, got
