/* gigi's native probe runtime: see gigi_probe.h. C11 and pthreads. */
#define _GNU_SOURCE
#include "gigi_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arrow_ipc.h"

#define MAX_RESOURCES 4096
#define MAX_WAIT_DEPTH 8
#define MAX_TASK_DEPTH 64
#define WRITER "gigi-native 0.1.0"

volatile int gigi_enabled_ = 0;

/* One event as the hot path writes it: 64 bytes. */
typedef struct {
    int64_t ts, task, amount, object, value, dur;
    int32_t rid, site;
    uint8_t kind, has_value, open, pad[5];
} record_t;

typedef struct {
    int64_t ts, object, amount, task;
    int32_t rid, site;
} open_wait_t;

/* A thread's ring: the thread writes at head, the writer reads from tail. */
typedef struct ring {
    record_t *records;
    uint64_t mask;
    _Atomic uint64_t head, tail;
    int64_t thread, implicit_task;
    _Atomic int dead, nwaits;
    open_wait_t waits[MAX_WAIT_DEPTH];
    struct ring *next;
} ring_t;

typedef struct {
    char *name, *unit, *sharing;
    int64_t capacity, sample_every;
} resource_t;

typedef struct {
    int32_t site, line, kind, verified;
    char *file, *function, *resource, *origin;
} site_t;

/* A task row as the tasks table has it; a begin and an end arrive as separate rows that
 * ingest merges by id. */
typedef struct {
    int64_t task, parent, start, end;
    char *name;
    int kind; /* 0 unsaid, 1 foreground, 2 background */
    int has_parent, has_start, has_end;
} task_row_t;

static struct {
    char dir[4096];
    char host[256];
    char trace_id[512];
    int interval_ms;
    uint64_t ring_records;
    int pid;

    pthread_mutex_t lock; /* rings, resources, sites, tasks */
    pthread_mutex_t flush_lock;
    pthread_cond_t wake;
    pthread_t writer;
    int writer_running, stopping;
    _Atomic int nudged;
    ring_t *rings;

    resource_t resources[MAX_RESOURCES];
    int nresources;
    _Atomic uint64_t drops[MAX_RESOURCES];
    uint32_t sample_every[MAX_RESOURCES]; /* 0 or 1: every event */
    char sample_spec[1024];               /* GIGI_SAMPLE */
    site_t *sites;
    int nsites, sites_cap, sites_written;
    task_row_t *tasks;
    int ntasks, tasks_cap;
    int64_t task_counter;
    uint64_t seq;
    uint64_t snapshot_key, snapshot_drops;
    int64_t snapshot_ns, tasks_ns;
    int write_failed;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .flush_lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER};

/* the header's inline path writes records and reads rings through its mirrors of them */
_Static_assert(sizeof(record_t) == sizeof(struct gigi_record_), "record layout");
_Static_assert(offsetof(record_t, kind) == offsetof(struct gigi_record_, kind), "record");
_Static_assert(offsetof(record_t, open) == offsetof(struct gigi_record_, open), "record");
_Static_assert(offsetof(ring_t, head) == offsetof(struct gigi_ring_, head), "ring layout");
_Static_assert(offsetof(ring_t, tail) == offsetof(struct gigi_ring_, tail), "ring layout");
_Static_assert(offsetof(ring_t, implicit_task) == offsetof(struct gigi_ring_, implicit_task),
               "ring layout");

static pthread_key_t ring_key;
/* initial-exec: a thread-local is one load off the thread pointer, not a call (the runtime
 * is linked into the program, or into a library the program loads at start-up); the
 * header's inline path reads both */
GIGI_TLS_IE struct gigi_ring_ *gigi_ring_mine_;
GIGI_TLS_IE int64_t gigi_task_now_;
#define my_ring ((ring_t *)gigi_ring_mine_)
#define cur_task gigi_task_now_
/* the TSC is the clock and no resource is sampled: events may be written inline */
volatile int gigi_inline_ = 0;
static GIGI_TLS_IE int64_t task_stack[MAX_TASK_DEPTH][2]; /* task, the one it replaced */
static GIGI_TLS_IE int task_depth;
/* the open scopes (their keys, and whether each recorded its own event) and the events held
 * back: the header's inline functions keep them */
GIGI_TLS_IE int32_t gigi_scopes_[GIGI_MAX_SCOPES];
GIGI_TLS_IE uint8_t gigi_scope_recorded_[GIGI_MAX_SCOPES];
GIGI_TLS_IE int gigi_npending_;
GIGI_TLS_IE int gigi_nscopes_;

