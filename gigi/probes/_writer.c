/* The probes' writer in C: a segment put together and written with the GIL let go once.
 *
 * The writer thread waits for the GIL each time it has let go of it, behind every busy thread
 * of the program (a switch interval each, more on a loaded machine). numpy and pyarrow let go
 * of it at every step, some twenty times in a flush of events, and under four busy threads a
 * flush took 0.2-1 s: a SIGKILL then lost several intervals. Here the records become columns
 * and an Arrow IPC stream (native/arrow_ipc.c, the native runtime's encoder), written under a
 * temporary name and renamed, in one stretch without the GIL.
 *
 * Its plain twin is the pyarrow path in _state.py; the tests compare the two.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arrow_ipc.h"

#define RECORD_FIELDS 8
#define RID_SHIFT 3
#define HAS_VALUE 4
#define KIND_MASK 3
#define NULL_DUR (-1)
#define NULL_SITE (-1)
#define IMPLICIT_TASK 0
#define MAX_META 32

/* What a call holds on to until it returns: the buffers it borrowed and the memory it made. */
typedef struct {
    Py_buffer views[3 * IPC_MAX_COLUMNS];
    int nviews;
    void *owned[4 * IPC_MAX_COLUMNS];
    int nowned;
} hold_t;

static void hold_release(hold_t *h) {
    for (int i = 0; i < h->nviews; i++) PyBuffer_Release(&h->views[i]);
    for (int i = 0; i < h->nowned; i++) free(h->owned[i]);
    h->nviews = h->nowned = 0;
}

static void *hold_alloc(hold_t *h, size_t n) {
    void *p = malloc(n ? n : 1);
    if (p) h->owned[h->nowned++] = p;
    return p;
}

/* The bytes of a buffer object (None: NULL), borrowed until hold_release. */
static int borrow(hold_t *h, PyObject *obj, const void **out, Py_ssize_t *len) {
    *out = NULL;
    if (len) *len = 0;
    if (obj == Py_None) return 0;
    if (h->nviews == (int)(sizeof h->views / sizeof h->views[0])) {
        PyErr_SetString(PyExc_ValueError, "too many buffers");
        return -1;
    }
    if (PyObject_GetBuffer(obj, &h->views[h->nviews], PyBUF_SIMPLE) < 0) return -1;
    *out = h->views[h->nviews].buf;
    if (len) *len = h->views[h->nviews].len;
    h->nviews++;
    return 0;
}

/* Schema metadata: a list of (key, value) bytes, as `const char *` pairs into those objects. */
static int parse_meta(PyObject *meta, const char **kv, int *n) {
    if (!PyList_Check(meta) || PyList_GET_SIZE(meta) > MAX_META) {
        PyErr_SetString(PyExc_TypeError, "meta: a list of (bytes, bytes), at most 32");
        return -1;
    }
    *n = (int)PyList_GET_SIZE(meta);
    for (int i = 0; i < *n; i++) {
        PyObject *pair = PyList_GET_ITEM(meta, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "meta: a list of (bytes, bytes)");
            return -1;
        }
        kv[2 * i] = PyBytes_AS_STRING(PyTuple_GET_ITEM(pair, 0));
        kv[2 * i + 1] = PyBytes_AS_STRING(PyTuple_GET_ITEM(pair, 1));
    }
    return 0;
}

/* Write the segment at path, through path.tmp: 0, or an errno. Runs without the GIL. */
static int write_file(const char *path, const ipc_column *cols, int ncols, int64_t n,
                      const char *const *meta, int nmeta) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return errno;
    errno = 0;
    int rc = ipc_write_table(fd, cols, ncols, n, meta, nmeta) == 0 ? 0 : (errno ? errno : EIO);
    if (close(fd) != 0 && rc == 0) rc = errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = errno;
    if (rc != 0) unlink(tmp);
    return rc;
}

static PyObject *os_error(int err, PyObject *path) {
    errno = err;
    return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
}

/* write_events(path, meta, names, parts) -> list of events written per code
 *
 * parts: (thread, implicit_task, records) per ring, records a bytes object of the ring's
 * records (8 native int64 fields each: ts, code, task, amount, object, site, value, dur).
 * names: the resources, the dictionary of the resource column. Returns the events written by
 * code & ~HAS_VALUE (rid << 3 | kind), len(names) << 3 counts. */
