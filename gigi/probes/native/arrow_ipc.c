/* Arrow IPC stream encoding for gigi's native probes: see arrow_ipc.h. */
#include "arrow_ipc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* --- a back-to-front flatbuffer builder --------------------------------------------------- */

typedef struct {
    uint8_t *buf; /* data lives in buf[cap - size, cap) */
    size_t cap, size, minalign;
    int failed;
    /* the table being built: where it started and its fields (id -> offset from the end) */
    size_t table_start;
    uint32_t field_at[16];
    int nfields;
} fb_t;

static void fb_grow(fb_t *b, size_t need) {
    if (b->failed || b->cap - b->size >= need) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->size < need) cap *= 2;
    uint8_t *nb = malloc(cap);
    if (!nb) {
        b->failed = 1;
        return;
    }
    if (b->size) memcpy(nb + cap - b->size, b->buf + b->cap - b->size, b->size);
    free(b->buf);
    b->buf = nb;
    b->cap = cap;
}

/* Pad so that after `extra` more bytes the data is aligned to `align`. */
static void fb_prealign(fb_t *b, size_t extra, size_t align) {
    if (align > b->minalign) b->minalign = align;
    size_t pad = (align - ((b->size + extra) & (align - 1))) & (align - 1);
    fb_grow(b, pad + extra);
    if (b->failed) return;
    memset(b->buf + b->cap - b->size - pad, 0, pad);
    b->size += pad;
}

static void fb_push(fb_t *b, const void *data, size_t n) {
    fb_grow(b, n);
    if (b->failed) return;
    b->size += n;
    memcpy(b->buf + b->cap - b->size, data, n);
}

/* Scalars aligned to their own size; returns the position (offset from the end). */
#define FB_SCALAR(name, T)                                \
    static uint32_t name(fb_t *b, T v) {                  \
        fb_prealign(b, sizeof(T), sizeof(T));             \
        fb_push(b, &v, sizeof(T));                        \
        return (uint32_t)b->size;                         \
    }
FB_SCALAR(fb_i8, uint8_t)
FB_SCALAR(fb_i16, int16_t)
FB_SCALAR(fb_i32, int32_t)
FB_SCALAR(fb_i64, int64_t)

/* A reference from the place about to be written to an object at `off`. */
static uint32_t fb_offset(fb_t *b, uint32_t off) {
    fb_prealign(b, 4, 4);
    uint32_t rel = (uint32_t)(b->size + 4 - off);
    fb_push(b, &rel, 4);
    return (uint32_t)b->size;
}

static uint32_t fb_string(fb_t *b, const char *s) {
    size_t n = strlen(s);
    fb_prealign(b, n + 1, 4);
    fb_push(b, "", 1);
    fb_push(b, s, n);
    uint32_t len = (uint32_t)n;
    fb_push(b, &len, 4);
    return (uint32_t)b->size;
}

/* A vector of n structs of `size` bytes aligned to `align`. */
static uint32_t fb_struct_vector(fb_t *b, const void *items, size_t size, size_t n,
                                 size_t align) {
    fb_prealign(b, size * n, 4);
    fb_prealign(b, size * n, align);
    fb_push(b, items, size * n);
    uint32_t len = (uint32_t)n;
    fb_push(b, &len, 4);
    return (uint32_t)b->size;
}

static uint32_t fb_offset_vector(fb_t *b, const uint32_t *offs, size_t n) {
    fb_prealign(b, 4 * n, 4);
    for (size_t i = n; i-- > 0;) fb_offset(b, offs[i]);
    uint32_t len = (uint32_t)n;
    fb_push(b, &len, 4);
    return (uint32_t)b->size;
}

static void fb_table(fb_t *b) {
    b->table_start = b->size;
    b->nfields = 0;
    memset(b->field_at, 0, sizeof b->field_at);
}

static void fb_field(fb_t *b, int id, uint32_t at) {
    b->field_at[id] = at;
    if (id + 1 > b->nfields) b->nfields = id + 1;
}