static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* --- the clock ---------------------------------------------------------------------------
 * Events and task rows carry a stamp: where the kernel itself keeps CLOCK_MONOTONIC on an
 * invariant TSC, the raw TSC (one instruction, about 10 ns here against 24 for
 * clock_gettime), else CLOCK_MONOTONIC's ns. The writer turns stamps into CLOCK_MONOTONIC ns
 * (the trace's one clock, shared with other processes) through two points where both clocks
 * were read together: the first, taken at start-up, and the latest, taken at every flush. A
 * stamp's error is at most the reading's own (tens of ns) plus the drift between the two
 * clocks since the latest point. GIGI_CLOCK=monotonic turns the TSC off. */
static int use_tsc;
static struct {
    int64_t tsc0, ns0; /* at start-up */
    int64_t tsc, ns;   /* at the latest flush */
    double ns_per_tick;
} cal;

static inline int64_t stamp(void) {
#if defined(__x86_64__)
    if (__builtin_expect(use_tsc, 1)) return (int64_t)__builtin_ia32_rdtsc();
#endif
    return now_ns();
}

/* Both clocks read together: the TSC on either side of clock_gettime, the tightest of a few. */
static void read_both(int64_t *tsc, int64_t *ns) {
#if defined(__x86_64__)
    int64_t best = INT64_MAX;
    for (int i = 0; i < 5; i++) {
        int64_t a = (int64_t)__builtin_ia32_rdtsc(), t = now_ns();
        int64_t b = (int64_t)__builtin_ia32_rdtsc();
        if (b - a < best) best = b - a, *tsc = a + (b - a) / 2, *ns = t;
    }
#else
    *tsc = 0, *ns = now_ns();
#endif
}

static void calibrate(void) {
    if (!use_tsc) return;
    int64_t tsc, ns;
    read_both(&tsc, &ns);
    if (tsc - cal.tsc0 > 0 && ns - cal.ns0 > 0) {
        cal.tsc = tsc, cal.ns = ns;
        cal.ns_per_tick = (double)(ns - cal.ns0) / (double)(tsc - cal.tsc0);
    }
}

/* A stamp in CLOCK_MONOTONIC ns. */
static inline int64_t to_ns(int64_t s) {
    if (!use_tsc) return s;
    return cal.ns + (int64_t)((double)(s - cal.tsc) * cal.ns_per_tick);
}

/* Whether the kernel keeps CLOCK_MONOTONIC on the TSC, and the CPU says the TSC is invariant. */
static int tsc_is_the_clock(void) {
#if defined(__x86_64__)
    const char *choice = getenv("GIGI_CLOCK");
    if (choice && strcmp(choice, "monotonic") == 0) return 0;
    char line[4096];
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    int tsc = f && fgets(line, sizeof line, f) && strncmp(line, "tsc", 3) == 0;
    if (f) fclose(f);
    if (!tsc) return 0;
    int constant = 0, nonstop = 0;
    f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f) && !(constant && nonstop)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    if (f) fclose(f);
    return constant && nonstop;
#else
    return 0;
#endif
}

static void clock_init(void) {
    use_tsc = tsc_is_the_clock();
    if (!use_tsc) return;
    read_both(&cal.tsc0, &cal.ns0);
    /* every flush reads a second point before it converts anything: stamps taken since
     * start-up lie between the two, where the error is the readings' own */
    cal.tsc = cal.tsc0, cal.ns = cal.ns0, cal.ns_per_tick = 1.0;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* --- tasks -------------------------------------------------------------------------------- */

static int64_t new_task_id(void) {
    /* pid in the high 32 bits, as the Python probes do: unique across a host's processes */
    int64_t n = __atomic_add_fetch(&g.task_counter, 1, __ATOMIC_RELAXED);
    return ((int64_t)g.pid << 32) | (n & 0xFFFFFFFF);
}

static void task_row(task_row_t row) {
    pthread_mutex_lock(&g.lock);
    if (g.ntasks == g.tasks_cap) {
        int cap = g.tasks_cap ? 2 * g.tasks_cap : 256;
        task_row_t *t = realloc(g.tasks, (size_t)cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&g.lock);
            free(row.name);
            return;
        }
        g.tasks = t;
        g.tasks_cap = cap;
    }
    g.tasks[g.ntasks++] = row;
    pthread_mutex_unlock(&g.lock);
}

static void ring_free(void *p);

static ring_t *ring_new(void) {
    ring_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->records = aligned_alloc(64, g.ring_records * sizeof(record_t));
    if (!r->records) {
        free(r);
        return NULL;
    }
    /* touched now, at the thread's first event, not one page fault per 64 events later */
    memset(r->records, 0, g.ring_records * sizeof(record_t));
    r->mask = g.ring_records - 1;
    r->thread = (int64_t)syscall(SYS_gettid);
    r->implicit_task = new_task_id();
    /* named by what the thread is called (a server's process title's program, a pool's
     * thread name): "postgres 20181", "worker-3 4711"; a thread with none, "thread 4711" */
    char comm[17] = "", name[64];
    if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0 || !comm[0]) snprintf(comm, sizeof comm, "thread");
    snprintf(name, sizeof name, "%s %lld", comm, (long long)r->thread);
    task_row((task_row_t){.task = r->implicit_task, .name = strdup(name), .start = stamp(),
                          .has_start = 1});
    pthread_mutex_lock(&g.lock);
    r->next = g.rings;
    g.rings = r;
    pthread_mutex_unlock(&g.lock);
    pthread_setspecific(ring_key, r);
    return r;
}

/* A thread that exits leaves its ring to the writer, which drains and frees it. */
static void ring_free(void *p) {
    ring_t *r = p;
    task_row((task_row_t){.task = r->implicit_task, .end = stamp(), .has_end = 1});
    atomic_store_explicit(&r->dead, 1, memory_order_release);
}

static inline ring_t *ring(void) {
    ring_t *r = my_ring;
    if (__builtin_expect(r == NULL, 0)) r = ring_new(), gigi_ring_mine_ = (struct gigi_ring_ *)r;
    return r;
}

static inline int64_t task_of(ring_t *r) { return cur_task ? cur_task : r->implicit_task; }

