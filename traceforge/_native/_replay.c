/* The replay of `check` (check/replay.py): slices and flows in Perfetto's order.
 *
 * Perfetto's importer keeps a stack of open slices per thread track and binds flow events
 * to the top of it; which slices spill, which B events end early and which arrows are
 * dropped depends on that order alone, so it is walked once, sequentially. As a Python
 * loop the walk was a large share of `check` on a Kineto trace. This walks the
 * same rules over the columns and writes what it finds as (rule, ordinal, other ordinal,
 * other's name, flags) records; check/replay.py turns them into findings. The rules follow
 * trace_processor's slice_tracker.cc and flow_tracker.cc, including where they pop the top
 * of the stack rather than the slice they looked at (see check/replay.py).
 *
 * A trace's events are walked a window of start times at a time (check/replay.py reads
 * them back from disk that way), so a walker keeps, between calls, what Perfetto keeps:
 * each thread's stack, the flow ends waiting for a slice, the flow ids that have a source,
 * and the number Perfetto gave each v1 flow key when it first met it. Stack entries carry
 * what later rules and notes read of them (ordinal, name, cat, flags), not a row index.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "portable.h"

enum { SLICE, BEGIN, END, FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT };  /* row kinds */
enum { V2_BEGIN, V2_STEP, V2_END };                                          /* v2 flow modes */
enum { SPILL, MAX_DEPTH_EXCEEDED, MISPLACED_END, NO_ENCLOSING_SLICE, DUPLICATE_ID,
       END_WITHOUT_START, STEP_WITHOUT_START, END_FROM_SLICE_0, BOUND_UNDER_SPILL };  /* what is found */
#define MAX_DEPTH 512
#define RECORD 5  /* int64s per finding */

typedef struct {
    int64_t start, ordinal;
    tf_wide end;   /* start + dur exactly (both int64) */
    int64_t name, cat, flags;
    int open;      /* a B whose E has not come: no end yet */
} Entry;

typedef struct { Entry *items; Py_ssize_t len, cap; } Stack;
typedef struct { int64_t *items; Py_ssize_t len, cap; } Ints;  /* also (fid, ordinal) pairs */

/* The columns of a window's rows, int64 each, at any stride (views of a row-major block). */
enum { KIND, TS, DUR, TRACK, KEY, FID, V2_MODE, NAME, CAT, FLAGS, ORDINAL, N_COLUMNS };
typedef struct {
    const char *at[N_COLUMNS];
    Py_ssize_t stride[N_COLUMNS];
} Rows;

typedef struct {
    Rows w;              /* the window being walked */
    Py_ssize_t n_tracks;
    int slices_only;
    Stack *stacks;
    Ints *pending;       /* per track: (flow id, ordinal) of f events without bp, waiting for a slice */
    Entry *spilled;      /* per track: the last slice that spilled since a slice was pushed there */
    uint8_t *has_spilled;
    int32_t *dense_of;   /* per v1 flow key: Perfetto's flow id for it, -1 until first met */
    uint64_t n_dense, next_dense;
    uint8_t *dense;      /* flow ids 0 .. n_dense - 1 that have a source slice */
    uint64_t *sparse;    /* other ids with one (v2 bind_ids), open addressing; 0 marks empty */
    Py_ssize_t sparse_cap, sparse_len;
    int has_zero;        /* id 0 among the sparse ones (only when n_dense is 0) */
    Ints out;            /* RECORD int64s per finding */
    int failed;
} Walker;

static int push_int(Ints *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? 2 * v->cap : 64;
        int64_t *grown = PyMem_RawRealloc(v->items, cap * sizeof(int64_t));
        if (!grown) return -1;
        v->items = grown;
        v->cap = cap;
    }
    v->items[v->len++] = x;
    return 0;
}

static inline int64_t get(const Walker *r, int column, int64_t row) {
    return *(const int64_t *)(r->w.at[column] + row * r->w.stride[column]);
}

