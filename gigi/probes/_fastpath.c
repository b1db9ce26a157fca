/* The probes' hot path in C: one record into the calling thread's ring per call.
 *
 * Same record, same ring protocol and same slow paths as the pure-Python methods in
 * _resource.py (its plain twin, which the tests compare it with): 8 native int64 fields
 * (ts, code, task, amount, object, site, value, dur), the producer publishes a record by
 * advancing `head`; when head reaches `limit` the Python slow path (`full`) decides.
 * It runs with the GIL held, like the Python code it replaces.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define RECORD_FIELDS 8
#define RECORD_SIZE (RECORD_FIELDS * 8)
#define HAS_VALUE 4
#define NULL_SITE (-1)

/* ---- RingCore: the part of a ring the hot path touches ----------------------------------- */

typedef struct {
    PyObject_HEAD
    long long head;   /* bytes published by the owner thread */
    long long tail;   /* bytes taken by the writer */
    long long limit;  /* head may grow up to here (tail + cap) */
    long long cap;    /* ring size in bytes, a power of two */
    long long mask;   /* cap - 1 */
    PyObject *buf;    /* the bytearray holding the records */
    char *data;       /* its storage */
} RingCore;

static int ring_set_buf(RingCore *self, PyObject *value, void *closure) {
    (void)closure;
    if (value == NULL || !PyByteArray_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "ring buffer must be a bytearray");
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->buf, value);
    self->data = PyByteArray_AS_STRING(value);
    return 0;
}

static PyObject *ring_get_buf(RingCore *self, void *closure) {
    (void)closure;
    if (self->buf == NULL) Py_RETURN_NONE;
    return Py_NewRef(self->buf);
}

static int ring_traverse(RingCore *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    return 0;
}

static int ring_clear(RingCore *self) {
    Py_CLEAR(self->buf);
    self->data = NULL;
    return 0;
}

static void ring_dealloc(RingCore *self) {
    PyObject_GC_UnTrack(self);
    ring_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef ring_members[] = {
    {"head", T_LONGLONG, offsetof(RingCore, head), 0, "bytes published by the owner"},
    {"tail", T_LONGLONG, offsetof(RingCore, tail), 0, "bytes taken by the writer"},
    {"limit", T_LONGLONG, offsetof(RingCore, limit), 0, "head may grow up to here"},
    {"cap", T_LONGLONG, offsetof(RingCore, cap), 0, "ring size, bytes"},
    {"mask", T_LONGLONG, offsetof(RingCore, mask), 0, "cap - 1"},
    {NULL},
};

static PyGetSetDef ring_getset[] = {
    {"buf", (getter)ring_get_buf, (setter)ring_set_buf, "the records (bytearray)", NULL},
    {NULL},
};

static PyTypeObject RingCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gigi.probes._fastpath.RingCore",
    .tp_basicsize = sizeof(RingCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Ring state shared by the C hot path and the Python writer.",
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)ring_traverse,
    .tp_clear = (inquiry)ring_clear,
    .tp_dealloc = (destructor)ring_dealloc,
    .tp_members = ring_members,
    .tp_getset = ring_getset,
};

/* ---- module state ------------------------------------------------------------------------ */

static _Thread_local RingCore *thread_ring = NULL; /* borrowed; the thread's local keeps it */
static PyObject *task_var = NULL;    /* contextvars.ContextVar holding the task id */
static PyObject *new_ring_fn = NULL; /* _state.new_ring(): makes and binds this thread's ring */
static PyObject *full_fn = NULL;     /* _state.full(ring, code, amount, obj, site, value, dur) */
static PyObject *str_object, *str_amount, *str_site, *str_value, *str_dur;

static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* ---- ProbeBase: the resource's recording methods ----------------------------------------- */

typedef struct {
    PyObject_HEAD
    long long codes[4]; /* (rid << 3) | kind, for WAIT, ACQUIRE, USE, RELEASE */
} ProbeBase;

static int probe_init(ProbeBase *self, PyObject *args, PyObject *kwargs) {
    long long rid;
    (void)kwargs;
    if (!PyArg_ParseTuple(args, "L", &rid)) return -1;
    for (int k = 0; k < 4; k++) self->codes[k] = (rid << 3) | k;
    return 0;
}

