/*
 * gigi's native probes: record WAIT / ACQUIRE / USE / RELEASE events of application-defined
 * resources from C and C++ programs into a trace directory of Arrow IPC stream segments
 * (trace format v1: tables events, tasks, resources, sites).
 *
 * Off unless the environment variable GIGI_TRACE names a directory when the program starts:
 * then every probe is one load and one predictable branch. Each thread writes fixed-width
 * records into a ring of its own; a writer thread turns them into segments every
 * GIGI_INTERVAL_MS (default 200) and at exit. A full ring drops the event and counts it per
 * resource: by default the program never blocks. Segments are written under a temporary name
 * and renamed, so a killed process leaves every segment it flushed readable.
 *
 * Environment: GIGI_TRACE (trace directory), GIGI_INTERVAL_MS, GIGI_RING_RECORDS (records per
 * thread, a power of two, default 16384: 1 MiB a thread), GIGI_SAMPLE (name=N,... : keep one
 * event in N of those resources), GIGI_CLOCK=monotonic (stamp with clock_gettime, not the
 * TSC; the trace holds CLOCK_MONOTONIC ns either way), GIGI_BLOCK_MS (lossless mode, as
 * LTTng's blocking channels: a thread whose ring is full waits up to that long for the writer
 * before it drops; -1 waits as long as the writer runs. The wait slows the program where
 * events come faster than the writer can write them, and shows in the trace as time between
 * that thread's events; the default, 0, drops at once).
 *
 * Build: cc -I$(gigi-query probes cflags) ... gigi_probe.c -lpthread (see `gigi-query probes
 * cflags` and `gigi-query probes libs`). C11 and pthreads, nothing else.
 */
#ifndef GIGI_PROBE_H
#define GIGI_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gigi_kind { GIGI_WAIT = 0, GIGI_ACQUIRE = 1, GIGI_USE = 2, GIGI_RELEASE = 3 };

/* Nonzero while recording (GIGI_TRACE was set at start-up). */
extern volatile int gigi_enabled_;

/* Declare a resource class ("sqlite.pcache"); returns its id, the same for the same name.
 * capacity < 0: unknown. unit: "pages", "bytes", "slots", "locks", "records" (or NULL).
 * sharing: "exclusive", "shared", "pool", "log" (or NULL). Returns -1 when off or full. */
int32_t gigi_resource(const char *name, int64_t capacity, const char *unit, const char *sharing);
/* The same, keeping one event in `sample_every`, keyed by object (or, for object 0, by task)
 * so that an object's events are kept or skipped together and its holds still pair; the
 * trace records N. GIGI_SAMPLE="name=N,other=M" sets it for resources declared without. */
int32_t gigi_resource_sampled(const char *name, int64_t capacity, const char *unit,
                              const char *sharing, int64_t sample_every);

/* Describe a code location (the sites table): ids come from `gigi-query scan`. */
void gigi_site(int32_t site, const char *file, int32_t line, const char *function, int kind,
               const char *resource, const char *origin, int verified);

/* Tasks: the current task is per thread. gigi_task_begin starts a task whose parent is the
 * thread's current one and makes it current; gigi_task_end ends it and makes its parent
 * current again. gigi_task_switch makes an existing task current (work handed to a pool
 * thread) and returns the one it replaces. Ids are unique across the processes of a host. */
int64_t gigi_task_begin(const char *name, int background);
void gigi_task_end(int64_t task);
int64_t gigi_task_switch(int64_t task);
int64_t gigi_task_current(void);

/* The events. object 0 = the resource as a whole; site -1 = unknown. */
void gigi_event_(int kind, int32_t rid, int64_t object, int64_t amount, int32_t site,
                 int has_value, int64_t value);
/* A WAIT is recorded when it ends, with its start and length; one still open when the trace
 * is written (or the process exits) is recorded with a null length. Returns a token for
 * gigi_wait_end (0 when off). Waits nest up to 8 deep per thread. */
int64_t gigi_wait_begin_(int32_t rid, int64_t object, int64_t amount, int32_t site);
void gigi_wait_end_(int64_t token);
/* A WAIT around one blocking call (a lock function that sleeps inside when it must) ends as
 * gigi_wait_end does, but is recorded only when the call took its slow way: longer than
 * GIGI_SLOW_CALL_NS. Such calls take either their fast way, in about a microsecond (a cold
 * first call a little more), or go to sleep on a futex or a semaphore and are woken tens of
 * microseconds later: of 7.3M calls to PostgreSQL's WAL insertion locks under load, 7.27M
 * returned in under 1 us, 704 in 1-5 us, and 37k slept 20 us or more. */
#define GIGI_SLOW_CALL_NS 5000
void gigi_wait_end_slow_(int64_t token);

/* Flush everything recorded so far into segments now (the writer also does it on its own). */
void gigi_flush(void);
/* Events dropped so far because a thread's ring was full. */
uint64_t gigi_dropped(void);

#define GIGI_LIKELY_OFF(x) __builtin_expect(!(x), 1)