int64_t gigi_task_begin(const char *name, int background) {
    if (!gigi_enabled_) return 0;
    ring_t *r = ring();
    if (!r) return 0;
    int64_t id = new_task_id(), parent = task_of(r);
    task_row((task_row_t){.task = id, .name = dup_or_null(name), .kind = background ? 2 : 1,
                          .parent = parent, .has_parent = 1, .start = stamp(),
                          .has_start = 1});
    if (task_depth < MAX_TASK_DEPTH) {
        task_stack[task_depth][0] = id;
        task_stack[task_depth][1] = cur_task;
        task_depth++;
    }
    cur_task = id;
    return id;
}

void gigi_task_end(int64_t task) {
    if (!gigi_enabled_ || !task) return;
    task_row((task_row_t){.task = task, .end = stamp(), .has_end = 1});
    for (int i = task_depth - 1; i >= 0; i--) {
        if (task_stack[i][0] == task) {
            if (cur_task == task) cur_task = task_stack[i][1];
            task_depth = i;
            return;
        }
    }
    if (cur_task == task) cur_task = 0;
}

int64_t gigi_task_switch(int64_t task) {
    int64_t was = cur_task;
    cur_task = task;
    return was;
}

int64_t gigi_task_current(void) {
    ring_t *r = gigi_enabled_ ? ring() : NULL;
    return r ? task_of(r) : cur_task;
}

/* --- the hot path ------------------------------------------------------------------------- */

/* A record fills one cache line, written with ordinary stores: the head's release store
 * publishes it (on x86-64 stores are never reordered with each other, so that costs no
 * fence). Non-temporal stores, which need an sfence before the head, measured slower on
 * SQLite, whose events come in bursts (bench/sqlite_overhead.py). */
static inline void store_record(record_t *dst, const record_t *src) { *dst = *src; }

/* Ask the writer to drain now. The flag outlives a signal sent while the writer is busy. */
static void nudge_writer(void) {
    atomic_store_explicit(&g.nudged, 1, memory_order_release);
    pthread_cond_signal(&g.wake);
}

/* GIGI_BLOCK_MS: how long a thread whose ring is full waits for the writer before it drops
 * (0, the default: never; negative: as long as it takes, while the writer runs) */
static int64_t block_ns;

/* A full ring, in lossless mode: nudge the writer and wait, yielding and then sleeping, until
 * it has drained a record, it stopped, or the time allowed ran out. Returns whether there is
 * room now. */
static int wait_for_room(ring_t *r, uint64_t head) {
    int64_t deadline = block_ns < 0 ? INT64_MAX : now_ns() + block_ns;
    nudge_writer();
    for (unsigned spins = 1;; spins++) {
        if (head - atomic_load_explicit(&r->tail, memory_order_acquire) <= r->mask) return 1;
        if (!__atomic_load_n(&g.writer_running, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&g.stopping, __ATOMIC_ACQUIRE) || now_ns() >= deadline)
            return 0;
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec pause = {0, 50000};
            nanosleep(&pause, NULL);
            if (spins % 256 == 0) nudge_writer(); /* a nudge lost to a busy writer */
        }
    }
}

static inline void put(ring_t *r, const record_t *rec) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (__builtin_expect(head - tail > r->mask, 0) && !(block_ns && wait_for_room(r, head))) {
        if (rec->rid >= 0 && rec->rid < MAX_RESOURCES)
            atomic_fetch_add_explicit(&g.drops[rec->rid], 1, memory_order_relaxed);
        return;
    }
    store_record(&r->records[head & r->mask], rec);
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    /* half full: the writer drains now rather than at its next interval */
    if (__builtin_expect(((head + 1) & (r->mask >> 1)) == 0, 0)) nudge_writer();
}

/* One event in N kept, by the same key and hash as the Python probes. */
static inline int skipped(ring_t *r, int32_t rid, int64_t object) {
    uint32_t every = rid >= 0 && rid < MAX_RESOURCES ? g.sample_every[rid] : 0;
    if (__builtin_expect(every <= 1, 1)) return 0;
    uint64_t key = (uint64_t)(object ? object : task_of(r));
    return ((key * 0x9E3779B97F4A7C15ull) >> 17) % every != 0;
}

void gigi_event_(int kind, int32_t rid, int64_t object, int64_t amount, int32_t site,
                 int has_value, int64_t value) {
    ring_t *r = ring();
    if (!r || skipped(r, rid, object)) return;
    record_t rec = {.ts = stamp(), .task = task_of(r), .amount = amount, .object = object,
                    .value = value, .rid = rid, .site = site, .kind = (uint8_t)kind,
                    .has_value = (uint8_t)(has_value != 0)};
    put(r, &rec);
}

/* Events held back while a caller with the same scope open may still record its own (the
 * header's gigi_scoped), each with the depth of the scope it waits on, in the order made. */
#define MAX_PENDING 32
static GIGI_TLS_IE struct {
    record_t rec;
    int depth;
} pending[MAX_PENDING];

void gigi_pend_(int kind, int32_t rid, int64_t object, int64_t amount, int32_t site, int depth) {
    ring_t *r = ring();
    if (!r) return;
    record_t rec = {.ts = stamp(), .task = task_of(r), .amount = amount, .object = object,
                    .rid = rid, .site = site, .kind = (uint8_t)kind};
    if (gigi_npending_ >= MAX_PENDING) { /* too many held back: recorded now */
        if (!skipped(r, rid, object)) put(r, &rec);
        return;
    }
    pending[gigi_npending_].rec = rec;
    pending[gigi_npending_].depth = depth;
    gigi_npending_++;
}