/* Fields are added scalar by scalar (largest first keeps padding small). */
#define FB_ADD(b, id, fn, v) fb_field(b, id, fn(b, v))
#define FB_ADD_OFFSET(b, id, off) fb_field(b, id, fb_offset(b, off))

static uint32_t fb_end_table(fb_t *b) {
    int32_t placeholder = 0;
    fb_prealign(b, 4, 4);
    fb_push(b, &placeholder, 4);
    uint32_t table = (uint32_t)b->size;
    uint16_t vt[2 + 16];
    vt[0] = (uint16_t)(4 + 2 * b->nfields);
    vt[1] = (uint16_t)(table - b->table_start);
    for (int i = 0; i < b->nfields; i++)
        vt[2 + i] = b->field_at[i] ? (uint16_t)(table - b->field_at[i]) : 0;
    fb_push(b, vt, vt[0]);
    uint32_t vtable = (uint32_t)b->size;
    if (!b->failed) {
        int32_t soff = (int32_t)(vtable - table);
        memcpy(b->buf + b->cap - table, &soff, 4);
    }
    return table;
}

/* The root offset goes first; the whole buffer a multiple of 8 so that the message body
 * after it stays aligned. */
static void fb_finish(fb_t *b, uint32_t root) {
    fb_prealign(b, 4, b->minalign > 8 ? b->minalign : 8);
    fb_offset(b, root);
}

/* --- Arrow's schema and messages ---------------------------------------------------------- */

enum { TYPE_INT = 2, TYPE_UTF8 = 5, TYPE_BOOL = 6 };
enum { HEADER_SCHEMA = 1, HEADER_DICTIONARY_BATCH = 2, HEADER_RECORD_BATCH = 3 };
static const int16_t METADATA_V5 = 4;

static uint32_t key_values(fb_t *b, const char *const *meta, int nmeta) {
    uint32_t offs[32];
    if (nmeta > 32) nmeta = 32;
    for (int i = 0; i < nmeta; i++) {
        uint32_t k = fb_string(b, meta[2 * i]);
        uint32_t v = fb_string(b, meta[2 * i + 1]);
        fb_table(b);
        FB_ADD_OFFSET(b, 0, k);
        FB_ADD_OFFSET(b, 1, v);
        offs[i] = fb_end_table(b);
    }
    return fb_offset_vector(b, offs, (size_t)nmeta);
}

static uint32_t int_type(fb_t *b, int32_t bits, int is_signed) {
    fb_table(b);
    FB_ADD(b, 0, fb_i32, bits);
    FB_ADD(b, 1, fb_i8, (uint8_t)(is_signed != 0));
    return fb_end_table(b);
}

static uint32_t field(fb_t *b, const ipc_column *c, int64_t dictionary_id) {
    uint32_t name = fb_string(b, c->name);
    uint32_t children = fb_offset_vector(b, NULL, 0);
    uint32_t type, encoding = 0;
    uint8_t type_type;
    if (c->type == IPC_UTF8 || c->type == IPC_BOOL || c->type == IPC_DICT_UTF8) {
        type_type = c->type == IPC_BOOL ? TYPE_BOOL : TYPE_UTF8;
        fb_table(b);
        type = fb_end_table(b);
    } else {
        type_type = TYPE_INT;
        type = int_type(b, c->type == IPC_INT64 ? 64 : c->type == IPC_INT32 ? 32 : 8,
                        c->type != IPC_UINT8);
    }
    if (c->type == IPC_DICT_UTF8) {
        uint32_t index = int_type(b, 32, 1);
        fb_table(b);
        FB_ADD(b, 0, fb_i64, dictionary_id);
        FB_ADD_OFFSET(b, 1, index);
        encoding = fb_end_table(b);
    }
    fb_table(b);
    FB_ADD_OFFSET(b, 0, name);
    FB_ADD_OFFSET(b, 3, type);
    if (encoding) FB_ADD_OFFSET(b, 4, encoding);
    FB_ADD_OFFSET(b, 5, children);
    FB_ADD(b, 1, fb_i8, (uint8_t)(c->nullable != 0));
    FB_ADD(b, 2, fb_i8, type_type);
    return fb_end_table(b);
}

