/* Workloads on SQLite for gigi's end-to-end tests and bench, each transaction a task:
 *
 *   workload DB normal SECONDS [N] one client: point reads and an update per transaction,
 *                                  for SECONDS or N transactions; prints transactions per
 *                                  second and the client thread's CPU microseconds per
 *                                  transaction (steadier than the rate on a busy machine)
 *   workload DB writers SECONDS    a batch job holds an exclusive write transaction for 0.8
 *                                  of SECONDS while four clients try 2 short writes each
 *   workload DB smallcache SECONDS [PAGES]
 *                                  four readers, each on its own connection with a page cache
 *                                  of PAGES pages (10; the table has about 450; SQLite's
 *                                  cache_size, so -2000 is its default of 2000 KiB), join 200
 *                                  rows to 200 others scattered over the table per transaction
 *                                  for SECONDS: with 10, nearly every row misses the cache and
 *                                  its page is read from the file
 *   workload DB wal SECONDS [reader]
 *                                  WAL mode: a client writes for SECONDS; with `reader`, a
 *                                  reader keeps one read transaction open all the while, so
 *                                  no checkpoint can restart the log and the WAL grows
 *
 * Built against an SQLite amalgamation (instrumented or not) and gigi's native runtime. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gigi_probe.h"
#include "sqlite3.h"

#define ROWS 20000

static const char *path;
static double seconds;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static sqlite3 *open_db(void) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "open %s: %s\n", path, sqlite3_errmsg(db));
        exit(1);
    }
    sqlite3_busy_timeout(db, 60000);
    sqlite3_exec(db, "PRAGMA synchronous=OFF", 0, 0, 0);
    return db;
}

static void exec(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, err);
        exit(1);
    }
}

static void setup(void) {
    sqlite3 *db = open_db();
    exec(db, "DROP TABLE IF EXISTS t; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT, n INT)");
    exec(db, "BEGIN");
    sqlite3_stmt *ins;
    sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?, hex(randomblob(40)), 0)", -1, &ins, 0);
    for (int k = 0; k < ROWS; k++) {
        sqlite3_bind_int(ins, 1, k);
        sqlite3_step(ins);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    exec(db, "COMMIT");
    sqlite3_close(db);
}

static long transactions(sqlite3 *db, const char *name, double until, long most,
                         unsigned seed) {
    sqlite3_stmt *get, *upd;
    sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &get, 0);
    sqlite3_prepare_v2(db, "UPDATE t SET n = n + 1 WHERE k = ?", -1, &upd, 0);
    long done = 0;
    while (now() < until && done < most) {
        int64_t task = gigi_task_begin(name, 0);
        exec(db, "BEGIN IMMEDIATE");
        for (int i = 0; i < 5; i++) {
            sqlite3_bind_int(get, 1, (int)(rand_r(&seed) % ROWS));
            while (sqlite3_step(get) == SQLITE_ROW) {
            }
            sqlite3_reset(get);
        }
        sqlite3_bind_int(upd, 1, (int)(rand_r(&seed) % ROWS));
        sqlite3_step(upd);
        sqlite3_reset(upd);
        exec(db, "COMMIT");
        gigi_task_end(task);
        done++;
    }
    sqlite3_finalize(get);
    sqlite3_finalize(upd);
    return done;
}

static void *client(void *arg) {
    char name[32];
    snprintf(name, sizeof name, "client %ld", (long)arg);
    int64_t session = gigi_task_begin(name, 0);
    sqlite3 *db = open_db();
    snprintf(name, sizeof name, "client %ld: UPDATE t", (long)arg);
    transactions(db, name, now() + seconds, 2, (unsigned)(long)arg); /* 2 short writes */
    sqlite3_close(db);
    gigi_task_end(session);
    return NULL;
}

static volatile int writing;

static void *wal_client(void *arg) {
    char name[32];
    snprintf(name, sizeof name, "client %ld", (long)arg);
    int64_t session = gigi_task_begin(name, 0);
    sqlite3 *db = open_db();
    snprintf(name, sizeof name, "client %ld: UPDATE t", (long)arg);
    transactions(db, name, now() + seconds, 1L << 62, (unsigned)(long)arg + 7);
    sqlite3_close(db);
    gigi_task_end(session);
    return NULL;
}