/* The events held back on the scope at DEPTH and deeper ones: dropped when the scope
 * RECORDED its own event; when it is left without, each goes to the nearest caller with the
 * same scope open, or is recorded (dropped if that caller recorded its own). */
void gigi_settle_(int depth, int recorded) {
    ring_t *r = ring();
    int kept = 0;
    for (int i = 0; i < gigi_npending_; i++) {
        if (pending[i].depth < depth) {
            pending[kept++] = pending[i];
            continue;
        }
        if (recorded) continue;
        const record_t *x = &pending[i].rec;
        int32_t key = gigi_scope_key_(x->rid, x->kind);
        int at = -1;
        for (int j = (depth < gigi_nscopes_ ? depth : gigi_nscopes_) - 1; j >= 0 && at < 0; j--)
            if (gigi_scopes_[j] == key) at = j;
        if (at >= 0) {
            if (!gigi_scope_recorded_[at]) {
                pending[i].depth = at;
                pending[kept++] = pending[i];
            }
        } else if (r && !skipped(r, x->rid, x->object)) {
            put(r, x);
        }
    }
    gigi_npending_ = kept;
}

int64_t gigi_wait_begin_(int32_t rid, int64_t object, int64_t amount, int32_t site) {
    ring_t *r = ring();
    if (!r || skipped(r, rid, object)) return 0;
    int depth = atomic_load_explicit(&r->nwaits, memory_order_relaxed);
    if (depth >= MAX_WAIT_DEPTH) return 0;
    r->waits[depth] = (open_wait_t){stamp(), object, amount, task_of(r), rid, site};
    atomic_store_explicit(&r->nwaits, depth + 1, memory_order_release);
    return depth + 1;
}

/* Close the wait TOKEN, recording it when it lasted at least SHORTEST ns. */
static void wait_end(int64_t token, int64_t shortest) {
    ring_t *r = my_ring;
    if (!r || token < 1 || token > MAX_WAIT_DEPTH) return;
    open_wait_t w = r->waits[token - 1];
    int64_t dur = stamp() - w.ts;
    atomic_store_explicit(&r->nwaits, (int)token - 1, memory_order_release);
    if (dur < shortest) return;
    record_t rec = {.ts = w.ts, .task = w.task, .amount = w.amount, .object = w.object,
                    .dur = dur, .rid = w.rid, .site = w.site, .kind = GIGI_WAIT};
    put(r, &rec);
}

void gigi_wait_end_(int64_t token) { wait_end(token, 0); }

void gigi_wait_end_slow_(int64_t token) { wait_end(token, GIGI_SLOW_CALL_NS); }

/* --- registries --------------------------------------------------------------------------- */

/* N for a resource named in GIGI_SAMPLE ("name=N,other=M"), else 1. */
static int64_t sample_spec_for(const char *name) {
    size_t len = strlen(name);
    for (const char *p = g.sample_spec; *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (eq && eq < end && (size_t)(eq - p) == len && strncmp(p, name, len) == 0)
            return atoll(eq + 1) > 1 ? atoll(eq + 1) : 1;
        p = *end ? end + 1 : end;
    }
    return 1;
}

int32_t gigi_resource_sampled(const char *name, int64_t capacity, const char *unit,
                              const char *sharing, int64_t sample_every) {
    if (!name) return -1;
    pthread_mutex_lock(&g.lock);
    int id = -1;
    for (int i = 0; i < g.nresources; i++)
        if (strcmp(g.resources[i].name, name) == 0) id = i;
    if (id < 0 && g.nresources < MAX_RESOURCES) {
        id = g.nresources++;
        int64_t every = sample_every > 1 ? sample_every : sample_spec_for(name);
        g.resources[id] = (resource_t){strdup(name), dup_or_null(unit), dup_or_null(sharing),
                                       capacity, every};
        g.sample_every[id] = every > 1 && every < UINT32_MAX ? (uint32_t)every : 0;
        if (g.sample_every[id]) gigi_inline_ = 0; /* sampling is decided out of line */
    }
    pthread_mutex_unlock(&g.lock);
    return id;
}

int32_t gigi_resource(const char *name, int64_t capacity, const char *unit,
                      const char *sharing) {
    return gigi_resource_sampled(name, capacity, unit, sharing, 1);
}

void gigi_site(int32_t site, const char *file, int32_t line, const char *function, int kind,
               const char *resource, const char *origin, int verified) {
    pthread_mutex_lock(&g.lock);
    if (g.nsites == g.sites_cap) {
        int cap = g.sites_cap ? 2 * g.sites_cap : 64;
        site_t *s = realloc(g.sites, (size_t)cap * sizeof *s);
        if (!s) {
            pthread_mutex_unlock(&g.lock);
            return;
        }
        g.sites = s;
        g.sites_cap = cap;
    }
    g.sites[g.nsites++] = (site_t){site, line, kind, verified, dup_or_null(file),
                                   dup_or_null(function), dup_or_null(resource),
                                   dup_or_null(origin)};
    pthread_mutex_unlock(&g.lock);
}

uint64_t gigi_dropped(void) {
    uint64_t n = 0;
    for (int i = 0; i < MAX_RESOURCES; i++)
        n += atomic_load_explicit(&g.drops[i], memory_order_relaxed);
    return n;
}