/* A finding about the event `ordinal`; `other`, when not NULL, is the stack entry it concerns. */
static void record(Walker *r, int rule, int64_t ordinal, int64_t flags, const Entry *other) {
    int64_t fields[RECORD] = {rule, ordinal, other ? other->ordinal : -1, other ? other->name : -1,
                              flags | (other ? other->flags : 0)};
    for (int i = 0; i < RECORD; i++)
        if (push_int(&r->out, fields[i]) < 0) r->failed = 1;
}

/* A finding about the window's row `row`. */
static void found(Walker *r, int rule, int64_t row, const Entry *other) {
    record(r, rule, get(r, ORDINAL, row), get(r, FLAGS, row), other);
}

/* -- flow ids with a source slice ------------------------------------------------------- */

static inline Py_ssize_t sparse_slot(const Walker *r, uint64_t fid) {
    uint64_t h = fid * 0x9E3779B97F4A7C15ULL;
    Py_ssize_t j = (Py_ssize_t)(h >> 20) & (r->sparse_cap - 1);
    while (r->sparse[j] && r->sparse[j] != fid) j = (j + 1) & (r->sparse_cap - 1);
    return j;
}

static int started(const Walker *r, uint64_t fid) {
    if (fid < r->n_dense) return r->dense[fid];
    if (!fid) return r->has_zero;
    return r->sparse_cap && r->sparse[sparse_slot(r, fid)] == fid;
}

static void start_flow(Walker *r, uint64_t fid) {
    if (fid < r->n_dense) { r->dense[fid] = 1; return; }
    if (!fid) { r->has_zero = 1; return; }
    if (2 * (r->sparse_len + 1) > r->sparse_cap) {
        Py_ssize_t old_cap = r->sparse_cap, cap = old_cap ? 2 * old_cap : 1024;
        uint64_t *old = r->sparse;
        r->sparse = PyMem_RawCalloc(cap, sizeof(uint64_t));
        if (!r->sparse) { r->sparse = old; r->failed = 1; return; }
        r->sparse_cap = cap;
        for (Py_ssize_t i = 0; i < old_cap; i++)
            if (old[i]) r->sparse[sparse_slot(r, old[i])] = old[i];
        PyMem_RawFree(old);
    }
    Py_ssize_t j = sparse_slot(r, fid);
    if (!r->sparse[j]) { r->sparse[j] = fid; r->sparse_len++; }
}

/* Perfetto numbers v1 flows 0, 1, 2, ... as it first meets their keys (id, cat, name). */
static uint64_t v1_flow_id(Walker *r, int64_t key) {
    if (r->dense_of[key] < 0) r->dense_of[key] = (int32_t)r->next_dense++;
    return (uint64_t)r->dense_of[key];
}

/* -- slices ----------------------------------------------------------------------------- */

/* Pops slices that ended by ts; the entry the slice [ts, ts + dur) partially overlaps, or
 * NULL (slice_tracker.cc MaybeCloseStack). has_dur 0: a B or an E. */
static const Entry *close_stack(Walker *r, Stack *st, int64_t ts, int has_dur, int64_t dur, int64_t row) {
    int open_descendant = 0;
    for (Py_ssize_t i = st->len - 1; i >= 0; i--) {
        Entry *e = &st->items[i];
        if (e->open) {
            open_descendant = 1;
        } else if (open_descendant) {
            if (tf_wide_lt(e->end, tf_wide_of(ts))) {
                found(r, MISPLACED_END, row, e);
                st->len = i;
                open_descendant = 0;
            }
        } else if (tf_wide_lt(e->end, tf_wide_of(ts)) ||
                   (tf_wide_eq(e->end, tf_wide_of(ts)) && !(tf_wide_eq(e->end, tf_wide_of(e->start)) && has_dur && dur == 0))) {
            st->len--;  /* the top, whichever slice was looked at */
        } else if (has_dur && tf_wide_lt(tf_wide_of(ts), e->end) && tf_wide_lt(e->end, tf_wide_sum(ts, dur))) {
            return e;
        }
    }
    return NULL;
}

static void bind_pending(Walker *r, int64_t track) {
    Ints *p = &r->pending[track];
    for (Py_ssize_t i = 0; i < p->len; i += 2) {
        uint64_t fid = (uint64_t)p->items[i];
        if (!started(r, fid)) {
            start_flow(r, fid);
            record(r, END_FROM_SLICE_0, p->items[i + 1], 0, NULL);
        }
    }
    p->len = 0;
}