static PyObject *write_events(PyObject *mod, PyObject *args) {
    PyObject *path, *meta, *names, *parts;
    (void)mod;
    if (!PyArg_ParseTuple(args, "O&O!O!O!", PyUnicode_FSConverter, &path, &PyList_Type, &meta,
                          &PyList_Type, &names, &PyList_Type, &parts))
        return NULL;
    hold_t *h = calloc(1, sizeof *h);
    const char *kv[2 * MAX_META];
    int nmeta = 0;
    Py_ssize_t nnames = PyList_GET_SIZE(names), nparts = PyList_GET_SIZE(parts);
    const char **chunk = PyMem_Calloc((size_t)nparts + 1, sizeof *chunk);
    int64_t *rows = PyMem_Calloc((size_t)nparts + 1, sizeof *rows);
    int64_t *thread = PyMem_Calloc((size_t)nparts + 1, sizeof *thread);
    int64_t *implicit = PyMem_Calloc((size_t)nparts + 1, sizeof *implicit);
    int32_t *name_offsets = PyMem_Calloc((size_t)nnames + 1, sizeof *name_offsets);
    PyObject *counts_out = NULL;
    char *name_chars = NULL;
    int64_t n = 0;
    if (!h || !chunk || !rows || !thread || !implicit || !name_offsets) {
        PyErr_NoMemory();
        goto done;
    }
    if (parse_meta(meta, kv, &nmeta) < 0) goto done;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < nnames; i++) {
        Py_ssize_t len;
        if (!PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(names, i), &len)) goto done;
        size += len;
        name_offsets[i + 1] = (int32_t)size;
    }
    name_chars = PyMem_Malloc((size_t)size + 1);
    if (!name_chars) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nnames; i++) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(names, i), &len);
        memcpy(name_chars + name_offsets[i], s, (size_t)len);
    }
    for (Py_ssize_t i = 0; i < nparts; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i), *records;
        long long th, task;
        if (!PyTuple_Check(part) || !PyArg_ParseTuple(part, "LLS", &th, &task, &records)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "parts: tuples");
            goto done;
        }
        /* bytes, immutable and held by the caller's list while the GIL is let go */
        Py_ssize_t len = PyBytes_GET_SIZE(records);
        chunk[i] = PyBytes_AS_STRING(records);
        if (len % (RECORD_FIELDS * 8) != 0) {
            PyErr_SetString(PyExc_ValueError, "records: not a whole number of records");
            goto done;
        }
        rows[i] = len / (RECORD_FIELDS * 8), thread[i] = th, implicit[i] = task;
        n += rows[i];
    }
    size_t ncodes = (size_t)nnames << RID_SHIFT;
    int64_t *counts = hold_alloc(h, (ncodes + 1) * sizeof *counts);
    int64_t *ts = hold_alloc(h, (size_t)n * 8), *task = hold_alloc(h, (size_t)n * 8);
    int64_t *th = hold_alloc(h, (size_t)n * 8), *amount = hold_alloc(h, (size_t)n * 8);
    int64_t *dur = hold_alloc(h, (size_t)n * 8), *object = hold_alloc(h, (size_t)n * 8);
    int64_t *value = hold_alloc(h, (size_t)n * 8);
    int32_t *rid = hold_alloc(h, (size_t)n * 4), *site = hold_alloc(h, (size_t)n * 4);
    uint8_t *kind = hold_alloc(h, (size_t)n), *has_dur = hold_alloc(h, (size_t)n);
    uint8_t *has_site = hold_alloc(h, (size_t)n), *has_value = hold_alloc(h, (size_t)n);
    if (!counts || !ts || !task || !th || !amount || !dur || !object || !value || !rid ||
        !site || !kind || !has_dur || !has_site || !has_value) {
        PyErr_NoMemory();
        goto done;
    }
    memset(counts, 0, (ncodes + 1) * sizeof *counts);
    const char *cpath = PyBytes_AS_STRING(path);
    int err = 0, bad_rid = 0;
    Py_BEGIN_ALLOW_THREADS;
    int64_t r = 0;
    for (Py_ssize_t i = 0; i < nparts; i++) {
        for (int64_t k = 0; k < rows[i]; k++, r++) {
            int64_t f[RECORD_FIELDS];
            memcpy(f, chunk[i] + k * RECORD_FIELDS * 8, sizeof f);
            int64_t code = f[1];
            ts[r] = f[0];
            kind[r] = (uint8_t)(code & KIND_MASK);
            rid[r] = (int32_t)(code >> RID_SHIFT);
            task[r] = f[2] == IMPLICIT_TASK ? implicit[i] : f[2];
            th[r] = thread[i];
            amount[r] = f[3];
            object[r] = f[4];
            site[r] = (int32_t)f[5], has_site[r] = f[5] != NULL_SITE;
            value[r] = f[6], has_value[r] = (code & HAS_VALUE) != 0;
            dur[r] = f[7], has_dur[r] = f[7] != NULL_DUR;
            if (code < 0 || (code >> RID_SHIFT) >= nnames) bad_rid = 1;
            else counts[code & ~HAS_VALUE]++;
        }
    }
    if (!bad_rid) {
        ipc_column cols[] = {
            {"ts", IPC_INT64, 0, ts},
            {"kind", IPC_UINT8, 0, kind},
            {"resource", IPC_DICT_UTF8, 0, rid, name_offsets, name_chars, NULL, nnames},
            {"task", IPC_INT64, 0, task},
            {"thread", IPC_INT64, 0, th},
            {"amount", IPC_INT64, 0, amount},
            {"dur", IPC_INT64, 1, dur, NULL, NULL, has_dur},
            {"object", IPC_INT64, 0, object},
            {"site", IPC_INT32, 1, site, NULL, NULL, has_site},
            {"value", IPC_INT64, 1, value, NULL, NULL, has_value},
        };
        err = write_file(cpath, cols, 10, n, kv, nmeta);
    }
    Py_END_ALLOW_THREADS;
    if (bad_rid) {
        PyErr_SetString(PyExc_ValueError, "a record's resource is not among the names");
        goto done;
    }
    if (err) {
        os_error(err, path);
        goto done;
    }
    counts_out = PyList_New((Py_ssize_t)ncodes);
    for (size_t c = 0; counts_out && c < ncodes; c++) {
        PyObject *v = PyLong_FromLongLong(counts[c]);
        if (!v) Py_CLEAR(counts_out);
        else PyList_SET_ITEM(counts_out, (Py_ssize_t)c, v);
    }