/* --- segments ----------------------------------------------------------------------------- */

/* Strings of one column, gathered into Arrow's offsets and characters. */
typedef struct {
    int32_t *offsets;
    char *chars;
    size_t size, cap;
    uint8_t *valid;
} strings_t;

static int strings_init(strings_t *s, int64_t n) {
    s->offsets = malloc((size_t)(n + 1) * sizeof(int32_t));
    s->valid = malloc((size_t)n + 1);
    s->cap = 256;
    s->chars = malloc(s->cap);
    if (!s->offsets || !s->valid || !s->chars) return -1;
    s->offsets[0] = 0;
    return 0;
}

static int strings_add(strings_t *s, int64_t i, const char *v) {
    size_t n = v ? strlen(v) : 0;
    if (s->size + n > s->cap) {
        while (s->size + n > s->cap) s->cap *= 2;
        char *c = realloc(s->chars, s->cap);
        if (!c) return -1;
        s->chars = c;
    }
    memcpy(s->chars + s->size, v ? v : "", n);
    s->size += n;
    s->offsets[i + 1] = (int32_t)s->size;
    s->valid[i] = v != NULL;
    return 0;
}

static void strings_free(strings_t *s) {
    free(s->offsets);
    free(s->chars);
    free(s->valid);
}

static ipc_column strings_column(const char *name, strings_t *s) {
    return (ipc_column){name, IPC_UTF8, 1, NULL, s->offsets, s->chars, s->valid};
}

/* Write one segment: to a temporary name, then renamed, so readers see all of it or none. */
static void write_segment(const char *table, const char *name, const ipc_column *cols,
                          int ncols, int64_t n) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d", g.pid);
    const char *meta[] = {"gigi.version", "1",         "gigi.table",    table,
                          "gigi.host",    g.host,      "gigi.pid",      pid,
                          "gigi.clock",   "monotonic", "gigi.writer",   WRITER,
                          "gigi.trace_id", g.trace_id};
    char path[4352], tmp[4400];
    snprintf(path, sizeof path, "%s/%s", g.dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd >= 0 ? ipc_write_table(fd, cols, ncols, n, meta, 7) : -1;
    if (fd >= 0 && close(fd) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) == 0) return;
    if (fd >= 0) unlink(tmp);
    g.write_failed = 1;
}

/* A segment of rows added since the last one: TABLE-PID-SEQ.arrows. */
static void write_numbered(const char *table, const ipc_column *cols, int ncols, int64_t n) {
    char name[128];
    snprintf(name, sizeof name, "%s-%d-%06llu.arrows", table, g.pid, (unsigned long long)++g.seq);
    write_segment(table, name, cols, ncols, n);
}

/* The events' columns, kept from one flush to the next (only the writer touches them). */
static struct {
    int64_t *ts, *task, *thread, *amount, *object, *value, *dur;
    int32_t *site, *rid;
    uint8_t *kind, *has_value, *has_dur, *has_site;
    size_t cap;
} col;

static int columns_reserve(size_t n) {
    if (n <= col.cap) return 0;
    size_t cap = col.cap ? col.cap : 4096;
    while (cap < n) cap *= 2;
#define GROW(f)                                                     \
    do {                                                            \
        void *p = realloc(col.f, cap * sizeof *col.f);              \
        if (!p) return -1;                                          \
        col.f = p;                                                  \
    } while (0)
    GROW(ts);
    GROW(task);
    GROW(thread);
    GROW(amount);
    GROW(object);
    GROW(value);
    GROW(dur);
    GROW(site);
    GROW(rid);
    GROW(kind);
    GROW(has_value);
    GROW(has_dur);
    GROW(has_site);
#undef GROW
    col.cap = cap;
    return 0;
}

/* Append a ring's records (and, with `final`, its waits still open) to the columns. */
static size_t drain(ring_t *r, size_t n, int final) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    int depth = final ? atomic_load_explicit(&r->nwaits, memory_order_acquire) : 0;
    if (columns_reserve(n + (size_t)(head - tail) + (size_t)depth) != 0) return n;
    for (uint64_t i = tail; i < head; i++, n++) {
        const record_t *x = &r->records[i & r->mask];
        int64_t ts = to_ns(x->ts);
        col.ts[n] = ts, col.task[n] = x->task, col.thread[n] = r->thread;
        col.amount[n] = x->amount, col.object[n] = x->object;
        col.value[n] = x->value, col.has_value[n] = x->has_value;
        col.dur[n] = x->dur ? to_ns(x->ts + x->dur) - ts : 0, col.has_dur[n] = 1;
        col.site[n] = x->site, col.has_site[n] = x->site >= 0;
        col.rid[n] = x->rid, col.kind[n] = x->kind;
    }
    atomic_store_explicit(&r->tail, head, memory_order_release);
    for (int d = 0; d < depth; d++, n++) {
        const open_wait_t *w = &r->waits[d];
        col.ts[n] = to_ns(w->ts), col.task[n] = w->task, col.thread[n] = r->thread;
        col.amount[n] = w->amount, col.object[n] = w->object;
        col.value[n] = 0, col.has_value[n] = 0;
        col.dur[n] = 0, col.has_dur[n] = 0; /* still waiting when the trace ended */
        col.site[n] = w->site, col.has_site[n] = w->site >= 0;
        col.rid[n] = w->rid, col.kind[n] = GIGI_WAIT;
    }
    return n;
}