static uint32_t message(fb_t *b, uint8_t header_type, uint32_t header, int64_t body) {
    fb_table(b);
    FB_ADD(b, 3, fb_i64, body);
    FB_ADD_OFFSET(b, 2, header);
    FB_ADD(b, 0, fb_i16, METADATA_V5);
    FB_ADD(b, 1, fb_i8, header_type);
    return fb_end_table(b);
}

static void schema_message(fb_t *b, const ipc_column *cols, int ncols, const char *const *meta,
                           int nmeta) {
    uint32_t offs[IPC_MAX_COLUMNS];
    for (int i = 0; i < ncols; i++) offs[i] = field(b, &cols[i], i);
    uint32_t fields = fb_offset_vector(b, offs, (size_t)ncols);
    uint32_t kv = key_values(b, meta, nmeta);
    fb_table(b);
    FB_ADD_OFFSET(b, 1, fields);
    FB_ADD_OFFSET(b, 2, kv);
    FB_ADD(b, 0, fb_i16, (int16_t)0); /* little endian */
    fb_finish(b, message(b, HEADER_SCHEMA, fb_end_table(b), 0));
}

/* --- bodies, written from the columns' own memory ----------------------------------------- */

typedef struct {
    int64_t offset, length;
} ipc_buffer;
typedef struct {
    int64_t length, null_count;
} ipc_node;

#define MAX_IOV (8 * IPC_MAX_COLUMNS + 16)

typedef struct {
    struct iovec iov[MAX_IOV];
    int niov;
    void *owned[2 * IPC_MAX_COLUMNS + 8]; /* bitmaps and flatbuffers freed after the write */
    int nowned;
    ipc_node nodes[IPC_MAX_COLUMNS];
    ipc_buffer buffers[3 * IPC_MAX_COLUMNS];
    int nnodes, nbuffers;
    int64_t body;
    int failed;
} out_t;

static const uint8_t ZEROS[8];

static void emit(out_t *o, const void *p, size_t n) {
    if (o->niov == MAX_IOV) {
        o->failed = 1;
        return;
    }
    if (n) o->iov[o->niov++] = (struct iovec){(void *)p, n};
}

static void *own(out_t *o, void *p) {
    if (!p) o->failed = 1;
    else o->owned[o->nowned++] = p;
    return p;
}

/* A body buffer: its bytes, then zeros to a multiple of 8. */
static void body_buffer(out_t *o, const void *p, int64_t n) {
    o->buffers[o->nbuffers++] = (ipc_buffer){o->body, n};
    emit(o, p, (size_t)n);
    int64_t pad = (8 - (n & 7)) & 7;
    emit(o, ZEROS, (size_t)pad);
    o->body += n + pad;
}

static const uint8_t *bitmap(out_t *o, const uint8_t *bytes, int64_t n) {
    uint8_t *bits = own(o, calloc((size_t)(n + 7) / 8 + 1, 1));
    if (bits)
        for (int64_t i = 0; i < n; i++)
            if (bytes[i]) bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    return bits;
}

static void column_body(out_t *o, const ipc_column *c, int64_t n) {
    int64_t nulls = 0;
    if (c->valid)
        for (int64_t r = 0; r < n; r++) nulls += !c->valid[r];
    o->nodes[o->nnodes++] = (ipc_node){n, nulls};
    body_buffer(o, nulls ? bitmap(o, c->valid, n) : NULL, nulls ? (n + 7) / 8 : 0);
    if (c->type == IPC_UTF8) {
        body_buffer(o, c->offsets, (n + 1) * 4);
        body_buffer(o, c->chars, c->offsets[n]);
    } else if (c->type == IPC_BOOL) {
        body_buffer(o, bitmap(o, c->values, n), (n + 7) / 8);
    } else {
        int64_t width = c->type == IPC_INT64 ? 8 : c->type == IPC_INT32 || c->type == IPC_DICT_UTF8 ? 4 : 1;
        body_buffer(o, c->values, width * n);
    }
}

