/* Code that looks like resource management and is not. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct config {
    int port;
    int max_clients;           /* a setting, not a pool */
    char name[64];
} config_t;

int get_port(const config_t *cfg) { return cfg->port; }
int get_max_clients(const config_t *cfg) { return cfg->max_clients; }
const char *get_name(const config_t *cfg) { return cfg->name; }

/* Log helper: formats and writes; the "buffer" is a local. */
void log_message(int level, const char *fmt, ...)
{
    char buffer[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buffer, sizeof buffer, fmt, ap);
    va_end(ap);
    if (level > 0)
        fprintf(stderr, "%s\n", buffer);
}

/* A wrapper around a mutex that guards nothing in particular. */
typedef struct lock_wrapper {
    pthread_mutex_t m;
} lock_wrapper_t;

void lock_wrapper_lock(lock_wrapper_t *w) { pthread_mutex_lock(&w->m); }
void lock_wrapper_unlock(lock_wrapper_t *w) { pthread_mutex_unlock(&w->m); }

/* Statistics counters: incremented, never compared with a capacity. */
typedef struct stats {
    unsigned long requests;
    unsigned long errors;
} stats_t;

void stats_count_request(stats_t *s) { s->requests++; }
void stats_count_error(stats_t *s) { s->errors++; }

char *string_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy != NULL)
        memcpy(copy, s, n);
    return copy;
}

int retry_connect(int (*connect_fn)(void), int attempts)
{
    for (int i = 0; i < attempts; i++) {
        if (connect_fn() == 0)
            return 0;
    }
    return -1;
}