#ifdef __cplusplus
#define GIGI_TLS_IE thread_local __attribute__((tls_model("initial-exec")))
#else
#define GIGI_TLS_IE _Thread_local __attribute__((tls_model("initial-exec")))
#endif

/* The hot path, inline: with the TSC as the clock and nothing sampled, an event is written
 * straight into the thread's ring (a record of 64 bytes, then the head's release store);
 * otherwise, and whenever the ring is full or half full (drops to count, the writer to
 * nudge), gigi_event_ does it. These mirror the runtime's own structures, which begin with
 * the same fields (gigi_probe.c checks that they match). */
struct gigi_record_ {
    int64_t ts, task, amount, object, value, dur;
    int32_t rid, site;
    uint8_t kind, has_value, open, pad[5];
};
struct gigi_ring_ {
    struct gigi_record_ *records;
    uint64_t mask, head, tail;
    int64_t thread, implicit_task;
};
/* the thread's ring (NULL until its first event), its current task, and whether the
 * inline path may write (TSC clock, no sampling) */
extern GIGI_TLS_IE struct gigi_ring_ *gigi_ring_mine_;
extern GIGI_TLS_IE int64_t gigi_task_now_;
extern volatile int gigi_inline_;

static inline void gigi_emit_(int kind, int32_t rid, int64_t object, int64_t amount,
                              int32_t site) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    struct gigi_ring_ *r = gigi_ring_mine_;
    if (__builtin_expect(r != 0 && gigi_inline_, 1)) {
        uint64_t head = r->head; /* written by this thread only */
        uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
        if (__builtin_expect(head - tail <= r->mask && ((head + 1) & (r->mask >> 1)) != 0, 1)) {
            struct gigi_record_ *e = &r->records[head & r->mask];
            int64_t task = gigi_task_now_;
            e->ts = (int64_t)__builtin_ia32_rdtsc();
            e->task = task ? task : r->implicit_task;
            e->amount = amount;
            e->object = object;
            e->value = 0;
            e->dur = 0;
            e->rid = rid;
            e->site = site;
            e->kind = (uint8_t)kind;
            e->has_value = 0;
            e->open = 0;
            __atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
            return;
        }
    }
#endif
    gigi_event_(kind, rid, object, amount, site, 0, 0);
}

static inline void gigi_acquire(int32_t rid, int64_t object, int64_t amount, int32_t site) {
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return;
    gigi_emit_(GIGI_ACQUIRE, rid, object, amount, site);
}
static inline void gigi_use(int32_t rid, int64_t object, int64_t amount, int32_t site) {
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return;
    gigi_emit_(GIGI_USE, rid, object, amount, site);
}
static inline void gigi_release(int32_t rid, int64_t object, int64_t amount, int32_t site) {
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return;
    gigi_emit_(GIGI_RELEASE, rid, object, amount, site);
}
/* The same with a value sampled at the site (free pages, queue length). */
static inline void gigi_event_value(int kind, int32_t rid, int64_t object, int64_t amount,
                                    int32_t site, int64_t value) {
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return;
    gigi_event_(kind, rid, object, amount, site, 1, value);
}
static inline int64_t gigi_wait_begin(int32_t rid, int64_t object, int64_t amount,
                                      int32_t site) {
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return 0;
    return gigi_wait_begin_(rid, object, amount, site);
}
static inline void gigi_wait_end(int64_t token) {
    if (GIGI_LIKELY_OFF(token)) return;
    gigi_wait_end_(token);
}
/* A lock whose state is a level (none < shared < reserved < exclusive) moved from `before`
 * to `after`: a step up acquires as many units, a step down releases them. */
static inline void gigi_level(int32_t rid, int64_t before, int64_t after, int32_t site) {
    if (GIGI_LIKELY_OFF(gigi_enabled_) || after == before) return;
    if (after > before)
        gigi_emit_(GIGI_ACQUIRE, rid, 0, after - before, site);
    else
        gigi_emit_(GIGI_RELEASE, rid, 0, before - after, site);
}

/* For __attribute__((cleanup)): a wait that ends however its scope is left. */
static inline void gigi_wait_cleanup(int64_t *token) { gigi_wait_end(*token); }
/* The same for a wait around one blocking call: kept only when the call was slow. */
static inline void gigi_wait_cleanup_slow(int64_t *token) {
    if (GIGI_LIKELY_OFF(*token)) return;
    gigi_wait_end_slow_(*token);
}

/* One event per call path. A function that performs an event of some kind on a resource
 * opens a scope for the pair while it runs; an event of that kind on that resource from a
 * function it calls (a helper, a wrapper's inner half) and its own are one event:
 * sqlite3PagerUnref -> sqlite3PagerUnrefNotNull records one RELEASE, not two. The caller's
 * is the one recorded (its object is the one its callers name): where its own comes first,
 * its callees' are not recorded; where a callee's comes first, the callee's is held back
 * until the caller records its own, which replaces it, or returns without one (its site is
 * on a path this call did not take: a lock function's second attempt), when the callee's is
 * recorded, with its own time. A function that records its own event more than once (a
 * release in a loop) records each.
 *
 *     int s __attribute__((cleanup(gigi_scope_leave))) = gigi_scope_enter(rid, GIGI_RELEASE);
 *     ... gigi_scoped(GIGI_RELEASE, rid, object, amount, site, s);
 *
 * Scopes nest up to 32 deep per thread; deeper ones are not tracked (their events recorded),
 * and up to 32 events are held back per thread (more are recorded at once). */