static void start_slice(Walker *r, int64_t track, int has_dur, int64_t row) {
    Stack *st = &r->stacks[track];
    int64_t ts = get(r, TS, row), dur = has_dur ? get(r, DUR, row) : 0;
    if (st->len) {
        const Entry *over = close_stack(r, st, ts, has_dur, dur, row);
        if (over) {
            found(r, SPILL, row, over);
            Entry *s = &r->spilled[track];  /* a flow inside it binds to the slice under it */
            s->start = ts;
            s->end = tf_wide_sum(ts, dur);
            s->open = 0;
            s->ordinal = get(r, ORDINAL, row);
            s->name = get(r, NAME, row);
            s->cat = get(r, CAT, row);
            s->flags = get(r, FLAGS, row);
            r->has_spilled[track] = 1;
            return;
        }
    }
    if (st->len >= MAX_DEPTH) { found(r, MAX_DEPTH_EXCEEDED, row, &st->items[st->len - 1]); return; }
    if (st->len == st->cap) {
        Py_ssize_t cap = st->cap ? 2 * st->cap : 8;
        Entry *grown = PyMem_RawRealloc(st->items, cap * sizeof(Entry));
        if (!grown) { r->failed = 1; return; }
        st->items = grown;
        st->cap = cap;
    }
    Entry *e = &st->items[st->len++];
    e->start = ts;
    e->end = has_dur ? tf_wide_sum(ts, dur) : tf_wide_of(0);
    e->open = !has_dur;
    e->ordinal = get(r, ORDINAL, row);
    e->name = get(r, NAME, row);
    e->cat = get(r, CAT, row);
    e->flags = get(r, FLAGS, row);
    r->has_spilled[track] = 0;
    if (r->pending[track].len) bind_pending(r, track);
}

/* An E: closes the innermost open B with its name (and cat, if given). */
static void end_slice(Walker *r, int64_t track, int64_t row) {
    Stack *st = &r->stacks[track];
    if (!st->len) return;
    int64_t ts = get(r, TS, row);
    close_stack(r, st, ts, 0, 0, row);
    int64_t name = get(r, NAME, row), cat = get(r, CAT, row);
    for (Py_ssize_t i = st->len - 1; i >= 0; i--) {
        Entry *e = &st->items[i];
        if (!e->open) continue;
        if (cat >= 0 && e->cat != cat) continue;
        if (name >= 0 && e->name >= 0 && e->name != name) continue;
        e->end = tf_wide_of(ts);
        e->open = 0;
        if (i == st->len - 1) st->len--;
        return;
    }
}

/* -- flows ------------------------------------------------------------------------------ */

/* A v1 flow event that binds to the top of its thread's stack although its ts lies inside a
 * slice that spilled after that top was pushed: the arrow is drawn to the slice under it. */
static void bound(Walker *r, int64_t track, int64_t row) {
    if (!r->has_spilled[track]) return;
    const Entry *s = &r->spilled[track];
    int64_t ts = get(r, TS, row);
    if (s->start <= ts && tf_wide_lt(tf_wide_of(ts), s->end)) found(r, BOUND_UNDER_SPILL, row, s);
}

static void flow_begin(Walker *r, int64_t track, uint64_t fid, int64_t row, int v1) {
    if (!r->stacks[track].len) found(r, NO_ENCLOSING_SLICE, row, NULL);
    else if (started(r, fid)) found(r, DUPLICATE_ID, row, NULL);
    else {
        start_flow(r, fid);
        if (v1) bound(r, track, row);
    }
}

static void flow_end(Walker *r, int64_t track, uint64_t fid, int64_t row, int unstarted, int v1) {
    if (!r->stacks[track].len) found(r, NO_ENCLOSING_SLICE, row, NULL);
    else if (!started(r, fid)) found(r, unstarted, row, NULL);
    else if (v1) bound(r, track, row);
}