/* A report that reads in one long transaction: the snapshot it reads stays in the WAL. */
static void *wal_reader(void *arg) {
    (void)arg;
    sqlite3 *db = open_db();
    int64_t task = gigi_task_begin("reader: BEGIN; SELECT sum(n) FROM t (left open)", 0);
    exec(db, "BEGIN");
    exec(db, "SELECT sum(n) FROM t");
    while (writing) {
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    exec(db, "COMMIT");
    gigi_task_end(task);
    sqlite3_close(db);
    return NULL;
}

static void wal(int with_reader) {
    sqlite3 *db = open_db();
    exec(db, "PRAGMA journal_mode=WAL");
    exec(db, "UPDATE t SET n = 1 WHERE k = 0"); /* the log holds a frame: readers read it */
    pthread_t writer, reader;
    writing = 1;
    if (with_reader) pthread_create(&reader, NULL, wal_reader, NULL);
    pthread_create(&writer, NULL, wal_client, NULL);
    pthread_join(writer, NULL);
    writing = 0;
    if (with_reader) pthread_join(reader, NULL);
    sqlite3_close(db);
}

static const char *cache_pages = "10"; /* each reader's PRAGMA cache_size */

static pthread_barrier_t readers_ready; /* the readers read at the same time */

static void *small_cache_reader(void *arg) {
    char name[48];
    unsigned seed = (unsigned)(long)arg + 11;
    sqlite3 *db = open_db();
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA cache_size=%s", cache_pages);
    exec(db, pragma);
    sqlite3_stmt *get;
    /* 200 neighbours, each with a row scattered over the table (7919 is prime) */
    sqlite3_prepare_v2(db,
                       "SELECT count(b.v) FROM t AS a JOIN t AS b ON b.k = a.k * 7919 % ?2 "
                       "WHERE a.k BETWEEN ?1 AND ?1 + 199",
                       -1, &get, 0);
    sqlite3_bind_int(get, 2, ROWS);
    snprintf(name, sizeof name, "reader %ld: SELECT ... JOIN t", (long)arg);
    pthread_barrier_wait(&readers_ready);
    double until = now() + seconds;
    while (now() < until) {
        int64_t task = gigi_task_begin(name, 0);
        exec(db, "BEGIN");
        sqlite3_bind_int(get, 1, (int)(rand_r(&seed) % ROWS));
        while (sqlite3_step(get) == SQLITE_ROW) {
        }
        sqlite3_reset(get);
        exec(db, "COMMIT");
        gigi_task_end(task);
    }
    sqlite3_finalize(get);
    sqlite3_close(db);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr,
                "usage: workload DB normal|writers|wal|smallcache SECONDS [N|reader|PAGES]\n");
        return 2;
    }
    path = argv[1];
    seconds = atof(argv[3]);
    setup();
    if (strcmp(argv[2], "normal") == 0) {
        sqlite3 *db = open_db();
        double t0 = now(), c0 = cpu_now();
        long most = argc > 4 ? atol(argv[4]) : 1L << 62;
        long n = transactions(db, "client: UPDATE t", t0 + seconds, most, 1);
        double c1 = cpu_now(), t1 = now();
        printf("%.1f %.2f\n", n / (t1 - t0), (c1 - c0) * 1e6 / (n ? n : 1));
        sqlite3_close(db);
    } else if (strcmp(argv[2], "writers") == 0) {
        pthread_t th[4];
        sqlite3 *db = open_db();
        int64_t task = gigi_task_begin("batch: UPDATE t SET n = 0", 1);
        exec(db, "BEGIN EXCLUSIVE");
        exec(db, "UPDATE t SET n = 0 WHERE k < 100");
        for (long i = 0; i < 4; i++) pthread_create(&th[i], NULL, client, (void *)i);
        double think = seconds * 0.8;
        struct timespec hold = {(time_t)think, (long)((think - (time_t)think) * 1e9)};
        nanosleep(&hold, NULL); /* the batch job thinks, holding its write lock */
        exec(db, "COMMIT");
        gigi_task_end(task);
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        sqlite3_close(db);
    } else if (strcmp(argv[2], "wal") == 0) {
        wal(argc > 4 && strcmp(argv[4], "reader") == 0);
    } else if (strcmp(argv[2], "smallcache") == 0) {
        pthread_t th[4];
        if (argc > 4) cache_pages = argv[4];
        pthread_barrier_init(&readers_ready, NULL, 4);
        for (long i = 0; i < 4; i++) pthread_create(&th[i], NULL, small_cache_reader, (void *)i);
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    }
    return 0;
}