static void write_events(int64_t n) {
    /* the resource column is dictionary-encoded: an event carries its resource's id */
    strings_t names = {0};
    pthread_mutex_lock(&g.lock);
    int nres = g.nresources, ok = strings_init(&names, nres) == 0;
    for (int i = 0; ok && i < nres; i++) ok = strings_add(&names, i, g.resources[i].name) == 0;
    pthread_mutex_unlock(&g.lock);
    for (int64_t i = 0; ok && i < n; i++)
        if (col.rid[i] < 0 || col.rid[i] >= nres) ok = 0; /* not from gigi_resource */
    /* the optional columns a segment needs: one whose every row holds its default (amount
     * 1, dur 0, object 0, no site or value) is left out, and the reader fills it in, which
     * spares the disk a fifth to a third of the bytes where most events are ACQUIREs and
     * RELEASEs of one unit */
    int amounts = 0, durs = 0, objects = 0, sites = 0, values = 0;
    for (int64_t i = 0; i < n; i++) {
        amounts |= col.amount[i] != 1;
        durs |= col.kind[i] == GIGI_WAIT || col.dur[i] != 0 || !col.has_dur[i];
        objects |= col.object[i] != 0;
        sites |= col.has_site[i];
        values |= col.has_value[i];
    }
    if (ok) {
        ipc_column all[] = {
            {"ts", IPC_INT64, 0, col.ts},
            {"kind", IPC_UINT8, 0, col.kind},
            {"resource", IPC_DICT_UTF8, 0, col.rid, names.offsets, names.chars, NULL, nres},
            {"task", IPC_INT64, 0, col.task},
            {"thread", IPC_INT64, 0, col.thread},
            {"amount", IPC_INT64, 0, col.amount},
            {"dur", IPC_INT64, 1, col.dur, NULL, NULL, col.has_dur},
            {"object", IPC_INT64, 0, col.object},
            {"site", IPC_INT32, 1, col.site, NULL, NULL, col.has_site},
            {"value", IPC_INT64, 1, col.value, NULL, NULL, col.has_value},
        };
        int needed[] = {1, 1, 1, 1, 1, amounts, durs, objects, sites, values}, ncols = 0;
        ipc_column cols[10];
        for (int c = 0; c < 10; c++)
            if (needed[c]) cols[ncols++] = all[c];
        write_numbered("events", cols, ncols, n);
    } else {
        g.write_failed = 1;
    }
    strings_free(&names);
}

static void write_tasks(task_row_t *rows, int n) {
    int64_t *task = malloc((size_t)n * 8 + 8), *parent = malloc((size_t)n * 8 + 8),
            *start = malloc((size_t)n * 8 + 8), *end = malloc((size_t)n * 8 + 8);
    uint8_t *hp = malloc((size_t)n + 1), *hs = malloc((size_t)n + 1), *he = malloc((size_t)n + 1);
    strings_t names = {0}, kinds = {0};
    int ok = task && parent && start && end && hp && hs && he && strings_init(&names, n) == 0 &&
             strings_init(&kinds, n) == 0;
    static const char *const KINDS[] = {NULL, "foreground", "background"};
    for (int i = 0; ok && i < n; i++) {
        task_row_t *t = &rows[i];
        task[i] = t->task, parent[i] = t->parent, start[i] = to_ns(t->start);
        end[i] = to_ns(t->end);
        hp[i] = (uint8_t)t->has_parent, hs[i] = (uint8_t)t->has_start;
        he[i] = (uint8_t)t->has_end;
        ok = strings_add(&names, i, t->name) == 0 && strings_add(&kinds, i, KINDS[t->kind]) == 0;
    }
    if (ok) {
        ipc_column cols[] = {
            {"task", IPC_INT64, 0, task},
            strings_column("name", &names),
            strings_column("kind", &kinds),
            {"parent", IPC_INT64, 1, parent, NULL, NULL, hp},
            {"start", IPC_INT64, 1, start, NULL, NULL, hs},
            {"end", IPC_INT64, 1, end, NULL, NULL, he},
        };
        write_numbered("tasks", cols, 6, n);
    } else {
        g.write_failed = 1;
    }
    strings_free(&names);
    strings_free(&kinds);
    free(task), free(parent), free(start), free(end), free(hp), free(hs), free(he);
}