/* A message: continuation marker, metadata length, the flatbuffer (a multiple of 8). */
static void message_frame(out_t *o, fb_t *b) {
    if (b->failed) {
        o->failed = 1;
        free(b->buf);
        return;
    }
    uint8_t *frame = own(o, malloc(8 + b->size));
    if (!frame) return;
    const uint32_t cont = 0xFFFFFFFFu;
    int32_t len = (int32_t)b->size;
    memcpy(frame, &cont, 4);
    memcpy(frame + 4, &len, 4);
    memcpy(frame + 8, b->buf + b->cap - b->size, b->size);
    free(b->buf);
    emit(o, frame, 8 + b->size);
}

static uint32_t record_batch(fb_t *b, out_t *o, int64_t n) {
    uint32_t bufs = fb_struct_vector(b, o->buffers, sizeof(ipc_buffer), (size_t)o->nbuffers, 8);
    uint32_t nds = fb_struct_vector(b, o->nodes, sizeof(ipc_node), (size_t)o->nnodes, 8);
    fb_table(b);
    FB_ADD(b, 0, fb_i64, n);
    FB_ADD_OFFSET(b, 1, nds);
    FB_ADD_OFFSET(b, 2, bufs);
    return fb_end_table(b);
}

/* Body iovecs are gathered apart from the message that describes them, then spliced after it. */
static void splice_body(out_t *o, int first_body_iov, fb_t *b) {
    struct iovec body[MAX_IOV];
    int nbody = o->niov - first_body_iov;
    memcpy(body, o->iov + first_body_iov, (size_t)nbody * sizeof *body);
    o->niov = first_body_iov;
    message_frame(o, b);
    for (int i = 0; i < nbody; i++) emit(o, body[i].iov_base, body[i].iov_len);
}

static int write_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) w -= (ssize_t)iov->iov_len, iov++, n--;
        if (n > 0) iov->iov_base = (uint8_t *)iov->iov_base + w, iov->iov_len -= (size_t)w;
    }
    return 0;
}

int ipc_write_table(int fd, const ipc_column *cols, int ncols, int64_t n,
                    const char *const *meta, int nmeta) {
    if (ncols > IPC_MAX_COLUMNS) return -1;
    out_t *o = calloc(1, sizeof *o);
    if (!o) return -1;
    fb_t s = {0};
    schema_message(&s, cols, ncols, meta, nmeta);
    message_frame(o, &s);
    for (int i = 0; i < ncols; i++) {
        const ipc_column *c = &cols[i];
        if (c->type != IPC_DICT_UTF8) continue;
        /* the dictionary's values, as a batch of one utf8 column, before the record batch */
        ipc_column values = {c->name, IPC_UTF8, 0, NULL, c->offsets, c->chars, NULL, 0};
        int first = o->niov;
        o->nnodes = o->nbuffers = 0;
        o->body = 0;
        column_body(o, &values, c->dictionary_size);
        fb_t d = {0};
        uint32_t data = record_batch(&d, o, c->dictionary_size);
        fb_table(&d);
        FB_ADD(&d, 0, fb_i64, (int64_t)i);
        FB_ADD_OFFSET(&d, 1, data);
        fb_finish(&d, message(&d, HEADER_DICTIONARY_BATCH, fb_end_table(&d), o->body));
        splice_body(o, first, &d);
    }
    int first = o->niov;
    o->nnodes = o->nbuffers = 0;
    o->body = 0;
    for (int i = 0; i < ncols; i++) {
        ipc_column c = cols[i];
        if (c.type == IPC_DICT_UTF8) c.offsets = NULL, c.chars = NULL;
        column_body(o, &c, n);
    }
    fb_t r = {0};
    fb_finish(&r, message(&r, HEADER_RECORD_BATCH, record_batch(&r, o, n), o->body));
    splice_body(o, first, &r);
    static const uint32_t EOS[2] = {0xFFFFFFFFu, 0};
    emit(o, EOS, 8);
    int rc = o->failed ? -1 : write_all(fd, o->iov, o->niov);
    for (int i = 0; i < o->nowned; i++) free(o->owned[i]);
    free(o);
    return rc;
}