static void flow_v1(Walker *r, int kind, int64_t track, int64_t row) {
    uint64_t fid = v1_flow_id(r, get(r, KEY, row));
    if (kind == FLOW_END_NEXT) {
        Ints *p = &r->pending[track];
        if (push_int(p, (int64_t)fid) < 0 || push_int(p, get(r, ORDINAL, row)) < 0) r->failed = 1;
    } else if (kind == FLOW_START) {
        flow_begin(r, track, fid, row, 1);
    } else {
        flow_end(r, track, fid, row, kind == FLOW_STEP ? STEP_WITHOUT_START : END_WITHOUT_START, 1);
    }
}

static void walk(Walker *r, const int64_t *order, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < n && !r->failed; j++) {
        int64_t row = order[j];
        int kind = (int)get(r, KIND, row);
        int64_t track = get(r, TRACK, row);
        if (kind >= FLOW_START) {
            if (!r->slices_only) flow_v1(r, kind, track, row);
            continue;
        }
        if (kind == END) end_slice(r, track, row);
        else start_slice(r, track, kind == SLICE, row);
        int64_t mode = get(r, V2_MODE, row);
        if (r->slices_only || mode < 0) continue;
        uint64_t fid = (uint64_t)get(r, FID, row);
        if (mode == V2_BEGIN) flow_begin(r, track, fid, row, 0);
        else flow_end(r, track, fid, row, mode == V2_STEP ? STEP_WITHOUT_START : END_WITHOUT_START, 0);
    }
}

/* -- Python ----------------------------------------------------------------------------- */

static const char *CAPSULE = "traceforge._replay.Walker";

static void release(Walker *r) {
    for (Py_ssize_t t = 0; r->stacks && t < r->n_tracks; t++) PyMem_RawFree(r->stacks[t].items);
    for (Py_ssize_t t = 0; r->pending && t < r->n_tracks; t++) PyMem_RawFree(r->pending[t].items);
    PyMem_RawFree(r->stacks);
    PyMem_RawFree(r->pending);
    PyMem_RawFree(r->spilled);
    PyMem_RawFree(r->has_spilled);
    PyMem_RawFree(r->dense_of);
    PyMem_RawFree(r->dense);
    PyMem_RawFree(r->sparse);
    PyMem_RawFree(r->out.items);
    PyMem_RawFree(r);
}

static void walker_free(PyObject *capsule) {
    Walker *r = PyCapsule_GetPointer(capsule, CAPSULE);
    if (r) release(r);
}

static PyObject *walker(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n_tracks, n_keys;
    int slices_only;
    if (!PyArg_ParseTuple(args, "nnp", &n_tracks, &n_keys, &slices_only)) return NULL;
    if (n_tracks < 0 || n_keys < 0 || n_keys > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "walker: counts out of range");
        return NULL;
    }
    Walker *r = PyMem_RawCalloc(1, sizeof(Walker));
    if (!r) return PyErr_NoMemory();
    r->n_tracks = n_tracks;
    r->slices_only = slices_only;
    r->n_dense = (uint64_t)n_keys;
    r->stacks = PyMem_RawCalloc(n_tracks ? n_tracks : 1, sizeof(Stack));
    r->pending = PyMem_RawCalloc(n_tracks ? n_tracks : 1, sizeof(Ints));
    r->spilled = PyMem_RawCalloc(n_tracks ? n_tracks : 1, sizeof(Entry));
    r->has_spilled = PyMem_RawCalloc(n_tracks ? n_tracks : 1, 1);
    r->dense = PyMem_RawCalloc(n_keys ? n_keys : 1, 1);
    r->dense_of = PyMem_RawMalloc((n_keys ? n_keys : 1) * sizeof(int32_t));
    if (!r->stacks || !r->pending || !r->spilled || !r->has_spilled || !r->dense || !r->dense_of) { release(r); return PyErr_NoMemory(); }
    memset(r->dense_of, 0xff, (n_keys ? n_keys : 1) * sizeof(int32_t));  /* -1: not met yet */
    PyObject *capsule = PyCapsule_New(r, CAPSULE, walker_free);
    if (!capsule) release(r);
    return capsule;
}

