/* SQLite as it is against SQLite with gigi's probes, in one process: both builds are loaded
 * as shared libraries (each bound to itself with -Bsymbolic) and run the same transactions in
 * alternating rounds, so that whatever else the machine does falls on both alike.
 *
 *   sqlite_ab PLAIN.so PROBED.so DIR ROUNDS TXNS_PER_ROUND
 *
 * A transaction is tests/sqlite/workload.c's normal one: BEGIN IMMEDIATE, five point reads,
 * one update, COMMIT, on a table of 20,000 rows; for the probed build it is also a gigi task.
 * Prints one line per round: the client thread's CPU ns per transaction for each build. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gigi_probe.h"

#define ROWS 20000

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

typedef struct {
    int (*open)(const char *, sqlite3 **);
    int (*exec)(sqlite3 *, const char *, void *, void *, char **);
    int (*prepare)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int)(sqlite3_stmt *, int, int);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*busy_timeout)(sqlite3 *, int);
    sqlite3 *db;
    sqlite3_stmt *get, *upd, *ins;
    int traced;
} build_t;

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "sqlite_ab: %s\n", dlerror());
        exit(1);
    }
    return p;
}

static void exec(build_t *b, const char *sql) {
    char *err = 0;
    if (b->exec(b->db, sql, 0, 0, &err) != 0) {
        fprintf(stderr, "sqlite_ab: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static void load(build_t *b, const char *so, const char *db) {
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "sqlite_ab: %s\n", dlerror());
        exit(1);
    }
    b->open = sym(lib, "sqlite3_open");
    b->exec = sym(lib, "sqlite3_exec");
    b->prepare = sym(lib, "sqlite3_prepare_v2");
    b->bind_int = sym(lib, "sqlite3_bind_int");
    b->step = sym(lib, "sqlite3_step");
    b->reset = sym(lib, "sqlite3_reset");
    b->finalize = sym(lib, "sqlite3_finalize");
    b->busy_timeout = sym(lib, "sqlite3_busy_timeout");
    remove(db);
    if (b->open(db, &b->db) != 0) {
        fprintf(stderr, "sqlite_ab: cannot open %s\n", db);
        exit(1);
    }
    b->busy_timeout(b->db, 60000);
    exec(b, "PRAGMA synchronous=OFF");
    exec(b, "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT, n INT)");
    exec(b, "BEGIN");
    b->prepare(b->db, "INSERT INTO t VALUES(?, hex(randomblob(40)), 0)", -1, &b->ins, 0);
    for (int k = 0; k < ROWS; k++) {
        b->bind_int(b->ins, 1, k);
        b->step(b->ins);
        b->reset(b->ins);
    }
    b->finalize(b->ins);
    exec(b, "COMMIT");
    b->prepare(b->db, "SELECT v FROM t WHERE k = ?", -1, &b->get, 0);
    b->prepare(b->db, "UPDATE t SET n = n + 1 WHERE k = ?", -1, &b->upd, 0);
}

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* TXNS transactions; returns the thread CPU ns they took. Both builds draw the same keys. */
static double round_of(build_t *b, long txns, unsigned seed) {
    double t0 = cpu_ns();
    for (long i = 0; i < txns; i++) {
        int64_t task = b->traced ? gigi_task_begin("client: UPDATE t", 0) : 0;
        exec(b, "BEGIN IMMEDIATE");
        for (int j = 0; j < 5; j++) {
            b->bind_int(b->get, 1, (int)(rand_r(&seed) % ROWS));
            while (b->step(b->get) == 100 /* SQLITE_ROW */) {
            }
            b->reset(b->get);
        }
        b->bind_int(b->upd, 1, (int)(rand_r(&seed) % ROWS));
        b->step(b->upd);
        b->reset(b->upd);
        exec(b, "COMMIT");
        if (task) gigi_task_end(task);
    }
    return cpu_ns() - t0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: sqlite_ab PLAIN.so PROBED.so DIR ROUNDS TXNS_PER_ROUND\n");
        return 2;
    }
    char path[4096];
    build_t plain = {0}, probed = {.traced = 1};
    snprintf(path, sizeof path, "%s/plain.db", argv[3]);
    load(&plain, argv[1], path);
    snprintf(path, sizeof path, "%s/probed.db", argv[3]);
    load(&probed, argv[2], path);
    long rounds = atol(argv[4]), txns = atol(argv[5]);
    round_of(&plain, txns, 7); /* warm both */
    round_of(&probed, txns, 7);
    for (long r = 0; r < rounds; r++) {
        unsigned seed = (unsigned)r + 1;
        /* which goes first alternates, so that neither always follows the other */
        double a, b;
        if (r % 2) {
            b = round_of(&probed, txns, seed);
            a = round_of(&plain, txns, seed);
        } else {
            a = round_of(&plain, txns, seed);
            b = round_of(&probed, txns, seed);
        }
        printf("%.0f %.0f\n", a / txns, b / txns);
        fflush(stdout);
    }
    return 0;
}
