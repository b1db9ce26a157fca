/*
 * Just enough of the Arrow IPC stream format for gigi's native probes to write the tables of
 * trace format v1: a schema message, one record batch message and the end-of-stream marker,
 * for columns of int64, int32, uint8, bool and utf8, each nullable. The flatbuffers of the
 * messages are built by a small back-to-front builder (flatbuffers' own layout: children
 * before parents, vtables beside their tables, every scalar aligned to its size).
 *
 * Internal to gigi_probe.c and to the Python probes' writer (_writer.c); no dependency beyond
 * libc.
 */
#ifndef GIGI_ARROW_IPC_H
#define GIGI_ARROW_IPC_H

#include <stddef.h>
#include <stdint.h>

enum ipc_type { IPC_INT64, IPC_INT32, IPC_UINT8, IPC_BOOL, IPC_UTF8, IPC_DICT_UTF8 };

#define IPC_MAX_COLUMNS 16

typedef struct {
    const char *name;
    enum ipc_type type;
    int nullable;
    /* the column's data: n values (int64_t, int32_t, uint8_t, uint8_t 0/1 for bool, int32_t
     * indices for a dictionary), or for utf8 n + 1 int32 offsets into chars */
    const void *values;
    const int32_t *offsets; /* utf8: n + 1; dictionary: dictionary_size + 1 */
    const char *chars;
    const uint8_t *valid; /* n bytes, 1 = present; NULL = all present */
    int64_t dictionary_size;
} ipc_column;

/* Write one table to fd as an Arrow IPC stream: the schema (with key/value metadata), the
 * dictionaries, one record batch of n rows, end of stream. The columns' memory is written as
 * it is (no copy). Returns 0, or -1 when out of memory or the write failed. */
int ipc_write_table(int fd, const ipc_column *cols, int ncols, int64_t n,
                    const char *const *meta, int nmeta);

#endif