/* The resources and sites tables of this process, rewritten whole when they change. */
static void write_snapshots(int force) {
    pthread_mutex_lock(&g.lock);
    int n = g.nresources, ns = g.nsites;
    /* rewritten when resources or sites are added; for drops alone at most once a second */
    uint64_t key = (uint64_t)n * 1000003u + (uint64_t)ns, lost = gigi_dropped();
    int64_t now = now_ns();
    int changed = key != g.snapshot_key ||
                  (lost != g.snapshot_drops && now - g.snapshot_ns >= 1000000000);
    if (!force && !changed) {
        pthread_mutex_unlock(&g.lock);
        return;
    }
    g.snapshot_key = key;
    g.snapshot_drops = lost;
    g.snapshot_ns = now;
    int64_t *cap = malloc((size_t)n * 8 + 8), *dropped = malloc((size_t)n * 8 + 8);
    int64_t *every = malloc((size_t)n * 8 + 8);
    uint8_t *has_cap = malloc((size_t)n + 1);
    strings_t names = {0}, units = {0}, sharing = {0};
    int ok = cap && dropped && every && has_cap && strings_init(&names, n) == 0 &&
             strings_init(&units, n) == 0 && strings_init(&sharing, n) == 0;
    for (int i = 0; ok && i < n; i++) {
        resource_t *r = &g.resources[i];
        cap[i] = r->capacity, has_cap[i] = r->capacity >= 0;
        dropped[i] = (int64_t)atomic_load_explicit(&g.drops[i], memory_order_relaxed);
        every[i] = r->sample_every > 1 ? r->sample_every : 1;
        ok = strings_add(&names, i, r->name) == 0 && strings_add(&units, i, r->unit) == 0 &&
             strings_add(&sharing, i, r->sharing) == 0;
    }
    if (ok && n) {
        ipc_column cols[] = {
            strings_column("resource", &names),
            {"capacity", IPC_INT64, 1, cap, NULL, NULL, has_cap},
            strings_column("unit", &units),
            strings_column("sharing", &sharing),
            {"dropped", IPC_INT64, 0, dropped},
            {"sample_every", IPC_INT64, 0, every},
        };
        cols[0].nullable = 0;
        char name[64];
        snprintf(name, sizeof name, "resources-%d.arrows", g.pid);
        write_segment("resources", name, cols, 6, n);
    }
    strings_free(&names), strings_free(&units), strings_free(&sharing);
    free(cap), free(dropped), free(every), free(has_cap);
    if (ns && ns != g.sites_written) {
        int32_t *id = malloc((size_t)ns * 4), *line = malloc((size_t)ns * 4);
        uint8_t *kind = malloc((size_t)ns), *verified = malloc((size_t)ns);
        strings_t files = {0}, fns = {0}, res = {0}, origins = {0};
        ok = id && line && kind && verified && strings_init(&files, ns) == 0 &&
             strings_init(&fns, ns) == 0 && strings_init(&res, ns) == 0 &&
             strings_init(&origins, ns) == 0;
        for (int i = 0; ok && i < ns; i++) {
            site_t *s = &g.sites[i];
            id[i] = s->site, line[i] = s->line, kind[i] = (uint8_t)s->kind;
            verified[i] = (uint8_t)(s->verified != 0);
            ok = strings_add(&files, i, s->file) == 0 && strings_add(&fns, i, s->function) == 0 &&
                 strings_add(&res, i, s->resource) == 0 &&
                 strings_add(&origins, i, s->origin) == 0;
        }
        if (ok) {
            ipc_column cols[] = {
                {"site", IPC_INT32, 0, id},
                strings_column("file", &files),
                {"line", IPC_INT32, 0, line},
                strings_column("function", &fns),
                {"kind", IPC_UINT8, 0, kind},
                strings_column("resource", &res),
                strings_column("origin", &origins),
                {"verified", IPC_BOOL, 0, verified},
            };
            char name[64];
            snprintf(name, sizeof name, "sites-%d.arrows", g.pid);
            write_segment("sites", name, cols, 8, ns);
            g.sites_written = ns;
        }
        strings_free(&files), strings_free(&fns), strings_free(&res), strings_free(&origins);
        free(id), free(line), free(kind), free(verified);
    }
    pthread_mutex_unlock(&g.lock);
}

enum { FLUSH_PERIODIC, FLUSH_ALL, FLUSH_FINAL };

/* Drain every ring into one events segment. FLUSH_ALL writes the task rows and snapshots now
 * too; FLUSH_FINAL also writes the waits still open, with a null length. */
static void flush(int mode) {
    int final = mode == FLUSH_FINAL;
    pthread_mutex_lock(&g.flush_lock);
    calibrate();
    pthread_mutex_lock(&g.lock);
    ring_t *rings = g.rings;
    pthread_mutex_unlock(&g.lock);
    size_t n = 0;
    for (ring_t *r = rings; r; r = r->next) n = drain(r, n, final);
    if (n) write_events((int64_t)n);

    pthread_mutex_lock(&g.lock);
    /* task rows go out once a second (or when many wait), not with every events segment */
    task_row_t *rows = NULL;
    int nrows = 0;
    if (mode != FLUSH_PERIODIC || g.ntasks >= 65536 || now_ns() - g.tasks_ns >= 1000000000) {
        rows = g.tasks;
        nrows = g.ntasks;
        g.tasks = NULL;
        g.ntasks = g.tasks_cap = 0;
        g.tasks_ns = now_ns();
    }
    /* rings of threads that have exited, drained above, are freed */
    for (ring_t **p = &g.rings; *p;) {
        ring_t *r = *p;
        if (atomic_load_explicit(&r->dead, memory_order_acquire) &&
            atomic_load_explicit(&r->head, memory_order_acquire) ==
                atomic_load_explicit(&r->tail, memory_order_relaxed)) {
            *p = r->next;
            free(r->records);
            free(r);
        } else {
            p = &r->next;
        }
    }
    pthread_mutex_unlock(&g.lock);
    if (final) {
        /* the threads still alive end with the process */
        int64_t end = stamp();
        pthread_mutex_lock(&g.lock);
        ring_t *alive = g.rings;
        pthread_mutex_unlock(&g.lock);
        for (ring_t *r = alive; r; r = r->next) {
            task_row_t *nr = realloc(rows, (size_t)(nrows + 1) * sizeof *nr);
            if (!nr) break;
            rows = nr;
            rows[nrows++] = (task_row_t){.task = r->implicit_task, .end = end, .has_end = 1};
        }
    }
    if (nrows) write_tasks(rows, nrows);
    for (int i = 0; i < nrows; i++) free(rows[i].name);
    free(rows);
    write_snapshots(mode != FLUSH_PERIODIC);
    pthread_mutex_unlock(&g.flush_lock);
}