#define GIGI_MAX_SCOPES 32
/* The open scopes of the thread, kept inline: a scope costs a few instructions, no call; each
 * a key (gigi_scope_key_) and whether it recorded its own event. */
extern GIGI_TLS_IE int32_t gigi_scopes_[GIGI_MAX_SCOPES];
extern GIGI_TLS_IE uint8_t gigi_scope_recorded_[GIGI_MAX_SCOPES];
extern GIGI_TLS_IE int gigi_nscopes_;
/* the events held back, waiting on a caller's scope (gigi_probe.c keeps them) */
extern GIGI_TLS_IE int gigi_npending_;
void gigi_pend_(int kind, int32_t rid, int64_t object, int64_t amount, int32_t site, int depth);
void gigi_settle_(int depth, int recorded);
/* A token is the scope's depth + 1 (0: not tracked). */
/* (declarations first in each: a build with -Wdeclaration-after-statement, PostgreSQL's,
 * includes this header in every file it instruments) */
static inline int32_t gigi_scope_key_(int32_t rid, int kind) {
    return ((rid << 2) | (kind & 3)) + 1;
}
static inline int gigi_scope_enter(int32_t rid, int kind) {
    int n;
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return 0;
    n = gigi_nscopes_;
    if (n >= GIGI_MAX_SCOPES || rid < 0) return 0;
    gigi_scopes_[n] = gigi_scope_key_(rid, kind);
    gigi_scope_recorded_[n] = 0;
    gigi_nscopes_ = n + 1;
    return n + 1;
}
/* Leaving a scope: its callees' events held back and not replaced go to the nearest caller
 * with the same scope open, or, with none, are recorded. */
static inline void gigi_scope_leave(int *token) {
    if (GIGI_LIKELY_OFF(*token)) return;
    if (gigi_npending_) gigi_settle_(*token - 1, 0);
    if (*token <= gigi_nscopes_) gigi_nscopes_ = *token - 1;
}

/* The event of a probe whose function opened the scope `token` (0: it opens none, as it calls
 * no function with such a site): not recorded where a caller with the same scope open
 * recorded its own; held back where one may still; else recorded, in place of its callees'
 * held back. */
static inline void gigi_scoped(int kind, int32_t rid, int64_t object, int64_t amount,
                               int32_t site, int token) {
    int32_t key;
    int own, n, i, at = -1;
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return;
    key = gigi_scope_key_(rid, kind);
    own = token >= 1 && token <= gigi_nscopes_ ? token - 1 : -1;
    n = own >= 0 ? own : (gigi_nscopes_ < GIGI_MAX_SCOPES ? gigi_nscopes_ : GIGI_MAX_SCOPES);
    for (i = 0; i < n; i++)
        if (gigi_scopes_[i] == key) {
            if (gigi_scope_recorded_[i]) return; /* a caller recorded it */
            at = i;
        }
    if (own >= 0) {
        gigi_scope_recorded_[own] = 1;
        if (gigi_npending_) gigi_settle_(own, 1); /* its callees': this one stands for them */
    }
    if (at >= 0)
        gigi_pend_(kind, rid, object, amount, site, at); /* a caller may still record its own */
    else
        gigi_emit_(kind, rid, object, amount, site);
}

/* What a return statement hands back, acquired: EXPR (a pointer a call made) evaluated once,
 * recorded as the object of an ACQUIRE of RID in the scope TOKEN (gigi_scoped) when it is not
 * NULL, and handed back as it is. */
#define GIGI_ACQUIRED(expr, rid, amount, site, token)                                       \
    ({                                                                                      \
        __typeof__(expr) gigi_acquired_ = (expr);                                           \
        if (gigi_acquired_)                                                                 \
            gigi_scoped(GIGI_ACQUIRE, (rid), (int64_t)(uintptr_t)gigi_acquired_, (amount),  \
                        (site), (token));                                                   \
        gigi_acquired_;                                                                     \
    })

/* Whether the event of the scope `token` is to be recorded: tracing is on and no caller has
 * the same scope open (token 0: no scope was opened; recorded). A wait's check: a wait
 * opens its scope where it begins. */
static inline int gigi_scope_outermost(int token) {
    int32_t key;
    int i;
    if (GIGI_LIKELY_OFF(gigi_enabled_)) return 0;
    if (token < 1 || token > gigi_nscopes_) return 1;
    key = gigi_scopes_[token - 1];
    for (i = 0; i < token - 1; i++)
        if (gigi_scopes_[i] == key) return 0;
    return 1;
}

#ifdef __cplusplus
}
#endif
#endif /* GIGI_PROBE_H */