/* Parse (object=0, amount=1, site=-1, value=None[, dur=0]) from a vectorcall. */
static int parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int with_dur,
                 long long out[4], PyObject **value) {
    PyObject *slots[5] = {NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t max = with_dur ? 5 : 4;
    if (nargs > max) {
        PyErr_Format(PyExc_TypeError, "takes at most %zd arguments (%zd given)", max, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) slots[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            int at = -1;
            if (name == str_object || PyUnicode_Compare(name, str_object) == 0) at = 0;
            else if (name == str_amount || PyUnicode_Compare(name, str_amount) == 0) at = 1;
            else if (name == str_site || PyUnicode_Compare(name, str_site) == 0) at = 2;
            else if (name == str_value || PyUnicode_Compare(name, str_value) == 0) at = 3;
            else if (with_dur && (name == str_dur || PyUnicode_Compare(name, str_dur) == 0))
                at = 4;
            if (at < 0) {
                PyErr_Format(PyExc_TypeError, "unexpected keyword argument %R", name);
                return -1;
            }
            slots[at] = args[nargs + i];
        }
    }
    long long defaults[4] = {0, 1, NULL_SITE, 0};
    int map[4] = {0, 1, 2, 4}; /* object, amount, site, dur */
    for (int f = 0; f < 4; f++) {
        PyObject *v = slots[map[f]];
        if (v == NULL) {
            out[f] = defaults[f];
            continue;
        }
        out[f] = PyLong_AsLongLong(v);
        if (out[f] == -1 && PyErr_Occurred()) return -1;
    }
    *value = (slots[3] == NULL) ? Py_None : slots[3];
    return 0;
}

static PyObject *record(ProbeBase *self, int kind, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, int with_dur) {
    long long f[4]; /* object, amount, site, dur */
    PyObject *value;
    if (parse(args, nargs, kwnames, with_dur, f, &value) < 0) return NULL;
    RingCore *ring = thread_ring;
    if (ring == NULL) {
        PyObject *r = PyObject_CallNoArgs(new_ring_fn);
        if (r == NULL) return NULL;
        Py_DECREF(r); /* the thread's local holds it; new_ring bound it */
        ring = thread_ring;
        if (ring == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "gigi probes: no ring bound to this thread");
            return NULL;
        }
    }
    long long code = self->codes[kind];
    long long value_field = 0;
    if (value != Py_None) {
        value_field = PyLong_AsLongLong(value);
        if (value_field == -1 && PyErr_Occurred()) return NULL;
        code |= HAS_VALUE;
    }
    if (ring->head >= ring->limit || ring->data == NULL) {
        return PyObject_CallFunction(full_fn, "OLLLLOL", (PyObject *)ring, self->codes[kind],
                                     f[1], f[0], f[2], value, f[3]);
    }
    PyObject *task_obj = NULL;
    long long task = 0;
    if (PyContextVar_Get(task_var, NULL, &task_obj) < 0) return NULL;
    if (task_obj != NULL) {
        task = PyLong_AsLongLong(task_obj);
        Py_DECREF(task_obj);
        if (task == -1 && PyErr_Occurred()) return NULL;
    }
    int64_t rec[RECORD_FIELDS] = {now_ns(), code, task, f[1], f[0], f[2], value_field, f[3]};
    memcpy(ring->data + (ring->head & ring->mask), rec, RECORD_SIZE);
    ring->head += RECORD_SIZE;
    Py_RETURN_NONE;
}

static PyObject *probe_acquire(ProbeBase *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    return record(self, 1, args, nargs, kwnames, 0);
}

static PyObject *probe_use(ProbeBase *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames) {
    return record(self, 2, args, nargs, kwnames, 1);
}

static PyObject *probe_release(ProbeBase *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    return record(self, 3, args, nargs, kwnames, 0);
}

static PyMethodDef probe_methods[] = {
    {"_acquire_c", (PyCFunction)(void (*)(void))probe_acquire, METH_FASTCALL | METH_KEYWORDS,
     "Record an ACQUIRE (C hot path)."},
    {"_use_c", (PyCFunction)(void (*)(void))probe_use, METH_FASTCALL | METH_KEYWORDS,
     "Record a USE (C hot path)."},
    {"_release_c", (PyCFunction)(void (*)(void))probe_release, METH_FASTCALL | METH_KEYWORDS,
     "Record a RELEASE (C hot path)."},
    {NULL},
};

static PyTypeObject ProbeBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gigi.probes._fastpath.ProbeBase",
    .tp_basicsize = sizeof(ProbeBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C recording methods of a resource; ProbeBase(rid).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)probe_init,
    .tp_methods = probe_methods,
};

/* ---- module functions -------------------------------------------------------------------- */

static PyObject *fast_setup(PyObject *mod, PyObject *args) {
    PyObject *var, *new_ring, *full;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO", &var, &new_ring, &full)) return NULL;
    Py_XSETREF(task_var, Py_NewRef(var));
    Py_XSETREF(new_ring_fn, Py_NewRef(new_ring));
    Py_XSETREF(full_fn, Py_NewRef(full));
    Py_RETURN_NONE;
}

static PyObject *fast_bind(PyObject *mod, PyObject *ring) {
    (void)mod;
    if (ring == Py_None) {
        thread_ring = NULL;
        Py_RETURN_NONE;
    }
    if (!PyObject_TypeCheck(ring, &RingCoreType)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes a RingCore or None");
        return NULL;
    }
    thread_ring = (RingCore *)ring;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"setup", fast_setup, METH_VARARGS, "setup(task_var, new_ring, full)"},
    {"bind", fast_bind, METH_O, "bind(ring): the calling thread's ring (None to unbind)"},
    {NULL},
};

static struct PyModuleDef fastpath_module = {
    PyModuleDef_HEAD_INIT, "_fastpath", "The probes' hot path in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (PyType_Ready(&RingCoreType) < 0 || PyType_Ready(&ProbeBaseType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fastpath_module);
    if (m == NULL) return NULL;
    str_object = PyUnicode_InternFromString("object");
    str_amount = PyUnicode_InternFromString("amount");
    str_site = PyUnicode_InternFromString("site");
    str_value = PyUnicode_InternFromString("value");
    str_dur = PyUnicode_InternFromString("dur");
    if (PyModule_AddObjectRef(m, "RingCore", (PyObject *)&RingCoreType) < 0 ||
        PyModule_AddObjectRef(m, "ProbeBase", (PyObject *)&ProbeBaseType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