void gigi_flush(void) {
    if (gigi_enabled_) flush(FLUSH_ALL);
}

static void *writer_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g.lock);
    while (!g.stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(g.interval_ms % 1000) * 1000000L;
        until.tv_sec += g.interval_ms / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (!atomic_exchange_explicit(&g.nudged, 0, memory_order_acq_rel))
            pthread_cond_timedwait(&g.wake, &g.lock, &until);
        atomic_store_explicit(&g.nudged, 0, memory_order_relaxed);
        if (g.stopping) break;
        pthread_mutex_unlock(&g.lock);
        flush(FLUSH_PERIODIC);
        pthread_mutex_lock(&g.lock);
    }
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

static void start_writer(void) {
    g.stopping = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not ours */
    g.writer_running = pthread_create(&g.writer, NULL, writer_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void at_exit(void) {
    if (!gigi_enabled_) return;
    if (g.writer_running) {
        pthread_mutex_lock(&g.lock);
        g.stopping = 1;
        pthread_cond_signal(&g.wake);
        pthread_mutex_unlock(&g.lock);
        pthread_join(g.writer, NULL);
        g.writer_running = 0;
    }
    flush(FLUSH_FINAL);
    gigi_enabled_ = 0;
}

/* Around fork: the parent flushes first, so that the child inherits nothing to write twice;
 * the child starts over as a process of its own (pid, task ids, rings, locks, writer). */
static void before_fork(void) {
    if (!gigi_enabled_) return;
    flush(FLUSH_ALL);
    pthread_mutex_lock(&g.flush_lock);
    pthread_mutex_lock(&g.lock);
}

static void after_fork_parent(void) {
    if (!gigi_enabled_) return;
    pthread_mutex_unlock(&g.lock);
    pthread_mutex_unlock(&g.flush_lock);
}

static void after_fork_child(void) {
    if (!gigi_enabled_) return;
    /* The locks and the condition variable are made anew, not unlocked: the copies describe
     * the parent's threads, which the child does not have. A copy of `wake` still counts the
     * parent's writer as its waiter, and the child's first signal would wait for that writer
     * to wake, forever (glibc's condition variables), with the child's writer behind it. */
    pthread_mutex_init(&g.lock, NULL);
    pthread_mutex_init(&g.flush_lock, NULL);
    pthread_cond_init(&g.wake, NULL);
    g.writer_running = 0;
    g.stopping = 0;
    atomic_store(&g.nudged, 0);
    g.write_failed = 0;
    g.pid = getpid();
    g.task_counter = 0;
    g.seq = 0;
    g.snapshot_key = g.snapshot_drops = 0;
    g.snapshot_ns = g.tasks_ns = 0;
    g.sites_written = 0;
    for (int i = 0; i < g.ntasks; i++) free(g.tasks[i].name);
    g.ntasks = 0;
    for (int i = 0; i < MAX_RESOURCES; i++) atomic_store(&g.drops[i], 0);
    /* the other threads are gone in the child; their rings were the parent's to write */
    ring_t *mine = my_ring;
    for (ring_t *r = g.rings, *next; r; r = next) {
        next = r->next;
        if (r != mine) free(r->records), free(r);
    }
    g.rings = NULL;
    if (mine) {
        free(mine->records);
        free(mine);
        gigi_ring_mine_ = NULL;
        pthread_setspecific(ring_key, NULL);
    }
    cur_task = 0;
    task_depth = 0;
    start_writer();
}

__attribute__((constructor)) static void gigi_init(void) {
    const char *dir = getenv("GIGI_TRACE");
    if (!dir || !*dir) return;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gigi: cannot create trace directory %s: %s; not tracing\n", dir,
                strerror(errno));
        return;
    }
    snprintf(g.dir, sizeof g.dir, "%s", dir);
    const char *iv = getenv("GIGI_INTERVAL_MS");
    g.interval_ms = iv && atoi(iv) > 0 ? atoi(iv) : 200;
    const char *rr = getenv("GIGI_RING_RECORDS");
    uint64_t records = rr && atoll(rr) > 0 ? (uint64_t)atoll(rr) : 16384;
    g.ring_records = 1;
    while (g.ring_records < records) g.ring_records <<= 1;
    g.pid = getpid();
    gethostname(g.host, sizeof g.host - 1);
    const char *block = getenv("GIGI_BLOCK_MS");
    block_ns = block && *block ? atoll(block) * 1000000ll : 0;
    const char *sample = getenv("GIGI_SAMPLE");
    if (sample) snprintf(g.sample_spec, sizeof g.sample_spec, "%s", sample);
    const char *id = getenv("GIGI_TRACE_ID");
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    if (id && *id)
        snprintf(g.trace_id, sizeof g.trace_id, "%s", id);
    else
        snprintf(g.trace_id, sizeof g.trace_id, "%s-%d-%llx", g.host, g.pid,
                 (unsigned long long)wall.tv_sec * 1000000000ull + (unsigned long long)wall.tv_nsec);
    clock_init();
    pthread_key_create(&ring_key, ring_free);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(at_exit);
    gigi_inline_ = use_tsc && !g.sample_spec[0];
    gigi_enabled_ = 1;
    start_writer();
}