done:
    if (h) hold_release(h);
    free(h);
    PyMem_Free(chunk), PyMem_Free(rows), PyMem_Free(thread), PyMem_Free(implicit);
    PyMem_Free(name_offsets), PyMem_Free(name_chars);
    Py_DECREF(path);
    return counts_out;
}

/* write_table(path, meta, columns, rows) -> None
 *
 * columns: (name, type, nullable, values, valid, offsets) each, type an arrow_ipc.h
 * ipc_type (int64, int32, uint8, bool or utf8); values: the rows' values (bool: a byte each;
 * utf8: the characters), valid: a byte a row, 1 = present (None: all present), offsets: utf8
 * only, rows + 1 int32. */
static PyObject *write_table(PyObject *mod, PyObject *args) {
    PyObject *path, *meta, *columns;
    Py_ssize_t n;
    (void)mod;
    if (!PyArg_ParseTuple(args, "O&O!O!n", PyUnicode_FSConverter, &path, &PyList_Type, &meta,
                          &PyList_Type, &columns, &n))
        return NULL;
    hold_t *h = calloc(1, sizeof *h);
    const char *kv[2 * MAX_META];
    ipc_column cols[IPC_MAX_COLUMNS];
    int nmeta = 0, ncols = (int)PyList_GET_SIZE(columns);
    PyObject *result = NULL;
    if (!h) {
        PyErr_NoMemory();
        goto done;
    }
    if (ncols > IPC_MAX_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "too many columns");
        goto done;
    }
    if (parse_meta(meta, kv, &nmeta) < 0) goto done;
    for (int i = 0; i < ncols; i++) {
        PyObject *values, *valid, *offsets;
        const char *name;
        int type, nullable;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(columns, i), "sipOOO", &name, &type, &nullable,
                              &values, &valid, &offsets))
            goto done;
        static const Py_ssize_t WIDTH[] = {8, 4, 1, 1};
        cols[i] = (ipc_column){name, (enum ipc_type)type, nullable};
        Py_ssize_t len, vlen, olen;
        if (borrow(h, values, &cols[i].values, &len) < 0 ||
            borrow(h, valid, (const void **)&cols[i].valid, &vlen) < 0 ||
            borrow(h, offsets, (const void **)&cols[i].offsets, &olen) < 0)
            goto done;
        int ok = type == IPC_UTF8 ? olen == (n + 1) * 4 && cols[i].offsets[n] <= len &&
                                        cols[i].offsets[0] == 0
                 : type >= IPC_INT64 && type <= IPC_BOOL ? len == WIDTH[type] * n
                                                         : 0;
        if (!ok || (valid != Py_None && vlen != n)) {
            PyErr_Format(PyExc_ValueError, "column %s: buffers do not hold %zd rows", name, n);
            goto done;
        }
        if (type == IPC_UTF8) cols[i].chars = cols[i].values, cols[i].values = NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS;
    err = write_file(PyBytes_AS_STRING(path), cols, ncols, n, kv, nmeta);
    Py_END_ALLOW_THREADS;
    if (err) {
        os_error(err, path);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    if (h) hold_release(h);
    free(h);
    Py_DECREF(path);
    return result;
}

static PyMethodDef module_methods[] = {
    {"write_events", write_events, METH_VARARGS,
     "write_events(path, meta, names, parts) -> events written per code"},
    {"write_table", write_table, METH_VARARGS, "write_table(path, meta, columns, rows)"},
    {NULL},
};

static struct PyModuleDef writer_module = {
    PyModuleDef_HEAD_INIT, "_writer", "The probes' segments, written without the GIL.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__writer(void) { return PyModule_Create(&writer_module); }