static PyObject *walk_window(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *order_obj, *objs[N_COLUMNS];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO", &capsule, &order_obj, &objs[KIND], &objs[TS], &objs[DUR],
                          &objs[TRACK], &objs[KEY], &objs[FID], &objs[V2_MODE], &objs[NAME], &objs[CAT],
                          &objs[FLAGS], &objs[ORDINAL]))
        return NULL;
    Walker *r = PyCapsule_GetPointer(capsule, CAPSULE);
    if (!r) return NULL;
    Py_buffer order_view, v[N_COLUMNS];
    if (PyObject_GetBuffer(order_obj, &order_view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    int held = 0;
    PyObject *result = NULL;
    Py_ssize_t rows = -1;
    for (; held < N_COLUMNS; held++) {
        if (PyObject_GetBuffer(objs[held], &v[held], PyBUF_STRIDES) < 0) goto done;
        Py_buffer *c = &v[held];
        if (c->ndim != 1 || c->itemsize != 8 || (rows >= 0 && c->shape[0] != rows)) {
            PyErr_SetString(PyExc_ValueError, "walk: columns must be int64, one value per row");
            held++;
            goto done;
        }
        rows = c->shape[0];
        r->w.at[held] = c->buf;
        r->w.stride[held] = c->strides[0];
    }
    if (order_view.len % 8) { PyErr_SetString(PyExc_ValueError, "walk: order must be int64"); goto done; }
    const int64_t *order = order_view.buf;
    Py_ssize_t n = order_view.len / 8;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t row = order[j];
        if (row < 0 || row >= rows) { PyErr_SetString(PyExc_ValueError, "walk: a row out of range"); goto done; }
        int64_t track = get(r, TRACK, row), key = get(r, KEY, row);
        if (track < 0 || track >= r->n_tracks) {
            PyErr_SetString(PyExc_ValueError, "walk: a track out of range");
            goto done;
        }
        if (get(r, KIND, row) >= FLOW_START && !r->slices_only && (key < 0 || (uint64_t)key >= r->n_dense)) {
            PyErr_SetString(PyExc_ValueError, "walk: a flow key out of range");
            goto done;
        }
    }
    r->out.len = 0;
    Py_BEGIN_ALLOW_THREADS
    walk(r, order, n);
    Py_END_ALLOW_THREADS
    if (r->failed) { PyErr_NoMemory(); goto done; }
    result = PyBytes_FromStringAndSize((const char *)r->out.items, r->out.len * (Py_ssize_t)sizeof(int64_t));
done:
    memset(&r->w, 0, sizeof r->w);
    while (held-- > 0) PyBuffer_Release(&v[held]);
    PyBuffer_Release(&order_view);
    return result;
}

static PyMethodDef methods[] = {
    {"walker", walker, METH_VARARGS,
     "walker(n_tracks, n_keys, slices_only) -> a walker: Perfetto's state, empty, for walk()"},
    {"walk", walk_window, METH_VARARGS,
     "walk(walker, order, kind, ts, dur, track, key, fid, v2_mode, name, cat, flags, ordinal) -> bytes of int64"
     " (rule, ordinal, other ordinal, other's name, flags) records, in the order found. Columns are int64, one"
     " row per event of the window; order: the rows in Perfetto's order"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_replay", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__replay(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const struct { const char *name; long value; } constants[] = {
        {"SLICE", SLICE}, {"SPILL", SPILL}, {"MAX_DEPTH_EXCEEDED", MAX_DEPTH_EXCEEDED},
        {"MISPLACED_END", MISPLACED_END},
        {"NO_ENCLOSING_SLICE", NO_ENCLOSING_SLICE}, {"DUPLICATE_ID", DUPLICATE_ID},
        {"END_WITHOUT_START", END_WITHOUT_START}, {"STEP_WITHOUT_START", STEP_WITHOUT_START},
        {"END_FROM_SLICE_0", END_FROM_SLICE_0}, {"BOUND_UNDER_SPILL", BOUND_UNDER_SPILL},
        {"MAX_DEPTH", MAX_DEPTH}, {"RECORD", RECORD},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) return NULL;
    return m;
}
